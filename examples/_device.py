"""Where the examples run: on the GPU (torch CUDA tensors) when there is one, otherwise in
gluonkit's CPU interpreter (numpy arrays, ``GLUONKIT_INTERPRET=1``)."""

import os

import numpy as np


def gpu_available() -> bool:
    """True when torch sees a CUDA device and gluonkit's driver can use it."""
    if os.environ.get("GLUONKIT_INTERPRET") == "1":
        return False
    try:
        import torch
    except ImportError:
        return False
    from gluonkit.runtime.driver import has_gpu

    return torch.cuda.is_available() and has_gpu()


def full_size() -> bool:
    """True when an example runs at its GPU size and configuration: on a GPU, unless
    ``GLUONKIT_EXAMPLE_SMALL=1`` asks for the interpreter's small size and configuration there too
    (``scripts/sanitize_examples.py`` does, since compute-sanitizer slows kernels down a hundredfold)."""
    return gpu_available() and os.environ.get("GLUONKIT_EXAMPLE_SMALL") != "1"


def arrays_for_device(*arrays):
    """The numpy ``arrays`` as CUDA tensors on a GPU, or as they are for the interpreter."""
    if gpu_available():
        import torch

        return tuple(torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in arrays)
    os.environ["GLUONKIT_INTERPRET"] = "1"
    return arrays


def to_numpy(array) -> np.ndarray:
    """A host copy of a numpy array or a (CUDA) torch tensor, as float64 for bf16."""
    if isinstance(array, np.ndarray):
        return array
    import torch

    if array.dtype == torch.bfloat16:
        array = array.float()
    return array.detach().cpu().numpy()
