"""Decaying and weighted cumulative sums as a new user writes them (issue 41): an exponential
moving average `sum_{s <= t} a**(t - s) * (1 - a) * x[s]` with an attribute for a, a decay and
an EMA per channel, a discounted return summed forwards in time, a decay per step (a running product), and a
sum masked by `indicator(s <= t)` (a cumulative sum). Each is a linear recurrence, lowered to the scans (`_linear_scan`), its gradient
and second order too: never a T x T mask. Every target against autodiff of a loop in
PyTorch and JAX.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import import_path
from verify_support import derived_folder, vjps_in_every_target

DECAYS = '''
import sympy as sp

from symgrad import dims, indicator, indices, op, product, tensor

T, C = dims("T C")
t, s, r, c = indices("t s r c")


@op("MovingAverage", attrs={"decay": float}, defaults={"decay": 0.9})
def moving_average(decay):
    """y[t] = sum_{s <= t} decay**(t - s) * (1 - decay) * x[s], as its formula is written."""
    x = tensor("x", (..., T))
    return {"y": ((..., t), sp.Sum(decay ** (t - s) * (1 - decay) * x[..., s], (s, 0, t)))}


@op("ChannelDecay")
def channel_decay():
    """y[t, c] = sum_{s <= t} a[c]**(t - s) * x[s, c]: a decay per channel."""
    x = tensor("x", (..., T, C))
    a = tensor("a", (C,))
    return {"y": ((..., t, c), sp.Sum(a[c] ** (t - s) * x[..., s, c], (s, 0, t)))}


@op("ChannelEma")
def channel_ema():
    """y[t, c] = sum_{s <= t} a[c]**(t - s) * (1 - a[c]) * x[s, c]: an EMA per channel."""
    x = tensor("x", (..., T, C))
    a = tensor("a", (C,))
    return {"y": ((..., t, c), sp.Sum(a[c] ** (t - s) * (1 - a[c]) * x[..., s, c], (s, 0, t)))}


@op("DiscountedReturn", attrs={"gamma": float}, defaults={"gamma": 0.99})
def discounted_return(gamma):
    """G[t] = sum_{s >= t} gamma**(s - t) * r[s]."""
    rewards = tensor("rewards", (..., T))
    return {"returns": ((..., t), sp.Sum(gamma ** (s - t) * rewards[..., s], (s, t, T - 1)))}


@op("MaskedCumsum")
def masked_cumsum():
    """y[t] = sum_s indicator(s <= t) * x[s] over the whole axis: t sized, as it is read by the mask alone."""
    x = tensor("x", (..., T))
    return {"y": ((..., (t, T)), sp.Sum(indicator(s <= t) * x[..., s], (s, 0, T - 1)))}


@op("StepDecay")
def step_decay():
    """y[t] = sum_{s <= t} prod_{s < r <= t} a[r] * x[s]: a decay per step (a linear RNN's scan)."""
    x = tensor("x", (..., T))
    a = tensor("a", (..., T))
    return {"y": ((..., t), sp.Sum(product(a[..., r], (r, s + 1, t)) * x[..., s], (s, 0, t)))}
'''
T, C = 7, 3


@pytest.fixture(scope="module")
def decays(tmp_path_factory):
    path = tmp_path_factory.mktemp("decays") / "decays.py"
    path.write_text(DECAYS)
    return derived_folder(path)


def by_loop(ops, name, *inputs):
    """The recurrences as a loop over time, in `ops` (torch or jax.numpy): autodiff's input."""
    if name == "moving_average":
        (x,) = inputs
        y, out = 0.0, []
        for k in range(T):
            y = 0.9 * y + 0.1 * x[..., k]
            out.append(y)
        return ops.stack(out, -1)
    if name in ("channel_decay", "channel_ema"):
        x, a = inputs
        y, out = 0.0, []
        for k in range(T):
            y = a * y + (1 - a if name == "channel_ema" else 1) * x[..., k, :]
            out.append(y)
        return ops.stack(out, -2)
    if name == "discounted_return":
        (rewards,) = inputs
        g, out = 0.0, []
        for k in reversed(range(T)):
            g = rewards[..., k] + 0.99 * g
            out.append(g)
        return ops.stack(out[::-1], -1)
    if name == "masked_cumsum":
        return ops.cumsum(inputs[0], -1) if ops.__name__ == "torch" else ops.cumsum(inputs[0], axis=-1)
    x, a = inputs
    y, out = 0.0, []
    for k in range(T):
        y = a[..., k] * y + x[..., k]
        out.append(y)
    return ops.stack(out, -1)


def inputs(name):
    rng = np.random.default_rng(0)
    if name in ("channel_decay", "channel_ema"):
        return [rng.standard_normal((2, T, C)), rng.uniform(0.5, 1.0, C)]
    if name == "step_decay":
        return [rng.standard_normal((2, T)), rng.uniform(0.5, 1.0, (2, T))]
    return [rng.standard_normal((2, T))]


NAMES = ["moving_average", "channel_decay", "channel_ema", "discounted_return", "step_decay", "masked_cumsum"]


@pytest.mark.parametrize("name", NAMES)
def test_a_decaying_sum_is_a_scan_in_every_target(torch, jax, tf, decays, name):
    values = inputs(name)
    grad = np.random.default_rng(1).standard_normal(values[0].shape)
    tensors = [torch.tensor(v, requires_grad=True) for v in values]
    expected_out = by_loop(torch, name, *tensors)
    expected = [g.numpy() for g in torch.autograd.grad(expected_out, tensors, torch.tensor(grad))]
    got = vjps_in_every_target(decays, "decays", name, values, grad)
    for target, (out, grads) in got.items():
        np.testing.assert_allclose(np.asarray(out), expected_out.detach().numpy(), rtol=1e-12, atol=1e-12, err_msg=target)
        for got_grad, want in zip(grads, expected):
            np.testing.assert_allclose(np.asarray(got_grad), want, rtol=1e-10, atol=1e-12, err_msg=target)


@pytest.mark.parametrize("name", NAMES)
def test_second_order_against_jax_autodiff_of_the_loop(jax, decays, name):
    """JAX's grad of the derived gradient (the generated `<op>_grad` under its custom VJP)
    against JAX's second derivative of the loop."""
    jax_module = import_path(decays / "decays_jax.py")
    values = [jax.numpy.asarray(v) for v in inputs(name)]
    weights = jax.numpy.asarray(np.random.default_rng(2).standard_normal(values[0].shape))
    first = lambda f: lambda *v: jax.numpy.sum(jax.grad(lambda *u: jax.numpy.sum(f(*u) ** 2), argnums=0)(*v) * weights)
    ours = jax.grad(first(getattr(jax_module, name)), argnums=tuple(range(len(values))))(*values)
    theirs = jax.grad(first(lambda *v: by_loop(jax.numpy, name, *v)), argnums=tuple(range(len(values))))(*values)
    for got, want in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-9, atol=1e-12)


def test_no_quadratic_mask(decays):
    """The scans, not a sum over a masked T x T array."""
    import ast

    source = (decays / "decays_numpy.py").read_text()
    comparisons = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Compare)]
    assert source.count("_linear_scan(") >= 8
    assert not [ast.unparse(n) for n in comparisons if any(isinstance(o, (ast.LtE, ast.GtE)) for o in n.ops)]


@pytest.mark.parametrize("name", ["channel_decay", "channel_ema"])
@pytest.mark.parametrize("decay", [0.0, -0.6])
def test_a_decay_per_channel_of_zero_has_a_finite_gradient(torch, jax, tf, decays, decay, name):
    """d/da of sum_{s <= t} a**(t - s) x[s] is sum_{s < t} (t - s) a**(t - s - 1) x[s]: the
    term at s == t vanishes, so the range stops short of it and no `1 / a` is left (it was
    0 * inf, NaN, at a == 0); an EMA's (1 - a) adds a term over the same sums that does not
    vanish there, and stays. Every target against autograd of the loop, a channel at 0."""
    x, a = inputs(name)
    a = a.copy()
    a[0], a[1] = 0.0, decay
    grad = np.random.default_rng(3).standard_normal(x.shape)
    tensors = [torch.tensor(v, requires_grad=True) for v in (x, a)]
    expected = [g.numpy() for g in torch.autograd.grad(by_loop(torch, name, *tensors), tensors, torch.tensor(grad))]
    for target, (_, grads) in vjps_in_every_target(decays, "decays", name, [x, a], grad).items():
        assert np.isfinite(np.asarray(grads[1])).all(), target
        for got_grad, want in zip(grads, expected):
            np.testing.assert_allclose(np.asarray(got_grad), want, rtol=1e-10, atol=1e-12, err_msg=target)
