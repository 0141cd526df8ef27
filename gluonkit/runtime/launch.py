"""``kernel[grid](*args, num_warps=4, **constexprs)``: binding, typing and running a launch.

:mod:`gluonkit.lang.jit` forwards every launch to the function registered with
``set_launcher``; this module registers :func:`launch` when imported (``import gluonkit``
does that).  With ``GLUONKIT_INTERPRET=1`` (or ``true``/``yes``/``on``) in the environment
at launch time the kernel runs in the CPU interpreter:

1. the launch options (``num_warps``, ``num_ctas``) are taken from the keyword arguments —
   a kernel parameter of the same name receives the value too, as in Gluon
   (:mod:`gluonkit.lang.launch_options`) — and the arguments are bound to the kernel's
   parameters like a Python call; parameters annotated ``gl.constexpr``, values wrapped in
   ``gl.constexpr`` and ``None`` are compile-time, the rest runtime;
2. runtime arguments are typed as in Triton: ``bool`` → int1, ``int`` → int32 / int64 /
   uint64 by range, ``float`` → float32, numpy arrays and CPU torch tensors → pointers to
   their dtype (they are registered in a fresh :class:`~gluonkit.interpret.Memory` and
   written in place); a :class:`~gluonkit.nvidia.hopper.TensorDescriptor` over a numpy
   array or CPU torch tensor → its ``TensorDescType``, its base registered the same way and
   the interpreter reading its shape, strides and padding directly;
3. integers and pointers divisible by 16 (byte addresses, which keep the arrays' real
   alignment) are recorded as ``specialization[name] = {"divisibility": 16}``, unless named
   in the kernel's ``do_not_specialize``;
4. ``grid`` — 1 to 3 ints, or a callable of the meta-parameters (every bound argument by
   name, plus the launch options ``num_warps`` and ``num_ctas`` where no parameter has
   their name) returning them — is evaluated;
5. the frontend builds the IR, layout inference resolves ``AutoLayout``, the verifier checks
   the result, and :func:`~gluonkit.interpret.run_grid` runs every program — recording its
   events when ``GLUONKIT_INTERPRET_TRACE`` names a file or inside
   :func:`gluonkit.interpret.trace.recording` (:mod:`gluonkit.interpret.trace`).

Mistakes in the call (unknown or missing arguments, values of no kernel type, a bad grid)
raise :class:`~gluonkit.lang.errors.ArgumentError` at the kernel's ``def`` line, naming the
parameter.  Without ``GLUONKIT_INTERPRET`` the kernel is compiled and launched on the GPU
(:mod:`gluonkit.runtime.gpu`); where there is none, :class:`NoBackendError` says so and
how to use the interpreter.

Once a kernel is loaded, a GPU launch skips all of the above: a call like the previous one
(same positional count, keywords and compile-time values, arguments of the same types)
goes straight to the kernel's generated launch function (:mod:`gluonkit.runtime.fastlaunch`,
kept as the kernel's ``_fast_launch``), which checks each argument inline and
calls the driver; other calls look their specialization up by the arguments' signatures.
``kernel.warmup(*args, grid=...)`` (:func:`warmup`) binds and compiles like a launch but
returns a :class:`~gluonkit.runtime.precompiled.PrecompiledKernel` instead of running.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..ir import verify
from ..ir.types import PointerType, TensorDescType
from ..lang.constexpr import constexpr, unwrap
from ..lang.errors import ArgumentError
from ..lang.jit import JITFunction, set_launcher, set_warmer
from ..lang.launch_options import LAUNCH_OPTIONS, check_launch_options, split_launch_options
from ..lower.backend.targets import TARGETS
from ..lower.infer.solve import infer_layouts
from ..lower.memplan.smem import check_budget, plan_shared_memory
from ..nvidia.hopper import TensorDescriptor, TensorDescriptorIm2Col
from . import fastlaunch, timeline
from .args import ir_type_of
from .driver import has_gpu
from .gpu import current_stream, load_for_launch, signature_and_raw, signature_of, stream_reader
from .precompiled import PrecompiledKernel
from .timeline import active_recorder

__all__ = ["launch", "warmup", "bind", "interpreting", "interpreter_inputs", "NoBackendError", "LAUNCH_OPTIONS"]

_INTERPRET_VALUES = ("1", "true", "yes", "on")
_inferred: "weakref.WeakSet" = weakref.WeakSet()  # IR functions (cached by the frontend) already inferred


class NoBackendError(RuntimeError):
    """A launch outside the interpreter on a machine without a usable CUDA GPU."""


def interpreting() -> bool:
    """Whether ``GLUONKIT_INTERPRET`` asks for the CPU interpreter.

    Asked on every launch, so it reads CPython's mapping behind ``os.environ`` (kept in step
    by ``os.environ[...] = ...``, ``monkeypatch.setenv``) where there is one: ``os.environ.get``
    of an absent name raises and catches a KeyError, about 1 µs."""
    value = _ENVIRON_DATA.get(_INTERPRET_KEY) if _ENVIRON_DATA is not None else os.environ.get("GLUONKIT_INTERPRET")
    if value is None:
        return False
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value.strip().lower() in _INTERPRET_VALUES


_ENVIRON_DATA = getattr(os.environ, "_data", None)
_INTERPRET_KEY = os.environ.encodekey("GLUONKIT_INTERPRET") if hasattr(os.environ, "encodekey") else None


def _fast_guard() -> Tuple[str, dict]:
    """What a generated launch asks first (:func:`gluonkit.runtime.fastlaunch.build`): true
    when the interpreter is asked for or a timeline is being measured.  Inline rather than a
    call to :func:`interpreting` or :func:`~gluonkit.runtime.timeline.active_recorder` (each
    costs a Python call): the variable is usually unset and no timeline measured."""
    names = {"_interpreting": interpreting, "_timeline": timeline}
    measured = "_timeline._active is not None"  # what active_recorder() returns
    if _ENVIRON_DATA is None:
        return f"_interpreting() or {measured}", names
    names.update(_environ=_ENVIRON_DATA, _interpret_key=_INTERPRET_KEY)  # a membership test: no call
    return f"_interpret_key in _environ and _interpreting() or {measured}", names


def launch(kernel: JITFunction, grid, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    """Run ``kernel`` over ``grid`` with ``args``/``kwargs`` (see the module docstring)."""
    if _GPU_FOUND and type(grid) is tuple and not interpreting() and active_recorder() is None and \
            _launch_fast(kernel, grid, args, kwargs):
        return
    _prepared(kernel, grid, args, kwargs, launch=True)


def warmup(kernel: JITFunction, grid, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> PrecompiledKernel:
    """``kernel.warmup(*args, grid=grid, **kwargs)``: compile and load without launching
    (:mod:`.precompiled`); ``kernel[grid](...)`` with such arguments takes the fast path after."""
    return _prepared(kernel, grid, args, kwargs, launch=False)


def _resolve(kernel: JITFunction, grid, args, kwargs):
    """``(options, bound, constexprs, runtime, grid)`` of a launch: its launch options, every
    parameter's argument, the compile-time ones, the names of the runtime ones, the grid."""
    options, kwargs = split_launch_options(kernel.arg_names, kwargs)
    check_launch_options(options, kernel.def_location())
    bound = _bind(kernel, args, kwargs)
    _check_constexpr_values(kernel, bound)
    constexprs = {n: unwrap(v) for n, v in bound.items() if _is_compile_time(kernel, n, v)}
    runtime = [n for n in kernel.arg_names if n not in constexprs]
    if callable(grid) or type(grid) is not tuple:
        grid = _evaluate_grid(kernel, grid, {**options, **{n: unwrap(v) for n, v in bound.items()}})
    else:
        grid = _evaluate_grid(kernel, grid, {})
    return options, bound, constexprs, runtime, grid


def _prepared(kernel: JITFunction, grid, args, kwargs, launch: bool) -> Optional[PrecompiledKernel]:
    """Bind and type a launch; run it (``launch``) or return its :class:`PrecompiledKernel`."""
    call_key = (len(args), tuple(kwargs))
    all_values = args + tuple(kwargs.values())
    options, bound, constexprs, runtime, grid = _resolve(kernel, grid, args, kwargs)
    num_warps = options["num_warps"]
    if interpreting():
        if launch:
            _interpret(kernel, grid, bound, constexprs, runtime, options)
            return None
        fixed = {n: v for n, v in bound.items() if n not in runtime}

        def interpret(grid, values):
            _interpret(kernel, grid, {**fixed, **dict(zip(runtime, values))}, constexprs, runtime, options)
        return PrecompiledKernel(kernel, runtime, (), None, interpret)
    if not _gpu_present():
        raise NoBackendError(
            f"cannot launch {kernel.__name__}: no CUDA GPU or driver was found. Set "
            "GLUONKIT_INTERPRET=1 in the environment to run kernels in the CPU interpreter "
            "(numpy arrays and CPU torch tensors act as device memory).")
    values = [bound[n] for n in runtime]
    try:
        recorder = active_recorder()
        entry = load_for_launch(kernel, runtime, values, constexprs, num_warps, _do_not_specialize(kernel),
                                options["maxnreg"], options["num_ctas"], recorder.build if recorder else None)
        if launch and recorder is not None:
            recorder.launch(entry, grid, values)
            return None  # an instrumented build never serves the fast path
        if launch:
            entry.run(grid, values)
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"launching {kernel.__name__}: {e}", kernel.def_location()) from None
    _remember_call(kernel, call_key, all_values, runtime, entry)
    return None if launch else PrecompiledKernel(kernel, runtime, tuple(map(signature_of, values)), entry)


def bind(kernel: JITFunction, grid, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Callable[[], None]:
    """A function of no arguments that launches ``kernel[grid](*args, **kwargs)``, for a
    caller that launches the same arguments again and again (a prepared GEMM: descriptors,
    sizes and meta-parameters fixed).

    Its first call launches through :func:`launch` (compiling, checking, loading); later
    calls on the GPU reuse that call's packed argument block and go straight to
    ``cuLaunchKernel`` on torch's current stream, skipping the per-call signature, key and
    packing work.  Tensor addresses are captured: the arrays must stay alive and in place.
    In the interpreter, inside :func:`gluonkit.runtime.timeline.measuring`, or when the
    arguments need the packer's full conversion, every call goes through :func:`launch`.
    """
    fast = None

    def general() -> None:
        launch(kernel, grid, args, kwargs)

    def first() -> None:
        nonlocal fast
        general()
        fast = _bound_launch(kernel, grid, args, kwargs) or general

    def run() -> None:
        if fast is None:
            first()
        elif active_recorder() is not None:  # measured: the instrumented build, through launch()
            general()
        else:
            fast()

    return run


def _bound_launch(kernel: JITFunction, grid, args, kwargs) -> Optional[Callable[[], None]]:
    """The direct launch of the loaded kernel the fast path keeps for this call, or None."""
    if not (_GPU_FOUND and type(grid) is tuple) or interpreting():
        return None
    patterns = _PATTERNS.get(id(kernel))
    pattern = patterns.get((len(args), tuple(kwargs))) if patterns is not None else None
    if pattern is None:
        return None
    try:
        key, raw = pattern.key(args + tuple(kwargs.values()))
        entry = pattern.launches.get(key) if key is not None else None
    except TypeError:  # an unhashable compile-time value
        return None
    if entry is None or entry.tuple_args or None in raw:
        return None
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    if 0 in grid3:
        return lambda: None
    grid3 = (grid3[0] * entry.num_ctas,) + grid3[1:]  # a cluster launch: num_ctas CTAs per program
    packed = entry.packer.pack_raw(raw, own=True)
    loaded, block, shared = entry.kernel, entry.block, entry.shared_bytes

    def run() -> None:
        loaded.launch(grid3, block, shared, current_stream(), packed)

    return run


# ------------------------------------------------------------------ the fast GPU path
class _CallPattern:
    """One way of calling a kernel (how many positional arguments, which keywords): where
    its runtime and compile-time arguments sit among ``args + tuple(kwargs.values())``, the
    loaded kernels seen with it, keyed by the runtime arguments' signatures and the
    compile-time values, and each one's generated launch function (:mod:`.fastlaunch`).
    ``general`` is what a generated launch calls with a call it does not take: :func:`launch`
    of the kernel (held weakly: the generated launches must not keep the kernel alive)."""

    __slots__ = ("names", "positional", "runtime_slots", "constexpr_slots", "launches", "fast", "general")

    def __init__(self, names, positional, runtime_slots, constexpr_slots, kernel: JITFunction):
        self.names = names  # the parameter name of each slot
        self.positional = positional  # how many slots are positional arguments
        self.runtime_slots = runtime_slots
        self.constexpr_slots = constexpr_slots
        self.launches: Dict[tuple, Any] = {}
        self.fast: Dict[tuple, Optional[Callable]] = {}
        ref = weakref.ref(kernel)
        self.general = lambda grid, args, kwargs: launch(ref(), grid, args, kwargs)

    def key(self, values) -> Tuple[Optional[tuple], list]:
        """``(key, raw runtime values)``; the key is None when a runtime slot holds a
        compile-time value (None or ``gl.constexpr``) this time, and a raw value is None
        where the packer must convert it."""
        signatures, raw = [], []
        for i in self.runtime_slots:
            signature, value = signature_and_raw(values[i])
            if signature is None:
                return None, raw
            signatures.append(signature)
            raw.append(value)
        return (tuple(signatures), tuple([values[i] for i in self.constexpr_slots])), raw

    def fast_launch(self, key, entry) -> Optional[Callable]:
        """The generated launch function of ``entry`` for calls of this pattern with the
        compile-time values of ``key`` (built on first use), or None where there is none."""
        try:
            return self.fast[key]
        except KeyError:
            pass
        fn = self.fast[key] = fastlaunch.build(
            entry, key[0], self.runtime_slots, self.general, list(zip(self.constexpr_slots, key[1])),
            (self.positional, self.names[self.positional:]), fastlaunch.CALL, _fast_guard(), stream_reader())
        return fn


# id(kernel) -> {call key: _CallPattern}; an entry is dropped when its kernel is collected
# (a weakref.finalize).  Keyed by id rather than weakly by the kernel: a WeakKeyDictionary
# lookup builds a weak reference on every launch.
_PATTERNS: Dict[int, Dict[tuple, _CallPattern]] = {}


def _launch_fast(kernel: JITFunction, grid, args, kwargs) -> bool:
    """Launch a kernel already loaded for this way of calling it and these argument types
    (through cuda-python: the checked path); False if there is none.  Its generated launch
    function becomes what ``kernel[grid]`` calls next."""
    patterns = _PATTERNS.get(id(kernel))
    pattern = patterns.get((len(args), tuple(kwargs))) if patterns is not None else None
    if pattern is None:
        return False
    values = args + tuple(kwargs.values())
    try:
        key, raw = pattern.key(values)
        entry = pattern.launches.get(key) if key is not None else None
    except TypeError:  # an unhashable compile-time value
        return False
    if entry is None:
        return False
    _set_fast(kernel, pattern.fast_launch(key, entry))
    runtime = [values[i] for i in pattern.runtime_slots]
    grid = _evaluate_grid(kernel, grid, {})
    try:
        entry.run(grid, runtime, None if None in raw else raw)
    except (TypeError, ValueError) as e:  # a number out of its type's range: as the general path says it
        raise ArgumentError(f"launching {kernel.__name__}: {e}", kernel.def_location()) from None
    return True


def _remember_call(kernel: JITFunction, call_key, all_values, runtime, entry) -> None:
    """Record where this call's arguments sit, so the next such call takes the fast path."""
    names = kernel.arg_names[:call_key[0]] + list(call_key[1])
    if sorted(n for n in names if n in runtime) != sorted(runtime):
        return  # a runtime parameter came from its default: keep the general path
    slot = {n: i for i, n in enumerate(names)}
    patterns = _PATTERNS.get(id(kernel))
    if patterns is None:
        patterns = _PATTERNS[id(kernel)] = {}
        weakref.finalize(kernel, _forget, id(kernel))
    pattern = patterns.get(call_key)
    if pattern is None:
        pattern = patterns[call_key] = _CallPattern(
            names, call_key[0], [slot[n] for n in runtime], [i for i, n in enumerate(names) if n not in runtime],
            kernel)
    try:
        key, _ = pattern.key(all_values)
        if key is not None:
            pattern.launches[key] = entry
            _set_fast(kernel, pattern.fast_launch(key, entry))
    except TypeError:
        pass


def _set_fast(kernel: JITFunction, fast: Optional[Callable]) -> None:
    """Make ``fast`` (or nothing) what ``kernel[grid](...)`` tries first (``kernel._fast_launch``)."""
    kernel._fast_launch = fast


def _forget(kernel_id: int) -> None:
    """Drop a collected kernel's call patterns (its fast launch went with it)."""
    _PATTERNS.pop(kernel_id, None)


def _gpu_present() -> bool:
    """Whether a GPU can be used; a found one is remembered (the check calls the driver)."""
    global _GPU_FOUND
    if not _GPU_FOUND:
        _GPU_FOUND = has_gpu()
    return _GPU_FOUND


_GPU_FOUND = False


def interpreter_inputs(kernel: JITFunction, grid, args: Tuple[Any, ...], kwargs: Dict[str, Any]):
    """``(func, grid, values, memory)``: what :func:`~gluonkit.interpret.run_grid` takes to run
    ``kernel[grid](*args, **kwargs)`` in the interpreter (the IR, inferred and verified; the
    grid as 3 ints; the runtime values; the memory the arrays are registered in), for callers
    that run only some of its programs (the cost model, :mod:`.model`)."""
    options, bound, constexprs, runtime, grid = _resolve(kernel, grid, args, kwargs)
    func, values, memory = _interpreted(kernel, bound, constexprs, runtime, options)
    return func, grid, values, memory


def _interpreted(kernel: JITFunction, bound, constexprs, runtime, options):
    """The inferred, verified IR of a launch, its runtime values and their memory."""
    from ..interpret import Memory  # the interpreter loads on first use, not with gluonkit

    memory = Memory()
    arg_types, values, specialization = [], [], {}
    no_spec = _do_not_specialize(kernel)
    for name in runtime:
        arg_types.append(_interpreted_arg(kernel, name, bound[name], memory, name in no_spec, values, specialization))
    func = kernel.build_ir(arg_types, constexprs, options["num_warps"], specialization, options["num_ctas"])
    if func not in _inferred:
        infer_layouts(func)
        verify(func, concrete=True)
        _check_shared_budget(func)
        _inferred.add(func)
    return func, values, memory


#: Handlers that take interpreted launches instead of running them: ``handler(func, grid, values, memory)``
#: (the cost model's ``modelling()`` pushes one; the innermost handles the launch).
INTERPRETED_LAUNCH_HANDLERS: list = []


def _interpret(kernel: JITFunction, grid, bound, constexprs, runtime, options) -> None:
    from ..interpret import run_grid  # the interpreter loads on first use, not with gluonkit
    from ..interpret.trace import active_trace

    func, values, memory = _interpreted(kernel, bound, constexprs, runtime, options)
    if INTERPRETED_LAUNCH_HANDLERS:
        INTERPRETED_LAUNCH_HANDLERS[-1](func, grid, values, memory)
        return
    trace = active_trace()
    try:
        run_grid(func, grid, values, memory, trace)
    finally:  # a launch that fails (a deadlock) is in the file too
        if trace is not None:
            trace.flush()


def _interpreted_arg(kernel: JITFunction, name: str, value, memory: Memory, no_spec: bool, values: list,
                     specialization: dict):
    """The IR type of one runtime argument (a tuple of types for a tuple argument, whose
    compile-time elements are ``gl.constexpr``); its interpreter values are appended to
    ``values`` and its divisibility facts recorded in ``specialization`` by flat name."""
    if type(value) is tuple:
        return tuple(_interpreted_arg(kernel, f"{name}_{i}", v, memory, no_spec, values, specialization)
                     for i, v in enumerate(value))
    if value is None or isinstance(value, constexpr):
        return constexpr(value)
    ty, value = _runtime_arg(kernel, name, value, memory)
    if isinstance(ty, TensorDescType):  # the kernel's parameters: the map, its shape, its strides
        values += [value, *value.shape, *value.strides]
        return ty
    values.append(value)
    if not no_spec and not isinstance(value, (bool, float)) and int(value) % 16 == 0 \
            and (isinstance(ty, PointerType) or ty.is_int() and not ty.is_bool()):
        specialization[name] = {"divisibility": 16}
    return ty


def _check_constexpr_values(kernel: JITFunction, bound: Dict[str, Any]) -> None:
    """A ``gl.constexpr`` parameter given an array or tensor is a mistake (its value would be
    traced into the kernel); say so at the launch rather than deep inside the kernel."""
    for name in kernel.constexpr_names:
        value = unwrap(bound.get(name))
        if any(hasattr(value, attr) for attr in ("__array_interface__", "__cuda_array_interface__", "__dlpack__")):
            raise ArgumentError(
                f"launching {kernel.__name__}: parameter '{name}' is a gl.constexpr and needs a compile-time "
                f"value (an int, float, bool, str, dtype or layout), got a {type(value).__name__}; pass the "
                "array as a runtime parameter (drop gl.constexpr from its annotation)", kernel.def_location())


def _check_shared_budget(func) -> None:
    """Stop an interpreted kernel whose buffers and scratch would not fit in the GPU's shared
    memory, with the same report (every buffer's and scratch use's size, offset and line) and
    the same plan that compiling gives, so the interpreter never runs a kernel the GPU could
    not launch.  The limit is the smallest of the supported targets'."""
    target = min(TARGETS.values(), key=lambda t: t.max_shared_memory_per_block)
    check_budget(func, plan_shared_memory(func), target.max_shared_memory_per_block, target.arch)


# ---------------------------------------------------------------------------- helpers
def _bind(kernel: JITFunction, args, kwargs) -> Dict[str, Any]:
    """Parameter name → argument, like a Python call (defaults filled in)."""
    names = kernel.arg_names
    if len(args) <= len(names):
        bound = dict(zip(names, args))
        if not kwargs.keys() & bound.keys() and kwargs.keys() <= _name_set(kernel):
            bound.update(kwargs)
            if len(bound) == len(names):
                return bound
    try:
        call = kernel.signature.bind(*args, **kwargs)
    except TypeError as e:
        raise ArgumentError(f"launching {kernel.__name__}: {e}; its parameters are "
                            f"{kernel.arg_names} and the launch options {sorted(LAUNCH_OPTIONS)}",
                            kernel.def_location()) from None
    call.apply_defaults()
    return dict(call.arguments)


_NAME_SETS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _name_set(kernel: JITFunction) -> frozenset:
    names = _NAME_SETS.get(kernel)
    if names is None:
        names = _NAME_SETS[kernel] = frozenset(kernel.arg_names)
    return names


def _is_compile_time(kernel: JITFunction, name: str, value) -> bool:
    """Constexpr parameters, ``gl.constexpr`` values, ``None`` and tuples holding only those."""
    if type(value) is tuple:
        return name in kernel.constexpr_names or all(_is_compile_time(kernel, name, v) for v in value)
    return name in kernel.constexpr_names or isinstance(value, constexpr) or value is None


def _do_not_specialize(kernel: JITFunction) -> set:
    names = set()
    for item in kernel.options.get("do_not_specialize", ()) or ():
        names.add(kernel.arg_names[item] if isinstance(item, int) else item)
    return names


def _runtime_arg(kernel: JITFunction, name: str, value, memory: Memory):
    """(IR type, interpreter value) of one runtime argument; arrays are registered in memory."""
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        value = value.item()  # numpy scalars type like the Python numbers they hold
    if isinstance(value, (TensorDescriptor, TensorDescriptorIm2Col)):
        return ir_type_of(value, name), _tensor_map(kernel, name, value, memory)
    array = _as_numpy(kernel, name, value)
    try:
        ty = ir_type_of(array if array is not None else value, name)
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"launching {kernel.__name__}: {e}", kernel.def_location()) from None
    if array is None:
        return ty, value
    try:
        return ty, memory.register(array, f"argument '{name}'")
    except ValueError as e:
        raise ArgumentError(f"launching {kernel.__name__}: parameter '{name}': {e}", kernel.def_location()) from None


def _tensor_map(kernel: JITFunction, name: str, desc, memory: Memory) -> TensorMap:
    """The interpreter's view of a host descriptor: its base registered in ``memory``."""
    from ..interpret.nvidia.tma import Im2ColMap, TensorMap  # the interpreter loads on first use, not with gluonkit

    array = _as_numpy(kernel, name, desc.base)
    if array is None:
        raise ArgumentError(f"launching {kernel.__name__}: parameter '{name}' is a TensorDescriptor over a "
                            f"{type(desc.base).__name__}; the interpreter needs one over a numpy array or a CPU "
                            "torch tensor", kernel.def_location())
    try:
        origin = memory.register(array, f"the base of descriptor '{name}'")
    except ValueError as e:
        raise ArgumentError(f"launching {kernel.__name__}: parameter '{name}': {e}", kernel.def_location()) from None
    im2col = None
    if isinstance(desc, TensorDescriptorIm2Col):
        im2col = Im2ColMap(desc.pixel_box_lower_corner, desc.pixel_box_upper_corner, desc.traversal_strides)
    return TensorMap(origin, desc.shape, desc.strides, desc.dtype, desc.padding, im2col)


def _as_numpy(kernel: JITFunction, name: str, value):
    """A numpy array sharing ``value``'s memory (numpy arrays, CPU torch tensors), else None."""
    if isinstance(value, np.ndarray):
        return value
    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "data_ptr"):
        return _torch_to_numpy(kernel, name, value)
    return None


def _torch_to_numpy(kernel: JITFunction, name: str, tensor) -> np.ndarray:
    """A numpy view of a CPU torch tensor; bf16/fp8 go through same-width integer views."""
    import ml_dtypes
    import torch

    if tensor.device.type != "cpu":
        raise ArgumentError(f"launching {kernel.__name__}: parameter '{name}' is a torch tensor on "
                            f"{tensor.device}; the interpreter needs CPU tensors", kernel.def_location())
    tensor = tensor.detach()
    via = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16)}
    for torch_name, np_type in (("float8_e4m3fn", ml_dtypes.float8_e4m3fn), ("float8_e5m2", ml_dtypes.float8_e5m2)):
        if hasattr(torch, torch_name):
            via[getattr(torch, torch_name)] = (torch.uint8, np_type)
    if tensor.dtype in via:
        int_type, np_type = via[tensor.dtype]
        return tensor.view(int_type).numpy().view(np_type)
    return tensor.numpy()


def _evaluate_grid(kernel: JITFunction, grid, meta: Dict[str, Any]) -> Tuple[int, ...]:
    if callable(grid):
        grid = grid(meta)
    grid = unwrap(grid)
    if isinstance(grid, (int, np.integer)):
        grid = (grid,)
    ok = isinstance(grid, (tuple, list)) and 1 <= len(grid) <= 3 and \
        all(isinstance(unwrap(g), (int, np.integer)) and unwrap(g) >= 0 for g in grid)
    if not ok:
        raise ArgumentError(f"launching {kernel.__name__}: the grid must be 1 to 3 non-negative ints "
                            f"(or a callable of the meta-parameters returning them), got {grid!r}",
                            kernel.def_location())
    return tuple(int(unwrap(g)) for g in grid)


set_launcher(launch)
set_warmer(warmup)
