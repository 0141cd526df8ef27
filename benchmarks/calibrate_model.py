"""Calibrate the cost model (:mod:`gluonkit.runtime.model`) against the Hopper GEMM examples.

Two halves, one table of configurations (``CONFIGS``) and shapes (``SHAPES``):

* ``--measure`` (on the H100): times every configuration of the three Hopper GEMM examples
  (``ws_gemm`` cooperative / ping-pong, ``persistent_gemm``, ``pipelined_gemm``) on every
  shape, fp16 in and out, medians of calls that alternate between the configurations call by
  call after an L2 flush (``timing.alternating``), and prints one ``measured`` line each;
* without it (on the CPU): predicts every configuration with the model and prints predicted
  against measured time (the ``measured`` lines of ``--measured FILE``, default
  ``benchmarks/calibration_h100.txt``), the error in percent and, per shape, the Spearman
  rank correlation between predicted and measured times across the configurations.

Run: ``PYTHONPATH=$PWD python benchmarks/calibrate_model.py --measure`` on the GPU machine,
``PYTHONPATH=$PWD python benchmarks/calibrate_model.py`` anywhere.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "warp_specialized"))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "persistent_gemm"))
sys.path.insert(0, HERE)

SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 1024), (2048, 2048, 8192))

#: name -> (example, keyword arguments of its ``prepare`` / ``gemm``)
CONFIGS = {
    "ws coop 128x256 s4": ("ws", dict(BN=256, STAGES=4)),
    "ws coop 128x256 s2": ("ws", dict(BN=256, STAGES=2)),
    "ws coop 128x256 s3 e1": ("ws", dict(BN=256, STAGES=3, EPILOGUE_SPLIT=1)),
    "ws coop 128x128 s4": ("ws", dict(BN=128, STAGES=4)),
    "ws tall 256x128 s4": ("ws", dict(BM=256, BN=128, STAGES=4, GROUP_M=4)),
    "ws pp 128x128 s6": ("ws", dict(BN=128, STAGES=6, PINGPONG=True, GROUP_M=8)),
    "ws pp 128x128 s2": ("ws", dict(BN=128, STAGES=2, PINGPONG=True, GROUP_M=8)),
    "pers 128x256 s3": ("pers", dict(BN=256, STAGES=3)),
    "pers 128x256 s2": ("pers", dict(BN=256, STAGES=2)),
    "pers 128x128 s4": ("pers", dict(BN=128, STAGES=4)),
    "pipe 128x128 s4": ("pipe", dict(BN=128, STAGES=4)),
    "pipe 128x256 s3": ("pipe", dict(BN=256, STAGES=3)),
}


def runner(example: str, a, b, c, config: dict):
    """A function of no arguments that runs ``example`` with ``config`` on ``a``, ``b``, ``c``."""
    if example == "ws":
        import ws_gemm
        return ws_gemm.prepare(a, b, c, **config)
    if example == "pers":
        import persistent_gemm
        return persistent_gemm.prepare(a, b, c, **config)
    import pipelined_gemm
    return lambda: pipelined_gemm.gemm(a, b, c, **config)


def measure(shapes, samples: int) -> None:
    """Time every configuration on every shape on the GPU; print one ``measured`` line each."""
    import torch
    from timing import alternating

    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        outs = {name: torch.empty(M, N, device="cuda", dtype=torch.float16) for name in CONFIGS}
        fns = {name: runner(ex, a, b, outs[name], cfg) for name, (ex, cfg) in CONFIGS.items()}
        medians, _ = alternating(fns, samples)
        ref = (a.float() @ b.float())
        for name, ms in medians.items():
            err = ((outs[name].float() - ref).abs().max() / ref.abs().max()).item()
            flops = 2 * M * N * K
            print(f"measured {M}x{N}x{K} | {name:24s} | {ms * 1e3:10.1f} us | {flops / ms / 1e9:6.0f} TFLOP/s"
                  f" | rel.err {err:.1e}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measure", action="store_true", help="time the configurations on the GPU")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--shapes", help="MxNxK,… (default: SHAPES)")
    args = parser.parse_args(argv)
    shapes = SHAPES if not args.shapes else [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    if args.measure:
        measure(shapes, args.samples)
        return 0
    raise SystemExit("prediction: not yet")


if __name__ == "__main__":
    sys.exit(main())
