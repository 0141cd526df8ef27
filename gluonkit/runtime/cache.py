"""The on-disk cache of compiled kernels (and of autotuning timings).

**Where.**  An entry is one file ``<root>/<key[:2]>/<key>.entry``; the root is
``GLUONKIT_CACHE_DIR`` (read on every call, so it can change at run time), by default
``~/.cache/gluonkit``.

**Format.**  A magic line, one JSON header line naming the entry's key and, for each
stored file, its name, size and sha256, then the files' bytes back to back.  A reader
checks all of it (magic, key, total length, every checksum); an entry that fails — cut
short by a crash or a full disk, overwritten with garbage, written by another format —
is a miss, so the caller recompiles and :meth:`KernelCache.put` replaces it.

**Concurrency.**  A writer fills a private temporary file in the entry's directory and
renames it over the entry with ``os.replace``, which is atomic; a reader reads the whole
file through one descriptor.  So any number of processes may compile and store the same
kernel at once: each reader sees no entry or a complete one, never a partial one, and
the last writer's complete entry stays.  A writer that cannot write (read-only root, full
disk) warns and goes on: the cache only saves time.

**Keys.**  :func:`cache_key` hashes what the caller names together with gluonkit's version
and a digest of gluonkit's own source files, so an edited compiler never reuses entries
of the old one; :func:`kernel_key` is the key of a compiled kernel (see its docstring and
``docs/decisions.rst`` for why it covers everything that changes the code).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Dict, Mapping, Optional, Union

import llvmlite
import llvmlite.binding

from .._version import __version__
from ..ir import Function, print_function
from ..lower.backend.ptxas import find_ptxas, ptxas_version

__all__ = ["cache_dir", "cache_key", "kernel_key", "toolchain_versions", "source_digest", "KernelCache"]

_MAGIC = b"gluonkit-cache-entry 1\n"


def cache_dir() -> Path:
    """The cache root: ``GLUONKIT_CACHE_DIR`` or ``~/.cache/gluonkit``."""
    explicit = os.environ.get("GLUONKIT_CACHE_DIR")
    return Path(explicit) if explicit else Path.home() / ".cache" / "gluonkit"


# ------------------------------------------------------------------------------ keys
@functools.lru_cache(maxsize=None)
def source_digest() -> str:
    """sha256 of every Python file of the gluonkit package (path and contents).

    The version number alone does not change when the compiler is edited in a checkout;
    this digest does, so entries made by another gluonkit are never reused.
    """
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        name = path.relative_to(package).as_posix().encode()
        data = path.read_bytes()
        digest.update(b"%d:%s%d:%s" % (len(name), name, len(data), data))
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def _ptxas_identity(path: str, mtime_ns: int, size: int) -> str:
    """:func:`ptxas_version` of the executable at ``path``, asked once per file version."""
    return ptxas_version(path)


def toolchain_versions() -> Dict[str, str]:
    """The tools that turn IR into a cubin: llvmlite and its LLVM, and ptxas (``"none"``
    when there is none, as then no cubin is made).  Kernel keys include them."""
    ptxas = find_ptxas()
    if ptxas is None:
        ptxas_text = "none"
    else:
        stat = os.stat(ptxas)
        ptxas_text = _ptxas_identity(os.path.realpath(ptxas), stat.st_mtime_ns, stat.st_size)
    llvm = ".".join(map(str, llvmlite.binding.llvm_version_info))
    return {"llvmlite": llvmlite.__version__, "llvm": llvm, "ptxas": ptxas_text}


def cache_key(**parts) -> str:
    """The sha256 (hex) of ``parts`` (JSON values) with gluonkit's version and :func:`source_digest`."""
    document = {"parts": parts, "gluonkit": __version__, "source": source_digest()}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def kernel_key(func: Function, target: str, instrument=None) -> str:
    """The key of ``func`` compiled for ``target`` (``"sm_90a"``).

    The printed IR holds what the frontend made of the kernel: every called ``@jit``
    function and aggregate method is inlined into it, every ``constexpr``,
    ``constexpr_function`` result and ``gl.num_ctas()`` is folded into it, ``debug``
    decides whether assertions are in it, and it names the argument types, the layouts and
    ``num_warps``, ``num_ctas`` and ``maxnreg``.  Lowering also reads two facts the text leaves out, which are added:
    the divisibility specialization of the arguments and the full source locations
    (file and column go into the PTX's line info).  With them go the target and the
    toolchain's versions; :func:`cache_key` adds gluonkit's version and source digest.
    A measured-timeline build (``instrument``: its capacity and level) has keys of its own.
    """
    locations = [[op.loc.file, op.loc.line, op.loc.col] for op in func.walk()]
    return cache_key(kind="kernel", ir=print_function(func), specialization=func.specialization,
                     location=[func.loc.file, func.loc.line, func.loc.col], op_locations=locations,
                     target=target, toolchain=toolchain_versions(), **({"instrument": instrument} if instrument else {}))


# ----------------------------------------------------------------------------- entries
def _check_key(key: str) -> None:
    if len(key) < 3 or not all(c in "0123456789abcdef" for c in key):
        raise ValueError(f"cache key must be a lowercase hex digest, got {key!r}")


def _check_file_name(name: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"cache file names must be non-empty strings, got {name!r}")


def _encode(key: str, files: Mapping[str, bytes]) -> bytes:
    header = {"key": key, "files": [[name, len(data), hashlib.sha256(data).hexdigest()]
                                    for name, data in files.items()]}
    return b"".join([_MAGIC, json.dumps(header).encode(), b"\n", *files.values()])


def _decode(key: str, blob: bytes) -> Optional[Dict[str, bytes]]:
    """The files of a complete, intact entry for ``key``; ``None`` for anything else."""
    if not blob.startswith(_MAGIC):
        return None
    end = blob.find(b"\n", len(_MAGIC))
    try:
        header = json.loads(blob[len(_MAGIC):end]) if end >= 0 else None
        listing = [(str(name), int(size), str(digest)) for name, size, digest in header["files"]]
        if header["key"] != key:
            return None
    except (ValueError, TypeError, KeyError):
        return None
    files, offset = {}, end + 1
    for name, size, digest in listing:
        data = blob[offset:offset + size]
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            return None
        files[name] = data
        offset += size
    return files if offset == len(blob) else None


class KernelCache:
    """Entries of named files under ``root`` (default: :func:`cache_dir` at each call)."""

    def __init__(self, root: Union[str, Path, None] = None):
        self._root = Path(root) if root is not None else None

    @property
    def root(self) -> Path:
        return self._root if self._root is not None else cache_dir()

    def path(self, key: str) -> Path:
        """The file of entry ``key`` (whether or not it exists)."""
        _check_key(key)
        return self.root / key[:2] / f"{key}.entry"

    def get(self, key: str) -> Optional[Dict[str, bytes]]:
        """The files of entry ``key`` as ``{name: contents}``; ``None`` when there is no
        entry or it is not intact (see the module docstring)."""
        try:
            with open(self.path(key), "rb") as f:
                blob = f.read()
        except OSError:
            return None
        return _decode(key, blob)

    def put(self, key: str, files: Mapping[str, Union[bytes, str]]) -> Optional[Path]:
        """Store ``files`` (``{name: bytes or text}``) as entry ``key``, replacing any entry
        there; returns the entry's path, or ``None`` (with a warning) if it could not be written."""
        entry = self.path(key)
        for name in files:
            _check_file_name(name)
        data = {name: c.encode() if isinstance(c, str) else bytes(c) for name, c in files.items()}
        temporary = None
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)  # exist_ok: another process may make it first
            fd, temporary = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".tmp", dir=entry.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(key, data))
            os.replace(temporary, entry)
            temporary = None
        except OSError as e:
            warnings.warn(f"gluonkit could not write its cache entry {entry} ({e}); set GLUONKIT_CACHE_DIR "
                          "to a writable directory to keep compiled kernels", RuntimeWarning, stacklevel=2)
            return None
        finally:
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
        return entry
