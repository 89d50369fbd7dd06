"""The stability rules (`symgrad.stability`): each rule on its own, then activations declared
with overflowing `exp` (tests/fixtures/stable.py) and the library's softmax-like ops, finite and
right at extreme inputs in float32 and float64, numpy and TensorFlow; the library's Bessel I and
Ei's derivative beyond exp's overflow point, every target."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import sympy as sp

from symgrad import elementwise
from symgrad.instantiate import instantiate
from symgrad.derive import derive
from symgrad.functions import logsumexp, sigmoid, softplus, split_exp
from symgrad.stability import (
    cumulative_logsumexp, exp_ratio_rule, exp_sum, hyperbolic, log_sigmoid, logistic, on_products, point_branch,
    point_value, sigmoid_power, softplus_rule, split_growth, stabilized,
)

from conftest import ROOT, import_path
from verify_support import derived_folder

x, b, c = sp.symbols("x b c", real=True)
EXTREMES = [-1e4, -1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0, 1e4]
DTYPES = [np.float32, np.float64]
# absolute: 1 - sigmoid(x) for large x is a difference of numbers near 1 (as TensorFlow's
# SigmoidGrad computes it), right to the dtype's epsilon, not to its own digits
ATOL = {np.float32: 1e-6, np.float64: 1e-12}
STABLE = {
    "sigmoid": scipy.special.expit, "softplus": lambda u: np.logaddexp(0, u), "stop_gradient": lambda u: u,
    "split_exp": lambda s, u: s * np.exp(u / 2) * np.exp(u / 2),  # as the runtimes' `_split_exp`
}


def evaluate(expr, at):
    """`expr` of x in numpy at `at` (float64), with overflow and invalid values raising."""
    f = sp.lambdify([x, b], expr, [STABLE, "numpy"])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        return f(np.asarray(at, dtype=np.float64), 2.0)


def exactly(expr, at):
    """`expr` at each point, by mpmath at 30 digits."""
    return np.array([float(expr.subs({x: v, b: 2}).evalf(30)) for v in at])


# --- each rule ---------------------------------------------------------------------------------


def test_softplus_rule():
    assert softplus_rule(sp.log(1 + sp.exp(b * x))) == softplus(b * x)
    assert softplus_rule(sp.log(2 + sp.exp(x))) is None  # not log(1 + exp(u))


@pytest.mark.parametrize(
    "expr, expected",
    [
        (sp.exp(-x) / (1 + sp.exp(-x)) ** 2, sigmoid(-x) * sigmoid(x)),  # p = 1 < q = 2
        (x * sp.exp(b * x) / (1 + sp.exp(b * x)), x * sigmoid(b * x)),  # p = q
        (sp.exp(3 * x) / (1 + sp.exp(x)) ** 2, sp.exp(x) * sigmoid(x) ** 2),  # p > q
    ],
)
def test_logistic_rule(expr, expected):
    rewritten = logistic(list(expr.args))
    assert rewritten == expected
    points = [-3.0, -0.5, 0.4, 2.5]
    np.testing.assert_allclose(evaluate(rewritten, points), exactly(expr, points), rtol=1e-12)


def test_logistic_rule_on_a_power_alone():
    _, on_powers = on_products(logistic)
    assert on_powers(1 / (1 + sp.exp(-x)) ** 3) == sigmoid(x) ** 3
    assert on_powers((1 + sp.exp(x)) ** 2) is None  # grows with exp(u): as large as its value


def test_logistic_rule_with_an_attribute_for_exponent():
    """A focal loss's p**gamma, p = 1/(1 + exp(-z)), and its derivative's
    exp(z)*(1 + exp(z))**(-gamma - 1): sigmoid forms whatever gamma is."""
    gamma = sp.Symbol("gamma", real=True)
    _, on_powers = on_products(logistic)
    assert on_powers((1 + sp.exp(-x)) ** -gamma) == sigmoid(x) ** gamma
    rewritten = logistic([sp.exp(x), (1 + sp.exp(x)) ** (-gamma - 1)])
    assert rewritten == sigmoid(x) * sigmoid(-x) ** gamma
    assert on_powers((1 + sp.exp(x)) ** sp.Symbol("n", positive=True)) is None  # grows as its value


def test_log_sigmoid_and_sigmoid_power_rules():
    gamma = sp.Symbol("gamma", real=True)
    assert log_sigmoid(sp.log(sigmoid(b * x))) == -softplus(-b * x)
    assert log_sigmoid(sp.log(1 - sigmoid(x))) == -softplus(x)
    assert log_sigmoid(sp.log(2 - sigmoid(x))) is None
    assert sigmoid_power(sigmoid(x) ** gamma) == sp.exp(-gamma * softplus(-x))
    assert sigmoid_power((1 - sigmoid(x)) ** gamma) == sp.exp(-gamma * softplus(x))
    assert sigmoid_power(sigmoid(x) ** 2) is None  # a whole power stays: its derivative reuses it
    # log(p) and log(1 - p) of p written from its formula: finite at logits where p rounds to 0 or 1
    p = 1 / (1 + sp.exp(-x))
    for expr in (sp.log(p), sp.log(1 - p), (1 - p) ** sp.Rational(1, 2) * sp.log(p)):
        assert not stabilized(expr).has(sp.log)
        exact = [float(expr.subs(x, sp.Rational(v)).evalf(5000)) for v in EXTREMES]  # 1 - p at 1e4: 4343 digits
        np.testing.assert_allclose(evaluate(stabilized(expr), EXTREMES), exact, rtol=1e-12, atol=1e-300)


def test_exp_ratio_rule():
    rewritten = exp_ratio_rule(c * sp.exp(x) / (sp.exp(x) + 3))
    assert sp.simplify(rewritten - c / (1 + 3 * sp.exp(-x))) == 0


@pytest.mark.parametrize(
    "expr",
    [
        1 / (1 + sp.exp(-x) + sp.exp(-2 * x)),  # three terms: no sigmoid form
        sp.diff(1 / (1 + sp.exp(-x) + sp.exp(-2 * x)), x),  # a sum of exps over the sum squared
        b * sp.exp(x) / (3 + sp.exp(x) + sp.exp(2 * x)),
    ],
)
def test_exp_sum_rule_subtracts_the_largest_exponent(expr):
    rewritten = stabilized(expr)
    assert rewritten.has(sp.Max)  # within stop_gradient: any value of it is exact
    np.testing.assert_allclose(evaluate(rewritten, [-2.0, 0.3, 1.5]), exactly(expr, [-2.0, 0.3, 1.5]), rtol=1e-12)
    assert np.isfinite(evaluate(rewritten, EXTREMES)).all()


@pytest.mark.parametrize("expr", [1 / sp.cosh(x), sp.diff(1 / sp.cosh(x), x), x / sp.cosh(b * x) ** 2])
def test_hyperbolic_rule_writes_a_sech_for_exp_sum(expr):
    rewritten = stabilized(expr)
    assert not rewritten.has(sp.cosh, sp.sinh), rewritten
    np.testing.assert_allclose(evaluate(rewritten, [-2.0, 0.3, 1.5]), exactly(expr, [-2.0, 0.3, 1.5]), rtol=1e-12)
    np.testing.assert_allclose(evaluate(rewritten, EXTREMES), exactly(expr, EXTREMES), atol=1e-300)


def test_hyperbolic_rule_leaves_what_does_not_divide():
    assert hyperbolic([sp.cosh(x), x]) is None and exp_sum([sp.cosh(x) ** -1]) is None
    assert stabilized(1 - sp.tanh(x) ** 2) == 1 - sp.tanh(x) ** 2


def test_split_growth_rule():
    rewritten = split_growth([b, sp.exp(x), x**-2])
    assert rewritten == b * split_exp(x**-2, x)
    # Ei's derivative and its own, stabilized as a derivation would: finite beyond 709.78 in float64
    for expr in (sp.exp(x) / x, sp.diff(stabilized(sp.exp(x) / x), x)):
        stable = stabilized(expr)
        assert not stable.has(sp.exp), stable
        points = [0.5, 3.0, 700.0, 711.0, 715.0]
        np.testing.assert_allclose(evaluate(stable, points), exactly(expr, points), rtol=1e-12)
    assert split_growth([sp.exp(-(x**2)), x**-1]) is None  # bounded above: exp never overflows
    assert split_growth([sp.exp(x**2), x**-1]) == split_exp(x**-1, x**2)
    assert split_growth([sp.exp(b * x), x**-1]) is None  # b's sign is unknown
    assert split_growth([sp.exp(x), sp.exp(-x)]) is None and split_growth([sp.exp(x), x**2]) is None


def test_rules_bottom_up_keep_the_value_and_stay_finite():
    # Swish's derivative as SymPy gives it: inf/inf and inf*0 at x = -1000
    swish_derivative = sp.diff(x / (1 + sp.exp(-b * x)), x)
    rewritten = stabilized(swish_derivative)
    assert not rewritten.has(sp.exp), rewritten
    np.testing.assert_allclose(evaluate(rewritten, EXTREMES), exactly(swish_derivative, EXTREMES), atol=1e-300)


def test_complex_ops_are_left_as_declared():
    decl = elementwise("ComplexSoftplus", complex=True)(lambda x: sp.log(1 + sp.exp(x)))
    derivation = derive(instantiate(decl, ()))
    assert not derivation.variant.outputs[0].expr.has(softplus)


# --- declared activations, generated ---------------------------------------------------------------

ACTIVATIONS = {  # name -> (forward, derivative), by hand and in float64 without overflow
    "swish": (lambda v: v * scipy.special.expit(v), lambda v: scipy.special.expit(v) * (1 + v * scipy.special.expit(-v))),
    "log_sigmoid": (lambda v: -np.logaddexp(0, -v), lambda v: scipy.special.expit(-v)),
    "mish": (
        lambda v: v * np.tanh(np.logaddexp(0, v)),
        lambda v: np.tanh(np.logaddexp(0, v)) + v * (1 - np.tanh(np.logaddexp(0, v)) ** 2) * scipy.special.expit(v),
    ),
    "squared_sigmoid": (lambda v: scipy.special.expit(v) ** 2, lambda v: 2 * scipy.special.expit(v) ** 2 * scipy.special.expit(-v)),
    "two_term_logistic": (
        lambda v: exactly(1 / (1 + sp.exp(-x) + sp.exp(-2 * x)), v),
        lambda v: exactly(sp.diff(1 / (1 + sp.exp(-x) + sp.exp(-2 * x)), x), v),
    ),
    "sech": (lambda v: exactly(1 / sp.cosh(x), v), lambda v: exactly(sp.diff(1 / sp.cosh(x), x), v)),
}


@pytest.fixture(scope="module")
def activations():
    return derived_folder(ROOT / "tests" / "fixtures" / "stable.py")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_finite_at_extremes_numpy(activations, name, dtype):
    module = import_path(activations / "stable_numpy.py", "_symgrad_stable_numpy")
    v = np.array(EXTREMES, dtype=dtype)
    forward, derivative = ACTIVATIONS[name]
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no overflow on the way either
        y = getattr(module, name)(v)
        (grad,) = getattr(module, f"{name}_grad")(np.ones_like(v), v)
    assert y.dtype == dtype and grad.dtype == dtype
    np.testing.assert_allclose(y, forward(v.astype(np.float64)), rtol=1e-5, atol=ATOL[dtype])
    np.testing.assert_allclose(grad, derivative(v.astype(np.float64)), rtol=1e-5, atol=ATOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_finite_at_extremes_tensorflow(tf, activations, name, dtype):
    module = import_path(activations / "stable_tf.py", "_symgrad_stable_tf")
    v = tf.constant(EXTREMES, dtype=dtype)
    with tf.GradientTape() as tape:
        tape.watch(v)
        y = getattr(module, name)(v)
    grad = tape.gradient(y, v)
    forward, derivative = ACTIVATIONS[name]
    np.testing.assert_allclose(y.numpy(), forward(np.array(EXTREMES)), rtol=1e-5, atol=ATOL[dtype])
    np.testing.assert_allclose(grad.numpy(), derivative(np.array(EXTREMES)), rtol=1e-5, atol=ATOL[dtype])


# --- the library's softmax-like ops, at logits of magnitude 1e4 ------------------------------------------

LOGITS = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4 + 1, -2e4], [3.0, 1.0, 2.0]])
# a logit of 1e4 carries float32's epsilon times 1e4 (1e-3) into every result read off it
LOGIT_ATOL = {np.float32: 1e4 * 2.0**-23 * 4, np.float64: 1e-9}


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_sum_exp(z):
    m = z.max(axis=-1)
    return m + np.log(np.exp(z - m[..., None]).sum(axis=-1))


LIBRARY = {  # (op file stem, function) -> the forward by hand (float64), the gradient for grad = 1
    ("nn", "softmax"): (softmax, lambda z: np.zeros_like(z)),
    ("nn", "log_softmax"): (lambda z: z - log_sum_exp(z)[..., None], lambda z: 1 - z.shape[-1] * softmax(z)),
    ("reductions", "reduce_log_sum_exp"): (log_sum_exp, softmax),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("stem, name", sorted(LIBRARY))
def test_softmax_like_forward_and_gradient_at_large_logits_numpy(numpy_module, stem, name, dtype):
    module = numpy_module(stem)
    z = LOGITS.astype(dtype)
    forward, gradient = LIBRARY[stem, name]
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = getattr(module, name)(z)
        (grad,) = getattr(module, f"{name}_grad")(np.ones_like(y), z)
    np.testing.assert_allclose(y, forward(LOGITS), rtol=1e-6, atol=LOGIT_ATOL[dtype])
    np.testing.assert_allclose(grad, gradient(LOGITS), rtol=1e-5, atol=LOGIT_ATOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("stem, name", sorted(LIBRARY))
def test_softmax_like_forward_and_gradient_at_large_logits_tensorflow(tf, tf_module, stem, name, dtype):
    module = tf_module(stem)
    z = tf.constant(LOGITS, dtype=dtype)
    with tf.GradientTape() as tape:
        tape.watch(z)
        y = getattr(module, name)(z)
    grad = tape.gradient(y, z)
    forward, gradient = LIBRARY[stem, name]
    np.testing.assert_allclose(y.numpy(), forward(LOGITS), rtol=1e-6, atol=LOGIT_ATOL[dtype])
    np.testing.assert_allclose(grad.numpy(), gradient(LOGITS), rtol=1e-5, atol=LOGIT_ATOL[dtype])


def cross_entropy(features, labels):
    """TensorFlow's SoftmaxCrossEntropyWithLogits by hand: loss, backprop."""
    log_p = features - log_sum_exp(features)[..., None]
    return -(labels * log_p).sum(axis=-1), softmax(features) - labels


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_cross_entropy_at_large_logits_both_targets(tf, numpy_module, tf_module, dtype):
    labels = np.array([[0.0, 1.0, 0.0], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    loss, backprop = cross_entropy(LOGITS, labels)
    grad_loss = np.array([1.0, 2.0, -1.0])
    expected_features = grad_loss[:, None] * backprop  # TensorFlow's own, for grad_backprop = 0
    expected_labels = -grad_loss[:, None] * (LOGITS - log_sum_exp(LOGITS)[..., None])
    ours = numpy_module("nn")
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        got = ours.softmax_cross_entropy_with_logits(LOGITS.astype(dtype), labels.astype(dtype))
        grads = ours.softmax_cross_entropy_with_logits_grad(
            grad_loss.astype(dtype), np.zeros_like(labels, dtype), LOGITS.astype(dtype), labels.astype(dtype)
        )
    theirs = tf_module("nn")
    f, l_ = tf.constant(LOGITS, dtype), tf.constant(labels, dtype)
    with tf.GradientTape() as tape:
        tape.watch([f, l_])
        tf_loss, _ = theirs.softmax_cross_entropy_with_logits(f, l_)
        weighted = tf.reduce_sum(tf_loss * tf.constant(grad_loss, dtype))
    tf_grads = tape.gradient(weighted, [f, l_])
    atol = LOGIT_ATOL[dtype] * 4  # a loss of 1e4 from a difference of two such
    for value, expected in [(got[0], loss), (tf_loss.numpy(), loss), (got[1], backprop)]:
        np.testing.assert_allclose(value, expected, rtol=1e-6, atol=atol)
    for value, expected in [(grads[0], expected_features), (tf_grads[0].numpy(), expected_features)]:
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=atol)
    for value, expected in [(grads[1], expected_labels), (tf_grads[1].numpy(), expected_labels)]:
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=atol)


# --- a cumulative log-sum-exp: a log-space scan, forward and gradient ------------------------------


def test_cumulative_logsumexp_rule_only_for_a_range_ending_at_an_index():
    t, (i, k), n = sp.IndexedBase("t"), sp.symbols("i k", integer=True), sp.Symbol("N", integer=True, positive=True)
    running = sp.log(sp.Sum(sp.exp(t[k]), (k, 0, i)))
    assert cumulative_logsumexp(running) == logsumexp(t[k], (k, 0, i))
    assert cumulative_logsumexp(sp.log(sp.Sum(sp.exp(t[k]), (k, i, n - 1)))) == logsumexp(t[k], (k, i, n - 1))
    assert cumulative_logsumexp(sp.log(sp.Sum(sp.exp(t[k]), (k, 0, n - 1)))) is None  # declared with its maximum
    assert cumulative_logsumexp(sp.log(sp.Sum(t[k] * sp.exp(t[k]), (k, 0, i)))) is None
    p = sp.Symbol("p", integer=True)
    derivative = sp.diff(logsumexp(t[k], (k, 0, i)), t[p])  # the softmax, no exp(t) / sum
    assert not derivative.has(sp.Sum(sp.exp(t[k]), (k, 0, i))) and derivative.has(logsumexp)


def cumulative_lse_by_hand(z, g, reverse):
    """out[i] = log sum_{k <= i} exp(z[k]) and grad[j] = sum_{i >= j} g[i] exp(z[j] - out[i])
    (each exponent <= 0), in float64, along the last axis; reversed: k >= i, i <= j."""
    z, g = (a[..., ::-1] if reverse else a for a in (z, g))
    out = np.logaddexp.accumulate(z, axis=-1)
    n = z.shape[-1]
    later = np.triu(np.ones((n, n)))  # [j, i]: i >= j
    grad = np.einsum("...i,...ji->...j", g, later * np.exp(np.minimum(z[..., :, None] - out[..., None, :], 0)))
    return (out[..., ::-1], grad[..., ::-1]) if reverse else (out, grad)


CUMULATIVE_UPSTREAM = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0], [2.0, 1.0, -4.0]])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_cumulative_logsumexp_at_large_logits_every_target(tf, jax, torch, numpy_module, tf_module, jax_module, torch_module, dtype, reverse):
    """Logits of +-1e4 (exp overflows far below) and upstream gradients of either sign: the
    forward and the gradient of every target agree with the log-space values by hand."""
    expected = cumulative_lse_by_hand(LOGITS, CUMULATIVE_UPSTREAM, reverse)
    z, g = LOGITS.astype(dtype), CUMULATIVE_UPSTREAM.astype(dtype)
    ours = numpy_module("reductions")
    with np.errstate(over="raise"):
        got = {"numpy": (ours.cumulative_logsumexp(z, reverse=reverse), ours.cumulative_logsumexp_grad(g, z, reverse=reverse)[0])}
    module, tz = tf_module("reductions"), tf.constant(z)
    with tf.GradientTape() as tape:
        tape.watch(tz)
        y = module.cumulative_logsumexp(tz, reverse=reverse)
    got["tensorflow"] = (y.numpy(), tape.gradient(y, tz, output_gradients=tf.constant(g)).numpy())
    y, vjp = jax.vjp(lambda a: jax_module("reductions").cumulative_logsumexp(a, reverse=reverse), jax.numpy.asarray(z))
    got["jax"] = (np.asarray(y), np.asarray(vjp(jax.numpy.asarray(g))[0]))
    tz = torch.tensor(z, requires_grad=True)
    y = torch_module("reductions").cumulative_logsumexp(tz, reverse=reverse)
    got["torch"] = (y.detach().numpy(), torch.autograd.grad(y, tz, torch.tensor(g))[0].numpy())
    for target, (forward, gradient) in got.items():
        assert forward.dtype == dtype and gradient.dtype == dtype, target
        np.testing.assert_allclose(forward, expected[0], rtol=1e-6, atol=LOGIT_ATOL[dtype], err_msg=target)
        np.testing.assert_allclose(gradient, expected[1], rtol=1e-5, atol=LOGIT_ATOL[dtype], err_msg=target)


# --- a value stated at a point: a norm's gradient at the origin ----------------------------------


def test_point_branch_rule_reads_the_condition_off_the_value():
    u = sp.Symbol("u", real=True)
    norm = sp.Piecewise((0, sp.Eq(u, 0)), (sp.sqrt(u), True))
    assert point_branch(norm) == sp.Piecewise((0, sp.Eq(sp.sqrt(u), 0)), (sp.sqrt(u), True))
    assert point_value(point_branch(norm)) == sp.sqrt(u)
    assert point_branch(point_branch(norm)) is None  # applied once
    # the rest does not meet the branch's value there (sin(x)/x is nan at 0), or meets it elsewhere
    assert point_branch(sp.Piecewise((1, sp.Eq(x, 0)), (sp.sin(x) / x, True))) is None
    assert point_branch(sp.Piecewise((0, sp.Eq(x, 0)), (sp.sin(x), True))) is None
    assert point_branch(sp.Piecewise((0, sp.Eq(x, 0)), (x - 1, True))) is None


ORIGIN = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]])  # a row at the origin, a row away from it


V = np.array([[1.0, -2.0, 0.5], [0.5, 1.0, -1.0]])


def norm_hvp(x, v):
    """The Hessian of |x| (per row) times v: (v - x (x.v) / |x|^2) / |x|; at the origin 0, the branch's."""
    r = np.linalg.norm(x, axis=-1, keepdims=True)
    safe = np.where(r == 0, 1, r)
    return np.where(r == 0, 0, (v - x * np.sum(x * v, axis=-1, keepdims=True) / safe**2) / safe)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_norm_first_and_second_order_at_the_origin_numpy(numpy_module, dtype):
    module = numpy_module("reductions")
    x, grad = ORIGIN.astype(dtype), np.array([2.0, 2.0], dtype)
    with np.errstate(divide="ignore"):  # np.where evaluates the branch it discards
        (first,) = module.euclidean_norm_grad(grad, x)
        _, second = module.euclidean_norm_grad_grad(V.astype(dtype), grad, x)
    np.testing.assert_array_equal(module.euclidean_norm(x), [0.0, 5.0])
    np.testing.assert_allclose(first, [[0, 0, 0], [1.2, -1.6, 0]], rtol=1e-6)
    np.testing.assert_allclose(second, 2 * norm_hvp(ORIGIN, V), rtol=1e-5, atol=1e-6)
    assert first.dtype == dtype and second.dtype == dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_norm_first_and_second_order_tensorflow(tf, tf_module, dtype):
    """First and second order at the origin and away from it. The wrapper's forward is
    TensorFlow's EuclideanNorm kernel, whose registered gradient is NaN at 0: its backward
    reads the output again (`outputs_again`) so that the outer tape takes the derived one."""
    module = tf_module("reductions")
    x = tf.constant(ORIGIN, dtype)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = module.euclidean_norm(x)
        grad = inner.gradient(y, x)
        along = tf.reduce_sum(grad * tf.constant(V, dtype))
    hvp = outer.gradient(along, x).numpy()
    np.testing.assert_allclose(grad.numpy(), [[0, 0, 0], [0.6, -0.8, 0]], rtol=1e-6)
    np.testing.assert_allclose(hvp, norm_hvp(ORIGIN, V), rtol=1e-5, atol=1e-6)


def test_a_value_divided_by_a_stated_norm_derives_and_is_zero_at_the_origin(tmp_path):
    """x / |x| with |x| stated as 0 at the origin, under a branch at the origin too: SymPy folds
    1 / Piecewise((0, ...), ...) into a branch of zoo that the outer branch never reaches; it is
    pruned (`derive.without_dead_branches`), not printed (it was: KeyError 'ComplexInfinity')."""
    from symgrad.generate import generate

    (tmp_path / "normalize.py").write_text(
        "import sympy as sp\nfrom symgrad import dims, op, tensor\n\nD, = dims('D')\n"
        "i, d = sp.symbols('i d', integer=True)\n\n@op('Normalize')\ndef normalize():\n"
        "    x = tensor('x', (..., D))\n    total = sp.Sum(x[..., d] ** 2, (d, 0, D - 1))\n"
        "    norm = sp.Piecewise((0, sp.Eq(total, 0)), (sp.sqrt(total), True))\n"
        "    return {'y': ((..., i), sp.Piecewise((0, sp.Eq(total, 0)), (x[..., i] / norm, True)))}\n"
    )
    texts = generate([tmp_path / "normalize.py"], ("numpy",))
    for name in ("normalize_numpy.py", "_symgrad_numpy.py"):  # the module and its runtime
        (tmp_path / name).write_text(texts[name])
    module = import_path(tmp_path / "normalize_numpy.py")
    x, g = np.array([[0.0, 0.0], [3.0, 4.0]]), np.array([[1.0, 2.0], [1.0, 2.0]])
    with np.errstate(divide="ignore", invalid="ignore"):  # np.where evaluates the discarded branch
        y = module.normalize(x)
        (grad,) = module.normalize_grad(g, x)
    # (g - y (y . g)) / |x| away from the origin; 0 at it, the stated branch's
    np.testing.assert_allclose(y, [[0, 0], [0.6, 0.8]])
    np.testing.assert_allclose(grad, [[0, 0], (np.array([1.0, 2.0]) - 2.2 * np.array([0.6, 0.8])) / 5], atol=1e-12)


# --- beyond exp's overflow point, where the value is finite: Bessel I, Ei's derivative ----------

# past 88.72 (float32) and 709.78 (float64), where exp overflows; I0, I1 and their derivatives
# are about exp(x) / sqrt(2 pi x), and Ei' = exp(x) / x: finite up to 91 and 93 (716 and 716)
LARGE = {np.float32: 89.5, np.float64: 711.0}
MODULE_FIXTURES = {"numpy": "numpy_module", "tensorflow": "tf_module", "jax": "jax_module", "torch": "torch_module"}
TARGETS = sorted(MODULE_FIXTURES)
# float64 references: scipy's i0 and i1 overflow with exp (inf at 711), its iv does not
BESSEL = {  # function -> (forward, derivative)
    "bessel_i0": (lambda v: scipy.special.iv(0, v), lambda v: scipy.special.iv(1, v)),
    "bessel_i1": (
        lambda v: scipy.special.iv(1, v),
        lambda v: scipy.special.iv(0, v) - scipy.special.iv(1, v) / v,
    ),
}


def forward_and_gradient(request, target: str, stem: str, name: str, x: np.ndarray):
    """The op's forward and its gradient for an upstream gradient of ones, each target's way:
    numpy's `<name>_grad`, the frameworks' autodiff (through the derived gradient)."""
    module = request.getfixturevalue(MODULE_FIXTURES[target])(stem)
    f = getattr(module, name)
    if target == "numpy":
        with np.errstate(over="raise", invalid="raise"):
            return f(x), getattr(module, f"{name}_grad")(np.ones_like(x), x)[0]
    if target == "tensorflow":
        tf = request.getfixturevalue("tf")
        v = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(v)
            y = f(v)
        return y.numpy(), tape.gradient(y, v).numpy()
    if target == "jax":
        y, vjp = request.getfixturevalue("jax").vjp(f, x)
        return np.asarray(y), np.asarray(vjp(np.ones_like(x))[0])
    torch = request.getfixturevalue("torch")
    v = torch.tensor(x, requires_grad=True)
    y = f(v)
    y.backward(torch.ones_like(y))
    return y.detach().numpy(), v.grad.numpy()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(BESSEL))
def test_bessel_i_beyond_exp_overflow(request, target, name, dtype):
    """I0 and I1 from the scaled functions times exp(|x|) in two halves (`_split_exp`):
    TensorFlow's, JAX's and PyTorch's own i0 and i1 are inf here."""
    x = np.array([-LARGE[dtype], -3.0, 0.5, LARGE[dtype]], dtype)
    y, grad = forward_and_gradient(request, target, "special", name, x)
    forward, derivative = BESSEL[name]
    assert grad.dtype == dtype
    np.testing.assert_allclose(grad, derivative(x.astype(np.float64)), rtol=1e-5)
    if target != "tensorflow":  # TensorFlow's wrapper computes the forward by TensorFlow's kernel
        np.testing.assert_allclose(y, forward(x.astype(np.float64)), rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("target", [t for t in TARGETS if t != "torch"])  # PyTorch has no Ei
def test_expint_gradient_beyond_exp_overflow(request, target, dtype):
    """Ei'(x) = exp(x) / x as `_split_exp(1 / x, x)`: finite past exp's overflow point."""
    x = np.array([0.5, 30.0, LARGE[dtype] + 0.5], dtype)
    _, grad = forward_and_gradient(request, target, "special", "expint", x)
    wide = x.astype(np.float64)
    assert grad.dtype == dtype
    np.testing.assert_allclose(grad, np.exp(wide - np.log(wide)), rtol=1e-5)  # exp(x) / x, in range


def test_bessel_i_second_order_at_zero_jax(jax, jax_module):
    """JAX differentiates `abs` as 1 at 0 and its i0e and i1e with sign(0) = 0: the runtime's
    |x| is x * sign(x), so that the derivative of I0 there is I1(0) = 0 (of JAX's own i0, 1)."""
    module = jax_module("special")
    vjp_derivative = lambda name, at: float(jax.grad(lambda x: getattr(module, f"{name}_vjp")(1.0, x)[0])(at))
    assert vjp_derivative("bessel_i0", 0.0) == 0.5  # I1'(0)
    assert vjp_derivative("bessel_i1", 0.0) == 0.0  # I1''(0): I1 is odd
    np.testing.assert_allclose(vjp_derivative("bessel_i1", 2.0), scipy.special.ivp(1, 2.0, 2), rtol=1e-12)


# --- log-probabilities written from their formula: a focal loss ---------------------------------

FOCAL_LOSS = '''
import sympy as sp

from symgrad import elementwise


@elementwise("BinaryFocalLoss", attrs={"gamma": float, "alpha": float}, defaults={"gamma": 2.0, "alpha": 0.25})
def binary_focal_loss(z, t, gamma, alpha):
    """Focal loss of logits z against targets t, as its paper writes it."""
    p = 1 / (1 + sp.exp(-z))
    return -alpha * (1 - p) ** gamma * t * sp.log(p) - (1 - alpha) * p**gamma * (1 - t) * sp.log(1 - p)
'''


@pytest.fixture(scope="module")
def focal_loss(tmp_path_factory):
    path = tmp_path_factory.mktemp("focal") / "focal.py"
    path.write_text(FOCAL_LOSS)
    return derived_folder(path)


FOCAL_LOGITS = np.array([-1e4, -100.0, -40.0, -17.0, -1.0, 0.0, 1.0, 17.0, 40.0, 100.0, 1e4])
FOCAL_TARGETS = np.linspace(0.0, 1.0, len(FOCAL_LOGITS))


@pytest.mark.parametrize("gamma", [2.0, 0.5])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_focal_loss_from_its_formula_finite_at_any_logit(torch, jax, focal_loss, dtype, gamma):
    """log(p), log(1 - p) and powers of p by an attribute: the forward, the gradient of every
    target, and JAX's second order (its autodiff of the derived gradient) finite at logits of
    +-1e4, and equal to autodiff of the form written with log-sigmoid by hand."""
    F, jnp = torch.nn.functional, jax.numpy
    z, t = FOCAL_LOGITS.astype(dtype), FOCAL_TARGETS.astype(dtype)
    alpha = 0.25

    def by_hand(log_sigmoid, exp, z, t):
        return -alpha * exp(gamma * log_sigmoid(-z)) * t * log_sigmoid(z) - (1 - alpha) * exp(gamma * log_sigmoid(z)) * (1 - t) * log_sigmoid(-z)

    tz, tt = (torch.tensor(a, requires_grad=True) for a in (z, t))
    expected_y = by_hand(F.logsigmoid, torch.exp, tz, tt)
    expected = torch.autograd.grad(expected_y.sum(), (tz, tt))
    torch_y = import_path(focal_loss / "focal_torch.py").binary_focal_loss(tz, tt, gamma=gamma)
    numpy_module = import_path(focal_loss / "focal_numpy.py")
    jax_module = import_path(focal_loss / "focal_jax.py")
    got = {
        "torch": (torch_y, torch.autograd.grad(torch_y.sum(), (tz, tt))),
        "numpy": (numpy_module.binary_focal_loss(z, t, gamma=gamma), numpy_module.binary_focal_loss_grad(np.ones_like(z), z, t, gamma=gamma)),
        "jax": (jax_module.binary_focal_loss(z, t, gamma=gamma),
                jax.grad(lambda *a: jax_module.binary_focal_loss(*a, gamma=gamma).sum(), (0, 1))(jnp.asarray(z), jnp.asarray(t))),
    }
    for target, (y, grads) in got.items():
        values = [np.asarray(v.detach() if hasattr(v, "detach") else v) for v in (y, *grads)]
        references = [v.detach().numpy() for v in (expected_y, *expected)]
        for value, reference in zip(values, references):
            assert value.dtype == dtype and np.isfinite(value).all(), target
            np.testing.assert_allclose(value, reference, rtol=1e-5, atol=ATOL[dtype], err_msg=target)
    second = jax.grad(lambda a: jax.grad(lambda b: jax_module.binary_focal_loss(b, t, gamma=gamma).sum())(a).sum())(jnp.asarray(z))
    expected_second = jax.grad(lambda a: jax.grad(lambda b: by_hand(jax.nn.log_sigmoid, jnp.exp, b, t).sum())(a).sum())(jnp.asarray(z))
    assert np.isfinite(np.asarray(second)).all()
    np.testing.assert_allclose(np.asarray(second), np.asarray(expected_second), rtol=1e-3, atol=ATOL[dtype])
