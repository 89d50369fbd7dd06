"""What a generated PyTorch op costs beside autograd of its own formula: the bytes it saves
for backward (only what its derived backward reads), the gradients it computes (only those
autograd asks for), and whether `torch.compile(fullgraph=True)` and `torch.func`'s
transforms take it as it is. Each is checked on named ops here, and over the whole library
under `-m exhaustive`."""

from __future__ import annotations

import pytest

from conftest import ROOT

# ops of the library that save more for backward than autograd saves of their formula, and why
SAVES_MORE = {
    **dict.fromkeys(("Relu", "Relu6", "LeakyRelu", "ReluGrad", "Relu6Grad", "LeakyReluGrad", "Maximum", "Minimum"),
                    "the backward reads x where autograd of the formula's select keeps only its boolean mask"),
    "SquaredDifference": "both inputs are saved where autograd of (x - y)**2 keeps their difference",
    **dict.fromkeys(("SpaceToDepth", "DepthToSpace", "BatchToSpace", "BatchToSpaceND"),
                    "the backward reads the input's split reshape for its sizes alone"),
    **dict.fromkeys(("MaxPool3D", "MaxPoolGrad", "MaxPoolGradV2", "MaxPoolGradGrad", "MaxPool3DGrad",
                     "MaxPool3DGradGrad"), "max-pooling's backprop reads the input and the output"),
    **dict.fromkeys(("AddN", "Pack", "IdentityN"), "a list input is saved whole"),
    **dict.fromkeys(("Gather", "GatherV2", "GatherNd"), "the positions are saved (4 bytes in the probe)"),
    "BatchNormWithGlobalNormalization": "the input and the moments are saved where autograd keeps the products",
    "MlpBlock": "the forward's stage and the input are both saved",
    "Polygamma": "the order is saved",
    "Complex": "the backward reads the dtype of the parts (complex64 or complex128)",
}


@pytest.fixture(scope="session")
def library(derived, torch):
    from symgrad.backends.torch.costs import library_calls

    return {call.op.name: call for call in library_calls(derived[0], ROOT / "ops")}


def _grads(torch, call, loss):
    return torch.autograd.grad(loss, [call.tensors[k] for k in call.free], allow_unused=True)


def _count_calls(torch, run, names) -> dict:
    """How many times each aten op of `names` runs while `run()` does."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counts = dict.fromkeys(names, 0)

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name in counts:
                counts[name] += 1
            return func(*args, **(kwargs or {}))

    with Count():
        run()
    return counts


def test_a_gradient_nobody_asked_for_is_never_computed(torch, torch_module):
    """MatMul's backward with only b requiring a gradient runs one matrix product, not two;
    with both, two; and the gradient is the derived one either way."""
    mm = torch_module("matmul")
    a = torch.randn(3, 4, dtype=torch.float64)
    b = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    product = mm.matmul(a, b)
    counts = _count_calls(torch, lambda: product.sum().backward(), ["mm"])
    assert counts == {"mm": 1}
    torch.testing.assert_close(b.grad, a.T @ torch.ones(3, 5, dtype=torch.float64))
    a.requires_grad_(True)
    product = mm.matmul(a, b)
    counts = _count_calls(torch, lambda: product.sum().backward(), ["mm"])
    assert counts == {"mm": 2}


def test_the_vjp_computes_only_the_gradients_it_is_asked_for(torch, torch_module):
    """`needs_grad` reaches the gradient's code: None where not asked for, the same value where asked."""
    attention = torch_module("composed")
    shapes = {"q": (2, 3, 4), "k": (2, 5, 4), "v": (2, 5, 4), "mask": (3, 5)}
    q, k, v, mask = (torch.randn(s, dtype=torch.float64) for s in shapes.values())
    output = attention.scaled_dot_product_attention_forward(q, k, v, mask)
    grad = torch.randn_like(output)
    every = attention.scaled_dot_product_attention_vjp(grad, q, k, v, mask)
    some = attention.scaled_dot_product_attention_vjp(grad, q, k, v, mask, needs_grad=(False, True, False, False))
    assert some[0] is None and some[2] is None and some[3] is None
    torch.testing.assert_close(some[1], every[1])


def test_an_op_saves_only_what_its_backward_reads(torch, torch_module):
    """AddV2 and BiasAdd read their inputs' shapes alone: nothing is saved, as autograd saves
    nothing of `x + y`; MatMul saves both operands; the gradients are right all the same."""
    from symgrad.backends.torch.costs import saved_bytes

    binary, nn = torch_module("binary"), torch_module("nn")
    x = torch.randn(8, 16, dtype=torch.float64, requires_grad=True)
    y = torch.randn(16, dtype=torch.float64, requires_grad=True)
    for op in (binary.add, nn.bias_add):
        saved, out = saved_bytes(lambda: op(x, y))
        assert saved == 0, op.__name__
        gx, gy = torch.autograd.grad((out * 3).sum(), (x, y))
        torch.testing.assert_close(gy, torch.full((16,), 24.0, dtype=torch.float64))
        torch.testing.assert_close(gx, torch.full((8, 16), 3.0, dtype=torch.float64))
    saved, _ = saved_bytes(lambda: torch_module("matmul").matmul(x, x.T))
    assert saved == x.numel() * 8


def test_layer_norm_saves_no_more_than_pytorchs_own(torch, torch_module):
    """The derived LayerNorm against `F.layer_norm` (input, mean, rstd, weight, bias saved)."""
    from symgrad.backends.torch.costs import saved_bytes

    layer_norm = torch_module("composed").layer_norm
    x = torch.randn(64, 256, requires_grad=True)
    gain, offset = torch.randn(256, requires_grad=True), torch.randn(256, requires_grad=True)
    ours, _ = saved_bytes(lambda: layer_norm(x, gain, offset))
    stock, _ = saved_bytes(lambda: torch.nn.functional.layer_norm(x, (256,), gain, offset, eps=1e-3))
    assert ours <= stock, (ours, stock)


# ops a compiled model meets, with the constructs that broke torch.compile's graph before
COMPILED = ["BiasAdd", "MatMul", "GatherV2", "UnsortedSegmentSum", "LayerNorm", "Softmax", "Mean",
            "SparseSoftmaxCrossEntropyWithLogits", "ScaledDotProductAttention", "RotaryEmbedding", "Cumsum"]


def _compiled_matches_eager(torch, call, dynamic: bool):
    compiled = torch.compile(lambda *ts: call.loss("", list(ts)), fullgraph=True, backend="aot_eager", dynamic=dynamic)
    try:
        loss = compiled(*call.tensors)
        got = _grads(torch, call, loss)
    finally:
        torch._dynamo.reset()
    expected = _grads(torch, call, call.loss())
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", COMPILED)
def test_compiles_with_fullgraph(torch, library, name, dynamic):
    """Forward and derived backward traced whole by torch.compile (no graph break: no
    `.item()`, no numpy call on a tensor, no data-dependent shape), gradients as eager's."""
    _compiled_matches_eager(torch, library[name], dynamic)


@pytest.mark.parametrize("name", ["MatMul", "LayerNorm", "Softmax", "BiasAdd", "AddV2"])
def test_torch_func_transforms(torch, library, name):
    """`torch.func.vmap` over a batch of cases, `torch.func.grad` and `jacrev` of a generated op,
    against the loop and against autograd of its formula."""
    call = library[name]
    free = call.free

    def loss(suffix):
        def f(*xs):
            tensors = list(call.tensors)
            for k, x in zip(free, xs):
                tensors[k] = x
            return call.loss(suffix, tensors)
        return f

    xs = [call.tensors[k].detach() for k in free]
    grads = torch.func.grad(loss(""), argnums=tuple(range(len(xs))))(*xs)
    for g, e in zip(grads, torch.func.grad(loss("_forward"), argnums=tuple(range(len(xs))))(*xs)):
        torch.testing.assert_close(g, e)
    jacobian = torch.func.jacrev(loss(""))(*xs)
    torch.testing.assert_close(jacobian, grads[0])
    batch = [torch.stack([x, 2 * x]) for x in xs]
    batched = torch.func.vmap(torch.func.grad(loss("")))(*batch)
    looped = torch.stack([torch.func.grad(loss(""))(*(b[n] for b in batch)) for n in range(2)])
    torch.testing.assert_close(batched, looped)


@pytest.mark.exhaustive
def test_library_saves_no_more_than_autograd(library):
    """Every op's Function saves no more bytes for backward than autograd saves of its
    formula (`<op>_forward`), but those `SAVES_MORE` names; over the library, fewer."""
    from symgrad.backends.torch.costs import saved_bytes

    more, ours_total, theirs_total = {}, 0, 0
    for name, call in library.items():
        ours, _ = saved_bytes(lambda: call(""))
        theirs, _ = saved_bytes(lambda: call("_forward"))
        ours_total, theirs_total = ours_total + ours, theirs_total + theirs
        if ours > theirs and name not in SAVES_MORE:
            more[name] = (ours, theirs)
    assert more == {}
    assert ours_total < theirs_total
