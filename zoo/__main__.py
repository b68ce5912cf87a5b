"""``python -m zoo``: the same as the ``zoo`` console script."""

import sys

from zoo.cli import main

sys.exit(main())
