"""gluonkit's tcgen05 PTX against Triton 3.9's, for the same Gluon source (skipped without Triton >= 3.9).

Each entry of :data:`KERNELS` is one Gluon kernel, written once as a factory over the
``gl``/``blackwell`` modules (``tests/tmem_kernels.py``), with its argument types and
constexprs.  Both compilers build it for sm_100a with the same ``num_warps``; the test
compares every ``tcgen05.*`` instruction: its mnemonic with all qualifiers (ld/st shape,
``.xN``, ``.pack::16b`` …) and, for ``alloc``/``dealloc``, the number of columns — as
multisets, so the order of independent instructions does not matter.  Instructions
gluonkit emits on purpose and Triton does not are listed in :data:`EXPLAINED` with the
reason (docs/blackwell.rst keeps the same list).  To add a kernel (e.g. an MMA), add a
factory and a :class:`Case`.

Run with an environment that has both Triton 3.9 and gluonkit's dependencies: ``pip install -e
'.[crosscheck]'`` in a virtual environment of its own (``.ci/run`` does so), then ``python -m
pytest tests/test_triton39_crosscheck.py``.  Elsewhere it skips, unless
``GLUONKIT_REQUIRE_TRITON=1`` (CI), which makes a missing Triton 3.9 an error.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict

import pytest

import gluonkit
import gluonkit.language as gk_gl
from gluonkit.language.nvidia import blackwell as gk_blackwell
from gluonkit.layouts import scales_copy_bases

# CI sets GLUONKIT_REQUIRE_TRITON=1 (.ci/run): there a missing or old Triton fails the run.
_REQUIRED = os.environ.get("GLUONKIT_REQUIRE_TRITON") == "1"
triton = pytest.importorskip("triton") if not _REQUIRED else __import__("triton")
if tuple(int(p) for p in re.findall(r"\d+", triton.__version__)[:2]) < (3, 9):
    if _REQUIRED:
        pytest.fail(f"needs Triton >= 3.9, found {triton.__version__}", pytrace=False)
    pytest.skip(f"needs Triton >= 3.9, found {triton.__version__}", allow_module_level=True)

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as tr_gl  # noqa: E402
from triton.experimental.gluon._runtime import GluonASTSource  # noqa: E402
from triton.experimental.gluon.language.nvidia import blackwell as tr_blackwell  # noqa: E402

import attention_kernels  # noqa: E402
import packed_arith_kernels  # noqa: E402

import hopper_cluster_kernels  # noqa: E402
import pair_kernels  # noqa: E402
import tcgen05_copy_kernels  # noqa: E402
import tcgen05_kernels  # noqa: E402
import tcgen05_scaled_kernels  # noqa: E402
import tma_gather_kernels  # noqa: E402
import tmem_kernels  # noqa: E402

# gluonkit's instructions that Triton 3.9 does not emit, and why.
EXPLAINED = {
    "tcgen05.fence::before_thread_sync": "gluonkit orders the allocation's shared-memory handoff (and the "
                                         "dealloc after the last TMEM access) with the PTX ISA's thread-sync fences",
    "tcgen05.fence::after_thread_sync": "as above",
}


@dataclass(frozen=True)
class Case:
    """One kernel: its factory, pointer argument types, constexprs (made per framework) and warps."""

    name: str
    factory: Callable
    pointers: Dict[str, str]
    constexprs: Callable  # (blackwell module) -> dict of constexpr values
    num_warps: int = 4
    explained: Dict[str, str] = field(default_factory=dict)  # mnemonic -> why its count differs in this kernel


def _tmem_layout(m, n, col_stride):
    return lambda bw: bw.TensorMemoryLayout((m, n), col_stride=col_stride)


def _round_trip(dtype, m, n, col_stride, variant, num_warps=4):
    layout = _tmem_layout(m, n, col_stride)
    return Case(f"round_trip-{dtype}-{m}x{n}-cs{col_stride}-{variant}-w{num_warps}", tmem_kernels.round_trip_source,
                {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}"},
                lambda bw: {"M": m, "N": n, "tmem_layout": layout(bw), "variant": variant}, num_warps)


def _mma(dtype, m, n, k, b_kmajor, acc=False, out="fp32"):
    return Case(f"mma-{dtype}-{m}x{n}x{k}-b{'k' if b_kmajor else 'n'}{'-acc' if acc else ''}-{out}",
                tcgen05_kernels.mma_source, {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": f"*{out}"},
                lambda bw: {"M": m, "N": n, "K": k, "B_KMAJOR": b_kmajor, "ACC": acc})


_STORAGE = {"e4m3": "fp8e4nv", "e5m2": "fp8e5", "e2m1": "u8"}


# The accumulator load of a 128 x N (N >= 128) float32 tile: gluonkit splits tcgen05.ld at 64 registers.
_WIDE_LOADS = {f"tcgen05.ld.sync.aligned.32x32b.x{w}.b32": "gluonkit splits a 128-register tcgen05.ld into .x64 "
               "pieces where Triton 3.9 emits one .x128 (docs/blackwell.rst)" for w in (64, 128)}


def _mma_scaled(a_fmt, b_fmt, n, k, nvfp4=False, copy=True):
    """A block-scaled MMA (M = 128); the scales' shared layouts are built with the framework's own ``gl``."""
    sk = k // (16 if nvfp4 else 32)
    ka, kb = (k // 2 if f == "e2m1" else k for f in (a_fmt, b_fmt))

    def constexprs(bw):
        gl = gk_gl if bw is gk_blackwell else tr_gl
        return {"M": 128, "N": n, "KA": ka, "KB": kb, "SK": sk, "A_FMT": a_fmt, "B_FMT": b_fmt, "COPY": copy,
                "ACC": False, "SA_LAYOUT": tcgen05_scaled_kernels.scale_smem_layout(gl, 128, sk) if copy else None,
                "SB_LAYOUT": tcgen05_scaled_kernels.scale_smem_layout(gl, n, sk) if copy else None}

    scale = "fp8e4nv" if nvfp4 else "u8"
    return Case(f"mma_scaled-{a_fmt}x{b_fmt}-{n}x{k}{'-nvfp4' if nvfp4 else ''}{'-copy' if copy else ''}",
                tcgen05_scaled_kernels.mma_scaled_source,
                {"a_ptr": f"*{_STORAGE[a_fmt]}", "b_ptr": f"*{_STORAGE[b_fmt]}", "sa_ptr": f"*{scale}",
                 "sb_ptr": f"*{scale}", "c_ptr": "*fp32"}, constexprs,
                explained=_WIDE_LOADS if copy else {**_WIDE_LOADS, "tcgen05.wait::st.sync.aligned":
                                                    "gluonkit waits at the end of each scale store (2); Triton 3.9 "
                                                    "covers both with one wait"})


MMA_SCALED_KERNELS = [
    _mma_scaled("e4m3", "e4m3", 128, 128), _mma_scaled("e5m2", "e4m3", 256, 256), _mma_scaled("e4m3", "e5m2", 128, 128, copy=False),
    _mma_scaled("e2m1", "e2m1", 128, 128), _mma_scaled("e2m1", "e2m1", 256, 256),
    _mma_scaled("e2m1", "e2m1", 128, 128, nvfp4=True), _mma_scaled("e2m1", "e2m1", 256, 256, nvfp4=True),
]

MMA_KERNELS = [
    _mma("fp16", 128, 64, 64, False), _mma("fp16", 128, 64, 64, True), _mma("bf16", 128, 64, 64, True, acc=True),
    _mma("fp16", 128, 256, 32, False), _mma("fp16", 64, 64, 64, True), _mma("fp32", 128, 64, 32, True),
    _mma("fp8e4nv", 128, 64, 64, True), _mma("fp8e5", 128, 32, 128, True),
    _mma("fp16", 128, 64, 64, False, acc=True, out="fp16"),
    Case("sync_mma", tcgen05_kernels.sync_mma_source, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32"},
         lambda bw: {"M": 128, "K": 32},
         explained={"tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64":
                    "a synchronous tcgen05_mma (mbarriers=None): gluonkit commits it to a private mbarrier and waits, "
                    "since the PTX ISA orders tcgen05.ld after an MMA only through a commit; Triton 3.9 emits "
                    "neither commit nor wait"}),
]

# Triton 3.9 reads a 128-column fp32 tile of these kernels with one .x128 tcgen05.ld (it narrows to .x64
# in others, e.g. the 128x256 round trip); gluonkit always splits at 64 registers (MAX_REGISTERS_PER_INSTRUCTION).
_WIDE_LOADS = {f"tcgen05.ld.sync.aligned.32x32b.x{n}.b32": "gluonkit splits tcgen05.ld at 64 registers; Triton 3.9 "
               "emits .x128 for a 128-column fp32 tile here" for n in (64, 128)}


def _attention_block(dtype, d, block_n, p_tmem=False):
    return Case(f"attention_block-{dtype}-d{d}-n{block_n}{'-p_tmem' if p_tmem else ''}",
                attention_kernels.attention_block_source,
                {"q_ptr": f"*{dtype}", "k_ptr": f"*{dtype}", "v_ptr": f"*{dtype}", "o_ptr": f"*{dtype}"},
                lambda bw: {"D": d, "BLOCK_N": block_n, "P_TMEM": p_tmem}, explained=_WIDE_LOADS)


# One key block of examples/attention/blackwell_attention.py: Q Kᵀ into TMEM (K-major B), P through
# shared memory or over S in TMEM (P V with A from tensor memory), P V into TMEM (N-major B), 2 S buffers + O.
def _tmem_a(dtype, n, k, b_kmajor, m=128):
    return Case(f"tmem_a-{dtype}-{m}x{n}x{k}-b{'k' if b_kmajor else 'n'}", tcgen05_kernels.tmem_a_mma_source,
                {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": "*fp32"},
                lambda bw: {"M": m, "N": n, "K": k, "B_KMAJOR": b_kmajor}, explained=_WIDE_LOADS)


# A from tensor memory for every kind (tf32 reads B K-major only).
MMA_KERNELS += [_tmem_a("fp32", 64, 32, True), _tmem_a("fp32", 128, 64, True), _tmem_a("fp8e4nv", 64, 64, True),
                _tmem_a("fp8e5", 32, 128, False), _tmem_a("fp8e4nv", 128, 128, False), _tmem_a("bf16", 64, 64, False),
                _tmem_a("fp16", 64, 64, False, m=64), _tmem_a("fp8e4nv", 64, 64, True, m=64),
                _tmem_a("fp32", 32, 32, True, m=64)]

MMA_KERNELS += [_attention_block("fp16", 64, 128), _attention_block("bf16", 128, 128), _attention_block("fp16", 128, 64),
                _attention_block("fp16", 64, 128, True), _attention_block("bf16", 128, 128, True),
                _attention_block("fp16", 128, 64, True)]



def _tile_copy(m, n, block_n, swizzle, mma=False):
    """tcgen05_copy of an [M, N] float32 tile (Gluon 3.9 tutorial 10), optionally accumulated onto by an MMA."""
    def constexprs(bw):
        gl = gk_gl if bw is gk_blackwell else tr_gl
        return {"M": m, "N": n, "K": 32, "SMEM_LAYOUT": gl.NVMMASharedLayout(swizzle, 32, rank=2),
                "TMEM_LAYOUT": bw.TensorMemoryLayout((128, block_n), col_stride=1), "MMA": mma, "TWICE": False}

    return Case(f"tile_copy-{m}x{n}-bn{block_n}-sw{swizzle}{'-mma' if mma else ''}",
                tcgen05_copy_kernels.tile_copy_source,
                {"x_ptr": "*fp32", "y_ptr": "*fp32", "a_ptr": "*fp16", "b_ptr": "*fp16"}, constexprs,
                explained=_WIDE_LOADS)


# Tutorial 10's copies: M 128 or 256, block N 1 … 64, every swizzle; one MMA accumulating onto the copied tile.
COPY_KERNELS = [_tile_copy(128, 16, 1, 32), _tile_copy(128, 64, 64, 128), _tile_copy(128, 128, 32, 64),
                _tile_copy(256, 64, 16, 64), _tile_copy(256, 32, 8, 32), _tile_copy(256, 64, 32, 128),
                _tile_copy(128, 64, 64, 128, mma=True)]

KERNELS = [
    *(_round_trip("fp32", 128, 64, 1, v) for v in ("32x32b", "16x64b", "16x128b", "16x256b")),
    *(_round_trip("fp16", 128, 64, 1, v) for v in ("32x32b", "16x64b", "16x128b", "16x256b")),
    *(_round_trip("fp16", 128, 64, 2, v) for v in ("32x32b", "16x64b", "16x128b", "16x256b")),
    _round_trip("bf16", 128, 128, 1, "32x32b"),
    *(_round_trip("fp8e4nv", 128, 64, 1, v) for v in ("32x32b", "16x64b", "16x256b")),
    # (No TensorMemoryScalesLayout load/store: Triton 3.9 rejects tmem_load of it; see docs/blackwell.rst.)
    _round_trip("fp32", 64, 64, 1, "32x32b"),  # 16x32bx2
    _round_trip("fp32", 64, 128, 1, "32x32b"),
    _round_trip("fp32", 128, 256, 1, "32x32b"),  # split into .x128 pieces
    _round_trip("fp32", 128, 128, 1, "32x32b", num_warps=8),
    Case("staged_slices", tmem_kernels.staged_slices_source, {"x_ptr": "*fp32", "y_ptr": "*fp32"},
         lambda bw: {"M": 128, "N": 64, "tmem_layout": bw.TensorMemoryLayout((128, 64), col_stride=1)},
         explained={"tcgen05.wait::ld.sync.aligned": "gluonkit waits at the end of each load (2); Triton 3.9 "
                                                     "defers the wait to the first use and covers both loads (1)"}),
    *MMA_KERNELS,
    *MMA_SCALED_KERNELS,
    *COPY_KERNELS,
]


def _tcgen05(ptx: str, explained=()) -> Counter:
    """Every tcgen05 instruction as ``mnemonic`` (alloc/dealloc: ``mnemonic cols``), counted."""
    found = Counter()
    for line in ptx.splitlines():
        line = re.sub(r"^@%p\d+\s+", "", line.strip())
        line = re.sub(r"^\{ \.reg \.pred p; setp\.ne\.b32 p, %r\d+, 0; @p ", "", line)
        if not line.startswith("tcgen05."):
            continue
        mnemonic = line.split()[0].rstrip(";")
        if ".alloc." in mnemonic or ".dealloc." in mnemonic:
            mnemonic += " " + re.search(r"(\d+);", line).group(1)
        if mnemonic not in EXPLAINED and mnemonic not in explained:
            found[mnemonic] += 1
    return found


def _triton_ptx(case: Case) -> str:
    fn = gluon.jit(case.factory(tr_gl, tr_blackwell))
    constexprs = case.constexprs(tr_blackwell)
    signature = {**case.pointers, **{k: "constexpr" for k in constexprs}}
    src = GluonASTSource(fn, signature, constexprs)
    return triton.compile(src, target=GPUTarget("cuda", 100, 32), options={"num_warps": case.num_warps}).asm["ptx"]


def _gluonkit_ptx(case: Case) -> str:
    fn = gluonkit.jit(case.factory(gk_gl, gk_blackwell))
    args = [f"{t}:16" for t in case.pointers.values()]
    return fn.compile(*args, target="sm_100a", num_warps=case.num_warps, **case.constexprs(gk_blackwell)).asm["ptx"]


@pytest.mark.parametrize("case", KERNELS, ids=lambda c: c.name)
def test_tcgen05_instructions_match_triton(case):
    ours, theirs = _tcgen05(_gluonkit_ptx(case), case.explained), _tcgen05(_triton_ptx(case), case.explained)
    assert ours == theirs, f"gluonkit - triton: {dict(ours - theirs)}; triton - gluonkit: {dict(theirs - ours)}"


# Tutorial 10's largest tiles: the conversion after tcgen05_copy goes through scratch as large as the tile, which
# fits in sm_100a's shared memory only in the bytes of the staging buffer, dead by then (Triton reuses them too).
BIG_COPIES = [_tile_copy(128, 256, 64, 128), _tile_copy(256, 128, 64, 128), _tile_copy(256, 64, 32, 128)]


@pytest.mark.parametrize("case", BIG_COPIES, ids=lambda c: c.name)
def test_conversion_scratch_reuses_dead_buffers_as_in_triton(case):
    fn = gluon.jit(case.factory(tr_gl, tr_blackwell))
    constexprs = case.constexprs(tr_blackwell)
    src = GluonASTSource(fn, {**case.pointers, **{k: "constexpr" for k in constexprs}}, constexprs)
    theirs = triton.compile(src, target=GPUTarget("cuda", 100, 32), options={"num_warps": case.num_warps})
    ours = gluonkit.jit(case.factory(gk_gl, gk_blackwell)).compile(
        *[f"{t}:16" for t in case.pointers.values()], target="sm_100a", num_warps=case.num_warps,
        **case.constexprs(gk_blackwell))
    assert ours.metadata["shared"] == theirs.metadata.shared


def _constant(ptx: str, register: str) -> int:
    """The immediate a 32-bit register is set to (``mov.b32 reg, imm``)."""
    return int(re.search(rf"mov\.(?:b|u|s)32\s+{re.escape(register)}, (-?\d+);", ptx).group(1)) & 0xFFFFFFFF


def _descriptor_fields(ptx: str, register: str) -> int:
    """A matrix descriptor register's fields other than the start address (bits 14-63).

    gluonkit forms it as ``or.b64 reg, start, imm`` (K steps ``add.s64``); Triton 3.9 as
    ``mov.b64 reg, {lo, hi}``, ``hi`` a ``mov.b32`` immediate and ``lo`` the start, or-ed (or
    added) with the leading byte offset field when there is one.
    """
    r = re.escape(register)
    found = re.search(rf"(?:or\.b64|add\.s64)\s+{r}, %rd\d+, (-?\d+);", ptx)
    if found:
        return int(found.group(1)) & ~0x3FFF & (1 << 64) - 1
    lo, hi = re.search(rf"mov\.b64\s+{r}, \{{(%r\d+), (%r\d+)\}};", ptx).groups()
    low = re.search(rf"(?:or\.b32|add\.s32)\s+{re.escape(lo)}, %r\d+, (-?\d+);", ptx)
    return _constant(ptx, hi) << 32 | (int(low.group(1)) & ~0x3FFF & 0xFFFFFFFF if low else 0)


def _mma_words(ptx: str) -> Counter:
    """Each tcgen05.mma's (kind, instruction descriptor, A and B descriptor high words), counted; A read
    from tensor memory (``[a_tmem]``) counts as ``"tmem"``."""
    found = Counter()
    for m in re.finditer(r"tcgen05\.mma\.cta_group::(\d)\.kind::(\w+) \[[^]]*\], (%rd\d+|\[[^]]*\]), (%rd\d+), "
                         r"(%r\d+)", ptx):
        group, kind, a, b, idesc = m.groups()
        a_fields = "tmem" if a.startswith("[") else hex(_descriptor_fields(ptx, a))
        found[(group, kind, hex(_constant(ptx, idesc)), a_fields, hex(_descriptor_fields(ptx, b)))] += 1
    return found


@pytest.mark.parametrize("case", MMA_KERNELS, ids=lambda c: c.name)
def test_mma_descriptors_match_triton(case):
    """The instruction descriptor and the matrix descriptors' fixed fields agree bit for bit."""
    ours, theirs = _mma_words(_gluonkit_ptx(case)), _mma_words(_triton_ptx(case))
    assert ours and ours == theirs, f"gluonkit: {dict(ours)}; triton: {dict(theirs)}"


def _scaled_words(ptx: str) -> Counter:
    """Each block-scaled tcgen05.mma's (kind and scale qualifiers, instruction descriptor, A and B descriptor
    fields) and each tcgen05.cp's descriptor fields, counted."""
    found = Counter()
    for m in re.finditer(r"tcgen05\.mma\.(cta_group::\d\.kind::\S+) \[[^]]*\], (%rd\d+), (%rd\d+), (%r\d+),", ptx):
        kind, a, b, idesc = m.groups()
        found[(kind, hex(_constant(ptx, idesc)), hex(_descriptor_fields(ptx, a)), hex(_descriptor_fields(ptx, b)))] += 1
    for m in re.finditer(r"tcgen05\.cp\.(\S+) \[[^]]*\], (%rd\d+);", ptx):
        shape, desc = m.groups()
        found[(shape, hex(_descriptor_fields(ptx, desc)))] += 1
    return found


@pytest.mark.parametrize("case", MMA_SCALED_KERNELS, ids=lambda c: c.name)
def test_block_scaled_descriptors_match_triton(case):
    """Instruction descriptors (types, scale type, scale bytes per K step), matrix and copy descriptors agree."""
    ours, theirs = _scaled_words(_gluonkit_ptx(case)), _scaled_words(_triton_ptx(case))
    assert ours and ours == theirs, f"gluonkit: {dict(ours)}; triton: {dict(theirs)}"


@pytest.mark.parametrize("case", COPY_KERNELS, ids=lambda c: c.name)
def test_tile_copy_descriptors_match_triton(case):
    """Each tcgen05.cp's shape and descriptor fields (swizzle mode, LBO, SBO, version) agree, copy for copy."""
    ours, theirs = _scaled_words(_gluonkit_ptx(case)), _scaled_words(_triton_ptx(case))
    assert ours and ours == theirs, f"gluonkit: {dict(ours)}; triton: {dict(theirs)}"


def _random_linear(rng, gl, shape):
    """An invertible SharedLinearLayout of ``shape`` (built with ``gl``): unit vectors in a random order, some XOR-ed
    with earlier ones (a swizzle)."""
    units = [[(1 << b) if d == dim else 0 for d in range(len(shape))]
             for dim, size in enumerate(shape) for b in range(size.bit_length() - 1)]
    order = rng.permutation(len(units))
    bases = []
    for i, u in enumerate(order):
        vector = list(units[u])
        if i and rng.random() < 0.5:
            vector = [a ^ b for a, b in zip(vector, units[order[rng.integers(i)]])]
        bases.append(vector)
    return gl.SharedLinearLayout(bases, alignment=128)


def _view_cases():
    """(name, shape, layout factory, order, reshape): tutorial 11's scale box and random linear layouts."""
    import numpy as np
    cases = [("scale_box", [1, 2, 2, 2, 256], lambda gl: gl.NVMMASharedLayout(0, 8, rank=5), [0, 1, 2, 3, 4],
              [2, 2, 32, 4, 4]),
             ("scale_box_t", [1, 1, 2, 2, 256], lambda gl: gl.NVMMASharedLayout(0, 8, rank=5), [0, 2, 1, 3, 4],
              [2, 32, 16])]
    rng = np.random.default_rng(12)
    for i, shape in enumerate(([1, 4, 8], [2, 1, 16, 4], [8, 8], [1, 2, 1, 4, 8])):
        seed = int(rng.integers(1 << 30))
        order = [int(o) for o in rng.permutation(len(shape))]
        total = int(np.prod(shape))
        reshape = [total // 4, 4] if i % 2 else [2, total // 2]
        cases.append((f"linear{i}", shape, lambda gl, s=shape, seed=seed: _random_linear(np.random.default_rng(seed), gl,
                                                                                         s), order, reshape))
    return cases


@pytest.mark.parametrize("name,shape,layout,order,reshape", _view_cases(), ids=[c[0] for c in _view_cases()])
def test_view_layouts_match_triton(name, shape, layout, order, reshape, capfd, monkeypatch):
    """``index`` / ``permute`` / ``reshape`` of shared views: the layouts Gluon 3.9 prints for them, printed alike."""
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")  # static_print runs in the frontend, which a cache hit skips
    printed = []
    for gl, compile_ in ((tr_gl, _compile_triton_views), (gk_gl, _compile_gluonkit_views)):
        compile_({"SHAPE": shape, "LAYOUT": layout(gl), "ORDER": order, "RESHAPE": reshape})
        printed.append([line for line in capfd.readouterr().out.splitlines() if "Layout(" in line])
    assert printed[0] and printed[0] == printed[1], f"triton: {printed[0]}; gluonkit: {printed[1]}"


def _compile_triton_views(constexprs):
    src = GluonASTSource(gluon.jit(tcgen05_copy_kernels.views_source(tr_gl)), {k: "constexpr" for k in constexprs},
                         constexprs)
    triton.compile(src, target=GPUTarget("cuda", 100, 32), options={"num_warps": 4})


def _compile_gluonkit_views(constexprs):
    gluonkit.jit(tcgen05_copy_kernels.views_source(gk_gl)).compile(target="sm_100a", num_warps=4, **constexprs)


# ------------------------------------------------------------------ CTA pairs (cta_group::2)
@dataclass(frozen=True)
class PairCase:
    """A two-CTA kernel (``num_ctas=2``) taking TMA descriptors: ``descs`` maps each descriptor
    argument to (dtype, block shape, cga_layout); ``scalars`` the other arguments' types."""

    name: str
    factory: Callable
    descs: Dict[str, tuple]
    scalars: Dict[str, str]
    constexprs: object  # a dict, or (gl module) -> dict for values built with the framework's own gl
    num_ctas: int = 2

    def values(self, gl) -> Dict[str, object]:
        return self.constexprs(gl) if callable(self.constexprs) else self.constexprs


_DTYPES = {"fp16": ("float16", 16), "bf16": ("bfloat16", 16), "fp8e4nv": ("float8e4nv", 8), "fp8e5": ("float8e5", 8),
           "fp32": ("float32", 32)}


# Not compared in the pair kernels: a 128-column fp32 load is one .x128 in Triton 3.9 and two
# .x64 in gluonkit (the 64-register split of docs/blackwell.rst, a known difference).
_LD_SPLIT = {m: "the .x64 split" for m in ("tcgen05.ld.sync.aligned.32x32b.x64.b32",
                                           "tcgen05.ld.sync.aligned.32x32b.x128.b32")}


def _pair_mma(dtype, bn, bk, b_kmajor=False):
    b = (dtype, [bn, bk], [[1, 0]]) if b_kmajor else (dtype, [bk, bn], [[0, 1]])
    return PairCase(f"pair_mma-{dtype}-256x{bn}x{bk}-b{'k' if b_kmajor else 'n'}", pair_kernels.pair_mma_source,
                    {"a_desc": (dtype, [256, bk], [[1, 0]]), "b_desc": b},
                    {"c_ptr": "*fp32", "N": "i32", "K": "i32"},
                    {"SKIP_READY_WAIT": False, "EARLY_LOAD": False, "DONE_COUNT": 1, "B_KMAJOR": b_kmajor})


def _pair_tmem_a(dtype, bn, k, b_kmajor=False):
    b = (dtype, [bn, k], [[1, 0]]) if b_kmajor else (dtype, [k, bn], [[0, 1]])
    return PairCase(f"pair_tmem_a-{dtype}-256x{bn}x{k}-b{'k' if b_kmajor else 'n'}", pair_kernels.pair_tmem_a_mma_source,
                    {"b_desc": b}, {"a_ptr": f"*{dtype}", "c_ptr": "*fp32", "N": "i32"},
                    {"B_KMAJOR": b_kmajor, "STORE_EARLY": False})


PAIR_KERNELS = [_pair_mma("fp16", 128, 64), _pair_mma("bf16", 256, 64), _pair_mma("fp16", 64, 32),
                _pair_mma("fp8e4nv", 128, 128), _pair_mma("fp16", 128, 64, b_kmajor=True),
                _pair_mma("bf16", 256, 64, b_kmajor=True),
                # A from tensor memory, each CTA's rows in its own (every kind; tf32 with K-major B)
                _pair_tmem_a("fp16", 128, 64), _pair_tmem_a("fp32", 64, 32, b_kmajor=True),
                _pair_tmem_a("fp8e4nv", 128, 128), _pair_tmem_a("fp8e5", 64, 64, b_kmajor=True)]


def _pair_layout(module, dtype, block, cga):
    element = getattr(module, _DTYPES[dtype][0])
    return module.NVMMASharedLayout.get_default_for(block, element, cga_layout=cga)


def _pair_triton_ptx(case: PairCase) -> str:
    fn = gluon.jit(case.factory(tr_gl, tr_blackwell))
    signature = {}
    for name, (dtype, block, cga) in case.descs.items():
        layout = _pair_layout(tr_gl, dtype, block, cga)
        signature[name] = (f"tensordesc<{dtype}[{','.join(map(str, block))}],NVMMASharedLayout("
                           f"{layout.swizzle_byte_width},{layout.element_bitwidth},2,cga_layout={cga})>")
    signature.update(case.scalars)
    signature.update({k: "constexpr" for k in case.values(tr_gl)})
    src = GluonASTSource(fn, signature, {k: tr_gl.constexpr(v) if isinstance(v, list) else v
                                         for k, v in case.values(tr_gl).items()})
    options = {"num_warps": 4, "num_ctas": case.num_ctas}
    return triton.compile(src, target=GPUTarget("cuda", 100, 32), options=options).asm["ptx"]


def _pair_gluonkit_ptx(case: PairCase) -> str:
    from gluonkit import ir

    fn = gluonkit.jit(case.factory(gk_gl, gk_blackwell))
    args = [ir.TensorDescType(tuple(block), getattr(ir, _DTYPES[dtype][0]), _pair_layout(gk_gl, dtype, block, cga))
            for dtype, block, cga in case.descs.values()]
    args += [f"{t}:16" if t.startswith("*") else t for t in case.scalars.values()]
    return fn.compile(*args, target="sm_100a", num_warps=4, num_ctas=case.num_ctas, **case.values(gk_gl)).asm["ptx"]


@pytest.mark.parametrize("case", PAIR_KERNELS, ids=lambda c: c.name)
def test_pair_tcgen05_instructions_match_triton(case):
    """cta_group::2 alloc/relinquish/MMA/commit/dealloc with every qualifier, and the M=256
    instruction descriptor and the per-CTA matrix descriptors bit for bit."""
    ours_ptx, theirs_ptx = _pair_gluonkit_ptx(case), _pair_triton_ptx(case)
    ours, theirs = _tcgen05(ours_ptx, _LD_SPLIT), _tcgen05(theirs_ptx, _LD_SPLIT)
    assert ours == theirs, f"gluonkit - triton: {dict(ours - theirs)}; triton - gluonkit: {dict(theirs - ours)}"
    assert "tcgen05.mma.cta_group::2" in " ".join(ours)
    words = _mma_words(ours_ptx)
    assert words and words == _mma_words(theirs_ptx), f"gluonkit: {dict(words)}; triton: {dict(_mma_words(theirs_ptx))}"
    tma = re.compile(r"cp\.async\.bulk\.tensor\.2d\.cta_group::2\.shared::cluster\.global\.mbarrier::complete_tx::bytes")
    assert tma.search(ours_ptx) and tma.search(theirs_ptx)  # loads complete on the pair's barrier (counts vary
    # with how LLVM unrolls the K loop)


def _pair_scaled(bn, bk, copy=False):
    """A pair's block-scaled MMA; with ``copy`` its scales go through shared memory and the pair's tcgen05_copy
    (A's split by rows, ``block_bases=[[128, 0]]``; B's whole in both CTAs)."""
    sk = bk // 32

    def constexprs(gl):
        if not copy:
            return {"B_SCALE_SPLIT": False, "SA_SMEM": None, "SB_SMEM": None}
        return {"B_SCALE_SPLIT": False,
                "SA_SMEM": gl.SharedLinearLayout(scales_copy_bases(128, sk), block_bases=[[128, 0]], alignment=128),
                "SB_SMEM": gl.SharedLinearLayout(scales_copy_bases(bn, sk), block_bases=[[0, 0]], alignment=128)}

    return PairCase(f"pair_mma_scaled-e4m3-256x{bn}x{bk}{'-copy' if copy else ''}", pair_kernels.pair_mma_scaled_source,
                    {"a_desc": ("fp8e4nv", [256, bk], [[1, 0]]), "b_desc": ("fp8e4nv", [bn, bk], [[1, 0]])},
                    {"sa_ptr": "*u8", "sb_ptr": "*u8", "c_ptr": "*fp32"}, constexprs)


PAIR_SCALED_KERNELS = [_pair_scaled(128, 128), _pair_scaled(256, 128), _pair_scaled(64, 256),
                       _pair_scaled(128, 128, copy=True), _pair_scaled(256, 256, copy=True)]


@pytest.mark.parametrize("case", PAIR_SCALED_KERNELS, ids=lambda c: c.name)
def test_pair_block_scaled_mma_matches_triton(case):
    """cta_group::2 block-scaled MMAs: every tcgen05 mnemonic, the instruction descriptors (scale bytes per K
    step, M = 256) and the per-CTA matrix descriptors agree."""
    ours_ptx, theirs_ptx = _pair_gluonkit_ptx(case), _pair_triton_ptx(case)
    explained = {**_LD_SPLIT, "tcgen05.wait::st.sync.aligned": "gluonkit waits at the end of each scale store (2); "
                                                               "Triton 3.9 covers both with one wait"}
    ours, theirs = _tcgen05(ours_ptx, explained), _tcgen05(theirs_ptx, explained)
    assert ours == theirs, f"gluonkit - triton: {dict(ours - theirs)}; triton - gluonkit: {dict(theirs - ours)}"
    words = _scaled_words(ours_ptx)
    assert words and words == _scaled_words(theirs_ptx), f"gluonkit: {dict(words)}; triton: {dict(_scaled_words(theirs_ptx))}"
    assert all(kind.startswith(("cta_group::2.kind::mxf8f6f4.block_scale.block32", "cta_group::2.warpx4.32x128b"))
               for kind, *_ in words)
    assert ("copy" in case.name) == any(kind.startswith("cta_group::2.warpx4") for kind, *_ in words)


# ------------------------------------------------------------------ clusters of CTA pairs, multicast
def _multicast(name, num_ctas, bm, bn, a_cga, b_cga, acc_cga, multicast=True, commit_descs=False):
    tmem_bn = bn // (1 << sum(1 for v in acc_cga if v[1]))  # one CTA's accumulator columns
    return PairCase(f"multicast-{name}-{num_ctas}ctas-{'mc' if multicast else 'nomc'}{'-descs' if commit_descs else ''}",
                    pair_kernels.multicast_mma_source,
                    {"a_desc": ("fp16", [bm, 64], a_cga), "b_desc": ("fp16", [64, bn], b_cga)},
                    {"c_ptr": "*fp32", "N": "i32", "K": "i32"},
                    {"MULTICAST": multicast, "ACC_CGA": acc_cga, "TMEM_BN": tmem_bn, "COMMIT_DESCS": commit_descs},
                    num_ctas)


# Pairs stacked along M sharing B; side by side along N sharing A; 2 x 2 pairs sharing both (two orders
# of the CTA bits); without multicast; the commit through tcgen05_commit(descs=...).
MULTICAST_KERNELS = [
    _multicast("m-pairs", 4, 512, 128, [[1, 0], [2, 0]], [[0, 1], [0, 0]], [[1, 0], [2, 0]]),
    _multicast("n-pairs", 4, 256, 256, [[1, 0], [0, 0]], [[0, 1], [0, 2]], [[1, 0], [0, 1]]),
    _multicast("2x2-pairs", 8, 512, 256, [[1, 0], [2, 0], [0, 0]], [[0, 1], [0, 0], [0, 2]],
               [[1, 0], [2, 0], [0, 1]]),
    _multicast("2x2-pairs-n-first", 8, 512, 256, [[1, 0], [0, 0], [2, 0]], [[0, 1], [0, 2], [0, 0]],
               [[1, 0], [0, 1], [2, 0]]),
    _multicast("m-pairs", 4, 512, 128, [[1, 0], [2, 0]], [[0, 1], [0, 0]], [[1, 0], [2, 0]], multicast=False),
    _multicast("m-pairs", 4, 512, 128, [[1, 0], [2, 0]], [[0, 1], [0, 0]], [[1, 0], [2, 0]], commit_descs=True),
    _multicast("n-pairs", 4, 256, 256, [[1, 0], [0, 0]], [[0, 1], [0, 2]], [[1, 0], [0, 1]], commit_descs=True),
] + [PairCase(f"multicast-one-cta-mmas-{n}ctas", pair_kernels.replicated_mma_source,  # cta_group::1, CTA 0 loads
              {"a_desc": ("fp16", [128, 64], [[0, 0]] * bits), "b_desc": ("fp16", [64, 128], [[0, 0]] * bits)},
              {"c_ptr": "*fp32", "N": "i32", "K": "i32"}, {"MULTICAST": True, "CTA_BITS": bits}, n)
     for n, bits in ((2, 1), (4, 2))]



def _multicast_scaled(name, num_ctas, bm, bn, a_cga, b_cga, acc_cga):
    """A block-scaled MMA (e4m3, one K block of 128) by a cluster of pairs; B is K-major ``[BN, 128]``."""
    tmem_bn = bn // (1 << sum(1 for v in acc_cga if v[1]))
    sa_cga, sb_cga = [[1, 0]] + [[r, 0] for r, _ in acc_cga[1:]], [[0, 0]] + [[c, 0] for _, c in acc_cga[1:]]
    return PairCase(f"multicast-scaled-{name}-{num_ctas}ctas", pair_kernels.multicast_mma_scaled_source,
                    {"a_desc": ("fp8e4nv", [bm, 128], a_cga), "b_desc": ("fp8e4nv", [bn, 128], b_cga)},
                    {"sa_ptr": "*u8", "sb_ptr": "*u8", "c_ptr": "*fp32", "N": "i32"},
                    {"ACC_CGA": acc_cga, "TMEM_BN": tmem_bn, "SA_CGA": sa_cga, "SB_CGA": sb_cga}, num_ctas)


# Block-scaled MMAs in clusters of pairs (the scales stored from registers, A's moving with A, B's with B).
MULTICAST_KERNELS += [
    _multicast_scaled("m-pairs", 4, 512, 128, [[1, 0], [2, 0]], [[1, 0], [0, 0]], [[1, 0], [2, 0]]),
    _multicast_scaled("n-pairs", 4, 256, 256, [[1, 0], [0, 0]], [[1, 0], [2, 0]], [[1, 0], [0, 1]]),
    _multicast_scaled("2x2-pairs", 8, 512, 256, [[1, 0], [2, 0], [0, 0]], [[1, 0], [0, 0], [2, 0]],
                      [[1, 0], [2, 0], [0, 1]]),
]

_INT_OPS = {"and": int.__and__, "or": int.__or__, "xor": int.__xor__, "shl": int.__lshift__, "shr": int.__rshift__,
            "add": int.__add__, "sub": int.__sub__, "mul": int.__mul__}


def _cta_masks(ptx: str, rank: int) -> Counter:
    """Each multicast instruction (TMA copy or tcgen05 commit) with the ``ctaMask`` it uses in CTA
    ``rank``, counted: the straight-line integer code before it is evaluated with ``%cluster_ctarank``
    = ``rank`` (registers that depend on anything else are unknown, ``None``)."""
    regs: Dict[str, object] = {}

    def value(x: str):
        if x.startswith("%"):
            return rank if x == "%cluster_ctarank" else regs.get(x)
        try:
            return int(x, 0) & 0xFFFFFFFF
        except ValueError:
            return None

    found = Counter()
    for line in ptx.splitlines():
        m = re.match(r"(?:@%p\d+\s+)?(\S+)\s+(.*?);?$", line.strip())
        if not m:
            continue
        opcode, ops = m.group(1), [o.strip() for o in m.group(2).split(",")]
        if "multicast::cluster" in opcode:
            found[(opcode, value(ops[-1]))] += 1
        elif opcode.startswith(("mov.", "cvt.")) and len(ops) == 2:
            v = value(ops[1])
            regs[ops[0]] = v & 0xFFFF if v is not None and opcode.startswith("cvt.u16") else v
        elif opcode.split(".")[0] in _INT_OPS and len(ops) == 3:
            a, b = value(ops[1]), value(ops[2])
            regs[ops[0]] = None if a is None or b is None else _INT_OPS[opcode.split(".")[0]](a, b) & 0xFFFFFFFF
        elif ops and ops[0].startswith("%"):
            regs[ops[0]] = None
    return found


def _operand_values(ptx: str, pattern: str) -> Counter:
    """The last operand (an immediate or a constant register) of each instruction ``pattern`` matches."""
    found = Counter()
    for m in re.finditer(pattern + r"\S* .*, (%r\d+|\d+);", ptx):
        found[_constant(ptx, m.group(1)) if m.group(1).startswith("%") else int(m.group(1))] += 1
    return found


@pytest.mark.parametrize("case", MULTICAST_KERNELS, ids=lambda c: c.name)
def test_multicast_instructions_and_masks_match_triton(case):
    """A cluster of pairs: every tcgen05 instruction with its qualifiers, the MMAs' descriptors bit for
    bit (the pair's M=256 x N instruction descriptor), the expected bytes and barrier counts, and per
    CTA rank each multicast copy's and commit's ``ctaMask``."""
    ours_ptx, theirs_ptx = _pair_gluonkit_ptx(case), _pair_triton_ptx(case)
    scaled = "scaled" in case.name  # (Triton covers a block-scaled MMA's two scale stores with one wait::st)
    explained = {**_LD_SPLIT, "tcgen05.wait::st.sync.aligned": "one wait per scale store"} if scaled else _LD_SPLIT
    ours, theirs = _tcgen05(ours_ptx, explained), _tcgen05(theirs_ptx, explained)
    assert ours == theirs, f"gluonkit - triton: {dict(ours - theirs)}; triton - gluonkit: {dict(theirs - ours)}"
    words = _scaled_words if scaled else _mma_words
    assert words(ours_ptx) and words(ours_ptx) == words(theirs_ptx)
    for what in (r"mbarrier\.arrive\.expect_tx", r"mbarrier\.init"):  # expected bytes; arrival counts (the pair
        # barrier's 2 x 1, done's tcgen05_mma_barrier_count)
        assert _operand_values(ours_ptx, what) == _operand_values(theirs_ptx, what), what
    for rank in range(case.num_ctas):  # (as sets: a block of several TMA boxes is one copy per box from thread 0
        # here, one copy whose box is picked by the warp index in Triton, so the counts differ; the masks agree)
        ours, theirs = set(_cta_masks(ours_ptx, rank)), set(_cta_masks(theirs_ptx, rank))
        assert ours and ours == theirs and None not in {m for _, m in ours}, f"CTA {rank}: {ours} vs {theirs}"


# ------------------------------------------------------------------ Hopper clusters
def _multicast_wgmma_ptx(compiler, BM, BN, BK) -> str:
    """The PTX of ``hopper_cluster_kernels.multicast_wgmma`` (fp16, 2 CTAs, sm_90a) from Triton or gluonkit."""
    if compiler == "triton":
        from triton.experimental.gluon.language.nvidia import hopper as tr_hopper
        a, b, c, acc = hopper_cluster_kernels.multicast_wgmma_layouts(tr_gl, tr_gl.float16, BM, BN, BK)
        fn = gluon.jit(hopper_cluster_kernels.multicast_wgmma_source(tr_gl, tr_hopper))
        signature = {name: f"tensordesc<fp16[{','.join(map(str, block))}],{layout}>"
                     for name, block, layout in (("a_desc", [BM, BK], a), ("b_desc", [BK, BN], b),
                                                 ("c_desc", [BM, BN], c))}
        src = GluonASTSource(fn, dict(signature, acc_layout="constexpr"), {"acc_layout": acc})
        return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_ctas": 2}).asm["ptx"]
    from gluonkit import ir
    from gluonkit.language.nvidia import hopper as gk_hopper
    a, b, c, acc = hopper_cluster_kernels.multicast_wgmma_layouts(gk_gl, gk_gl.float16, BM, BN, BK)
    fn = gluonkit.jit(hopper_cluster_kernels.multicast_wgmma_source(gk_gl, gk_hopper))
    return fn.compile(ir.TensorDescType((BM, BK), ir.float16, a), ir.TensorDescType((BK, BN), ir.float16, b),
                      ir.TensorDescType((BM, BN), ir.float16, c), acc_layout=acc, target="sm_90a", num_warps=4,
                      num_ctas=2).asm["ptx"]


def _wgmma_shapes(ptx: str) -> Counter:
    return Counter(re.findall(r"wgmma\.mma_async\.sync\.aligned\.\w+\.f32\.f16\.f16", ptx))


@pytest.mark.parametrize("BM, BN, BK", [(256, 128, 64), (128, 64, 32), (256, 256, 16)])
def test_wgmma_on_accumulators_split_between_ctas_matches_triton(BM, BN, BK):
    """Each CTA's wgmma covers its BM/2 rows (the same instructions, as many), B arrives by a
    multicast copy in both, and each CTA expects its A rows plus the whole B block."""
    ours, theirs = _multicast_wgmma_ptx("gluonkit", BM, BN, BK), _multicast_wgmma_ptx("triton", BM, BN, BK)
    assert _wgmma_shapes(ours) == _wgmma_shapes(theirs) and sum(_wgmma_shapes(ours).values()) == BM // 128 * BK // 16
    for ptx in (ours, theirs):
        assert ".multicast::cluster" in ptx and ".reqnctapercluster 2" in ptx
    expected = BM // 2 * BK * 2 + BK * BN * 2
    assert re.search(rf"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], {expected};", theirs)


# ------------------------------------------------------------------ TMA gather / scatter
GATHER_CASES = [(32, 64, "fp16", "sliced"), (32, 128, "fp16", "sliced"), (8, 16, "fp32", "sliced"),
                (16, 64, "bf16", "one_warp"), (64, 32, "fp8e4nv", "sliced")]


def _gather_layouts(gl, which):
    if which == "sliced":
        return gl.SliceLayout(0, gl.BlockedLayout([1, 4], [32, 1], [1, 4], [1, 0]))
    return gl.BlockedLayout([16], [32], [4], [0])


def _bulk_copies(ptx: str) -> Counter:
    """Every ``cp.async.bulk`` instruction's mnemonic, counted (the predicate dropped)."""
    found = Counter()
    for line in ptx.splitlines():
        line = re.sub(r"^@%p\d+\s+", "", line.strip())
        if line.startswith("cp.async.bulk"):
            found[line.split()[0].rstrip(";")] += 1
    return found


@pytest.mark.parametrize("bx, by, dtype, which", GATHER_CASES, ids=lambda v: str(v))
def test_gather_scatter_instructions_match_triton(bx, by, dtype, which):
    """The same gather4/scatter4 instructions, one per four rows and column box of each issuing warp."""
    from gluonkit.language.nvidia.blackwell import mbarrier as gk_mbarrier, tma as gk_tma
    from triton.experimental.gluon.language.nvidia.blackwell import mbarrier as tr_mbarrier, tma as tr_tma

    names = {"fp16": "float16", "fp32": "float32", "bf16": "bfloat16", "fp8e4nv": "float8e4nv"}
    tr_layout = tr_gl.NVMMASharedLayout.get_default_for([bx, by], getattr(tr_gl, names[dtype]))
    signature = {"desc": f"tensordesc<{dtype}[1, {by}],{tr_layout!r}>", "x_ptr": "*i32", "y": "i32",
                 "BX": "constexpr", "offsets_layout": "constexpr"}
    src = GluonASTSource(gluon.jit(tma_gather_kernels.gather_scatter_source(tr_gl, tr_tma, tr_mbarrier)), signature,
                         {(3,): bx, (4,): _gather_layouts(tr_gl, which)})
    theirs = triton.compile(src, target=GPUTarget("cuda", 100, 32), options={"num_warps": 4}).asm["ptx"]
    gk_layout = gk_gl.NVMMASharedLayout.get_default_for([bx, by], getattr(gk_gl, names[dtype]))
    desc = gluonkit.ir.TensorDescType((1, by), getattr(gluonkit.ir, names[dtype]), gk_layout)
    ours = gluonkit.jit(tma_gather_kernels.gather_scatter_source(gk_gl, gk_tma, gk_mbarrier)).compile(
        desc, "*i32:16", "i32", BX=bx, offsets_layout=_gather_layouts(gk_gl, which), target="sm_100a").asm["ptx"]
    assert _bulk_copies(ours) == _bulk_copies(theirs), f"gluonkit: {_bulk_copies(ours)}; triton: {_bulk_copies(theirs)}"


def _budget_kernel(gl, jit):
    """A kernel with two one-warp workers at 24 registers (Gluon's warp-specialization tutorial's split)."""
    @jit
    def worker(p):
        gl.store(p + gl.arange(0, 32, gl.BlockedLayout([1], [32], [1], [0])), 1.0)

    @jit
    def default(p):
        gl.store(p + gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0])), 2.0)

    @jit
    def kernel(p):
        gl.warp_specialize([(default, (p,)), (worker, (p,)), (worker, (p,))], [1, 1], [24, 24])

    return kernel


def _default_budget(ptx: str, worker_regs: int) -> int:
    """The default partition's budget: the ``setmaxnreg`` value that is not the workers' (or,
    when it needs none, the ``.maxnreg`` every thread starts with)."""
    budgets = {int(v) for v in re.findall(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+);", ptx)}
    budgets -= {worker_regs}
    assert len(budgets) <= 1, budgets
    return budgets.pop() if budgets else int(re.search(r"\.maxnreg (\d+)", ptx).group(1))


@pytest.mark.parametrize("maxnreg", [None, 128, 100])
def test_launch_maxnreg_sets_the_register_pool_as_in_triton(maxnreg):
    """With ``maxnreg`` the CTA starts with ``maxnreg`` registers per thread and the default
    partition gets what the workers leave (Gluon's warp-specialization tutorial launches so)."""
    options = {"num_warps": 4, **({"maxnreg": maxnreg} if maxnreg else {})}
    theirs = triton.compile(GluonASTSource(_budget_kernel(tr_gl, gluon.jit), {"p": "*fp32"}, {}),
                            target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]
    ours = _budget_kernel(gk_gl, gluonkit.jit).compile("*fp32:16", target="sm_90a", **options).asm["ptx"]
    assert re.search(r"\.maxnreg (\d+)", ours).group(1) == re.search(r"\.maxnreg (\d+)", theirs).group(1)
    assert _default_budget(ours, 24) == _default_budget(theirs, 24)


def _tma_store_kernel(gl, tma, jit):
    @jit
    def kernel(out_desc):
        layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
        smem = gl.allocate_shared_memory(gl.float16, [64, 64], out_desc.layout)
        smem.store(gl.full([64, 64], 1.0, gl.float16, layout))
        tma.async_store(out_desc, [0, 0], smem)  # no fence_async_shared(): Triton fences anyway
        tma.store_wait(0)

    return kernel


def _store_sequence(ptx: str) -> list:
    body = ptx[ptx.index("st.shared"):]
    return [re.sub(r"\s+", " ", line.strip()).split(" [")[0] for line in body.splitlines()
            if re.search(r"fence\.|bar\.sync|cp\.async\.bulk\.tensor", line)]


@pytest.mark.parametrize("cc", [90, 100])
def test_a_tma_store_fences_the_generic_writes_before_it_as_in_triton(cc):
    """Triton 3.9 lowers a TMA store as fence.proxy.async, bar.sync, the copy; gluonkit does the
    same, so a ported kernel that relied on it is correct on the GPU."""
    from triton.experimental.gluon.language.nvidia.hopper import tma as tr_tma
    from gluonkit.language.nvidia.hopper import tma as gk_tma
    from gluonkit import ir

    layout = tr_gl.NVMMASharedLayout.get_default_for([64, 64], tr_gl.float16)
    theirs = triton.compile(GluonASTSource(_tma_store_kernel(tr_gl, tr_tma, gluon.jit),
                                           {"out_desc": f"tensordesc<fp16[64, 64],{layout!r}>"}, {}),
                            target=GPUTarget("cuda", cc, 32), options={"num_warps": 4}).asm["ptx"]
    gk_layout = gk_gl.NVMMASharedLayout.get_default_for([64, 64], gk_gl.float16)
    ours = _tma_store_kernel(gk_gl, gk_tma, gluonkit.jit).compile(
        ir.TensorDescType((64, 64), ir.float16, gk_layout), target=f"sm_{cc}a").asm["ptx"]
    assert _store_sequence(ours)[:3] == _store_sequence(theirs)[:3]
    assert _store_sequence(ours)[0] == "fence.proxy.async.shared::cta;"


def _partition_alloc_kernel(gl, blackwell, jit):
    """Both partitions allocate tensor memory of their own (tests/tmem_kernels.py's alloc_in_partition)."""
    @jit
    def copy(x_ptr, y_ptr, M: gl.constexpr, N: gl.constexpr, SCALE: gl.constexpr):
        tmem = blackwell.allocate_tensor_memory(gl.float32, [M, N], blackwell.TensorMemoryLayout([M, N], 1))
        reg: gl.constexpr = tmem.get_reg_layout()
        rows = gl.arange(0, M, layout=gl.SliceLayout(1, reg))
        cols = gl.arange(0, N, layout=gl.SliceLayout(0, reg))
        tmem.store(gl.load(x_ptr + rows[:, None] * N + cols[None, :]) * SCALE)
        gl.store(y_ptr + rows[:, None] * N + cols[None, :], tmem.load(reg))

    @jit
    def kernel(x_ptr, y_ptr, z_ptr, M: gl.constexpr, N: gl.constexpr):
        gl.warp_specialize([(copy, (x_ptr, y_ptr, M, N, 2.0)), (copy, (x_ptr, z_ptr, M, N, 3.0))], [4])

    return kernel


def test_tensor_memory_allocated_in_partitions_matches_triton():
    """One tcgen05.alloc of both partitions' columns (64), and the same loads and stores, as Triton 3.9."""
    pointers = {"x_ptr": "*fp32", "y_ptr": "*fp32", "z_ptr": "*fp32"}
    constexprs = {"M": 128, "N": 32}
    theirs = triton.compile(GluonASTSource(_partition_alloc_kernel(tr_gl, tr_blackwell, gluon.jit),
                                           {**pointers, "M": "constexpr", "N": "constexpr"}, constexprs),
                            target=GPUTarget("cuda", 100, 32), options={"num_warps": 4}).asm["ptx"]
    ours = _partition_alloc_kernel(gk_gl, gk_blackwell, gluonkit.jit).compile(
        "*fp32:16", "*fp32:16", "*fp32:16", target="sm_100a", num_warps=4, **constexprs).asm["ptx"]
    dealloc = "tcgen05.dealloc.cta_group::1.sync.aligned.b32 64"
    explained = {dealloc: "Triton 3.9's text holds the dealloc twice, gluonkit's once (both free the 64 columns)"}
    mine, its = _tcgen05(ours, explained), _tcgen05(theirs, explained)
    assert mine == its, f"gluonkit: {dict(mine)}; triton: {dict(its)}"
    assert mine["tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 64"] == 1
    assert _tcgen05(ours)[dealloc] == 1 and _tcgen05(theirs)[dealloc] >= 1


# ------------------------------------------------------------------ packed arithmetic (add2 …)
_PACKED = re.compile(r"\b(add|sub|mul|fma|min|max)(\.rn)?\.(f32x2|f16x2|bf16x2) ")


def _packed_instructions(ptx: str) -> Counter:
    """The packed arithmetic instructions, counted, with the rounding qualifier dropped: gluonkit writes ``.rn``
    (no contraction, docs/decisions.rst) where Triton 3.9 leaves it implicit."""
    return Counter(f"{m.group(1)}.{m.group(3)}" for m in _PACKED.finditer(ptx))


@pytest.mark.parametrize("dtype, op", [(d, o) for d, ops in (("fp32", ("add", "sub", "mul", "fma", "add_number")),
                                                             ("fp16", packed_arith_kernels.OPS),
                                                             ("bf16", packed_arith_kernels.OPS)) for o in ops])
def test_packed_arithmetic_matches_triton(dtype, op):
    """Each add2/sub2/mul2/fma2/min2/max2 is the same packed instruction, as many times (two per thread here)."""
    case = Case(f"packed-{dtype}-{op}", packed_arith_kernels.packed_source, {p: f"*{dtype}" for p in
                ("x_ptr", "y_ptr", "z_ptr", "out_ptr")}, lambda bw: {"OP": op, "N": 512, "SPT": 4})
    ours, theirs = _packed_instructions(_gluonkit_ptx(case)), _packed_instructions(_triton_ptx(case))
    assert sum(ours.values()) == 2 and ours == theirs, f"gluonkit: {dict(ours)}; triton: {dict(theirs)}"

def _cluster_softmax_kernel(gl, jit):
    """Gluon tutorial 14's softmax in short: a row split over the cluster's CTAs, max and sum across them."""
    @jit
    def kernel(x_ptr, y_ptr, N: gl.constexpr):
        cga_layout: gl.constexpr = ((1,), (2,), (4,), (8,))[:gl.num_ctas().bit_length() - 1]
        layout: gl.constexpr = gl.BlockedLayout([4], [32], [gl.num_warps()], [0], cga_layout=cga_layout)
        offs = gl.program_id(0) * N + gl.arange(0, N, layout)
        x = gl.load(x_ptr + offs)
        e = gl.exp(x - gl.max(x, axis=0))
        gl.store(y_ptr + offs, e / gl.sum(e, axis=0))

    return kernel


def _cluster_forms(ptx: str) -> set:
    return {line.split()[0] for line in ptx.splitlines() if re.search(r"mapa|shared::cluster|barrier\.cluster", line)}


@pytest.mark.parametrize("cc, num_ctas", [(90, 2), (90, 4), (100, 2)])
def test_a_reduction_across_ctas_uses_the_instructions_triton_uses(cc, num_ctas):
    """Both exchange the CTAs' partials through distributed shared memory: ``mapa`` +
    ``ld.shared::cluster`` between ``barrier.cluster`` arrive/wait pairs.  Triton 3.9 folds the
    CTAs into its cross-warp step and defers the barrier after the reads to the next use of its
    scratch (one barrier fewer per reduction); gluonkit's order and second barrier are its own
    (docs/clusters.rst)."""
    theirs = triton.compile(GluonASTSource(_cluster_softmax_kernel(tr_gl, gluon.jit),
                                           {"x_ptr": "*fp32", "y_ptr": "*fp32", "N": "constexpr"}, {"N": 4096}),
                            target=GPUTarget("cuda", cc, 32),
                            options={"num_warps": 4, "num_ctas": num_ctas}).asm["ptx"]
    ours = _cluster_softmax_kernel(gk_gl, gluonkit.jit).compile(
        "*fp32:16", "*fp32:16", N=4096, target=f"sm_{cc}a", num_warps=4, num_ctas=num_ctas).asm["ptx"]
    forms = {"mapa.shared::cluster.u32", "ld.shared::cluster.b32", "barrier.cluster.arrive.aligned;",
             "barrier.cluster.wait.aligned;"}
    assert _cluster_forms(ours) == forms and _cluster_forms(theirs) == forms, (_cluster_forms(theirs))
    assert f".reqnctapercluster {num_ctas}" in ours and f".reqnctapercluster {num_ctas}" in theirs

    def barriers(ptx):
        return len(re.findall(r"barrier\.cluster\.arrive", ptx))

    assert barriers(ours) == 2 * 2 + 1 and barriers(theirs) == 2 + 1 + 1  # (+1: the barrier before the kernel exits)
