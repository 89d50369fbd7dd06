"""The PyTorch target: generated `torch.autograd.Function`s under autograd, `gradcheck` and
`gradgradcheck`, `ctx.needs_input_grad`, PyTorch's complex convention, the runtime helpers
against numpy's, and the library against finite differences and against PyTorch's own
hand-written derivatives (`symgrad diff --against torch`, CLI subprocesses)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.special
from conftest import ROOT, import_altered, numpy_runtime
from verify_support import run_symgrad

from symgrad.verify.verdict import BOTH_RIGHT, REFERENCE_WRONG, UNDECIDED

RNG = np.random.default_rng(0)


def _close(a, b, tol=1e-10):
    array = lambda t: np.asarray(t.detach() if hasattr(t, "detach") else t)
    np.testing.assert_allclose(array(a), array(b), rtol=tol, atol=tol)


def _leaves(torch, *arrays):
    return [torch.tensor(a, requires_grad=True) for a in arrays]


def test_matmul_gradient_is_the_derived_one(torch, torch_module):
    mm = torch_module("matmul")
    a, b = _leaves(torch, RNG.normal(size=(3, 4)), RNG.normal(size=(5, 4)))
    upstream = torch.tensor(RNG.normal(size=(3, 5)))
    grads = torch.autograd.grad(mm.matmul(a, b, transpose_b=True), (a, b), upstream)
    _close(grads[0], upstream @ b.detach())  # by hand: d(a b^T)/da
    _close(grads[1], upstream.T @ a.detach())
    derived = mm.matmul_vjp(upstream, a.detach(), b.detach(), transpose_b=True)
    _close(grads[0], derived[0])


def test_function_calls_the_derived_vjp_not_autograd(torch, derived, tmp_path):
    """A wrong `<op>_vjp` must show in autograd: the Function is not PyTorch's own derivative."""
    wrong = "    return 0 * a + 7.0, 0 * b\n"
    mm = import_altered(derived[0] / "matmul_torch.py", "    return grad_a, grad_b\n", wrong, tmp_path)
    a, b = _leaves(torch, np.ones((2, 2)), np.ones((2, 2)))
    (got,) = torch.autograd.grad(mm.matmul(a, b).sum(), (a,))
    _close(got, np.full((2, 2), 7.0))


def test_backward_returns_none_where_autograd_asks_for_no_gradient(torch, torch_module):
    """`ctx.needs_input_grad` honoured: None for the attributes and for inputs not asked for."""
    mm = torch_module("matmul")
    a, b = torch.tensor(RNG.normal(size=(3, 4))), torch.tensor(RNG.normal(size=(4, 2)))
    grad = torch.tensor(RNG.normal(size=(3, 2)))
    attrs = {"transpose_a": False, "transpose_b": False}  # passed to `apply` first, as one
    # as setup_context leaves it: MatMul's gradient reads both operands, so no input is a stand-in
    ctx = SimpleNamespace(attrs=attrs, saved_tensors=(a, b), needs_input_grad=(False, False, True), standins={})
    function = mm._matmul_autograd.function
    assert issubclass(function, torch.autograd.Function) and function.__name__ == "_MatMulFunction"
    got = function.backward(ctx, grad)
    assert got[:2] == (None, None)
    _close(got[2], a.T @ grad)
    b.requires_grad_(True)
    assert torch.autograd.grad(mm.matmul(a, b).sum(), b)[0].shape == (4, 2)


@pytest.mark.parametrize("stem, op, shapes, attrs", [
    ("composed", "layer_norm", [(2, 5), (5,), (5,)], {}),
    ("nn", "softmax", [(3, 4)], {}),
    ("conv", "conv2d", [(1, 5, 4, 2), (2, 2, 2, 3)], {"strides": [1, 2, 1, 1], "padding": "SAME"}),
    ("binary", "xlogy", [(4,), (4,)], {}),
    ("reductions", "cumsum", [(3, 4)], {"axis": 0, "exclusive": True, "reverse": True}),
])
def test_gradcheck_and_gradgradcheck(torch, torch_module, stem, op, shapes, attrs):
    """PyTorch's own checks of a Function: its backward against finite differences, and the
    backward differentiated again (double backward) against finite differences of it."""
    function = getattr(torch_module(stem), op)
    inputs = _leaves(torch, *(RNG.uniform(0.5, 2.0, size=s) for s in shapes))
    assert torch.autograd.gradcheck(lambda *x: function(*x, **attrs), inputs)
    assert torch.autograd.gradgradcheck(lambda *x: function(*x, **attrs), inputs)


@pytest.mark.parametrize("grad_mode", ["no input requires grad", "under no_grad", "requires grad"])
def test_compiled_with_fullgraph_for_inference_too(torch, torch_module, grad_mode):
    """torch.compile(fullgraph=True) of generated ops (MatMul; LayerNorm, with stages) where no
    input requires grad, as in inference: dynamo calls a Function's forward with a ctx first
    unless its arguments are as many as the forward's parameters, so the Function's forward
    has one per input (it failed with TypeError: 'Function' object is not iterable)."""
    import contextlib

    matmul, composed = torch_module("matmul"), torch_module("composed")
    grad = grad_mode == "requires grad"
    x = torch.tensor(RNG.normal(size=(3, 5)), requires_grad=grad)
    w, gamma, beta = (torch.tensor(RNG.normal(size=shape)) for shape in ((5, 4), (4,), (4,)))
    model = lambda x: composed.layer_norm(matmul.matmul(x, w), gamma, beta).sum()
    reference = lambda x: torch.nn.functional.layer_norm(x @ w, (4,), gamma, beta).sum()
    torch._dynamo.reset()
    with torch.no_grad() if grad_mode == "under no_grad" else contextlib.nullcontext():
        got = torch.compile(model, fullgraph=True)(x)
    _close(got.detach(), reference(x).detach(), 1e-10)


def test_second_order_through_the_derived_gradient(torch, torch_module):
    """The Hessian of a composed op with stages (LayerNorm) through its derived backward equals
    PyTorch's second derivative of the formula itself, and is not silently zero."""
    composed = torch_module("composed")
    gamma, beta = torch.tensor(RNG.normal(size=5)), torch.tensor(RNG.normal(size=5))
    weights = torch.tensor(RNG.normal(size=(2, 5)))
    x = torch.tensor(RNG.normal(size=(2, 5)))

    def hessian(f):
        return torch.autograd.functional.hessian(lambda x: (f(x, gamma, beta) * weights).sum(), x)

    # one epsilon for both: the wrapper's default is F.layer_norm's (1e-5), the forward's TensorFlow's
    derived = hessian(lambda *a: composed.layer_norm(*a, epsilon=1e-3))
    _close(derived, hessian(lambda *a: composed.layer_norm_forward(*a, epsilon=1e-3)), 1e-8)
    assert derived.abs().max() > 0.1


def test_second_order_of_a_select_is_finite(torch, torch_module):
    """The selects of the derived gradient are guarded (double where): PyTorch's second
    derivative of Xlogy at x = 0 is finite where the untaken log(y) is NaN."""
    binary = torch_module("binary")
    x = torch.tensor([0.0, 0.0, 1.5], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([-1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad(binary.xlogy(x, y).sum(), x, create_graph=True)  # log(y), 0 at x = 0
    (second,) = torch.autograd.grad(first.sum(), y)
    _close(second, [0.0, 0.0, 1 / 3])  # d/dy log(y) where x != 0: no NaN from log(-1)


def test_complex_gradients_follow_pytorch_convention(torch, torch_module):
    """PyTorch's complex gradients are TensorFlow's (and the derived ones'): for a holomorphic
    op, `grad * conj(f'(z))`, as `torch.exp`'s own."""
    unary = torch_module("unary")
    z = torch.tensor([0.3 + 0.7j, -1.2 + 0.4j], requires_grad=True)
    ct = torch.tensor([1.0 + 0.5j, -0.25 + 2.0j])
    (got,) = torch.autograd.grad(unary.exp(z), z, ct)
    (own,) = torch.autograd.grad(torch.exp(z), z, ct)
    _close(got, own)
    _close(got, ct * np.conj(np.exp(z.detach().numpy())))


# --- runtime helpers, against the numpy modules' (which the library checks against TensorFlow) ---


def _runtime(torch):
    from symgrad.backends.torch import runtime

    return runtime


def test_gather_scatter_and_reductions_against_numpy(torch, numpy_module):
    runtime, reference = _runtime(torch), numpy_module("gather")
    x = RNG.normal(size=(3, 6, 2))
    positions = np.array([[0, 5, -1], [7, 2, 2]])  # -1 and 7 outside the axis
    for fill in (0, -np.inf):
        _close(runtime._gather(torch.tensor(x), torch.tensor(positions), -2, fill), reference._gather(x, positions, -2, fill))
    values = RNG.normal(size=(3, 2, 3, 2))
    _close(runtime._scatter_add(torch.tensor(values), torch.tensor(positions), 1, 6), reference._scatter_add(values, positions, 1, 6))
    _close(runtime._prod(torch.tensor(x), (0, 2), True), np.prod(x, axis=(0, 2), keepdims=True))
    _close(runtime._over(torch.sum, torch.tensor(x), ()), x)  # torch.sum over () is over every axis
    orders = np.array([0.0, 1.0, 2.0, 1.0])
    _close(runtime._polygamma(torch.tensor(orders), torch.tensor([0.5, 1.5, 2.5, 3.5], dtype=torch.float64)),
           [scipy.special.polygamma(int(n), v) for n, v in zip(orders, [0.5, 1.5, 2.5, 3.5])],
           1e-8)  # torch.special.polygamma(1, 1.5) is 4.6e-10 off scipy's, relatively


@pytest.mark.parametrize("strides, dilations, pads", [((1, 1), (1, 1), (0, 0)), ((2, 1), (1, 2), (1, 2)), ((2, 2), (1, 1), (-1, 1))])
def test_convolution_helpers_against_numpy(torch, numpy_module, strides, dilations, pads):
    runtime, reference = _runtime(torch), numpy_runtime(numpy_module("conv"))
    x, f = RNG.normal(size=(2, 9, 8, 3)), RNG.normal(size=(3, 2, 3, 4))
    counts = [(h + 2 * p - ((k - 1) * d + 1)) // s + 1 for h, k, s, d, p in zip((9, 8), (3, 2), strides, dilations, pads)]
    geometry = dict(strides=strides, dilations=dilations, pads=pads)
    tx, tf_ = torch.tensor(x), torch.tensor(f)
    y = runtime._conv(tx, tf_, sizes=counts, **geometry)
    _close(y, reference._conv(x, f, sizes=counts, **geometry))
    g = RNG.normal(size=tuple(y.shape))
    _close(runtime._conv_backprop_input(torch.tensor(g), tf_, sizes=(9, 8), **geometry),
           reference._conv_backprop_input(g, f, sizes=(9, 8), **geometry))
    _close(runtime._conv_backprop_filter(tx, torch.tensor(g), sizes=(3, 2), **geometry),
           reference._conv_backprop_filter(x, g, sizes=(3, 2), **geometry))
    depthwise = RNG.normal(size=(3, 2, 3, 2))
    yd = runtime._depthwise_conv(tx, torch.tensor(depthwise), sizes=counts, **geometry)
    _close(yd, reference._depthwise_conv(x, depthwise, sizes=counts, **geometry))
    gd = RNG.normal(size=tuple(yd.shape))
    _close(runtime._depthwise_conv_backprop_input(torch.tensor(gd), torch.tensor(depthwise), sizes=(9, 8), **geometry),
           reference._depthwise_conv_backprop_input(gd, depthwise, sizes=(9, 8), **geometry))
    _close(runtime._depthwise_conv_backprop_filter(tx, torch.tensor(gd), sizes=(3, 2), **geometry),
           reference._depthwise_conv_backprop_filter(x, gd, sizes=(3, 2), **geometry))


def test_max_pool_backprop_against_numpy(torch, numpy_module):
    runtime, reference = _runtime(torch), numpy_runtime(numpy_module("conv"))
    x = np.round(RNG.normal(size=(2, 7, 6, 3)), 1)  # ties inside windows
    geometry = dict(window=(3, 2), strides=(2, 2), pads=(1, 0), sizes=(7, 6))
    spans = reference._window_span(x, (1, 0), reference._conv_spans((2, 2), (1, 1), (4, 3), (3, 2)), fill=-np.inf)
    y = np.empty((2, 4, 3, 3))  # each window's maximum, by a loop over the windows
    for u in range(4):
        for v in range(3):
            y[:, u, v] = spans[:, 2 * u : 2 * u + 3, 2 * v : 2 * v + 2].max(axis=(1, 2))
    g = RNG.normal(size=y.shape)
    got = runtime._max_pool_backprop(torch.tensor(x), torch.tensor(y), torch.tensor(g), **geometry)
    _close(got, reference._max_pool_backprop(x, y, g, **geometry))


# --- the library through the CLI: finite differences (check) and PyTorch's own derivatives
# (diff --against torch) ---

# ops whose lowering covers each kind of array operation the printer emits (matmuls,
# reductions, scans, gathers and scatter-adds, convolutions, pooling, list inputs and outputs,
# stages, complex, selects, an order given as a tensor): the default run; `-m exhaustive` the library
SPREAD = ("MatMul", "BatchMatMulV2", "Softmax", "LayerNorm", "ScaledDotProductAttention", "Conv2D",
          "DepthwiseConv2dNative", "MaxPool", "GatherV2", "Cumprod", "ConcatV2", "Unpack", "Xlogy",
          "Exp", "Prod", "MirrorPad", "Polygamma", "BesselK0")
# ops the PyTorch module leaves out: torch.special has no such function
NOT_IN_TORCH = {"Dawsn", "Expint", "FresnelCos", "FresnelSin", "Spence"}


def _against_torch(derived, folder, *args):
    out = folder / "diff.json"
    result = run_symgrad("diff", "ops", "--against", "torch", "--target", "torch", "--generated", str(derived[0]),
                         "-j", "2", "--json", str(out), *args, cwd=ROOT)
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    return result, json.loads(out.read_text())


def _check_against_torch(report):
    """Every row matches PyTorch's gradient, or differs where finite differences say PyTorch's
    is wrong or cannot tell the two apart (ties, kinks); never where they side with PyTorch's.
    Inputs PyTorch's function refuses (complex xlogy) are skipped cases, not rows."""
    rows = report["results"]
    for r in rows:
        where = (r["op"], r["variant"], r["dtype"], r["message"][:200], r["verdict"])
        if r["status"] == "mismatch":
            assert r["verdict"] in (REFERENCE_WRONG, BOTH_RIGHT, UNDECIDED), where
        elif r["status"] in ("no-reference", "unavailable"):
            assert r["op"] in NOT_IN_TORCH or "rejects the inputs" in r["message"], where
        else:
            assert r["status"] == "match", where
    return rows


@pytest.fixture(scope="module")
def spread_against_torch(torch, derived, tmp_path_factory):
    args = [a for op in SPREAD for a in ("--op", op)]
    return _against_torch(derived, tmp_path_factory.mktemp("torch_spread"), *args, "--sample", "1")


def test_spread_against_pytorch(spread_against_torch):
    """The derived gradient through the Function against PyTorch's own function's derivative
    (its autograd of the generated formula where it has none), float32 to complex128."""
    result, report = spread_against_torch
    rows = _check_against_torch(report)
    assert {r["op"] for r in rows} == set(SPREAD)
    assert {r["dtype"] for r in rows if r["status"] == "match"} == {"float32", "float64", "complex64", "complex128"}
    from symgrad.backends.torch.functions import FUNCTIONS

    # compared with PyTorch's own functions (torch.matmul, torch.softmax, F.conv2d, ...)
    assert set(SPREAD) - set(FUNCTIONS) == {"Polygamma", "BesselK0"}
    # PyTorch's own xlogy's gradient in y is NaN at x = 0, y = 0 (finite differences side
    # with the derived one, 0)
    wrong = {r["op"]: r["message"] for r in rows if r["verdict"] == REFERENCE_WRONG}
    assert "PyTorch's own Xlogy" in wrong["Xlogy"]


def test_bessel_functions_pytorch_does_not_differentiate_are_differentiated(torch, torch_module):
    """torch.special's J, Y and K Bessel functions have no derivative: their outputs do not
    require grad, so autograd would read them as constants (a gradient silently 0). The
    generated code calls them through `_bessel`, whose derivative is the recurrence."""
    x = torch.tensor([0.7, 2.3], dtype=torch.float64, requires_grad=True)
    assert not torch.special.modified_bessel_k0(x).requires_grad  # PyTorch 2.13's gap
    special = torch_module("special")
    (first,) = torch.autograd.grad(special.bessel_k0_forward(x).sum(), x, create_graph=True)
    _close(first, -scipy.special.k1(x.detach().numpy()))
    (second,) = torch.autograd.grad(first.sum(), x)
    _close(second, scipy.special.kvp(0, x.detach().numpy(), 2), 1e-9)


NOT_TWICE = {}  # op -> the case labels where PyTorch's second order may disagree, and why: none
SECOND_ORDER_KNOWN = {  # -m exhaustive: the library's second order
    "Zeta": "PyTorch has no derivative of torch.special.zeta: its double backward raises, not zero",
}
# what gradgradcheck above does not reach: pooling, lists, complex, scans, a Bessel function
# torch.special does not differentiate (BesselJ1: through `_bessel`); -m exhaustive: the library
TWICE = ("MaxPool", "Unpack", "Exp", "Cumprod", "BesselJ1")


def test_second_order_of_the_spread_against_finite_differences(torch, derived, tmp_path):
    """`symgrad check --order 2 --target torch`: PyTorch's double backward through the derived
    gradient agrees with finite differences of the derived gradient, float64 and complex128."""
    out = tmp_path / "second.json"
    ops = [a for op in TWICE for a in ("--op", op)]
    result = run_symgrad("check", "ops", "--order", "2", "--target", "torch", "--generated", str(derived[0]),
                         *ops, "--sample", "1", "-j", "2", "--json", str(out), cwd=ROOT)
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    rows = json.loads(out.read_text())["results"]
    failing = [r for r in rows if r["status"] != "match" or not r["cases"]]
    assert {r["op"] for r in failing} <= set(NOT_TWICE), failing[:3]
    for r in failing:
        assert all(case.startswith(NOT_TWICE[r["op"]]) for case in r["detail"]["failing_cases"]), r
    assert {r["op"] for r in rows} == set(TWICE)
    assert {r["dtype"] for r in rows} == {"float64", "complex128"}


@pytest.mark.exhaustive
def test_library_second_order_against_finite_differences(torch, derived, tmp_path):
    """`symgrad check --order 2 --target torch` over the library's first variants."""
    out = tmp_path / "second.json"
    result = run_symgrad("check", "ops", "--order", "2", "--target", "torch", "--generated", str(derived[0]),
                         "--sample", "1", "-j", "2", "--json", str(out), cwd=ROOT)
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    rows = json.loads(out.read_text())["results"]
    failing = [(r["op"], r["dtype"], r["status"], r["message"][:150]) for r in rows
               if r["status"] not in ("match", "unavailable") and r["op"] not in SECOND_ORDER_KNOWN]
    assert not failing, failing[:5]


@pytest.mark.exhaustive
def test_library_against_pytorch(torch, derived, tmp_path_factory):
    """Every op in ops/ (its first variant), as above."""
    result, report = _against_torch(derived, tmp_path_factory.mktemp("torch_library"), "--sample", "1")
    rows = _check_against_torch(report)
    assert {r["op"] for r in rows if r["status"] == "unavailable"} <= NOT_IN_TORCH
    assert len({r["op"] for r in rows if r["status"] in ("match", "mismatch")}) >= 165  # 168 of 173


@pytest.mark.exhaustive
def test_library_against_finite_differences(torch, derived, tmp_path):
    """`symgrad check --target torch`: every op's every variant, float64 and complex128."""
    out = tmp_path / "check.json"
    result = run_symgrad("check", "ops", "--target", "torch", "--generated", str(derived[0]), "-j", "2",
                         "--json", str(out), cwd=ROOT)
    assert out.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    rows = json.loads(out.read_text())["results"]
    from test_library import NONFINITE_AT_EXTREMES  # overflow near exp's range, every target

    bad = [(r["op"], r["variant"], r["dtype"], r["message"][:200]) for r in rows
           if r["status"] not in ("match", "unavailable")
           and not (r["status"] == "non-finite" and r["op"] in NONFINITE_AT_EXTREMES)]
    assert not bad, bad[:5]
    assert {r["op"] for r in rows if r["status"] == "unavailable"} == NOT_IN_TORCH


# ops `gradcheck` cannot judge at their first case, with why
GRADCHECK_KNOWN = {  # a difference quotient in an input whose gradient is stopped is not 0
    "Polygamma": "its order is an integer (NaN between integers), as TensorFlow's PolygammaGrad",
    "Zeta": "no gradient in x, as TensorFlow's ZetaGrad (and torch.special.zeta has no derivative)",
    **dict.fromkeys(("ArgMax", "ArgMin"), "an integer output only: gradcheck has no floating output to difference"),
    **dict.fromkeys(
        ("QuantizeAndDequantize", "QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3"),
        "the straight-through estimator: gradcheck differences the rounding (0), the declared gradient is 1 "
        "(symgrad check differences the forward with the rounding held)",
    ),
}


def _gradchecks(torch, op, variant, case) -> tuple[bool, bool]:
    """(gradcheck, gradgradcheck) of the op's generated Function at `case`, float64, over the
    inputs with a gradient (the others fixed), the floating outputs compared."""
    from symgrad.backends.torch.verify import _tensors
    from symgrad.verify.sources import _input_args, accepted_kwargs

    fn = op.function("torch", "")
    attrs = {k: variant.attrs[k] for k in accepted_kwargs(fn, variant.attrs)}
    tensors, free = _tensors(variant, case.inputs)

    def function(*given):
        full = list(tensors)
        for k, x in zip(free, given):
            full[k] = x
        outputs = fn(*_input_args(variant, full), **attrs)
        outputs = outputs if isinstance(outputs, (list, tuple)) else (outputs,)
        return tuple(o for o in outputs if o.is_floating_point() or o.is_complex())

    free_tensors = tuple(tensors[k] for k in free)
    # fast mode: a random projection of the Jacobian (a Conv3D case's whole one for
    # gradgradcheck does not fit in memory), as PyTorch recommends for larger inputs
    first = torch.autograd.gradcheck(function, free_tensors, raise_exception=False, fast_mode=True)
    second = torch.autograd.gradgradcheck(function, free_tensors, raise_exception=False, fast_mode=True)
    return first, second


@pytest.mark.exhaustive
def test_library_gradcheck_and_gradgradcheck(torch, derived):
    """PyTorch's own `gradcheck` and `gradgradcheck` of every op's generated Function in the
    library (its first variant, float64, at its first case of random values)."""
    from symgrad.backends.torch import unavailable_reason
    from symgrad.verify.ops_under_test import load_derived
    from symgrad.verify.cases import case_groups

    failing, checked = {}, 0
    for op in load_derived([ROOT / "ops"], generated=derived[0]):
        if unavailable_reason(op) or op.name in GRADCHECK_KNOWN:
            continue
        for variant, _, cases in case_groups(op, ("float64",), quick=True, sample=1):
            first, second = _gradchecks(torch, op, variant, cases[0])
            checked += 1
            if not (first and second):
                failing[op.name] = ("gradcheck" if not first else "gradgradcheck", cases[0].label)
    assert failing == {}
    assert checked >= 165


def test_a_list_input_and_a_list_output_in_one_function(torch, torch_module):
    """IdentityN: the Function takes the list's tensors and returns one output each, a view
    where the output is the input (autograd cannot save an input returned as it is)."""
    identity_n = torch_module("list_ops").identity_n
    a = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([[3.0]], dtype=torch.float64, requires_grad=True)
    out = identity_n(a, b)
    assert isinstance(out, list) and [o.shape for o in out] == [a.shape, b.shape]
    (out[0] * torch.tensor([5.0, 7.0], dtype=torch.float64)).sum().backward()
    assert a.grad.tolist() == [5.0, 7.0] and b.grad.tolist() == [[0.0]]
