"""A gluonkit kernel as a torch operator, traced by ``torch.compile``.

``gluonkit_examples::scaled_add(x, y, alpha)`` returns ``x + alpha * y``.  It is registered
with ``torch.library.custom_op`` (the real implementation launches the kernel on torch's
current stream) and ``register_fake`` (shapes and dtypes only, which is what
``torch.compile`` traces with), so a compiled function can call it inside one graph
(``fullgraph=True``: no graph break) while inductor fuses the torch ops around it.

Run: ``python examples/torch_custom_op.py`` — on the GPU when there is one (inductor), else
with CPU tensors in gluonkit's interpreter (``GLUONKIT_INTERPRET=1`` is set for you) and
the ``aot_eager`` backend, which needs no C++ toolchain.
"""

from __future__ import annotations

import os

import torch

import gluonkit
import gluonkit.language as gl

BLOCK = 1024
NUM_WARPS = 4


@gluonkit.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: gl.constexpr, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [num_warps], [0])
    offsets = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offsets < n
    x = gl.load(x_ptr + offsets, mask=mask)
    y = gl.load(y_ptr + offsets, mask=mask)
    gl.store(out_ptr + offsets, x + alpha * y, mask=mask)


@torch.library.custom_op("gluonkit_examples::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """``x + alpha * y`` for two float32 tensors of one shape, by :func:`scaled_add_kernel`."""
    torch._check(x.shape == y.shape and x.dtype == y.dtype == torch.float32,
                 lambda: f"scaled_add needs float32 tensors of one shape, got {x.dtype}{tuple(x.shape)} "
                         f"and {y.dtype}{tuple(y.shape)}")
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    scaled_add_kernel[(gluonkit.cdiv(n, BLOCK),)](x, y, out, n, alpha, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return out


@scaled_add.register_fake
def _scaled_add_fake(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """What the operator returns, without computing it: a tensor like ``x``."""
    torch._check(x.shape == y.shape)
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def model(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Torch ops around the custom operator, for ``torch.compile`` to trace in one graph."""
    return torch.relu(scaled_add(x * 2.0, y, 0.5)).sum(dim=-1)


def compiled_model():
    """``model`` compiled in one graph: inductor on the GPU, ``aot_eager`` on the CPU."""
    backend = "inductor" if torch.cuda.is_available() else "aot_eager"
    return torch.compile(model, backend=backend, fullgraph=True)


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ["GLUONKIT_INTERPRET"] = "1"
    generator = torch.Generator(device).manual_seed(0)
    x = torch.randn(64, 1000, device=device, generator=generator)
    y = torch.randn(64, 1000, device=device, generator=generator)
    expected = torch.relu(x.double() * 2.0 + 0.5 * y.double()).sum(dim=-1)
    eager = model(x, y)
    compiled = compiled_model()(x, y)
    for name, result in (("eager", eager), ("torch.compile", compiled)):
        error = (result.double() - expected).abs().max().item()
        print(f"torch_custom_op ({device}, {name}): max |result - float64 reference| = {error:.3g}")
        assert error < 1e-3, error


if __name__ == "__main__":
    main()
