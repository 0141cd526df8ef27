"""``gluonkit.language`` (``gl``): Gluon's ``triton.experimental.gluon.language``.

A thin re-export of :mod:`gluonkit.lang`, where the implementation lives, at the import
path Gluon kernels use, so a kernel ports by rewriting ``triton.experimental.gluon`` to
``gluonkit``.  No logic lives in this tree.
"""

from ..lang import *  # noqa: F401,F403
from ..lang import __all__  # noqa: F401
from . import extra, fpsan, nvidia  # noqa: F401,E402
