"""The ``checker-report`` directive: what gluonkit reports for a kernel, produced when the docs are built.

Usage::

    .. checker-report::
       :path: snippets                  (put on sys.path while the code runs)

       import planted_bugs
       planted_bugs.run_ring("wrong parity")

The content runs with ``GLUONKIT_INTERPRET=1``.  It must raise a gluonkit
:class:`~gluonkit.ir.diagnostics.CompilationError` (a compile error, or a report of the
interpreter's checker); its text becomes a literal block, with the repository's root
stripped from file names.  A run that raises nothing, or raises anything else, is a build
error, so the page cannot show a report that the current code no longer gives.
"""

import contextlib
import glob
import os
import sys

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@contextlib.contextmanager
def _interpreting(path):
    """``GLUONKIT_INTERPRET=1`` and ``path`` on ``sys.path`` for the block, restored afterwards."""
    saved = os.environ.get("GLUONKIT_INTERPRET")
    os.environ["GLUONKIT_INTERPRET"] = "1"
    if path:
        sys.path.insert(0, path)
    try:
        yield
    finally:
        if path:
            sys.path.remove(path)
        if saved is None:
            os.environ.pop("GLUONKIT_INTERPRET", None)
        else:
            os.environ["GLUONKIT_INTERPRET"] = saved


class CheckerReport(SphinxDirective):
    has_content = True
    option_spec = {"path": directives.unchanged}

    def run(self):
        from gluonkit import CompilationError

        path = None
        if "path" in self.options:
            path = os.path.normpath(os.path.join(os.path.dirname(self.env.doc2path(self.env.docname)),
                                                 self.options["path"]))
            for source in glob.glob(os.path.join(path, "*.py")):
                self.env.note_dependency(source)
        code = "\n".join(self.content)
        try:
            with _interpreting(path):
                exec(compile(code, f"<checker-report in {self.env.docname}>", "exec"), {"__name__": "__report__"})
        except CompilationError as e:
            text = f"{type(e).__name__}\n{e}".replace(ROOT + os.sep, "")
            block = nodes.literal_block(text, text)
            block["language"] = "text"
            return [block]
        except Exception as e:  # noqa: BLE001 - anything but a gluonkit error is a build error
            raise self.error(f"checker-report: the code raised {type(e).__name__}, not a gluonkit error: {e}") from None
        raise self.error("checker-report: the code ran without an error, so there is no report to show")


def setup(app):
    app.add_directive("checker-report", CheckerReport)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
