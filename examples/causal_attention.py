"""Causal attention as a new user first writes it, five ways that all derive and agree
(tests/test_causal.py checks each against PyTorch's `scaled_dot_product_attention`): the
range `j <= i` as Sum limits (the letter j also the stage's whole axis, or named apart), as an
`indicator` mask in the numerator and the normaliser (with the scores staged, or nothing
staged and the maximum differentiated too), and a sliding window `i - window <= j <= i`.
`python benchmarks/causal_attention.py` times them against the library's additive-bias
ScaledDotProductAttention.
"""

import sympy as sp

from symgrad import dims, indicator, indices, maximum, op, stage, stop_gradient, tensor

T, D, E = dims("T D E")
i, j, l, u, d, e = indices("i j l u d e")


def scores_of(q, k, a, b):
    return sp.Sum(q[..., a, d] * k[..., b, d], (d, 0, D - 1)) / sp.sqrt(D)


def qkv():
    return tensor("q", (..., T, D)), tensor("k", (..., T, D)), tensor("v", (..., T, E))


@op("CausalLimits")
def causal_limits():
    """The normaliser's and the output's Sums over (j, 0, i); j also the stage's whole axis."""
    q, k, v = qkv()
    scores = stage("scores", (..., i, j), scores_of(q, k, i, j))
    total = sp.Sum(sp.exp(scores[..., i, j]), (j, 0, i))
    return {"output": ((..., i, e), sp.Sum(sp.exp(scores[..., i, j]) / total * v[..., j, e], (j, 0, i)))}


@op("CausalApart")
def causal_apart():
    """The same, the summed indices named apart from the stage's."""
    q, k, v = qkv()
    scores = stage("scores", (..., i, j), scores_of(q, k, i, j))
    total = sp.Sum(sp.exp(scores[..., i, l]), (l, 0, i))
    return {"output": ((..., i, e), sp.Sum(sp.exp(scores[..., i, u]) / total * v[..., u, e], (u, 0, i)))}


@op("CausalMask")
def causal_mask():
    """indicator(j <= i) in the numerator and the normaliser, the row maximum subtracted."""
    q, k, v = qkv()
    scores = stage("scores", (..., i, j), scores_of(q, k, i, j))
    largest = stop_gradient(maximum(scores[..., i, l], (l, 0, T - 1)))
    total = sp.Sum(indicator(l <= i) * sp.exp(scores[..., i, l] - largest), (l, 0, T - 1))
    weights = indicator(j <= i) * sp.exp(scores[..., i, j] - largest) / total
    return {"output": ((..., i, e), sp.Sum(weights * v[..., j, e], (j, 0, T - 1)))}


@op("CausalUnstaged")
def causal_unstaged():
    """The mask form with no stage at all, the maximum differentiated too."""
    q, k, v = qkv()
    largest = maximum(scores_of(q, k, i, l), (l, 0, T - 1))
    total = sp.Sum(indicator(l <= i) * sp.exp(scores_of(q, k, i, l) - largest), (l, 0, T - 1))
    weights = indicator(j <= i) * sp.exp(scores_of(q, k, i, j) - largest) / total
    return {"output": ((..., i, e), sp.Sum(weights * v[..., j, e], (j, 0, T - 1)))}


@op("SlidingWindow", attrs={"window": int}, defaults={"window": 2}, samples={"window": (2,)})
def sliding_window(window):
    """softmax over i - window <= j <= i."""
    q, k, v = qkv()
    scores = stage("scores", (..., i, j), scores_of(q, k, i, j))
    inside = lambda a: indicator(a <= i) * indicator(a >= i - window)
    total = sp.Sum(inside(l) * sp.exp(scores[..., i, l]), (l, 0, T - 1))
    return {"output": ((..., i, e), sp.Sum(inside(j) * sp.exp(scores[..., i, j]) / total * v[..., j, e], (j, 0, T - 1)))}
