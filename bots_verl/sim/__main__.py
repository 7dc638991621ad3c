"""``python -m bots_verl.sim``: see :mod:`bots_verl.sim.cli`."""

import sys

from bots_verl.sim.cli import main

sys.exit(main())
