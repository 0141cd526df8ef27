"""``@gluonkit.autotune`` and ``@gluonkit.heuristics``: choosing meta-parameters per launch.

They behave like ``triton.autotune`` and ``triton.heuristics`` (same parameters, defaults
and hooks) and stack over ``@gluonkit.jit`` the way Gluon's tutorials stack Triton's over
``@gluon.jit``::

    @gluonkit.autotune(configs=[gluonkit.Config({"BLOCK": 256}, num_warps=4),
                                gluonkit.Config({"BLOCK": 1024}, num_warps=8)], key=["n"])
    @gluonkit.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: gl.constexpr): ...

    add[lambda meta: (gluonkit.cdiv(n, meta["BLOCK"]),)](x, y, out, n)

The first launch for a *tuning key* — the values of the ``key`` arguments plus the dtype of
every argument that has one — times every configuration with
:func:`gluonkit.runtime.bench.do_bench` (or the ``do_bench`` given) and launches with the
fastest; later launches with that key reuse it.  A configuration's ``kwargs`` are passed as
keyword arguments (the kernel's ``gl.constexpr`` parameters); ``num_warps`` goes to the
launch as its option, and so do ``num_ctas`` and ``maxnreg``
(:data:`~gluonkit.runtime.launch.LAUNCH_OPTIONS`; the launch checks their values).
``num_stages`` has no effect (Gluon kernels pipeline by hand, and gluonkit's launch has no
such option).

While it times, one line per configuration goes to stderr; ``GLUONKIT_PRINT_AUTOTUNING=0``
silences them.  With ``cache_results=True`` (or ``GLUONKIT_CACHE_AUTOTUNING=1``) the
timings are kept in gluonkit's on-disk cache (:mod:`.cache`, under ``GLUONKIT_CACHE_DIR``),
keyed by the tuning key, the configurations, the kernel's source (and that of the ``@jit``
functions it names), the GPU and the versions of gluonkit, llvmlite and ptxas, so another process skips the timing
and an edited kernel is timed afresh.  Under ``GLUONKIT_INTERPRET=1`` nothing is timed: the
first configuration left after pruning is used.
"""

from __future__ import annotations

import inspect
import json
import linecache
import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..ir.diagnostics import Location
from ..lang.constexpr import unwrap
from ..lang.errors import ArgumentError
from ..lang.jit import JITFunction
from ..lower.backend.ptxas import PtxasError
from . import bench
from .cache import KernelCache, cache_key, toolchain_versions
from .driver import CudaError, OutOfResources, device_properties, has_gpu
from .launch import LAUNCH_OPTIONS, interpreting

__all__ = ["Config", "Autotuner", "Heuristics", "autotune", "heuristics", "AutotunerError"]

_OFF_VALUES = ("0", "false", "no", "off")
_ON_VALUES = ("1", "true", "yes", "on")
_QUANTILES = (0.5, 0.2, 0.8)
_CACHE_FILE = "autotune.json"


class AutotunerError(ArgumentError, ValueError):
    """A mistake in an ``@autotune`` / ``@heuristics`` decoration or in an autotuned launch.

    It is an :class:`~gluonkit.lang.errors.ArgumentError` (so a ``CompilationError``) located
    at the decorator's line, and a ``ValueError`` like the errors ``triton.autotune`` raises.
    """


# ------------------------------------------------------------------------------ Config
class Config:
    """One configuration to try: meta-parameters ``kwargs`` and launch options.

    ``kwargs`` maps kernel parameters (normally ``gl.constexpr`` ones) to values;
    ``num_warps`` is the launch's warp count; ``num_stages`` is accepted for Triton
    compatibility and has no effect; ``num_ctas`` (CTAs per cluster) and ``maxnreg``
    (registers per thread) are launch options too.  ``pre_hook``, if
    given, is called with every argument by name before each launch with this
    configuration.  ``ir_override`` (Triton's hand-written IR) is not supported.
    """

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None,
                 ir_override=None):
        if not isinstance(kwargs, dict):
            raise TypeError(f"Config takes a dict of meta-parameters, got {kwargs!r}")
        if ir_override is not None:
            raise NotImplementedError("Config(ir_override=...) is not supported by gluonkit: kernels are "
                                      "always compiled from their Python source")
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook
        self.ir_override = None

    def options(self) -> Dict[str, Any]:
        """The launch options this configuration sets (those that are not None)."""
        pairs = (("num_warps", self.num_warps), ("num_ctas", self.num_ctas),
                 ("num_stages", self.num_stages), ("maxnreg", self.maxnreg))
        return {name: value for name, value in pairs if value is not None}

    def all_kwargs(self) -> Dict[str, Any]:
        """``kwargs`` and the options together, as Triton's perf models and hooks see them."""
        return {**self.kwargs, **self.options()}

    def launch_kwargs(self) -> Dict[str, Any]:
        """What a launch with this configuration adds: ``kwargs`` and the options the launch
        takes (``num_stages``, which it lacks and which has no effect, is left out)."""
        return {**self.kwargs, **{n: v for n, v in self.options().items() if n in LAUNCH_OPTIONS}}

    def _identity(self) -> tuple:
        return tuple(self.all_kwargs().items()) + (("pre_hook", self.pre_hook),)

    def __eq__(self, other) -> bool:
        return isinstance(other, Config) and self._identity() == other._identity()

    def __hash__(self) -> int:
        try:
            return hash(self._identity())
        except TypeError:  # an unhashable meta-parameter value (a list, say)
            return hash(repr(self))

    def __str__(self) -> str:
        return ", ".join([f"{k}: {v}" for k, v in self.kwargs.items()] +
                         [f"{k}: {v}" for k, v in (("num_warps", self.num_warps), ("num_ctas", self.num_ctas),
                                                   ("num_stages", self.num_stages), ("maxnreg", self.maxnreg))])

    def __repr__(self) -> str:
        hook = f", pre_hook={self.pre_hook!r}" if self.pre_hook is not None else ""
        return (f"Config({self.kwargs!r}, num_warps={self.num_warps!r}, num_stages={self.num_stages!r}, "
                f"num_ctas={self.num_ctas!r}, maxnreg={self.maxnreg!r}{hook})")


# ------------------------------------------------------------------- shared wrapper part
class _KernelWrapper:
    """What ``@autotune`` and ``@heuristics`` have in common: they wrap a ``@jit`` function
    (or another wrapper), keep its parameter names and launch with ``kernel[grid](...)``."""

    _decorator = ""  # the decorator's name, for messages

    def __init__(self, fn, where: Location):
        base = fn
        while isinstance(base, _KernelWrapper):
            base = base.fn
        if not isinstance(base, JITFunction):
            raise AutotunerError(f"@{self._decorator} decorates a @gluonkit.jit function (or another "
                                 f"@autotune / @heuristics), got {fn!r}; put it above @gluonkit.jit", where)
        self.fn = fn
        self.arg_names: List[str] = list(fn.arg_names)
        self.where = where
        self.jit_function: JITFunction = base
        for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
            setattr(self, attr, getattr(base, attr, None))
        self.__wrapped__ = fn

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            return self.run(grid, args, kwargs)

        return launch

    def _named(self, args: tuple, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        """Every argument by parameter name: positional ones, keywords, then defaults."""
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        for name, param in self.jit_function.signature.parameters.items():
            if name not in named and param.default is not inspect.Parameter.empty:
                named[name] = param.default
        return named

    def _check_names(self, what: str, names) -> None:
        unknown = [n for n in names if n not in self.arg_names]
        if unknown:
            raise AutotunerError(f"{what} contains names that are not parameters of {self.__name__}: "
                                 f"{', '.join(map(str, unknown))}; its parameters are {', '.join(self.arg_names)}",
                                 self.where)


def _caller_location(depth: int) -> Location:
    """The user's line that called ``autotune(...)`` / ``heuristics(...)`` (``depth`` frames up)."""
    frame = sys._getframe(depth + 1)
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    return Location(frame.f_code.co_filename, frame.f_lineno, len(line) - len(line.lstrip()), "", line.rstrip("\n"))


# ----------------------------------------------------------------------------- Autotuner
class Autotuner(_KernelWrapper):
    """An autotuned kernel (made by :func:`autotune`; see the module docstring).

    ``best_config`` is the configuration of the latest launch; ``cache`` maps each tuning
    key seen to its configuration; ``configs_timings`` holds the timings of the latest
    tuning and ``bench_time`` its duration in seconds.
    """

    _decorator = "autotune"

    def __init__(self, fn, configs, key, reset_to_zero=None, restore_value=None, pre_hook=None, post_hook=None,
                 prune_configs_by=None, warmup=None, rep=None, use_cuda_graph=False, do_bench=None,
                 cache_results=False, where: Optional[Location] = None):
        super().__init__(fn, where or (fn.def_location() if isinstance(fn, JITFunction) else Location()))
        self.configs: List[Config] = list(configs) if configs else [Config({}, num_warps=4, num_stages=3,
                                                                           num_ctas=1)]
        if isinstance(key, str):
            raise AutotunerError(f"key must be a list of argument names, got the string {key!r}; write [{key!r}]",
                                 self.where)
        self.keys: List[str] = list(key)
        self.reset_to_zero: List[str] = list(reset_to_zero or [])
        self.restore_value: List[str] = list(restore_value or [])
        for what, names in (("key", self.keys), ("reset_to_zero", self.reset_to_zero),
                            ("restore_value", self.restore_value)):
            self._check_names(what, names)
        self._check_configs()
        self._tuned_names = set().union(*(c.launch_kwargs() for c in self.configs))
        self.cache: Dict[tuple, Config] = {}
        self.configs_timings: Dict[Config, Any] = {}
        self.bench_time: Optional[float] = None
        self.best_config: Optional[Config] = None
        self.cache_results = bool(cache_results) or _env_flag("GLUONKIT_CACHE_AUTOTUNING", default=False)
        self._restore_copies: Dict[str, Any] = {}
        self.pre_hook = pre_hook or self._default_pre_hook
        self.post_hook = post_hook or self._default_post_hook
        prune = dict(prune_configs_by or {})
        unknown = sorted(set(prune) - {"perf_model", "top_k", "early_config_prune", "model"})
        if unknown:
            raise AutotunerError(f"prune_configs_by has unknown field(s) {unknown}; its fields are perf_model, "
                                 "top_k, early_config_prune and gluonkit's model", self.where)
        self.model_target = prune.get("model")
        if self.model_target is not None and prune.get("perf_model") is not None:
            raise AutotunerError("prune_configs_by takes perf_model or model (gluonkit's cost model), not both: "
                                 "both would rank the configs for top_k", self.where)
        if self.model_target is not None:
            from .model import table_for  # the cost model and its interpreter load on first use, not with gluonkit

            table_for(self.model_target)  # an unknown target is reported here, at the decorator
        self.model_times: Dict[Config, float] = {}
        self.perf_model = prune.get("perf_model")
        self.configs_top_k = prune.get("top_k", 1.0)
        self.early_config_prune = prune.get("early_config_prune")
        if warmup is not None or rep is not None or use_cuda_graph:
            warnings.warn("autotune's warmup, rep and use_cuda_graph are deprecated (as in Triton); pass do_bench "
                          "instead. gluonkit times with CUDA events even when use_cuda_graph=True.",
                          DeprecationWarning, stacklevel=3)
        if do_bench is None:
            warmup_ms, rep_ms = (25 if warmup is None else warmup), (100 if rep is None else rep)

            def do_bench(kernel_call, quantiles):
                return bench.do_bench(kernel_call, warmup=warmup_ms, rep=rep_ms, quantiles=quantiles)
        self.do_bench: Callable = do_bench
        self._sources: Optional[List[str]] = None

    def _check_configs(self) -> None:
        for config in self.configs:
            if not isinstance(config, Config):
                raise AutotunerError(f"configs must be gluonkit.Config objects, got {config!r}", self.where)
            self._check_names(f"the config {{{config}}}", config.kwargs)

    # ------------------------------------------------------------------ the launch
    def run(self, grid, args: tuple, kwargs: Dict[str, Any]):
        """Launch over ``grid`` with the configuration chosen for these arguments."""
        self._check_conflicts(kwargs)
        named = self._named(args, kwargs)
        key = self._tuning_key(named)
        config = self.cache.get(key)
        if config is None:
            config = self.cache[key] = self._choose(grid, args, kwargs, named, key)
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**named, **config.all_kwargs()})
        return self.fn[grid](*args, **kwargs, **config.launch_kwargs())

    def _check_conflicts(self, kwargs: Dict[str, Any]) -> None:
        conflicts = sorted(kwargs.keys() & self._tuned_names)
        if conflicts:
            raise AutotunerError(f"conflicting meta-parameters: {', '.join(conflicts)} of {self.__name__} are "
                                 "chosen by @autotune's configs and were also passed to the launch; do not pass "
                                 "them (or remove them from the configs)", self.where)

    def _tuning_key(self, named: Dict[str, Any]) -> tuple:
        """The key arguments' values, then the dtype of every argument that has one (Triton's rule)."""
        key = [unwrap(named.get(name)) for name in self.keys]  # a missing one: the launch will say so
        key += [str(value.dtype) for name, value in named.items() if name in self.arg_names and hasattr(value, "dtype")]
        return tuple(key)

    def _choose(self, grid, args, kwargs, named, key) -> Config:
        if len(self.configs) == 1:
            return self.configs[0]
        pruned = self.prune_configs(kwargs, dict(zip(self.arg_names, args)))
        if self.model_target is not None:
            pruned = self.model_prune(grid, args, kwargs, pruned)
        if interpreting() or len(pruned) == 1:
            return pruned[0]
        if self.cache_results and not any(c.pre_hook for c in pruned):
            cached = self._read_disk(key, pruned)
            if cached is not None:
                self.configs_timings = dict(zip(pruned, cached))
                return min(pruned, key=lambda c: _first(self.configs_timings[c]))
            best = self._benchmark(grid, args, kwargs, named, key, pruned)
            self._write_disk(key, pruned)
            return best
        return self._benchmark(grid, args, kwargs, named, key, pruned)

    def prune_configs(self, kwargs: Dict[str, Any], positional: Optional[Dict[str, Any]] = None) -> List[Config]:
        """The configurations left by ``early_config_prune`` and then the ``perf_model``'s ``top_k``.

        As in Triton, ``early_config_prune(configs, positional_args_by_name, **kwargs)`` and
        ``perf_model(**positional_args_by_name, **kwargs, **config.all_kwargs())``; a float
        ``top_k`` <= 1 is a fraction of the configurations (at least one is kept).
        """
        positional = positional or {}
        pruned = list(self.configs)
        if self.early_config_prune is not None:
            pruned = list(self.early_config_prune(pruned, positional, **kwargs) or [])
            if not pruned:
                raise AutotunerError(f"no configs of {self.__name__} are left after early_config_prune; it must "
                                     "return at least one config", self.where)
        if self.perf_model is not None:
            top_k = self._top_k(len(pruned))
            if len(pruned) > top_k:
                estimate = {id(c): self.perf_model(**positional, **kwargs, **c.all_kwargs()) for c in pruned}
                pruned = sorted(pruned, key=lambda c: estimate[id(c)])[:top_k]
        return pruned

    def model_prune(self, grid, args: tuple, kwargs: Dict[str, Any], configs: List[Config]) -> List[Config]:
        """The ``top_k`` of ``configs`` that the cost model (:mod:`.model`, on the target
        ``prune_configs_by["model"]`` names) predicts fastest, fastest first; their predicted
        times (µs) are kept in :attr:`model_times`.  Each prediction interprets the programs of
        one SM on the CPU (copies of GPU arrays), so it suits kernels whose per-SM work is small."""
        top_k = self._top_k(len(configs))
        if len(configs) <= top_k:
            return configs
        from .model import for_interpreter, predict  # the cost model and its interpreter load on first use

        host_args = tuple(for_interpreter(a) for a in args)
        host_kwargs = {k: for_interpreter(v) for k, v in kwargs.items()}
        self.model_times = {}
        for config in configs:
            self.model_times[config] = predict(self.fn, grid, *host_args, target=self.model_target, timeline=False,
                                               **host_kwargs, **config.launch_kwargs()).time_us
        return sorted(configs, key=self.model_times.__getitem__)[:top_k]

    def _top_k(self, count: int) -> int:
        top_k = self.configs_top_k
        if isinstance(top_k, float) and top_k <= 1.0:
            return max(1, int(count * top_k))
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            raise AutotunerError(f"prune_configs_by['top_k'] must be a float <= 1.0 (a fraction) or an int >= 1 "
                                 f"(a count), got {top_k!r}", self.where)
        return top_k

    # ------------------------------------------------------------------ timing
    def _benchmark(self, grid, args, kwargs, named, key, configs: List[Config]) -> Config:
        show = _env_flag("GLUONKIT_PRINT_AUTOTUNING", default=True)
        if show:
            _say(f"gluonkit.autotune: tuning {self.__name__} for key {key} over {len(configs)} configs")
        start = time.perf_counter()
        timings: Dict[Config, Any] = {}
        for i, config in enumerate(configs):
            timing, failure = self._bench_one(grid, args, kwargs, named, config)
            timings[config] = timing
            if show:
                result = f"failed: {failure}" if failure else f"{_first(timing):.4f} ms"
                _say(f"  [{i + 1}/{len(configs)}] {config}: {result}")
        self.bench_time = time.perf_counter() - start
        self.configs_timings = timings
        best = min(configs, key=lambda c: _first(timings[c]))
        self.pre_hook({**named, **best.all_kwargs()}, reset_only=True)
        if show:
            _say(f"  best: {best} ({_first(timings[best]):.4f} ms), tuned in {self.bench_time:.2f} s")
        return best

    def _bench_one(self, grid, args, kwargs, named, config: Config) -> Tuple[Any, Optional[str]]:
        """``(timing, None)`` or, when the configuration cannot run on this GPU, ``(inf..., why)``."""
        every = {**named, **config.all_kwargs()}
        launch_kwargs = {**kwargs, **config.launch_kwargs()}

        def kernel_call():
            if config.pre_hook is not None:
                config.pre_hook(every)
            self.pre_hook(every)
            try:
                self.fn[grid](*args, **launch_kwargs)
            except Exception as e:
                self.post_hook(every, exception=e)
                raise
            self.post_hook(every, exception=None)

        try:
            return self.do_bench(kernel_call, quantiles=_QUANTILES), None
        except (OutOfResources, PtxasError) as e:
            return [float("inf")] * len(_QUANTILES), str(e).splitlines()[0]
        except CudaError as e:
            if e.name != "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES":
                raise
            return [float("inf")] * len(_QUANTILES), str(e)

    # ------------------------------------------------------------------ the hooks
    def _default_pre_hook(self, named: Dict[str, Any], reset_only: bool = False) -> None:
        """Zero the ``reset_to_zero`` arguments; keep copies of the ``restore_value`` ones."""
        for name in self.reset_to_zero:
            if named.get(name) is not None:
                _zero(named[name])
        if not reset_only:
            self._restore_copies = {n: _copy(named[n]) for n in self.restore_value if named.get(n) is not None}

    def _default_post_hook(self, named: Dict[str, Any], exception=None) -> None:
        """Write the copies the pre-hook kept back into the ``restore_value`` arguments."""
        for name, saved in self._restore_copies.items():
            _copy_into(named[name], saved)
        self._restore_copies = {}

    # ------------------------------------------------------------------ disk cache
    def _disk_key(self, key: tuple, configs: List[Config]) -> str:
        return cache_key(kind="autotune", toolchain=toolchain_versions(), device=_device_identity(),
                         kernel=self.__name__, sources=self._kernel_sources(), key=repr(key),
                         configs=[repr(c) for c in configs], launch_options=sorted(LAUNCH_OPTIONS))

    def _read_disk(self, key: tuple, configs: List[Config]) -> Optional[list]:
        files = KernelCache().get(self._disk_key(key, configs))
        if files is None or _CACHE_FILE not in files:
            return None
        try:
            timings = json.loads(files[_CACHE_FILE])["timings"]
        except (ValueError, KeyError, TypeError):
            return None
        return timings if isinstance(timings, list) and len(timings) == len(configs) else None

    def _write_disk(self, key: tuple, configs: List[Config]) -> None:
        document = {"kernel": self.__name__, "key": repr(key), "configs": [repr(c) for c in configs],
                    "timings": [self.configs_timings[c] for c in configs]}
        KernelCache().put(self._disk_key(key, configs), {_CACHE_FILE: json.dumps(document)})

    def _kernel_sources(self) -> List[str]:
        """The kernel's source and those of the ``@jit`` functions it names, transitively."""
        if self._sources is None:
            seen: Dict[int, JITFunction] = {}
            todo = [self.jit_function]
            while todo:
                fn = todo.pop()
                if id(fn) in seen:
                    continue
                seen[id(fn)] = fn
                scope = {**fn.globals, **fn.closure_vars()}
                todo += [scope[n] for n in fn.fn.__code__.co_names + fn.fn.__code__.co_freevars
                         if isinstance(scope.get(n), JITFunction)]
            self._sources = sorted(f"{f.__qualname__}\n{f.src}" for f in seen.values())
        return self._sources


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, pre_hook=None,
             post_hook=None, warmup=None, rep=None, use_cuda_graph=False, do_bench=None, cache_results=False):
    """Decorate a ``@gluonkit.jit`` kernel so each launch uses the fastest of ``configs``
    for its tuning key (the values of the ``key`` arguments and the arguments' dtypes).

    :param configs: :class:`Config` objects; their ``kwargs`` must name kernel parameters
        that the launch does not pass itself.
    :param key: names of arguments whose values select a tuning (a new value re-tunes).
    :param prune_configs_by: a dict with ``early_config_prune(configs, args, **kwargs)``
        returning the configurations worth timing, and/or ``perf_model(**args, **config)``
        estimating a time, of which the ``top_k`` (a count, or a fraction if a float <= 1)
        best are timed.
    :param reset_to_zero: arguments zeroed before every timed run and before the real launch.
    :param restore_value: arguments copied before every timed run and restored after it, so
        timing does not change the values the real launch sees.
    :param pre_hook: ``pre_hook(args_by_name, reset_only=False)``, called before every timed
        run instead of the reset/copy above.
    :param post_hook: ``post_hook(args_by_name, exception)``, called after every timed run
        instead of the restore above.
    :param warmup: deprecated: milliseconds of warm-up runs for the default ``do_bench``.
    :param rep: deprecated: milliseconds of timed runs for the default ``do_bench``.
    :param use_cuda_graph: deprecated; accepted, timing still uses CUDA events.
    :param do_bench: ``do_bench(kernel_call, quantiles)`` returning a time (or a list whose
        first entry is the time compared); default :func:`gluonkit.runtime.bench.do_bench`.
    :param cache_results: keep timings in gluonkit's on-disk cache (also turned on by
        ``GLUONKIT_CACHE_AUTOTUNING=1``).

    While timing, a line per configuration goes to stderr (``GLUONKIT_PRINT_AUTOTUNING=0``
    silences it).  Under ``GLUONKIT_INTERPRET=1`` nothing is timed: the first configuration
    left after pruning is used.  ``kernel.best_config`` is the configuration last launched.
    """
    where = _caller_location(1)

    def decorator(fn):
        return Autotuner(fn, configs, key, reset_to_zero=reset_to_zero, restore_value=restore_value,
                         pre_hook=pre_hook, post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup,
                         rep=rep, use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results,
                         where=where)

    return decorator


# ---------------------------------------------------------------------------- heuristics
class Heuristics(_KernelWrapper):
    """A kernel whose meta-parameters are computed from its arguments (see :func:`heuristics`)."""

    _decorator = "heuristics"

    def __init__(self, fn, values: Dict[str, Callable[[Dict[str, Any]], Any]], where: Location):
        super().__init__(fn, where)
        if not isinstance(values, dict):
            raise AutotunerError(f"heuristics takes a dict of parameter name -> function, got {values!r}", where)
        self._check_names("heuristics", values)
        self.values = dict(values)

    def run(self, grid, args: tuple, kwargs: Dict[str, Any]):
        kwargs = dict(kwargs)
        for name, rule in self.values.items():
            kwargs[name] = rule(self._named(args, kwargs))
        return self.fn[grid](*args, **kwargs)


def heuristics(values):
    """Decorate a ``@gluonkit.jit`` kernel (or an autotuned one) so that each parameter named
    in ``values`` is computed at every launch as ``values[name](args_by_name)``, like
    ``triton.heuristics``.  Rules run in order and see the values earlier ones computed."""
    where = _caller_location(1)

    def decorator(fn):
        return Heuristics(fn, values, where)

    return decorator


# ------------------------------------------------------------------------------ helpers
def _first(timing) -> float:
    """The time a ranking compares: the timing itself, or the first of several quantiles."""
    return float(timing[0]) if isinstance(timing, (list, tuple)) else float(timing)


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value in _ON_VALUES:
        return True
    if value in _OFF_VALUES:
        return False
    return default


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _device_identity() -> str:
    """The GPU timings belong to (its name and architecture)."""
    if not has_gpu():
        return "no GPU"
    props = device_properties()
    return f"{props.name} {props.arch}"


def _zero(value) -> None:
    if hasattr(value, "zero_"):  # torch
        value.zero_()
    else:  # numpy, CuPy
        value.fill(0)


def _copy(value):
    return value.clone() if hasattr(value, "clone") else value.copy()


def _copy_into(dst, src) -> None:
    if hasattr(dst, "copy_"):  # torch
        dst.copy_(src)
    else:
        dst[...] = src
