"""Pictures of layouts: who holds each element of a tensor, as text, HTML or SVG.

A picture is computed from nothing but the layout's
:class:`~gluonkit.layouts.linear.LinearLayout` (``to_linear_layout(shape)``): every
hardware index is mapped to its element, and each element lists the indices that map to it.

* Distributed layouts (inputs ``register``, ``lane``, ``warp``, ``block``): a cell reads
  ``T<thread>:R<register>`` with ``thread = lane + 32 * warp`` (``style="thread"``) or
  ``W<warp>:L<lane>:R<register>`` (``style="warp-lane"``); ``C<cta>:`` is prefixed when the
  layout spans several CTAs.
* Shared layouts (input ``offset``): a cell reads the element's offset, and with an element
  ``bitwidth`` also its bank, ``<offset>:b<bank>`` with
  ``bank = (offset * bitwidth // 32) % 32`` (the first 32-bit bank the element touches).
  Layouts with a ``padded_offset(offset)`` method (``PaddedSharedLayout``) show the padded
  offset, which is where the element really is.
* Any other layout (tensor memory: ``row``, ``col``): ``row3:col5``-style cells.

A replicated element (several holders: a zero basis) shows its first holder, the lowest
thread then register (or offset), followed by ``×k`` for ``k`` holders in all; HTML and SVG
list every holder in the cell's tooltip.  Rows are ``dim{N-2}``, columns ``dim{N-1}``; a
1-D tensor is one row and a tensor of rank 3 or more is one table per leading index.

The command line shows a layout given as a Python expression, parsed safely (only calls of
layout classes of :mod:`gluonkit.layouts` with literal arguments)::

    python -m gluonkit.layouts.show "BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])" --shape 32 16

Text output is cropped to the first 32 rows and 16 columns by default (the layout's
summary and bases above the table describe the rest); ``--max-rows 0 --max-cols 0`` shows
everything, and HTML / SVG show everything unless asked otherwise.
"""

from __future__ import annotations

import argparse
import ast
import colorsys
import html
import importlib
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .linear import LinearLayout

DISTRIBUTED_INS = ("register", "lane", "warp", "block")
STYLES = ("thread", "warp-lane")
TEXT_MAX_ROWS, TEXT_MAX_COLS = 32, 16  # the command line's default crop for text output


# ------------------------------------------------------------------ the picture model
class Picture:
    """Who holds each element of a tensor under one layout, with a label and colour per cell.

    ``layout`` is a layout object with ``to_linear_layout(shape)`` (``shape`` may be omitted
    for layouts defined for one shape), or a :class:`LinearLayout` itself.  ``style`` and
    ``bitwidth`` choose the labels (see the module docstring).
    """

    def __init__(self, layout, shape: Optional[Sequence[int]] = None, *, style: str = "thread",
                 bitwidth: Optional[int] = None):
        if style not in STYLES:
            raise ValueError(f"show: style must be one of {list(STYLES)}, got {style!r}")
        if bitwidth is not None and (isinstance(bitwidth, bool) or not isinstance(bitwidth, int) or bitwidth <= 0):
            raise ValueError(f"show: bitwidth must be a positive int (bits per element), got {bitwidth!r}")
        self.layout = layout
        self.ll = _linear_layout_of(layout, shape)
        self.style = style
        self.bitwidth = bitwidth
        self.shape = tuple(self.ll.out_dim_size(o) for o in self.ll.out_dims)
        ins = self.ll.in_dims
        if set(DISTRIBUTED_INS) <= set(ins):
            self.kind = "distributed"
        elif "offset" in ins:
            self.kind = "shared"
        else:
            self.kind = "generic"
        self._group_holders()

    def _group_holders(self) -> None:
        """``self.index[d][k]``: index along input ``d`` of flat hardware index ``k``; the holders
        of element ``e`` (row-major) are ``order[start[e]:start[e] + count[e]]``, lowest first."""
        ll = self.ll
        flat = np.arange(ll.total_in_size(), dtype=np.int64)
        self.index: Dict[str, np.ndarray] = {}
        shift = 0
        for d in ll.in_dims:
            self.index[d] = (flat >> shift) & (ll.in_dim_size(d) - 1)
            shift += ll.in_dim_size_log2(d)
        coords = ll.table()
        element = np.ravel_multi_index(tuple(coords.T), self.shape) if self.shape else np.zeros_like(flat)
        self._order = np.argsort(element, kind="stable")
        self._count = np.bincount(element, minlength=int(np.prod(self.shape, dtype=np.int64)))
        self._start = np.concatenate([[0], np.cumsum(self._count)[:-1]])

    # ----------------------------------------------------------------- per element
    def holders(self, coord: Sequence[int]) -> List[int]:
        """Flat hardware indices (first input dimension minor) holding element ``coord``."""
        e = int(np.ravel_multi_index(tuple(coord), self.shape)) if self.shape else 0
        return [int(k) for k in self._order[self._start[e]:self._start[e] + self._count[e]]]

    def label_of(self, k: int) -> str:
        """The label of one hardware index, e.g. ``T5:R3``, ``W0:L5:R3``, ``37:b18``."""
        i = {d: int(v[k]) for d, v in self.index.items()}
        if self.kind == "distributed":
            cta = f"C{i['block']}:" if self.ll.in_dim_size("block") > 1 else ""
            if self.style == "thread":
                return f"{cta}T{i['lane'] + self.ll.in_dim_size('lane') * i['warp']}:R{i['register']}"
            return f"{cta}W{i['warp']}:L{i['lane']}:R{i['register']}"
        if self.kind == "shared":
            cta = f"C{i['block']}:" if "block" in i and self.ll.in_dim_size("block") > 1 else ""
            offset = self.offset_of(k)
            bank = f":b{self.bank_of(offset)}" if self.bitwidth else ""
            return f"{cta}{offset}{bank}"
        return ":".join(f"{d}{v}" for d, v in i.items())

    def offset_of(self, k: int) -> int:
        """Shared layouts: the (padded, where the layout pads) offset of hardware index ``k``."""
        offset = int(self.index["offset"][k])
        padded = getattr(self.layout, "padded_offset", None)
        return int(padded(offset)) if callable(padded) else offset

    def bank_of(self, offset: int) -> int:
        """The first 32-bit bank of the element at ``offset`` (needs ``bitwidth``)."""
        return (offset * self.bitwidth // 32) % 32

    def cell(self, coord: Sequence[int]) -> str:
        """The cell text: first holder, then ``×k`` when ``k > 1`` hold the element; ``·`` if none."""
        hs = self.holders(coord)
        if not hs:
            return "·"
        return self.label_of(hs[0]) + (f"×{len(hs)}" if len(hs) > 1 else "")

    def tooltip(self, coord: Sequence[int]) -> str:
        """The element's coordinate and every holder (for HTML and SVG tooltips)."""
        hs = self.holders(coord)
        who = ", ".join(self.label_of(k) for k in hs) if hs else "no holder"
        return f"[{', '.join(map(str, coord))}]: {who}"

    def colour(self, coord: Sequence[int]) -> str:
        """A deterministic background colour (``#rrggbb``) for the element's first holder.

        Distributed: one hue per warp (and CTA), lighter for higher lanes.  Shared: one hue
        per bank when ``bitwidth`` is given, else per ``offset % 32``.  Otherwise one hue per
        value of the first input dimension.
        """
        hs = self.holders(coord)
        if not hs:
            return "#ffffff"
        k = hs[0]
        if self.kind == "distributed":
            warps = self.ll.in_dim_size("warp") * self.ll.in_dim_size("block")
            group = int(self.index["warp"][k]) + self.ll.in_dim_size("warp") * int(self.index["block"][k])
            shade = int(self.index["lane"][k]) / max(1, self.ll.in_dim_size("lane") - 1)
            return _hsl(group / warps, 0.55, 0.62 + 0.28 * shade)
        if self.kind == "shared":
            offset = self.offset_of(k)
            key = self.bank_of(offset) if self.bitwidth else offset % 32
            return _hsl(key / 32, 0.5, 0.80)
        first = self.ll.in_dims[0]
        return _hsl(int(self.index[first][k]) / max(1, self.ll.in_dim_size(first)), 0.5, 0.80)

    # ------------------------------------------------------------------ structure
    def title(self) -> str:
        return f"{self.layout!r} on shape {list(self.shape)}"

    def summary(self) -> List[str]:
        """Lines describing the whole layout: who holds how much, and the bases."""
        ll = self.ll
        lines = []
        counts = self._count
        held = counts[counts > 0]
        per = _count(int(held[0]), "holder") if held.size else "no holder"
        unheld = int(np.sum(counts == 0))
        if self.kind == "distributed":
            lanes, warps, ctas = (ll.in_dim_size(d) for d in ("lane", "warp", "block"))
            cta = f" in each of {ctas} CTAs" if ctas > 1 else ""
            lines.append(
                f"{_count(lanes * warps, 'thread')} ({_count(warps, 'warp')} x {_count(lanes, 'lane')}){cta}, "
                f"{_count(ll.in_dim_size('register'), 'register')} each; {per} per element"
            )
        elif self.kind == "shared":
            lines.append(f"{_count(ll.in_dim_size('offset'), 'offset')}; {per} per element")
            if self.bitwidth:
                lines.append(f"{self.bitwidth}-bit elements: bank = (offset * {self.bitwidth} // 32) % 32")
        else:
            lines.append(f"{_count(ll.total_in_size(), 'index', 'indices')}; {per} per element")
        if unheld:
            lines.append(f"{_count(unheld, 'element')} without a holder (shown as ·)")
        bases = {d: vs for d, vs in ll.bases.items() if vs}
        width = max((len(d) for d in bases), default=0)
        for d, vs in bases.items():
            lines.append(f"{d:<{width}} bases: {vs}")
        return lines

    def tables(self) -> List[Tuple[Tuple[int, ...], int, int]]:
        """``(leading index, rows, cols)`` of each 2-D table of the picture."""
        if len(self.shape) == 0:
            return [((), 1, 1)]
        if len(self.shape) == 1:
            return [((), 1, self.shape[0])]
        rows, cols = self.shape[-2:]
        return [(tuple(int(x) for x in lead), rows, cols) for lead in np.ndindex(*self.shape[:-2])]

    def coord(self, lead: Tuple[int, ...], r: int, c: int) -> Tuple[int, ...]:
        """The tensor coordinate of cell (``r``, ``c``) of the table at ``lead``."""
        if len(self.shape) == 0:
            return ()
        if len(self.shape) == 1:
            return (c,)
        return lead + (r, c)


def _linear_layout_of(layout, shape) -> LinearLayout:
    if isinstance(layout, LinearLayout):
        ll = layout
        if shape is not None and list(shape) != [ll.out_dim_size(o) for o in ll.out_dims]:
            raise ValueError(
                f"show: shape {list(shape)} differs from the linear layout's output sizes {ll.out_dim_sizes}"
            )
    elif hasattr(layout, "to_linear_layout"):
        if shape is None and getattr(layout, "shape", None) is None:
            raise ValueError(f"show: {layout!r} needs a shape (e.g. --shape 64 64)")
        ll = layout.to_linear_layout(shape if shape is not None else layout.shape)
    else:
        raise ValueError(f"show: expected a layout (with to_linear_layout) or a LinearLayout, got {layout!r}")
    names = [f"dim{i}" for i in range(len(ll.out_dims))]
    if sorted(ll.out_dims) == sorted(names):
        ll = ll.transpose_outs(names)
    return ll


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _hsl(hue: float, saturation: float, lightness: float) -> str:
    r, g, b = colorsys.hls_to_rgb(hue % 1.0, lightness, saturation)
    return "#{:02x}{:02x}{:02x}".format(round(r * 255), round(g * 255), round(b * 255))


def _crop(n: int, limit: Optional[int]) -> int:
    return n if not limit or limit >= n else limit


def _table_caption(pic: Picture, lead: Tuple[int, ...]) -> str:
    return f"[{', '.join(map(str, lead))}, :, :]" if lead else ""


# ------------------------------------------------------------------------ renderers
def render_text(layout, shape=None, *, style: str = "thread", bitwidth: Optional[int] = None,
                max_rows: Optional[int] = None, max_cols: Optional[int] = None) -> str:
    """The picture as plain text: title, summary, bases, then one table per leading index.

    ``max_rows`` / ``max_cols`` crop each table (``None`` or 0: no crop); a cropped table
    says how much it left out.
    """
    pic = Picture(layout, shape, style=style, bitwidth=bitwidth)
    out = [pic.title()] + ["  " + line for line in pic.summary()]
    for lead, rows, cols in pic.tables():
        nr, nc = _crop(rows, max_rows), _crop(cols, max_cols)
        cells = [[pic.cell(pic.coord(lead, r, c)) for c in range(nc)] for r in range(nr)]
        width = max([len(str(nc - 1))] + [len(x) for row in cells for x in row])
        head = max(len(str(nr - 1)), 1)
        out.append("")
        if lead:
            out.append(_table_caption(pic, lead))
        more_cols = " …" if nc < cols else ""
        out.append(" " * head + " | " + " ".join(f"{c:>{width}}" for c in range(nc)) + more_cols)
        out.append("-" * head + "-+-" + "-" * ((width + 1) * nc - 1) + ("--" if more_cols else ""))
        for r in range(nr):
            out.append(f"{r:>{head}} | " + " ".join(f"{x:<{width}}" for x in cells[r]).rstrip() + more_cols)
        if nr < rows or nc < cols:
            out.append(f"(showing rows 0-{nr - 1} of {rows} and columns 0-{nc - 1} of {cols})")
    return "\n".join(out) + "\n"


_CSS = """\
.gk-layout{overflow-x:auto;max-width:100%}
.gk-layout table{border-collapse:collapse;font:11px/1.3 monospace;margin:0.5em 0}
.gk-layout td,.gk-layout th{border:1px solid #999;padding:1px 4px;white-space:nowrap}
.gk-layout th{background:#eee;font-weight:normal;color:#555}
.gk-layout caption{text-align:left;font:12px monospace}
.gk-layout pre{font-size:11px;margin:0.3em 0}"""


def render_html(layout, shape=None, *, style: str = "thread", bitwidth: Optional[int] = None,
                max_rows: Optional[int] = None, max_cols: Optional[int] = None,
                standalone: bool = True) -> str:
    """The picture as an HTML table per leading index, coloured by warp / thread (or bank).

    ``standalone=False`` returns only the ``<div class="gk-layout">`` fragment (with its own
    ``<style>``) for embedding, as the docs do.  Output is deterministic.
    """
    pic = Picture(layout, shape, style=style, bitwidth=bitwidth)
    esc = html.escape
    parts = [f'<div class="gk-layout">\n<style>\n{_CSS}\n</style>',
             f"<pre>{esc(pic.title())}\n" + "\n".join(esc(line) for line in pic.summary()) + "</pre>"]
    for lead, rows, cols in pic.tables():
        nr, nc = _crop(rows, max_rows), _crop(cols, max_cols)
        parts.append("<table>")
        if lead:
            parts.append(f"<caption>{esc(_table_caption(pic, lead))}</caption>")
        parts.append("<tr><th></th>" + "".join(f"<th>{c}</th>" for c in range(nc))
                     + ("<th>…</th>" if nc < cols else "") + "</tr>")
        for r in range(nr):
            row = [f"<tr><th>{r}</th>"]
            for c in range(nc):
                x = pic.coord(lead, r, c)
                row.append(f'<td style="background:{pic.colour(x)}" title="{esc(pic.tooltip(x))}">'
                           f"{esc(pic.cell(x))}</td>")
            parts.append("".join(row) + ("<td>…</td>" if nc < cols else "") + "</tr>")
        if nr < rows:
            parts.append(f'<tr><th>…</th><td colspan="{nc}">{rows - nr} more rows</td></tr>')
        parts.append("</table>")
    parts.append("</div>")
    fragment = "\n".join(parts) + "\n"
    if not standalone:
        return fragment
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
            f"<title>{esc(pic.title())}</title></head>\n<body>\n{fragment}</body></html>\n")


def render_svg(layout, shape=None, *, style: str = "thread", bitwidth: Optional[int] = None,
               max_rows: Optional[int] = None, max_cols: Optional[int] = None) -> str:
    """The picture as a standalone SVG image (monospace labels, tooltips via ``<title>``)."""
    pic = Picture(layout, shape, style=style, bitwidth=bitwidth)
    esc = html.escape
    char_w, cell_h, pad = 6.6, 16, 6
    lines = [pic.title()] + pic.summary()
    body: List[str] = []
    y = pad
    for line in lines:
        y += 14
        body.append(f'<text x="{pad}" y="{y}" font-size="11">{esc(line)}</text>')
    width = pad + char_w * max(len(line) for line in lines)
    for lead, rows, cols in pic.tables():
        nr, nc = _crop(rows, max_rows), _crop(cols, max_cols)
        cells = [[pic.cell(pic.coord(lead, r, c)) for c in range(nc)] for r in range(nr)]
        cell_w = round(char_w * max([len(str(nc - 1))] + [len(x) for row in cells for x in row]) + 8)
        head_w = round(char_w * len(str(nr - 1)) + 8)
        y += 10
        if lead:
            y += 14
            body.append(f'<text x="{pad}" y="{y}" font-size="12">{esc(_table_caption(pic, lead))}</text>')
        top = y + 4
        for c in range(nc):
            x = pad + head_w + c * cell_w
            body.append(f'<text x="{x + cell_w / 2:g}" y="{top + 12}" font-size="10" fill="#555" '
                        f'text-anchor="middle">{c}</text>')
        for r in range(nr):
            ry = top + (r + 1) * cell_h
            body.append(f'<text x="{pad + head_w - 4}" y="{ry + 12}" font-size="10" fill="#555" '
                        f'text-anchor="end">{r}</text>')
            for c in range(nc):
                coord = pic.coord(lead, r, c)
                x = pad + head_w + c * cell_w
                body.append(
                    f'<g><title>{esc(pic.tooltip(coord))}</title>'
                    f'<rect x="{x}" y="{ry}" width="{cell_w}" height="{cell_h}" fill="{pic.colour(coord)}" '
                    f'stroke="#999" stroke-width="0.5"/>'
                    f'<text x="{x + 4}" y="{ry + 12}" font-size="11">{esc(cells[r][c])}</text></g>'
                )
        y = top + (nr + 1) * cell_h
        width = max(width, pad + head_w + nc * cell_w + pad)
        if nr < rows or nc < cols:
            y += 14
            body.append(f'<text x="{pad}" y="{y}" font-size="11">(showing rows 0-{nr - 1} of {rows} '
                        f'and columns 0-{nc - 1} of {cols})</text>')
    height = y + pad
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{height:g}" '
        f'viewBox="0 0 {width:g} {height:g}" font-family="monospace">\n'
        f'<rect width="100%" height="100%" fill="#ffffff"/>\n' + "\n".join(body) + "\n</svg>\n"
    )


RENDERERS = {"text": render_text, "html": render_html, "svg": render_svg}


# ------------------------------------------------------------------ safe expressions
def layout_classes() -> Dict[str, type]:
    """The classes an expression may call: every class exported by :mod:`gluonkit.layouts`
    that has ``to_linear_layout``, and :class:`LinearLayout` itself (looked up at call time,
    so newly added layout classes are found)."""
    package = importlib.import_module(__package__)
    found = {}
    for name in dir(package):
        obj = getattr(package, name)
        if isinstance(obj, type) and (hasattr(obj, "to_linear_layout") or obj is LinearLayout):
            found[name] = obj
    return found


def parse_layout(expression: str):
    """Build a layout from a Python expression such as ``"BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])"``.

    Only calls of the names in :func:`layout_classes` are evaluated, with arguments that
    are literals (numbers, strings, ``True``/``False``/``None``, lists, tuples, dicts) or
    such calls; anything else (other names, attribute access, ``*args``) is a
    ``ValueError`` naming the offending piece.  Nothing is passed to ``eval``.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"layout expression is not valid Python: {e.msg} in {expression!r}") from None
    return _evaluate(tree.body, layout_classes())


def _evaluate(node: ast.AST, classes: Dict[str, type]):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
        return -node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_evaluate(e, classes) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _refuse(node, "'**' unpacking is not allowed")
        return {_evaluate(k, classes): _evaluate(v, classes) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise _refuse(node.func, "only a layout class name may be called")
        if node.func.id not in classes:
            raise ValueError(
                f"layout expression: {node.func.id!r} is not a layout class of gluonkit.layouts; "
                f"known: {', '.join(sorted(classes))}"
            )
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise _refuse(node, "'*' and '**' arguments are not allowed")
        args = [_evaluate(a, classes) for a in node.args]
        kwargs = {k.arg: _evaluate(k.value, classes) for k in node.keywords}
        return classes[node.func.id](*args, **kwargs)
    raise _refuse(node, "only calls of layout classes with literal arguments are allowed")


def _refuse(node: ast.AST, why: str) -> ValueError:
    return ValueError(f"layout expression: {why}; got {ast.unparse(node)!r} ({type(node).__name__})")


# ----------------------------------------------------------------------- command line
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gluonkit.layouts.show",
        description="Show which thread and register (or shared-memory offset) holds each element of a tensor.",
    )
    parser.add_argument("layout", help='a layout expression, e.g. "BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])"')
    parser.add_argument("--shape", type=int, nargs="+", help="the tensor shape, e.g. --shape 64 64")
    parser.add_argument("--format", choices=sorted(RENDERERS), default="text")
    parser.add_argument("--out", help="write the picture to this file instead of standard output")
    parser.add_argument("--bitwidth", type=int, help="element size in bits: shared layouts then show banks")
    parser.add_argument("--style", choices=STYLES, default="thread",
                        help="thread labels: T<lane+32*warp>:R<reg> (thread) or W<warp>:L<lane>:R<reg>")
    parser.add_argument("--max-rows", type=int, help=f"crop tables to this many rows (0: all; text default {TEXT_MAX_ROWS})")
    parser.add_argument("--max-cols", type=int, help=f"crop tables to this many columns (0: all; text default {TEXT_MAX_COLS})")
    args = parser.parse_args(argv)
    text = args.format == "text"
    max_rows = args.max_rows if args.max_rows is not None else (TEXT_MAX_ROWS if text else 0)
    max_cols = args.max_cols if args.max_cols is not None else (TEXT_MAX_COLS if text else 0)
    try:
        layout = parse_layout(args.layout)
        picture = RENDERERS[args.format](layout, args.shape, style=args.style, bitwidth=args.bitwidth,
                                         max_rows=max_rows, max_cols=max_cols)
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(picture)
    else:
        sys.stdout.write(picture)
    return 0


if __name__ == "__main__":
    sys.exit(main())
