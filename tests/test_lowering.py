"""Lowering to PTX without a GPU: every test and example kernel lowers, and ptxas accepts
its PTX for sm_90a and sm_100a; the PTX has the instructions the layouts call for.

``kernel.compile(...)`` is the entry point (type strings as arguments, ``:16`` marks
divisibility by 16).  Tests that need ptxas skip when none is found.
"""

import os
import re
import sys

import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.runtime.inspect_compile import parse_type_string

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
sys.path.insert(0, os.path.dirname(__file__))

import cross_entropy  # noqa: E402
import fused_softmax  # noqa: E402
import test_gpu_kernels as gpu_kernels  # noqa: E402
import test_launch as launch_kernels  # noqa: E402
import transpose  # noqa: E402
import vector_add  # noqa: E402
from kernel_checks import needs_ptxas


P32 = "*fp32:16"
BLOCKED_2D = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])

# (id, kernel, runtime argument types, constexprs, num_warps)
KERNELS = [
    ("vector_add", vector_add.add_kernel, [P32, P32, P32, "i32:16"],
     dict(BLOCK=4096, layout=vector_add.vector_add_layout(4)), 4),
    ("softmax_f32", fused_softmax.softmax_kernel, [P32, P32, "i32", "i32", "i32:16", "i32:16"],
     dict(zip(("ROWS", "layout"), fused_softmax.softmax_config(1024, 4)[:2]), BLOCK=1024), 4),
    ("softmax_bf16", fused_softmax.softmax_kernel, ["*bf16:16", "*bf16:16", "i32", "i32:16", "i32:16", "i32:16"],
     dict(zip(("ROWS", "layout"), fused_softmax.softmax_config(16384, 2)[:2]), BLOCK=16384), 16),
    ("softmax_short_rows", fused_softmax.softmax_kernel, [P32, P32, "i32", "i32:16", "i32:16", "i32:16"],
     dict(zip(("ROWS", "layout"), fused_softmax.softmax_config(256, 4)[:2]), BLOCK=256), 4),
    ("transpose", transpose.transpose_kernel, [P32, P32, "i32:16", "i32:16"],
     dict(BM=64, BN=64, load_layout=transpose.layouts(4)[0], store_layout=transpose.layouts(4)[1]), 4),
    ("cross_entropy", cross_entropy.cross_entropy_kernel, [P32, "*i32:16", P32, P32, "i32", "i32", "fp32"],
     dict(BLOCK=4096, layout=gl.BlockedLayout([4], [32], [8], [0])), 8),
    ("launch_add", launch_kernels.add_kernel, [P32, P32, P32, "i32"], dict(BLOCK=256), 4),
    ("launch_softmax", launch_kernels.softmax_kernel, [P32, P32, "i32", "i32", "i32"],
     dict(ROWS=4, BLOCK=256, layout=gl.BlockedLayout([1, 4], [2, 16], [2, 2], [1, 0])), 4),
    ("row_loop", launch_kernels.row_sum_loop_kernel, [P32, P32, "i32", "i32"], dict(BLOCK=256), 2),
    ("convert", gpu_kernels.convert_kernel, [P32, P32],
     dict(M=32, N=64, src=BLOCKED_2D, dst=gl.BlockedLayout([4, 1], [4, 8], [1, 4], [0, 1])), 4),
    ("carried_bf16", gpu_kernels.carried_halves_kernel, ["*bf16:16", "*bf16:16", "i32"], dict(BLOCK=512), 4),
    ("reduce_axis0", gpu_kernels.reduce_kernel, [P32, P32, P32], dict(M=64, N=32, AXIS=0, layout=BLOCKED_2D), 4),
    ("reduce_axis1", gpu_kernels.reduce_kernel, [P32, P32, P32], dict(M=64, N=32, AXIS=1, layout=BLOCKED_2D), 4),
]


def _compile(case, target="sm_90a"):
    _, kernel, types, constexprs, num_warps = case
    return kernel.compile(*types, target=target, num_warps=num_warps, **constexprs)


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("case", KERNELS, ids=[c[0] for c in KERNELS])
def test_every_kernel_lowers_and_ptxas_accepts_it(case, target):
    compiled = _compile(case, target)
    assert f".target {target}" in compiled.asm["ptx"]
    assert compiled.asm["cubin"][:4] == b"\x7fELF"
    assert compiled.metadata["spill_stores"] == 0 and compiled.metadata["registers"] > 0


def _ptx(kernel, *types, **kw):
    return kernel.compile(*types, **kw).asm["ptx"]


def test_global_accesses_vectorize_only_when_alignment_is_known():
    layout = vector_add.vector_add_layout(4)
    aligned = _ptx(vector_add.add_kernel, P32, P32, P32, "i32:16", BLOCK=1024, layout=layout)
    assert set(re.findall(r"ld\.global[\w.]*", aligned)) == {"ld.global.v4.b32"}
    assert set(re.findall(r"st\.global[\w.]*", aligned)) == {"st.global.v4.b32"}
    # n not known divisible by 16: the mask may change inside a vector, so accesses are scalar.
    ragged = _ptx(vector_add.add_kernel, P32, P32, P32, "i32", BLOCK=1024, layout=layout)
    assert set(re.findall(r"ld\.global[\w.]*", ragged)) == {"ld.global.b32"}
    # Masked loads are predicated.
    assert re.search(r"@%p\d+ ld\.global", ragged)


def test_transpose_converts_through_vectorized_shared_memory():
    # With 4 lanes along the rows the planner finds a conflict-free scratch layout that
    # both sides access with 16-byte vectors.
    load, store = transpose.layouts(4, lanes_along_rows=4)
    ptx = _ptx(transpose.transpose_kernel, P32, P32, "i32:16", "i32:16", BM=64, BN=64, load_layout=load,
               store_layout=store)
    assert "st.shared.v4.b32" in ptx and "ld.shared.v4.b32" in ptx
    # The conversion is the first use of scratch memory in straight-line code: one barrier.
    assert ptx.count("bar.sync") == 1


def test_reductions_shuffle_across_lanes():
    ptx = _compile(KERNELS[-1]).asm["ptx"]
    assert "shfl.sync.bfly.b32" in ptx


def test_ptx_lines_point_at_the_users_python_source():
    ptx = _ptx(vector_add.add_kernel, P32, P32, P32, "i32:16", BLOCK=1024, layout=vector_add.vector_add_layout(4))
    files = dict(re.findall(r'\.file\s+(\d+)\s+"([^"]+)"', ptx))
    assert any(path.endswith("vector_add.py") for path in files.values())
    source = open(vector_add.__file__).read().splitlines()
    store_line = next(i + 1 for i, text in enumerate(source) if "gl.store(out_ptr" in text)
    assert re.search(rf"\.loc\s+\d+\s+{store_line}\s", ptx)


@needs_ptxas
def test_device_print_lowers_to_vprintf():
    @gluonkit.jit
    def show(x_ptr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [1], [0])
        gl.device_print("x:", gl.load(x_ptr + gl.arange(0, 32, layout)))
        gl.device_print("pid:", gl.program_id(0), hex=True)

    for target in ("sm_90a", "sm_100a"):
        compiled = show.compile("*fp16", target=target, num_warps=1)
        assert "vprintf" in compiled.asm["ptx"] and "cubin" in compiled.asm


def test_compile_checks_its_arguments():
    with pytest.raises(CompilationError, match="expected 4 runtime arguments"):
        vector_add.add_kernel.compile(P32, BLOCK=1024, layout=vector_add.vector_add_layout(4))
    with pytest.raises(CompilationError, match="unknown type 'fp33'"):
        vector_add.add_kernel.compile("*fp33", P32, P32, "i32", BLOCK=1024, layout=vector_add.vector_add_layout(4))


def test_type_strings():
    from gluonkit import ir

    assert parse_type_string("*bf16:16") == (ir.PointerType(ir.bfloat16), True)
    assert parse_type_string("i64") == (ir.int64, False)
    with pytest.raises(ValueError, match="':16'"):
        parse_type_string("i32:8")


@needs_ptxas
def test_the_disk_cache_serves_the_second_compile_and_dumps_it(tmp_path, monkeypatch):
    from gluonkit import ir
    from gluonkit.runtime import gpu

    monkeypatch.setenv("GLUONKIT_CACHE_DIR", str(tmp_path / "cache"))
    func = vector_add.add_kernel.build_ir([ir.PointerType(ir.float32)] * 3 + [ir.int32],
                                          dict(BLOCK=1024, layout=vector_add.vector_add_layout(4)), 4, {})
    first = gpu.compile_for_device(func, "sm_90a")

    def no_compiling(*args, **kwargs):
        raise AssertionError("compiled again instead of reading the disk cache")

    monkeypatch.setattr(gpu, "compile_function", no_compiling)
    monkeypatch.setenv("GLUONKIT_DUMP_DIR", str(tmp_path / "dump"))
    second = gpu.compile_for_device(func, "sm_90a")
    assert second.asm["ptx"] == first.asm["ptx"] and second.asm["cubin"] == first.asm["cubin"]
    assert second.metadata["registers"] == first.metadata["registers"]
    assert (tmp_path / "dump" / "add_kernel.ptx").read_text() == first.asm["ptx"]


def test_two_dimensional_masks_keep_vector_accesses():
    @gluonkit.jit
    def copy_rows(src, dst, n_rows, n_cols, ROWS: gl.constexpr, BLOCK: gl.constexpr, layout: gl.constexpr):
        rows = gl.program_id(0) * ROWS + gl.arange(0, ROWS, layout=gl.SliceLayout(1, layout))
        cols = gl.arange(0, BLOCK, layout=gl.SliceLayout(0, layout))
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        offs = rows[:, None] * n_cols + cols[None, :]
        gl.store(dst + offs, gl.load(src + offs, mask=mask), mask=mask)

    layout = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
    ptx = _ptx(copy_rows, P32, P32, "i32", "i32:16", ROWS=16, BLOCK=32, layout=layout)
    assert set(re.findall(r"ld\.global[\w.]*", ptx)) == {"ld.global.v4.b32"}

