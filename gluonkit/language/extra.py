"""``gluonkit.language.extra``: Gluon's ``extra`` (re-exported from :mod:`gluonkit.lang.extra`)."""

from ..lang.extra import *  # noqa: F401,F403
from ..lang.extra import __all__  # noqa: F401
