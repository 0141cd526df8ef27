"""Write tests/data/triton39_layouts.json: the linear layouts Triton 3.9 computes for many layouts.

Run with the Triton 3.9 reference environment (never a dependency of gluonkit itself)::

    /work/tri39/bin/python scripts/gen_triton_layout_reference.py

Each case names a layout by class and constructor arguments (nested layouts are nested
case dicts), a tensor shape, and records what Triton's C++ layout code returns for it
(``GluonOpBuilder.to_linear_layout``, ``compute_tmem_reg_layout``, or Gluon's
``get_default_for`` / ``with_identity_for`` helpers) together with ``repr`` of Triton's
layout object.  ``tests/test_triton_layout_agreement.py`` rebuilds every case in gluonkit
and compares basis for basis, so the comparison runs in CI without Triton.

The cases are hand-picked corners (layouts larger than the tensor, transposed NVMMA
layouts, every swizzle and element width) plus a fixed-seed random sample.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

from triton._C.libtriton import gluon_ir, ir, nvidia
import triton.experimental.gluon.language as gl
from triton.experimental.gluon.language._semantic import _compute_tmem_reg_layout
from triton.experimental.gluon.language.nvidia.blackwell import TensorMemoryLayout, TensorMemoryScalesLayout

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "triton39_layouts.json"
RNG = random.Random(39)

_ctx = ir.context()
ir.load_dialects(_ctx)
nvidia.load_dialects(_ctx)
BUILDER = gluon_ir.GluonOpBuilder(_ctx, "sm100")

DTYPES = {8: gl.float8e4nv, 16: gl.float16, 32: gl.float32, 64: gl.float64}
CLASSES = {
    "BlockedLayout": gl.BlockedLayout,
    "SliceLayout": gl.SliceLayout,
    "DistributedLinearLayout": gl.DistributedLinearLayout,
    "NVMMADistributedLayout": gl.NVMMADistributedLayout,
    "DotOperandLayout": gl.DotOperandLayout,
    "NVMMASharedLayout": gl.NVMMASharedLayout,
    "SwizzledSharedLayout": gl.SwizzledSharedLayout,
    "SharedLinearLayout": gl.SharedLinearLayout,
    "PaddedSharedLayout": gl.PaddedSharedLayout,
    "TensorMemoryLayout": TensorMemoryLayout,
    "TensorMemoryScalesLayout": TensorMemoryScalesLayout,
}


def build(spec):
    """The Triton layout object of a case spec ``{"class": name, "args": {...}}``."""
    args = {k: build(v) if isinstance(v, dict) and "class" in v else v for k, v in spec["args"].items()}
    return CLASSES[spec["class"]](**args)


def spec(cls, **args):
    return {"class": cls, "args": args}


def linear_bases(layout, shape):
    """Triton's bases of ``layout`` for ``shape`` as ``{in_dim: [[...], ...]}``."""
    ll = BUILDER.to_linear_layout(layout._to_ir(BUILDER), list(shape))
    if isinstance(ll, gl.DistributedLinearLayout):
        return {"register": ll.reg_bases, "lane": ll.lane_bases, "warp": ll.warp_bases, "block": ll.block_bases}
    if isinstance(ll, gl.SharedLinearLayout):
        return {"offset": ll.offset_bases, "block": ll.block_bases, "alignment": ll.alignment}
    return {"row": ll.rows, "col": ll.cols}


def log2(n):
    return n.bit_length() - 1


# ----------------------------------------------------------------------- distributed
def random_blocked(rank, num_warps):
    def split(total):
        parts = [1] * rank
        for _ in range(log2(total)):
            parts[RNG.randrange(rank)] *= 2
        return parts

    order = list(range(rank))
    RNG.shuffle(order)
    return spec("BlockedLayout", size_per_thread=split(RNG.choice([1, 2, 4, 8])), threads_per_warp=split(32),
                warps_per_cta=split(num_warps), order=order)


def random_shape(rank, max_log=8, max_total_log=14):
    while True:
        shape = [1 << RNG.randrange(max_log + 1) for _ in range(rank)]
        if sum(map(log2, shape)) <= max_total_log:
            return shape


def blocked_cases():
    cases = []
    hand = [
        ([1, 4], [4, 8], [4, 1], [1, 0]),
        ([4, 1], [8, 4], [1, 4], [0, 1]),
        ([1, 8], [1, 32], [4, 1], [1, 0]),
        ([2, 2], [8, 4], [2, 2], [1, 0]),
        ([1], [32], [4], [0]),
        ([4], [32], [8], [0]),
        ([1, 1, 4], [2, 4, 4], [1, 2, 2], [2, 1, 0]),
        ([2, 1, 2], [4, 2, 4], [2, 1, 2], [0, 2, 1]),
    ]
    for spt, tpw, wpc, order in hand:
        layout = spec("BlockedLayout", size_per_thread=spt, threads_per_warp=tpw, warps_per_cta=wpc, order=order)
        rank = len(spt)
        # Exact tile, larger, and smaller than the tile along each dimension in turn.
        tile = [s * t * w for s, t, w in zip(spt, tpw, wpc)]
        shapes = {tuple(tile), tuple(4 * t for t in tile), tuple([1] * rank), tuple([2] * rank)}
        for d in range(rank):
            for s in (1, 2, max(1, tile[d] // 2)):
                shapes.add(tuple(s if i == d else 4 * t for i, t in enumerate(tile)))
        cases += [(layout, list(shape)) for shape in sorted(shapes)]
    for _ in range(120):
        rank = RNG.choice([1, 2, 2, 3])
        layout = random_blocked(rank, RNG.choice([1, 2, 4, 8]))
        cases.append((layout, random_shape(rank)))
    return cases


def mma_parents():
    out = []
    for wpc in ([4, 1], [4, 2], [8, 1]):
        for n in (8, 64, 256):
            out.append(spec("NVMMADistributedLayout", version=[3, 0], warps_per_cta=wpc, instr_shape=[16, n, 16]))
    for wpc in ([1, 1], [2, 2], [4, 1], [1, 4]):
        out.append(spec("NVMMADistributedLayout", version=[2, 0], warps_per_cta=wpc, instr_shape=[16, 8]))
    return out


def mma_cases():
    cases = []
    shapes = [[16, 8], [64, 64], [128, 128], [128, 256], [256, 64], [64, 16], [16, 16], [32, 32], [8, 8], [1, 64],
              [64, 1]]
    for parent in mma_parents():
        for shape in shapes:
            cases.append((parent, shape))
        for k_width in (0, 1, 2, 4, 8):
            for op in (0, 1):
                dot = spec("DotOperandLayout", operand_index=op, parent=parent, k_width=k_width)
                for shape in ([64, 64], [16, 16], [32, 128], [256, 64], [8, 8]):
                    cases.append((dot, shape))
    # Operands of dot_fma: a blocked parent, k_width 0 (Triton rejects any other).
    for _ in range(12):
        rank = RNG.choice([2, 2, 3])
        parent = random_blocked(rank, RNG.choice([1, 4, 8]))
        for op in (0, 1):
            for k_width in (0, 2):
                dot = spec("DotOperandLayout", operand_index=op, parent=parent, k_width=k_width)
                cases += [(dot, random_shape(rank, max_log=6)) for _ in range(2)]
    return cases


def slice_cases():
    cases = []
    for _ in range(60):
        rank = RNG.choice([2, 2, 3])
        parent = random_blocked(rank, RNG.choice([1, 4, 8]))
        dim = RNG.randrange(rank)
        cases.append((spec("SliceLayout", dim=dim, parent=parent), random_shape(rank - 1)))
    for parent in mma_parents()[::3]:
        for dim in (0, 1):
            for n in (1, 8, 64, 256):
                cases.append((spec("SliceLayout", dim=dim, parent=parent), [n]))
    for _ in range(10):
        parent = random_linear(RNG.choice([2, 3]))
        rank = len(parent["args"]["shape"])
        cases.append((spec("SliceLayout", dim=RNG.randrange(rank), parent=parent), random_shape(rank - 1)))
    dot = spec("DotOperandLayout", operand_index=0, parent=mma_parents()[0], k_width=2)
    cases += [(spec("SliceLayout", dim=d, parent=dot), [n]) for d in (0, 1) for n in (16, 64)]
    nested = spec("SliceLayout", dim=1, parent=random_blocked(3, 4))
    cases += [(spec("SliceLayout", dim=0, parent=nested), [n]) for n in (1, 4, 64)]
    return cases


def random_linear(rank):
    """A DistributedLinearLayout: Triton's layout of a random blocked layout for a random
    shape, bases shuffled within each input dimension (so the register order is arbitrary)."""
    blocked = build(random_blocked(rank, RNG.choice([1, 2, 4, 8])))
    shape = random_shape(rank, max_log=6, max_total_log=10)
    ll = BUILDER.to_linear_layout(blocked._to_ir(BUILDER), shape)
    regs = list(ll.reg_bases)
    RNG.shuffle(regs)
    return spec("DistributedLinearLayout", reg_bases=regs, lane_bases=ll.lane_bases, warp_bases=ll.warp_bases,
                block_bases=[], shape=shape)


def linear_cases():
    cases = []
    for _ in range(40):
        rank = RNG.choice([1, 2, 2, 3])
        layout = random_linear(rank)
        cases += [(layout, random_shape(rank, max_log=7, max_total_log=12)) for _ in range(2)]
    dll = spec("DistributedLinearLayout", reg_bases=[[0, 1]], lane_bases=[[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]],
               warp_bases=[[8, 0], [16, 0]], block_bases=[], shape=[32, 8])
    for shape in ([32, 8], [64, 16], [8, 2], [1, 1], [128, 8], [32, 64]):
        cases.append((dll, shape))
    swapped = spec("DistributedLinearLayout", reg_bases=[[1, 0], [0, 4]], lane_bases=[[0, 1], [0, 2], [2, 0], [4, 0],
                   [8, 0]], warp_bases=[[0, 0], [16, 0]], block_bases=[], shape=[32, 8])
    for shape in ([32, 8], [4, 4], [64, 64], [16, 2]):
        cases.append((swapped, shape))
    return cases


# ---------------------------------------------------------------------------- shared
def nvmma_shared_cases():
    cases = []
    for swizzle in (0, 32, 64, 128):
        for bits in (8, 16, 32, 64):
            for transposed in (False, True):
                layout = spec("NVMMASharedLayout", swizzle_byte_width=swizzle, element_bitwidth=bits,
                              transposed=transposed)
                contig = max(8 * max(swizzle, 16) // bits, 1)
                for shape in ([64, 64], [128, 128], [16, 256], [256, 16], [8, contig], [contig, 8], [32, 512],
                              [512, 32]):
                    cases.append((layout, shape))
                layout3 = spec("NVMMASharedLayout", swizzle_byte_width=swizzle, element_bitwidth=bits, rank=3,
                               transposed=transposed)
                for shape in ([2, 64, 64], [4, 16, 128], [2, 128, 32]):
                    cases.append((layout3, shape))
    for cga in ([[1, 0]], [[0, 1]], [[1, 0], [2, 0]], [[0, 1], [1, 0]], [[0, 0]]):
        for swizzle, transposed in ((128, False), (64, True), (0, False), (0, True)):
            layout = spec("NVMMASharedLayout", swizzle_byte_width=swizzle, element_bitwidth=16, transposed=transposed,
                          cga_layout=cga)
            cases += [(layout, shape) for shape in ([128, 128], [256, 64], [64, 256])]
    fp4 = spec("NVMMASharedLayout", swizzle_byte_width=128, element_bitwidth=8, fp4_padded=True)
    cases += [(fp4, shape) for shape in ([64, 64], [128, 128], [64, 256], [256, 64])]
    fp4t = spec("NVMMASharedLayout", swizzle_byte_width=128, element_bitwidth=8, fp4_padded=True, transposed=True)
    cases += [(fp4t, shape) for shape in ([64, 64], [128, 128])]
    return cases


def swizzled_cases():
    cases = []
    for vec, per_phase, max_phase in ((1, 1, 1), (2, 2, 4), (4, 1, 8), (8, 1, 8), (8, 2, 4), (4, 4, 2), (16, 1, 16)):
        for order in ([1, 0], [0, 1]):
            layout = spec("SwizzledSharedLayout", vec=vec, per_phase=per_phase, max_phase=max_phase, order=order)
            for shape in ([16, 32], [64, 64], [8, 128], [128, 8], [4, 4], [1, 64], [256, 256]):
                cases.append((layout, shape))
        layout3 = spec("SwizzledSharedLayout", vec=vec, per_phase=per_phase, max_phase=max_phase, order=[2, 0, 1])
        cases += [(layout3, shape) for shape in ([4, 16, 32], [2, 64, 8])]
    cases += [(spec("SwizzledSharedLayout", vec=1, per_phase=1, max_phase=1, order=[0]), [n]) for n in (1, 64)]
    for cga in ([[1, 0]], [[0, 1]], [[1, 0], [0, 1]], [[0, 0]]):
        layout = spec("SwizzledSharedLayout", vec=4, per_phase=2, max_phase=4, order=[1, 0], cga_layout=cga)
        cases += [(layout, shape) for shape in ([64, 64], [16, 128])]
    return cases


def shared_linear_cases():
    cases = []
    for bases in ([[0, 1], [1, 0]], [[0, 1], [0, 2], [1, 2], [2, 0]], [[1, 0], [2, 0], [0, 1], [0, 2], [0, 4]]):
        for alignment in (16, 128):
            layout = spec("SharedLinearLayout", offset_bases=bases, alignment=alignment)
            rank_shape = [1 << max(v[d] for v in bases).bit_length() for d in range(2)]
            cases.append((layout, rank_shape))
    return cases


# ---------------------------------------------------------------------------- TMEM
def tmem_cases():
    cases = []
    for block in ((128, 64), (128, 128), (128, 256), (64, 64), (64, 128), (128, 32), (128, 16), (64, 32)):
        for col_stride in (1, 2, 4):
            cluster = (([], False), ([[1, 0]], True), ([[1, 0]], False), ([[0, 1]], False), ([], True))
            for cga, two_ctas in cluster if col_stride == 1 else cluster[:1]:
                layout = spec("TensorMemoryLayout", block=list(block), col_stride=col_stride, cga_layout=cga,
                              two_ctas=two_ctas)
                for shape in ([128, 128], [128, 256], [256, 128], [64, 64], [128, 64], [64, 256], [128, 512]):
                    if shape[0] < block[0] and not (block[0] == 128 and shape[0] == 64):
                        continue
                    cases.append((layout, shape))
    fp4 = spec("TensorMemoryLayout", block=[128, 64], col_stride=1, fp4_padded=True)
    cases += [(fp4, shape) for shape in ([128, 64], [128, 128])]
    for cga in ([], [[1, 0]], [[0, 1]]):
        scales = spec("TensorMemoryScalesLayout", cga_layout=cga)
        cases += [(scales, shape) for shape in ([128, 4], [128, 8], [256, 4], [128, 16], [64, 4], [32, 4])]
    return cases


def tmem_reg_cases():
    cases = []
    for block in ((128, 64), (128, 128), (128, 256), (64, 64), (64, 128), (128, 32)):
        for bits, col_stride in ((32, 1), (16, 1), (16, 2), (8, 4)):
            for shape in ([128, 64], [128, 128], [64, 64], [256, 128], [128, 32]):
                if shape[0] < block[0] and not (block[0] == 128 and shape[0] == 64):
                    continue
                for num_warps in (4, 8):
                    for variant in ("32x32b", "16x64b", "16x128b", "16x256b", "32x32b_splitn"):
                        cases.append({"bits": bits, "shape": shape, "num_warps": num_warps, "instr_variant": variant,
                                      "layout": spec("TensorMemoryLayout", block=list(block), col_stride=col_stride)})
    return cases


# ------------------------------------------------------------------------- helpers
def default_for_cases():
    out = []
    for shape in ([64, 64], [128, 64], [64, 32], [8, 16], [4, 256], [128, 8], [16, 16], [256], [2, 64, 32],
                  [64, 128], [32, 8], [1, 128]):
        for bits in (8, 16, 32):
            for transposed in (False, True):
                for fp4 in ((False, True) if bits == 8 else (False,)):
                    try:
                        layout = repr(gl.NVMMASharedLayout.get_default_for(shape, DTYPES[bits], transposed=transposed,
                                                                           fp4_padded=fp4))
                    except AssertionError:  # Gluon rejects its own default (fp4 without 128B swizzle)
                        layout = None
                    out.append({"block_shape": shape, "bits": bits, "transposed": transposed, "fp4_padded": fp4,
                                "cga_layout": None, "repr": layout})
    for shape, cga in (([128, 64], [[1, 0]]), ([64, 128], [[0, 1]]), ([256, 32], [[1, 0], [2, 0]]),
                       ([16, 64], [[1, 0]])):
        for transposed in (False, True):
            layout = gl.NVMMASharedLayout.get_default_for(shape, gl.float16, transposed=transposed, cga_layout=cga)
            out.append({"block_shape": shape, "bits": 16, "transposed": transposed, "fp4_padded": False,
                        "cga_layout": cga, "repr": repr(layout)})
    return out


def padded_identity_cases():
    out = []
    for pairs, shape, order, cga in (([[32, 4]], [16, 32], [1, 0], []), ([[64, 8], [128, 4]], [64, 64], [0, 1], []),
                                     ([[2, 2]], [8], [0], []), ([[16, 1]], [4, 8, 16], [2, 1, 0], []),
                                     ([[32, 4]], [64, 32], [1, 0], [[1, 0]]), ([[8, 1]], [16, 16], [0, 1], [[0, 1]])):
        layout = gl.PaddedSharedLayout.with_identity_for(pairs, shape, order, cga)
        out.append({"pairs": pairs, "shape": shape, "order": order, "cga_layout": cga,
                    "offset_bases": layout.offset_bases, "repr": repr(layout)})
    return out


def guarded(fn):
    """``fn()`` run in a forked child, or ``None`` when Triton rejects the input.

    Triton's C++ layout code reports some invalid inputs with ``LLVM ERROR`` and aborts the
    process; a child process keeps that from ending the generator.  gluonkit must reject
    exactly those inputs (with a ValueError), which the test checks.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        try:
            payload = json.dumps({"ok": fn()})
        except Exception as exc:  # an assertion or a Python-level rejection
            payload = json.dumps({"error": type(exc).__name__})
        with os.fdopen(write_fd, "w") as f:
            f.write(payload)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return json.loads(text).get("ok") if text else None


def view_cases():
    """Gluon's text views of a few small layouts (exact strings)."""
    picks = [
        (spec("BlockedLayout", size_per_thread=[1, 2], threads_per_warp=[4, 8], warps_per_cta=[2, 1], order=[1, 0]),
         [8, 4]),
        (spec("BlockedLayout", size_per_thread=[2], threads_per_warp=[32], warps_per_cta=[1], order=[0]), [8]),
        (spec("BlockedLayout", size_per_thread=[1, 1, 2], threads_per_warp=[2, 4, 4], warps_per_cta=[1, 1, 1],
              order=[2, 1, 0]), [2, 2, 2]),
        (spec("BlockedLayout", size_per_thread=[1, 16], threads_per_warp=[32, 1], warps_per_cta=[4, 1], order=[1, 0]),
         [16, 16]),
        (spec("SliceLayout", dim=1, parent=spec("BlockedLayout", size_per_thread=[1, 4], threads_per_warp=[8, 4],
                                                  warps_per_cta=[4, 1], order=[1, 0])), [32]),
        (spec("NVMMADistributedLayout", version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 16, 16]), [64, 16]),
        (spec("DistributedLinearLayout", reg_bases=[], lane_bases=[[1], [2], [4], [8], [16]], warp_bases=[],
              block_bases=[[32]], shape=[64]), [64]),
        (spec("SwizzledSharedLayout", vec=2, per_phase=1, max_phase=2, order=[1, 0]), [2, 4]),
        (spec("SwizzledSharedLayout", vec=1, per_phase=1, max_phase=1, order=[1, 0]), [16, 2]),
        (spec("SwizzledSharedLayout", vec=1, per_phase=1, max_phase=1, order=[2, 1, 0]), [2, 2, 16]),
        (spec("SwizzledSharedLayout", vec=1, per_phase=1, max_phase=1, order=[1, 0], cga_layout=[[1, 0]]), [4, 2]),
        (spec("NVMMASharedLayout", swizzle_byte_width=32, element_bitwidth=16), [8, 16]),
        (spec("NVMMASharedLayout", swizzle_byte_width=64, element_bitwidth=16, transposed=True), [32, 8]),
        (spec("NVMMASharedLayout", swizzle_byte_width=128, element_bitwidth=8, fp4_padded=True), [8, 64]),
    ]
    out = []
    for layout_spec, shape in picks:
        layout = build(layout_spec)
        out.append({"layout": layout_spec, "shape": shape, "tensor": layout.format_tensor_view(shape),
                    "hardware": layout.format_hardware_view(shape)})
    return out


def run_case(layout_spec, shape):
    layout = build(layout_spec)
    bases = guarded(lambda: linear_bases(layout, shape))
    return {"layout": layout_spec, "shape": list(shape), "repr": repr(layout), "bases": bases}


def deduplicated(cases):
    """``{"layouts": [{"layout", "repr"}, ...], "cases": [{"layout": index, "shape", "bases"}]}``:
    each layout is stored once, which keeps the data file small."""
    layouts, index = [], {}
    out = []
    for case in cases:
        key = json.dumps(case["layout"], sort_keys=True)
        if key not in index:
            index[key] = len(layouts)
            layouts.append({"layout": case["layout"], "repr": case["repr"]})
        out.append({"layout": index[key], "shape": case["shape"], "bases": case["bases"]})
    return {"layouts": layouts, "cases": out}


def main():
    groups = {
        "blocked": blocked_cases(),
        "slice": slice_cases(),
        "distributed_linear": linear_cases(),
        "mma": mma_cases(),
        "nvmma_shared": nvmma_shared_cases(),
        "swizzled_shared": swizzled_cases(),
        "shared_linear": shared_linear_cases(),
        "tmem": tmem_cases(),
    }
    data = {"triton_version": __import__("triton").__version__}
    for name, cases in groups.items():
        data[name] = deduplicated([run_case(layout, shape) for layout, shape in cases])
        print(f"{name}: {len(cases)} cases", file=sys.stderr)
    regs = []
    for case in tmem_reg_cases():
        result = _try_tmem_reg(case)
        regs.append({**case, "result": result})
    data["tmem_reg"] = regs
    print(f"tmem_reg: {len(regs)} cases ({sum(r['result'] is not None for r in regs)} supported)", file=sys.stderr)
    data["nvmma_default_for"] = default_for_cases()
    data["padded_with_identity_for"] = padded_identity_cases()
    data["views"] = view_cases()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)


def _try_tmem_reg(case):
    layout = build(case["layout"])
    dtype = gl.int8 if case["bits"] == 8 else DTYPES[case["bits"]]

    def compute():
        ll = _compute_tmem_reg_layout(dtype, case["shape"], case["shape"], layout, case["num_warps"],
                                      case["instr_variant"])
        return {"register": ll.reg_bases, "lane": ll.lane_bases, "warp": ll.warp_bases, "block": ll.block_bases}

    return guarded(compute)


if __name__ == "__main__":
    main()
