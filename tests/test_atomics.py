"""Global atomics (``gl.atomic_add`` … ``gl.atomic_cas``): Gluon 3.9's signatures and defaults,
the interpreter against numpy (many elements and programs hitting one address included), each
element updated once under replicated layouts, errors naming the line, and the PTX for
sm_90a / sm_100a (``atom`` with its ``.sem``/``.scope``, ``red`` when nothing reads the result).
"""

from __future__ import annotations

import inspect
import re
import zlib

import ml_dtypes
import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.lang import ArgumentError, ShapeMismatchError, TypeMismatchError
from interpreting import launch_interpreted
from kernel_checks import marked_line, needs_ptxas

TARGETS = ["sm_90a", "sm_100a"]


# ---------------------------------------------------------------------------- kernels
@gluonkit.jit
def histogram_kernel(x_ptr, bins_ptr, n, BLOCK: gl.constexpr, layout: gl.constexpr):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout)
    mask = offs < n
    x = gl.load(x_ptr + offs, mask=mask)
    gl.atomic_add(bins_ptr + x, 1, mask=mask)


@gluonkit.jit
def rmw_kernel(ptr, val_ptr, old_ptr, index_ptr, n, FN: gl.constexpr, BLOCK: gl.constexpr, layout: gl.constexpr):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout)
    mask = offs < n
    target = gl.load(index_ptr + offs, mask=mask)
    v = gl.load(val_ptr + offs, mask=mask)
    if FN == "add":
        old = gl.atomic_add(ptr + target, v, mask=mask)
    elif FN == "max":
        old = gl.atomic_max(ptr + target, v, mask=mask)
    elif FN == "min":
        old = gl.atomic_min(ptr + target, v, mask=mask)
    elif FN == "and":
        old = gl.atomic_and(ptr + target, v, mask=mask)
    elif FN == "or":
        old = gl.atomic_or(ptr + target, v, mask=mask)
    elif FN == "xor":
        old = gl.atomic_xor(ptr + target, v, mask=mask)
    else:
        old = gl.atomic_xchg(ptr + target, v, mask=mask)
    gl.store(old_ptr + offs, old, mask=mask)


@gluonkit.jit
def ticket_kernel(counter_ptr, tickets_ptr, BLOCK: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, BLOCK, layout)
    ticket = gl.atomic_add(counter_ptr + offs * 0, 1, sem="relaxed", scope="gpu")
    gl.store(tickets_ptr + gl.program_id(0) * BLOCK + offs, ticket)


@gluonkit.jit
def scalar_kernel(counter_ptr, out_ptr):
    old = gl.atomic_add(counter_ptr, 2)
    gl.store(out_ptr + gl.program_id(0), old)


@gluonkit.jit
def cas_kernel(ptr, out_ptr, BLOCK: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, BLOCK, layout)
    old = gl.atomic_cas(ptr + offs, offs % 3, offs + 100)
    gl.store(out_ptr + offs, old)


@gluonkit.jit
def fire_and_forget_kernel(ptr, h_ptr, layout: gl.constexpr):
    offs = gl.arange(0, 128, layout)
    gl.atomic_add(ptr + offs, 1.0, sem="relaxed")
    gl.atomic_add(h_ptr + offs, 1.0, sem="release", scope="cta")
    gl.atomic_max(ptr + offs, -1.0, sem="relaxed", scope="sys")


@gluonkit.jit
def dropped_swap_kernel(ptr, flag_ptr, layout: gl.constexpr):
    """Exchanges and a compare-and-swap whose old values nobody reads (PTX has no red for them)."""
    offs = gl.arange(0, 128, layout)
    gl.atomic_xchg(ptr + offs, offs + 3, sem="release")
    gl.atomic_xchg(flag_ptr, 1, sem="relaxed", scope="gpu")
    gl.atomic_cas(ptr + offs, offs + 3, offs * 2, sem="release", scope="cta")


@gluonkit.jit
def load_store_kernel(src_ptr, dst_ptr, flag_ptr, n, layout: gl.constexpr):
    offs = gl.arange(0, 64, layout)
    v = gl.atomic_load(src_ptr + offs, mask=offs < n)
    gl.atomic_store(dst_ptr + offs, v, sem="relaxed", scope="cta")
    f = gl.atomic_load(flag_ptr, sem="relaxed")
    gl.atomic_store(flag_ptr, f + 1)


BLOCKED = gl.BlockedLayout([2], [32], [4], [0])
REPLICATED = gl.BlockedLayout([1], [32], [4], [0])  # 64 elements over 128 threads: two copies each


# ------------------------------------------------------------------ interpreter vs numpy
@pytest.mark.parametrize("layout", [BLOCKED, REPLICATED], ids=["blocked", "replicated"])
def test_histogram_of_many_programs_matches_numpy(layout):
    rng = np.random.default_rng(1)
    n, block = 3001, 64 if layout is REPLICATED else 256
    x = rng.integers(0, 37, n).astype(np.int32)
    bins = rng.integers(0, 5, 37).astype(np.int32)
    expected = bins + np.bincount(x, minlength=37)
    launch_interpreted(histogram_kernel, (-(-n // block),), x, bins, n, BLOCK=block, layout=layout)
    np.testing.assert_array_equal(bins, expected)


def _rmw_reference(fn, initial, index, values):
    """Sequential application in element order, with the old value each update saw."""
    memory = initial.copy()
    old = np.empty_like(values)
    ops = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
           "xor": np.bitwise_xor, "xchg": lambda a, b: b}
    for i, (t, v) in enumerate(zip(index, values)):
        old[i] = memory[t]
        memory[t] = ops[fn](memory[t], v)
    return memory, old


@pytest.mark.parametrize("fn, dtype", [
    ("add", np.int32), ("add", np.int64), ("add", np.uint32), ("max", np.int32), ("max", np.uint32),
    ("min", np.int64), ("max", np.float32), ("min", np.float32), ("min", np.float64),
    ("and", np.int32), ("or", np.uint64), ("xor", np.int64), ("xchg", np.int32), ("xchg", np.float32),
    ("add", np.float16), ("add", ml_dtypes.bfloat16), ("add", np.float64),
])
def test_read_modify_writes_match_a_sequential_reference(fn, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{fn}/{np.dtype(dtype).name}".encode()))
    n, block, slots = 1000, 256, 23
    if np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16:
        values = rng.standard_normal(n).astype(dtype)
        initial = rng.standard_normal(slots).astype(dtype)
    else:
        info = np.iinfo(dtype)
        values = rng.integers(max(info.min, -1000), min(info.max, 1000), n).astype(dtype)
        initial = rng.integers(max(info.min, -1000), min(info.max, 1000), slots).astype(dtype)
    index = rng.integers(0, slots, n).astype(np.int32)
    memory = initial.copy()
    old = np.zeros(n, dtype)
    launch_interpreted(rmw_kernel, (-(-n // block),), memory, values, old, index, n, FN=fn, BLOCK=block, layout=BLOCKED)
    expected_memory, expected_old = _rmw_reference(fn, initial, index, values)
    np.testing.assert_array_equal(memory, expected_memory)
    np.testing.assert_array_equal(old, expected_old)


def test_float_add_accumulates_like_float64_within_rounding():
    rng = np.random.default_rng(7)
    n, block = 4096, 256
    values = rng.standard_normal(n).astype(np.float32)
    index = rng.integers(0, 8, n).astype(np.int32)
    memory = rng.standard_normal(8).astype(np.float32)
    reference = memory.astype(np.float64) + np.bincount(index, weights=values.astype(np.float64), minlength=8)
    launch_interpreted(rmw_kernel, (n // block,), memory, values, np.zeros(n, np.float32), index, n, FN="add",
                       BLOCK=block, layout=BLOCKED)
    np.testing.assert_allclose(memory, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", [BLOCKED, REPLICATED], ids=["blocked", "replicated"])
def test_one_counter_hands_out_every_ticket_once(layout):
    block = 64 if layout is REPLICATED else 256
    counter = np.array([5], np.int32)
    tickets = np.full(3 * block, -1, np.int32)
    launch_interpreted(ticket_kernel, (3,), counter, tickets, BLOCK=block, layout=layout)
    assert counter[0] == 5 + 3 * block
    np.testing.assert_array_equal(np.sort(tickets), np.arange(5, 5 + 3 * block))


def test_a_scalar_pointer_is_updated_once_per_program():
    counter = np.array([11], np.int32)
    out = np.zeros(6, np.int32)
    launch_interpreted(scalar_kernel, (6,), counter, out)
    assert counter[0] == 11 + 2 * 6
    np.testing.assert_array_equal(out, 11 + 2 * np.arange(6))


def test_compare_and_swap_replaces_only_matching_values():
    memory = np.random.default_rng(3).integers(0, 3, 128).astype(np.int32)
    initial = memory.copy()
    out = np.zeros(128, np.int32)
    launch_interpreted(cas_kernel, (1,), memory, out, BLOCK=128, layout=REPLICATED)
    offs = np.arange(128)
    np.testing.assert_array_equal(out, initial)
    np.testing.assert_array_equal(memory, np.where(initial == offs % 3, offs + 100, initial))


def test_masked_off_elements_touch_no_memory():
    n = 200  # the last program's tail is masked off; its pointers run past the array
    values = np.arange(256, dtype=np.int32)
    index = np.arange(256, dtype=np.int32)
    memory = np.zeros(n, np.int32)
    launch_interpreted(rmw_kernel, (1,), memory, values, np.zeros(256, np.int32), index, n, FN="add", BLOCK=256,
                       layout=BLOCKED)
    np.testing.assert_array_equal(memory, np.arange(n))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float16, np.int64])
def test_atomic_loads_and_stores_move_values_and_zero_masked_elements(dtype):
    src = np.random.default_rng(8).integers(-100, 100, 64).astype(dtype)
    dst = np.full(64, 7, dtype)
    flag = np.array([3], np.int32)
    launch_interpreted(load_store_kernel, (4,), src, dst, flag, 50, layout=REPLICATED)
    np.testing.assert_array_equal(dst, np.where(np.arange(64) < 50, src, 0))
    assert flag[0] == 3 + 4  # each program loads the flag and stores it plus one, in turn


# ------------------------------------------------------------------------- signatures
def test_signatures_match_gluon():
    for name in ("atomic_add", "atomic_and", "atomic_or", "atomic_xor", "atomic_max", "atomic_min", "atomic_xchg"):
        params = list(inspect.signature(getattr(gl, name)).parameters.items())
        assert [(k, p.default) for k, p in params[:5]] == [
            ("pointer", inspect.Parameter.empty), ("val", inspect.Parameter.empty), ("mask", None), ("sem", None),
            ("scope", None)], name
    cas = list(inspect.signature(gl.atomic_cas).parameters)
    assert cas[:5] == ["pointer", "cmp", "val", "sem", "scope"]
    assert list(inspect.signature(gl.atomic_load).parameters)[:4] == ["pointer", "mask", "sem", "scope"]
    assert list(inspect.signature(gl.atomic_store).parameters)[:5] == ["pointer", "val", "mask", "sem", "scope"]


def test_defaults_are_acq_rel_at_gpu_scope():
    func = scalar_kernel.build_ir([gl.pointer_type(gl.int32), gl.pointer_type(gl.int32)])
    op = next(o for o in func.walk() if o.name == "atomic_rmw")
    assert (op.attrs["fn"], op.attrs["sem"], op.attrs["scope"]) == ("add", "acq_rel", "gpu")
    p32 = gl.pointer_type(gl.int32)
    func = load_store_kernel.build_ir([p32, p32, p32, gl.int32], {"layout": BLOCKED})
    orderings = [(o.name, o.attrs["sem"], o.attrs["scope"]) for o in func.walk() if o.name in ("atomic_load", "atomic_store")]
    assert orderings == [("atomic_load", "acquire", "gpu"), ("atomic_store", "relaxed", "cta"),
                         ("atomic_load", "relaxed", "gpu"), ("atomic_store", "release", "gpu")]


# ----------------------------------------------------------------------------- errors
@gluonkit.jit
def bad_kernel(p, h, b, CASE: gl.constexpr):
    offs = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
    if CASE == "fp16_max":
        gl.atomic_max(h + offs, 1.0)  # FP16_MAX
    elif CASE == "sem":
        gl.atomic_add(p + offs, 1, sem="seq_cst")  # SEM
    elif CASE == "scope":
        gl.atomic_add(p + offs, 1, scope="cluster")  # SCOPE
    elif CASE == "scalar_pointer":
        gl.atomic_add(p, offs)  # SCALAR_POINTER
    elif CASE == "bitwise_float":
        gl.atomic_or(h + offs, 1.0)  # BITWISE_FLOAT
    elif CASE == "mask":
        gl.atomic_add(p + offs, 1, mask=offs)  # MASK
    elif CASE == "load_release":
        gl.atomic_load(p + offs, sem="release")  # LOAD_RELEASE
    elif CASE == "store_acquire":
        gl.atomic_store(p + offs, 1, sem="acquire")  # STORE_ACQUIRE
    else:
        gl.atomic_add(b + offs, 1)  # INT8


@pytest.mark.parametrize("case, marker, error, fragment", [
    ("fp16_max", "FP16_MAX", TypeMismatchError, "atomic_max does not support float16"),
    ("sem", "SEM", ArgumentError, "memory semantic 'seq_cst' is not supported"),
    ("scope", "SCOPE", ArgumentError, "memory scope 'cluster' is not supported"),
    ("scalar_pointer", "SCALAR_POINTER", ShapeMismatchError, "the pointer is a scalar"),
    ("bitwise_float", "BITWISE_FLOAT", TypeMismatchError, "needs integer elements"),
    ("mask", "MASK", TypeMismatchError, "must be boolean"),
    ("load_release", "LOAD_RELEASE", ArgumentError, "memory semantic 'release' is not supported; use one of "
                                                    "('acquire', 'relaxed')"),
    ("store_acquire", "STORE_ACQUIRE", ArgumentError, "use one of ('release', 'relaxed')"),
    ("int8", "INT8", TypeMismatchError, "32- and 64-bit integers"),
])
def test_bad_atomics_name_the_line_and_the_fix(case, marker, error, fragment):
    with pytest.raises(error) as err:
        bad_kernel.build_ir([gl.pointer_type(gl.int32), gl.pointer_type(gl.float16), gl.pointer_type(gl.int8)],
                            {"CASE": case})
    assert fragment in str(err.value)
    assert f"test_atomics.py:{marked_line(bad_kernel, marker)}" in str(err.value)


# ------------------------------------------------------------------------------- PTX
def _ptx(kernel, *types, target="sm_90a", **kw):
    return kernel.compile(*types, target=target, num_warps=4, **kw).asm["ptx"]


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_ptx_has_atom_with_the_semantics_scope_and_type(target):
    ptx = _ptx(rmw_kernel, "*fp32", "*fp32", "*fp32", "*i32", "i32", target=target, FN="add", BLOCK=256,
               layout=BLOCKED)
    assert re.search(r"@%p\d+ atom\.acq_rel\.gpu\.global\.add\.f32", ptx)
    ptx = _ptx(rmw_kernel, "*i64", "*i64", "*i64", "*i32", "i32", target=target, FN="min", BLOCK=256,
               layout=BLOCKED)
    assert "atom.acq_rel.gpu.global.min.s64" in ptx
    ptx = _ptx(rmw_kernel, "*u32", "*u32", "*u32", "*i32", "i32", target=target, FN="max", BLOCK=256,
               layout=BLOCKED)
    assert "atom.acq_rel.gpu.global.max.u32" in ptx
    ptx = _ptx(rmw_kernel, "*fp32", "*fp32", "*fp32", "*i32", "i32", target=target, FN="max", BLOCK=256,
               layout=BLOCKED)  # float max: signed max of the bits where v >= 0, unsigned min where v < 0
    assert "atom.acq_rel.gpu.global.max.s32" in ptx and "atom.acq_rel.gpu.global.min.u32" in ptx
    ptx = _ptx(rmw_kernel, "*fp32", "*fp32", "*fp32", "*i32", "i32", target=target, FN="xchg", BLOCK=256,
               layout=BLOCKED)
    assert "atom.acq_rel.gpu.global.exch.b32" in ptx
    ptx = _ptx(cas_kernel, "*i32", "*i32", target=target, BLOCK=128, layout=REPLICATED)
    assert "atom.acq_rel.gpu.global.cas.b32" in ptx
    ptx = _ptx(cas_kernel, "*i64", "*i64", target=target, BLOCK=128, layout=REPLICATED)
    assert "atom.acq_rel.gpu.global.cas.b64" in ptx


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_atomic_loads_and_stores_carry_their_ordering(target):
    ptx = _ptx(load_store_kernel, "*i8", "*i8", "*i32", "i32", target=target, layout=REPLICATED)
    assert re.search(r"@%p\d+ ld\.acquire\.gpu\.global\.u8 %rs\d+", ptx)
    assert re.search(r"@%p\d+ st\.relaxed\.cta\.global\.u8 \[ %rd\d+ \+ 0 \], %rs\d+;", ptx)
    assert "ld.relaxed.gpu.global.b32" in ptx and "st.release.gpu.global.b32" in ptx
    ptx = _ptx(load_store_kernel, "*fp64", "*fp64", "*i32", "i32", target=target, layout=REPLICATED)
    assert "ld.acquire.gpu.global.b64" in ptx and "st.relaxed.cta.global.b64" in ptx


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_unused_relaxed_or_release_results_use_red(target):
    ptx = _ptx(fire_and_forget_kernel, "*fp32", "*fp16", target=target, layout=REPLICATED)
    assert re.search(r"red\.relaxed\.gpu\.global\.add\.f32", ptx)
    assert re.search(r"red\.release\.cta\.global\.add\.noftz\.f16", ptx)
    # float max: the two integer halves, each a red
    assert "red.relaxed.sys.global.max.s32" in ptx and "red.relaxed.sys.global.min.u32" in ptx
    assert "atom." not in ptx
    assert "bar.sync" not in ptx  # nobody reads the old values: no broadcast


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_unused_exchange_and_compare_and_swap_results_still_use_atom(target):
    ptx = _ptx(dropped_swap_kernel, "*i32", "*i32", target=target, layout=REPLICATED)
    assert "red." not in ptx
    assert "atom.release.gpu.global.exch.b32" in ptx and "atom.relaxed.gpu.global.exch.b32" in ptx
    assert "atom.release.cta.global.cas.b32" in ptx


def test_unused_exchange_and_compare_and_swap_results_update_memory():
    data = np.random.default_rng(5).integers(-1000, 1000, 128).astype(np.int32)
    flag = np.zeros(1, np.int32)
    launch_interpreted(dropped_swap_kernel, (1,), data, flag, layout=REPLICATED)
    np.testing.assert_array_equal(data, np.arange(128) * 2)
    assert flag[0] == 1


@needs_ptxas
@pytest.mark.parametrize("target", TARGETS)
def test_replicated_elements_are_updated_by_one_thread_and_broadcast(target):
    ptx = _ptx(ticket_kernel, "*i32", "*i32", target=target, BLOCK=64, layout=REPLICATED)
    # one element per thread; warps 2 and 3 hold copies, so their atom and st.shared are predicated off
    atom = re.search(r"@(%p\d+) atom\.relaxed\.gpu\.global\.add\.u32", ptx)
    assert atom and ptx.count("atom.relaxed.gpu.global.add.u32") == 1
    assert f"{atom.group(1)} st.shared.b32" in ptx
    assert ptx.index("st.shared.b32") < ptx.index("bar.sync 0") < ptx.index("ld.shared.b32")
    ptx = _ptx(scalar_kernel, "*i32", "*i32", target=target)
    assert ptx.count("atom.acq_rel.gpu.global.add.u32") == 1 and "bar.sync 0" in ptx


# -------------------------------------------------------------------- interpreter faults
@gluonkit.jit
def overrun_kernel(ptr, layout: gl.constexpr):
    offs = gl.arange(0, 128, layout)
    gl.atomic_add(ptr + offs, 1)  # OVERRUN


def test_an_atomic_past_the_end_names_the_line_the_element_and_the_array():
    from gluonkit.interpret import InterpreterError

    with pytest.raises(InterpreterError) as err:
        launch_interpreted(overrun_kernel, (1,), np.zeros(100, np.int32), layout=BLOCKED)
    text = str(err.value)
    assert "out-of-bounds" in text and "pointer element (100) in program (0, 0, 0)" in text
    assert "element index 100 of an array of 100 elements" in text
    assert f":{marked_line(overrun_kernel, 'OVERRUN')}" in text
