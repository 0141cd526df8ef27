"""The ``timeline-picture`` directive: a kernel's interpreter timeline, recorded when the docs are built.

Usage::

    .. timeline-picture::
       :path: ../examples/warp_specialized     (put on sys.path while the code runs)
       :select: program (0, 0, 0)              (draw only the processes whose name contains it)
       :width: 860

       import numpy as np
       import producer_consumer
       ...
       producer_consumer.square_plus_one(x, y, BM=32, STAGES=2, programs=1)

The content runs with ``GLUONKIT_INTERPRET=1`` inside :func:`gluonkit.interpret.trace.recording`,
and :func:`gluonkit.interpret.timeline.render_svg` draws what it recorded, inline.  The page
depends on the Python files under ``:path:``, so editing the example redraws its picture.
An exception in the code, or a run that records nothing, is a build error.

With ``:model: sm_90a`` (or ``sm_100a``) the launches are modelled instead
(:func:`gluonkit.runtime.model.modelling`): each one's simulated SM is drawn on a nanosecond
axis, titled as model output with its predicted time and TFLOP/s.
"""

import glob
import os
import sys

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective


class TimelinePicture(SphinxDirective):
    has_content = True
    option_spec = {
        "path": directives.unchanged,
        "select": directives.unchanged,
        "width": directives.positive_int,
        "title": directives.unchanged,
        "model": directives.unchanged,
    }

    def run(self):
        from gluonkit.interpret.timeline import render_svg
        from gluonkit.interpret.trace import recording

        code = "\n".join(self.content)
        path = None
        if "path" in self.options:
            path = os.path.normpath(os.path.join(os.path.dirname(self.env.doc2path(self.env.docname)),
                                                 self.options["path"]))
            for source in glob.glob(os.path.join(path, "*.py")):
                self.env.note_dependency(source)
        saved = os.environ.get("GLUONKIT_INTERPRET")
        os.environ["GLUONKIT_INTERPRET"] = "1"
        if path:
            sys.path.insert(0, path)
        model = self.options.get("model")
        try:
            if model:
                from gluonkit.runtime.model import modelling
                with modelling(model) as predictions:
                    exec(compile(code, f"<timeline-picture in {self.env.docname}>", "exec"),
                         {"__name__": "__timeline__"})
            else:
                with recording() as trace:
                    exec(compile(code, f"<timeline-picture in {self.env.docname}>", "exec"),
                         {"__name__": "__timeline__"})
        except Exception as e:  # noqa: BLE001 - any failure of the example is a build error
            raise self.error(f"timeline-picture: the code failed: {type(e).__name__}: {e}") from None
        finally:
            if path:
                sys.path.remove(path)
            if saved is None:
                os.environ.pop("GLUONKIT_INTERPRET", None)
            else:
                os.environ["GLUONKIT_INTERPRET"] = saved
        width = self.options.get("width", 860)
        if model:
            if not predictions:
                raise self.error("timeline-picture: the code launched no kernel to model")
            svg = "".join(p.svg(width, self.options.get("title")) for p in predictions)
            return [nodes.raw("", f'<div class="timeline-picture">{svg}</div>', format="html")]
        if not trace.events:
            raise self.error("timeline-picture: the code launched no kernel in the interpreter")
        svg = render_svg(trace, self.options.get("select"), width, self.options.get("title"))
        return [nodes.raw("", f'<div class="timeline-picture">{svg}</div>', format="html")]


def setup(app):
    app.add_directive("timeline-picture", TimelinePicture)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
