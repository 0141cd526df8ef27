"""Assembling PTX with ptxas, and the resource report it prints.

ptxas is looked up by :func:`~gluonkit.lower.backend.cuda_tools.find_tool`: the
``GLUONKIT_PTXAS`` environment variable, the ``nvidia-cuda-nvcc`` wheel, ``PATH``.  When none
is found, compiling still produces PTX (the driver can JIT it); only the cubin and the
resource report are missing.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Optional, Tuple

from .cuda_tools import find_tool

__all__ = ["find_ptxas", "assemble", "ResourceUsage", "PtxasError", "ptxas_version"]


class PtxasError(RuntimeError):
    """ptxas rejected the PTX; the message holds its diagnostics."""


@dataclass(frozen=True)
class ResourceUsage:
    """What ptxas reports for one kernel."""

    registers: int = 0
    shared_memory: int = 0  # static shared memory, bytes
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    #: ptxas's "Potential Performance Loss" notes, ``"C7514: wgmma.mma_async instructions are serialized ..."``
    notes: Tuple[str, ...] = ()


def find_ptxas() -> Optional[str]:
    """Path of a ptxas executable, or ``None``."""
    return find_tool("ptxas")


def ptxas_version(ptxas: str) -> str:
    """What ``ptxas --version`` prints, on one line: the release and the build (e.g.
    ``... release 13.0, V13.0.88 Build cuda_13.0.r13.0/compiler.36424714_0``), so that
    two builds of one release tell apart."""
    proc = subprocess.run([ptxas, "--version"], capture_output=True, text=True, check=False)
    return " ".join(proc.stdout.split()) or f"unknown (exit status {proc.returncode})"


_USAGE = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_NOTE = re.compile(r"\((C\d+)\) Potential Performance Loss: (.*?)(?: in the function '[^']*')?$", re.MULTILINE)


def _parse_usage(log: str) -> ResourceUsage:
    regs = _USAGE.search(log)
    smem = _SMEM.search(log)
    spill = _SPILL.search(log)
    return ResourceUsage(
        registers=int(regs.group(1)) if regs else 0,
        shared_memory=int(smem.group(1)) if smem else 0,
        stack_frame=int(spill.group(1)) if spill else 0,
        spill_stores=int(spill.group(2)) if spill else 0,
        spill_loads=int(spill.group(3)) if spill else 0,
        notes=tuple(f"{code}: {' '.join(text.split())}" for code, text in _NOTE.findall(log)),
    )


def assemble(ptx: str, arch: str, ptxas: Optional[str] = None, opt_level: int = 3) -> tuple[bytes, ResourceUsage]:
    """Assemble ``ptx`` for ``arch`` into a cubin; returns it with the resource report."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise FileNotFoundError("no ptxas found: pip install 'gluonkit[toolchain]' (nvidia-cuda-nvcc), "
                                "put ptxas on PATH, or set GLUONKIT_PTXAS")
    with tempfile.TemporaryDirectory(prefix="gluonkit-ptxas-") as tmp:
        src = os.path.join(tmp, "kernel.ptx")
        dst = os.path.join(tmp, "kernel.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        proc = subprocess.run(
            [ptxas, f"-arch={arch}", f"-O{opt_level}", "-lineinfo", "-v", src, "-o", dst],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise PtxasError(f"ptxas failed for {arch}:\n{proc.stderr.strip()}")
        with open(dst, "rb") as f:
            cubin = f.read()
    return cubin, _parse_usage(proc.stderr + proc.stdout)
