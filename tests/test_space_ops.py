"""SpaceToDepth and DepthToSpace (inputs with an axis declared as a group of sizes) and
BroadcastTo (an elementwise op broadcast to a constant shape) and GatherNd (a gather, and
its scatter-add, along several axes jointly) and SegmentSum (a number of rows read from its
ids) against TensorFlow's registered
gradients: the generated TF gradient on the real op, the `tf.custom_gradient` wrapper and the
numpy module, in float64 and float32."""

from __future__ import annotations

import numpy as np
import pytest

from test_index_ops import DTYPES, check

RNG = np.random.default_rng(43)

BLOCKS = [  # (input shape of SpaceToDepth, block_size)
    ((1, 2, 2, 1), 2),
    ((2, 4, 6, 3), 2),
    ((1, 6, 3, 2), 3),
    ((2, 6, 9, 1), 3),
    ((1, 8, 4, 5), 4),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,block_size", BLOCKS, ids=str)
def test_space_to_depth(tf, tf_module, numpy_module, shape, block_size, dtype):
    inputs = {"input": RNG.standard_normal(shape)}
    check(tf, tf_module, numpy_module, "space", "space_to_depth", "SpaceToDepth", inputs, {"block_size": block_size}, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,block_size", BLOCKS, ids=str)
def test_depth_to_space(tf, tf_module, numpy_module, shape, block_size, dtype):
    n, h, w, c = shape  # the depth of SpaceToDepth's output
    inputs = {"input": RNG.standard_normal((n, h // block_size, w // block_size, c * block_size**2))}
    check(tf, tf_module, numpy_module, "space", "depth_to_space", "DepthToSpace", inputs, {"block_size": block_size}, dtype)


def test_space_ops_are_inverse_rearrangements(numpy_module):
    """Each op's gradient is the other op: the inverse rearrangement of the upstream gradient."""
    space = numpy_module("space")
    x = RNG.standard_normal((2, 6, 9, 2))
    y = space.space_to_depth(x, block_size=3)
    np.testing.assert_array_equal(space.depth_to_space(y, block_size=3), x)
    np.testing.assert_array_equal(space.space_to_depth_grad(y, x, block_size=3)[0], x)
    np.testing.assert_array_equal(space.depth_to_space_grad(x, y, block_size=3)[0], y)


def test_space_op_gradients_are_reshapes_and_a_transpose(derived):
    """SpaceToDepth and DepthToSpace: no gather, scatter-add, one-hot or einsum, reshapes and one
    transpose per gradient."""
    _, files = derived
    numpy_text, tf_text = files["space_numpy.py"], files["space_tf.py"]
    for text, ops in ((numpy_text, ("space_to_depth", "depth_to_space")), (tf_text, ("space_to_depth", "depth_to_space"))):
        text = "".join(text.split(f"def {op}")[1].split("\ndef space_to_batch")[0] for op in ops)
        for absent in ("_gather", "_scatter_add", "einsum", "one_hot", "segment_sum", "np.sum", "reduce_sum"):
            assert absent not in text
    for func in ("space_to_depth_grad", "depth_to_space_grad"):
        body = numpy_text.split(f"def {func}")[1].split("\ndef ")[0]
        assert body.count("np.transpose") == 1


BROADCASTS = [  # (input shape, shape broadcast to)
    ((3,), (2, 3)),
    ((2, 1), (2, 4)),
    ((1, 3, 1), (2, 3, 4)),
    ((), (2, 2)),
    ((4, 1, 2), (3, 4, 5, 2)),
    ((2, 3), (2, 3)),
    ((1,), (1,)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,target", BROADCASTS, ids=str)
def test_broadcast_to(tf, tf_module, numpy_module, shape, target, dtype):
    inputs = {"input": np.asarray(RNG.standard_normal(shape))}
    check(tf, tf_module, numpy_module, "shape", "broadcast_to", "BroadcastTo", inputs, {"shape": list(target)}, dtype)


def test_broadcast_to_gradient_sums_to_the_input_shape(derived):
    """BroadcastTo's gradient is the broadcasting reduction of the elementwise ops, read from
    the shapes at run time (TensorFlow's BroadcastGradientArgs), not a variant per shape."""
    _, files = derived
    body = files["shape_numpy.py"].split("def broadcast_to_grad")[1].split("\ndef ")[0]
    assert "grad_input = _sum_to_shape(grad, np.shape(input))" in body
    assert "if " not in body


GATHER_ND = [  # (params shape, indices), depth 1 and 2, repeated rows accumulating
    ((4, 3, 2), [[1], [3], [1]]),
    ((4, 3, 2), [[[0], [2]], [[2], [2]]]),
    ((4, 3, 2), [[1, 2], [3, 0], [1, 2]]),
    ((4, 3, 2), [[[0, 0], [3, 2]], [[0, 0], [1, 1]]]),
    ((2, 5, 1), [[1, 4], [1, 4], [1, 4]]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,indices", GATHER_ND, ids=str)
def test_gather_nd(tf, tf_module, numpy_module, shape, indices, dtype):
    inputs = {"params": RNG.standard_normal(shape), "indices": np.asarray(indices, dtype=np.int32)}
    check(tf, tf_module, numpy_module, "gather", "gather_nd", "GatherNd", inputs, {}, dtype)


def test_gather_nd_repeated_positions_accumulate(numpy_module):
    """The same entry read three times gets the sum of the three upstream gradients."""
    gather = numpy_module("gather")
    params = RNG.standard_normal((2, 5, 3))
    indices = np.asarray([[1, 4], [0, 2], [1, 4], [1, 4]], dtype=np.int32)
    grad = RNG.standard_normal((4, 3))
    got, none = gather.gather_nd_grad(grad, params, indices)
    want = np.zeros_like(params)
    np.add.at(want, (indices[:, 0], indices[:, 1]), grad)
    assert none is None
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got[1, 4], grad[0] + grad[2] + grad[3], rtol=1e-12)


def test_gather_nd_gathers_and_scatters_along_merged_axes(derived):
    """Depth 2 reads params through one axis merged from two, at row-major positions: one
    gather, one scatter-add (no one-hot of the indices, no diagonal of a gathered array)."""
    _, files = derived
    body = files["gather_numpy.py"].split("def gather_nd_grad")[1].split("\ndef ")[0]
    depth2 = body.split("elif depth == 2:")[1]
    assert depth2.count("_scatter_add(") == 1 and "einsum" not in depth2 and "diagonal" not in depth2
    forward = files["gather_numpy.py"].split("def gather_nd(")[1].split("\ndef ")[0].split("elif depth == 2:")[1]
    assert forward.count("_gather(params") == 0 and "np.reshape(params" in forward


SEGMENTS = [  # (data shape, ascending segment ids): repeated ids, a skipped id (an empty row)
    ((4, 3), [0, 0, 1, 1]),
    ((5, 2), [0, 0, 0, 2, 3]),
    ((3, 1), [1, 1, 1]),
    ((1, 4), [0]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,ids", SEGMENTS, ids=str)
def test_segment_sum(tf, tf_module, numpy_module, shape, ids, dtype):
    inputs = {"data": RNG.standard_normal(shape), "segment_ids": np.asarray(ids, dtype=np.int32)}
    check(tf, tf_module, numpy_module, "gather", "segment_sum", "SegmentSum", inputs, {}, dtype)
