"""Fused cross-entropy, forward and backward, for long rows (a large vocabulary).

One program per row.  The first loop walks the row in ``BLOCK``-wide chunks keeping an
online maximum and sum of exponentials (so the row never has to fit in registers); the
loss is ``logsumexp(x) - x[target]``.  The second loop writes the gradient of the mean loss,
``(softmax(x) - onehot(target)) * grad_scale``, in place of a separate backward pass — the
long-context loss kernel of the Triton world.

Run: ``python examples/cross_entropy.py``.
"""

import numpy as np

import gluonkit
import gluonkit.language as gl


@gluonkit.jit
def cross_entropy_kernel(logits_ptr, targets_ptr, loss_ptr, grad_ptr, n_cols, stride, grad_scale,
                         BLOCK: gl.constexpr, layout: gl.constexpr):
    row = gl.program_id(0)
    base = logits_ptr + row * stride
    cols = gl.arange(0, BLOCK, layout=layout)
    target = gl.load(targets_ptr + row)
    running_max = -float("inf")
    running_sum = 0.0
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = gl.load(base + start + cols, mask=mask, other=-float("inf")).to(gl.float32)
        new_max = gl.maximum(running_max, gl.max(x, axis=0))
        running_sum = running_sum * gl.exp(running_max - new_max) + gl.sum(gl.exp(x - new_max), axis=0)
        running_max = new_max
    lse = running_max + gl.log(running_sum)
    gl.store(loss_ptr + row, lse - gl.load(base + target).to(gl.float32))
    for start in range(0, n_cols, BLOCK):
        idx = start + cols
        mask = idx < n_cols
        x = gl.load(base + idx, mask=mask, other=0.0).to(gl.float32)
        grad = (gl.exp(x - lse) - gl.where(idx == target, 1.0, 0.0)) * grad_scale
        gl.store(grad_ptr + row * stride + idx, grad.to(grad_ptr.dtype.element_ty), mask=mask)


def cross_entropy(logits, targets, loss, grad, BLOCK: int = 4096, num_warps: int = 8):
    """Per-row losses into ``loss`` and the gradient of their mean into ``grad``."""
    rows, cols = logits.shape
    block = min(BLOCK, 1 << max(0, (cols - 1).bit_length()))
    vec = max(1, min(4, block // (32 * num_warps)))
    layout = gl.BlockedLayout([vec], [32], [num_warps], [0])
    stride = logits.stride(0) if hasattr(logits, "element_size") else logits.strides[0] // logits.itemsize
    cross_entropy_kernel[(rows,)](logits, targets, loss, grad, cols, stride, 1.0 / rows,
                                  BLOCK=block, layout=layout, num_warps=num_warps)


def reference(logits: np.ndarray, targets: np.ndarray):
    """(losses, gradient of the mean loss) in float64."""
    x = logits.astype(np.float64)
    shifted = x - x.max(axis=1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=1)) + x.max(axis=1)
    losses = lse - x[np.arange(len(x)), targets]
    grad = np.exp(x - lse[:, None])
    grad[np.arange(len(x)), targets] -= 1.0
    return losses, grad / len(x)


def main() -> None:
    from _device import arrays_for_device, full_size, to_numpy

    rows, cols = (512, 50_000) if full_size() else (4, 5000)
    rng = np.random.default_rng(0)
    logits_np = (3 * rng.standard_normal((rows, cols))).astype(np.float32)
    targets_np = rng.integers(0, cols, rows).astype(np.int32)
    logits, targets, loss, grad = arrays_for_device(
        logits_np, targets_np, np.full(rows, np.nan, np.float32), np.full((rows, cols), np.nan, np.float32))
    cross_entropy(logits, targets, loss, grad, BLOCK=4096 if full_size() else 1024)
    ref_loss, ref_grad = reference(logits_np, targets_np)
    loss_err = np.abs(to_numpy(loss) - ref_loss).max()
    grad_err = np.abs(to_numpy(grad) - ref_grad).max()
    print(f"cross_entropy: {rows}x{cols}, max loss error {loss_err:.2e}, max grad error {grad_err:.2e}")
    assert loss_err < 1e-4 and grad_err < 1e-6


if __name__ == "__main__":
    main()
