"""The C launcher (:mod:`gluonkit.runtime.claunch`) without a GPU: built here with the machine's
compiler (the tests fail where it cannot be), called with a fake ``cuLaunchKernelEx`` (a ctypes
callback) that reads the ``CUlaunchConfig`` and every parameter through its own address.

Reference: ``struct`` packing the same values with the packer's format, so the C launcher
writes exactly the bytes the ctypes path writes; values that do not fit raise the errors the
generated launch turns into "use the general path" before anything is launched."""

from __future__ import annotations

import ctypes
import math
import struct

import pytest
from hypothesis import given, strategies as st

from gluonkit import ir
from gluonkit.runtime import claunch
from gluonkit.runtime.args import ArgPacker

LAUNCH_EX = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
CODES = ["b", "B", "h", "H", "i", "I", "q", "Q", "f", "d", "128s"]
RANGES = {code: (-2**(8 * size - 1), 2**(8 * size - 1) - 1) if code.islower() else (0, 2**(8 * size) - 1)
          for code, size in [("b", 1), ("B", 1), ("h", 2), ("H", 2), ("i", 4), ("I", 4), ("q", 8), ("Q", 8)]}


class FakeDriver:
    """``cuLaunchKernelEx``: records (config fields, function, raw bytes of each parameter,
    each parameter's address, extra) and returns ``status``."""

    def __init__(self, sizes, status=0):
        self.sizes, self.status, self.calls = sizes, status, []
        self.function = LAUNCH_EX(self._launch)
        self.address = ctypes.cast(self.function, ctypes.c_void_p).value

    def _launch(self, config, function, params, extra):
        fields = struct.unpack("<7I4xQQI", ctypes.string_at(config, 52))
        addresses = list((ctypes.c_void_p * len(self.sizes)).from_address(params)) if self.sizes else []
        raw = [ctypes.string_at(a, n) for a, n in zip(addresses, self.sizes)]
        self.calls.append((fields, function, raw, addresses, extra, config))
        return self.status


def _layout(codes):
    """A packer's format, offsets and size for these parameter codes (the real ArgPacker's rules)."""
    types = {"b": ir.int8, "B": ir.uint8, "h": ir.int16, "H": ir.uint16, "i": ir.int32, "I": ir.uint32,
             "q": ir.int64, "Q": ir.uint64, "f": ir.float32, "d": ir.float64}
    signature = [ir.TensorDescType((64, 64), ir.float16, None) if c == "128s" else types[c] for c in codes]
    packer = ArgPacker(signature, [f"p{i}" for i in range(len(codes))])
    return packer._format.format, packer._offsets, packer._format.size


def _plan(codes, driver=None, ctas=1, release=True, block=(128, 2, 1), shared=4096):
    fmt, offsets, size = _layout(codes)
    sizes = [struct.calcsize("<" + c) for c in _parameter_codes(fmt)]
    driver = driver or FakeDriver(sizes)
    plan = claunch.plan(driver.address, 0xF00D, block, shared, ctas, fmt, offsets, size, release)
    assert plan is not None, claunch.why_not()
    return plan, driver, fmt


def _parameter_codes(fmt):
    out, count = [], ""
    for c in fmt.lstrip("<"):
        if c.isdigit():
            count += c
        else:
            if c != "x":
                out.append(count + c)
            count = ""
    return out


@pytest.fixture(autouse=True, scope="module")
def built():
    module = claunch.module()
    assert module is not None, claunch.why_not()
    return module


def test_every_code_reaches_the_driver_as_structs_bytes_at_its_alignment(built):
    codes = ["b", "q", "128s", "H", "i", "f", "Q", "d", "B", "h", "I", "i", "q"]  # a descriptor is (map, shape, strides)
    plan, driver, fmt = _plan(codes, ctas=2)
    values = [-5, -2**40, bytes(range(128)), 256, 300, 512, 1, 60000, -2**31, 1.0e-3, 2**64 - 1, 2.5e-300, 255,
              -32768, 2**32 - 1, 7, 2**63 - 1]
    assert built.launch(plan, (3, 2), 0xABC0, *values) == 0
    (fields, function, raw, addresses, extra, config), = driver.calls
    assert fields == (6, 2, 1, 128, 2, 1, 4096, 0xABC0, 0, 0) and function == 0xF00D and extra is None
    expected = [struct.pack("<" + c, v) for c, v in zip(_parameter_codes(fmt), values)]
    assert raw == expected
    assert addresses[2] % 64 == 0 and config % 64 == 0
    assert all(a % struct.calcsize("<" + c) == 0 for a, c in zip(addresses, _parameter_codes(fmt)) if c != "128s")


@given(st.data())
def test_random_values_pack_as_struct_packs_them(data):
    codes = data.draw(st.lists(st.sampled_from(CODES[:-1]), min_size=0, max_size=12))
    values = [data.draw(st.integers(*RANGES[c])) if c in RANGES
              else data.draw(st.floats(width=32 if c == "f" else 64, allow_nan=False)) for c in codes]
    grid = tuple(data.draw(st.lists(st.integers(1, 2**32 - 1), min_size=1, max_size=3)))
    plan, driver, fmt = _plan(codes, block=(32, 1, 1), shared=0)
    assert claunch.module().launch(plan, grid, 7, *values) == 0
    (fields, _, raw, _, _, _), = driver.calls
    assert fields[:3] == grid + (1,) * (3 - len(grid))
    assert raw == [struct.pack("<" + c, v) for c, v in zip(codes, values)]


@pytest.mark.parametrize("code", sorted(RANGES))
def test_an_integer_out_of_its_codes_range_raises_and_launches_nothing(built, code):
    plan, driver, _ = _plan([code])
    low, high = RANGES[code]
    for bad in (low - 1, high + 1, 2**64, -2**64):
        with pytest.raises(OverflowError):
            built.launch(plan, (1,), 0, bad)
    with pytest.raises(TypeError):
        built.launch(plan, (1,), 0, 1.5)
    assert built.launch(plan, (1,), 0, True) == 0  # a bool is an int, as struct takes it
    assert len(driver.calls) == 1


def test_floats_tensor_maps_and_the_argument_count_are_checked(built):
    plan, driver, _ = _plan(["f", "d"])
    with pytest.raises(OverflowError):
        built.launch(plan, (1,), 0, 3.5e38, 1.0)  # rounds to infinity in float32
    with pytest.raises(TypeError):
        built.launch(plan, (1,), 0, "1.0", 1.0)
    with pytest.raises(TypeError, match="1 values for 2 parameters"):
        built.launch(plan, (1,), 0, 1.0)
    assert built.launch(plan, (1,), 0, math.inf, -math.inf) == 0  # infinities are values of their own
    plan, _, _ = _plan(["128s", "i", "i", "q", "q"])
    for bad in (b"x" * 127, bytearray(128), "x" * 128):
        with pytest.raises((ValueError, TypeError)):
            built.launch(plan, (1,), 0, bad, 1, 1, 1, 1)
    assert [len(call[2]) for call in driver.calls] == [2]


@pytest.mark.parametrize("grid, error", [
    ((0,), OverflowError), ((1, -1), OverflowError), ((2**32,), OverflowError), ((1, 1, 1, 1), TypeError),
    ((), TypeError), ([1], TypeError), ((1.0,), TypeError), (None, TypeError),
    ((2**31,), OverflowError),  # times 2 CTAs per cluster: past 2**32 - 1
])
def test_a_grid_the_driver_cannot_take_raises_and_launches_nothing(built, grid, error):
    plan, driver, _ = _plan(["i"], ctas=2)
    with pytest.raises(error):
        built.launch(plan, grid, 0, 1)
    with pytest.raises(OverflowError):
        built.launch(plan, (1,), -1, 1)  # a stream is an address
    assert driver.calls == []


@pytest.mark.parametrize("release", [True, False])
def test_the_drivers_result_is_returned_with_or_without_releasing_the_gil(built, release):
    plan, driver, _ = _plan([], driver=FakeDriver([], status=700), release=release)
    assert built.launch(plan, (1, 1, 1), 0) == 700
    (fields, _, raw, addresses, _, _), = driver.calls
    assert raw == [] and fields[:3] == (1, 1, 1)


def test_plans_it_cannot_serve_are_none():
    assert claunch.plan(1, 2, (32, 1, 1), 0, 1, "<e", (0,), 2) is None  # float16 by struct code: not packed in C
    assert claunch.plan(1, 2, (32, 1, 1), 0, 1, "<" + "Q" * 600, tuple(range(0, 4800, 8)), 4800) is None  # past 4 KB


def test_without_a_compiler_or_when_switched_off_there_is_no_c_launcher(monkeypatch, tmp_path):
    monkeypatch.setenv("GLUONKIT_CACHE_DIR", str(tmp_path))
    for reset in ("_module", "_reason"):
        monkeypatch.setattr(claunch, reset, None)
    monkeypatch.setattr(claunch, "_tried", False)
    monkeypatch.setattr(claunch, "compiler", lambda: None)
    assert claunch.module() is None and "no C compiler" in claunch.why_not()
    assert claunch.plan(1, 2, (32, 1, 1), 0, 1, "<i", (0,), 4) is None
    monkeypatch.setattr(claunch, "_tried", False)
    monkeypatch.setenv("GLUONKIT_C_LAUNCHER", "0")
    assert claunch.module() is None and claunch.why_not() == "GLUONKIT_C_LAUNCHER=0"


def test_a_failing_compiler_is_reported_and_a_built_launcher_is_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("GLUONKIT_CACHE_DIR", str(tmp_path))
    for reset in ("_module", "_reason"):
        monkeypatch.setattr(claunch, reset, None)
    monkeypatch.setattr(claunch, "_tried", False)
    monkeypatch.setenv("CC", "false")  # exits 1
    assert claunch.module() is None and "failed" in claunch.why_not() and "false" in claunch.why_not()
    assert list(tmp_path.rglob("*.so")) == []  # no partial file left
    monkeypatch.delenv("CC")
    monkeypatch.setattr(claunch, "_tried", False)
    assert claunch.module() is not None and claunch.why_not() is None
    built_file, = tmp_path.rglob("_gluonkit_claunch*")
    monkeypatch.setattr(claunch, "_tried", False)
    monkeypatch.setattr(claunch, "_build", lambda *a: pytest.fail("built again"))
    assert claunch.module() is not None  # found in the cache
