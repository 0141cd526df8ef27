"""``gl.inline_asm_elementwise``: Gluon 3.9's signature, packing of narrow elements into 32-bit
registers, tuples of results, the PTX ptxas accepts for sm_90a / sm_100a, errors naming the
line, and the interpreter's refusal (it cannot run PTX) with the way forward.
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import gluonkit
import gluonkit.language as gl
from gluonkit.interpret import InterpreterError
from gluonkit.lang import ArgumentError, CompilationError
from interpreting import interpreter_on
from kernel_checks import marked_line, needs_ptxas

LAYOUT = gl.BlockedLayout([4], [32], [4], [0])


@gluonkit.jit
def negate_kernel(x_ptr, y_ptr, PACK: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, 512, layout)
    x = gl.load(x_ptr + offs)
    if PACK == 2:  # two halves per b32 register: one neg.f16x2 per pair
        y = gl.inline_asm_elementwise("neg.f16x2 $0, $1;", "=r,r", [x], gl.float16, True, 2)  # ASM
    else:
        y = gl.inline_asm_elementwise("neg.f16 $0, $1;", "=h,h", [x], gl.float16, True, 1)  # ASM1
    gl.store(y_ptr + offs, y)


@gluonkit.jit
def two_results_kernel(x_ptr, y_ptr, z_ptr, bias, layout: gl.constexpr):
    offs = gl.arange(0, 512, layout)
    x = gl.load(x_ptr + offs)
    s, r = gl.inline_asm_elementwise("add.f32 $0, $2, $3; cvt.rzi.s32.f32 $1, $2;", "=f,=r,f,f", [x, bias],
                                     (gl.float32, gl.int32), True, 1)
    gl.store(y_ptr + offs, s)
    gl.store(z_ptr + offs, r)


@gluonkit.jit
def bad_pack_kernel(x_ptr, CASE: gl.constexpr):
    offs = gl.arange(0, 128, gl.BlockedLayout([1], [32], [4], [0]))
    x = gl.load(x_ptr + offs)
    if CASE == "not_pow2":
        y = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], gl.float32, True, 3)  # NOT_POW2
    elif CASE == "no_dtype":
        y = gl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], (), True, 1)  # NO_DTYPE
    else:
        y = gl.inline_asm_elementwise("mov.b32 $0, $2;", "=r,=r,r,r", [x], gl.float32, True, 2)  # TOO_WIDE
    gl.store(x_ptr + offs, y)


def test_signature_matches_gluon():
    assert list(inspect.signature(gl.inline_asm_elementwise).parameters)[:6] == [
        "asm", "constraints", "args", "dtype", "is_pure", "pack"]


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_narrow_elements_are_packed_into_b32_registers(target):
    ptx = negate_kernel.compile("*fp16", "*fp16", target=target, num_warps=4, PACK=2, layout=LAYOUT).asm["ptx"]
    packed = re.findall(r"neg\.f16x2 %r\d+, %r\d+;", ptx)
    assert len(packed) == 2  # 4 halves per thread, two per register
    assert re.search(r"mov\.b32\s+%r\d+, \{%rs\d+, %rs\d+\};", ptx)
    ptx = negate_kernel.compile("*fp16", "*fp16", target=target, num_warps=4, PACK=1, layout=LAYOUT).asm["ptx"]
    assert len(re.findall(r"neg\.f16 %rs\d+, %rs\d+;", ptx)) == 4


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_tuple_of_dtypes_gives_a_tuple_of_results(target):
    ptx = two_results_kernel.compile("*fp32", "*fp32", "*i32", "fp32", target=target, num_warps=4,
                                     layout=LAYOUT).asm["ptx"]
    assert len(re.findall(r"add\.f32 %\w+, %\w+, %\w+; cvt\.rzi\.s32\.f32 %r\d+, %\w+;", ptx)) == 4


@pytest.mark.parametrize("case, marker, fragment", [
    ("not_pow2", "NOT_POW2", "pack must be a positive power of two, got 3"),
    ("no_dtype", "NO_DTYPE", "must return at least one value"),
])
def test_bad_arguments_name_the_line(case, marker, fragment):
    with pytest.raises(ArgumentError) as err:
        bad_pack_kernel.build_ir([gl.pointer_type(gl.float32)], {"CASE": case})
    assert fragment in str(err.value)
    assert f"test_inline_asm.py:{marked_line(bad_pack_kernel, marker)}" in str(err.value)


def test_a_pack_wider_than_the_thread_holds_is_reported_at_lowering():
    with pytest.raises(CompilationError) as err:
        bad_pack_kernel.compile("*fp32", target="sm_90a", num_warps=4, CASE="too_wide")
    assert "pack=2 does not divide the 1 element(s) each thread holds" in str(err.value)
    assert f"test_inline_asm.py:{marked_line(bad_pack_kernel, 'TOO_WIDE')}" in str(err.value)


def test_the_interpreter_refuses_ptx_at_the_line_and_says_what_to_do():
    x = np.random.default_rng(0).standard_normal(512).astype(np.float16)
    y = np.zeros_like(x)
    with interpreter_on(), pytest.raises(InterpreterError) as err:
        negate_kernel[(1,)](x, y, PACK=1, layout=LAYOUT)
    text = str(err.value)
    assert f":{marked_line(negate_kernel, 'ASM1')}" in text
    assert "cannot run in the interpreter" in text and "neg.f16 $0, $1;" in text
    assert "run the kernel on the GPU" in text and "gl.map_elementwise" in text
