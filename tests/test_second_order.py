"""Second order in numpy (`symgrad.second_order`): `<op>_grad_grad`, derived by the engine from
the op's own gradient, against central differences of `<op>_grad` (itself checked against
TensorFlow's and finite differences elsewhere)."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from symgrad import elementwise, stop_gradient
from symgrad.verify.cases import for_dtype, make_cases
from symgrad.verify.check import stopped_inputs
from symgrad.instantiate import instantiate
from symgrad.derive import derive, grad_names
from symgrad.verify.ops_under_test import load_derived
from symgrad.verify.cases import bound_forward, sampled
from symgrad.verify.ops_under_test import variants_of
from symgrad.second_order import derive_second_order, gradient_op

from conftest import OPS

# op type -> the op file's stem: one of each kind of expression and index map
REPRESENTATIVE = {
    "Tanh": "unary", "Softplus": "unary", "Abs": "unary", "Pow": "binary", "FloorMod": "binary", "RealDiv": "binary",
    "MatMul": "matmul", "BatchMatMulV2": "batch_matmul", "Pad": "array", "Tile": "array_more",
    "GatherV2": "gather", "UnsortedSegmentSum": "gather", "Sum": "reductions", "Max": "reductions",
    "BiasGelu": "composed", "LayerNorm": "composed", "ScaledDotProductAttention": "composed",
    "StridedSlice": "array", "BiasAddGrad": "nn", "Conv2D": "conv", "DepthwiseConv2dNative": "conv",
    "ExtractImagePatches": "conv", "Conv3D": "conv",
    "Softmax": "nn", "SoftmaxCrossEntropyWithLogits": "nn", "CumulativeLogsumexp": "reductions", "SpaceToDepth": "space", "MatrixDiagPart": "diagonals", "Lgamma": "special", "Zeta": "special",
}


def second_order_error(op, variant, case, rng) -> float:
    """The largest error of `<op>_grad_grad` against central differences of
    sum_k <v_k, <op>_grad(...)_k> over the upstream gradients and inputs, relative to 1 + |d|."""
    module, name = op.module("numpy"), op.decl.func_name
    first, second = getattr(module, f"{name}_grad"), getattr(module, f"{name}_grad_grad")
    ups, xs, attrs = list(case.upstream), list(case.inputs), variant.attrs
    cotangents = [None if g is None else rng.normal(size=np.shape(g)) for g in first(*ups, *xs, **attrs)]

    def loss(args):
        grads = first(*args, **attrs)
        return sum(np.sum(v * g) for v, g in zip(cotangents, grads) if v is not None)

    unused = [np.zeros(np.shape(x)) for x in xs]  # where there is no gradient, nothing reads it
    got = second(*[u if v is None else v for v, u in zip(cotangents, unused)], *ups, *xs, **attrs)
    args, worst = ups + xs, 0.0
    names = [None] * len(ups) + list(variant.inputs)
    for n, (a, g) in enumerate(zip(args, got)):
        if np.issubdtype(np.asarray(a).dtype, np.integer) or names[n] in stopped_inputs(variant):
            assert g is None  # positions, and Zeta's x (declared without a gradient)
            continue
        g = np.zeros(np.shape(a)) if g is None else np.broadcast_to(g, np.shape(a))
        for direction in _directions(np.shape(a), rng):
            step = 1e-6 * max(1.0, float(np.max(np.abs(a), initial=0.0)))
            plus, minus = [x.copy() for x in args], [x.copy() for x in args]
            plus[n] = plus[n] + step * direction
            minus[n] = minus[n] - step * direction
            d = (loss(plus) - loss(minus)) / (2 * step)
            worst = max(worst, abs(float(np.sum(g * direction)) - d) / (1 + abs(d)))
    return worst


def _directions(shape, rng, largest=64):
    """Each unit vector of an input of at most `largest` entries (every element checked),
    else three random directions (a convolution's input: a difference quotient per element
    would take minutes)."""
    size = int(np.prod(shape, dtype=int))
    if size <= largest:
        for k in range(size):
            unit = np.zeros(size)
            unit[k] = 1.0
            yield unit.reshape(shape)
    else:
        for _ in range(3):
            yield rng.normal(size=shape)


@pytest.fixture(scope="module")
def library(derived):
    return {op.name: op for op in load_derived([OPS], derived[0])}


@pytest.mark.parametrize("op_type", sorted(REPRESENTATIVE))
def test_grad_grad_matches_differences_of_the_gradient(library, op_type):
    op, rng = library[op_type], np.random.default_rng(7)
    for variant in sampled(variants_of(op), 2):
        forward = bound_forward(variant)
        # random values and a batch-axis case: away from kinks, where differences judge
        cases = for_dtype(make_cases(variant, forward, False), np.dtype("float64"), forward, "second order")
        # every shapes case: a broadcast input's gradient is summed, its second order too
        chosen = [c for c in cases if c.label.startswith("random values")][:1]
        chosen += [c for c in cases if c.label.startswith("shapes")]
        assert chosen, variant.label
        for case in chosen:
            assert second_order_error(op, variant, case, rng) < 1e-5, (variant.label, case.label)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [-1, -2])
def test_cumprod_second_order_is_exact_at_zeros(library, exclusive, reverse, axis):
    """A cumulative product's second order where entries are 0, once and repeated: its
    gradient is multilinear in the entries, so central differences of `cumprod_grad` are
    exact but for rounding; a gradient that read zeros as ones (and divided) would differ."""
    module, rng = library["Cumprod"].module("numpy"), np.random.default_rng(11)
    x = rng.normal(size=(3, 6, 2))
    x[0, 1], x[0, 3:5], x[1, 5], x[2, 0] = 0.0, 0.0, 0.0, 0.0  # along axis -2: one zero, two, last, first
    x = np.moveaxis(x, 1, axis) if axis == -1 else x
    grad, cotangent, direction = (rng.normal(size=x.shape) for _ in range(3))
    attrs = {"axis": axis, "exclusive": exclusive, "reverse": reverse}
    of_grad, of_x = module.cumprod_grad_grad(cotangent, grad, x, **attrs)
    gradient = lambda g, v: np.sum(cotangent * module.cumprod_grad(g, v, **attrs)[0])
    step = 1e-4  # a polynomial in the step: the differences' error is O(step**2)
    by_x = (gradient(grad, x + step * direction) - gradient(grad, x - step * direction)) / (2 * step)
    by_grad = (gradient(grad + step * direction, x) - gradient(grad - step * direction, x)) / (2 * step)
    np.testing.assert_allclose(np.sum(of_x * direction), by_x, rtol=1e-6)
    np.testing.assert_allclose(np.sum(of_grad * direction), by_grad, rtol=1e-6)


def test_every_op_without_a_second_order_is_listed(library):
    missing = {name for name, op in library.items() if not hasattr(op.module("numpy"), f"{op.decl.func_name}_grad_grad")}
    assert missing == set(NOT_DERIVED_AGAIN), sorted(missing ^ set(NOT_DERIVED_AGAIN))


NOT_DERIVED_AGAIN = {  # op type -> why it has no <op>_grad_grad yet (an op with no gradient at
    # all, Floor's, has one returning None for each: test_second_order_check.py)
    "IdentityN": "a list input and a list output: its gradient op would take two lists of varying length",
    **dict.fromkeys(
        ("SegmentProd", "UnsortedSegmentProd"),
        "the product of the others is a branch per count of zeros in the segment, written so that autodiff "
        "of it is exact (JAX's and PyTorch's double backward: test_torch_target); symgrad's derivative of "
        "those branches, each reading sums over the segment in its condition, does not lower",
    ),
}


# --- the gradient op, declared ---------------------------------------------------------------------


def test_gradient_op_reads_upstream_and_inputs_and_outputs_each_gradient():
    decl = elementwise("Scaled", attrs={"c": float}, defaults={"c": 2.0}, outputs=("z",))(lambda x, y, c: c * x * sp.sin(y))
    first = derive(instantiate(decl, ()))
    g = gradient_op(first)
    assert [t.name for t in g.inputs] == ["grad", "x", "y"]
    assert [o.name for o in g.outputs] == ["vjp_x", "vjp_y"]
    assert grad_names(g) == ("grad_vjp_x", "grad_vjp_y")  # an input is named `grad`
    second = derive_second_order(first)
    x, y, grad = (sp.Symbol(n, real=True) for n in ("x", "y", "grad"))
    gx, gy = (sp.Symbol(f"grad_vjp_{n}", real=True) for n in "xy")
    c = sp.Symbol("c", real=True)
    second = {n: v.subs(sp.Symbol("vjp_x", real=True), grad * c * sp.sin(y)) for n, v in second.vjp.items()}  # its output reused
    assert sp.simplify(second["grad"] - (gx * c * sp.sin(y) + gy * c * x * sp.cos(y))) == 0
    assert sp.simplify(second["y"] - grad * (gx * c * sp.cos(y) - gy * c * x * sp.sin(y))) == 0


def test_point_masses_are_zero_and_stop_gradient_holds_at_second_order():
    abs_first = derive(instantiate(elementwise("A")(lambda x: sp.Abs(x)), ()))
    assert derive_second_order(abs_first).vjp["x"] is None  # d sign(x)/dx: no DiracDelta
    # FloorMod: grad_x = grad, grad_y = -grad * floor(x / y), the floor stopped again
    mod = derive(instantiate(elementwise("M", outputs=("z",))(lambda x, y: x - y * stop_gradient(sp.floor(x / y))), ()))
    second = derive_second_order(mod)
    assert second.vjp["x"] is None and second.vjp["y"] is None
    assert second.vjp["grad"].has(sp.floor)
