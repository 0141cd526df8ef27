"""``python -m gluonkit compile ...``: the command line (see :mod:`gluonkit.runtime.aot`)."""

import sys

from .runtime.aot import main

sys.exit(main())
