"""Idioms of real Gluon 3.9 kernels that must port unchanged, with Gluon's semantics.

* A runtime ``for`` loop may reuse a name that held a compile-time value (``for _ in
  gl.static_range(...)`` then ``for _ in range(n)``); the induction variable is not carried
  and has no value after the loop, as in Gluon.
* Tuples and lists are one kind of sequence, as in Gluon (where a list display is a tuple):
  ``[stages] + desc.block_type.shape`` concatenates, ``[64, 64] == (64, 64)``.
* The device-side tensor descriptor answers Gluon's attributes: ``desc.type.block_type``,
  ``desc.block_type``, ``desc.block_shape``, ``desc.dtype``, ``desc.layout``,
  ``desc.nbytes_per_cta``, ``desc.shape`` and ``desc.strides``.
* ``@gluonkit.jit`` takes every option of Gluon's ``@gluon.jit`` (``repr=`` …).
* ``smem.reinterpret(dtype=None, shape=None, layout=None)`` (3.9's name; each part defaults
  to the buffer's own), and Triton's ``tl`` dtypes wherever a dtype goes (``x.to(tl.int16)``):
  Gluon's dtypes are Triton's.

Kernels run in the interpreter against numpy on fresh random inputs; the TMA kernel is also
assembled by ptxas for sm_90a and sm_100a.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import CompilationError
from gluonkit.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from gluonkit.nvidia.hopper import TensorDescriptor
from interpreting import interpreter_on
from kernel_checks import needs_ptxas

TARGETS = ["sm_90a", "sm_100a"]
ROW = gl.BlockedLayout([1], [32], [4], [0])
TILE = gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])


@pytest.fixture
def rng():
    return np.random.default_rng()


def _line(fn, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def _build_error(kernel, arg_types, constexprs=None) -> str:
    with pytest.raises(CompilationError) as info:
        kernel.build_ir(arg_types, constexprs or {}, 4, {})
    return str(info.value)


# ------------------------------------------------------------ runtime loops reuse a name
@gluonkit.jit
def reuse_name_kernel(x_ptr, out_ptr, n, UNROLL: gl.constexpr):
    offs = gl.arange(0, 128, ROW)
    acc = gl.load(x_ptr + offs)
    for i in gl.static_range(UNROLL):  # `i` is a compile-time value here …
        acc = acc + i
    for i in range(n):  # … and the runtime induction variable here
        i = i * 3  # rebinding it inside the body does not change the iteration
        acc = acc + i
    gl.store(out_ptr + offs, acc)


@gluonkit.jit
def after_loop_kernel(out_ptr, n):
    i = 5
    for i in range(n):
        gl.store(out_ptr + i, i)
    gl.store(out_ptr, i)  # <- after the loop


@pytest.mark.parametrize("n", [0, 1, 6])
def test_a_runtime_loop_may_reuse_a_compile_time_name(n, rng):
    x = rng.standard_normal(128).astype(np.float32)
    out = np.zeros_like(x)
    with interpreter_on():
        reuse_name_kernel[(1,)](x, out, n, UNROLL=3)
    expected = x.astype(np.float64) + sum(range(3)) + sum(3 * i for i in range(n))
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_the_induction_variable_is_undefined_after_the_loop():
    text = _build_error(after_loop_kernel, [gl.pointer_type(gl.int32), gl.int32])
    assert "name 'i' is not defined here: it is the induction variable of the runtime for loop" in text
    assert f"{__file__}:{_line(after_loop_kernel.fn, '# <- after the loop')}:" in text


# --------------------------------------------------------- tuples and lists are sequences
@gluonkit.jit
def sequences_kernel(out_ptr, SHAPE: gl.constexpr):
    full: gl.constexpr = [2] + SHAPE  # list + tuple
    gl.static_assert(full == (2, 4, 32))
    gl.static_assert(SHAPE + [1] == [4, 32, 1])
    gl.static_assert([0] * 2 == (0, 0))
    gl.static_assert(list(SHAPE) != (4, 33))
    offs = gl.arange(0, 128, ROW)
    pair = (offs,) + [offs * 2]  # runtime elements concatenate too
    twice = pair * 2
    gl.store(out_ptr + offs, twice[0] + twice[3] + full[0] * full[1] * full[2])


@gluonkit.jit
def bad_sequence_kernel(out_ptr):
    shape: gl.constexpr = [4, 32]
    gl.store(out_ptr, shape - [1])  # <- minus


def test_tuples_and_lists_concatenate_and_compare_as_in_gluon():
    out = np.zeros(128, np.int32)
    with interpreter_on():
        sequences_kernel[(1,)](out, SHAPE=(4, 32))
    np.testing.assert_array_equal(out, np.arange(128) * 3 + 256)


def test_other_sequence_operators_name_the_line():
    text = _build_error(bad_sequence_kernel, [gl.pointer_type(gl.int32)])
    assert "tuples and lists support only + (concatenation" in text
    assert f"{__file__}:{_line(bad_sequence_kernel.fn, '# <- minus')}:" in text


# ------------------------------------------------------- device-side descriptor attributes
@gluonkit.jit
def staged_copy_kernel(in_desc, out_desc, STAGES: gl.constexpr):
    """Copies the block at (pid * BM, 0) through stage STAGES - 1 of a multi-stage buffer,
    sizing everything from the descriptor's attributes as Gluon kernels do."""
    dtype: gl.constexpr = in_desc.type.block_type.element_ty
    gl.static_assert(in_desc.block_type == out_desc.type.block_type)
    gl.static_assert(in_desc.layout == out_desc.type.layout)
    gl.static_assert(in_desc.nbytes_per_cta == in_desc.block_type.nbytes)
    gl.static_assert(in_desc.dtype == dtype)
    bufs = gl.allocate_shared_memory(dtype, [STAGES] + in_desc.block_type.shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    BM: gl.constexpr = in_desc.block_shape[0]
    row = gl.program_id(0) * BM
    mbarrier.expect(bar, in_desc.nbytes_per_cta)
    tma.async_load(in_desc, [row, 0], bar, bufs.index(STAGES - 1))
    mbarrier.wait(bar, 0)
    x = bufs.index(STAGES - 1).load(TILE)
    x = x + (in_desc.shape[0] + in_desc.strides[0]).to(dtype)
    bufs.index(0).store(x)
    fence_async_shared()
    tma.async_store(out_desc, [row, 0], bufs.index(0))
    tma.store_wait(0)
    mbarrier.invalidate(bar)


def _descs(x, out, block):
    layout = gl.NVMMASharedLayout.get_default_for(block, gl.float32)
    return TensorDescriptor.from_tensor(x, block, layout), TensorDescriptor.from_tensor(out, block, layout)


def test_descriptor_attributes_size_a_staged_copy(rng):
    x = rng.standard_normal((96, 32)).astype(np.float32)
    out = np.zeros_like(x)
    in_desc, out_desc = _descs(x, out, [32, 32])
    with interpreter_on():
        staged_copy_kernel[(3,)](in_desc, out_desc, STAGES=3)
    np.testing.assert_allclose(out, x.astype(np.float64) + 96 + 32, rtol=1e-6)


def test_descriptor_type_answers_gluons_attributes():
    x = np.zeros((64, 32), np.float16)
    desc = TensorDescriptor.from_tensor(x, [16, 32], gl.NVMMASharedLayout.get_default_for([16, 32], gl.float16))
    ty = gluonkit.runtime.args.ir_type_of(desc)
    assert ty.block_type.shape == (16, 32) and ty.block_type.element_ty == gl.float16
    assert ty.block_type.nbytes == ty.nbytes_per_cta == 16 * 32 * 2


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_staged_copy_assembles(target):
    x = np.zeros((96, 32), np.float32)
    in_desc, out_desc = _descs(x, x, [32, 32])
    c = staged_copy_kernel.compile(in_desc, out_desc, STAGES=3, target=target)
    assert "cubin" in c.asm
    assert c.asm["ptx"].count("cp.async.bulk.tensor.2d") == 2


# ------------------------------------------------------------------------- @jit options
def _named(x):
    return "named"


@gluonkit.jit(do_not_specialize=["n"], repr=_named, launch_metadata=None, version=2,
              do_not_specialize_on_alignment=["n"], noinline=True)
def optioned_kernel(x_ptr, n):
    offs = gl.arange(0, 128, ROW)
    gl.store(x_ptr + offs, gl.load(x_ptr + offs) * n)


def test_gluons_jit_options_are_accepted(rng):
    x = rng.standard_normal(128).astype(np.float32)
    out = x.copy()
    with interpreter_on():
        optioned_kernel[(1,)](out, 3)
    np.testing.assert_allclose(out, x.astype(np.float64) * 3, rtol=1e-6)
    assert optioned_kernel.options["repr"] is _named and optioned_kernel.options["version"] == 2
    with pytest.raises(TypeError):
        gluonkit.jit(num_stages=3)


@gluonkit.jit
def reinterpret_kernel(x_ptr, out_ptr):
    offs = gl.arange(0, 128, layout=ROW)
    smem = gl.allocate_shared_memory(gl.float32, [128], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    smem.store(gl.load(x_ptr + offs))
    bits = smem.reinterpret(gl.int32)  # shape and layout default to the buffer's own
    gl.store(out_ptr + offs, bits.load(ROW))


def test_reinterpret_defaults_to_the_buffers_shape_and_layout(rng):
    x = rng.standard_normal(128).astype(np.float32)
    out = np.zeros(128, np.int32)
    with interpreter_on():
        reinterpret_kernel[(1,)](x, out)
    np.testing.assert_array_equal(out, x.view(np.int32))


class _TritonDtype:
    """Stands in for ``triton.language.core.dtype`` (recognised by class name and module)."""

    def __init__(self, name):
        self.name = name


_TritonDtype.__name__ = "dtype"
_TritonDtype.__module__ = "triton.language.core"


@gluonkit.jit
def triton_dtype_kernel(x_ptr, out_ptr, DT: gl.constexpr):
    offs = gl.arange(0, 128, layout=ROW)
    gl.store(out_ptr + offs, gl.load(x_ptr + offs).to(DT))


@pytest.mark.parametrize("name, numpy_dtype", [("int16", np.int16), ("fp16", np.float16), ("bf16", None)])
def test_triton_dtypes_are_gluon_dtypes(rng, name, numpy_dtype):
    import ml_dtypes

    numpy_dtype = numpy_dtype or ml_dtypes.bfloat16
    x = (rng.standard_normal(128) * 100).astype(np.float32)
    out = np.zeros(128, numpy_dtype)
    with interpreter_on():
        triton_dtype_kernel[(1,)](x, out, DT=_TritonDtype(name))
    expected = np.trunc(x).astype(numpy_dtype) if name == "int16" else x.astype(numpy_dtype)
    np.testing.assert_array_equal(out, expected)


def test_an_unknown_triton_dtype_is_a_clear_error():
    with pytest.raises(CompilationError, match="must be a gl dtype such as gl.float32"):
        triton_dtype_kernel.build_ir([gl.pointer_type(gl.float32), gl.pointer_type(gl.float32)],
                                     {"DT": _TritonDtype("fp8e4b15")})
