"""Ops whose output axis enumerates several indices (an index group), and more array ops,
against TensorFlow's registered gradients: the generated TF gradient on the real op, the
`tf.custom_gradient` wrapper and the numpy module, in float64 and float32."""

from __future__ import annotations

import numpy as np
import pytest

from test_index_ops import DTYPES, check

RNG = np.random.default_rng(41)


def normal(*shape):
    return RNG.standard_normal(shape)


DEPTHWISE = [
    # (input shape, filter shape, strides, padding, explicit_paddings, dilations)
    ((2, 7, 6, 3), (3, 2, 3, 2), (1, 1, 1, 1), "VALID", (), (1, 1, 1, 1)),
    ((2, 7, 6, 3), (3, 2, 3, 1), (1, 2, 2, 1), "VALID", (), (1, 1, 1, 1)),
    ((1, 8, 9, 2), (3, 3, 2, 3), (1, 2, 2, 1), "SAME", (), (1, 1, 1, 1)),
    ((2, 6, 7, 2), (3, 3, 2, 2), (1, 2, 2, 1), "EXPLICIT", (0, 0, 1, 2, 3, 0, 0, 0), (1, 1, 1, 1)),
    ((1, 7, 6, 2), (1, 1, 2, 1), (1, 1, 1, 1), "VALID", (), (1, 1, 1, 1)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("case", DEPTHWISE, ids=lambda c: f"{c[0]}*{c[1]}-s{c[2][1:3]}-{c[3]}-d{c[5][1:3]}")
def test_depthwise_conv2d_native(tf, tf_module, numpy_module, case, dtype):
    x_shape, f_shape, strides, padding, explicit, dilations = case
    attrs = dict(strides=list(strides), padding=padding, explicit_paddings=list(explicit), dilations=list(dilations))
    inputs = {"input": normal(*x_shape), "filter": normal(*f_shape)}
    check(tf, tf_module, numpy_module, "conv", "depthwise_conv2d_native", "DepthwiseConv2dNative", inputs, attrs, dtype)



PATCHES = [  # (images shape, ksizes, strides, rates, padding)
    ((2, 7, 6, 3), (1, 3, 2, 1), (1, 1, 1, 1), (1, 1, 1, 1), "VALID"),
    ((1, 8, 9, 2), (1, 2, 3, 1), (1, 2, 3, 1), (1, 1, 1, 1), "SAME"),
    ((2, 9, 8, 2), (1, 2, 2, 1), (1, 3, 2, 1), (1, 2, 3, 1), "VALID"),
    ((1, 7, 7, 1), (1, 3, 3, 1), (1, 2, 2, 1), (1, 2, 1, 1), "SAME"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("case", PATCHES, ids=str)
def test_extract_image_patches(tf, tf_module, numpy_module, case, dtype):
    shape, ksizes, strides, rates, padding = case
    attrs = dict(ksizes=list(ksizes), strides=list(strides), rates=list(rates), padding=padding)
    check(tf, tf_module, numpy_module, "conv", "extract_image_patches", "ExtractImagePatches", {"images": normal(*shape)}, attrs, dtype)
