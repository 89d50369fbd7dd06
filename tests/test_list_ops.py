"""Ops that take or return a list of tensors (ops/list_ops.py) against TensorFlow's registered
gradients: the generated TF gradient on the real op (its `op.inputs` flattening the list, a
None for the axis tensor), the `tf.custom_gradient` wrapper and the numpy module, in float64
and float32."""

from __future__ import annotations

import numpy as np
import pytest

from test_index_ops import DTYPES, TOLERANCE

RNG = np.random.default_rng(43)


def tf_list_reference(tf, op_type, build, tensors: list, upstream: list):
    """The outputs of `build(tensors)` (a raw op) and TensorFlow's registered gradient."""
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        out = build(tensors)
    outs = out if isinstance(out, list) else [out]
    grads = tape.gradient(outs, tensors, output_gradients=[tf.constant(u) for u in upstream])
    return [o.numpy() for o in outs], [g.numpy() for g in grads]


def check(tf, tf_module, numpy_module, func, op_type, build, arrays, attrs, list_output, dtype):
    """Every gradient of op `op_type` (built by `build(tensors)`) against TensorFlow's."""
    arrays = [a.astype(dtype) for a in arrays]
    tensors = [tf.constant(a) for a in arrays]
    outs = build(tensors)
    outs = outs if isinstance(outs, list) else [outs]
    upstream = [RNG.standard_normal(o.shape).astype(dtype) for o in outs]
    want_out, want = tf_list_reference(tf, op_type, build, tensors, upstream)
    ups = [upstream] if list_output else upstream  # a list output's upstream gradients: one list
    module = tf_module("list_ops")

    @tf.function(autograph=False)  # as TensorFlow calls a registered gradient: never converted
    def registered(*values):
        out = build(list(values))
        op = (out[0] if isinstance(out, list) else out).op
        grads = getattr(module, f"{func}_grad")(op, *upstream)
        assert len(grads) == len(op.inputs)  # one per flat input, None for constant ones
        return [g for g in grads if g is not None]

    with tf.GradientTape() as tape:
        tape.watch(tensors)
        wrapped_out = getattr(module, func)(*tensors, **attrs)
    wrapped = tape.gradient(wrapped_out, tensors, output_gradients=[tf.constant(u) for u in upstream])
    np_module = numpy_module("list_ops")
    np_out = getattr(np_module, func)(*arrays, **attrs)
    np_grads = getattr(np_module, f"{func}_grad")(*ups, *arrays, **attrs)
    tol = TOLERANCE[dtype]
    wrapped_out = wrapped_out if isinstance(wrapped_out, (list, tuple)) else [wrapped_out]
    np_out = np_out if isinstance(np_out, tuple) else [np_out]
    for got_out in (wrapped_out, np_out):
        assert len(got_out) == len(want_out)
        for got, expected in zip(got_out, want_out):
            np.testing.assert_allclose(np.asarray(got), expected, **tol)
    for gots in (registered(*tensors), wrapped, np_grads):
        assert len(gots) == len(want)
        for got, expected in zip(gots, want):
            assert np.shape(got) == np.shape(expected)
            np.testing.assert_allclose(np.asarray(got), expected, **tol)


CONCAT = [  # (shapes, axis): the last two axes, negative and non-negative, batch axes
    ([(3, 2), (3, 4)], -1),
    ([(2, 3), (1, 3), (4, 3)], 0),
    ([(2, 3, 1), (2, 3, 2)], 2),
    ([(2, 2, 3), (2, 1, 3), (2, 3, 3)], -2),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shapes,axis", CONCAT, ids=str)
def test_concat_v2(tf, tf_module, numpy_module, shapes, axis, dtype):
    arrays = [RNG.standard_normal(s) for s in shapes]
    build = lambda ts: tf.raw_ops.ConcatV2(values=ts, axis=axis)
    check(tf, tf_module, numpy_module, "concat_v2", "ConcatV2", build, arrays, {"axis": axis}, False, dtype)


SPLIT = [((3, 4), -1, 2), ((6, 2), 0, 3), ((2, 3, 6), 2, 3), ((2, 4, 3), -2, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,axis,num_split", SPLIT, ids=str)
def test_split(tf, tf_module, numpy_module, shape, axis, num_split, dtype):
    build = lambda ts: tf.raw_ops.Split(axis=axis, value=ts[0], num_split=num_split)
    attrs = {"axis": axis, "num_split": num_split}
    check(tf, tf_module, numpy_module, "split", "Split", build, [RNG.standard_normal(shape)], attrs, True, dtype)


SPLIT_V = [((3, 5), -1, [2, 3]), ((6, 2), 0, [1, -1, 2]), ((2, 3, 4), 2, [-1, 3]), ((2, 5, 3), -2, [2, 2, 1])]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,axis,size_splits", SPLIT_V, ids=str)
def test_split_v(tf, tf_module, numpy_module, shape, axis, size_splits, dtype):
    n = len(size_splits)
    build = lambda ts: tf.raw_ops.SplitV(value=ts[0], size_splits=size_splits, axis=axis, num_split=n)
    attrs = {"axis": axis, "num_split": n, "size_splits": size_splits}
    check(tf, tf_module, numpy_module, "split_v", "SplitV", build, [RNG.standard_normal(shape)], attrs, True, dtype)


PACK = [  # (shapes, axis): vectors and scalars, the default axis 0, negative axes
    ([(4,), (4,)], 0),
    ([(2, 3), (2, 3), (2, 3)], 0),
    ([(2, 3), (2, 3)], -1),
    ([(3, 2, 4), (3, 2, 4)], 1),
    ([(), (), ()], 0),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shapes,axis", PACK, ids=str)
def test_pack(tf, tf_module, numpy_module, shapes, axis, dtype):
    arrays = [np.asarray(RNG.standard_normal(s)) for s in shapes]
    build = lambda ts: tf.raw_ops.Pack(values=ts, axis=axis)
    check(tf, tf_module, numpy_module, "pack", "Pack", build, arrays, {"axis": axis}, False, dtype)


UNPACK = [((3,), 0), ((2, 4), 0), ((4, 3), -1), ((2, 3, 4), 1), ((2, 2, 3), -3)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,axis", UNPACK, ids=str)
def test_unpack(tf, tf_module, numpy_module, shape, axis, dtype):
    num = shape[axis]
    build = lambda ts: tf.raw_ops.Unpack(value=ts[0], num=num, axis=axis)
    attrs = {"num": num, "axis": axis}
    check(tf, tf_module, numpy_module, "unpack", "Unpack", build, [RNG.standard_normal(shape)], attrs, True, dtype)


def test_stack_gradients_are_stacks(derived):
    """Unpack's gradient stacks the upstream gradients, Pack's reads one position of it."""
    _, files = derived
    numpy, tf = files["list_ops_numpy.py"], files["list_ops_tf.py"]
    unpack_grad = numpy[numpy.index("def unpack_grad"):]
    assert "np.stack([grad_output_0, grad_output_1], axis=-1)" in unpack_grad
    assert "tf.stack([grad_output_0, grad_output_1], axis=-1)" in tf[tf.index("def unpack_vjp"):]
    pack_grad = numpy[numpy.index("def pack_grad"):numpy.index("def unpack(")]
    assert "_gather(grad, t0, -1)" in pack_grad


def test_list_gradients_are_gathers(derived):
    """Each piece's gradient is a gather of the upstream gradient: no one-hot, no scatter."""
    _, files = derived
    for name in ("list_ops_numpy.py", "list_ops_tf.py"):
        source = files[name]
        assert "_gather(grad" in source
        assert "eye(" not in source and "one_hot" not in source and "_scatter_add" not in source


def test_list_declarations_are_checked():
    """A list input's tensors, its length attribute and a list output are checked, each
    error naming the op."""
    import sympy as sp

    from symgrad import LengthOf, attr, dims, indices, op, tensor
    from symgrad.instantiate import instantiate
    from symgrad.errors import DeclarationError

    (D,) = dims("D")
    (i,) = indices("i")
    with pytest.raises(DeclarationError, match="names no list input"):
        op("Bad", attrs={"N": attr((2,), LengthOf("values"))})(lambda N: None)

    @op("AddN", attrs={"N": attr((2,), LengthOf("inputs"))}, variadic="inputs")
    def extra_tensor(N):
        xs = [tensor(f"inputs_{k}", (D,)) for k in range(N)] + [tensor("bias", (D,))]
        return {"sum": ((i,), sum(x[i] for x in xs))}

    with pytest.raises(DeclarationError, match="only tensor inputs"):
        instantiate(extra_tensor, (("N", 2),))

    @op("AddN", attrs={"N": attr((3,), LengthOf("inputs"))}, variadic="inputs")
    def short(N):
        xs = [tensor(f"inputs_{k}", (D,)) for k in range(2)]
        return {"sum": ((i,), sum(x[i] for x in xs))}

    with pytest.raises(DeclarationError, match="N=3 is the length"):
        instantiate(short, (("N", 3),))

    @op("Halves")
    def two_outputs():
        x = tensor("x", (D,))
        return {"output": [((i,), x[i])], "other": ((i,), sp.S(2) * x[i])}

    with pytest.raises(DeclarationError, match="only output"):
        instantiate(two_outputs, ())
