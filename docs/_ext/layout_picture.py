"""The ``layout-picture`` directive: a picture of a layout, computed when the docs are built.

Usage::

    .. layout-picture:: BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
       :shape: 32 16
       :max-rows: 16
       :max-cols: 16
       :bitwidth: 16        (shared layouts: show banks)
       :style: warp-lane    (labels W<warp>:L<lane>:R<reg>; default T<thread>:R<reg>)
       :format: text        (a literal block; default html, a coloured table)

The expression is parsed by :func:`gluonkit.layouts.show.parse_layout` (calls of layout
classes with literal arguments only).  A picture whose expression names a layout class
that :mod:`gluonkit.layouts` does not define yet (one of ``PLANNED_CLASSES``) becomes a
visible "picture pending" note instead of a warning, so the pages can describe layouts that are still being
written; every other failure (bad arguments, an invalid layout) is a build error.
"""

import ast

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

# Layout classes that DESIGN.md plans and that may not be written yet: a picture naming
# one of them is "pending" while it is missing.  Any other unknown name is an error.
PLANNED_CLASSES = {
    "BlockedLayout", "SliceLayout", "NVMMADistributedLayout", "DotOperandLayout",
    "NVMMASharedLayout", "SwizzledSharedLayout", "SharedLinearLayout", "PaddedSharedLayout",
    "TensorMemoryLayout", "TensorMemoryScalesLayout",
}


def _shape(argument):
    return [int(x) for x in argument.replace(",", " ").split()]


class LayoutPicture(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True
    option_spec = {
        "shape": _shape,
        "bitwidth": directives.positive_int,
        "style": lambda a: directives.choice(a, ("thread", "warp-lane")),
        "max-rows": directives.nonnegative_int,
        "max-cols": directives.nonnegative_int,
        "format": lambda a: directives.choice(a, ("html", "text")),
    }

    def run(self):
        from gluonkit.layouts.show import layout_classes, parse_layout, render_html, render_text

        expression = " ".join(self.arguments[0].split())
        missing = sorted(_called_names(expression) - set(layout_classes()))
        if missing and set(missing) <= PLANNED_CLASSES:
            logger.info(f"layout-picture: {', '.join(missing)} not in gluonkit.layouts yet; picture pending",
                        location=self.get_location())
            note = nodes.note()
            note += nodes.paragraph(text=f"Picture pending: gluonkit.layouts does not define "
                                         f"{', '.join(missing)} yet ({expression}).")
            return [note]
        options = dict(
            style=self.options.get("style", "thread"),
            bitwidth=self.options.get("bitwidth"),
            max_rows=self.options.get("max-rows"),
            max_cols=self.options.get("max-cols"),
        )
        try:
            layout = parse_layout(expression)
            if self.options.get("format") == "text":
                text = render_text(layout, self.options.get("shape"), **options)
                return [nodes.literal_block(text, text)]
            fragment = render_html(layout, self.options.get("shape"), standalone=False, **options)
        except (ValueError, TypeError) as e:
            raise self.error(f"layout-picture {expression!r}: {e}") from None
        return [nodes.raw("", fragment, format="html")]


def _called_names(expression):
    """Names called in the expression (syntax errors are left to ``parse_layout``)."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return set()
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def setup(app):
    app.add_directive("layout-picture", LayoutPicture)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
