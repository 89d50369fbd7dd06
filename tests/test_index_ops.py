"""Index-summation ops beyond MatMul, against TensorFlow's registered gradients."""

from __future__ import annotations

import ast
import itertools

import numpy as np
import pytest

TOLERANCE = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=2e-4, atol=1e-5)}
DTYPES = [np.float64, np.float32]


def tf_reference(tf, op_type, inputs: dict, attrs: dict, upstream):
    """TensorFlow's registered gradient of `tf.raw_ops.<op_type>`, through a GradientTape."""
    tensors = {name: tf.constant(value) for name, value in inputs.items()}
    with tf.GradientTape() as tape:
        tape.watch(list(tensors.values()))
        out = getattr(tf.raw_ops, op_type)(**tensors, **attrs)
    grads = tape.gradient(out, list(tensors.values()), output_gradients=tf.constant(upstream))
    # None: integer inputs; a gather's gradient comes as IndexedSlices
    return out.numpy(), [tf.convert_to_tensor(g).numpy() for g in grads if g is not None]


def tf_generated(tf, module, func, op_type, inputs: dict, attrs: dict, upstream):
    """The generated `<func>_grad(op, grad)` on a real op, and the `tf.custom_gradient` wrapper."""

    @tf.function(autograph=False)  # as TensorFlow calls a registered gradient: never converted
    def registered(*values):
        out = getattr(tf.raw_ops, op_type)(**dict(zip(inputs, values)), **attrs)
        return getattr(module, f"{func}_grad")(out.op, upstream)

    values = [tf.constant(v) for v in inputs.values()]
    with tf.GradientTape() as tape:
        tape.watch(values)
        out = getattr(module, func)(*values, **attrs)
    wrapped = tape.gradient(out, values, output_gradients=tf.constant(upstream))
    # None: constant inputs; a gather's gradient comes as IndexedSlices, as TensorFlow's
    from_op = [tf.convert_to_tensor(g).numpy() for g in registered(*values) if g is not None]
    return from_op, [tf.convert_to_tensor(g).numpy() for g in wrapped if g is not None], out.numpy()


def check(tf, tf_module, numpy_module, stem, func, op_type, inputs, attrs, dtype):
    rng = np.random.default_rng(11)
    inputs = {k: v.astype(dtype) if np.issubdtype(v.dtype, np.floating) else v for k, v in inputs.items()}
    out_shape = getattr(tf.raw_ops, op_type)(**{k: tf.constant(v) for k, v in inputs.items()}, **attrs).shape
    upstream = rng.standard_normal(out_shape).astype(dtype)
    out, expected = tf_reference(tf, op_type, inputs, attrs, upstream)
    registered, wrapped, forward = tf_generated(tf, tf_module(stem), func, op_type, inputs, attrs, upstream)
    np_module = numpy_module(stem)
    np_forward = getattr(np_module, func)(*inputs.values(), **attrs)
    np_grads = [g for g in getattr(np_module, f"{func}_grad")(upstream, *inputs.values(), **attrs) if g is not None]
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(forward, out, **tol)
    np.testing.assert_allclose(np_forward, out, **tol)
    assert len(expected) == len(registered) == len(wrapped) == len(np_grads)
    for want, *gots in zip(expected, registered, wrapped, np_grads):
        for got in gots:
            assert np.shape(got) == np.shape(want)
            np.testing.assert_allclose(got, want, **tol)


SHAPES = [(7,), (3, 5), (2, 3, 4), (2, 1, 3, 6), (4, 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("func,op_type", [("softmax", "Softmax"), ("log_softmax", "LogSoftmax")])
def test_softmax_family(tf, tf_module, numpy_module, func, op_type, shape, dtype):
    logits = np.random.default_rng(5).standard_normal(shape) * 3
    check(tf, tf_module, numpy_module, "nn", func, op_type, {"logits": logits}, {}, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (1, 5), (6, 1), (2, 3, 4)], ids=str)
def test_l2_loss(tf, tf_module, numpy_module, shape, dtype):
    t = np.random.default_rng(6).standard_normal(shape)
    check(tf, tf_module, numpy_module, "nn", "l2_loss", "L2Loss", {"t": t}, {}, dtype)


BATCHES = [((), ()), ((3,), (3,)), ((2, 1), (1, 4)), ((5,), ()), ((), (2, 3)), ((1,), (4,))]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("batch_x,batch_y", BATCHES, ids=str)
@pytest.mark.parametrize("adj_x,adj_y", list(itertools.product([False, True], repeat=2)))
def test_batch_matmul_v2(tf, tf_module, numpy_module, adj_x, adj_y, batch_x, batch_y, dtype):
    rng = np.random.default_rng(9)
    m, k, n = (1, 3, 4) if batch_x == (5,) else (2, 1, 4) if batch_y == (4,) else (2, 3, 4)
    x = rng.standard_normal(batch_x + ((k, m) if adj_x else (m, k)))
    y = rng.standard_normal(batch_y + ((n, k) if adj_y else (k, n)))
    attrs = {"adj_x": adj_x, "adj_y": adj_y}
    check(tf, tf_module, numpy_module, "batch_matmul", "batch_mat_mul_v2", "BatchMatMulV2",
          {"x": x, "y": y}, attrs, dtype)


def _code(source: str, function: str) -> str:
    """The statements of `function` in a generated module, its docstring (the math in index
    notation, `exp` included) left out."""
    (node,) = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == function]
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    return "\n".join(ast.get_source_segment(source, statement) for statement in body)


def test_softmax_gradient_reads_like_tensorflows(derived):
    """(grad - sum(grad * y, -1, keepdims)) * y: O(n), the output reused, no exp recomputed."""
    _, files = derived
    for name, reduce_sum in (("nn_numpy.py", "np.sum(grad * softmax, axis=-1, keepdims=True)"),
                             ("nn_tf.py", "tf.reduce_sum(grad * softmax, axis=-1, keepdims=True)")):
        grad = _code(files[name], "softmax_grad" if "numpy" in name else "softmax_vjp")
        assert reduce_sum in grad and "softmax * (grad - t0)" in grad
        assert "exp" not in grad
    log_grad = files["nn_numpy.py"].split("def log_softmax_grad")[1].split("return")[0]
    assert "grad - t0 * np.exp(logsoftmax)" in log_grad


REDUCTIONS = [("reduce_sum", "Sum"), ("reduce_mean", "Mean"), ("euclidean_norm", "EuclideanNorm")]


AXIS_CASES = [((6,), -1), ((6,), 0), ((3, 4), -1), ((3, 4), 0), ((3, 4), -2), ((2, 3, 5), 1),
              ((2, 3, 5), -3), ((2, 3, 5), 2), ((2, 1, 1), -2), ((2, 3, 4, 2), -3), ((2, 3, 4, 2), 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,axis", AXIS_CASES, ids=str)
@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("func,op_type", REDUCTIONS)
def test_reductions_over_an_axis(tf, tf_module, numpy_module, func, op_type, keep_dims, shape, axis, dtype):
    x = np.random.default_rng(3).standard_normal(shape)
    attrs = {"axis": axis, "keep_dims": keep_dims}
    check(tf, tf_module, numpy_module, "reductions", func, op_type, {"input": x}, attrs, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,axis", AXIS_CASES, ids=str)
@pytest.mark.parametrize("exclusive,reverse", list(itertools.product([False, True], repeat=2)))
def test_cumsum(tf, tf_module, numpy_module, exclusive, reverse, shape, axis, dtype):
    x = np.random.default_rng(4).standard_normal(shape)
    attrs = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
    check(tf, tf_module, numpy_module, "reductions", "cumsum", "Cumsum", {"x": x}, attrs, dtype)


def test_cumsum_gradient_is_a_cumulative_sum_not_a_mask(derived):
    _, files = derived
    grad = _code(files["reductions_tf.py"], "cumsum_vjp")
    # one cumulative sum per (exclusive, reverse), along the axis the attribute names
    assert grad.count("tf.math.cumsum(grad, axis=axis") == 4 and "einsum" not in grad and "where" not in grad


def test_unsupported_axis_raises_in_registered_gradient(tf, tf_module):
    module = tf_module("reductions")

    @tf.function
    def run(x):
        out = tf.raw_ops.Sum(input=x, axis=0, keep_dims=False)
        return module.reduce_sum_grad(out.op, tf.ones_like(out))

    with pytest.raises(ValueError, match="unsupported attributes axis=-4"):  # axis 0 of rank 4
        run(tf.ones((2, 3, 2, 2)))


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 2, 3)], ids=str)
def test_log_sum_exp_matches_tensorflow_composite(tf, tf_module, numpy_module, shape):
    rng = np.random.default_rng(8)
    x = rng.standard_normal(shape)
    upstream = rng.standard_normal(shape[:-1])
    value = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(value)
        reference = tf.reduce_logsumexp(value, axis=-1)
    expected = tape.gradient(reference, value, output_gradients=tf.constant(upstream)).numpy()
    with tf.GradientTape() as tape:
        tape.watch(value)
        ours = tf_module("reductions").reduce_log_sum_exp(value)
    np.testing.assert_allclose(ours.numpy(), reference.numpy(), rtol=1e-12)
    np.testing.assert_allclose(tape.gradient(ours, value, output_gradients=tf.constant(upstream)).numpy(), expected, rtol=1e-12)
    (grad,) = numpy_module("reductions").reduce_log_sum_exp_grad(upstream, x)
    np.testing.assert_allclose(grad, expected, rtol=1e-12)


EXTREMA_AND_PRODUCT = [("reduce_prod", "Prod"), ("reduce_max", "Max"), ("reduce_min", "Min")]
EDGE_ROWS = {
    "random": lambda rng: rng.standard_normal((3, 5)),
    "one zero": lambda rng: np.array([[2.0, 0.0, 3.0, -1.0], [1.5, 2.0, 0.5, 4.0]]),
    "two zeros": lambda rng: np.array([[0.0, 2.0, 0.0, 3.0], [0.0, 0.0, 1.0, 1.0]]),
    "ties": lambda rng: np.array([[3.0, 1.0, 3.0, 3.0], [-2.0, 5.0, -2.0, 0.0]]),
    "batched": lambda rng: rng.integers(-2, 3, size=(2, 3, 4)).astype(float),
}
EDGE_AXES = {"random": -1, "one zero": 0, "two zeros": -1, "ties": 1, "batched": 1}


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("case", sorted(EDGE_ROWS))
@pytest.mark.parametrize("keep_dims", [False, True])
@pytest.mark.parametrize("func,op_type", EXTREMA_AND_PRODUCT)
def test_prod_max_min_with_zeros_and_ties(tf, tf_module, numpy_module, func, op_type, keep_dims, case, dtype):
    x = EDGE_ROWS[case](np.random.default_rng(2))
    attrs = {"axis": EDGE_AXES[case], "keep_dims": keep_dims}
    check(tf, tf_module, numpy_module, "reductions", func, op_type, {"input": x}, attrs, dtype)


def test_prod_gradient_is_finite_with_zeros_and_never_divides(numpy_module, derived):
    module = numpy_module("reductions")
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 3.0]])
    (grad,) = module.reduce_prod_grad(np.ones(3), x)
    np.testing.assert_array_equal(grad, [[6.0, 0.0, 0.0], [0.0, 0.0, 0.0], [6.0, 3.0, 2.0]])
    _, files = derived
    prod_grad = files["reductions_numpy.py"].split("def reduce_prod_grad")[1].split("return")[0]
    assert "/" not in prod_grad and "cumprod" in prod_grad


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("data_format,shape", [("NHWC", (1, 3)), ("NHWC", (2, 3)), ("NHWC", (2, 4, 5, 3)),
                                               ("NCHW", (2, 3, 4, 5)), ("NCHW", (1, 3, 1, 2))], ids=str)
def test_bias_add(tf, tf_module, numpy_module, data_format, shape, dtype):
    rng = np.random.default_rng(12)
    value, bias = rng.standard_normal(shape), rng.standard_normal(3)
    check(tf, tf_module, numpy_module, "nn", "bias_add", "BiasAdd", {"value": value, "bias": bias},
          {"data_format": data_format}, dtype)


def _labels(rng, shape):
    """Rows that are probability distributions, as TensorFlow's op documents its labels."""
    raw = rng.random(shape)
    return raw / raw.sum(axis=-1, keepdims=True)


def _sce_gradients(tf, fn, features, labels, grad_loss, grad_backprop):
    values = [tf.constant(features), tf.constant(labels)]
    with tf.GradientTape() as tape:
        tape.watch(values)
        loss, backprop = fn(*values)
    return [g.numpy() for g in tape.gradient(
        [loss, backprop], values, output_gradients=[tf.constant(grad_loss), tf.constant(grad_backprop)])]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
def test_softmax_cross_entropy_both_outputs(tf, tf_module, numpy_module, dtype):
    """Both outputs' upstream gradients count. TensorFlow's hand-written gradient leaves out
    d(backprop)/d(labels) = -1 (its labels gradient ignores the backprop output's upstream):
    ours includes it, and is checked against finite differences there instead."""
    rng = np.random.default_rng(13)
    features = rng.standard_normal((4, 5)).astype(dtype)
    labels = _labels(rng, (4, 5)).astype(dtype)
    grad_loss, grad_backprop = rng.standard_normal(4).astype(dtype), rng.standard_normal((4, 5)).astype(dtype)
    raw = lambda f, l: tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=f, labels=l)
    expected = _sce_gradients(tf, raw, features, labels, grad_loss, grad_backprop)
    module = tf_module("nn")
    wrapped = _sce_gradients(tf, module.softmax_cross_entropy_with_logits, features, labels, grad_loss, grad_backprop)
    np_grads = numpy_module("nn").softmax_cross_entropy_with_logits_grad(grad_loss, grad_backprop, features, labels)
    tol = TOLERANCE[dtype]
    for got in (wrapped[0], np_grads[0]):
        np.testing.assert_allclose(got, expected[0], **tol)
    for got in (wrapped[1], np_grads[1]):
        np.testing.assert_allclose(got, expected[1] - grad_backprop, **tol)


def test_softmax_cross_entropy_labels_gradient_matches_finite_differences(numpy_module):
    module = numpy_module("nn")
    rng = np.random.default_rng(14)
    features, labels = rng.standard_normal((3, 4)), _labels(rng, (3, 4))
    grad_loss, grad_backprop = rng.standard_normal(3), rng.standard_normal((3, 4))

    def objective(l):
        loss, backprop = module.softmax_cross_entropy_with_logits(features, l)
        return np.sum(grad_loss * loss) + np.sum(grad_backprop * backprop)

    numeric = np.zeros_like(labels)
    for idx in np.ndindex(labels.shape):
        step = np.zeros_like(labels)
        step[idx] = 1e-6
        numeric[idx] = (objective(labels + step) - objective(labels - step)) / 2e-6
    _, grad_labels = module.softmax_cross_entropy_with_logits_grad(grad_loss, grad_backprop, features, labels)
    np.testing.assert_allclose(grad_labels, numeric, rtol=1e-6, atol=1e-8)


DIAGONAL_OPS = [
    ("matrix_diag_part", "MatrixDiagPart", {"input": (2, 3, 3)}),
    ("matrix_diag_part", "MatrixDiagPart", {"input": (4, 4)}),
    ("matrix_diag", "MatrixDiag", {"diagonal": (2, 4)}),
    ("matrix_diag", "MatrixDiag", {"diagonal": (3, 2, 1)}),
    ("matrix_set_diag", "MatrixSetDiag", {"input": (2, 3, 3), "diagonal": (2, 3)}),
    ("diag", "Diag", {"diagonal": (5,)}),
    ("diag_part", "DiagPart", {"input": (3, 3)}),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("func,op_type,shapes", DIAGONAL_OPS, ids=lambda v: str(v))
def test_diagonal_ops(tf, tf_module, numpy_module, func, op_type, shapes, dtype):
    rng = np.random.default_rng(15)
    inputs = {name: rng.standard_normal(shape) for name, shape in shapes.items()}
    check(tf, tf_module, numpy_module, "diagonals", func, op_type, inputs, {}, dtype)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)], ids=str)
def test_trace_matches_tensorflow(tf, tf_module, numpy_module, shape):
    rng = np.random.default_rng(16)
    x, upstream = rng.standard_normal(shape), rng.standard_normal(shape[:-2])
    value = tf.constant(x)
    gradients = []
    for fn in (tf.linalg.trace, tf_module("diagonals").trace):
        with tf.GradientTape() as tape:
            tape.watch(value)
            y = fn(value)
        gradients.append(tape.gradient(y, value, output_gradients=tf.constant(upstream)).numpy())
    (ours,) = numpy_module("diagonals").trace_grad(upstream, x)
    np.testing.assert_allclose(gradients[1], gradients[0], rtol=1e-13)
    np.testing.assert_allclose(ours, gradients[0], rtol=1e-13)


def _einsum_operands(equation, rng, unit=False):
    """Operands with distinct sizes per letter, or with every size 1 (`unit`)."""
    sizes = {c: 1 if unit else 2 + n for n, c in enumerate(sorted(set(equation) - set(",->")))}
    sizes["b"] = 1 if unit else 2
    return [rng.standard_normal(tuple(sizes[c] for c in term)) for term in equation.split("->")[0].split(",")]


EINSUM_EQUATIONS = [
    "ij,jk->ik", "ij,kj->ik", "bij,bjk->bik", "i,j->ij", "ij->ji", "ijk->kij", "ii->", "ii->i",
    "ij->i", "i,i->", "ij,ij->ij", "ij,jk,kl->il", "ij,jk->i", "bi,bj->bij",
]


@pytest.mark.parametrize("unit", [False, True], ids=["sizes", "size-1 axes"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("equation", EINSUM_EQUATIONS)
def test_einsum(tf, tf_module, numpy_module, equation, dtype, unit):
    rng = np.random.default_rng(17)
    operands = [x.astype(dtype) for x in _einsum_operands(equation, rng, unit)]
    values = [tf.constant(x) for x in operands]
    # TensorFlow's Einsum op takes one or two operands; tf.einsum splits longer equations
    raw = len(operands) <= 2
    with tf.GradientTape() as tape:
        tape.watch(values)
        out = tf.raw_ops.Einsum(inputs=values, equation=equation) if raw else tf.einsum(equation, *values)
    upstream = rng.standard_normal(out.shape).astype(dtype)
    expected = [g.numpy() for g in tape.gradient(out, values, output_gradients=tf.constant(upstream))]
    module = tf_module("einsum")

    @tf.function(autograph=False)  # as TensorFlow calls a registered gradient: never converted
    def registered(*xs):
        y = tf.raw_ops.Einsum(inputs=list(xs), equation=equation)
        return module.einsum_grad(y.op, upstream)

    with tf.GradientTape() as tape:
        tape.watch(values)
        wrapped_out = module.einsum(*values, equation=equation)
    wrapped = tape.gradient(wrapped_out, values, output_gradients=tf.constant(upstream))
    np_module = numpy_module("einsum")
    np.testing.assert_allclose(np_module.einsum(*operands, equation=equation), out.numpy(), **TOLERANCE[dtype])
    np_grads = np_module.einsum_grad(upstream, *operands, equation=equation)
    from_op = registered(*values) if raw else expected
    for want, *gots in zip(expected, from_op, wrapped, np_grads):
        for got in gots:
            np.testing.assert_allclose(np.asarray(got), want, **TOLERANCE[dtype])


def test_einsum_lowers_to_plain_operations_where_they_fit(derived):
    _, files = derived
    grad = files["einsum_numpy.py"].split("def einsum_grad")[1]
    matmul_branch = grad.split('equation == "ij,jk->ik"')[1].split("elif")[0]
    assert "grad @ inputs_1.T" in matmul_branch and "einsum" not in matmul_branch
    transpose_branch = grad.split('equation == "ij->ji"')[1].split("elif")[0]
    assert "grad.T" in transpose_branch


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape", [(3,), (4, 3), (2, 1, 3)], ids=str)
def test_cross(tf, tf_module, numpy_module, shape, dtype):
    rng = np.random.default_rng(18)
    inputs = {"a": rng.standard_normal(shape), "b": rng.standard_normal(shape)}
    check(tf, tf_module, numpy_module, "nn", "cross", "Cross", inputs, {}, dtype)


BANDS = [(0, 0), (1, 0), (0, 2), (-1, 1), (2, -1), (-1, -1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 3), (5, 2)], ids=str)
@pytest.mark.parametrize("num_lower,num_upper", BANDS)
def test_matrix_band_part(tf, tf_module, numpy_module, num_lower, num_upper, shape, dtype):
    rng = np.random.default_rng(19)
    x = rng.standard_normal(shape).astype(dtype)
    for index_type in (np.int64, np.int32):  # tf.linalg.band_part passes int32
        attrs = {"num_lower": index_type(num_lower), "num_upper": index_type(num_upper)}
        check(tf, tf_module, numpy_module, "diagonals", "matrix_band_part", "MatrixBandPart", {"input": x}, attrs, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("shape,axis", [((6,), -1), ((3, 4), 0), ((2, 3, 5), 1), ((4, 1), -1)], ids=str)
@pytest.mark.parametrize("exclusive,reverse", list(itertools.product([False, True], repeat=2)))
def test_cumprod_without_zeros(tf, tf_module, numpy_module, exclusive, reverse, shape, axis, dtype):
    x = np.random.default_rng(20).uniform(0.5, 1.5, shape) * np.where(np.arange(np.prod(shape)).reshape(shape) % 3, 1, -1)
    attrs = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
    check(tf, tf_module, numpy_module, "reductions", "cumprod", "Cumprod", {"x": x}, attrs, dtype)


ZERO_ROWS = [[2.0, 0.0, 3.0, -1.5, 0.5], [0.0, 2.0, 0.0, 3.0, 1.0], [1.5, -2.0, 0.5, 3.0, 0.0], [0.0] * 5]


@pytest.mark.parametrize("exclusive,reverse", list(itertools.product([False, True], repeat=2)))
def test_cumprod_gradient_is_exact_with_zeros(numpy_module, tf, tf_module, exclusive, reverse):
    """TensorFlow's hand-written Cumprod gradient divides by x (NaN at zeros); ours is the
    derivative, checked against finite differences (exact here: cumprod is multilinear)."""
    module = numpy_module("reductions")
    x = np.array(ZERO_ROWS)
    upstream = np.random.default_rng(21).standard_normal(x.shape)
    attrs = {"axis": -1, "exclusive": exclusive, "reverse": reverse}
    (grad,) = module.cumprod_grad(upstream, x, **attrs)
    numeric = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = 1e-3
        plus = np.sum(upstream * module.cumprod(x + step, **attrs))
        minus = np.sum(upstream * module.cumprod(x - step, **attrs))
        numeric[idx] = (plus - minus) / 2e-3
    np.testing.assert_allclose(grad, numeric, rtol=1e-9, atol=1e-9)
    value = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(value)
        out = tf_module("reductions").cumprod(value, **attrs)
    ours_tf = tape.gradient(out, value, output_gradients=tf.constant(upstream)).numpy()
    np.testing.assert_allclose(ours_tf, numeric, rtol=1e-9, atol=1e-9)
