"""``@gluonkit.autotune`` / ``@gluonkit.heuristics``.

In the interpreter the first configuration (after pruning) runs, checked against numpy.
The tuning itself is tested without a GPU through two seams that exist anyway: the
launcher ``gluonkit.lang.jit`` forwards ``kernel[grid](...)`` to (replaced by a fake that
records each launch and acts like the kernel on numpy arrays), and autotune's ``do_bench``
parameter (a fake returning a chosen time per configuration).  A ``gpu`` test tunes a
real kernel on the GPU.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import textwrap
import types

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.lang.jit import set_launcher
from gluonkit.runtime import launch as launch_module
from gluonkit.runtime.autotune import Autotuner, AutotunerError
from gluonkit.lower.backend.ptxas import PtxasError
from gluonkit.runtime.driver import CudaError, OutOfResources, has_gpu
from kernel_checks import needs_ptxas


@gluonkit.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: gl.constexpr, layout: gl.constexpr):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    gl.store(out_ptr + offs, gl.load(x_ptr + offs, mask=mask) + gl.load(y_ptr + offs, mask=mask), mask=mask)


@gluonkit.jit
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK: gl.constexpr, layout: gl.constexpr):
    """``out += x``: running it twice changes the result, which reset/restore must prevent."""
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    gl.store(out_ptr + offs, gl.load(out_ptr + offs, mask=mask) + gl.load(x_ptr + offs, mask=mask), mask=mask)


def _layout(num_warps, vec=1):
    return gl.BlockedLayout([vec], [32], [num_warps], [0])


CONFIGS = [
    gluonkit.Config({"BLOCK": 128, "layout": _layout(4)}, num_warps=4),
    gluonkit.Config({"BLOCK": 512, "layout": _layout(8, 2)}, num_warps=8),
    gluonkit.Config({"BLOCK": 1024, "layout": _layout(4, 8)}, num_warps=4),
]
TIMES = {128: 3.0, 512: 1.0, 1024: 2.0}  # fake milliseconds per configuration: BLOCK 512 wins


def grid(meta):
    return (gluonkit.cdiv(meta["n"], meta["BLOCK"]),)


def _random(n, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


# ------------------------------------------------------------------------- the fakes
class FakeLauncher:
    """Records launches; runs the kernel's effect on numpy arrays in Python."""

    def __init__(self):
        self.launches = []
        self.failures = {}  # BLOCK -> the exception its launches raise

    def __call__(self, kernel, grid, args, kwargs):
        named = dict(zip(kernel.arg_names, args), **kwargs)
        self.launches.append(named)
        if named["BLOCK"] in self.failures:
            raise self.failures[named["BLOCK"]]
        n = named["n"]
        if kernel is add_kernel:
            named["out_ptr"][:n] = named["x_ptr"][:n] + named["y_ptr"][:n]
        else:
            named["out_ptr"][:n] += named["x_ptr"][:n]


class FakeBench:
    """``do_bench`` returning ``TIMES`` for the configuration it timed (after running it twice)."""

    def __init__(self, launcher):
        self.launcher = launcher
        self.timed = []

    def __call__(self, kernel_call, quantiles):
        assert quantiles == (0.5, 0.2, 0.8)
        kernel_call()
        kernel_call()
        block = self.launcher.launches[-1]["BLOCK"]
        self.timed.append(block)
        return [TIMES[block], TIMES[block] * 0.9, TIMES[block] * 1.1]


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """A fake launcher and bench, outside the interpreter, with a private cache directory."""
    monkeypatch.delenv("GLUONKIT_INTERPRET", raising=False)
    monkeypatch.delenv("GLUONKIT_PRINT_AUTOTUNING", raising=False)
    monkeypatch.delenv("GLUONKIT_CACHE_AUTOTUNING", raising=False)
    monkeypatch.setenv("GLUONKIT_CACHE_DIR", str(tmp_path / "cache"))
    launcher = FakeLauncher()
    set_launcher(launcher)
    yield launcher, FakeBench(launcher)
    set_launcher(launch_module.launch)


def _tuned(kernel, bench, configs=CONFIGS, **options):
    return gluonkit.autotune(configs=configs, key=["n"], do_bench=bench, **options)(kernel)


# ---------------------------------------------------------------- in the interpreter
@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("GLUONKIT_INTERPRET", "1")


def test_interpreter_runs_the_first_config_without_timing(interpret, capsys):
    def no_bench(kernel_call, quantiles):
        raise AssertionError("the interpreter must not time configurations")

    kernel = _tuned(add_kernel, no_bench)
    for n, seed in ((1000, 1), (77, 2)):
        x, y = _random(n, seed), _random(n, seed + 10)
        out = np.full(n, np.nan, np.float32)
        kernel[grid](x, y, out, n)
        np.testing.assert_array_equal(out, x + y)
        assert kernel.best_config is CONFIGS[0]
    assert capsys.readouterr().err == ""


def test_interpreter_runs_the_first_config_left_by_pruning(interpret):
    kernel = _tuned(add_kernel, None, prune_configs_by={
        "early_config_prune": lambda configs, args, **kw: [c for c in configs[::-1] if c.kwargs["BLOCK"] >= 512]})
    n = 3000
    x, y = _random(n, 3), _random(n, 4)
    out = np.full(n, np.nan, np.float32)
    kernel[grid](x, y, out, n)
    np.testing.assert_array_equal(out, x + y)
    assert kernel.best_config is CONFIGS[2]  # the first of the two left


def test_a_missing_argument_is_reported_by_the_launch(interpret):
    kernel = _tuned(add_kernel, None)
    with pytest.raises(gluonkit.CompilationError, match="missing a required argument: 'n'"):
        kernel[(1,)](_random(8, 40), _random(8, 41), np.zeros(8, np.float32))


def test_heuristics_compute_meta_parameters(interpret):
    kernel = gluonkit.heuristics({"BLOCK": lambda a: 256 if a["n"] > 200 else 64,
                                  "layout": lambda a: _layout(4, a["BLOCK"] // 128 or 1)})(add_kernel)
    for n, seed in ((1000, 5), (100, 6)):
        x, y = _random(n, seed), _random(n, seed + 1)
        out = np.full(n, np.nan, np.float32)
        kernel[grid](x, y, out, n)
        np.testing.assert_array_equal(out, x + y)
    assert kernel.__name__ == "add_kernel"


# ---------------------------------------------------------------- the tuning logic
def test_tunes_once_per_key_and_launches_the_fastest(fake, capsys):
    launcher, bench = fake
    kernel = _tuned(add_kernel, bench)
    x, y, out = _random(1000, 7), _random(1000, 8), np.zeros(1000, np.float32)
    kernel[grid](x, y, out, 1000)
    assert bench.timed == [128, 512, 1024]
    assert kernel.best_config is CONFIGS[1]
    final = launcher.launches[-1]
    assert (final["BLOCK"], final["num_warps"]) == (512, 8) and "num_stages" not in final
    np.testing.assert_array_equal(out, x + y)
    err = capsys.readouterr().err.splitlines()
    assert "tuning add_kernel for key (1000, 'float32', 'float32', 'float32') over 3 configs" in err[0]
    assert [line.split("] ", 1)[1] for line in err[1:4]] == [
        f"BLOCK: {b}, layout: {c.kwargs['layout']}, num_warps: {c.num_warps}, num_ctas: 1, num_stages: 3, "
        f"maxnreg: None: {TIMES[b]:.4f} ms" for b, c in zip((128, 512, 1024), CONFIGS)]
    assert "best: BLOCK: 512" in err[4]

    kernel[grid](x, y, out, 1000)  # same key: no timing, no output
    assert bench.timed == [128, 512, 1024] and capsys.readouterr().err == ""
    kernel[grid](x[:999], y[:999], out, 999)  # a new key value re-tunes
    kernel[grid](x.astype(np.float64), y.astype(np.float64), out.astype(np.float64), 1000)  # a new dtype too
    assert len(bench.timed) == 9
    f32, f64 = ("float32",) * 3, ("float64",) * 3  # the key's value, then each array's dtype
    assert set(kernel.cache) == {(1000, *f32), (999, *f32), (1000, *f64)}


def test_printing_is_silenced_by_the_environment(fake, capsys, monkeypatch):
    monkeypatch.setenv("GLUONKIT_PRINT_AUTOTUNING", "0")
    launcher, bench = fake
    kernel = _tuned(add_kernel, bench)
    kernel[grid](_random(64, 9), _random(64, 10), np.zeros(64, np.float32), 64)
    assert bench.timed == [128, 512, 1024] and capsys.readouterr().err == ""


def _cuda_error(name):
    return CudaError("cuLaunchKernel", types.SimpleNamespace(name=name))


@pytest.mark.parametrize("error, shown", [
    (OutOfResources(300_000, 232_448, "shared memory"), "out of resource: shared memory, Required: 300000"),
    (PtxasError("ptxas error: Entry function uses too much shared data\nmore"), "ptxas error: Entry function"),
    (_cuda_error("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"), "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"),
])
def test_a_config_that_does_not_fit_is_skipped(fake, capsys, error, shown):
    launcher, bench = fake
    launcher.failures = {512: error}
    kernel = _tuned(add_kernel, bench)
    x, y, out = _random(64, 11), _random(64, 12), np.zeros(64, np.float32)
    kernel[grid](x, y, out, 64)
    assert kernel.best_config is CONFIGS[2]
    assert kernel.configs_timings[CONFIGS[1]][0] == float("inf")
    assert f"[2/3] BLOCK: 512, layout: {_layout(8, 2)}, num_warps: 8, num_ctas: 1, num_stages: 3, maxnreg: None: " \
        f"failed: {shown}" in capsys.readouterr().err
    np.testing.assert_array_equal(out, x + y)


@pytest.mark.parametrize("error", [_cuda_error("CUDA_ERROR_ILLEGAL_ADDRESS"),
                                   gluonkit.CompilationError("the layout does not cover BLOCK")])
def test_other_failures_stop_the_tuning(fake, error):
    launcher, bench = fake
    launcher.failures = {512: error}
    kernel = _tuned(add_kernel, bench)
    with pytest.raises(type(error)) as info:
        kernel[grid](_random(64, 11), _random(64, 12), np.zeros(64, np.float32), 64)
    assert info.value is error and bench.timed == [128]


def test_pruning_limits_what_is_timed(fake):
    launcher, bench = fake
    seen = {}

    def early(configs, args, **kwargs):
        seen.update(args=sorted(args), kwargs=sorted(kwargs))
        return configs[1:]

    estimates = {512: 5.0, 1024: 1.0}
    kernel = _tuned(add_kernel, bench, prune_configs_by={
        "early_config_prune": early, "perf_model": lambda **kw: estimates[kw["BLOCK"]], "top_k": 1})
    kernel[grid](_random(64, 13), _random(64, 14), np.zeros(64, np.float32), n=64)
    assert seen == {"args": ["out_ptr", "x_ptr", "y_ptr"], "kwargs": ["n"]}
    assert bench.timed == [] and kernel.best_config is CONFIGS[2]  # one left: nothing to time

    kernel = _tuned(add_kernel, bench, prune_configs_by={"perf_model": lambda **kw: kw["BLOCK"], "top_k": 2})
    kernel[grid](_random(64, 15), _random(64, 16), np.zeros(64, np.float32), 64)
    assert bench.timed == [128, 512] and kernel.best_config is CONFIGS[1]


def test_reset_to_zero_keeps_timing_out_of_the_result(fake):
    launcher, bench = fake
    n = 300
    x = _random(n, 17)
    out = _random(n, 18)  # garbage the reset must clear
    kernel = _tuned(accumulate_kernel, bench, reset_to_zero=["out_ptr"])
    kernel[grid](x, out, n)
    assert len(launcher.launches) == 3 * 2 + 1
    np.testing.assert_array_equal(out, x)  # zeroed after timing, then one real launch


def test_restore_value_keeps_timing_out_of_the_result(fake):
    launcher, bench = fake
    n = 300
    x, before = _random(n, 19), _random(n, 20)
    out = before.copy()
    kernel = _tuned(accumulate_kernel, bench, restore_value=["out_ptr"])
    kernel[grid](x, out, n)
    np.testing.assert_allclose(out, before.astype(np.float64) + x, rtol=1e-6)
    # without it, the six timed runs would have accumulated too
    out = before.copy()
    _tuned(accumulate_kernel, bench)[grid](x, out, n)
    np.testing.assert_allclose(out, before.astype(np.float64) + 7 * x.astype(np.float64), rtol=1e-5)


def test_user_hooks_replace_the_default_ones(fake):
    launcher, bench = fake
    calls = []
    kernel = _tuned(accumulate_kernel, bench, reset_to_zero=["out_ptr"],
                    pre_hook=lambda args, reset_only=False: calls.append(("pre", args["BLOCK"], reset_only)),
                    post_hook=lambda args, exception: calls.append(("post", args["BLOCK"], exception)))
    n = 50
    x, out = _random(n, 21), _random(n, 22)
    before = out.copy()
    kernel[grid](x, out, n)
    assert calls[:4] == [("pre", 128, False), ("post", 128, None)] * 2
    assert calls[-1] == ("pre", 512, True)  # the reset before the real launch, with the best config
    assert len(calls) == 3 * 4 + 1
    np.testing.assert_allclose(out, before.astype(np.float64) + 7 * x, rtol=1e-5)  # no zeroing: replaced


def test_config_pre_hook_runs_before_each_launch(fake):
    launcher, bench = fake
    seen = []
    configs = [gluonkit.Config(dict(c.kwargs), num_warps=c.num_warps, pre_hook=lambda a: seen.append(a["BLOCK"]))
               for c in CONFIGS]
    kernel = _tuned(add_kernel, bench, configs=configs)
    kernel[grid](_random(8, 23), _random(8, 24), np.zeros(8, np.float32), 8)
    assert seen == [128, 128, 512, 512, 1024, 1024, 512]


def test_heuristics_under_autotune(fake):
    launcher, bench = fake
    configs = [gluonkit.Config({"BLOCK": b}, num_warps=4) for b in (128, 512, 1024)]
    stacked = gluonkit.autotune(configs, key=["n"], do_bench=bench)(
        gluonkit.heuristics({"layout": lambda a: _layout(4, a["BLOCK"] // 128)})(add_kernel))
    x, y, out = _random(40, 25), _random(40, 26), np.zeros(40, np.float32)
    stacked[grid](x, y, out, 40)
    assert stacked.best_config is configs[1]
    assert repr(launcher.launches[-1]["layout"]) == repr(_layout(4, 4))
    np.testing.assert_array_equal(out, x + y)


@gluonkit.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: gl.constexpr, layout: gl.constexpr, SCALE: gl.constexpr = 2.0):
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    gl.store(out_ptr + offs, gl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)


def test_defaults_count_in_the_key_and_in_heuristics(fake):
    launcher, bench = fake
    seen = []
    kernel = gluonkit.autotune(CONFIGS, key=["n", "SCALE"], do_bench=bench)(
        gluonkit.heuristics({"n": lambda a: seen.append(a["SCALE"]) or a["n"]})(scale_kernel))
    x, out = _random(16, 42), np.zeros(16, np.float32)
    kernel[grid](x, out, 16)
    kernel[grid](x, out, 16, SCALE=3.0)
    assert set(kernel.cache) == {(16, 2.0, "float32", "float32"), (16, 3.0, "float32", "float32")}
    assert seen[0] == 2.0 and seen[-1] == 3.0 and len(bench.timed) == 6


# ---------------------------------------------------------------- the on-disk cache
def _load_kernel(tmp_path, module_name, body):
    """A @gluonkit.jit kernel defined in a fresh file (the on-disk key hashes its source)."""
    path = tmp_path / f"{module_name}.py"
    path.write_text(textwrap.dedent(f"""\
        import gluonkit
        import gluonkit.language as gl

        @gluonkit.jit
        def copy_kernel(x_ptr, out_ptr, n, BLOCK: gl.constexpr, layout: gl.constexpr):
            offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
            mask = offs < n
            gl.store(out_ptr + offs, {body}, mask=mask)
        """))
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module.copy_kernel


class CopyLauncher(FakeLauncher):
    def __call__(self, kernel, grid, args, kwargs):
        named = dict(zip(kernel.arg_names, args), **kwargs)
        self.launches.append(named)
        named["out_ptr"][:] = named["x_ptr"]


def test_disk_cache_is_hit_by_a_second_tuner_and_missed_after_an_edit(fake, tmp_path, capsys):
    _, bench = fake
    launcher = CopyLauncher()
    bench.launcher = launcher
    set_launcher(launcher)
    first = _load_kernel(tmp_path, "kernels_a", "gl.load(x_ptr + offs, mask=mask)")
    x, out = _random(64, 27), np.zeros(64, np.float32)

    _tuned(first, bench, cache_results=True)[grid](x, out, 64)
    assert bench.timed == [128, 512, 1024]
    entries = list((tmp_path / "cache").glob("*/*.entry"))
    assert len(entries) == 1

    again = _tuned(first, bench, cache_results=True)  # a new tuner (as in another process)
    capsys.readouterr()
    again[grid](x, out, 64)
    assert bench.timed == [128, 512, 1024] and again.best_config is CONFIGS[1]
    assert again.configs_timings[CONFIGS[1]] == [1.0, 0.9, 1.1]
    assert capsys.readouterr().err == ""  # nothing timed, nothing printed
    np.testing.assert_array_equal(out, x)

    same_source = _load_kernel(tmp_path, "kernels_b", "gl.load(x_ptr + offs, mask=mask)")
    _tuned(same_source, bench, cache_results=True)[grid](x, out, 64)
    assert len(bench.timed) == 3  # another file, same source: still a hit

    edited = _load_kernel(tmp_path, "kernels_c", "gl.load(x_ptr + offs, mask=mask) * 1.0")
    _tuned(edited, bench, cache_results=True)[grid](x, out, 64)
    assert len(bench.timed) == 6  # the source changed: tuned again

    _tuned(first, bench, configs=CONFIGS[:2], cache_results=True)[grid](x, out, 64)
    assert len(bench.timed) == 8  # other configs: tuned again
    assert len(list((tmp_path / "cache").glob("*/*.entry"))) == 3


def test_disk_cache_is_off_by_default_and_on_by_environment(fake, tmp_path, monkeypatch):
    launcher, bench = fake
    x, y = _random(64, 28), _random(64, 29)
    for _ in range(2):
        _tuned(add_kernel, bench)[grid](x, y, np.zeros(64, np.float32), 64)
    assert len(bench.timed) == 6 and not (tmp_path / "cache").exists()
    monkeypatch.setenv("GLUONKIT_CACHE_AUTOTUNING", "1")
    for _ in range(2):
        _tuned(add_kernel, bench)[grid](x, y, np.zeros(64, np.float32), 64)
    assert len(bench.timed) == 9


# ---------------------------------------------------------------------------- errors
def test_key_that_is_not_a_parameter():
    line = sys._getframe().f_lineno + 2  # the decorator's line
    with pytest.raises(AutotunerError) as info:
        gluonkit.autotune(CONFIGS, key=["n", "size"])(add_kernel)
    assert "key contains names that are not parameters of add_kernel: size" in str(info.value)
    assert info.value.loc.line == line and info.value.loc.file == __file__
    assert isinstance(info.value, ValueError) and isinstance(info.value, gluonkit.CompilationError)


@pytest.mark.parametrize("option", ["reset_to_zero", "restore_value"])
def test_hook_arguments_that_are_not_parameters(option):
    with pytest.raises(AutotunerError, match=f"{option} contains names that are not parameters of add_kernel: out"):
        gluonkit.autotune(CONFIGS, key=["n"], **{option: ["out"]})(add_kernel)


def test_key_given_as_a_string():
    with pytest.raises(AutotunerError,
                       match=r"key must be a list of argument names, got the string 'n'; write \['n'\]"):
        gluonkit.autotune(CONFIGS, key="n")(add_kernel)


def test_config_kwarg_that_is_not_a_parameter():
    with pytest.raises(AutotunerError, match="the config {BLOCK_SIZE: 64, num_warps: 4.*} contains names that are "
                                             "not parameters of add_kernel: BLOCK_SIZE"):
        gluonkit.autotune([gluonkit.Config({"BLOCK_SIZE": 64})], key=["n"])(add_kernel)


def test_config_also_passed_by_the_caller(fake):
    launcher, bench = fake
    kernel = _tuned(add_kernel, bench)
    with pytest.raises(AutotunerError, match="conflicting meta-parameters: BLOCK of add_kernel are chosen by "
                                             "@autotune's configs and were also passed"):
        kernel[grid](_random(8, 30), _random(8, 31), np.zeros(8, np.float32), 8, BLOCK=64)
    with pytest.raises(AutotunerError, match="conflicting meta-parameters: num_warps"):
        kernel[grid](_random(8, 30), _random(8, 31), np.zeros(8, np.float32), 8, num_warps=4)
    assert launcher.launches == []


def test_a_configs_maxnreg_reaches_the_launch(fake):
    """``Config(maxnreg=...)`` is a launch option like ``num_warps``: every launch with that
    configuration (timed or final) gets it; a configuration without one passes none."""
    launcher, bench = fake
    configs = [gluonkit.Config({"BLOCK": 128, "layout": _layout(4)}, num_warps=4, maxnreg=64),
               gluonkit.Config({"BLOCK": 512, "layout": _layout(8, 2)}, num_warps=8)]
    kernel = _tuned(add_kernel, bench, configs)
    x, y, out = _random(1000, 36), _random(1000, 37), np.zeros(1000, np.float32)
    kernel[grid](x, y, out, 1000)
    assert {(launch["BLOCK"], launch.get("maxnreg")) for launch in launcher.launches} == {(128, 64), (512, None)}
    assert kernel.best_config is configs[1] and "maxnreg" not in launcher.launches[-1]
    np.testing.assert_array_equal(out, x + y)


def test_pruning_to_nothing(fake):
    launcher, bench = fake
    kernel = _tuned(add_kernel, bench, prune_configs_by={"early_config_prune": lambda configs, args, **kw: []})
    with pytest.raises(AutotunerError, match="no configs of add_kernel are left after early_config_prune"):
        kernel[grid](_random(8, 32), _random(8, 33), np.zeros(8, np.float32), 8)


@pytest.mark.parametrize("top_k", [1.5, "2", 0])
def test_bad_top_k(fake, top_k):
    launcher, bench = fake
    kernel = _tuned(add_kernel, bench, prune_configs_by={"perf_model": lambda **kw: 0.0, "top_k": top_k})
    with pytest.raises(AutotunerError, match=r"prune_configs_by\['top_k'\] must be a float <= 1.0"):
        kernel[grid](_random(8, 34), _random(8, 35), np.zeros(8, np.float32), 8)


def test_unknown_prune_field():
    with pytest.raises(AutotunerError, match=r"prune_configs_by has unknown field\(s\) \['topk'\]"):
        gluonkit.autotune(CONFIGS, key=["n"], prune_configs_by={"topk": 2})(add_kernel)


def test_decorating_something_else():
    with pytest.raises(AutotunerError, match="@autotune decorates a @gluonkit.jit function"):
        gluonkit.autotune(CONFIGS, key=["n"])(lambda x: x)
    with pytest.raises(AutotunerError, match="heuristics contains names that are not parameters of add_kernel: B"):
        gluonkit.heuristics({"B": lambda a: 1})(add_kernel)


def test_config_semantics():
    config = gluonkit.Config({"BLOCK": 64}, num_warps=8, maxnreg=None)
    assert config.all_kwargs() == {"BLOCK": 64, "num_warps": 8, "num_ctas": 1, "num_stages": 3}
    assert config.launch_kwargs() == {"BLOCK": 64, "num_warps": 8, "num_ctas": 1}
    assert config == gluonkit.Config({"BLOCK": 64}, num_warps=8) and len({config, gluonkit.Config({"BLOCK": 64},
                                                                                                  num_warps=8)}) == 1
    assert config != gluonkit.Config({"BLOCK": 64}, num_warps=4)
    assert repr(config) == "Config({'BLOCK': 64}, num_warps=8, num_stages=3, num_ctas=1, maxnreg=None)"
    with pytest.raises(NotImplementedError, match="ir_override"):
        gluonkit.Config({}, ir_override="k.ptx")
    assert isinstance(gluonkit.autotune([], key=[])(add_kernel), Autotuner)  # no configs: one default


def test_signatures_are_tritons():
    """Those of triton.autotune, triton.heuristics and triton.Config in Triton 3.9."""
    assert str(inspect.signature(gluonkit.autotune)) == (
        "(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, pre_hook=None, "
        "post_hook=None, warmup=None, rep=None, use_cuda_graph=False, do_bench=None, cache_results=False)")
    assert str(inspect.signature(gluonkit.heuristics)) == "(values)"
    assert str(inspect.signature(gluonkit.Config)) == (
        "(kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None, ir_override=None)")


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("kernel", [add_kernel, accumulate_kernel, scale_kernel], ids=lambda k: k.__name__)
def test_every_config_lowers_and_ptxas_accepts_it(kernel, target):
    pointers = ["*fp32:16" for name in kernel.arg_names if name.endswith("_ptr")]
    for config in CONFIGS:
        compiled = kernel.compile(*pointers, "i32", target=target, num_warps=config.num_warps, **config.kwargs)
        assert f".target {target}" in compiled.asm["ptx"] and compiled.asm["cubin"][:4] == b"\x7fELF"
        assert compiled.metadata["spill_stores"] == 0


# ------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU and driver")
def test_tunes_on_the_gpu(tmp_path, monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    monkeypatch.delenv("GLUONKIT_INTERPRET", raising=False)
    monkeypatch.setenv("GLUONKIT_CACHE_DIR", str(tmp_path))
    kernel = gluonkit.autotune(CONFIGS, key=["n"], restore_value=["out_ptr"], cache_results=True)(accumulate_kernel)
    n = 1 << 20
    x = torch.randn(n, device="cuda")
    before = torch.randn(n, device="cuda")
    out = before.clone()
    kernel[grid](x, out, n)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, before + x, rtol=0, atol=0)
    timings = {c.kwargs["BLOCK"]: t[0] for c, t in kernel.configs_timings.items()}
    assert all(0 < t < 10 for t in timings.values()), timings
    assert kernel.best_config.kwargs["BLOCK"] == min(timings, key=timings.get)
    timed_lines = re.findall(r"^  \[\d/3\] BLOCK: .*: \d+\.\d{4} ms$", capsys.readouterr().err, re.MULTILINE)
    assert len(timed_lines) == len(CONFIGS)

    again = gluonkit.autotune(CONFIGS, key=["n"], restore_value=["out_ptr"], cache_results=True)(accumulate_kernel)
    out = before.clone()
    again[grid](x, out, n)
    torch.cuda.synchronize()
    assert again.best_config == kernel.best_config and "gluonkit.autotune" not in capsys.readouterr().err
    torch.testing.assert_close(out, before + x, rtol=0, atol=0)
