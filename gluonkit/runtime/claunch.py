"""The C launcher (``claunch.c``): built on first use with the machine's C compiler, else none.

The generated launch (:mod:`.fastlaunch`) ends by packing the arguments and calling the
driver.  Through :mod:`ctypes` that costs a ``struct.pack_into`` and a foreign call (the call
alone 0.6–1.2 µs on the H100 host); the C launcher does both in one call of a CPython
extension function (0.3–0.6 µs there, the packing included), packing on the C stack, so no
per-thread block is needed either.  The argument checks stay in the generated Python, shared
by both endings: made in C they measured no faster (the torch attribute reads dominate).  It is compiled from the package's own ``claunch.c`` with no CUDA headers
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
from typing import Optional, Sequence

from .cache import cache_dir

__all__ = ["module", "why_not", "compiler", "plan", "CODES"]

_SOURCE = Path(__file__).with_name("claunch.c")
_NAME = "_gluonkit_claunch"
CODES = frozenset("bBhHiIqQfdD")  # struct codes the C launcher packs; "D" is a 128-byte tensor map ("128s")

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


def plan(launch_address: int, function: int, block: Sequence[int], shared: int, ctas: int, format: str,
         offsets: Sequence[int], size: int, release: bool = True):
    """The C launcher's plan of one loaded kernel (see ``claunch.c``), or ``None`` where the C
    launcher is not in use or cannot pack this parameter list (another ``struct`` code, a block
    past 4 KB): that kernel keeps the ctypes path.  ``release``: release the GIL during the
    driver call (which may wait for room in the launch queue), as ctypes does."""
    loaded = module()
    codes = _codes(format)
    if loaded is None or codes is None or len(codes) != len(offsets):
        return None
    try:
        return loaded.plan(launch_address, function, tuple(block), shared, ctas, codes.encode(), tuple(offsets), size,
                           release)
    except ValueError:
        return None


def _codes(format: str) -> Optional[str]:
    """One letter per parameter of the packer's ``struct`` format (padding dropped, ``128s``
    as ``D``), or ``None`` for a code the C launcher does not pack."""
    codes, count = [], ""
    for c in format.lstrip("<@=!>"):
        if c.isdigit():
            count += c
            continue
        if c == "s" and count == "128":
            codes.append("D")
        elif c == "x":
            pass
        elif c in CODES and c != "D" and not count:
            codes.append(c)
        else:
            return None
        count = ""
    return "".join(codes)
