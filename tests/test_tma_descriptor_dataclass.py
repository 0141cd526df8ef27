"""The host descriptors are dataclasses with Gluon 3.9's fields, as its tutorials use them.

``dataclasses.replace`` / ``fields`` / ``is_dataclass``, the generated ``repr``, equality
(``base`` by identity, the other fields by value), and field assignment, which checks the
descriptor again and refreshes what the launch path reads (box, IR type, tensor map).
"""

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from gluonkit import ir
from gluonkit.layouts import NVMMASharedLayout, SwizzledSharedLayout
from gluonkit.nvidia.hopper import TensorDescriptor, TensorDescriptorIm2Col
from gluonkit.runtime import tma

BF16_128 = NVMMASharedLayout(128, 16)
BF16_64 = NVMMASharedLayout(64, 16)
F16_IM2COL = NVMMASharedLayout(128, 16, rank=2)

GLUON_TILED_FIELDS = [("base", None), ("shape", None), ("strides", None), ("block_shape", None),
                      ("layout", None), ("padding", "zero"), ("round_f32_to_tf32", False)]
GLUON_IM2COL_FIELDS = GLUON_TILED_FIELDS + [("element_strides", None), ("pixel_box_lower_corner", None),
                                            ("pixel_box_upper_corner", None)]


def _fields(cls):
    return [(f.name, None if f.default is dataclasses.MISSING else f.default) for f in dataclasses.fields(cls)]


def _tiled(rng, block=(64, 64), layout=BF16_128):
    a = rng.standard_normal((256, 512)).astype(ml_dtypes.bfloat16)
    return a, TensorDescriptor.from_tensor(a, list(block), layout)


def _im2col(rng):
    x = rng.standard_normal((2, 9, 9, 64)).astype(np.float16)
    return x, TensorDescriptorIm2Col.from_tensor(x, [64, 64], F16_IM2COL, pixel_box_lower_corner=[-1, -1],
                                                 pixel_box_upper_corner=[-1, -1])


def test_fields_names_order_and_defaults_are_gluons():
    assert dataclasses.is_dataclass(TensorDescriptor) and dataclasses.is_dataclass(TensorDescriptorIm2Col)
    assert _fields(TensorDescriptor) == GLUON_TILED_FIELDS
    assert _fields(TensorDescriptorIm2Col) == GLUON_IM2COL_FIELDS


def test_replace_builds_a_checked_copy_with_fresh_derived_state():
    rng = np.random.default_rng()
    a, d = _tiled(rng)
    e = dataclasses.replace(d, layout=BF16_64, block_shape=[32, 32])
    assert e.base is a and e.layout is BF16_64 and e.block_shape == (32, 32)
    assert e.box_shape == (32, 32) and d.box_shape == (64, 64)
    assert e.arg_type == ir.TensorDescType((32, 32), ir.bfloat16, BF16_64)
    assert d.block_shape == (64, 64) and d.layout is BF16_128
    assert dataclasses.replace(d).box_shape == d.box_shape


def test_replace_with_a_bad_value_raises_the_constructors_error():
    rng = np.random.default_rng()
    _, d = _tiled(rng)
    with pytest.raises(TypeError, match="TensorDescriptor: parameter 'layout' must be an NVMMASharedLayout"):
        dataclasses.replace(d, layout=SwizzledSharedLayout(1, 1, 1, [1, 0]))
    with pytest.raises(ValueError, match="TensorDescriptor: layout: has rank 3 but the tensor has rank 2"):
        dataclasses.replace(d, layout=NVMMASharedLayout(128, 16, rank=3))
    with pytest.raises(ValueError, match="TensorDescriptor: padding: expected one of"):
        dataclasses.replace(d, padding="inf")
    _, m = _im2col(rng)
    with pytest.raises(ValueError, match=r"TensorDescriptorIm2Col: pixel_box_lower_corner: expected 2 offsets"):
        dataclasses.replace(m, pixel_box_lower_corner=[0])
    with pytest.raises(ValueError, match=r"element_strides\[1\] must be in \[1, 8\], got 9"):
        dataclasses.replace(m, element_strides=[1, 9, 1, 1])


def test_repr_is_the_dataclass_repr():
    rng = np.random.default_rng()
    a, d = _tiled(rng)
    assert repr(d) == (f"TensorDescriptor(base={a!r}, shape=(256, 512), strides=(512, 1), block_shape=(64, 64), "
                       f"layout={BF16_128!r}, padding='zero', round_f32_to_tf32=False)")
    x, m = _im2col(rng)
    assert repr(m) == (f"TensorDescriptorIm2Col(base={x!r}, shape=(2, 9, 9, 64), strides=(5184, 576, 64, 1), "
                       f"block_shape=(64, 64), layout={F16_IM2COL!r}, padding='zero', round_f32_to_tf32=False, "
                       "element_strides=None, pixel_box_lower_corner=(-1, -1), pixel_box_upper_corner=(-1, -1))")


def test_equality_compares_base_by_identity_and_the_rest_by_value():
    rng = np.random.default_rng()
    a, d = _tiled(rng)
    assert d == TensorDescriptor(a, [256, 512], [512, 1], [64, 64], BF16_128)
    assert d != dataclasses.replace(d, padding="nan")
    assert d != TensorDescriptor.from_tensor(a.copy(), [64, 64], BF16_128)  # other memory: no elementwise ==
    _, m = _im2col(rng)
    assert m == dataclasses.replace(m) and m != d and d != m
    with pytest.raises(TypeError, match="unhashable"):
        hash(d)


def test_assigning_a_field_revalidates_and_refreshes_the_launch_state(monkeypatch):
    encoded = []
    monkeypatch.setattr(tma, "encode_tiled", lambda desc: encoded.append(desc.box_shape) or bytes(128))
    rng = np.random.default_rng()
    _, d = _tiled(rng)
    d.kernel_arg_bytes()
    d.kernel_arg_bytes()
    assert encoded == [(64, 64)]  # encoded once, then cached
    d.block_shape = [128, 64]
    assert d.block_shape == (128, 64) and d.box_shape == (128, 64)
    assert d.arg_type == ir.TensorDescType((128, 64), ir.bfloat16, BF16_128)
    d.kernel_arg_bytes()
    assert encoded == [(64, 64), (128, 64)]  # the map was encoded again for the new block
    with pytest.raises(ValueError, match="TensorDescriptor: block_shape: dimension 0 must be a positive power of two"):
        d.block_shape = [96, 64]
    assert d.block_shape == (128, 64) and d.box_shape == (128, 64)  # the rejected value was rolled back
