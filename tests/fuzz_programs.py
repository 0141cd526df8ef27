"""Random small gluonkit kernels for differential testing, each with a numpy model of its result.

A *program* loads two ``[rows, cols]`` arrays into one ``[R, C]`` tile (masked at the ragged
edge), applies a random chain of steps — element-wise arithmetic, casts, ``gl.where``,
``convert_layout`` to a random ``BlockedLayout``, a round trip through shared memory in a random
swizzled layout, a reduction or a scan along an axis — and stores the result (masked).
:func:`programs` is a hypothesis strategy; a drawn :class:`Program` renders its kernel as source
text (:meth:`Program.kernel`, written to a module so ``@gluonkit.jit`` can read it) and computes
what IEEE arithmetic says the output must be (:meth:`Program.expected`).

Steps come in two classes.  *Exact* steps (add, sub, mul, ``div_rn``, min/max, neg/abs, where,
casts (float to integer after clamping into range), integer bit operations, layout changes, reductions and scans, which the interpreter and
the GPU combine in the same tree order) must agree bit for bit everywhere.  *Approximate* steps
(``/``, exp, exp2, log, log2, sqrt, sin, cos: Triton's PTX ``.approx``/``div.full`` forms) only
end a chain, so their inputs are exact and the comparison can use a per-function bound
(:data:`ULP_BOUNDS`).
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int32", "int16", "int8")
NUMPY = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
         "int32": np.int32, "int16": np.int16, "int8": np.int8}

# Largest allowed difference of an approximate step's result from the correctly rounded one, in
# units in the last place of float32, or (sin/cos) absolutely; the PTX ISA's bounds for
# ex2/lg2/sin/cos/sqrt.approx and div.full, with headroom for the multiply by ln(2) that
# Triton's log adds.  exp(x) is ex2.approx(x * log2(e)): rounding t = x * log2(e) (and log2(e))
# to float32 moves the result by up to 1.5 * ln 2 * |t| * 2**-24 relatively, about 1.04 |t| ulp,
# so its bound grows with |t| = |log2(result)| ("ulp_per_log2": 3 ulp plus 1.1 ulp per unit of
# |t|; the GPU was 6 ulp from numpy at exp(54.6), found by the GPU fuzz test).
ULP_BOUNDS: Dict[str, Tuple[str, float]] = {
    "div": ("ulp", 2), "exp": ("ulp_per_log2", 3), "exp2": ("ulp", 2), "log": ("abs_or_ulp", 4),
    "log2": ("abs_or_ulp", 4), "sqrt": ("ulp", 2), "sin": ("abs", 2 ** -20), "cos": ("abs", 2 ** -20),
}


def _f32(fn: Callable) -> Callable:
    """A float op computed in float32 and rounded back to the operands' dtype (exact for +,-,*,/,sqrt)."""
    def apply(*xs):
        dtype = xs[0].dtype
        return fn(*(x.astype(np.float32) for x in xs)).astype(dtype)
    return apply


# name -> (kernel expression with {a}/{b}, numpy model, which dtypes)
BINARY = {
    "add": ("{a} + {b}", np.add, "any"),
    "sub": ("{a} - {b}", np.subtract, "any"),
    "mul": ("{a} * {b}", np.multiply, "any"),
    "div_rn": ("gl.div_rn({a}, {b})", np.divide, "float32"),
    "maximum": ("gl.maximum({a}, {b})", np.fmax, "any"),
    "minimum": ("gl.minimum({a}, {b})", np.fmin, "any"),
    "where_lt": ("gl.where({a} < {b}, {a}, {b})", lambda a, b: np.where(a < b, a, b), "any"),
    "and": ("{a} & {b}", np.bitwise_and, "int"),
    "or": ("{a} | {b}", np.bitwise_or, "int"),
    "xor": ("{a} ^ {b}", np.bitwise_xor, "int"),
    "shr": ("{a} >> ({b} & 7)", lambda a, b: a >> (b & 7), "int"),
}
UNARY = {
    "neg": ("-{a}", np.negative),
    "abs": ("gl.abs({a})", np.abs),
}
APPROX = {  # float32 only, at the end of a chain
    "div": ("{a} / {b}", np.divide),
    "exp": ("gl.exp({a})", np.exp),
    # ex2.approx.ftz: results below float32's smallest normal are 0
    "exp2": ("gl.exp2({a})", lambda a: np.where(np.exp2(a) < np.finfo(np.float32).tiny, np.float32(0), np.exp2(a))),
    "log": ("gl.log(gl.abs({a}) + 1.0)", lambda a: np.log(np.abs(a) + np.float32(1))),
    "log2": ("gl.log2(gl.abs({a}) + 1.0)", lambda a: np.log2(np.abs(a) + np.float32(1))),
    "sqrt": ("gl.sqrt(gl.abs({a}))", lambda a: np.sqrt(np.abs(a))),
    # sin.approx/cos.approx meet their bound only on [-pi, pi] (PTX ISA): the argument is clamped
    "sin": ("gl.sin(gl.minimum(gl.maximum({a}, -3.0), 3.0))", lambda a: np.sin(np.clip(a, -3, 3))),
    "cos": ("gl.cos(gl.minimum(gl.maximum({a}, -3.0), 3.0))", lambda a: np.cos(np.clip(a, -3, 3))),
}


@functools.lru_cache(maxsize=None)
def _module_directory() -> str:
    """One temporary directory per process for the generated kernel modules, removed at exit."""
    directory = tempfile.mkdtemp(prefix="gluonkit_fuzz_")
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def _kind(dtype: str) -> str:
    return "float" if dtype in FLOATS else "int"


@dataclass(frozen=True)
class Blocked:
    """A random 2-D ``BlockedLayout`` for ``num_warps`` warps."""

    spt: Tuple[int, int]
    tpw: Tuple[int, int]
    wpc: Tuple[int, int]
    order: Tuple[int, int]

    def source(self) -> str:
        return (f"gl.BlockedLayout({list(self.spt)}, {list(self.tpw)}, {list(self.wpc)}, {list(self.order)})")


def blocked_layouts(num_warps: int):
    lanes = st.sampled_from([1, 2, 4, 8, 16, 32])
    warps = st.sampled_from([w for w in (1, 2, 4, 8) if w <= num_warps])
    return st.builds(
        lambda s0, s1, t0, w0, order: Blocked((s0, s1), (t0, 32 // t0), (w0, num_warps // w0), order),
        st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]), lanes, warps, st.sampled_from([(1, 0), (0, 1)]))


@dataclass(frozen=True)
class Swizzled:
    vec: int
    per_phase: int
    max_phase: int
    order: Tuple[int, int]

    def source(self) -> str:
        return f"gl.SwizzledSharedLayout({self.vec}, {self.per_phase}, {self.max_phase}, {list(self.order)})"


swizzled_layouts = st.builds(Swizzled, st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]),
                             st.sampled_from([1, 2, 4, 8]), st.sampled_from([(1, 0), (0, 1)]))


@dataclass
class Program:
    """One random kernel: its shape, input dtype, steps, and the layouts the steps use."""

    R: int
    C: int
    rows: int
    cols: int
    num_warps: int
    dtype: str
    load_layout: Blocked
    steps: List[tuple] = field(default_factory=list)

    # ----------------------------------------------------------------------- rendering
    def kernel_source(self) -> str:
        """The kernel's Python source (function ``kernel``)."""
        lines = [
            "import gluonkit",
            "import gluonkit.language as gl",
            "",
            "",
            "@gluonkit.jit",
            "def kernel(x_ptr, y_ptr, out_ptr, rows, cols, R: gl.constexpr, C: gl.constexpr):",
            f"    L: gl.constexpr = {self.load_layout.source()}",
            "    r = gl.arange(0, R, gl.SliceLayout(1, L))",
            "    c = gl.arange(0, C, gl.SliceLayout(0, L))",
            "    mask = (r[:, None] < rows) & (c[None, :] < cols)",
            "    offs = r[:, None] * cols + c[None, :]",
            "    a = gl.load(x_ptr + offs, mask=mask, other=1)",
            "    b = gl.load(y_ptr + offs, mask=mask, other=2)",
        ]
        layout, rank, axis_left = "L", 2, None
        for i, step in enumerate(self.steps):
            op = step[0]
            if op in BINARY:
                lines.append(f"    a = {BINARY[op][0].format(a='a', b='b')}")
            elif op in UNARY:
                lines.append(f"    a = {UNARY[op][0].format(a='a')}")
            elif op in APPROX:
                lines.append(f"    a = {APPROX[op][0].format(a='a', b='b')}")
            elif op == "cast" and step[1] in INTS and self._float_before(i):  # clamped: in range
                for v in "ab":
                    lines.append(f"    {v} = gl.minimum(gl.maximum({v}, -100.0), 100.0).to(gl.{step[1]})")
            elif op == "cast":
                lines.append(f"    a = a.to(gl.{step[1]})")
                lines.append(f"    b = b.to(gl.{step[1]})")
            elif op == "swap":
                lines.append("    a, b = b, a")
            elif op == "convert":
                lines.append(f"    L{i}: gl.constexpr = {step[1].source()}")
                lines.append(f"    a = gl.convert_layout(a, L{i})")
                lines.append(f"    b = gl.convert_layout(b, L{i})")
                layout = f"L{i}"
            elif op == "smem":
                lines.append(f"    S{i}: gl.constexpr = {step[1].source()}")
                lines.append(f"    L{i}: gl.constexpr = {step[2].source()}")
                lines.append(f"    buf{i} = gl.allocate_shared_memory(a.dtype, [R, C], S{i}, a)")
                lines.append(f"    a = buf{i}.load(L{i})")
                lines.append(f"    b = gl.convert_layout(b, L{i})")
                layout = f"L{i}"
            elif op in ("sum", "max", "min"):
                lines.append(f"    a = gl.{op}(a, axis={step[1]})")
                rank, axis_left = 1, 1 - step[1]
            elif op == "cumsum":
                lines.append(f"    a = gl.cumsum(a, axis={step[1]})")
            else:
                raise AssertionError(op)
        if rank == 2:
            lines += [
                f"    r = gl.arange(0, R, gl.SliceLayout(1, {layout}))",
                f"    c = gl.arange(0, C, gl.SliceLayout(0, {layout}))",
                "    gl.store(out_ptr + r[:, None] * cols + c[None, :], a,"
                " mask=(r[:, None] < rows) & (c[None, :] < cols))",
            ]
        else:
            size = "R" if axis_left == 0 else "C"
            limit = "rows" if axis_left == 0 else "cols"
            lines += [
                f"    i = gl.arange(0, {size}, gl.SliceLayout({1 - axis_left}, {layout}))",
                f"    gl.store(out_ptr + i, a, mask=i < {limit})",
            ]
        return "\n".join(lines) + "\n"

    def kernel(self):
        """The ``@gluonkit.jit`` kernel, imported from a module holding its source (in a directory
        that lives as long as the process: the frontend reads the source when it compiles)."""
        handle, path = tempfile.mkstemp(suffix=".py", dir=_module_directory())
        with os.fdopen(handle, "w") as f:
            f.write(self.kernel_source())
        spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.kernel

    # ----------------------------------------------------------------------- the model
    def inputs(self, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
        """Fresh random inputs ``[rows, cols]`` of the program's dtype."""
        shape = (self.rows, self.cols)
        if _kind(self.dtype) == "float":
            return tuple(rng.standard_normal(shape).astype(np.float32).astype(NUMPY[self.dtype]) for _ in "xy")
        info = np.iinfo(NUMPY[self.dtype])
        return tuple(rng.integers(info.min, info.max, shape, endpoint=True).astype(NUMPY[self.dtype]) for _ in "xy")

    def output_shape(self) -> Tuple[int, ...]:
        reduced = [s for s in self.steps if s[0] in ("sum", "max", "min")]
        if not reduced:
            return (self.rows, self.cols)
        return (self.rows,) if reduced[0][1] == 1 else (self.cols,)

    def exact(self) -> bool:
        """Whether IEEE arithmetic fixes every output bit (no float sum or scan, no approximate step)."""
        last = self.steps[-1][0] if self.steps else None
        float_sum = last in ("sum", "cumsum") and self.steps and _kind(self._dtype_before_last()) == "float"
        return last not in APPROX and not float_sum

    def approx_step(self) -> Optional[str]:
        """The approximate function that ends the chain, if one does."""
        last = self.steps[-1][0] if self.steps else None
        return last if last in APPROX else None

    def _float_before(self, index: int) -> bool:
        """Whether the value entering step ``index`` is a float."""
        casts = [s[1] for s in self.steps[:index] if s[0] == "cast"]
        return _kind(casts[-1] if casts else self.dtype) == "float"

    def _dtype_before_last(self) -> str:
        casts = [s[1] for s in self.steps[:-1] if s[0] == "cast"]
        return casts[-1] if casts else self.dtype

    def expected(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """What the kernel must store, from IEEE arithmetic on the padded tile."""
        dtype = NUMPY[self.dtype]
        a = np.full((self.R, self.C), 1, dtype)
        b = np.full((self.R, self.C), 2, dtype)
        a[:self.rows, :self.cols] = x
        b[:self.rows, :self.cols] = y
        with np.errstate(all="ignore"):
            for step in self.steps:
                a, b = _apply(step, a, b)
        if a.ndim == 2:
            return a[:self.rows, :self.cols]
        return a[:self.rows] if self.output_shape() == (self.rows,) else a[:self.cols]

    def describe(self) -> str:
        return (f"R={self.R} C={self.C} rows={self.rows} cols={self.cols} warps={self.num_warps} "
                f"dtype={self.dtype}\n{self.kernel_source()}")


def _apply(step: tuple, a: np.ndarray, b: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    op = step[0]
    floating = a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16
    if op in BINARY:
        fn = BINARY[op][1]
        return (_f32(fn)(a, b) if floating else fn(a, b).astype(a.dtype)), b
    if op in UNARY:
        fn = UNARY[op][1]
        return (_f32(fn)(a) if floating else fn(a).astype(a.dtype)), b
    if op in APPROX:
        fn = APPROX[op][1]
        return (fn(a, b) if op == "div" else fn(a)).astype(np.float32), b
    if op == "cast":
        return _cast(a, step[1]), _cast(b, step[1])
    if op == "swap":
        return b, a
    if op in ("convert", "smem"):
        return a, b
    if op in ("sum", "max", "min"):
        return _reduce(op, a, step[1]), b
    if op == "cumsum":
        return _scan(a, step[1]), b
    raise AssertionError(op)


def _cast(x: np.ndarray, dtype: str) -> np.ndarray:
    target = NUMPY[dtype]
    if x.dtype.kind in "iu" and _kind(dtype) == "int":
        return x.astype(np.int64).astype(target)  # wrap to the narrower width
    if _kind(dtype) == "float":  # one rounding: integers through float64 (exact), floats through float32
        return x.astype(np.float64 if x.dtype.kind in "iu" else np.float32).astype(target)
    clamped = np.fmin(np.fmax(x.astype(np.float32), np.float32(-100)), np.float32(100))
    return clamped.astype(target)  # truncates toward zero, as the kernel's conversion does


def _reduce(op: str, a: np.ndarray, axis: int) -> np.ndarray:
    """Triton's ``sum``/``max``/``min`` along ``axis`` (narrow types promoted as Triton does); a float
    sum is computed in float64 and rounded once, so it is compared with a tolerance."""
    if op == "sum":
        if a.dtype.kind in "iu":
            a = a.astype(np.int32) if a.dtype.itemsize < 4 else a
            return np.add.reduce(a, axis=axis, dtype=a.dtype)
        return np.add.reduce(a.astype(np.float64), axis=axis).astype(a.dtype)
    fn = np.fmax if op == "max" else np.fmin
    if a.dtype.itemsize < 4:
        a = a.astype(np.int32 if a.dtype.kind in "iu" else np.float32)
    return fn.reduce(a, axis=axis)


def _scan(a: np.ndarray, axis: int) -> np.ndarray:
    """``gl.cumsum``: narrow integers in int32; floats in float64, rounded once (compared with a tolerance)."""
    if a.dtype.kind in "iu":
        a = a.astype(np.int32) if a.dtype.itemsize < 4 else a
        return np.cumsum(a, axis=axis, dtype=a.dtype)
    return np.cumsum(a.astype(np.float64), axis=axis).astype(a.dtype)


# ---------------------------------------------------------------------------- the strategy
_TERMINALS = ("none", "sum", "max", "min", "cumsum", "approx")


@st.composite
def programs(draw, max_steps: int = 5, smem: bool = True) -> Program:
    """A random :class:`Program` (see the module docstring)."""
    num_warps = draw(st.sampled_from([1, 2, 4]))
    R = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
    C = draw(st.sampled_from([c for c in (1, 2, 4, 8, 16, 32, 64, 128) if R * c <= 4096]))
    rows = draw(st.integers(1, R))
    cols = draw(st.integers(1, C))
    dtype = draw(st.sampled_from(FLOATS + INTS))
    layouts = blocked_layouts(num_warps)
    program = Program(R, C, rows, cols, num_warps, dtype, draw(layouts))
    current = dtype
    kinds = ["binary", "binary", "unary", "cast", "swap", "convert"] + (["smem"] if smem else [])
    for _ in range(draw(st.integers(0, max_steps))):
        kind = draw(st.sampled_from(kinds))
        if kind == "binary":
            names = [n for n, (_, _, k) in BINARY.items() if k in ("any", _kind(current), current)]
            program.steps.append((draw(st.sampled_from(names)),))
        elif kind == "unary":
            program.steps.append((draw(st.sampled_from(sorted(UNARY))),))
        elif kind == "cast":
            targets = [d for d in FLOATS + INTS if d != current]
            current = draw(st.sampled_from(targets))
            program.steps.append(("cast", current))
        elif kind == "swap":
            program.steps.append(("swap",))
        elif kind == "convert":
            program.steps.append(("convert", draw(layouts)))
        else:
            program.steps.append(("smem", draw(swizzled_layouts), draw(layouts)))
    terminal = draw(st.sampled_from(_TERMINALS))
    if terminal in ("sum", "max", "min", "cumsum"):
        program.steps.append((terminal, draw(st.sampled_from([0, 1]))))
    elif terminal == "approx":
        if current != "float32":
            program.steps.append(("cast", "float32"))
        program.steps.append((draw(st.sampled_from(sorted(APPROX))),))
    return program
