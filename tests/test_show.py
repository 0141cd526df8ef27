"""Pictures of layouts (gluonkit.layouts.show): exact text of small layouts, HTML/SVG, the
safe expression parser and the command line.

Every expected picture below is derived by hand from the layout's bases (the derivation is
in the comment above it), not copied from the renderer's output.
"""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gluonkit.layouts import (
    BlockedLayout,
    DistributedLinearLayout,
    LinearLayout,
    PaddedSharedLayout,
    SharedLinearLayout,
    SliceLayout,
)
from gluonkit.layouts.show import Picture, parse_layout, render_html, render_svg, render_text

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def table_lines(text):
    """The lines from the first table's column header on (the title and bases come before)."""
    lines = text.splitlines()
    return lines[lines.index("") + 1:]


def rule(header):
    """The line under a column header: as long as the header, ``+`` below its ``|``."""
    return "--+" + "-" * (len(header) - 3)


# ------------------------------------------------------------------------ text pictures
def test_1d_replicated_exact_text():
    # Register bit 0 -> element 1, lane bits 0,1 -> elements 2, 4; lane bits 2..4 are zero,
    # so lanes l, l+4, ..., l+28 (8 lanes) hold the same elements: element e is first held
    # by thread e // 2 (lanes 0-3), register e % 2, with 8 holders.
    layout = DistributedLinearLayout([[1]], [[2], [4], [0], [0], [0]], [], [], [8])
    header = "  |       0       1       2       3       4       5       6       7"
    expected = [
        "DistributedLinearLayout(reg_bases=[[1]], lane_bases=[[2], [4], [0], [0], [0]], "
        "warp_bases=[], block_bases=[], shape=[8]) on shape [8]",
        "  32 threads (1 warp x 32 lanes), 2 registers each; 8 holders per element",
        "  register bases: [[1]]",
        "  lane     bases: [[2], [4], [0], [0], [0]]",
        "",
        header,
        rule(header),
        "0 | T0:R0×8 T0:R1×8 T1:R0×8 T1:R1×8 T2:R0×8 T2:R1×8 T3:R0×8 T3:R1×8",
    ]
    assert render_text(layout) == "\n".join(expected) + "\n"


def test_2d_lanes_row_major_exact_table():
    # Lane bits 0..2 step columns 1, 2, 4 and lane bits 3, 4 step rows 1, 2: lane l holds
    # (l // 8, l % 8); one warp, no registers beyond R0.
    layout = DistributedLinearLayout([], [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0]], [], [], [4, 8])
    assert table_lines(render_text(layout)) == [
        "  |      0      1      2      3      4      5      6      7",
        rule("  |      0      1      2      3      4      5      6      7"),
        "0 | T0:R0  T1:R0  T2:R0  T3:R0  T4:R0  T5:R0  T6:R0  T7:R0",
        "1 | T8:R0  T9:R0  T10:R0 T11:R0 T12:R0 T13:R0 T14:R0 T15:R0",
        "2 | T16:R0 T17:R0 T18:R0 T19:R0 T20:R0 T21:R0 T22:R0 T23:R0",
        "3 | T24:R0 T25:R0 T26:R0 T27:R0 T28:R0 T29:R0 T30:R0 T31:R0",
    ]


def test_warp_lane_style_and_crop():
    # Warp basis (4, 0): thread 32 + l is warp 1, lane l and holds row 4 + l // 8.
    layout = DistributedLinearLayout([], [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0]], [[4, 0]], [], [8, 8])
    lines = table_lines(render_text(layout, style="warp-lane", max_rows=5, max_cols=2))
    assert lines == [
        "  |         0         1 …",
        rule("  |         0         1 …"),
        "0 | W0:L0:R0  W0:L1:R0 …",
        "1 | W0:L8:R0  W0:L9:R0 …",
        "2 | W0:L16:R0 W0:L17:R0 …",
        "3 | W0:L24:R0 W0:L25:R0 …",
        "4 | W1:L0:R0  W1:L1:R0 …",
        "(showing rows 0-4 of 8 and columns 0-1 of 8)",
    ]


def test_blocked_layout_picture_matches_readme_bases():
    # README: lanes 0-3 of a row take 4 columns each (size_per_thread [1, 4]); thread t
    # holds row t // 4 (warp w adds 8w rows), columns 4 * (t % 4) + R.
    text = render_text(BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]), [32, 16])
    lines = table_lines(text)
    assert lines[2].split() == ["0", "|"] + [f"T{c // 4}:R{c % 4}" for c in range(16)]
    assert lines[2 + 9].split()[:3] == ["9", "|", "T36:R0"]  # row 9: warp 1, lane 4
    assert "lane     bases: [[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]]" in text


def test_slice_layout_lists_replication():
    # Slicing dim 1 of the blocked layout: element i is held by lanes 4*(i%8) .. 4*(i%8)+3
    # of warp i // 8, so 4 holders, the first thread 4 * i.
    pic = Picture(SliceLayout(1, BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])), [32])
    assert [pic.cell((i,)) for i in (0, 1, 9)] == ["T0:R0×4", "T4:R0×4", "T36:R0×4"]
    assert pic.tooltip((1,)) == "[1]: T4:R0, T5:R0, T6:R0, T7:R0"


def test_shared_offsets_and_banks_exact():
    # Offset bits 0,1 step columns; offset bit 2 -> (1, 1), bit 3 -> (2, 2): offset
    # 4b + a holds (b, a ^ b), so element (r, c) sits at offset 4r + (c ^ r).  32-bit
    # elements: bank = offset % 32 = offset.
    layout = SharedLinearLayout([[0, 1], [0, 2], [1, 1], [2, 2]])
    assert table_lines(render_text(layout, [4, 4], bitwidth=32)) == [
        "  |      0      1      2      3",
        rule("  |      0      1      2      3"),
        "0 | 0:b0   1:b1   2:b2   3:b3",
        "1 | 5:b5   4:b4   7:b7   6:b6",
        "2 | 10:b10 11:b11 8:b8   9:b9",
        "3 | 15:b15 14:b14 13:b13 12:b12",
    ]
    # 16-bit elements: two per bank, bank = offset // 2.
    assert Picture(layout, [4, 4], bitwidth=16).cell((3, 0)) == "15:b7"


def test_padded_shared_shows_padded_offsets():
    # Row-major 2x8 with one element of padding after every 4: logical offset o is stored
    # at o + o // 4, so row 0 is 0-3, 5-8 and row 1 is 10-13, 15-18.
    layout = PaddedSharedLayout.with_identity_for([[4, 1]], [2, 8], [1, 0])
    pic = Picture(layout)
    assert [[pic.cell((r, c)) for c in range(8)] for r in range(2)] == [
        ["0", "1", "2", "3", "5", "6", "7", "8"],
        ["10", "11", "12", "13", "15", "16", "17", "18"],
    ]


def test_rank3_one_table_per_leading_index():
    # dim0 is the warp: warp w holds the whole [w, :, :] slice, lane l at (l // 8, l % 8).
    layout = DistributedLinearLayout([], [[0, 0, 1], [0, 0, 2], [0, 0, 4], [0, 1, 0], [0, 2, 0]],
                                     [[1, 0, 0]], [], [2, 4, 8])
    lines = render_text(layout).splitlines()
    assert "[0, :, :]" in lines and "[1, :, :]" in lines
    second = lines[lines.index("[1, :, :]"):]
    assert second[3].split()[:4] == ["0", "|", "T32:R0", "T33:R0"]


def test_generic_layout_labels_inputs():
    # A tensor-memory-like layout: row bits -> dim0, col bits -> dim1.
    ll = LinearLayout({"row": [[1, 0]], "col": [[0, 1]]}, {"dim0": 2, "dim1": 2})
    assert Picture(ll).cell((1, 0)) == "row1:col0"


def test_unheld_elements_are_marked():
    # Two lanes bits reach columns 1, 2 only; column 3 = 1 ^ 2 is reached too, but the
    # output is 2x4 and nothing reaches row 1.
    ll = LinearLayout({"register": [], "lane": [[0, 1], [0, 2], [0, 0], [0, 0], [0, 0]],
                       "warp": [], "block": []}, {"dim0": 2, "dim1": 4})
    pic = Picture(ll)
    assert pic.cell((1, 0)) == "·" and pic.cell((0, 3)) == "T3:R0×8"
    assert "4 elements without a holder (shown as ·)" in render_text(ll)


@given(st.data())
def test_holders_are_exactly_the_preimages(data):
    # Random 2-D distributed layouts: every hardware index is listed once, under the
    # element it maps to.
    vec = st.lists(st.integers(0, 3), min_size=2, max_size=2)
    layout = LinearLayout(
        {
            "register": data.draw(st.lists(vec, max_size=2)),
            "lane": data.draw(st.lists(vec, min_size=5, max_size=5)),
            "warp": data.draw(st.lists(vec, max_size=2)),
            "block": [],
        },
        {"dim0": 4, "dim1": 4},
    )
    pic = Picture(layout)
    seen = []
    for r in range(4):
        for c in range(4):
            for k in pic.holders((r, c)):
                ins = {d: int(pic.index[d][k]) for d in layout.in_dims}
                assert layout.apply(ins) == {"dim0": r, "dim1": c}
                seen.append(k)
    assert sorted(seen) == list(range(layout.total_in_size()))


# ------------------------------------------------------------------------ html and svg
def test_html_is_deterministic_and_lists_all_holders():
    layout = SliceLayout(1, BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]))
    page = render_html(layout, [32])
    assert page == render_html(layout, [32])
    assert page.startswith("<!DOCTYPE html>")
    assert 'title="[1]: T4:R0, T5:R0, T6:R0, T7:R0">T4:R0×4</td>' in page
    fragment = render_html(layout, [32], standalone=False)
    assert fragment.startswith('<div class="gk-layout">') and "<html" not in fragment


def test_html_colours_follow_warps():
    layout = DistributedLinearLayout([], [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0]], [[4, 0]], [], [8, 8])
    pic = Picture(layout)
    # Warp 0 and warp 1 (rows 0 and 4 of column 0) get different hues; colours are stable.
    assert pic.colour((0, 0)) != pic.colour((4, 0))
    assert pic.colour((0, 0)) == Picture(layout).colour((0, 0))


def test_svg_is_wellformed_and_has_one_rect_per_cell():
    layout = DistributedLinearLayout([], [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0]], [], [], [4, 8])
    svg = render_svg(layout)
    assert svg == render_svg(layout)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    cells = root.findall(f"{ns}g")
    assert len(cells) == 32
    assert cells[9].find(f"{ns}title").text == "[1, 1]: T9:R0"
    assert cells[9].find(f"{ns}text").text == "T9:R0"


# ------------------------------------------------------------------------ safe parsing
def test_parser_builds_nested_layouts():
    got = parse_layout("SliceLayout(dim=1, parent=BlockedLayout([1, 4], [8, 4], [4, 1], order=[1, 0]))")
    assert got == SliceLayout(1, BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]))


@pytest.mark.parametrize(
    "expression, message",
    [
        ("__import__('os')", "'__import__' is not a layout class"),
        ("__import__('os').system('true')", "only a layout class name may be called"),
        ("gluonkit.layouts.BlockedLayout([1], [32], [4], [0])", "only a layout class name may be called"),
        ("BlockedLayout.__init__", "only calls of layout classes with literal arguments"),
        ("print('hi')", "'print' is not a layout class"),
        ("x", "only calls of layout classes with literal arguments"),
        ("BlockedLayout(*[[1], [32], [4], [0]])", "'*' and '**' arguments are not allowed"),
        ("BlockedLayout([1], [32], [4], order=[len('a')])", "'len' is not a layout class"),
        ("BlockedLayout([1], [32], [4], [0]) + 1", "only calls of layout classes"),
        ("BlockedLayout(", "not valid Python"),
    ],
)
def test_parser_refuses_everything_else(expression, message):
    with pytest.raises(ValueError, match="layout expression") as info:
        parse_layout(expression)
    assert message in str(info.value)


# ------------------------------------------------------------------------ command line
def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "gluonkit.layouts.show", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_cli_main_job_prints_the_wgmma_accumulator():
    # PTX ISA, wgmma .m64nNk16 accumulator fragment: lane l of warp 0 holds row l // 4
    # (+8 for d[2], d[3]) and columns 2 * (l % 4) + {0, 1}, then the next 8 columns in
    # d[4..7]: row 0 reads T0:R0 T0:R1 T1:R0 T1:R1 ... T3:R1 T0:R4.
    proc = run_cli("NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])",
                   "--shape", "64", "64")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = table_lines(proc.stdout)
    assert lines[2].split()[:11] == ["0", "|", "T0:R0", "T0:R1", "T1:R0", "T1:R1", "T2:R0", "T2:R1",
                                     "T3:R0", "T3:R1", "T0:R4"]
    assert lines[2 + 8].split()[2] == "T0:R2" and lines[2 + 16].split()[2] == "T32:R0"
    assert lines[-1] == "(showing rows 0-31 of 64 and columns 0-15 of 64)"


def test_cli_writes_svg_and_html(tmp_path):
    expression = "BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])"
    for fmt in ("svg", "html"):
        out = tmp_path / f"picture.{fmt}"
        proc = run_cli(expression, "--shape", "32", "16", "--format", fmt, "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        assert out.read_text(encoding="utf-8") == (
            render_svg if fmt == "svg" else render_html
        )(BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0]), [32, 16])


def test_cli_reports_bad_expressions():
    proc = run_cli("__import__('os').system('echo pwned')", "--shape", "4")
    assert proc.returncode == 2
    assert "pwned" not in proc.stdout
    assert proc.stderr.startswith("error: layout expression:")
