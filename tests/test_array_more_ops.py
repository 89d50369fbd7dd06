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


def run(tf, tf_module, numpy_module, func, op_type, inputs, attrs, dtype):
    check(tf, tf_module, numpy_module, "array_more", func, op_type, inputs, attrs, dtype)


TILE = [((5,), [3]), ((3, 4), [1, 2]), ((2, 3, 4), [2, 1, 3]), ((2, 1, 3, 2), [1, 3, 2, 2]), ((2, 2), [1, 1])]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,multiples", TILE, ids=str)
def test_tile(tf, tf_module, numpy_module, shape, multiples, dtype):
    run(tf, tf_module, numpy_module, "tile", "Tile", {"input": normal(*shape)}, {"multiples": multiples}, dtype)


MIRROR_PAD = [  # (input shape, paddings); REFLECT needs paddings below the size, SYMMETRIC up to it
    ((5,), [[2, 3]]),
    ((4, 5), [[0, 3], [2, 1]]),
    ((3, 4, 5), [[2, 2], [1, 0], [3, 1]]),
    ((2, 3, 3, 4), [[1, 1], [2, 0], [0, 2], [3, 3]]),
    ((2, 2), [[0, 0], [1, 1]]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("shape,paddings", MIRROR_PAD, ids=str)
def test_mirror_pad(tf, tf_module, numpy_module, shape, paddings, mode, dtype):
    if mode == "SYMMETRIC":  # also the largest paddings SYMMETRIC allows: the axis size
        paddings = [[min(p + (n == 0), size) for p in pair] for n, (pair, size) in enumerate(zip(paddings, shape))]
    attrs = {"paddings": paddings, "mode": mode}
    run(tf, tf_module, numpy_module, "mirror_pad", "MirrorPad", {"input": normal(*shape)}, attrs, dtype)


def test_tile_gradient_is_reshapes_and_mirror_pad_one_scatter_per_axis(derived):
    """Tile's gradient splits each axis into (copy, position) and sums the copies; MirrorPad's
    adds the upstream gradient back at the mirrored positions, one scatter-add per axis (its
    forward one gather per axis): never a dense matrix, never a term per mirror image."""
    _, files = derived
    for name in ("array_more_numpy.py", "array_more_tf.py"):
        assert "einsum" not in files[name]
        assert "_scatter_add" not in files[name].split("def tile_grad")[1].split("\ndef ")[0]
    mirror = files["array_more_numpy.py"].split("def mirror_pad_grad(")[1].split("\ndef ")[0]
    branches = mirror.split('"""')[2].split("elif ")  # the code, after the docstring
    assert [b.count("_scatter_add(") for b in branches] == [1, 2, 3, 4]
    assert [b.count("_mirrored(") for b in branches] == [1, 2, 3, 4]
    tile = files["array_more_numpy.py"].split("def tile_grad")[1].split("elif")[0]
    assert "grad = np.reshape(grad, np.shape(grad)[:-1] + (-1, t0))" in tile
    assert "grad_input = np.sum(grad, axis=-2)" in tile
