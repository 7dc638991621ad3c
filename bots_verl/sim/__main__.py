"""``python -m bots_verl.sim``: see :mod:`bots_verl.sim.sim_cli`."""

import sys

from bots_verl.sim.sim_cli import main

sys.exit(main())
