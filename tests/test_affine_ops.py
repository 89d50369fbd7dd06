"""Ops with affine and indirect index maps (convolution, pooling, slicing, padding, gathers),
against TensorFlow's registered gradients: the generated TF gradient on the real op, the
`tf.custom_gradient` wrapper and the numpy module, in float64 and float32."""

from __future__ import annotations

import numpy as np
import pytest

from test_index_ops import DTYPES, check

RNG = np.random.default_rng(21)


def normal(*shape):
    return RNG.standard_normal(shape)


CONV2D = [
    # (input shape, filter shape, strides, padding, explicit_paddings, dilations)
    ((2, 7, 6, 3), (3, 2, 3, 4), (1, 1, 1, 1), "VALID", (), (1, 1, 1, 1)),
    ((2, 7, 6, 3), (3, 2, 3, 4), (1, 2, 3, 1), "VALID", (), (1, 1, 1, 1)),
    ((1, 8, 9, 2), (3, 3, 2, 2), (1, 2, 2, 1), "SAME", (), (1, 1, 1, 1)),
    ((2, 7, 8, 2), (2, 3, 2, 3), (1, 3, 2, 1), "SAME", (), (1, 1, 1, 1)),
    ((2, 6, 7, 2), (3, 3, 2, 3), (1, 2, 1, 1), "EXPLICIT", (0, 0, 1, 2, 3, 0, 0, 0), (1, 1, 1, 1)),
    ((1, 5, 5, 1), (1, 1, 1, 1), (1, 1, 1, 1), "VALID", (), (1, 1, 1, 1)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("case", CONV2D, ids=lambda c: f"{c[0]}*{c[1]}-s{c[2][1:3]}-{c[3]}-d{c[5][1:3]}")
def test_conv2d(tf, tf_module, numpy_module, case, dtype):
    x_shape, f_shape, strides, padding, explicit, dilations = case
    attrs = dict(strides=list(strides), padding=padding, explicit_paddings=list(explicit), dilations=list(dilations))
    inputs = {"input": normal(*x_shape), "filter": normal(*f_shape)}
    check(tf, tf_module, numpy_module, "conv", "conv2d", "Conv2D", inputs, attrs, dtype)


def check_against_forward(tf, tf_module, numpy_module, stem, func, op_type, inputs, attrs):
    """Where TensorFlow registers no usable gradient: each generated gradient against central
    differences of TensorFlow's own forward op, float64, along random directions (exact up to
    rounding for the multilinear ops tested so)."""
    rng = np.random.default_rng(3)

    def forward(values):
        return getattr(tf.raw_ops, op_type)(**{k: tf.constant(v) for k, v in values.items()}, **attrs).numpy()

    out = forward(inputs)
    upstream = rng.standard_normal(out.shape)
    np_grads = getattr(numpy_module(stem), f"{func}_grad")(upstream, *inputs.values(), **attrs)
    values = [tf.constant(v) for v in inputs.values()]
    with tf.GradientTape() as tape:
        tape.watch(values)
        y = getattr(tf_module(stem), func)(*values, **attrs)
    tf_grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(y, values, output_gradients=tf.constant(upstream))]
    np.testing.assert_allclose(y.numpy(), out, rtol=1e-10, atol=1e-12)
    for n, name in enumerate(inputs):
        for _ in range(3):
            direction = rng.standard_normal(inputs[name].shape)
            step = {**inputs, name: inputs[name] + 1e-3 * direction}
            back = {**inputs, name: inputs[name] - 1e-3 * direction}
            expected = np.sum(upstream * (forward(step) - forward(back))) / 2e-3
            for grads in (np_grads, tf_grads):
                np.testing.assert_allclose(np.sum(grads[n] * direction), expected, rtol=1e-7, atol=1e-9)


DILATED = [
    ((1, 9, 9, 2), (3, 2, 2, 2), (1, 1, 1, 1), "SAME", (1, 2, 3, 1)),
    ((1, 10, 9, 1), (3, 3, 1, 2), (1, 1, 1, 1), "VALID", (1, 2, 2, 1)),
    ((2, 11, 9, 2), (2, 3, 2, 2), (1, 1, 1, 1), "SAME", (1, 3, 2, 1)),
]


@pytest.mark.parametrize("case", DILATED, ids=str)
def test_dilated_conv2d_where_tensorflow_has_no_cpu_gradient(tf, tf_module, numpy_module, case):
    """TensorFlow's Conv2D gradient refuses dilations above 1 on the CPU ("Current CPU
    implementations do not yet support dilation rates larger than 1"); the derived one works."""
    x_shape, f_shape, strides, padding, dilations = case
    attrs = dict(strides=list(strides), padding=padding, explicit_paddings=[], dilations=list(dilations))
    inputs = {"input": normal(*x_shape), "filter": normal(*f_shape)}
    check_against_forward(tf, tf_module, numpy_module, "conv", "conv2d", "Conv2D", inputs, attrs)


CONV3D = [
    ((1, 5, 6, 4, 2), (2, 3, 2, 2, 3), (1, 1, 1, 1, 1), "VALID"),
    ((2, 6, 5, 5, 1), (3, 2, 2, 1, 2), (1, 2, 1, 2, 1), "SAME"),
    ((1, 7, 4, 6, 2), (2, 2, 3, 2, 2), (1, 3, 2, 1, 1), "VALID"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("case", CONV3D, ids=str)
def test_conv3d(tf, tf_module, numpy_module, case, dtype):
    x_shape, f_shape, strides, padding = case
    attrs = dict(strides=list(strides), padding=padding, dilations=[1, 1, 1, 1, 1])
    inputs = {"input": normal(*x_shape), "filter": normal(*f_shape)}
    check(tf, tf_module, numpy_module, "conv", "conv3d", "Conv3D", inputs, attrs, dtype)


POOLS = [
    ((2, 6, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
    ((1, 7, 5, 2), (1, 3, 2, 1), (1, 2, 1, 1), "VALID"),
    ((1, 7, 5, 2), (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    ((2, 5, 8, 1), (1, 2, 3, 1), (1, 3, 2, 1), "SAME"),
    ((1, 4, 4, 1), (1, 4, 4, 1), (1, 1, 1, 1), "SAME"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("case", POOLS, ids=str)
def test_avg_pool(tf, tf_module, numpy_module, case, dtype):
    x_shape, ksize, strides, padding = case
    attrs = dict(ksize=list(ksize), strides=list(strides), padding=padding)
    check(tf, tf_module, numpy_module, "conv", "avg_pool", "AvgPool", {"value": normal(*x_shape)}, attrs, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("indices", [[2, 0, 2, 4, 2], [[1, 1], [0, 3]], [3], [[[0]], [[4]]]], ids=str)
def test_gather_v2_accumulates_repeated_rows(tf, tf_module, numpy_module, indices, dtype):
    inputs = {"params": normal(5, 3), "indices": np.asarray(indices, dtype=np.int32)}
    check(tf, tf_module, numpy_module, "gather", "gather_v2", "GatherV2", inputs, {"axis": 0}, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize(
    "segment_ids,num_segments", [([0, 2, 0, 1, 2, 2], 3), ([3, 3, 3, 0, 1, 1], 5), ([1, -1, 0, 1, -2, 0], 3)], ids=str
)
def test_unsorted_segment_sum(tf, tf_module, numpy_module, segment_ids, num_segments, dtype):
    """Negative ids are dropped, as TensorFlow drops them."""
    inputs = {"data": normal(6, 4), "segment_ids": np.asarray(segment_ids, dtype=np.int32)}
    attrs = {"num_segments": num_segments}
    check(tf, tf_module, numpy_module, "gather", "unsorted_segment_sum", "UnsortedSegmentSum", inputs, attrs, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("case", POOLS, ids=str)
def test_max_pool(tf, tf_module, numpy_module, case, dtype):
    """Random inputs: no ties within a window (see test_max_pool_ties for those)."""
    x_shape, ksize, strides, padding = case
    attrs = dict(ksize=list(ksize), strides=list(strides), padding=padding)
    check(tf, tf_module, numpy_module, "conv", "max_pool", "MaxPool", {"input": normal(*x_shape)}, attrs, dtype)


TIES = [
    ([1.0, 3.0, 3.0, 2.0], (1, 2, 2, 1), (1, 2, 2, 1), (1, 1, 1, 1), "VALID"),
    ([5.0, 1.0, 5.0, 5.0, 5.0, 0.0, 1.0, 1.0, 1.0], (1, 3, 3, 1), (1, 2, 2, 1), (1, 1, 1, 1), "VALID"),
    ([2.0] * 16, (1, 4, 4, 1), (1, 3, 3, 1), (1, 2, 1, 1), "SAME"),
    ([0.0, -1.0, 0.0, 0.0, -1.0, 0.0] * 3, (1, 3, 6, 1), (1, 2, 3, 1), (1, 1, 2, 1), "SAME"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("case", TIES, ids=str)
def test_max_pool_ties_go_to_the_first_maximum(tf, tf_module, numpy_module, case, dtype):
    """Tied maxima in a window: the whole gradient goes to the first in row-major order, as
    TensorFlow's MaxPool gradient gives it (not split, as reduce_max's is)."""
    values, shape, ksize, strides, padding = case
    attrs = dict(ksize=list(ksize), strides=list(strides), padding=padding)
    inputs = {"input": np.asarray(values).reshape(shape)}
    check(tf, tf_module, numpy_module, "conv", "max_pool", "MaxPool", inputs, attrs, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("indices", [[2, 0, 2, 4, 2], [[1, 1], [0, 3]]], ids=str)
def test_legacy_gather(tf, tf_module, numpy_module, indices, dtype):
    inputs = {"params": normal(5, 3), "indices": np.asarray(indices, dtype=np.int32)}
    check(tf, tf_module, numpy_module, "gather", "gather", "Gather", inputs, {}, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("indices,rows", [([[1], [3], [1], [0]], 5), ([[2], [2], [2], [2]], 3)], ids=str)
def test_scatter_nd_accumulates_repeated_indices(tf, tf_module, numpy_module, indices, rows, dtype):
    indices = np.asarray(indices, dtype=np.int32)
    inputs = {"indices": indices, "updates": normal(len(indices), 3)}
    check(tf, tf_module, numpy_module, "gather", "scatter_nd", "ScatterNd", inputs, {"shape": [rows, 3]}, dtype)


POOLS_3D = [
    ((1, 4, 5, 4, 2), (1, 2, 2, 2, 1), (1, 2, 2, 2, 1), "VALID"),
    ((2, 5, 4, 3, 1), (1, 3, 2, 2, 1), (1, 2, 1, 2, 1), "SAME"),
]


@pytest.mark.parametrize("case", POOLS_3D, ids=str)
def test_avg_pool3d(tf, tf_module, numpy_module, case, dtype=np.float32):
    """TensorFlow's CPU kernel takes float32 only."""
    x_shape, ksize, strides, padding = case
    attrs = dict(ksize=list(ksize), strides=list(strides), padding=padding)
    check(tf, tf_module, numpy_module, "conv", "avg_pool3d", "AvgPool3D", {"input": normal(*x_shape)}, attrs, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (1, 2, 1, 5)], ids=str)
@pytest.mark.parametrize("axis", [-1, -2, -3])
def test_expand_dims(tf, tf_module, numpy_module, shape, axis, dtype):
    """Declared for the last three places of the output, counted from its end."""
    check(tf, tf_module, numpy_module, "shape", "expand_dims", "ExpandDims", {"input": normal(*shape)}, {"axis": axis}, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("case", POOLS[:3], ids=str)
def test_max_pool_v2(tf, tf_module, numpy_module, case, dtype):
    """The window and strides as constant inputs."""
    x_shape, ksize, strides, padding = case
    attrs = dict(ksize=list(ksize), strides=list(strides), padding=padding)
    check(tf, tf_module, numpy_module, "conv", "max_pool_v2", "MaxPoolV2", {"input": normal(*x_shape)}, attrs, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("align", ["RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"])
@pytest.mark.parametrize("k", [(-1, 1), (1, 2)], ids=str)
def test_a_band_of_diagonals_aligned_as_tensorflow(tf, tf_module, numpy_module, k, align, dtype):
    """Diagonals of several lengths, each placed by `align`: positions computed from the row."""
    inputs = {"input": normal(2, 4, 4)}
    attrs = {"k": k, "padding_value": 0, "align": align}
    check(tf, tf_module, numpy_module, "diagonals", "matrix_diag_part_v3", "MatrixDiagPartV3", inputs, attrs, dtype)


@pytest.mark.parametrize("align", ["RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"])
@pytest.mark.parametrize("k", [(-1, 1), (1, 2)], ids=str)
def test_a_band_of_diagonals_set_and_made_as_tensorflow(tf, tf_module, numpy_module, k, align):
    longest = 4 - (0 if k[0] <= 0 <= k[1] else min(map(abs, k)))
    band = normal(2, k[1] - k[0] + 1, longest)
    set_inputs = {"input": normal(2, 4, 4), "diagonal": band}
    check(tf, tf_module, numpy_module, "diagonals", "matrix_set_diag_v3", "MatrixSetDiagV3", set_inputs, {"k": k, "align": align}, np.float64)
    attrs = {"k": k, "num_rows": -1, "num_cols": -1, "padding_value": 0, "align": align}
    check(tf, tf_module, numpy_module, "diagonals", "matrix_diag_v3", "MatrixDiagV3", {"diagonal": band}, attrs, np.float64)
