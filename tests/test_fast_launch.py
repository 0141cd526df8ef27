"""The GPU launch path without a GPU: ``kernel.warmup`` handles, argument selection and
checks, stream selection and the CUDA-graph-capture guard, with the driver replaced by a
recorder (compiling and loading are faked; what reaches ``cuLaunchKernel`` is checked).
The interpreter's warmed-up handle runs for real on numpy arrays."""

from __future__ import annotations

import ctypes
import re
import struct
import sys
import types

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from fakes import DLPackOnly, FakeCAI, FakeTorch
from gluonkit.lang.errors import ArgumentError
from gluonkit.lang.jit import JITFunction
from gluonkit.lower.compiler import CompiledKernel
from gluonkit import ir
from gluonkit.runtime import claunch, ctlaunch, fastlaunch, gpu, launch
from gluonkit.runtime.args import ArgPacker
from gluonkit.runtime.precompiled import PrecompiledKernel


@gluonkit.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: gl.constexpr):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, gl.BlockedLayout([1], [32], [4], [0]))
    mask = offs < n
    gl.store(out_ptr + offs, gl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


class RecordingKernel:
    """Stands for a loaded ``driver.Kernel``: records each launch's grid, stream and the
    argument block's values, from the general path's ``launch`` (unpacked with the packer's
    own format) and from the generated path's ``cuLaunchKernelEx`` (:func:`_fake_launch_ex`)."""

    def __init__(self, packer, shared_bytes=0):
        self.packer = packer
        self.launches = []
        # the generated path's (block, dynamic shared memory, config address, (attrs, numAttrs, extra)) of each launch
        self.configs = []
        self.misaligned = []  # (code, address) of parameters the generated path placed off their alignment
        self.handle = id(self)  # what the generated path passes as the CUfunction
        self._dynamic_checked = shared_bytes
        RECORDERS[self.handle] = self

    def launch(self, grid, block, shared_bytes, stream, packed):
        values = self.packer._format.unpack_from(packed.buffer, packed.offset)
        self.launches.append((tuple(grid), stream, values))


RECORDERS = {}  # CUfunction handle -> RecordingKernel
_CODES = re.compile(r"(\d*)([a-zA-Z?])")


def _parameter_codes(packer):
    """The struct code of each kernel parameter of ``packer``'s format (padding left out)."""
    return [count + code for count, code in _CODES.findall(packer._format.format) if code != "x"]


def _fake_launch_ex(config, function, params, extra):
    """libcuda's ``cuLaunchKernelEx`` as the generated launch calls it through ctypes: reads the
    ``CUlaunchConfig`` and every parameter through its own address in the ``void*[]``."""
    grid_and_block = struct.unpack_from("<7I4xQQI", ctypes.string_at(config, 56))
    kernel = RECORDERS[function]
    codes = _parameter_codes(kernel.packer)
    addresses = (ctypes.c_void_p * len(codes)).from_address(params) if codes else []
    values = tuple(v for code, address in zip(codes, addresses)
                   for v in struct.unpack("<" + code, ctypes.string_at(address, struct.calcsize("<" + code))))
    kernel.misaligned += [(code, address) for code, address in zip(codes, addresses)
                          if address % (64 if code == "128s" else struct.calcsize("<" + code))]
    kernel.configs.append((grid_and_block[3:6], grid_and_block[6], config, grid_and_block[8:] + (extra,)))
    kernel.launches.append((grid_and_block[:3], grid_and_block[7], values))
    return 0


LAUNCH_EX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p)(_fake_launch_ex)


@pytest.fixture(params=["C launcher", "ctypes"])
def fake_gpu(monkeypatch, request):
    """A GPU 'found', compiling faked, streams asked of a fake driver; yields the compile log.
    Each test runs twice: generated launches ending in the C launcher (built here with the
    machine's compiler: the test fails where it cannot be built), and ending in ctypes."""
    monkeypatch.delenv("GLUONKIT_INTERPRET", raising=False)
    if request.param == "ctypes":
        monkeypatch.setattr(claunch, "module", lambda: None)
    else:
        assert claunch.module() is not None, claunch.why_not()
    monkeypatch.setattr(launch, "_GPU_FOUND", True)
    monkeypatch.setattr(ctlaunch, "entry_point", lambda: LAUNCH_EX)
    RECORDERS.clear()
    compiled = []

    def compile_and_load(kernel, names, keys, constexprs, num_warps, no_specialize, maxnreg, num_ctas=1, instrument=0):
        packer = ArgPacker([ty for ty, _ in keys], names)
        compiled.append((dict(constexprs), [div for _, div in keys]))
        return gpu.CompiledLaunch(CompiledKernel(kernel.__name__, "sm_90a"), RecordingKernel(packer), packer,
                                  (num_warps * 32, 1, 1), 0, 0)

    monkeypatch.setattr(gpu, "_compile_and_load", compile_and_load)
    capturing = {"status": 0}
    monkeypatch.setattr(gpu.driver, "device_count", lambda: 2)  # tensors' devices are checked with get_device()
    monkeypatch.setattr(gpu.driver, "ensure_context", lambda: None)
    monkeypatch.setattr(gpu.driver, "call", lambda name, *args: capturing["status"])
    monkeypatch.setattr(gpu, "_launches", type(gpu._launches)())
    monkeypatch.setattr(launch, "_PATTERNS", {})
    for kernel in [v for v in globals().values() if isinstance(v, JITFunction)]:
        monkeypatch.setattr(kernel, "_fast_launch", None)  # no kernel keeps a generated launch of another test's entry
    yield types.SimpleNamespace(compiled=compiled, capturing=capturing)


@pytest.fixture
def fake_torch(monkeypatch):
    """``sys.modules['torch']`` with initialized CUDA whose current raw stream is settable."""
    state = {"stream": 0xABC0}
    c = types.SimpleNamespace(_cuda_getDevice=lambda: 0, _cuda_getCurrentRawStream=lambda device: state["stream"])
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: True), _C=c)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(gpu, "_torch_cuda", None)
    return state


def _launches_of(handle):
    return handle._entry.kernel.launches


def test_warmup_compiles_without_launching_and_the_handle_launches(fake_gpu):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    handle = scale_kernel.warmup(x, out, 100, 2.5, BLOCK=128, grid=(1,))
    assert isinstance(handle, PrecompiledKernel)
    assert fake_gpu.compiled == [({"BLOCK": 128}, [True, True, False, False])]
    assert _launches_of(handle) == []
    y = FakeTorch(0x30000, dtype="float32")
    handle[(4,)](y, out, 200, 0.5)  # runtime arguments only
    handle[(2, 3)](x, out, 300, 1.5, 128)  # every parameter; the constexpr's value is ignored
    assert _launches_of(handle) == [((4, 1, 1), 0, (0x30000, 0x20000, 200, 0.5)),
                                    ((2, 3, 1), 0, (0x10000, 0x20000, 300, 1.5))]
    assert len(fake_gpu.compiled) == 1


def test_after_warmup_the_ordinary_launch_finds_the_kernel_loaded(fake_gpu):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    handle = scale_kernel.warmup(x, out, 100, 2.5, BLOCK=128, grid=(1,))
    scale_kernel[(3,)](x, out, 100, 2.5, BLOCK=128)
    assert len(fake_gpu.compiled) == 1
    assert _launches_of(handle) == [((3, 1, 1), 0, (0x10000, 0x20000, 100, 2.5))]


def test_run_with_warmup_true_is_warmup(fake_gpu):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    handle = scale_kernel.run(x, out, 100, 2.5, grid=(1,), warmup=True, BLOCK=64)
    assert isinstance(handle, PrecompiledKernel) and _launches_of(handle) == []
    assert fake_gpu.compiled == [({"BLOCK": 64}, [True, True, False, False])]


@pytest.mark.parametrize("args, message", [
    ((FakeTorch(0x10000, dtype="float16"), FakeTorch(0x20000, dtype="float32"), 100, 2.5), "'x_ptr'"),
    ((FakeTorch(0x10004, dtype="float32"), FakeTorch(0x20000, dtype="float32"), 100, 2.5), "'x_ptr'"),
    ((FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32"), 2**40, 2.5), "'n'"),
    ((FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32"), 100, 2), "'factor'"),
    ((FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32"), 100), "positionally; got 3"),
])
def test_the_handle_refuses_arguments_of_another_specialization(fake_gpu, args, message):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    handle = scale_kernel.warmup(x, out, 100, 2.5, BLOCK=128, grid=(1,))
    with pytest.raises(ArgumentError, match=message) as info:
        handle[(1,)](*args)
    assert "def scale_kernel(" in str(info.value)  # the kernel's def line
    assert _launches_of(handle) == []


@pytest.mark.parametrize("grid", [(), (1, 2, 3, 4), (-1,), (1.0,), [1], 4])
def test_the_handle_checks_its_grid_once(fake_gpu, grid):
    handle = scale_kernel.warmup(FakeTorch(dtype="float32"), FakeTorch(dtype="float32"), 8, 1.0, BLOCK=32, grid=(1,))
    with pytest.raises(ArgumentError, match="grid of 1 to 3 non-negative ints"):
        handle[grid]


def test_the_handle_takes_numpy_integers_in_its_grid(fake_gpu):
    x, out = FakeTorch(dtype="float32"), FakeTorch(dtype="float32")
    handle = scale_kernel.warmup(x, out, 8, 1.0, BLOCK=32, grid=(1,))
    handle[(np.int64(3), np.int32(2))](x, out, 8, 1.0)
    assert _launches_of(handle)[0][0] == (3, 2, 1)


def test_an_empty_grid_checks_the_arguments_and_launches_nothing(fake_gpu):
    x, out = FakeTorch(dtype="float32"), FakeTorch(dtype="float32")
    handle = scale_kernel.warmup(x, out, 8, 1.0, BLOCK=32, grid=(1,))
    handle[(0, 4)](x, out, 8, 1.0)
    assert _launches_of(handle) == []
    with pytest.raises(ArgumentError):
        handle[(0,)](x, out, 8, 1)


def test_launches_go_on_torchs_current_stream_or_the_given_one(fake_gpu, fake_torch):
    x, out = FakeTorch(dtype="float32"), FakeTorch(dtype="float32")
    scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)
    fake_torch["stream"] = 0xDEF0
    scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)  # the fast path asks again
    handle = scale_kernel.warmup(x, out, 8, 1.0, BLOCK=32, grid=(1,))
    handle[(1,)](x, out, 8, 1.0)
    handle[(1,)](x, out, 8, 1.0, stream=0x1230)
    handle[(1,)](x, out, 8, 1.0, stream=types.SimpleNamespace(cuda_stream=0x4560))  # a torch.cuda.Stream
    handle[(1,)](x, out, 8, 1.0, stream=types.SimpleNamespace(ptr=0x7890))  # a CuPy stream
    assert [stream for _, stream, _ in _launches_of(handle)] == [0xABC0, 0xDEF0, 0xDEF0, 0x1230, 0x4560, 0x7890]
    with pytest.raises(TypeError, match="stream must be a CUDA stream"):
        handle[(1,)](x, out, 8, 1.0, stream="default")


def test_without_torch_launches_use_the_legacy_default_stream(fake_gpu, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(gpu, "_torch_cuda", None)
    assert gpu.current_stream() == 0


def test_a_first_compile_during_graph_capture_says_to_warm_up(fake_gpu, fake_torch):
    x, out = FakeTorch(dtype="float32"), FakeTorch(dtype="float32")
    fake_gpu.capturing["status"] = 1  # CU_STREAM_CAPTURE_STATUS_ACTIVE
    with pytest.raises(gpu.GraphCaptureError, match=r"scale_kernel.warmup\(") as info:
        scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)
    assert "before capturing" in str(info.value)
    assert fake_gpu.compiled == []
    fake_gpu.capturing["status"] = 0
    scale_kernel.warmup(x, out, 8, 1.0, BLOCK=32, grid=(1,))
    fake_gpu.capturing["status"] = 1
    scale_kernel[(2,)](x, out, 8, 1.0, BLOCK=32)  # loaded before the capture: recorded like any launch
    assert len(fake_gpu.compiled) == 1


def test_the_interpreters_handle_runs_the_kernel(monkeypatch):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    rng = np.random.default_rng(1)
    x = rng.standard_normal(100).astype(np.float32)
    out = np.full(100, np.nan, dtype=np.float32)
    handle = scale_kernel.warmup(x, out, 100, 3.0, BLOCK=32, grid=(4,))
    assert np.isnan(out).all()  # warming up runs nothing
    handle[(4,)](x, out, 100, -0.5)
    np.testing.assert_array_equal(out, (x.astype(np.float64) * -0.5).astype(np.float32))


def test_the_ordinary_launch_switches_specializations_correctly(fake_gpu):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    unaligned = FakeTorch(0x10004, dtype="float32")
    calls = [(x, 32), (x, 64), (x, 32), (unaligned, 32), (x, 32), (unaligned, 32)]
    for source, block in calls:
        scale_kernel[(1,)](source, out, 8, 1.0, BLOCK=block)
    assert fake_gpu.compiled == [({"BLOCK": 32}, [True, True, False, False]),
                                 ({"BLOCK": 64}, [True, True, False, False]),
                                 ({"BLOCK": 32}, [False, True, False, False])]
    entries = list(gpu._launches[scale_kernel].values())
    launched = [(i, values[0]) for i, entry in enumerate(entries) for _, _, values in entry.kernel.launches]
    assert sorted(launched) == [(0, 0x10000), (0, 0x10000), (0, 0x10000), (1, 0x10000), (2, 0x10004), (2, 0x10004)]


def test_a_collected_kernel_leaves_no_launch_patterns(fake_gpu):
    import gc

    kernel = gluonkit.jit(scale_kernel.fn)
    kernel[(1,)](FakeTorch(dtype="float32"), FakeTorch(dtype="float32"), 8, 1.0, BLOCK=32)
    key = id(kernel)
    assert key in launch._PATTERNS and kernel._fast_launch is not None
    del kernel
    gc.collect()
    assert key not in launch._PATTERNS


def _recorded(kernel):
    """(grid, argument block values) of every launch of ``kernel``'s loaded entries, in entry order."""
    return [(grid, values) for entry in gpu._launches[kernel].values() for grid, _, values in entry.kernel.launches]


def _fast_launched(kernel):
    """How many launches of ``kernel`` went through the generated launch (the fake ``cuLaunchKernelEx``)."""
    return sum(len(entry.kernel.configs) for entry in gpu._launches[kernel].values())


def test_a_repeated_call_takes_the_generated_launch_with_the_new_values(fake_gpu):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)
    fast = scale_kernel._fast_launch
    assert "data_ptr()" in fast.source and "BLOCK=_M" in fast.source
    assert ("_claunch(" in fast.source) == (claunch.module() is not None)  # which launcher ends the launch
    assert scale_kernel[(1,)].func is fast  # kernel[grid] is the generated launch with the grid bound
    y = FakeTorch(0x30000, dtype="float32")
    fast((2, 3), y, out, 40, -2.5, BLOCK=32)
    scale_kernel[(5,)](x, y, 1608, 0.25, BLOCK=32)
    assert len(fake_gpu.compiled) == 1 and _fast_launched(scale_kernel) == 2
    assert _recorded(scale_kernel) == [((1, 1, 1), (0x10000, 0x20000, 8, 1.0)),
                                       ((2, 3, 1), (0x30000, 0x20000, 40, -2.5)),
                                       ((5, 1, 1), (0x10000, 0x30000, 1608, 0.25))]
    block, shared, _, _ = next(iter(gpu._launches[scale_kernel].values())).kernel.configs[0]
    assert block == (128, 1, 1) and shared == 0


@pytest.mark.parametrize("change, compiles", [
    (dict(x=FakeTorch(0x10000, dtype="float16")), True),  # another dtype
    (dict(x=FakeTorch(0x10008, dtype="float32")), True),  # not 16-byte aligned
    (dict(n=7), True),  # not divisible by 16
    (dict(n=2**40), True),  # int64
    (dict(factor=2), True),  # an int where a float was
    (dict(BLOCK=64), True),  # another compile-time value
    (dict(BLOCK=32.0), False),  # an equal value of another type: the same kernel, through the general path
])
def test_the_generated_launch_hands_every_other_specialization_to_the_general_path(fake_gpu, change, compiles):
    call = dict(x=FakeTorch(0x10000, dtype="float32"), out=FakeTorch(0x20000, dtype="float32"), n=16, factor=1.0,
                BLOCK=32)
    scale_kernel[(1,)](call["x"], call["out"], call["n"], call["factor"], BLOCK=call["BLOCK"])
    fast = scale_kernel._fast_launch
    call.update(change)
    fast((1,), call["x"], call["out"], call["n"], call["factor"], BLOCK=call["BLOCK"])
    assert len(fake_gpu.compiled) == 1 + compiles
    assert _fast_launched(scale_kernel) == 0 and len(_recorded(scale_kernel)) == 2
    assert _recorded(scale_kernel)[-1][1][2] == call["n"]


def test_a_tensor_on_another_device_gets_the_general_paths_error(fake_gpu):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 16, 1.0, BLOCK=32)
    with pytest.raises(ArgumentError, match="'x_ptr'"):
        scale_kernel[(1,)](FakeTorch(0x10000, dtype="float32", index=1), out, 16, 1.0, BLOCK=32)
    assert len(_recorded(scale_kernel)) == 1


def test_with_one_device_the_generated_check_reads_is_cuda_and_still_refuses_host_tensors(fake_gpu, monkeypatch):
    monkeypatch.setattr(gpu.driver, "device_count", lambda: 1)
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 16, 1.0, BLOCK=32)
    source = scale_kernel._fast_launch.source
    assert "not _p0.is_cuda" in source and "get_device" not in source
    scale_kernel[(2,)](out, x, 32, 2.0, BLOCK=32)
    with pytest.raises(ArgumentError, match="'x_ptr'.*cpu"):
        scale_kernel[(1,)](FakeTorch(0x10000, dtype="float32", device_type="cpu"), out, 16, 1.0, BLOCK=32)
    assert _fast_launched(scale_kernel) == 1
    assert _recorded(scale_kernel) == [((1, 1, 1), (0x10000, 0x20000, 16, 1.0)), ((2, 1, 1), (0x20000, 0x10000, 32, 2.0))]


@pytest.mark.parametrize("call", [
    lambda k, x, out: k(x, out, 16, 1.0, 32),  # BLOCK positionally
    lambda k, x, out: k(x, out, n=16, factor=1.0, BLOCK=32),  # other keywords
    lambda k, x, out: k(x, out, 16, 1.0, BLOCK=32, num_warps=4),  # one more keyword
    lambda k, x, out: k(x, out, 16, factor=1.0, BLOCK=32),
])
def test_other_call_patterns_go_to_the_general_path_with_their_arguments(fake_gpu, call):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 16, 1.0, BLOCK=32)
    call(scale_kernel[(2,)], x, out)
    assert len(fake_gpu.compiled) == 1 and _fast_launched(scale_kernel) == 0
    assert _recorded(scale_kernel)[-1] == ((2, 1, 1), (0x10000, 0x20000, 16, 1.0))


def test_a_missing_or_unknown_argument_gets_the_general_paths_error(fake_gpu):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 16, 1.0, BLOCK=32)
    with pytest.raises(ArgumentError, match="missing a required argument: 'factor'"):
        scale_kernel[(1,)](x, out, 16, BLOCK=32)
    with pytest.raises(ArgumentError, match="unexpected keyword argument '_p0'"):
        scale_kernel[(1,)](x, out, 16, 1.0, BLOCK=32, _p0=3)  # never taken for a positional argument
    assert len(_recorded(scale_kernel)) == 1


def test_kernel_grid_reuses_its_partial_for_the_same_grid_object_only(fake_gpu):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)
    grid = (2,)
    launcher = scale_kernel[grid]
    assert scale_kernel[grid] is launcher and launcher.args == (grid,)
    equal = scale_kernel[(2.0,)]  # equal to grid and hashing alike, but another object: bound anew
    assert equal is not launcher and equal.args == ((2.0,),)
    with pytest.raises(ArgumentError, match="grid"):
        equal(x, out, 8, 1.0, BLOCK=32)
    launcher(x, out, 8, 1.0, BLOCK=32)
    scale_kernel[(1,)](x, out, 16, 1.0, BLOCK=64)  # another specialization: another generated launch
    assert scale_kernel[grid] is not launcher and scale_kernel[grid].func is scale_kernel._fast_launch
    assert [g for g, _ in _recorded(scale_kernel)] == [(1, 1, 1), (2, 1, 1), (1, 1, 1)]


def test_a_parameter_named_like_the_generated_codes_names_gets_no_generated_launch(fake_gpu):
    @gluonkit.jit
    def underscored(x_ptr, _stream, BLOCK: gl.constexpr):
        gl.store(x_ptr + gl.arange(0, BLOCK, gl.BlockedLayout([1], [32], [4], [0])), _stream.to(gl.float32))

    x = FakeTorch(0x10000, dtype="float32")
    underscored[(1,)](x, _stream=5, BLOCK=128)
    assert underscored._fast_launch is None
    underscored[(1,)](x, 5, BLOCK=128)  # passed positionally: no clash
    assert underscored._fast_launch is not None


@pytest.mark.parametrize("grid, error", [((0,), None), ((2, 0), None), ((-1,), "grid"), ((1, 1, 1, 1), "grid"),
                                         (lambda meta: (3,), None)])
def test_the_generated_launch_leaves_empty_and_bad_grids_to_the_general_path(fake_gpu, grid, error):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)
    if error:
        with pytest.raises(ArgumentError, match=error):
            scale_kernel._fast_launch(grid, x, out, 8, 1.0, BLOCK=32)
    else:
        scale_kernel._fast_launch(grid, x, out, 8, 1.0, BLOCK=32)
    assert _fast_launched(scale_kernel) == 0
    assert [grid for grid, _ in _recorded(scale_kernel)] == [(1, 1, 1)] + ([(3, 1, 1)] if callable(grid) else [])


def test_mistakes_after_a_fast_launch_get_the_general_paths_errors(fake_gpu):
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)
    with pytest.raises(ArgumentError, match="'x_ptr'.*cpu"):
        scale_kernel[(1,)](FakeTorch(0x10000, dtype="float32", device_type="cpu"), out, 8, 1.0, BLOCK=32)
    with pytest.raises(ArgumentError, match="'factor'.*overflows"):  # a float the fp32 block cannot hold
        scale_kernel[(1,)](x, out, 8, 1e300, BLOCK=32)
    with pytest.raises(ArgumentError, match="grid"):
        scale_kernel[(-1,)](x, out, 8, 1.0, BLOCK=32)
    scale_kernel[(0,)](x, out, 8, 1.0, BLOCK=32)  # nothing to run
    assert len(_recorded(scale_kernel)) == 1


def test_the_interpreter_or_a_measured_timeline_bypass_the_generated_launch(fake_gpu, monkeypatch):
    from gluonkit.runtime import timeline

    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)
    fast = scale_kernel._fast_launch
    general = []
    monkeypatch.setattr(launch, "launch", lambda kernel, grid, args, kwargs: general.append((kernel, args, kwargs)))
    monkeypatch.setattr(timeline, "_active", object())
    fast((1,), x, out, 8, 1.0, BLOCK=32)
    assert general == [(scale_kernel, (x, out, 8, 1.0), {"BLOCK": 32})]
    monkeypatch.setattr(timeline, "_active", None)
    monkeypatch.setenv("GLUONKIT_INTERPRET", "0")  # set but off: still the GPU
    fast((1,), x, out, 8, 1.0, BLOCK=32)
    assert len(general) == 1 and _fast_launched(scale_kernel) == 1
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")
    fast((1,), x, out, 8, 1.0, BLOCK=32)
    assert len(general) == 2 and _fast_launched(scale_kernel) == 1


def test_each_thread_packs_its_own_argument_block(fake_gpu):
    import threading

    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)  # the general path
    launched, done = threading.Event(), threading.Event()

    def other_thread():  # alive (and so its block) until this thread has launched too
        scale_kernel[(1,)](x, out, 24, 2.0, BLOCK=32)
        launched.set()
        done.wait(10)

    thread = threading.Thread(target=other_thread)
    thread.start()
    launched.wait(10)
    scale_kernel[(1,)](x, out, 40, 3.0, BLOCK=32)
    done.set()
    thread.join()
    configs = next(iter(gpu._launches[scale_kernel].values())).kernel.configs
    assert len(configs) == 2 and configs[0][2] != configs[1][2]  # two blocks
    assert all(config[2] % 64 == 0 for config in configs)
    assert [values for _, values in _recorded(scale_kernel)[1:]] == [(0x10000, 0x20000, 24, 2.0),
                                                                     (0x10000, 0x20000, 40, 3.0)]


@pytest.mark.parametrize("wrap", [lambda a: FakeCAI(a.ctypes.data), lambda a: DLPackOnly(a)])
def test_cuda_array_interface_and_dlpack_arguments_specialize_on_their_alignment(fake_gpu, wrap):
    base = np.zeros(64, dtype=np.float32)  # numpy's allocations are 16-byte aligned
    aligned, unaligned = base[4:], base[1:]
    out = FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](wrap(aligned), out, 8, 1.0, BLOCK=32)
    scale_kernel[(1,)](wrap(unaligned), out, 8, 1.0, BLOCK=32)
    assert [divisible for _, divisible in fake_gpu.compiled] == [[True, True, False, False],
                                                                 [False, True, False, False]]
    handle = scale_kernel.warmup(wrap(aligned), out, 8, 1.0, BLOCK=32, grid=(1,))
    handle[(2,)](wrap(aligned), out, 8, 2.0)
    with pytest.raises(ArgumentError, match="'x_ptr'"):
        handle[(2,)](wrap(unaligned), out, 8, 2.0)
    assert _launches_of(handle)[-1] == ((2, 1, 1), 0, (aligned.ctypes.data, 0x20000, 8, 2.0))


@gluonkit.jit
def kinds_kernel(desc, x_ptr, n, big, alpha, flag, BLOCK: gl.constexpr, out_ptr):
    gl.store(out_ptr + gl.arange(0, BLOCK, gl.BlockedLayout([1], [32], [4], [0])), alpha)


def _descriptor(address, block=(64, 64)):
    from gluonkit.layouts import NVMMASharedLayout
    from gluonkit.nvidia.hopper import TensorDescriptor

    base = FakeTorch(address, shape=(256, 512), strides=(512, 1), dtype="float16")
    return TensorDescriptor(base, (256, 300), (512, 1), block, NVMMASharedLayout(128, 16))


def test_every_parameter_kind_reaches_the_driver_as_its_bytes(fake_gpu, fake_torch, monkeypatch):
    """A tensor map by value (128 bytes, 64-byte aligned), its int32 shape and int64 strides, a
    pointer, int32, int64, float32 and bool scalars; the constexpr leaves no parameter."""
    from gluonkit.runtime import tma

    maps = iter([bytes(range(128)), bytes(range(128, 256)), bytes(range(7, 135))])
    monkeypatch.setattr(tma, "encode_tiled", lambda desc: next(maps))
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    kinds_kernel[(1,)](_descriptor(0x30000), x, 16, -2**40, 0.5, True, 128, out)  # general path: compiles
    fake_torch["stream"] = 0x5550
    kinds_kernel[(3, 2)](_descriptor(0x40000), x, 48, 2**62 + 16, -1.25, False, 128, out)
    kinds_kernel[(1, 1, 4)](_descriptor(0x50000), out, 32, -7 * 2**33, 3.0, True, 128, x)
    entry = next(iter(gpu._launches[kinds_kernel].values()))
    assert _parameter_codes(entry.packer) == ["128s", "i", "i", "q", "q", "Q", "i", "q", "f", "b", "Q"]
    assert _recorded(kinds_kernel) == [
        ((1, 1, 1), (bytes(range(128)), 256, 300, 512, 1, 0x10000, 16, -2**40, 0.5, 1, 0x20000)),
        ((3, 2, 1), (bytes(range(128, 256)), 256, 300, 512, 1, 0x10000, 48, 2**62 + 16, -1.25, 0, 0x20000)),
        ((1, 1, 4), (bytes(range(7, 135)), 256, 300, 512, 1, 0x20000, 32, -7 * 2**33, 3.0, 1, 0x10000))]
    assert [stream for _, stream, _ in entry.kernel.launches] == [0xABC0, 0x5550, 0x5550]
    assert len(entry.kernel.configs) == 2
    assert all(config[:2] == ((128, 1, 1), 0) and config[3] == (0, 0, None) for config in entry.kernel.configs)
    assert entry.kernel.misaligned == []  # the tensor map at 64 bytes, every other value at its own size


def test_the_tensor_map_is_64_byte_aligned_in_the_launch_block():
    from gluonkit.runtime.args import ArgPacker

    packer = ArgPacker([ir.PointerType(ir.float32), ir.TensorDescType((64, 64), ir.float16, None)], ["p", "d"])
    block = ctlaunch.LaunchBlock(packer._format.size, packer._offsets)
    addresses = (ctypes.c_void_p * 5).from_address(block.params.value)
    assert block.config.value % 64 == 0 and addresses[0] == block.config.value + 64
    assert addresses[1] % 64 == 0 and addresses[1] == block.config.value + 128
    assert [a - addresses[1] for a in addresses[2:]] == [128, 132, 136]


def test_a_cluster_launch_asks_num_ctas_times_the_programs_and_the_config_carries_the_shared_memory(fake_gpu):
    packer = ArgPacker([ir.int32], ["n"])
    kernel = RecordingKernel(packer, shared_bytes=65536)
    entry = gpu.CompiledLaunch(CompiledKernel("k", "sm_90a"), kernel, packer, (256, 1, 1), 65536, 0, num_ctas=2)
    fast = fastlaunch.build(entry, [(int, 32, True)], [0], lambda *a: pytest.fail("declined"), kind=fastlaunch.HANDLE,
                            stream_of=lambda device: 0x77)
    fast((5, 3), 64)
    assert kernel.launches == [((10, 3, 1), 0x77, (64,))] and kernel.configs[0][:2] == ((256, 1, 1), 65536)


def test_without_libcuda_there_is_no_generated_launch(fake_gpu, monkeypatch):
    monkeypatch.setattr(ctlaunch, "entry_point", lambda: None)
    x, out = FakeTorch(0x10000, dtype="float32"), FakeTorch(0x20000, dtype="float32")
    scale_kernel[(1,)](x, out, 8, 1.0, BLOCK=32)
    scale_kernel[(2,)](x, out, 8, 1.0, BLOCK=32)
    assert scale_kernel._fast_launch is None and len(_recorded(scale_kernel)) == 2
