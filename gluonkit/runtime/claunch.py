"""The C launcher (``claunch.c``): built on first use with the machine's C compiler, else none.

The generated launch (:mod:`.fastlaunch`) ends by checking the arguments against the
kernel's specialization, packing them and calling the driver.  In Python with :mod:`ctypes`
that is a line of checks per argument, a ``struct.pack_into`` and a foreign call (the last
alone about 0.6 µs on the H100 host); the C launcher does all three in one call of a CPython
extension function — a torch tensor's dtype, device and alignment, an int's width and
divisibility, a float's or bool's type, each read and compared in C, the values packed on the
C stack (no per-thread block) — and returns -1, launching nothing, for an argument of another
specialization, so the generated code hands the call to the general path as before.  TMA
descriptors are still checked by the generated Python and passed to it as raw values.  It is
compiled from the package's own ``claunch.c`` with no CUDA headers
and no link against libcuda (it receives ``cuLaunchKernelEx``'s address), as Triton builds
its launchers: with the compiler named by ``CC``, Python's configured one, or ``cc``/``gcc``/
``clang`` on ``PATH``, against Python's headers.  The module is cached under
:func:`~gluonkit.runtime.cache.cache_dir` by a hash of the source, the interpreter and the
compiler, so a machine builds it once.

Where there is no compiler, no Python headers, a failed build, or
``GLUONKIT_C_LAUNCHER=0`` in the environment, :func:`module` returns ``None``, :func:`why_not`
says why, and launches keep the ctypes path, which does the same.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from .cache import cache_dir

__all__ = ["module", "why_not", "compiler", "plan", "raw_kinds", "RAW_KINDS"]

_SOURCE = Path(__file__).with_name("claunch.c")
_NAME = "_gluonkit_claunch"
RAW_KINDS = frozenset("bBhHiIqQfdD")  # struct codes the C launcher packs as they are; "D": a tensor map ("128s")

_module = None
_reason: Optional[str] = None
_tried = False


def compiler() -> Optional[str]:
    """The C compiler to build with: ``CC``, else Python's configured ``CC`` if it is on
    ``PATH``, else the first of ``cc``, ``gcc``, ``clang`` found; ``None`` if there is none."""
    names = [os.environ.get("CC"), (sysconfig.get_config_var("CC") or "").split(" ")[0], "cc", "gcc", "clang"]
    for name in names:
        if name:
            found = shutil.which(name)
            if found:
                return found
    return None


def module():
    """The loaded C launcher module, built on first use; ``None`` where it cannot be built
    (:func:`why_not`)."""
    global _module, _reason, _tried
    if not _tried:
        _tried, _reason = True, None
        try:
            _module = _load()
        except (OSError, ImportError, subprocess.SubprocessError) as e:
            _reason = f"the C launcher could not be built or loaded: {e}"
    return _module


def why_not() -> Optional[str]:
    """Why :func:`module` is ``None`` (``None`` when the C launcher is in use)."""
    module()
    return _reason


def _load():
    global _reason
    if os.environ.get("GLUONKIT_C_LAUNCHER", "1").strip().lower() in ("0", "false", "no", "off"):
        _reason = "GLUONKIT_C_LAUNCHER=0"
        return None
    cc = compiler()
    include = sysconfig.get_paths().get("include")
    if cc is None:
        _reason = "no C compiler (CC, cc, gcc or clang) found"
        return None
    if not include or not os.path.exists(os.path.join(include, "Python.h")):
        _reason = f"no Python headers (Python.h) in {include}"
        return None
    source = _SOURCE.read_bytes()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256(b"\0".join([source, sys.version.encode(), suffix.encode(), cc.encode()])).hexdigest()[:24]
    path = cache_dir() / "claunch" / key / (_NAME + suffix)
    if not path.exists():
        _build(cc, include, path)
    spec = importlib.util.spec_from_file_location(_NAME, path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def _build(cc: str, include: str, path: Path) -> None:
    """Compile ``claunch.c`` into ``path`` (written under a temporary name, then renamed, so
    concurrent first launches never load a partial file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(suffix=".so", dir=path.parent)
    os.close(fd)
    try:
        command = [cc, "-O2", "-shared", "-fPIC", "-I", include, str(_SOURCE), "-o", temporary]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise OSError(f"{' '.join(command)} failed: {done.stderr.strip()[-2000:]}")
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def plan(launch_address: int, function: int, block: Sequence[int], shared: int, ctas: int,
         params: Sequence[Tuple[str, int, int, Any]], device: int = -1, release: bool = True):
    """The C launcher's plan of one loaded kernel (see ``claunch.c`` for the parameter kinds),
    or ``None`` where the C launcher is not in use or cannot take this parameter list (a
    parameter block past 4 KB, a kind it does not know): that kernel keeps the ctypes path.

    ``params``: per kernel parameter ``(kind, byte offset, divisibility, dtype)``;
    ``device``: the device of the tensor parameters, -1 when the process sees one device (a
    tensor's ``is_cuda`` then says it is there); ``release``: release the GIL during the
    driver call (which may wait for room in the launch queue), as ctypes does."""
    loaded = module()
    if loaded is None:
        return None
    try:
        return loaded.plan(launch_address, function, tuple(block), shared, ctas, release, device,
                           tuple((kind, offset, divisible, dtype) for kind, offset, divisible, dtype in params))
    except (ValueError, OverflowError):
        return None


def raw_kinds(format: str) -> Optional[List[str]]:
    """The C launcher's raw kind of each parameter of a packer's ``struct`` format (padding
    dropped, ``128s`` as ``D``), or ``None`` for a code it does not pack."""
    kinds, count = [], ""
    for c in format.lstrip("<@=!>"):
        if c.isdigit():
            count += c
            continue
        if c == "s" and count == "128":
            kinds.append("D")
        elif c in RAW_KINDS and c != "D" and not count:
            kinds.append(c)
        elif c != "x":
            return None
        count = ""
    return kinds
