"""scripts/check_gluon_tutorials.py's import rewriting and its table row (the tutorials
themselves live outside the repository; docs/porting.rst has the results)."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("check_gluon_tutorials",
                                               os.path.join(ROOT, "scripts", "check_gluon_tutorials.py"))
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)

SOURCE = """import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
import triton.experimental.gluon as gluon2
import triton.experimental.gluon.language as gl2
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
from triton.experimental.gluon.language.nvidia.blackwell import (
    tma,
    mbarrier,
)
def helper():
    from triton.experimental.gluon.language.nvidia.hopper import tma as t
    s = "triton.experimental.gluon stays in strings and code"
    tma.async_copy_global_to_shared(d, [0, 0], b, s)
"""


def test_only_import_lines_are_rewritten():
    out = harness.rewrite_imports(SOURCE).splitlines()
    assert out[:10] == [
        "import torch", "import triton", "import gluonkit as gluon", "from gluonkit import language as gl",
        "import gluonkit as gluon2", "import gluonkit.language as gl2",
        "from gluonkit.nvidia.hopper import TensorDescriptor",
        "from gluonkit.language.nvidia.blackwell import (", "    tma,", "    mbarrier,"]
    assert out[12] == "    from gluonkit.language.nvidia.hopper import tma as t"
    assert out[13] == '    s = "triton.experimental.gluon stays in strings and code"'
    assert out[14] == "    tma.async_copy_global_to_shared(d, [0, 0], b, s)"  # renames only when asked


def test_renames_39_apply_gluon_39s_replacements(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "06-x.py").write_text(SOURCE)
    dest = tmp_path / "dest"
    dest.mkdir()
    harness.copy_rewritten([src], dest, harness.RENAMES_39)
    assert "    tma.async_load(d, [0, 0], b, s)" in (dest / "06-x.py").read_text().splitlines()


def test_row_counts_outcomes_and_names_the_first_error():
    row = harness._row({"tutorial": "09-x", "import": "ok",
                        "kernels": {"a": {"compiled": 1, "errors": []}, "b": {"compiled": 0, "errors": ["E: bad"]}},
                        "tests": [{"test": "t1", "outcome": "passed", "why": ""},
                                  {"test": "t2", "outcome": "timeout", "why": "slow"}]})
    assert row == "| 09-x | yes | 1/2 | 1 passed, 1 timeout | b: E: bad |"
