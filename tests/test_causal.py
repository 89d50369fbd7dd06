"""Causal and sliding-window attention as a new user first writes it (issue 41), the forms of
examples/causal_attention.py: the range `j <= i` as Sum limits (the same letter as the
stage's whole axis, or another), as an `indicator` mask in the numerator and the normaliser
(with or without stages), and a window `i - w <= j <= i`. Each derives (no intermediate beyond the op's own size, which derive
refuses), and every target agrees with PyTorch's autodiff of
`F.scaled_dot_product_attention(..., is_causal=True)` (a window: its boolean `attn_mask`).
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import ROOT, import_path
from verify_support import derived_folder, vjps_in_every_target

EXAMPLE = ROOT / "examples" / "causal_attention.py"
FORMS = ("limits", "apart", "mask", "unstaged", "window")
FUNCTIONS = {"limits": "causal_limits", "apart": "causal_apart", "mask": "causal_mask", "unstaged": "causal_unstaged",
             "window": "sliding_window"}
T, D, E, WINDOW = 5, 3, 4, 2


@pytest.fixture(scope="module")
def causal():
    """Every form of examples/causal_attention.py derived (verified) into one folder."""
    return derived_folder(EXAMPLE)


def reference(torch, form, q, k, v, grad):
    """PyTorch's SDPA and its autodiff: causal, or a boolean window mask."""
    F = torch.nn.functional
    q, k, v = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    if form == "window":
        rows, cols = torch.arange(T)[:, None], torch.arange(T)[None, :]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=(cols <= rows) & (cols >= rows - WINDOW))
    else:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    grads = torch.autograd.grad(out, (q, k, v), torch.tensor(grad))
    return out.detach().numpy(), [g.numpy() for g in grads]


def inputs(batch):
    rng = np.random.default_rng(len(batch))
    return [rng.standard_normal(batch + shape) for shape in ((T, D), (T, D), (T, E), (T, E))]


@pytest.mark.parametrize("batch", [(), (2, 3)])
@pytest.mark.parametrize("form", FORMS)
def test_every_target_agrees_with_torch_causal_attention(torch, jax, tf, causal, form, batch):
    q, k, v, grad = inputs(batch)
    expected_out, expected = reference(torch, form, q, k, v, grad)
    attrs = {"window": WINDOW} if form == "window" else {}
    got = vjps_in_every_target(causal, "causal_attention", FUNCTIONS[form], [q, k, v], grad, **attrs)
    for target, (out, grads) in got.items():
        np.testing.assert_allclose(np.asarray(out), expected_out, rtol=1e-10, atol=1e-12, err_msg=target)
        for got_grad, want, input_name in zip(grads, expected, "qkv"):
            np.testing.assert_allclose(np.asarray(got_grad), want, rtol=1e-9, atol=1e-12, err_msg=f"{target} {input_name}")


def test_a_triangular_sum_is_a_masked_whole_axis_not_a_scan(causal):
    """Sum limits (j, 0, i) over a summand that reads i: a where over the scores and one
    matmul, in the forward and the gradient; no loop, no 4-axis array."""
    source = (causal / "causal_attention_numpy.py").read_text()
    forward = source[source.index("def causal_limits("):source.index("def causal_limits_grad(")]
    assert "np.where(" in forward and "@ v" in forward and "cumsum" not in forward


@pytest.mark.parametrize("form", ("limits", "apart", "mask", "unstaged"))
def test_the_masked_weights_are_a_stage_and_the_gradient_a_softmax_kernel(causal, form):
    """However the mask is written, the normalised weights of the weighted sum over j are one
    stage (0 outside the mask): the gradient is `grad @ v.T`, softmax's row kernel and matmuls,
    as the additive-bias op's; no three-tensor product and no `exp` of the scores again."""
    source = (causal / "causal_attention_torch.py").read_text()
    name = FUNCTIONS[form]
    code = source[source.index(f"def {name}_vjp("):].split("\n\n\n")[0].split('"""')[2]
    given = code.split("if needs_grad")[0]  # the forward's statements, where a stage is not given
    needed = code[len(given):]
    assert "grad_weights1 = grad @ torch.swapaxes(v, -1, -2)" in needed
    assert "torch._softmax_backward_data(grad_weights1, weights1, -1, weights1.dtype)" in needed
    assert "grad_v = torch.swapaxes(weights1, -1, -2) @ grad" in needed
    assert "einsum" not in needed and "torch.exp" not in needed


@pytest.mark.parametrize("form", ("limits", "apart", "mask"))
def test_the_masked_forms_save_what_the_additive_bias_op_saves(torch, causal, form):
    """q, k, v and the weights, measured with saved_tensors_hooks: no more than the library's
    ScaledDotProductAttention given an additive causal bias saves (which keeps the bias too)."""
    from symgrad.backends.torch.costs import saved_bytes

    module = import_path(causal / "causal_attention_torch.py")
    composed = import_path(ROOT / "generated" / "composed_torch.py")
    q, k, v = (torch.randn(2, T, D, dtype=torch.float64, requires_grad=True) for _ in range(3))
    bias = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    ours, out = saved_bytes(lambda: getattr(module, FUNCTIONS[form])(q, k, v))
    theirs, expected = saved_bytes(lambda: composed.scaled_dot_product_attention(q, k, v, bias))
    torch.testing.assert_close(out, expected)
    assert ours == (3 * q.numel() + 2 * T * T) * 8
    assert ours <= theirs
