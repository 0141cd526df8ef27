"""Host-side TMA descriptors: ``gluonkit.nvidia.hopper.TensorDescriptor`` and ``runtime.tma``.

On the CPU: construction from numpy arrays and torch/CuPy-like fakes, every validation
error, the dtype and swizzle mappings, the reordering into the driver's (innermost-first)
order and the TMA box.  Tests marked ``gpu`` encode real tensor maps with
``cuTensorMapEncodeTiled`` and run a hand-written PTX kernel that copies one box with
``cp.async.bulk.tensor`` through the encoded map, checking the data, the 128-byte swizzle
and the zero fill of out-of-bounds elements.
"""

import ctypes
import types

import ml_dtypes
import numpy as np
import pytest

from gluonkit import ir
from gluonkit.layouts import NVMMASharedLayout, SwizzledSharedLayout
from gluonkit.nvidia.hopper import BlockType, TensorDescriptor
from gluonkit.runtime import tma
from gluonkit.runtime.driver import has_gpu
from kernel_checks import require_ptxas
from fakes import FakeTorch

gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")

BF16 = NVMMASharedLayout(128, 16)


def bf16_array(shape):
    return np.zeros(shape, ml_dtypes.bfloat16)


# ---------------------------------------------------------------------------- fakes


class FakeCuPy:
    """A CuPy-like device array: ``__cuda_array_interface__``, numpy dtype, byte ``strides``."""

    def __init__(self, shape, dtype=np.float16, ptr=0x7F0000000000):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.strides = np.empty(shape, dtype).strides
        self.__cuda_array_interface__ = {"data": (ptr, False), "typestr": self.dtype.str,
                                         "shape": self.shape, "strides": None, "version": 3}


# ---------------------------------------------------------------------------- construction


def test_from_numpy_bf16():
    a = bf16_array((256, 512))
    d = TensorDescriptor.from_tensor(a, [64, 64], BF16)
    assert d.base is a
    assert d.shape == (256, 512) and d.strides == (512, 1) and d.block_shape == (64, 64)
    assert d.layout is BF16 and d.dtype == ir.bfloat16 and d.padding == "zero"
    assert not d.is_cuda and d.address == a.__array_interface__["data"][0]
    assert d.block_type == BlockType((64, 64), ir.bfloat16)
    assert d.block_type.nbytes == 64 * 64 * 2 and d.block_type.numel == 4096
    assert d.block_type.element_ty == ir.bfloat16 and d.block_type.shape == (64, 64)
    assert d.box_shape == (64, 64)
    assert repr(d) == (f"TensorDescriptor(base={a!r}, shape=(256, 512), strides=(512, 1), block_shape=(64, 64), "
                       f"layout={BF16!r}, padding='zero', round_f32_to_tf32=False)")


def test_from_fake_torch_cpu_and_cuda():
    t = FakeTorch(shape=(128, 256), strides=(256, 1), dtype="float16", device_type="cpu")
    d = TensorDescriptor.from_tensor(t, [128, 64], NVMMASharedLayout(128, 16))
    assert d.strides == (256, 1) and d.dtype == ir.float16 and not d.is_cuda
    assert d.address == 0x7F0000000000
    cuda = FakeTorch(shape=(128, 256), strides=(256, 1), dtype="float8_e4m3fn")
    d = TensorDescriptor.from_tensor(cuda, [64, 128], NVMMASharedLayout(128, 8))
    assert d.is_cuda and d.dtype == ir.float8e4nv and d.box_shape == (64, 128)


def test_from_fake_cupy_uses_byte_strides():
    c = FakeCuPy((64, 96), np.float32)
    d = TensorDescriptor.from_tensor(c, [32, 32], NVMMASharedLayout(128, 32))
    assert d.is_cuda and d.dtype == ir.float32 and d.strides == (96, 1) and d.box_shape == (32, 32)


def test_constructor_describes_a_view():
    """shape/strides may describe less than the whole base: here the left half of each row."""
    a = bf16_array((64, 256))
    d = TensorDescriptor(a, [64, 128], [256, 1], [64, 64], BF16)
    assert d.shape == (64, 128) and d.strides == (256, 1)


def test_block_larger_than_the_box():
    """The box is at most 256 per dimension and one swizzle width across: several per block."""
    d = TensorDescriptor.from_tensor(bf16_array((1024, 1024)), [512, 128], BF16)
    assert d.box_shape == (256, 64) and d.block_type.nbytes == 512 * 128 * 2
    unswizzled = TensorDescriptor.from_tensor(bf16_array((1024, 1024)), [8, 512], NVMMASharedLayout(0, 16))
    assert unswizzled.box_shape == (8, 256)


def test_box_of_a_cluster_split_layout():
    layout = NVMMASharedLayout(128, 16, cga_layout=[[1, 0]])  # two CTAs split dim 0
    d = TensorDescriptor.from_tensor(bf16_array((512, 512)), [128, 64], layout)
    assert d.box_shape == (64, 64) and d.block_type.shape == (128, 64)


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_every_rank(rank):
    shape = (8,) * (rank - 1) + (64,)
    layout = NVMMASharedLayout(0 if rank == 1 else 128, 16, rank=rank)
    d = TensorDescriptor.from_tensor(np.zeros(shape, np.float16), list(shape), layout)
    assert d.box_shape == shape


def test_padding_and_tf32_options():
    d = TensorDescriptor.from_tensor(np.zeros((64, 64), np.float32), [32, 32], NVMMASharedLayout(128, 32),
                                     padding="nan", round_f32_to_tf32=True)
    assert d.padding == "nan" and d.round_f32_to_tf32


def test_host_descriptor_cannot_be_encoded():
    d = TensorDescriptor.from_tensor(bf16_array((64, 64)), [64, 64], BF16)
    with pytest.raises(ValueError, match="only the interpreter"):
        d.kernel_arg_bytes()


# ---------------------------------------------------------------------------- validation


def _desc(base=None, shape=None, strides=None, block_shape=(64, 64), layout=BF16, **kw):
    base = bf16_array((256, 512)) if base is None else base
    shape = base.shape if shape is None else shape
    strides = (tuple(s // base.itemsize for s in base.strides) if strides is None else strides)
    return TensorDescriptor(base, shape, strides, block_shape, layout, **kw)


@pytest.mark.parametrize("kwargs, message", [
    (dict(shape=(), strides=(), block_shape=()), r"shape: TMA tensors have rank 1 to 5, got rank 0"),
    (dict(shape=(2,) * 6, strides=(8,) * 5 + (1,), block_shape=(2,) * 6), r"shape: TMA tensors have rank 1 to 5, got rank 6"),
    (dict(strides=(512,)), r"strides: expected 2 strides .* got 1"),
    (dict(shape=(0, 512)), r"shape: dimension 0 must be in \[1, 2\*\*32\], got 0"),
    (dict(shape=(2**33, 512)), r"shape: dimension 0 must be in \[1, 2\*\*32\]"),
    (dict(strides=(1, 256)), r"strides: the last dimension must be contiguous \(stride 1\)"),
    (dict(strides=(500, 1)), r"strides: stride 500 of dimension 0 is 1000 bytes; TMA needs a non-negative "
                             r"multiple of 16 bytes .* pad the rows to a multiple of 8 elements"),
    (dict(strides=(-512, 1)), r"strides: stride -512 of dimension 0"),
    (dict(strides=(2**40, 1)), r"strides: stride 1099511627776 of dimension 0 .* below 2\*\*40"),
    (dict(block_shape=(64,)), r"block_shape: expected 2 dimensions like shape \[256, 512\], got \[64\]"),
    (dict(block_shape=(64, 96)), r"block_shape: dimension 1 must be a positive power of two, got 96"),
    (dict(block_shape=(0, 64)), r"block_shape: dimension 0 must be a positive power of two, got 0"),
    (dict(block_shape=(4096, 512)), r"block_shape: \[4096, 512\] has 2097152 elements, more than 1048576"),
    (dict(block_shape=(64, 32)), r"block_shape: \[64, 32\] does not fit the layout .*128-byte swizzle.*"
                                 r"at least 64 elements"),
    (dict(layout=NVMMASharedLayout(128, 16, rank=3)), r"layout: has rank 3 but the tensor has rank 2"),
    (dict(layout=NVMMASharedLayout(128, 32)), r"layout: element_bitwidth is 32 but the tensor's dtype "
                                              r"bfloat16 has 16-bit elements"),
    (dict(layout=NVMMASharedLayout(128, 16, transposed=True)), r"layout: .* cannot be transposed"),
    (dict(base=np.zeros((256, 512), np.uint8), layout=NVMMASharedLayout(128, 8, fp4_padded=True),
          block_shape=(64, 128)), r"layout: fp4_padded"),
    (dict(padding="inf"), r"padding: expected one of \['zero', 'nan'\], got 'inf'"),
    (dict(base=np.zeros((256, 512), np.int16), padding="nan"), r"padding: 'nan' needs a floating-point tensor"),
    (dict(round_f32_to_tf32=True), r"round_f32_to_tf32: only float32 tensors .* got bfloat16"),
    (dict(base=np.zeros((256, 512), np.bool_), layout=NVMMASharedLayout(128, 8)),
     r"dtype: TMA cannot copy int1 elements .* view a bool tensor as uint8"),
])
def test_value_errors(kwargs, message):
    with pytest.raises(ValueError, match="TensorDescriptor: " + message):
        _desc(**kwargs)


def test_box_limits_are_checked_when_a_kernel_is_given_the_descriptor():
    """A box the TMA hardware cannot move is an error when a kernel uses the descriptor (its
    argument type, its tensor map), not when it is built: Gluon host scripts build descriptors
    with a placeholder block and assign the real one before the launch."""
    desc = _desc(block_shape=(64, 4), layout=NVMMASharedLayout(0, 16))
    message = (r"TensorDescriptor: block_shape: the TMA box \[64, 4\] has an innermost row of 8 bytes; TMA needs a "
               r"multiple of 16 bytes: make block_shape\[-1\] a multiple of 8 \(checked when the descriptor is "
               r"passed to a kernel")
    with pytest.raises(ValueError, match=message):
        desc.arg_type
    with pytest.raises(ValueError, match=message):
        desc.kernel_arg_bytes()


def test_a_placeholder_block_can_be_replaced_before_the_launch():
    a = bf16_array((256, 512))
    desc = TensorDescriptor.from_tensor(a, [1, 1], NVMMASharedLayout.get_default_for([1, 1], ir.bfloat16))
    desc.block_shape = [128, 64]
    desc.layout = BF16
    assert desc.arg_type == ir.TensorDescType((128, 64), ir.bfloat16, BF16) and desc.box_shape == (128, 64)


def test_misaligned_base():
    a = np.zeros(1024, np.float16)[1:]  # 2 bytes past a 16-byte boundary
    with pytest.raises(ValueError, match=r"TensorDescriptor: base: the tensor's address 0x[0-9a-f]+ is not "
                                         r"16-byte aligned \(it is 2 bytes past"):
        TensorDescriptor.from_tensor(a, [64], NVMMASharedLayout(0, 16, rank=1))


def test_byte_strides_must_be_whole_elements():
    a = np.lib.stride_tricks.as_strided(np.zeros(4096, np.uint8).view(np.float16), (16, 64), (129, 2))
    with pytest.raises(ValueError, match=r"byte stride of 129, not a multiple of its 2-byte elements"):
        TensorDescriptor.from_tensor(a, [16, 64], NVMMASharedLayout(128, 16))


def test_type_errors():
    with pytest.raises(TypeError, match=r"parameter 'layout' must be an NVMMASharedLayout .* got "
                                        r"SwizzledSharedLayout; use NVMMASharedLayout.get_default_for"):
        _desc(layout=SwizzledSharedLayout(8, 1, 8, [1, 0]))
    with pytest.raises(TypeError, match=r"parameter 'base' must be a torch tensor, a CuPy array or a numpy "
                                        r"array, got list"):
        TensorDescriptor([[0.0]], [1, 1], [1, 1], [1, 1], BF16)
    with pytest.raises(TypeError, match=r"parameter 'block_shape' must be a sequence of ints, got \[64.0, 64\]"):
        _desc(block_shape=[64.0, 64])


# ---------------------------------------------------------------------------- mappings


@pytest.mark.parametrize("dtype, expected", [
    (ir.int8, "UINT8"), (ir.uint8, "UINT8"), (ir.float8e4nv, "UINT8"), (ir.float8e5, "UINT8"),
    (ir.int16, "UINT16"), (ir.uint16, "UINT16"), (ir.float16, "FLOAT16"), (ir.bfloat16, "BFLOAT16"),
    (ir.int32, "INT32"), (ir.uint32, "UINT32"), (ir.float32, "FLOAT32"),
    (ir.int64, "INT64"), (ir.uint64, "UINT64"), (ir.float64, "FLOAT64"),
])
def test_dtype_mapping(dtype, expected):
    assert tma.tma_data_type(dtype) == expected


def test_dtype_mapping_names_driver_enums():
    """Every name is a member of cuda-python's CUtensorMapDataType (where it is installed)."""
    driver = pytest.importorskip("cuda.bindings.driver")
    for dtype in ir.ALL_DTYPES:
        if dtype != ir.int1:
            assert hasattr(driver.CUtensorMapDataType, "CU_TENSOR_MAP_DATA_TYPE_" + tma.tma_data_type(dtype))
    for width in (0, 32, 64, 128):
        assert hasattr(driver.CUtensorMapSwizzle, "CU_TENSOR_MAP_SWIZZLE_" + tma.tma_swizzle(width))


def test_tf32_and_unsupported_dtypes():
    assert tma.tma_data_type(ir.float32, round_f32_to_tf32=True) == "TFLOAT32"
    with pytest.raises(ValueError, match="dtype: TMA cannot copy int1"):
        tma.tma_data_type(ir.int1)


@pytest.mark.parametrize("width, expected", [(0, "NONE"), (32, "32B"), (64, "64B"), (128, "128B")])
def test_swizzle_mapping(width, expected):
    assert tma.tma_swizzle(width) == expected


def test_swizzle_mapping_rejects_other_widths():
    with pytest.raises(ValueError, match=r"swizzle_byte_width: expected one of \[0, 32, 64, 128\], got 16"):
        tma.tma_swizzle(16)


# ---------------------------------------------------------------------------- driver order


def test_driver_order_2d():
    p = tma.driver_order([256, 512], [512, 1], [64, 64], 2)
    assert p == tma.TiledParams((512, 256), (1024,), (64, 64), (1, 1))


def test_driver_order_padded_rows():
    """A [100, 60] fp32 view whose rows are 64 elements apart (256 bytes), box [32, 16]."""
    p = tma.driver_order([100, 60], [64, 1], [32, 16], 4)
    assert p.global_dim == (60, 100) and p.global_strides == (256,) and p.box_dim == (16, 32)


def test_driver_order_3d_and_1d():
    p = tma.driver_order([4, 128, 256], [128 * 256, 256, 1], [2, 64, 32], 2)
    assert p.global_dim == (256, 128, 4)
    assert p.global_strides == (512, 65536)  # dim 1 (rows), then dim 0 (matrices), in bytes
    assert p.box_dim == (32, 64, 2) and p.element_strides == (1, 1, 1)
    p = tma.driver_order([1000], [1], [256], 4)
    assert p == tma.TiledParams((1000,), (), (256,), (1,))


def test_descriptor_driver_order():
    d = TensorDescriptor.from_tensor(bf16_array((3, 256, 512)), [1, 64, 64], NVMMASharedLayout(128, 16, rank=3))
    p = tma.driver_order(d.shape, d.strides, d.box_shape, d.dtype.itemsize)
    assert p.global_dim == (512, 256, 3) and p.global_strides == (1024, 262144) and p.box_dim == (64, 64, 1)


def test_check_box_limits():
    with pytest.raises(ValueError, match=r"block_shape: the TMA box \[300, 64\] has dimension 0 = 300"):
        tma.check_box([300, 64], 2, 128)
    with pytest.raises(ValueError, match=r"innermost row of 256 bytes, more than the 128-byte swizzle"):
        tma.check_box([8, 128], 2, 128)
    tma.check_box([256, 64], 2, 128)


# ---------------------------------------------------------------------------- a TMA load kernel

# One CTA of 128 threads: thread 0 initialises an mbarrier, expects `nbytes`, and issues one
# 2-D TMA load of the box at coordinates (c0 innermost, c1) into a 1024-byte-aligned tile;
# everyone waits on phase 0, then copies the raw tile (swizzled as TMA wrote it) to `out`.
TMA_LOAD_PTX = r"""
.version 8.0
.target sm_90a
.address_size 64

.shared .align 1024 .b8 tile[8192];
.shared .align 8 .b64 bar;

.visible .entry tma_load_2d(
    .param .align 64 .b8 desc[128],
    .param .u64 out,
    .param .u32 c0,
    .param .u32 c1,
    .param .u32 nbytes)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;

    mov.u32 %r1, %tid.x;
    setp.eq.u32 %p1, %r1, 0;
    mov.u32 %r2, bar;
    mov.u32 %r3, tile;
    ld.param.u32 %r4, [c0];
    ld.param.u32 %r5, [c1];
    ld.param.u32 %r6, [nbytes];
    mov.u64 %rd1, desc;
    cvta.param.u64 %rd1, %rd1;
    @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
    fence.proxy.async.shared::cta;
    bar.sync 0;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r2], %r6;
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1, {%r4, %r5}], [%r2];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
    @!%p2 bra WAIT;
    ld.param.u64 %rd3, [out];
    cvta.to.global.u64 %rd3, %rd3;
    shr.u32 %r7, %r6, 2;
    mov.u32 %r8, %r1;
LOOP:
    setp.ge.u32 %p3, %r8, %r7;
    @%p3 bra DONE;
    shl.b32 %r9, %r8, 2;
    add.u32 %r10, %r3, %r9;
    ld.shared.u32 %r11, [%r10];
    mul.wide.u32 %rd4, %r8, 4;
    add.u64 %rd5, %rd3, %rd4;
    st.global.u32 [%rd5], %r11;
    add.u32 %r8, %r8, 128;
    bra LOOP;
DONE:
    ret;
}
"""


def test_tma_load_ptx_assembles():
    from gluonkit.lower.backend.ptxas import assemble
    require_ptxas()
    cubin, _ = assemble(TMA_LOAD_PTX, "sm_90a")
    assert cubin[:4] == b"\x7fELF"


# ---------------------------------------------------------------------------- on the GPU


@gpu
@needs_gpu
def test_encode_bf16_128b_swizzle():
    torch = pytest.importorskip("torch")
    a = torch.randn(256, 512, dtype=torch.bfloat16, device="cuda")
    d = TensorDescriptor.from_tensor(a, [64, 64], NVMMASharedLayout(128, 16))
    encoded = d.kernel_arg_bytes()
    assert isinstance(encoded, bytes) and len(encoded) == tma.TENSOR_MAP_BYTES and any(encoded)
    assert d.kernel_arg_bytes() is encoded  # cached


@gpu
@needs_gpu
@pytest.mark.parametrize("case", ["fp32-rank1", "fp16-rank3-64B", "fp8-128B", "tf32-nan-32B", "int64-none"])
def test_encode_variants(case):
    torch = pytest.importorskip("torch")
    if case == "fp32-rank1":
        d = TensorDescriptor.from_tensor(torch.zeros(1000, device="cuda"), [256], NVMMASharedLayout(0, 32, rank=1))
    elif case == "fp16-rank3-64B":
        t = torch.zeros(4, 128, 96, dtype=torch.float16, device="cuda")
        d = TensorDescriptor.from_tensor(t, [2, 64, 32], NVMMASharedLayout(64, 16, rank=3))
    elif case == "fp8-128B":
        t = torch.zeros(256, 256, device="cuda").to(torch.float8_e4m3fn)
        d = TensorDescriptor.from_tensor(t, [128, 128], NVMMASharedLayout(128, 8))
    elif case == "tf32-nan-32B":
        d = TensorDescriptor.from_tensor(torch.zeros(64, 64, device="cuda"), [64, 8], NVMMASharedLayout(32, 32),
                                         padding="nan", round_f32_to_tf32=True)
    else:
        t = torch.zeros(64, 64, dtype=torch.int64, device="cuda")
        d = TensorDescriptor.from_tensor(t, [16, 16], NVMMASharedLayout(0, 64))
    assert len(d.kernel_arg_bytes()) == 128


def _run_tma_load(desc, c0, c1, nbytes):
    """Launch TMA_LOAD_PTX on ``desc`` at box coordinates (c0, c1); return the raw tile as int16."""
    import torch

    from gluonkit.runtime.driver import load_module, synchronize

    kernel = load_module(None, TMA_LOAD_PTX).get_kernel("tma_load_2d")
    out = torch.zeros(nbytes // 2, dtype=torch.int16, device="cuda")
    storage = ctypes.create_string_buffer(tma.TENSOR_MAP_BYTES + tma.TENSOR_MAP_ALIGNMENT)
    desc_at = -(-ctypes.addressof(storage) // tma.TENSOR_MAP_ALIGNMENT) * tma.TENSOR_MAP_ALIGNMENT
    ctypes.memmove(desc_at, desc.kernel_arg_bytes(), tma.TENSOR_MAP_BYTES)
    values = [ctypes.c_uint64(out.data_ptr()), ctypes.c_int32(c0), ctypes.c_int32(c1), ctypes.c_uint32(nbytes)]
    params = (ctypes.c_void_p * 5)(desc_at, *[ctypes.addressof(v) for v in values])
    torch.cuda.synchronize()
    kernel.launch((1, 1, 1), (128, 1, 1), 0, 0, types.SimpleNamespace(kernel_params=ctypes.addressof(params)))
    synchronize()
    return out


def _expected_box(a, r0, c0, rows, cols):
    """``a[r0:r0+rows, c0:c0+cols]`` as int16 bits, zero where the box leaves the tensor."""
    import torch

    expected = torch.zeros(rows, cols, dtype=torch.int16, device="cuda")
    part = a[r0:r0 + rows, c0:c0 + cols].view(torch.int16)
    expected[:part.shape[0], :part.shape[1]] = part
    return expected


@gpu
@needs_gpu
@pytest.mark.parametrize("r0, c0", [(64, 128), (224, 480)])  # inside; overlapping both far edges
def test_tma_load_unswizzled(r0, c0):
    torch = pytest.importorskip("torch")
    a = torch.randn(256, 512, dtype=torch.bfloat16, device="cuda")
    d = TensorDescriptor.from_tensor(a, [64, 64], NVMMASharedLayout(0, 16))
    out = _run_tma_load(d, c0, r0, d.block_type.nbytes).view(64, 64)
    assert torch.equal(out, _expected_box(a, r0, c0, 64, 64))


@gpu
@needs_gpu
@pytest.mark.parametrize("r0, c0", [(64, 128), (224, 480)])
def test_tma_load_128b_swizzle(r0, c0):
    """Row r's 16-byte chunk j lands at chunk j ^ (r % 8) of its 128-byte row."""
    torch = pytest.importorskip("torch")
    a = torch.randn(256, 512, dtype=torch.bfloat16, device="cuda")
    d = TensorDescriptor.from_tensor(a, [64, 64], NVMMASharedLayout(128, 16))
    raw = _run_tma_load(d, c0, r0, d.block_type.nbytes).view(64, 8, 8)  # rows, chunks, 8 bf16 each
    rows = torch.arange(64, device="cuda")[:, None]
    chunks = torch.arange(8, device="cuda")[None, :] ^ (rows % 8)
    assert torch.equal(raw[rows, chunks].reshape(64, 64), _expected_box(a, r0, c0, 64, 64))
