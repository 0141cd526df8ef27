"""The runtime's driver layer, argument packing and benchmark helper (the kernel cache:
test_cache_safety.py).

Most tests run without a GPU (packing, error messages, the no-driver path).  Tests
marked ``gpu`` load hand-written PTX kernels through :func:`load_module`, launch them and
read the results back; they skip when :func:`has_gpu` is False.
"""

import ctypes
import struct
import types

import numpy as np
import pytest

from gluonkit import ir
from gluonkit.runtime import args as rt_args
from gluonkit.runtime import driver
from gluonkit.runtime.args import ArgPacker, data_pointer, dtype_of, ir_type_of
from gluonkit.runtime.bench import do_bench, summarize
from gluonkit.runtime.driver import (
    CudaError, DeviceBuffer, Kernel, OutOfResources, check, check_shared_memory, has_gpu,
    load_module,
)
from kernel_checks import require_ptxas
from fakes import DLPackOnly, FakeCAI, FakeCuPy, FakeTorch

gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")


# ---------------------------------------------------------------------------- fakes


# ---------------------------------------------------------------------------- typing


@pytest.mark.parametrize("value, expected", [
    (True, ir.int1), (0, ir.int32), (-2**31, ir.int32), (2**31 - 1, ir.int32),
    (2**31, ir.int64), (-2**31 - 1, ir.int64), (2**63 - 1, ir.int64), (2**63, ir.uint64),
    (2**64 - 1, ir.uint64), (1.5, ir.float32),
    (np.bool_(True), ir.int1), (np.int64(5), ir.int32), (np.uint64(2**63), ir.uint64),
    (np.float64(0.5), ir.float32), (np.float32(0.5), ir.float32),
])
def test_ir_type_of_scalars_follows_triton(value, expected):
    assert ir_type_of(value, "x") == expected


def test_ir_type_of_rejects_too_wide_ints_and_unknown_objects():
    with pytest.raises(ValueError, match="parameter 'n': integer 18446744073709551616 does not fit in 64 bits"):
        ir_type_of(2**64, "n")
    with pytest.raises(TypeError, match="parameter 's': expected an int, float, bool or a device array.*got str"):
        ir_type_of("hello", "s")


@pytest.mark.parametrize("obj, expected", [
    (FakeCAI(0, "<f2"), ir.float16), (FakeCAI(0, "<i8"), ir.int64), (FakeCAI(0, "|u1"), ir.uint8),
    (FakeCAI(0, "|b1"), ir.int1), (FakeCAI(0, "<f8"), ir.float64),
    (FakeTorch(0, dtype="bfloat16"), ir.bfloat16), (FakeTorch(0, dtype="bool"), ir.int1),
    (FakeTorch(0, dtype="float8_e4m3fn"), ir.float8e4nv), (FakeTorch(0, dtype="float8_e5m2"), ir.float8e5),
    (np.zeros(2, np.float16), ir.float16), (np.zeros(2, np.bool_), ir.int1),
    (DLPackOnly(np.zeros(2, np.float32)), ir.float32), (DLPackOnly(np.zeros(2, np.uint16)), ir.uint16),
    (DLPackOnly(np.zeros(2, np.int8)), ir.int8),
])
def test_dtype_of_each_protocol(obj, expected):
    assert dtype_of(obj, "x") == expected
    assert ir_type_of(obj, "x") == ir.PointerType(expected)


def test_dtype_of_bfloat16_numpy_array():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert dtype_of(np.zeros(2, ml_dtypes.bfloat16)) == ir.bfloat16


def test_dtype_of_unsupported_element_types_name_the_parameter():
    with pytest.raises(TypeError, match="parameter 'z': element type numpy complex64 has no gluonkit dtype"):
        dtype_of(np.zeros(2, np.complex64), "z")
    with pytest.raises(TypeError, match=r"parameter 'z': __cuda_array_interface__ typestr '<c8'"):
        dtype_of(FakeCAI(0, "<c8"), "z")


# ---------------------------------------------------------------------------- pointers


def test_data_pointer_of_each_protocol():
    assert data_pointer(0x7F00_0000_1000, "p") == 0x7F00_0000_1000
    assert data_pointer(FakeTorch(0x1230), "p", device=0) == 0x1230
    assert data_pointer(FakeCAI(0x4560), "p", device=3) == 0x4560  # CAI alone: no device to check
    assert data_pointer(FakeCuPy(0x7890, 1), "p", device=1) == 0x7890
    array = np.arange(16, dtype=np.float32)
    # The capsule's data + byte_offset must be the element address, also for an offset view.
    assert data_pointer(DLPackOnly(array), "p", device=0) == array.ctypes.data
    assert data_pointer(DLPackOnly(array[3:]), "p") == array.ctypes.data + 12


def test_data_pointer_device_errors_name_the_parameter():
    with pytest.raises(ValueError, match=r"parameter 'x': expected a CUDA tensor, got a tensor on .*\.cuda\(\)"):
        data_pointer(FakeTorch(16, device_type="cpu"), "x", device=0)
    with pytest.raises(ValueError, match="parameter 'y': tensor is on CUDA device 1, but the kernel runs on "
                                         "the current device 0"):
        data_pointer(FakeTorch(16, index=1), "y", device=0)
    with pytest.raises(ValueError, match="parameter 'c': tensor is on CUDA device 2, but .* device 0"):
        data_pointer(FakeCuPy(16, 2), "c", device=0)
    with pytest.raises(ValueError, match=r"parameter 'h': expected a CUDA device array, got one in CPU \(kDLCPU\)"):
        data_pointer(np.zeros(4, np.float32), "h", device=0)
    with pytest.raises(ValueError, match=r"parameter 'r': a raw device pointer must be in \[0, 2\*\*64\), got -8"):
        data_pointer(-8, "r")
    with pytest.raises(TypeError, match="parameter 'o': expected a CUDA device array .* got object"):
        data_pointer(object(), "o")


# ---------------------------------------------------------------------------- packing

SIGNATURE = [ir.PointerType(ir.float32), ir.int32, ir.int64, ir.uint32, ir.float32, ir.float64,
             ir.int1, ir.float16, ir.bfloat16, ir.int8]
NAMES = ["out", "n", "big", "mask", "alpha", "beta", "flag", "half", "brain", "small"]
CTYPES = [ctypes.c_uint64, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32, ctypes.c_float,
          ctypes.c_double, ctypes.c_int8, ctypes.c_uint16, ctypes.c_uint16, ctypes.c_int8]


def _read_back(packed, ctypes_list):
    """Follow the ``void*[]`` like the driver does and read each parameter's bytes."""
    addresses = (ctypes.c_void_p * len(ctypes_list)).from_address(packed.kernel_params)
    return [ct.from_address(a).value for ct, a in zip(ctypes_list, addresses)]


def test_pack_lays_out_every_parameter_type():
    packer = ArgPacker(SIGNATURE, NAMES)
    values = [FakeCAI(0xABCD_0000), -7, -2**40, 0xFFFF_FFFF, 1.5, -0.1, True, 1.0, 1.0, -128]
    packed = packer.pack(values, device=0)
    got = _read_back(packed, CTYPES)
    assert got == [0xABCD_0000, -7, -2**40, 0xFFFF_FFFF, 1.5, -0.1, 1,
                   0x3C00,  # float16 1.0: sign 0, exponent 15 (01111), mantissa 0
                   0x3F80,  # bfloat16 1.0: the top half of float32 0x3F800000
                   -128]


def test_pack_scalar_conversions_round_like_the_hardware():
    packer = ArgPacker([ir.bfloat16, ir.bfloat16, ir.float16, ir.float32], ["a", "b", "c", "d"])
    packed = packer.pack([1 + 2**-8, 1 + 3 * 2**-8, 2**-24, np.float64(0.1)])
    a, b, c, d = _read_back(packed, [ctypes.c_uint16] * 3 + [ctypes.c_float])
    assert a == 0x3F80  # halfway between 1.0 (0x3F80, even) and 1+2^-7 (0x3F81): ties to even
    assert b == 0x3F82  # halfway between 0x3F81 (odd) and 0x3F82 (even): up to even
    assert c == 0x0001  # 2^-24 is the smallest float16 subnormal
    assert d == struct.unpack("<f", struct.pack("<f", 0.1))[0]


def test_pack_reuses_one_block_per_thread():
    import threading
    packer = ArgPacker([ir.int8, ir.int64], ["a", "b"])
    first = packer.pack([1, 2])
    addresses = list((ctypes.c_void_p * 2).from_address(first.kernel_params))
    assert addresses[1] - addresses[0] == 8  # int64 at its natural alignment after an int8
    assert packer.pack([3, 4]) is first and _read_back(first, [ctypes.c_int8, ctypes.c_int64]) == [3, 4]
    other = []
    thread = threading.Thread(target=lambda: other.append(packer.pack([5, 6])))
    thread.start()
    thread.join()
    assert other[0] is not first
    assert _read_back(first, [ctypes.c_int8, ctypes.c_int64]) == [3, 4]
    assert _read_back(other[0], [ctypes.c_int8, ctypes.c_int64]) == [5, 6]


def test_pack_without_parameters_gives_a_null_array():
    assert ArgPacker([], []).pack([]).kernel_params == 0


@pytest.mark.parametrize("ty, value, error, message", [
    (ir.int32, 2**31, ValueError, r"parameter 'v': 2147483648 does not fit in int32 \(range \[-2147483648, 2147483647\]\)"),
    (ir.uint32, -1, ValueError, r"parameter 'v': -1 does not fit in uint32 \(range \[0, 4294967295\]\)"),
    (ir.int1, 2, ValueError, r"parameter 'v': 2 does not fit in int1 \(range \[0, 1\]\)"),
    (ir.int64, 2.5, TypeError, "parameter 'v': expected an integer for int64, got float 2.5"),
    (ir.float32, "1.0", TypeError, "parameter 'v': expected a real number for float32, got str '1.0'"),
    (ir.float32, 1e39, ValueError, r"parameter 'v': 1e\+39 overflows float32 \(rounds to infinity\)"),
    (ir.float16, 65520.0, ValueError, "parameter 'v': 65520.0 overflows float16"),
    (ir.PointerType(ir.float32), 1.0, TypeError, "parameter 'v': expected a CUDA device array"),
])
def test_pack_errors_name_the_parameter(ty, value, error, message):
    with pytest.raises(error, match=message):
        ArgPacker([ty], ["v"]).pack([value])


def test_pack_accepts_numpy_scalars_and_infinities():
    packed = ArgPacker([ir.int32, ir.float16, ir.float32], ["a", "b", "c"]).pack(
        [np.int64(5), float("inf"), float("-inf")])
    assert _read_back(packed, [ctypes.c_int32, ctypes.c_uint16, ctypes.c_float]) == [5, 0x7C00, float("-inf")]


def test_pack_checks_the_argument_count_and_device():
    packer = ArgPacker([ir.PointerType(ir.float16), ir.int32], ["x", "n"])
    with pytest.raises(TypeError, match=r"kernel takes 2 runtime arguments \(x, n\), got 1"):
        packer.pack([0])
    with pytest.raises(ValueError, match="parameter 'x': tensor is on CUDA device 1"):
        packer.pack([FakeTorch(64, index=1), 3], device=0)


def test_unsupported_parameter_type_is_refused_when_building_the_packer():
    with pytest.raises(TypeError, match="parameter 'f8': kernel arguments of type float8e4nv are not supported"):
        ArgPacker([ir.float8e4nv], ["f8"])


# ---------------------------------------------------------------------------- driver without a GPU


def _fake_cu(**functions):
    """A stand-in for cuda.bindings.driver with the real CUresult and the given functions."""
    return types.SimpleNamespace(CUresult=driver.bindings().CUresult, **functions)


@pytest.mark.parametrize("fake", [
    None,  # cuda-python missing
    "raises",  # libcuda.so missing: cuda-python raises when loading it
    "init_error",  # cuInit fails (e.g. no device node / driver mismatch)
    "no_devices",
])
def test_has_gpu_is_false_without_a_usable_driver(monkeypatch, fake):
    R = driver.bindings().CUresult

    def raise_missing(flags):
        raise RuntimeError("libcuda.so: cannot open shared object file")

    fakes = {
        None: None,
        "raises": _fake_cu(cuInit=raise_missing),
        "init_error": _fake_cu(cuInit=lambda flags: (R.CUDA_ERROR_NO_DEVICE,)),
        "no_devices": _fake_cu(cuInit=lambda flags: (R.CUDA_SUCCESS,), cuDeviceGetCount=lambda: (R.CUDA_SUCCESS, 0)),
    }
    monkeypatch.setattr(driver, "_initialized", False)
    monkeypatch.setattr(driver, "_cu", fakes[fake])
    assert has_gpu() is False
    if fake in (None, "raises"):
        with pytest.raises(driver.DriverUnavailable):
            driver.ensure_context()


def test_has_gpu_answers_without_raising():
    assert isinstance(has_gpu(), bool)


def test_check_returns_values_and_raises_named_errors():
    R = driver.bindings().CUresult
    assert check((R.CUDA_SUCCESS,), "cuA") is None
    assert check((R.CUDA_SUCCESS, 5), "cuB") == 5
    assert check((R.CUDA_SUCCESS, 1, 2), "cuC") == (1, 2)
    with pytest.raises(CudaError, match=r"^cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE \(.+\)$") as info:
        check((R.CUDA_ERROR_INVALID_IMAGE,), "cuModuleLoadData")
    assert info.value.call == "cuModuleLoadData" and info.value.name == "CUDA_ERROR_INVALID_IMAGE"


def test_out_of_resources_message_matches_triton():
    err = OutOfResources(262176, 232448, "shared memory")
    assert str(err) == ("out of resource: shared memory, Required: 262176, Hardware limit: 232448. "
                        "Reducing block sizes or `num_stages` may help.")
    assert (err.required, err.limit, err.name) == (262176, 232448, "shared memory")
    check_shared_memory(232448, 232448)
    with pytest.raises(OutOfResources, match="Required: 232449, Hardware limit: 232448"):
        check_shared_memory(232449, 232448)


def test_kernel_checks_shared_memory_before_touching_the_driver():
    big_static = Kernel(handle=None, name="k", static_shared_bytes=230000, shared_limit=232448)
    with pytest.raises(OutOfResources, match="Required: 234096, Hardware limit: 232448"):
        big_static.launch((1, 1, 1), (128, 1, 1), 4096, 0, ArgPacker([], []).pack([]))  # 4 KiB < 48 KiB
    kernel = Kernel(handle=None, name="k", static_shared_bytes=1024, shared_limit=232448)
    kernel.set_dynamic_shared_memory(48 * 1024)  # within the default: nothing to configure
    with pytest.raises(OutOfResources, match="Required: 233472, Hardware limit: 232448"):
        kernel.set_dynamic_shared_memory(232448)  # 1024 static + 232448 dynamic
    with pytest.raises(OutOfResources, match="Required: 263168, Hardware limit: 232448"):
        kernel.launch((1, 1, 1), (128, 1, 1), 262144, 0, ArgPacker([], []).pack([]))


# ---------------------------------------------------------------------------- benchmark statistics


def test_summarize_like_triton():
    times = [4.0, 1.0, 3.0, 2.0]
    assert summarize(times) == 2.0  # lower median of an even count, as torch.median
    assert summarize(times, return_mode="min") == 1.0
    assert summarize(times, return_mode="mean") == 2.5
    assert summarize(times, return_mode="all") == times
    assert summarize(times, quantiles=[0.5]) == 2.5  # one quantile: a float, interpolated
    assert summarize(times, quantiles=[0.0, 1.0]) == [1.0, 4.0]
    with pytest.raises(ValueError, match="return_mode must be one of .* got 'p99'"):
        summarize(times, return_mode="p99")


# ---------------------------------------------------------------------------- PTX fixtures

# out[i] = i for i < n (one thread per element).
STORE_TID_PTX = """
.version 7.0
.target sm_70
.address_size 64

.visible .entry store_tid(.param .u64 out, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r5;
DONE:
    ret;
}
"""

# Writes each scalar parameter's bits, zero-extended, into out[0..5] (u64 slots): checks
# that the packer's ctypes fields match the sizes the kernel image declares.
SCALARS_PTX = """
.version 7.0
.target sm_70
.address_size 64

.visible .entry scalars(.param .u64 out, .param .u32 a, .param .u64 b, .param .f32 c,
                        .param .f64 d, .param .u8 e, .param .b16 h)
{
    .reg .b16 %rs<3>;
    .reg .b32 %r<3>;
    .reg .f32 %f<2>;
    .reg .f64 %fd<2>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [a];
    cvt.u64.u32 %rd2, %r1;
    st.global.u64 [%rd1], %rd2;
    ld.param.u64 %rd3, [b];
    st.global.u64 [%rd1+8], %rd3;
    ld.param.f32 %f1, [c];
    mov.b32 %r2, %f1;
    cvt.u64.u32 %rd4, %r2;
    st.global.u64 [%rd1+16], %rd4;
    ld.param.f64 %fd1, [d];
    mov.b64 %rd5, %fd1;
    st.global.u64 [%rd1+24], %rd5;
    ld.param.u8 %rs1, [e];
    cvt.u64.u16 %rd6, %rs1;
    st.global.u64 [%rd1+32], %rd6;
    ld.param.b16 %rs2, [h];
    cvt.u64.u16 %rd7, %rs2;
    st.global.u64 [%rd1+40], %rd7;
    ret;
}
"""

# Thread t writes t at byte nbytes - 4(t+1) of dynamic shared memory (the top of the
# region), syncs, reads it back into out[t]: fails unless nbytes of dynamic shared memory
# really were granted.
SMEM_TOP_PTX = """
.version 7.0
.target sm_70
.address_size 64

.extern .shared .align 16 .b8 dyn_smem[];

.visible .entry smem_top(.param .u64 out, .param .u32 nbytes)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [nbytes];
    mov.u32 %r2, %tid.x;
    add.u32 %r3, %r2, 1;
    shl.b32 %r3, %r3, 2;
    sub.u32 %r4, %r1, %r3;
    mov.u32 %r5, dyn_smem;
    add.u32 %r5, %r5, %r4;
    st.shared.u32 [%r5], %r2;
    bar.sync 0;
    ld.shared.u32 %r6, [%r5];
    mul.wide.u32 %rd2, %r2, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
    ret;
}
"""


@pytest.mark.parametrize("ptx", [STORE_TID_PTX, SCALARS_PTX, SMEM_TOP_PTX])
def test_ptx_fixtures_assemble(ptx):
    """The GPU tests' kernels are valid PTX (checked here with ptxas when one is installed)."""
    from gluonkit.lower.backend.ptxas import assemble
    require_ptxas()
    cubin, _ = assemble(ptx, "sm_90a")
    assert cubin[:4] == b"\x7fELF"


# ---------------------------------------------------------------------------- on the GPU


def _store_tid(module, n=1000, block=128):
    kernel = module.get_kernel("store_tid")
    out = DeviceBuffer(4 * n)
    packed = ArgPacker([ir.PointerType(ir.int32), ir.int32], ["out", "n"]).pack([out.ptr, n])
    kernel.launch(((n + block - 1) // block, 1, 1), (block, 1, 1), 0, 0, packed)
    result = np.zeros(n, np.int32)
    out.copy_to_host(result)
    return result


@gpu
@needs_gpu
def test_device_properties_are_plausible():
    props = driver.device_properties()
    assert props.sm_count > 0 and props.compute_capability >= (7, 0)
    assert props.max_shared_memory_per_block == 48 * 1024
    assert props.max_shared_memory_per_block_optin >= props.max_shared_memory_per_block
    assert props.driver_version >= 12000 and props.warp_size == 32
    assert driver.current_device() == props.ordinal


@gpu
@needs_gpu
def test_load_ptx_and_launch():
    module = load_module(None, STORE_TID_PTX)
    assert module.kind == "ptx"
    np.testing.assert_array_equal(_store_tid(module), np.arange(1000, dtype=np.int32))


@gpu
@needs_gpu
def test_unloadable_cubin_falls_back_to_ptx():
    module = load_module(b"\x7fELF not really a cubin", STORE_TID_PTX)
    assert module.kind == "ptx"
    np.testing.assert_array_equal(_store_tid(module, n=77, block=32), np.arange(77, dtype=np.int32))


@gpu
@needs_gpu
def test_load_cubin_from_ptxas():
    from gluonkit.lower.backend.ptxas import assemble
    require_ptxas()
    cubin, _ = assemble(STORE_TID_PTX, driver.device_properties().arch)
    module = load_module(cubin, STORE_TID_PTX)
    assert module.kind in ("cubin", "ptx")  # "ptx" when this ptxas is newer than the driver
    np.testing.assert_array_equal(_store_tid(module), np.arange(1000, dtype=np.int32))


@gpu
@needs_gpu
def test_scalar_parameters_reach_the_kernel():
    kernel = load_module(None, SCALARS_PTX).get_kernel("scalars")
    out = DeviceBuffer(6 * 8)
    signature = [ir.PointerType(ir.uint64), ir.uint32, ir.int64, ir.float32, ir.float64, ir.int1, ir.float16]
    packed = ArgPacker(signature, list("oabcdeh")).pack([out.ptr, 0xDEADBEEF, -5, 1.5, -2.25, True, -2.0])
    kernel.launch((1, 1, 1), (1, 1, 1), 0, 0, packed)
    result = np.zeros(6, np.uint64)
    out.copy_to_host(result)
    assert result.tolist() == [
        0xDEADBEEF, 2**64 - 5,
        struct.unpack("<I", struct.pack("<f", 1.5))[0],
        struct.unpack("<Q", struct.pack("<d", -2.25))[0],
        1,
        0xC000,  # float16 -2.0: sign 1, exponent 16 (10000), mantissa 0
    ]


@gpu
@needs_gpu
def test_dynamic_shared_memory_above_48k():
    kernel = load_module(None, SMEM_TOP_PTX).get_kernel("smem_top")
    nbytes, threads = 100 * 1024, 256
    out = DeviceBuffer(4 * threads)
    packed = ArgPacker([ir.PointerType(ir.int32), ir.uint32], ["out", "nbytes"]).pack([out.ptr, nbytes])
    kernel.launch((1, 1, 1), (threads, 1, 1), nbytes, 0, packed)
    driver.synchronize()
    result = np.zeros(threads, np.int32)
    out.copy_to_host(result)
    np.testing.assert_array_equal(result, np.arange(threads, dtype=np.int32))
    limit = driver.device_properties().max_shared_memory_per_block_optin
    with pytest.raises(OutOfResources, match=f"Required: {limit + 1}, Hardware limit: {limit}"):
        kernel.set_dynamic_shared_memory(limit + 1)


@gpu
@needs_gpu
def test_torch_tensor_arguments():
    torch = pytest.importorskip("torch")
    x = torch.zeros(300, dtype=torch.int32, device="cuda")
    assert ir_type_of(x, "x") == ir.PointerType(ir.int32)
    kernel = load_module(None, STORE_TID_PTX).get_kernel("store_tid")
    packed = ArgPacker([ir.PointerType(ir.int32), ir.int32], ["out", "n"]).pack([x, 300], device=driver.current_device())
    kernel.launch((3, 1, 1), (128, 1, 1), 0, 0, packed)
    torch.cuda.synchronize()
    assert x.cpu().tolist() == list(range(300))


@gpu
@needs_gpu
def test_do_bench_times_a_launch():
    kernel = load_module(None, STORE_TID_PTX).get_kernel("store_tid")
    n = 1 << 20
    out = DeviceBuffer(4 * n)
    packed = ArgPacker([ir.PointerType(ir.int32), ir.int32], ["out", "n"]).pack([out.ptr, n])

    def run():
        kernel.launch((n // 256, 1, 1), (256, 1, 1), 0, 0, packed)

    ms = do_bench(run, warmup=5, rep=20)
    assert 0 < ms < 10
    low, mid, high = do_bench(run, warmup=5, rep=20, quantiles=[0.2, 0.5, 0.8])
    assert 0 < low <= mid <= high


def test_bind_packs_once_and_launches_directly_after_the_first_call(monkeypatch):
    """``launch.bind``: the first call goes through the general launch (here a stand-in for the
    GPU path), later ones reuse one packed block and call the loaded kernel directly."""
    import gluonkit
    import gluonkit.language as gl
    from gluonkit.runtime import launch as rt_launch

    @gluonkit.jit
    def kernel(x_ptr, n, BLOCK: gl.constexpr):
        pass

    launched = []
    loaded = types.SimpleNamespace(launch=lambda grid, block, shared, stream, packed: launched.append(
        (grid, block, shared, packed, bytes(packed.buffer))))
    packer = ArgPacker([ir.PointerType(ir.float16), ir.int32], ["x_ptr", "n"])
    general = []
    entry = types.SimpleNamespace(kernel=loaded, packer=packer, block=(128, 1, 1), shared_bytes=64, tuple_args=False,
                                  num_ctas=1, device=0, compiled=types.SimpleNamespace(name="kernel"),
                                  run=lambda grid, values, *rest: general.append(grid))
    monkeypatch.delenv("GLUONKIT_INTERPRET", raising=False)
    monkeypatch.setattr(rt_launch, "has_gpu", lambda: True)
    monkeypatch.setattr(rt_launch, "_GPU_FOUND", False)
    monkeypatch.setattr(rt_launch, "load_for_launch", lambda *args: entry)
    x = FakeTorch(0x7F0000001000)
    run = rt_launch.bind(kernel, (4,), (x, 10), dict(BLOCK=64, num_warps=4))
    for _ in range(3):
        run()
    assert len(general) == 1 and len(launched) == 2
    (grid, block, shared, packed, data), second = launched
    assert (grid, block, shared) == ((4, 1, 1), (128, 1, 1), 64) and second[3] is packed and second[4] == data
    assert struct.pack("<Qi", 0x7F0000001000, 10) in data
