"""``gluonkit.language.fpsan``: Gluon's ``fpsan`` (re-exported from :mod:`gluonkit.lang.fpsan`)."""

from ..lang.fpsan import *  # noqa: F401,F403
from ..lang.fpsan import __all__  # noqa: F401
