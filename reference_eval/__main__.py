"""``python -m reference_eval {collect,merge,stats}``."""

import sys

from .cli import main

sys.exit(main())
