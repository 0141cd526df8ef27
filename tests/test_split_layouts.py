"""Tensors, shared buffers and TMA blocks split between the CTAs of a cluster, and pair barriers,
in the interpreter against numpy, and their PTX for sm_90a (ptxas); the GPU runs the same
kernels in ``tests/test_gpu_split.py``."""

from __future__ import annotations

import numpy as np
import pytest

import gluonkit.language as gl
from gluonkit import ir
from gluonkit.ir.diagnostics import CompilationError
from gluonkit.nvidia.hopper import TensorDescriptor

from interpreting import interpreter_on
from kernel_checks import needs_ptxas
from split_kernels import pair_barrier_rounds, round_trip_reference, split_round_trip, split_tma_load


def test_split_tensors_and_buffers_round_trip():
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32)
    y = np.full_like(x, np.nan)
    with interpreter_on():
        split_round_trip[(1,)](x, y, 256, 64, num_ctas=2)
    np.testing.assert_array_equal(y, round_trip_reference(x))


def test_split_tma_loads_bring_each_cta_its_half():
    a = np.random.default_rng(1).standard_normal((512, 64)).astype(np.float16)
    y = np.full_like(a, np.nan)
    layout = gl.NVMMASharedLayout.get_default_for([256, 64], gl.float16, cga_layout=[[1, 0]])
    with interpreter_on():
        split_tma_load[(2,)](TensorDescriptor(a, a.shape, [64, 1], [256, 64], layout), y, num_ctas=2)
    np.testing.assert_array_equal(y, a)


def test_pair_barrier_rounds():
    x = np.random.default_rng(2).integers(-100, 100, 256).astype(np.int32)
    y = np.zeros_like(x)
    with interpreter_on():
        pair_barrier_rounds[(3,)](x, y, 256, 5, num_ctas=2)
    np.testing.assert_array_equal(y, x * 5)


@needs_ptxas
def test_split_kernels_assemble_for_sm_90a():
    ptx = split_round_trip.compile("*fp32:16", "*fp32:16", M=256, N=64, num_ctas=2, target="sm_90a").asm["ptx"]
    assert "%cluster_ctarank" in ptx
    layout = gl.NVMMASharedLayout.get_default_for([256, 64], gl.float16, cga_layout=[[1, 0]])
    compiled = split_tma_load.compile(ir.TensorDescType((256, 64), ir.float16, layout), "*fp16:16", num_ctas=2,
                                      target="sm_90a")
    assert compiled.asm["cubin"]
    ptx = pair_barrier_rounds.compile("*i32:16", "*i32:16", N=256, ROUNDS=3, num_ctas=2, target="sm_90a").asm["ptx"]
    assert "mapa.shared::cluster.u32" in ptx and "mbarrier.arrive.shared::cluster.b64" in ptx


def test_a_split_layout_needs_the_ctas_it_splits_over():
    with pytest.raises(CompilationError, match="splits its value between 2 CTAs, but the kernel runs with num_ctas=1"):
        split_round_trip.compile("*fp32:16", "*fp32:16", M=256, N=64, num_ctas=1, target="sm_90a")
