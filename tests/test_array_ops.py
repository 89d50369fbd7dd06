"""Padding, slicing, reversing and permuting (ops/array.py) against TensorFlow's registered
gradients: the generated TF gradient on the real op, the `tf.custom_gradient` wrapper and the
numpy module, in float64 and float32, over ranks and the values of the constant inputs."""

from __future__ import annotations

import numpy as np
import pytest

from test_index_ops import DTYPES, check

RNG = np.random.default_rng(31)


def normal(*shape):
    return RNG.standard_normal(shape)


def run(tf, tf_module, numpy_module, func, op_type, inputs, attrs, dtype):
    check(tf, tf_module, numpy_module, "array", func, op_type, inputs, attrs, dtype)


PAD = [  # (input shape, paddings)
    ((5,), [[2, 1]]),
    ((3, 4), [[0, 1], [3, 0]]),
    ((2, 3, 4), [[1, 1], [0, 0], [2, 3]]),
    ((2, 3, 2, 2), [[1, 0], [0, 2], [2, 3], [1, 1]]),
    ((1, 1), [[0, 0], [0, 0]]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,paddings", PAD, ids=str)
def test_pad(tf, tf_module, numpy_module, shape, paddings, dtype):
    run(tf, tf_module, numpy_module, "pad", "Pad", {"input": normal(*shape)}, {"paddings": paddings}, dtype)


SLICE = [  # (input shape, begin, size); size -1: to the end
    ((5,), [1], [3]),
    ((4, 5), [1, 2], [-1, 2]),
    ((3, 4, 5), [0, 1, 2], [2, -1, 3]),
    ((2, 3, 4, 5), [1, 0, 1, 0], [1, 3, 2, 5]),
    ((3, 4), [0, 0], [3, 4]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,begin,size", SLICE, ids=str)
def test_slice(tf, tf_module, numpy_module, shape, begin, size, dtype):
    attrs = {"begin": begin, "size": size}
    run(tf, tf_module, numpy_module, "slice", "Slice", {"input": normal(*shape)}, attrs, dtype)


STRIDED = [  # (input shape, begin, end, strides, masks)
    ((7,), [1], [6], [2], {}),
    ((7,), [5], [0], [-2], {}),
    ((7,), [-1], [-8], [-1], {}),  # the whole axis backwards: end clamped to -1
    ((7,), [0], [0], [-3], {"begin_mask": 1, "end_mask": 1}),
    ((7,), [2], [0], [1], {"end_mask": 1}),
    ((7,), [-3], [100], [1], {}),  # end beyond the axis: clamped
    ((7,), [3], [4], [1], {"shrink_axis_mask": 1}),
    ((7,), [-2], [-1], [1], {"shrink_axis_mask": 1}),
    ((5, 6), [1, -1], [4, 0], [2, -2], {}),
    ((5, 6), [0, 1], [0, 5], [1, 3], {"begin_mask": 1, "end_mask": 1}),
    ((5, 6), [2, 0], [3, 6], [1, 2], {"shrink_axis_mask": 1}),
    ((3, 4, 5), [0, 3, 1], [3, 0, 5], [2, -1, 3], {"begin_mask": 2}),
    ((3, 4, 5, 6), [1, 0, -1, 0], [3, 4, 0, 6], [1, 2, -2, 4], {"end_mask": 4}),
    ((3, 4, 5, 6), [1, 0, -1, 0], [3, 4, 0, 6], [1, 2, -2, 4], {"shrink_axis_mask": 1}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,begin,end,strides,masks", STRIDED, ids=str)
def test_strided_slice(tf, tf_module, numpy_module, shape, begin, end, strides, masks, dtype):
    attrs = {"begin": begin, "end": end, "strides": strides, **masks}
    run(tf, tf_module, numpy_module, "strided_slice", "StridedSlice", {"input": normal(*shape)}, attrs, dtype)


def test_strided_slice_refuses_masks_it_does_not_declare(numpy_module):
    grad = numpy_module("array").strided_slice_grad
    with pytest.raises(ValueError, match="unsupported attributes rank=2, shrink_axis_mask=2"):
        grad(np.ones(3), np.ones((2, 3)), begin=[0, 1], end=[2, 2], strides=[1, 1], shrink_axis_mask=2)


REVERSE = [  # (input shape, axis)
    ((5,), [0]),
    ((3, 4), [-1]),
    ((3, 4), [1, 0]),
    ((2, 3, 4), [0, 2]),
    ((2, 2, 3, 4), [1]),
    ((2, 2, 3, 4), [-3, 2, 3]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,axis", REVERSE, ids=str)
def test_reverse_v2(tf, tf_module, numpy_module, shape, axis, dtype):
    run(tf, tf_module, numpy_module, "reverse_v2", "ReverseV2", {"tensor": normal(*shape)}, {"axis": axis}, dtype)


TRANSPOSE = [((3, 4), [1, 0]), ((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [1, 2, 0]), ((2, 3, 4), [0, 2, 1]),
             ((2, 3, 4, 5), [0, 3, 1, 2]), ((2, 3, 4, 5), [0, 2, 3, 1])]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,perm", TRANSPOSE, ids=str)
def test_transpose(tf, tf_module, numpy_module, shape, perm, dtype):
    run(tf, tf_module, numpy_module, "transpose", "Transpose", {"x": normal(*shape)}, {"perm": perm}, dtype)


def test_slicing_gradients_are_gathers_not_scatters(derived):
    """A slice's gradient reads the upstream gradient where each input entry went (zero where
    none did): gathers, never a scatter-add or a dense matrix."""
    _, files = derived
    slices = ("pad", "pad_v2", "slice", "reverse_v2", "reverse", "strided_slice", "strided_slice_backprop")
    for name, suffix in (("array_numpy.py", "_grad("), ("array_tf.py", "_vjp(")):
        for op in slices:  # (TensorStridedSliceUpdate's forward places its value: a scatter)
            gradient = files[name].split(f"\ndef {op}{suffix}")[1].split("\ndef ")[0]
            assert "_scatter_add" not in gradient and "einsum" not in gradient, (name, op)
    transpose = files["array_numpy.py"].split("def transpose_grad")[1].split("return")[0]
    # by the inverse permutation, one body per rank
    assert "np.transpose(grad, (perm.index(0), perm.index(1), perm.index(2)))" in transpose
    assert "_gather" not in transpose
