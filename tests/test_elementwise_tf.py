"""The elementwise op library (ops/unary.py, ops/binary.py) against TensorFlow's own gradients.

For every declared op, three derived gradients are compared with the gradient TensorFlow
registers for that op type (GradientTape on `tf.raw_ops.<Type>`, eager, float64): the numpy
`<func>_grad`, the TensorFlow `<func>_grad(op, grad)` called on a real graph op, and the
`tf.custom_gradient` wrapper `<func>(...)`. Inputs are random inside each op's domain, binary
ops broadcast, and edge values (kinks, ties, guarded zeros) are included exactly.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pytest

from symgrad.load import load_op_file

from conftest import OPS

RTOL = 1e-10
ATOL = 1e-12  # for entries that cancel to ~0, where a relative tolerance means nothing
KINK_OPS = ("Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Abs")
# piecewise constant: differences across a jump mean nothing, and samples avoid the jumps
STEP_OPS = ("Floor", "Ceil", "Rint", "Round", "Sign", "FloorDiv", "TruncateDiv", "FloorMod")


@dataclass(frozen=True)
class Domain:
    """Where an input is sampled: uniform on [low, high], or on ±[low, high] when `signed`."""

    low: float
    high: float
    signed: bool = False  # both signs, never near 0 (for divisors)

    def sample(self, rng, shape) -> np.ndarray:
        values = rng.uniform(self.low, self.high, shape)
        return values * rng.choice([-1.0, 1.0], shape) if self.signed else values


@dataclass(frozen=True)
class Case:
    """How one op is tested: one domain per input, exact edge values, attributes."""

    domains: tuple[Domain, ...]  # one per input, in op order
    edges: tuple = ()  # unary: values appended; binary: (x_values, y_values) grids
    attrs: tuple = ()  # (name, value): non-default, so reading the attribute is tested


ANY = Domain(-3.0, 3.0)
POSITIVE = Domain(0.1, 5.0)
UNIT = Domain(-0.95, 0.95)
NONZERO = Domain(0.3, 3.0, signed=True)
KINK = (0.0, -0.0)

UNARY = {
    "Sigmoid": Case((Domain(-6.0, 6.0),)),
    "Tanh": Case((ANY,)),
    "Exp": Case((ANY,)),
    "Log": Case((POSITIVE,)),
    "Log1p": Case((Domain(-0.9, 5.0),), edges=(0.0,)),
    "Expm1": Case((ANY,), edges=(0.0,)),
    "Sqrt": Case((POSITIVE,)),
    "Rsqrt": Case((POSITIVE,)),
    "Reciprocal": Case((NONZERO,)),
    "Square": Case((ANY,), edges=(0.0,)),
    "Sin": Case((ANY,)),
    "Cos": Case((ANY,)),
    "Tan": Case((Domain(-1.4, 1.4),)),
    "Asin": Case((UNIT,)),
    "Acos": Case((UNIT,)),
    "Atan": Case((ANY,)),
    "Sinh": Case((ANY,)),
    "Cosh": Case((ANY,)),
    "Asinh": Case((ANY,)),
    "Acosh": Case((Domain(1.1, 4.0),)),
    "Atanh": Case((UNIT,)),
    # ±800: exp overflows in float64; TensorFlow's gradient, sigmoid, is still 1 and 0 there
    "Softplus": Case((Domain(-30.0, 30.0),), edges=(0.0, -800.0, 800.0)),
    "Softsign": Case((ANY,), edges=(0.0,)),
    "Erf": Case((ANY,)),
    "Erfc": Case((ANY,)),
    "Relu": Case((ANY,), edges=KINK),
    "Elu": Case((ANY,), edges=KINK),
    "Selu": Case((ANY,), edges=KINK),
    # alpha 0.25: exact in float32, the type of TensorFlow's attribute (0.3 would differ at 4e-8)
    "LeakyRelu": Case((ANY,), edges=KINK, attrs=(("alpha", 0.25),)),
    "Abs": Case((ANY,), edges=KINK),
    "Neg": Case((ANY,)),
    "Inv": Case((NONZERO,)),
    "Relu6": Case((Domain(-2.0, 8.0),), edges=KINK + (6.0,)),
    # integers and halves: where the rounding ops jump (their gradient is 0 there too)
    "Floor": Case((ANY,), edges=(0.0, 1.0, -2.0, 0.5)),
    "Ceil": Case((ANY,), edges=(0.0, 1.0, -2.0, 0.5)),
    "Rint": Case((ANY,), edges=(0.5, 1.5, -2.5, 2.0)),
    "Round": Case((ANY,), edges=(0.5, 1.5, -2.5, 2.0)),
    "Sign": Case((ANY,), edges=KINK),
}

GUARDED = ([0.0, 1.5, -2.0], [0.0, 0.7, -2.5])  # every combination of x and y zero or not
TIES = ([1.0, 2.0, -0.5], [1.0, 2.0, -0.5, 0.0])  # x == y on the diagonal

BINARY = {
    "AddV2": Case((ANY, ANY)),
    "Sub": Case((ANY, ANY)),
    "Mul": Case((ANY, ANY)),
    "RealDiv": Case((ANY, NONZERO)),
    # x = 0 with y in {2, 3, 0.5}; x < 0 only with integer y, where x**y is real
    "Pow": Case(
        (Domain(0.5, 2.0), Domain(-2.0, 2.0)),
        edges=(([0.0, -2.0, 1.5], [2.0, 3.0]), ([0.0], [0.5])),
    ),
    "Maximum": Case((ANY, ANY), edges=(TIES,)),
    "Minimum": Case((ANY, ANY), edges=(TIES,)),
    "SquaredDifference": Case((ANY, ANY)),
    "Atan2": Case((ANY, NONZERO)),
    "Xlogy": Case((ANY, Domain(0.2, 3.0)), edges=(([0.0, 1.5, -2.0], [0.0, 0.7, 2.5]),)),
    "Xdivy": Case((ANY, NONZERO), edges=(GUARDED,)),
    "DivNoNan": Case((ANY, NONZERO), edges=(GUARDED,)),
    "Add": Case((ANY, ANY)),
    "Div": Case((ANY, NONZERO)),
    "MulNoNan": Case((ANY, ANY), edges=(GUARDED,)),
    "FloorDiv": Case((ANY, NONZERO), edges=(([3.0, -3.0, 0.0], [1.5, -1.5]),)),
    "TruncateDiv": Case((ANY, NONZERO), edges=(([3.0, -3.0, 0.0], [1.5, -1.5]),)),
    "FloorMod": Case((ANY, NONZERO), edges=(([3.0, -3.0, 0.0], [1.5, -1.5]),)),
    "Xlog1py": Case((ANY, Domain(-0.5, 3.0)), edges=(([0.0, 1.5, -2.0], [0.0, -1.0, 2.5]),)),
    "NextAfter": Case((ANY, ANY), edges=(TIES,)),  # x1 == x2: nextafter is x1 itself
}
SHAPES = [((3, 1), (1, 4)), ((5,), (2, 5)), ((), (3,)), ((2, 3), ())]

# complex128 against TensorFlow: every op declared complex. TensorFlow's Xlogy and Xdivy
# gradients omit the conjugate (grad * log(y), not grad * conj(log(y)), unlike its own
# convention), so those two are checked against the definition instead.
COMPLEX_DEFINITION = ["Xlogy", "Xdivy"]
COMPLEX_TF = [
    *("Sigmoid", "Tanh", "Exp", "Log", "Log1p", "Expm1", "Sqrt", "Rsqrt", "Reciprocal", "Square"),
    *("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"),
    *("Neg", "AddV2", "Sub", "Mul", "RealDiv", "DivNoNan", "Inv", "Add", "Div"),
]


# --- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture(scope="module")
def decls():
    """Op type -> (declaration, op file stem) for ops/unary.py and ops/binary.py."""
    found = {}
    for stem in ("unary", "binary"):
        for decl in load_op_file(OPS / f"{stem}.py").ops:
            found[decl.name] = (decl, stem)
    return found


def rng_for(*key) -> np.random.Generator:
    """A generator seeded by the case, so every case draws the same numbers in any order."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def constant(tf, array):
    dtype = tf.complex128 if np.iscomplexobj(array) else tf.float64
    return tf.constant(array, dtype=dtype)


def assert_all_close(actual, expected, what):
    assert len(actual) == len(expected), f"{what}: {len(actual)} results, not {len(expected)}"
    for n, (a, e) in enumerate(zip(actual, expected)):
        e = np.asarray(e)
        a = np.zeros_like(e) if a is None else np.asarray(a)  # None: no gradient (Floor's)
        assert a.shape == e.shape, f"{what}, input {n}: shape {a.shape}, expected {e.shape}"
        message = f"{what}, input {n}"
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL, equal_nan=True, err_msg=message)


def upstream_for(name, shape, complex_dtype) -> np.ndarray:
    """A random, non-trivial upstream gradient."""
    rng = rng_for(name, "upstream", shape)
    upstream = rng.uniform(-2.0, 2.0, shape)
    return upstream + 1j * rng.uniform(-2.0, 2.0, shape) if complex_dtype else upstream


def raw_op(tf, decl, attrs):
    """TensorFlow's own op `decl.name`, called with positional tensors."""
    return lambda *tensors: getattr(tf.raw_ops, decl.name)(
        **dict(zip(decl.inputs, tensors)), **attrs
    )


def tape_gradient(tf, forward, arrays, upstream):
    """(value, gradients) of `forward(*tensors)` under a GradientTape, eager."""
    tensors = [constant(tf, a) for a in arrays]
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        out = forward(*tensors)
    grads = tape.gradient(
        out,
        tensors,
        output_gradients=constant(tf, upstream),
        unconnected_gradients=tf.UnconnectedGradients.ZERO,  # the rounding ops' None
    )
    return out.numpy(), [g.numpy() for g in grads]


def graph_op_gradient(tf, gradient_fn, forward, arrays, upstream):
    """`gradient_fn(op, grad)` called on the real graph op of `forward`, in a `tf.function`."""

    @tf.function
    def graph_gradient(upstream, *tensors):
        return gradient_fn(forward(*tensors).op, upstream)

    tensors = [constant(tf, a) for a in arrays]
    return [None if g is None else g.numpy() for g in graph_gradient(constant(tf, upstream), *tensors)]


def registered_gradient(op_type: str):
    from tensorflow.python.framework import ops as tf_ops

    return tf_ops._gradient_registry.lookup(op_type)


def check_against_tf(tf, numpy_module, tf_module, decl, stem, arrays, attrs):
    """All three derived gradients, and both derived forwards, against TensorFlow's."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    upstream = upstream_for(decl.name, shape, np.iscomplexobj(arrays[0]))
    value, expected = tape_gradient(tf, raw_op(tf, decl, attrs), arrays, upstream)
    np_mod, tf_mod = numpy_module(stem), tf_module(stem)
    # the reference must be TensorFlow's own gradient, not ours registered under its type
    assert decl.name not in tf_mod.REGISTERED[decl.name]
    assert registered_gradient(decl.name).__module__.startswith("tensorflow."), decl.name
    with np.errstate(all="ignore"):  # np.where evaluates the branch it does not select
        np_value = getattr(np_mod, decl.func_name)(*arrays, **attrs)
        np_grads = getattr(np_mod, f"{decl.func_name}_grad")(upstream, *arrays, **attrs)
    assert_all_close([np_value], [value], f"{decl.name} numpy forward")
    assert_all_close(np_grads, expected, f"{decl.name} numpy gradient")

    gradient_fn = getattr(tf_mod, f"{decl.func_name}_grad")
    graph_grads = graph_op_gradient(tf, gradient_fn, raw_op(tf, decl, attrs), arrays, upstream)
    assert_all_close(graph_grads, expected, f"{decl.name} {decl.func_name}_grad(op, grad)")

    wrapper = getattr(tf_mod, decl.func_name)
    wrapped = tape_gradient(tf, lambda *t: wrapper(*t, **attrs), arrays, upstream)
    assert_all_close([wrapped[0]], [value], f"{decl.name} custom_gradient forward")
    assert_all_close(wrapped[1], expected, f"{decl.name} custom_gradient gradient")


# --- the op library is what the tables test --------------------------------------------------


def test_every_declared_op_has_a_case(decls):
    assert set(decls) == set(UNARY) | set(BINARY)


def test_complex_cases_are_the_complex_ops(decls):
    declared = {name for name, (decl, _) in decls.items() if decl.complex_ok}
    assert declared == set(COMPLEX_TF) | set(COMPLEX_DEFINITION)


def test_kinks_are_piecewise_with_stated_ties():
    source = (OPS / "unary.py").read_text() + (OPS / "binary.py").read_text()
    assert source.count("# tie:") >= len(KINK_OPS) + 2  # and Maximum, Minimum


# --- real inputs against TensorFlow ------------------------------------------------------------


@pytest.mark.parametrize("op_type", sorted(UNARY))
def test_unary_matches_tensorflow(tf, numpy_module, tf_module, decls, op_type):
    decl, stem = decls[op_type]
    case = UNARY[op_type]
    x = case.domains[0].sample(rng_for(op_type), (8,))
    x = np.concatenate([x, np.array(case.edges, dtype=np.float64)])
    check_against_tf(tf, numpy_module, tf_module, decl, stem, [x], dict(case.attrs))


@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("op_type", sorted(BINARY))
def test_binary_broadcasting_matches_tensorflow(
    tf, numpy_module, tf_module, decls, op_type, shapes
):
    decl, stem = decls[op_type]
    case = BINARY[op_type]
    arrays = [np.asarray(d.sample(rng_for(op_type, s), s)) for d, s in zip(case.domains, shapes)]
    check_against_tf(tf, numpy_module, tf_module, decl, stem, arrays, dict(case.attrs))


@pytest.mark.parametrize(
    "op_type, grid",
    [(op, grid) for op in sorted(BINARY) for grid in BINARY[op].edges],
    ids=lambda v: v if isinstance(v, str) else "x" + "_".join(map(str, v[0])),
)
def test_binary_edge_values_match_tensorflow(tf, numpy_module, tf_module, decls, op_type, grid):
    decl, stem = decls[op_type]
    x_values, y_values = grid
    x = np.array(x_values, dtype=np.float64)[:, None]  # every x against every y, broadcast
    y = np.array(y_values, dtype=np.float64)[None, :]
    check_against_tf(tf, numpy_module, tf_module, decl, stem, [x, y], dict(BINARY[op_type].attrs))


@pytest.mark.parametrize("op_type", COMPLEX_TF)
def test_complex_matches_tensorflow(tf, numpy_module, tf_module, decls, op_type):
    decl, stem = decls[op_type]
    arrays = [complex_sample(rng_for(op_type, "complex", n), (4,)) for n in range(len(decl.inputs))]
    check_against_tf(tf, numpy_module, tf_module, decl, stem, arrays, {})


@pytest.mark.parametrize("op_type", COMPLEX_DEFINITION)
def test_complex_gradient_is_conjugated(numpy_module, decls, op_type):
    """grad * conj(df/dinput), with df/dinput by a complex finite difference (f is holomorphic)."""
    decl, stem = decls[op_type]
    module = numpy_module(stem)
    forward = getattr(module, decl.func_name)
    arrays = [complex_sample(rng_for(op_type, "complex", n), (4,)) for n in range(len(decl.inputs))]
    upstream = complex_sample(rng_for(op_type, "upstream"), (4,))
    grads = getattr(module, f"{decl.func_name}_grad")(upstream, *arrays)
    h = 1e-6
    for n, grad in enumerate(grads):
        step = [a + (h if m == n else 0) for m, a in enumerate(arrays)]
        back = [a - (h if m == n else 0) for m, a in enumerate(arrays)]
        derivative = (forward(*step) - forward(*back)) / (2 * h)
        np.testing.assert_allclose(grad, upstream * np.conj(derivative), rtol=1e-7)


def complex_sample(rng, shape) -> np.ndarray:
    """Values off the real axis and away from 0 and ±1, where every complex op is holomorphic."""
    return rng.uniform(0.2, 0.8, shape) + 1j * rng.uniform(-0.6, 0.6, shape)


# --- numpy gradients against central finite differences ------------------------------------


@pytest.mark.parametrize("op_type", sorted(UNARY))
def test_unary_numpy_matches_finite_differences(numpy_module, decls, op_type):
    decl, stem = decls[op_type]
    case, module = UNARY[op_type], numpy_module(stem)
    x = case.domains[0].sample(rng_for(op_type, "fd"), (6,))
    if op_type in KINK_OPS:
        x = np.where(np.abs(x) < 0.1, 0.5, x)  # a difference across the kink means nothing
    if op_type in STEP_OPS:
        x = np.round(x) + 0.25  # away from every integer and half-integer
    upstream = rng_for(op_type, "fd-upstream").uniform(-2.0, 2.0, x.shape)
    attrs = dict(case.attrs)
    forward = getattr(module, decl.func_name)
    h = 1e-6
    derivative = (forward(x + h, **attrs) - forward(x - h, **attrs)) / (2 * h)
    (grad,) = getattr(module, f"{decl.func_name}_grad")(upstream, x, **attrs)
    grad = np.zeros_like(x) if grad is None else grad  # None: no gradient (Floor's)
    np.testing.assert_allclose(grad, upstream * derivative, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("op_type", sorted(BINARY))
def test_binary_numpy_matches_finite_differences(numpy_module, decls, op_type):
    """Each entry of each (broadcast) input perturbed in turn: checks the reduction too."""
    decl, stem = decls[op_type]
    case, module = BINARY[op_type], numpy_module(stem)
    arrays = [
        d.sample(rng_for(op_type, "fd", n), s)
        for n, (d, s) in enumerate(zip(case.domains, [(3, 1), (1, 4)]))
    ]
    upstream = rng_for(op_type, "fd-upstream").uniform(-2.0, 2.0, (3, 4))
    forward = getattr(module, decl.func_name)

    def loss(*inputs):
        return np.sum(upstream * forward(*inputs))

    grads = getattr(module, f"{decl.func_name}_grad")(upstream, *arrays)
    h = 1e-6
    for n, (array, grad) in enumerate(zip(arrays, grads)):
        grad = np.zeros_like(array) if grad is None else grad  # None: no gradient
        expected = np.zeros_like(array)
        for index in np.ndindex(array.shape):
            plus, minus = [a.copy() for a in arrays], [a.copy() for a in arrays]
            plus[n][index] += h
            minus[n][index] -= h
            expected[index] = (loss(*plus) - loss(*minus)) / (2 * h)
        np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-8, err_msg=f"input {n}")
