"""The on-disk kernel cache: atomic under concurrency, self-healing, where it is told, and
keyed on everything that changes the compiled code (gluonkit/runtime/cache.py).

Everything here runs without a GPU: the cache module directly, and the compile path that
uses it (:func:`gluonkit.runtime.gpu.compile_for_device`, which assembles cubins with
ptxas); one ``gpu``-marked test launches through the cache in fresh processes.
"""

import dataclasses
import hashlib
import importlib.util
import linecache
import multiprocessing
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit import ir
from gluonkit.runtime import cache as cache_module
from gluonkit.runtime import gpu
from gluonkit.runtime.cache import KernelCache, cache_dir, cache_key, kernel_key
from gluonkit.runtime.driver import has_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import vector_add  # noqa: E402  (an example kernel, compiled below)
from kernel_checks import needs_ptxas  # noqa: E402

PROCESSES = multiprocessing.get_context("fork")  # fast: the children need not import anything
P32 = ir.PointerType(ir.float32)
FILES = {"kernel.ptx": ".version 8.7\n.target sm_90a", "kernel.cubin": b"\x7fELF\x00\x01" * 50, "metadata.json": "{}"}
KEY = cache_key(kind="test", what="a key")


def _payload(seed: int, size: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()


# ----------------------------------------------------------------------------- where
def test_entries_live_under_GLUONKIT_CACHE_DIR_read_at_each_call(tmp_path, monkeypatch):
    monkeypatch.setenv("GLUONKIT_CACHE_DIR", str(tmp_path / "one"))
    cache = KernelCache()
    assert cache.get(KEY) is None
    entry = cache.put(KEY, FILES)
    assert entry == tmp_path / "one" / KEY[:2] / f"{KEY}.entry" and entry.is_file()
    assert cache.get(KEY) == {name: v.encode() if isinstance(v, str) else v for name, v in FILES.items()}
    assert sorted(os.listdir(tmp_path / "one" / KEY[:2])) == [f"{KEY}.entry"]  # no temporary file left

    monkeypatch.setenv("GLUONKIT_CACHE_DIR", str(tmp_path / "two"))  # changed at run time: followed
    assert cache_dir() == tmp_path / "two" and cache.get(KEY) is None
    monkeypatch.delenv("GLUONKIT_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "gluonkit"


@needs_ptxas
def test_compiling_stores_the_kernel_under_GLUONKIT_CACHE_DIR(tmp_path, monkeypatch):
    monkeypatch.setenv("GLUONKIT_CACHE_DIR", str(tmp_path))
    func = _vector_add_ir()
    compiled = gpu.compile_for_device(func, "sm_90a")
    entries = list(tmp_path.glob("*/*.entry"))
    assert entries == [KernelCache(tmp_path).path(kernel_key(func, "sm_90a"))]
    files = KernelCache(tmp_path).get(kernel_key(func, "sm_90a"))
    assert files["kernel.cubin"] == compiled.asm["cubin"] and files["kernel.ptx"].decode() == compiled.asm["ptx"]


def test_bad_keys_and_file_names_are_refused(tmp_path):
    cache = KernelCache(tmp_path)
    with pytest.raises(ValueError, match="cache key must be a lowercase hex digest, got '../x'"):
        cache.get("../x")
    with pytest.raises(ValueError, match="cache file names must be non-empty strings, got ''"):
        cache.put(KEY, {"": b""})


def test_an_unwritable_root_warns_and_compiling_goes_on(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    cache = KernelCache(tmp_path / "file")
    with pytest.warns(RuntimeWarning, match="gluonkit could not write its cache entry .*GLUONKIT_CACHE_DIR"):
        assert cache.put(KEY, FILES) is None
    assert cache.get(KEY) is None


# ----------------------------------------------------------------------------- damaged entries
def test_every_truncation_of_an_entry_is_a_miss(tmp_path):
    cache = KernelCache(tmp_path)
    path = cache.put(KEY, FILES)
    whole = path.read_bytes()
    for cut in sorted(set(range(0, len(whole), 3)) | set(range(len(whole) - 8, len(whole)))):
        path.write_bytes(whole[:cut])
        assert cache.get(KEY) is None, cut
    path.write_bytes(whole)
    assert cache.get(KEY)["kernel.cubin"] == FILES["kernel.cubin"]


def test_garbage_flipped_bytes_and_misplaced_entries_are_misses_and_put_replaces_them(tmp_path):
    cache = KernelCache(tmp_path)
    path = cache.put(KEY, FILES)
    whole = path.read_bytes()
    damaged = [
        _payload(1, len(whole)),  # garbage of the same length
        b"",  # empty (a writer killed before writing)
        whole + b"\0",  # trailing bytes
        whole.replace(b"{", b"[", 1),  # a header that is no longer JSON
    ]
    for position in (len(whole) - 1, len(whole) - 200, whole.index(b".version")):  # payload bytes
        flipped = bytearray(whole)
        flipped[position] ^= 0x20
        damaged.append(bytes(flipped))
    other = cache_key(kind="test", what="another key")
    damaged.append(cache.put(other, FILES).read_bytes())  # intact, but another key's entry
    for blob in damaged:
        path.write_bytes(blob)
        assert cache.get(KEY) is None, blob[:80]
        cache.put(KEY, FILES)
        assert path.read_bytes() == whole


@needs_ptxas
def test_compiling_recovers_from_a_damaged_entry_by_compiling_again(tmp_path, monkeypatch):
    monkeypatch.setenv("GLUONKIT_CACHE_DIR", str(tmp_path))
    compiles = []
    real = gpu.compile_function
    monkeypatch.setattr(gpu, "compile_function", lambda *a, **k: compiles.append(a) or real(*a, **k))
    func = _vector_add_ir()
    path = KernelCache().path(kernel_key(func, "sm_90a"))
    first = gpu.compile_for_device(func, "sm_90a")
    assert len(compiles) == 1 and path.is_file()
    intact = path.read_bytes()

    assert gpu.compile_for_device(func, "sm_90a").asm["cubin"] == first.asm["cubin"]
    assert len(compiles) == 1  # served from the cache

    damage = {
        "truncated": lambda: path.write_bytes(intact[: len(intact) // 2]),
        "garbage": lambda: path.write_bytes(_payload(2, len(intact))),
        "intact but incomplete": lambda: KernelCache().put(path.stem, {"metadata.json": "{}"}),
        "intact but unreadable metadata": lambda: KernelCache().put(path.stem, {
            "kernel.ir": "", "kernel.ptx": first.asm["ptx"], "metadata.json": "{not json"}),
    }
    for count, (what, spoil) in enumerate(damage.items(), start=2):
        spoil()
        again = gpu.compile_for_device(func, "sm_90a")
        assert len(compiles) == count, what
        assert again.asm["cubin"] == first.asm["cubin"] and again.asm["ptx"] == first.asm["ptx"], what
        assert again.metadata["num_threads"] == first.metadata["num_threads"] == 128, what
        assert path.read_bytes() == intact, what  # the entry was replaced by a good one
    gpu.compile_for_device(func, "sm_90a")
    assert len(compiles) == len(damage) + 1


# ----------------------------------------------------------------------------- many processes
def _store_and_load(root, key, payload, barrier, rounds, results):
    cache = KernelCache(root)  # the key's directory does not exist yet: all create it at once
    barrier.wait()
    digests = set()
    for _ in range(rounds):
        cache.put(key, {"kernel.cubin": payload, "metadata.json": "{}"})
        files = cache.get(key)
        digests.add(hashlib.sha256(files["kernel.cubin"]).hexdigest() if files else "missing")
    results.put(sorted(digests))


def _read_continually(root, key, payload, barrier, rounds, results):
    cache = KernelCache(root)
    barrier.wait()
    seen = {"none": 0, "whole": 0, "wrong": 0}
    for _ in range(rounds):
        files = cache.get(key)
        seen["none" if files is None else "whole" if files["kernel.cubin"] == payload else "wrong"] += 1
    results.put(seen)


def test_eight_processes_storing_and_loading_one_key_see_only_whole_identical_entries(tmp_path):
    payload = _payload(3, 2 << 20)  # 2 MiB: a torn or interleaved write would be seen
    expected = [hashlib.sha256(payload).hexdigest()]
    for trial in range(3):
        root = tmp_path / f"trial{trial}"
        key = cache_key(kind="test", trial=trial)
        barrier, results = PROCESSES.Barrier(10), PROCESSES.Queue()
        procs = [PROCESSES.Process(target=_store_and_load, args=(root, key, payload, barrier, 5, results))
                 for _ in range(8)]
        procs += [PROCESSES.Process(target=_read_continually, args=(root, key, payload, barrier, 60, results))
                  for _ in range(2)]
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
        writers = [o for o in outcomes if isinstance(o, list)]
        readers = [o for o in outcomes if isinstance(o, dict)]
        assert writers == [expected] * 8  # every load after a store: the whole payload
        assert len(readers) == 2 and all(r["wrong"] == 0 for r in readers), readers
        assert KernelCache(root).get(key)["kernel.cubin"] == payload
        assert os.listdir(root / key[:2]) == [f"{key}.entry"]  # no temporary files left behind


def _compile_in_child(root, barrier, results):
    os.environ["GLUONKIT_CACHE_DIR"] = str(root)
    barrier.wait()
    compiled = gpu.compile_for_device(_vector_add_ir(), "sm_90a")
    results.put(hashlib.sha256(compiled.asm["cubin"] + compiled.asm["ptx"].encode()).hexdigest())


@needs_ptxas
def test_eight_processes_compiling_one_kernel_at_once_agree_and_leave_one_good_entry(tmp_path):
    barrier, results = PROCESSES.Barrier(8), PROCESSES.Queue()
    procs = [PROCESSES.Process(target=_compile_in_child, args=(tmp_path, barrier, results)) for _ in range(8)]
    for p in procs:
        p.start()
    digests = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert len(set(digests)) == 1
    func = _vector_add_ir()
    files = KernelCache(tmp_path).get(kernel_key(func, "sm_90a"))
    assert hashlib.sha256(files["kernel.cubin"] + files["kernel.ptx"]).hexdigest() == digests[0]
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{kernel_key(func, 'sm_90a')}.entry"]


# ----------------------------------------------------------------------------- keys
def _vector_add_ir(block=1024, num_warps=4, specialization=None):
    return vector_add.add_kernel.build_ir([P32] * 3 + [ir.int32], dict(BLOCK=block, layout=vector_add.vector_add_layout(num_warps)),
                                          num_warps, specialization or {})


@gluonkit.jit
def scalar_kernel(out_ptr, x, FACTOR: gl.constexpr):
    gl.store(out_ptr, x * FACTOR)


def _scalar_ir(factor=2.0, num_warps=4, specialization=None):
    return scalar_kernel.build_ir([P32, ir.float32], {"FACTOR": factor}, num_warps, specialization or {})


KERNEL_TEMPLATE = """\
import gluonkit
import gluonkit.language as gl


@gluonkit.constexpr_function
def scale_for(n):
    return n * {constexpr_function}


@gluonkit.jit
def helper(x):
    return x * {helper}


@gluonkit.aggregate
class Shift:
    amount: gl.constexpr

    @gluonkit.jit
    def apply(self, x):
        return x + self.amount * {method}


@gluonkit.jit
def kernel(x_ptr, out_ptr, BLOCK: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, BLOCK, layout=layout)
    y = Shift(1.0).apply(helper(gl.load(x_ptr + offs)))
    gl.store(out_ptr + offs, y * scale_for(2))
"""
BASE = dict(constexpr_function="2", helper="2.0", method="1.0")


def _key_of_source(path, variant, counter=[0]):  # noqa: B006 - a counter of loads
    """Write the template with ``variant`` to ``path`` (always the same file, so that only the
    source differs), load it as a new module and return the key of its kernel for sm_90a."""
    path.write_text(KERNEL_TEMPLATE.format(**{**BASE, **variant}))
    counter[0] += 1
    os.utime(path, ns=(counter[0] * 10**9, counter[0] * 10**9))  # a new mtime: linecache rereads
    linecache.checkcache(str(path))
    spec = importlib.util.spec_from_file_location(f"cache_key_kernels_{counter[0]}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    layout = gl.BlockedLayout([1], [32], [4], [0])
    return kernel_key(module.kernel.build_ir([P32, P32], dict(BLOCK=128, layout=layout), 4, {}), "sm_90a")


def test_changing_a_called_function_s_source_changes_the_key(tmp_path):
    path = tmp_path / "kernels.py"
    base = _key_of_source(path, {})
    changed = {
        "a called @jit helper": _key_of_source(path, {"helper": "3.0"}),
        "an aggregate's @jit method": _key_of_source(path, {"method": "-1.0"}),
        "a constexpr_function": _key_of_source(path, {"constexpr_function": "3"}),
    }
    assert _key_of_source(path, {}) == base  # the same source again: the same key
    assert len(set(changed.values()) | {base}) == 4, changed


def test_the_key_is_the_same_in_another_process():
    code = textwrap.dedent("""\
        import sys
        sys.path[:0] = [{tests!r}]
        import test_cache_safety as t
        print(t.kernel_key(t._vector_add_ir(), "sm_90a"))
        print(t.kernel_key(t._scalar_ir(), "sm_100a"))
        """).format(tests=os.path.join(ROOT, "tests"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == [kernel_key(_vector_add_ir(), "sm_90a"), kernel_key(_scalar_ir(), "sm_100a")]


def test_constexprs_options_target_and_specialization_change_the_key():
    base = kernel_key(_scalar_ir(), "sm_90a")
    assert kernel_key(_scalar_ir(), "sm_90a") == base
    variants = {
        "a constexpr": kernel_key(_scalar_ir(factor=3.0), "sm_90a"),
        "num_warps": kernel_key(_scalar_ir(num_warps=8), "sm_90a"),
        "the target": kernel_key(_scalar_ir(), "sm_100a"),
        "divisibility": kernel_key(_scalar_ir(specialization={"out_ptr": {"divisibility": 16}}), "sm_90a"),
        "a layout constexpr": kernel_key(_vector_add_ir(num_warps=8), "sm_90a"),
        "BLOCK": kernel_key(_vector_add_ir(block=2048), "sm_90a"),
    }
    assert len(set(variants.values()) | {base}) == len(variants) + 1, variants


def test_the_debug_setting_changes_the_key(monkeypatch):
    @gluonkit.jit
    def checked(out_ptr, x):
        gl.device_assert(x > 0, "x must be positive")
        gl.store(out_ptr, x)

    monkeypatch.delenv("GLUONKIT_DEBUG", raising=False)
    quiet = kernel_key(checked.build_ir([P32, ir.float32], {}, 4, {}), "sm_90a")
    monkeypatch.setenv("GLUONKIT_DEBUG", "1")
    debug = kernel_key(checked.build_ir([P32, ir.float32], {}, 4, {}), "sm_90a")
    assert quiet != debug


def test_source_locations_beyond_the_printed_line_change_the_key():
    """The PTX's line info holds the file and column, which the printed IR leaves out."""
    func = _scalar_ir()
    base = kernel_key(func, "sm_90a")
    store = next(op for op in func.walk() if op.name == "store")
    original = store.loc
    try:
        store.loc = dataclasses.replace(original, col=original.col + 4)
        assert kernel_key(func, "sm_90a") != base
        store.loc = dataclasses.replace(original, file="/elsewhere/kernels.py")
        assert kernel_key(func, "sm_90a") != base
    finally:
        store.loc = original
    assert kernel_key(func, "sm_90a") == base


def _fake_ptxas(path, build):
    path.write_text(f"#!/bin/sh\necho 'ptxas: NVIDIA (R) Ptx optimizing assembler'\n"
                    f"echo 'Cuda compilation tools, release 13.0, V13.0.{build}'\n")
    path.chmod(0o755)
    return str(path)


def test_the_toolchain_and_gluonkit_change_the_key(tmp_path, monkeypatch):
    func = _scalar_ir()
    monkeypatch.setenv("GLUONKIT_PTXAS", _fake_ptxas(tmp_path / "ptxas_a", 48))
    base = kernel_key(func, "sm_90a")
    assert "V13.0.48" in cache_module.toolchain_versions()["ptxas"]
    variants = {}
    monkeypatch.setenv("GLUONKIT_PTXAS", _fake_ptxas(tmp_path / "ptxas_b", 88))  # same release, other build
    variants["ptxas"] = kernel_key(func, "sm_90a")
    monkeypatch.setenv("GLUONKIT_PTXAS", str(tmp_path / "ptxas_a"))
    assert kernel_key(func, "sm_90a") == base
    with monkeypatch.context() as m:
        m.setattr(cache_module.llvmlite, "__version__", "0.1.0")
        variants["llvmlite"] = kernel_key(func, "sm_90a")
    with monkeypatch.context() as m:
        m.setattr(cache_module, "__version__", "0.0.1")
        variants["gluonkit's version"] = kernel_key(func, "sm_90a")
    with monkeypatch.context() as m:
        m.setattr(cache_module, "source_digest", lambda: "0" * 64)
        variants["gluonkit's source"] = kernel_key(func, "sm_90a")
    assert len(set(variants.values()) | {base}) == len(variants) + 1, variants


def test_the_source_digest_covers_every_file_of_the_package():
    package = os.path.dirname(gluonkit.__file__)
    digest = hashlib.sha256()
    for path in sorted(p for p in _python_files(package)):
        name = os.path.relpath(path, package).replace(os.sep, "/").encode()
        data = open(path, "rb").read()
        digest.update(b"%d:%s%d:%s" % (len(name), name, len(data), data))
    assert cache_module.source_digest() == digest.hexdigest()


def _python_files(folder):
    for base, _, names in os.walk(folder):
        yield from (os.path.join(base, n) for n in names if n.endswith(".py"))


# ----------------------------------------------------------------------------- on the GPU
LAUNCH_SCRIPT = """\
import sys
sys.path.insert(0, {examples!r})
import torch
import vector_add
x = torch.randn(100_000, device="cuda")
y = torch.randn(100_000, device="cuda")
out = torch.empty_like(x)
vector_add.add(x, y, out)
torch.cuda.synchronize()
print(int((out != x + y).sum()))  # IEEE addition: bit-identical to torch's
"""


@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
def test_fresh_processes_launch_through_the_cache_and_survive_a_damaged_entry(tmp_path):
    pytest.importorskip("torch")
    env = {**os.environ, "GLUONKIT_CACHE_DIR": str(tmp_path), "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    env.pop("GLUONKIT_INTERPRET", None)
    script = LAUNCH_SCRIPT.format(examples=os.path.join(ROOT, "examples"))

    def run():
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split()[-1] == "0", proc.stdout
        return list(tmp_path.glob("*/*.entry"))

    entries = run()  # compiles and stores
    assert len(entries) == 1
    intact = entries[0].read_bytes()
    stamp = entries[0].stat().st_mtime_ns
    assert run() == entries and entries[0].stat().st_mtime_ns == stamp  # loaded, not rewritten
    entries[0].write_bytes(intact[:100])
    assert run() == entries and entries[0].read_bytes() == intact  # recompiled and replaced
