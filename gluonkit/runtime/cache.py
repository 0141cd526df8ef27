"""The on-disk cache of compiled kernels.

An entry is a directory ``<root>/<key[:2]>/<key>/`` holding a few named files (typically
``kernel.cubin``, ``kernel.ptx`` and ``metadata.json``).  The root is
``GLUONKIT_CACHE_DIR`` (read on every call, so it can change at run time), by default
``~/.cache/gluonkit``.

Writes are atomic for the entry as a whole, so several processes may compile the same
kernel at once: each writer fills a private temporary directory next to the final one and
renames it into place with ``os.replace``.  Renaming a directory onto an existing non-empty
one fails, so the first writer wins and the others discard their copy; as the key
determines the contents, every writer's copy is equivalent.  A reader therefore sees
either no entry or a complete one, never a half-written file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Mapping, Optional, Union

from .._version import __version__

__all__ = ["cache_dir", "cache_key", "KernelCache"]


def cache_dir() -> Path:
    """The cache root: ``GLUONKIT_CACHE_DIR`` or ``~/.cache/gluonkit``."""
    explicit = os.environ.get("GLUONKIT_CACHE_DIR")
    return Path(explicit) if explicit else Path.home() / ".cache" / "gluonkit"


def cache_key(*, ir: str, target: str, toolchain: Mapping[str, str]) -> str:
    """The sha256 (hex) naming one compiled kernel.

    The printed IR of the specialized kernel determines the compiled code: it holds the
    folded constexprs, the divisibility hints of the specialization and ``num_warps``.
    With it go the target (``sm_90a``), the gluonkit version and the toolchain's versions
    (``{"llvmlite": ..., "ptxas": ...}``).
    """

    document = {"ir": ir, "target": target, "gluonkit": __version__, "toolchain": dict(toolchain)}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _check_key(key: str) -> None:
    if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
        raise ValueError(f"cache key must be a lowercase hex digest, got {key!r}")


def _check_file_name(name: str) -> None:
    if not name or name.startswith(".") or "/" in name or os.sep in name:
        raise ValueError(f"cache file names must be plain names not starting with '.', got {name!r}")


class KernelCache:
    """Entries of named files under ``root`` (default: :func:`cache_dir` at each call)."""

    def __init__(self, root: Union[str, Path, None] = None):
        self._root = Path(root) if root is not None else None

    @property
    def root(self) -> Path:
        return self._root if self._root is not None else cache_dir()

    def path(self, key: str) -> Path:
        """The directory of entry ``key`` (whether or not it exists)."""
        _check_key(key)
        return self.root / key[:2] / key

    def get(self, key: str) -> Optional[dict[str, bytes]]:
        """The files of entry ``key`` as ``{name: contents}``, or ``None`` if there is no entry."""
        entry = self.path(key)
        try:
            names = os.listdir(entry)
        except FileNotFoundError:
            return None
        return {name: (entry / name).read_bytes() for name in names}

    def put(self, key: str, files: Mapping[str, Union[bytes, str]]) -> Path:
        """Store ``files`` (``{name: bytes or text}``) as entry ``key``; returns its directory.

        If the entry already exists (another process got there first) it is left as is.
        """
        entry = self.path(key)
        if entry.exists():
            return entry
        for name in files:
            _check_file_name(name)
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=entry.parent))
        try:
            for name, contents in files.items():
                data = contents.encode() if isinstance(contents, str) else bytes(contents)
                with open(staging / name, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            try:
                os.replace(staging, entry)
            except OSError:
                if not entry.is_dir():  # not the "someone else won" case: a real failure
                    raise
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return entry
