"""Porting a Gluon 3.9 kernel: the renamed TMA copies, the not-yet-supported stubs and the
small Gluon 3.9 names gluonkit implements (allocate_mbarrier, gl.barrier, gl.add …).

A kernel here is written exactly as for Gluon 3.9, with ``triton.experimental.gluon``
replaced by ``gluonkit``; results are compared with numpy float64 on random inputs.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import os
import re

import numpy as np
import pytest

import gluonkit
from gluonkit import CompilationError, ir
from gluonkit import language as gl
from gluonkit.lang.unsupported import UnsupportedFeatureError, is_unsupported
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor, TensorDescriptorIm2Col
from interpreting import interpreter_on
from kernel_checks import needs_ptxas

REG = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])
BLOCK = [32, 64]

with open(os.path.join(os.path.dirname(__file__), "data", "gluon39_names.json")) as _f:
    GLUON = json.load(_f)["modules"]


def _nvmma(block=BLOCK):
    return gl.NVMMASharedLayout.get_default_for(block, gl.float32)


def _desc(array):
    return TensorDescriptor.from_tensor(array, BLOCK, _nvmma())


# ----------------------------------------------------------------------------- kernels
@gluonkit.jit
def publish_kernel(in_desc, out_desc, out_ptr, seen_ptr, layout: gl.constexpr, READ_ONLY: gl.constexpr):
    """out = (in + 1) * 2 through shared memory with TMA, then read ``out`` back with plain loads."""
    BM: gl.constexpr = in_desc.block_shape[0]
    BN: gl.constexpr = in_desc.block_shape[1]
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bar = mbarrier.allocate_mbarrier()
    mbarrier.init(bar, count=1)
    fence_async_shared()
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    tma.async_load(in_desc, [0, 0], bar, smem)
    mbarrier.wait(bar, 0)
    x = smem.load(layout)
    rows = gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
    offsets = rows[:, None] * BN + cols[None, :]
    smem.store(gl.mul(gl.add(x, 1.0), 2.0))
    fence_async_shared()
    tma.async_store(out_desc, [0, 0], smem)
    tma.store_wait(0, read_only=READ_ONLY)
    gl.store(seen_ptr + offsets, gl.load(out_ptr + offsets))
    mbarrier.invalidate(bar)


@gluonkit.jit
def batch_kernel(x_ptr, y_ptr, z_ptr, out_ptr, layout: gl.constexpr):
    """Gluon 3.9's function spellings and CTA barrier: out = (x - y) * z + x, via a batch of barriers."""
    bars = mbarrier.allocate_mbarrier(batch=2)
    for i in gl.static_range(2):
        mbarrier.init(bars.index(i), count=1)
    offs = gl.arange(0, 128, layout=layout)
    x = gl.load(x_ptr + offs)
    a, b = gl.broadcast(gl.sub(x, gl.load(y_ptr + offs)), gl.to_tensor(3))
    gl.barrier()
    gl.store(out_ptr + offs, gl.add(gl.mul(a, gl.load(z_ptr + offs)), x) + b - 3)
    for i in gl.static_range(2):
        mbarrier.invalidate(bars.index(i))


@gluonkit.jit
def math_kernel(a_ptr, b_ptr, x_ptr, hi_ptr, clamped_ptr, flat_ptr, layout: gl.constexpr, flat: gl.constexpr):
    """gl.umulhi on int32, gl.clamp on float32, gl.ravel of a [16, 8] tile."""
    offs = gl.arange(0, 128, layout=layout)
    gl.store(hi_ptr + offs, gl.umulhi(gl.load(a_ptr + offs), gl.load(b_ptr + offs)))
    gl.store(clamped_ptr + offs, gl.clamp(gl.load(x_ptr + offs), -0.5, 0.75))
    rows = gl.arange(0, 16, layout=gl.SliceLayout(1, gl.BlockedLayout([1, 1], [4, 8], [4, 1], [1, 0])))
    cols = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.BlockedLayout([1, 1], [4, 8], [4, 1], [1, 0])))
    tile = gl.load(x_ptr + rows[:, None] * 8 + cols[None, :])
    gl.store(flat_ptr + offs, gl.convert_layout(gl.ravel(tile), flat))


# ------------------------------------------------------------------ TMA: async_load/async_store
def _publish(read_only, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(BLOCK).astype(np.float32)
    old = rng.standard_normal(BLOCK).astype(np.float32)
    out, seen = old.copy(), np.full(BLOCK, np.nan, np.float32)
    with interpreter_on(seed):
        publish_kernel[(1,)](_desc(x), _desc(out), out, seen, layout=REG, READ_ONLY=read_only)
    expected = (x.astype(np.float64) + 1) * 2
    np.testing.assert_allclose(out, expected, rtol=1e-6)  # every write lands by the kernel's end
    return seen, old, expected


def test_store_wait_with_read_only_false_makes_the_writes_visible():
    for seed in range(8):
        seen, _, expected = _publish(False, seed)
        np.testing.assert_allclose(seen, expected, rtol=1e-6)


def test_store_wait_read_only_does_not_wait_for_the_global_writes():
    """The default read-only wait frees the buffer; in some schedules a read of the
    destination right after it still sees the old values, as on the hardware."""
    stale = fresh = 0
    for seed in range(24):
        seen, old, expected = _publish(True, seed)
        if np.array_equal(seen, old):
            stale += 1
        else:
            np.testing.assert_allclose(seen, expected, rtol=1e-6)
            fresh += 1
    assert stale > 0 and fresh > 0


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("read_only, instruction", [(True, "cp.async.bulk.wait_group.read 0;"),
                                                    (False, "cp.async.bulk.wait_group 0;")])
def test_store_wait_lowers_to_the_read_or_the_full_wait(target, read_only, instruction):
    ty = ir.TensorDescType(tuple(BLOCK), ir.float32, _nvmma())
    c = publish_kernel.compile(ty, ty, "*fp32:16", "*fp32:16", layout=REG, READ_ONLY=read_only, target=target)
    ptx = c.asm["ptx"]
    assert instruction in ptx and "cubin" in c.asm
    assert ptx.count("cp.async.bulk.wait_group") == 1
    assert "mbarrier.init.shared" in ptx or "mbarrier.init" in ptx


def test_the_verifier_requires_store_waits_read_only_flag():
    from ir_helpers import KernelBuilder

    for attrs, ok in (({"pendings": 0, "read_only": False}, True), ({"pendings": 0}, False),
                      ({"pendings": 0, "read_only": 1}, False)):
        k = KernelBuilder(args=[])
        k.op("async_tma_store_wait", [], attrs=attrs)
        if ok:
            ir.verify(k.finish())
        else:
            with pytest.raises(CompilationError, match="read_only must be a bool"):
                ir.verify(k.finish())


# ------------------------------------------------------------------- the other real names
def test_gluon_39_function_spellings_compute_like_the_operators():
    rng = np.random.default_rng(3)
    x, y, z = (rng.standard_normal(128).astype(np.float32) for _ in range(3))
    out = np.zeros(128, np.float32)
    with interpreter_on():
        batch_kernel[(1,)](x, y, z, out, layout=gl.BlockedLayout([1], [32], [4], [0]))
    expected = (x.astype(np.float64) - y) * z + x
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def _math():
    rng = np.random.default_rng(5)
    a = rng.integers(-2**31, 2**31, 128, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, 128, dtype=np.int64).astype(np.int32)
    x = rng.standard_normal(128).astype(np.float32)
    return a, b, x


LAYOUT_1D = gl.BlockedLayout([1], [32], [4], [0])


def test_umulhi_clamp_and_ravel_match_numpy():
    a, b, x = _math()
    hi, clamped, flat = np.zeros(128, np.int32), np.zeros(128, np.float32), np.zeros(128, np.float32)
    with interpreter_on():
        math_kernel[(1,)](a, b, x, hi, clamped, flat, layout=LAYOUT_1D, flat=LAYOUT_1D)
    unsigned = (a.view(np.uint32).astype(object) * b.view(np.uint32).astype(object)) >> 32  # Triton's mulhiui
    np.testing.assert_array_equal(hi.view(np.uint32), np.array(unsigned, dtype=np.uint64).astype(np.uint32))
    np.testing.assert_array_equal(clamped, np.clip(x.astype(np.float64), -0.5, 0.75).astype(np.float32))
    np.testing.assert_array_equal(flat, x)


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_umulhi_lowers_to_an_unsigned_wide_multiply(target):
    c = math_kernel.compile("*i32:16", "*i32:16", "*fp32:16", "*i32:16", "*fp32:16", "*fp32:16", layout=LAYOUT_1D,
                            flat=LAYOUT_1D, target=target)
    llir = c.asm["llir"]
    assert "zext i32" in llir and "sext i32" not in llir and "cubin" in c.asm


def test_allocate_mbarrier_allocates_int64_barriers_in_the_mbarrier_layout():
    func = batch_kernel.build_ir([gl.pointer_type(gl.float32)] * 4, {"layout": gl.BlockedLayout([1], [32], [4], [0])})
    allocs = [op for op in func.walk() if op.name == "local_alloc"]
    assert [op.result.type.shape for op in allocs] == [(2, 1)]
    assert allocs[0].result.type.element == ir.int64
    assert isinstance(allocs[0].result.type.layout, mbarrier.MBarrierLayout)
    assert any(op.name == "thread_barrier" for op in func.walk())


def test_mbarrier_layout_multicta_is_the_per_cta_or_the_pair_layout():
    assert mbarrier.MBarrierLayout.multicta(1) == mbarrier.MBarrierLayout()
    assert mbarrier.MBarrierLayout.multicta(4) == mbarrier.MBarrierLayout(cga_layout=[[1], [2]])
    assert mbarrier.MBarrierLayout.multicta(4) == mbarrier.MBarrierLayout()  # each CTA holds its own
    pair = mbarrier.MBarrierLayout.multicta(2, two_cta=True)
    assert pair.two_ctas and pair != mbarrier.MBarrierLayout() and pair == mbarrier.MBarrierLayout([[0]])
    with pytest.raises(ValueError, match="power of two"):
        mbarrier.MBarrierLayout.multicta(3)
    with pytest.raises(ValueError, match="two_cta needs num_ctas >= 2"):
        mbarrier.MBarrierLayout.multicta(1, two_cta=True)
    with pytest.raises(ValueError, match="allocate_mbarrier"):
        mbarrier.MBarrierLayout(cga_layout=[[2]])


def test_host_descriptor_has_gluons_mode_and_repr():
    x = np.random.default_rng(0).standard_normal(BLOCK).astype(np.float32)
    d = TensorDescriptor(x, x.shape, [BLOCK[1], 1], BLOCK, _nvmma())
    assert d.mode == "tiled" and d.padding == "zero" and d.round_f32_to_tf32 is False
    assert repr(d).startswith(f"TensorDescriptor(base={x!r}, shape={tuple(BLOCK)}, strides=(64, 1), "
                              f"block_shape={tuple(BLOCK)}, layout=")
    x4 = np.zeros((1, 8, 8, BLOCK[1]), np.float32)
    d = TensorDescriptorIm2Col.from_tensor(x4, BLOCK, _nvmma(), pixel_box_lower_corner=[0, 0],
                                           pixel_box_upper_corner=[0, 0])
    assert d.mode == "im2col" and d.element_strides is None and d.pixel_box_lower_corner == (0, 0)
    assert repr(d).startswith(f"TensorDescriptorIm2Col(base={x4!r}, shape=(1, 8, 8, {BLOCK[1]}), ")


# -------------------------------------------------- a Gluon 3.9 kernel, ported by its imports
def _port(tmp_path):
    """tests/data/gluon39_kernels.py with its imports rewritten, and nothing else."""
    with open(os.path.join(os.path.dirname(__file__), "data", "gluon39_kernels.py")) as f:
        source = f.read()
    ported = source.replace("from triton.experimental import gluon", "import gluonkit as gluon")
    ported = ported.replace("triton.experimental.gluon", "gluonkit")
    assert "triton" not in ported.replace("Triton", "")
    path = tmp_path / "ported_gluon39_kernels.py"
    path.write_text(ported)
    spec = importlib.util.spec_from_file_location("ported_gluon39_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_gluon_39_kernel_ports_by_rewriting_its_imports(tmp_path):
    kernels = _port(tmp_path)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((128, 192)).astype(np.float32)
    scale = rng.standard_normal(128).astype(np.float32)
    out = np.full_like(x, np.nan)
    block = [64, 64]
    layout = gl.NVMMASharedLayout.get_default_for(block, gl.float32)
    with interpreter_on():
        kernels.scale_rows_kernel[(2, 3)](TensorDescriptor.from_tensor(x, block, layout),
                                          TensorDescriptor.from_tensor(out, block, layout), scale, REG)
    np.testing.assert_allclose(out, x.astype(np.float64) * scale[:, None], rtol=1e-6)


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_ported_kernel_assembles_with_the_waits_triton_emits(tmp_path, target):
    """Triton 3.9 emits ``cp.async.bulk.wait_group 0`` for this kernel's ``store_wait(0, read_only=False)``
    (scripts/check_gluon39_kernels.py)."""
    kernels = _port(tmp_path)
    ty = ir.TensorDescType((64, 64), ir.float32, gl.NVMMASharedLayout.get_default_for([64, 64], gl.float32))
    c = kernels.scale_rows_kernel.compile(ty, ty, "*fp32:16", layout=REG, target=target)
    assert "cp.async.bulk.wait_group 0;" in c.asm["ptx"] and "cubin" in c.asm


# ------------------------------------------------------------------ errors at the user's line
_counter = itertools.count()


def _build(tmp_path, body, arg_types=()):
    """Build a kernel whose line 7 is ``body``; returns the error it raises."""
    name = f"porting_case_{next(_counter)}"
    source = ("import gluonkit\nimport gluonkit.language as gl\n"
              "from gluonkit.language.nvidia import ampere, blackwell\n"
              "from gluonkit.language.nvidia.hopper import mbarrier, tma\n"
              "@gluonkit.jit\ndef kernel(d):\n"
              f"    {body}\n")
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    desc = ir.TensorDescType(tuple(BLOCK), ir.float32, _nvmma())
    with pytest.raises(CompilationError) as err:
        module.kernel.build_ir([desc])
    assert f"{name}.py:7" in str(err.value)
    return err.value


_BAR = "mbarrier.allocate_mbarrier()"
_SMEM = "gl.allocate_shared_memory(gl.float32, [32, 64], d.layout)"


@pytest.mark.parametrize("body, cls, message", [
    (f"tma.async_copy_global_to_shared(d, [0, 0], {_BAR}, {_SMEM})", CompilationError,
     "async_copy_global_to_shared has been removed; call async_load instead"),
    (f"tma.async_copy_shared_to_global(d, [0, 0], {_SMEM})", CompilationError,
     "async_copy_shared_to_global has been removed; call async_store instead"),
    ("ampere.async_copy.async_copy_global_to_shared(1, 2)", CompilationError,
     "async_copy_global_to_shared has been removed; call async_load instead"),
    (f"tma.async_store(d, [0, 0], {_SMEM}, cache_policy=1)", UnsupportedFeatureError,
     "cache_policy is not supported by gluonkit yet"),
    ("ampere.async_copy.async_load(1, 2, cache_policy=1)", UnsupportedFeatureError,
     "async_load's cache_policy is not supported by gluonkit yet (cache_policy: cache policies; issue 10; see "
     "docs/porting.rst): pass cache_modifier / eviction_policy instead"),
    ("tma.store_wait(0, read_only=1)", CompilationError, "read_only must be True or False"),
    ("gl.expect_zero(d)", UnsupportedFeatureError,
     "expect_zero is not supported by gluonkit yet (hints:"),
    ("blackwell.tcgen05_copy(d, d)", CompilationError,
     "tcgen05_copy's dst must be a tensor memory descriptor (allocate_tensor_memory)"),
    ("blackwell.allocate_tensor_memory(gl.float32, [128, 128], blackwell.TensorMemoryLayout([128, 128], 2))",
     CompilationError, "col_stride 2 with 32-bit float32 elements spreads one element over more than a 32-bit"),
    ("x = gl.zeros([32], gl.float8e4b15)", UnsupportedFeatureError, "gl.float8e4b15 is not supported"),
    ("gl.extra.libdevice.exp(1.0)", UnsupportedFeatureError, "libdevice.exp is not supported by gluonkit yet"),
    ("ampere.mma_v2(d, d, d)", UnsupportedFeatureError, "mma_v2 is not supported by gluonkit yet"),
    ("blackwell.tma.async_gather(d, d, 0, d, d)", CompilationError,
     "async_gather's x_offsets must be a 1-D tensor of row offsets"),
    ("tma.async_atomic_add(d, [0, 0], d)", UnsupportedFeatureError, "async_atomic_add is not supported"),
    ("gl.barrier(True)", CompilationError, "gl.barrier(): too many positional arguments"),
    (f"mbarrier.arrive({_BAR}, 2)", CompilationError, "too many positional arguments"),
    (f"mbarrier.expect({_BAR})", CompilationError, "mbarrier.expect needs bytes_per_cta"),
    (f"mbarrier.arrive({_BAR}, from_cta=1)", CompilationError,
     "from_cta is a mask of CTA-rank bits in [0, num_ctas - 1] = [0, 0] (the kernel runs with num_ctas=1), got 1"),
    ("mbarrier.allocate_mbarrier(two_ctas=True)", CompilationError, "two CTAs of a pair, but the kernel runs 1 CTA"),
    ("mbarrier.allocate_mbarrier(batch=0)", CompilationError, "batch must be a positive int"),
])
def test_errors_name_the_line_and_what_to_do(tmp_path, body, cls, message):
    err = _build(tmp_path, body)
    assert type(err) is cls or (cls is CompilationError and isinstance(err, CompilationError)
                                and not isinstance(err, UnsupportedFeatureError))
    assert message in str(err)


# ------------------------------------------------------------------------- every stub
def _stubs():
    for rel, entries in GLUON.items():
        module = __import__(f"gluonkit.{rel}" if rel else "gluonkit", fromlist=["_"])
        for name in entries:
            obj = getattr(module, name)
            if is_unsupported(obj):
                yield rel, name, obj


STUBS = list(_stubs())


def test_the_unbuilt_features_are_stubs_not_missing_names():
    stubs = {(rel, name) for rel, name, _ in STUBS}
    assert {("language.nvidia.hopper.tma", "async_atomic_add")} <= stubs
    assert not {("language.nvidia.hopper.tma", "async_load"), ("language.nvidia.hopper.tma", "async_store"),
                ("language.nvidia.hopper.tma", "store_wait"), ("language.nvidia.hopper.mbarrier", "allocate_mbarrier"),
                ("language", "barrier"), ("language", "add"), ("nvidia.hopper", "TensorDescriptor"),
                ("nvidia.hopper", "TensorDescriptorIm2Col"), ("language.nvidia.hopper.tma", "async_load_im2col"),
                ("language.nvidia.hopper", "warpgroup_mma"), ("language", "atomic_add"),
                ("language", "inline_asm_elementwise"), ("language", "warp_specialize"),
                ("language", "associative_scan"), ("language.nvidia.ampere.async_copy", "async_load"),
                ("language.nvidia.blackwell", "tcgen05_copy"), ("language.nvidia.blackwell", "tcgen05_mma_scaled"),
                ("language.nvidia.blackwell.tma", "async_gather"), ("language.nvidia.blackwell.tma", "async_scatter")} & stubs


@pytest.mark.parametrize("rel, name, stub", STUBS, ids=[f"{r}.{n}" for r, n, _ in STUBS])
def test_every_stub_says_it_is_not_supported_yet(rel, name, stub):
    if inspect.ismodule(stub):
        stub = stub.anything
    elif not callable(stub):  # a dtype: refused where a dtype is required (see the kernel cases)
        assert f"gl.{name} is not supported by gluonkit yet" in stub.__gluonkit_unsupported__
        return
    with pytest.raises(UnsupportedFeatureError, match="is not supported by gluonkit yet") as err:
        stub(1, 2)
    assert name in str(err.value) and "docs/porting.rst" in str(err.value)


# ------------------------------------------------------------------ the porting page's list
def _names_on_the_porting_page():
    """The names docs/porting.rst lists as not supported yet (its bulleted list of features)."""
    path = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "porting.rst")
    with open(path) as f:
        text = f.read()
    listing = text[text.index("  - *clusters*:"):text.index("  Built since the name list")]
    names = set()
    for token in re.findall(r"``([^`]+)``", listing):
        if "=" in token or " " in token:
            continue  # a parameter value, not a name
        last = [part for part in token.split(".") if part != "*"][-1]
        if last.endswith("(_type)"):
            names.add(last[:-len("(_type)")] + "_type")
            last = last[:-len("(_type)")]
        names.add(last)
    return names


def test_the_porting_page_lists_every_stub_and_nothing_that_works():
    listed = _names_on_the_porting_page()
    stubbed = {name for _, name, _ in STUBS}
    assert stubbed - listed == set(), "stubs missing from docs/porting.rst's list"
    gluon_names = {name for entries in GLUON.values() for name in entries}
    assert {n for n in listed & gluon_names if n not in stubbed} == set(), \
        "docs/porting.rst lists names as not supported that work now"
