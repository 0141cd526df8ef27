"""Compile tests/data/gluon39_kernels.py with Triton 3.9, to show the kernels that
tests/test_porting.py ports are valid Gluon 3.9 (run by hand; needs no GPU)::

    /work/tri39/bin/python scripts/check_gluon39_kernels.py

Prints, per target, the bulk-copy wait Triton emits (the port must emit the same).
"""

import os
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
import gluon39_kernels  # noqa: E402


def main() -> int:
    layout = gl.NVMMASharedLayout.get_default_for([64, 64], gl.float32)
    desc = f"tensordesc<fp32[64, 64],{layout!r}>"
    signature = {"in_desc": desc, "out_desc": desc, "scale_ptr": "*fp32", "layout": "constexpr"}
    constexprs = {(3,): gl.BlockedLayout([1, 4], [4, 8], [4, 1], [1, 0])}
    for capability in (90, 100):
        source = GluonASTSource(gluon39_kernels.scale_rows_kernel, signature, constexprs)
        compiled = triton.compile(source, target=GPUTarget("cuda", capability, 32), options={"num_warps": 4})
        waits = [line.strip() for line in compiled.asm["ptx"].splitlines() if "wait_group" in line]
        print(f"sm_{capability}: scale_rows_kernel compiles; {waits}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
