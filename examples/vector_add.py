"""Vector add: the smallest gluonkit kernel, with an explicit BlockedLayout.

Each program adds ``BLOCK`` elements.  The layout gives every thread ``VEC`` consecutive
elements, so loads and stores become 16-byte vector accesses on the GPU.

Run: ``python examples/vector_add.py`` (on the GPU when there is one, else in the CPU
interpreter).
"""

import numpy as np

import gluonkit
import gluonkit.language as gl


@gluonkit.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: gl.constexpr, layout: gl.constexpr):
    pid = gl.program_id(0)
    offsets = pid * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offsets < n
    x = gl.load(x_ptr + offsets, mask=mask)
    y = gl.load(y_ptr + offsets, mask=mask)
    gl.store(out_ptr + offsets, x + y, mask=mask)


def vector_add_layout(num_warps: int, vec: int = 4) -> gl.BlockedLayout:
    """``vec`` consecutive elements per thread, 32 lanes and ``num_warps`` warps in a row."""
    return gl.BlockedLayout([vec], [32], [num_warps], [0])


def add(x, y, out, BLOCK: int = 4096, num_warps: int = 4):
    """``out = x + y`` for 1-D arrays/tensors of one dtype."""
    n = x.shape[0]
    grid = (gluonkit.cdiv(n, BLOCK),)
    add_kernel[grid](x, y, out, n, BLOCK=BLOCK, layout=vector_add_layout(num_warps), num_warps=num_warps)
    return out


def main() -> None:
    from _device import arrays_for_device, to_numpy  # noqa: E402  (script helper)

    rng = np.random.default_rng(0)
    n = 100_003  # ragged: the last program is masked
    x_np = rng.standard_normal(n, dtype=np.float32)
    y_np = rng.standard_normal(n, dtype=np.float32)
    # Twice: the first call compiles and launches; on the GPU the second takes the generated launch
    # (gluonkit.runtime.fastlaunch), so a run under compute-sanitizer checks both launch paths.
    for _ in range(2):
        x, y, out = arrays_for_device(x_np, y_np, np.full(n, np.nan, dtype=np.float32))
        add(x, y, out)
        error = np.abs(to_numpy(out) - (x_np + y_np)).max()
        print(f"vector_add: n={n}, max |out - numpy| = {error:.3g}")
        assert error == 0.0


if __name__ == "__main__":
    main()
