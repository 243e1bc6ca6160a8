"""``python -m aiotimely run module:build -w 2 -n 2``: see :mod:`aiotimely.cli`."""

import sys

from .cli import main

sys.exit(main())
