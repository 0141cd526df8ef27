"""Finding the CUDA command-line tools gluonkit runs: ptxas, nvdisasm, cuobjdump.

Order: the tool's environment variable (``GLUONKIT_PTXAS``, ``GLUONKIT_NVDISASM``,
``GLUONKIT_CUOBJDUMP``), then NVIDIA's wheels in the running Python environment (the
``toolchain`` extra: ``nvidia-cuda-nvcc``, ``nvidia-cuda-nvdisasm``, ``nvidia-cuda-cuobjdump``;
CUDA 13 wheels put them in ``nvidia/cu13/bin``, CUDA 12 ones in ``nvidia/cuda_nvcc/bin`` and
the like), then ``PATH``.  The wheel comes before ``PATH`` so that the version pinned by the
project's install is the one used on every machine, as Triton uses the ptxas it bundles; a
CUDA toolkit on ``PATH`` serves when no wheel is installed (see docs/install.rst).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tempfile
from typing import Optional

__all__ = ["find_tool", "find_disassembler", "disassemble"]


def _cuda_major(path: str) -> int:
    """13 for ``.../nvidia/cu13/bin/ptxas``; 0 for a CUDA 12 wheel's ``.../nvidia/cuda_nvcc/bin/ptxas``."""
    match = re.fullmatch(r"cu(\d+)", os.path.basename(os.path.dirname(os.path.dirname(path))))
    return int(match.group(1)) if match else 0


def _in_wheels(name: str) -> Optional[str]:
    """``name`` from an ``nvidia-*`` wheel installed beside gluonkit, newest CUDA first."""
    try:
        import nvidia  # type: ignore[import-not-found]  (namespace package of NVIDIA's wheels)
    except ImportError:
        return None
    candidates = []
    for base in getattr(nvidia, "__path__", []):
        candidates += glob.glob(os.path.join(base, "*", "bin", name))
    for candidate in sorted(candidates, key=_cuda_major, reverse=True):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def find_tool(name: str) -> Optional[str]:
    """Path of the CUDA tool ``name`` (``"ptxas"``, ``"nvdisasm"``, ``"cuobjdump"``), or ``None``.

    An environment variable ``GLUONKIT_<NAME>`` that names no executable file is an error,
    not a fallback, so that a typo in it does not silently pick another version."""
    variable = f"GLUONKIT_{name.upper()}"
    explicit = os.environ.get(variable)
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise FileNotFoundError(f"{variable}={explicit!r} is not an executable file")
        return explicit
    return _in_wheels(name) or shutil.which(name)


def find_disassembler() -> Optional[list]:
    """The command that prints a cubin's SASS (``cuobjdump -sass``, else ``nvdisasm``), or ``None``."""
    cuobjdump = find_tool("cuobjdump")
    if cuobjdump:
        return [cuobjdump, "-sass"]
    nvdisasm = find_tool("nvdisasm")
    return [nvdisasm] if nvdisasm else None


def disassemble(cubin: bytes) -> str:
    """The SASS of ``cubin``; ``FileNotFoundError`` when neither disassembler is found."""
    command = find_disassembler()
    if command is None:
        raise FileNotFoundError("no SASS disassembler found: pip install 'gluonkit[toolchain]' "
                                "(nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm), put cuobjdump or nvdisasm "
                                "on PATH, or set GLUONKIT_CUOBJDUMP / GLUONKIT_NVDISASM")
    with tempfile.TemporaryDirectory(prefix="gluonkit-sass-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        proc = subprocess.run([*command, path], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{os.path.basename(command[0])} failed: {proc.stderr.strip()}")
    return proc.stdout
