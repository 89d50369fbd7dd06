"""Pairwise distances, declared as they read: `sum_k (x[i, k] - y[j, k])**2`. Lowered without an
(i, j, k) intermediate, as `|x|^2 + |y|^2 - 2 x.y` (a matmul), which in floating point can
round below zero where two rows are close; the lowered sum of squares is clamped at zero, as
hand-written pairwise distances (scikit-learn's, `torch.cdist`) clamp theirs, so that the
square root of a distance is never NaN. A sum that is no square is left as it is."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import import_path

from symgrad.generate import generate

OPS = '''import sympy as sp

from symgrad import dims, indices, op, tensor

M, N, D = dims("M N D")
i, j, k = indices("i j k")


@op("PairwiseSqDist")
def pairwise_sq_dist():
    """Squared euclidean distances between the rows of x and of y."""
    x = tensor("x", (M, D))
    y = tensor("y", (N, D))
    return {"d": ((i, j), sp.Sum((x[i, k] - y[j, k]) ** 2, (k, 0, D - 1)))}


@op("PairwiseDist")
def pairwise_dist():
    """Euclidean distances between the rows of x and of y, kept differentiable at 0."""
    x = tensor("x", (M, D))
    y = tensor("y", (N, D))
    return {"d": ((i, j), sp.sqrt(sp.Sum((x[i, k] - y[j, k]) ** 2, (k, 0, D - 1)) + sp.Float(1e-3)))}


@op("PairwiseGap")
def pairwise_gap():
    """Differences of squares, which may be negative: not clamped."""
    x = tensor("x", (M, D))
    y = tensor("y", (N, D))
    return {"d": ((i, j), sp.Sum(x[i, k] ** 2 - 2 * x[i, k] * y[j, k], (k, 0, D - 1)))}
'''
# rows near 1e3 whose self-distance |x|^2 + |x|^2 - 2 x.x rounds to nonzero values in float32
X = (np.random.default_rng(0).normal(size=(64, 3)) * 1e3 + 1e3).astype(np.float32)


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pairwise")
    (folder / "pairwise.py").write_text(OPS)
    for name, text in generate([folder / "pairwise.py"], ("numpy", "tensorflow", "jax", "torch")).items():
        (folder / name).write_text(text)
    suffixes = {"tensorflow": "tf"}
    return lambda target: import_path(folder / f"pairwise_{suffixes.get(target, target)}.py")


def test_the_expansion_is_a_matmul_clamped_at_zero(modules):
    source = open(modules("numpy").__file__).read()
    forward = source[source.index("def pairwise_sq_dist("): source.index("def pairwise_sq_dist_grad(")]
    assert "x @ y.T" in forward and "np.maximum(0, " in forward
    gap = source[source.index("def pairwise_gap("): source.index("def pairwise_gap_grad(")]
    assert "np.maximum" not in gap


def test_the_unclamped_expansion_does_go_below_zero_here():
    """The inputs are ones where the clamp matters (else the tests below could not fail)."""
    squares = np.sum(X**2, axis=-1)
    expanded = squares[:, None] + squares[None, :] - 2 * (X @ X.T)
    assert np.diag(expanded).min() < 0


def test_distances_are_never_negative_nor_nan(modules, tf, jax, torch):
    reference = np.sqrt(np.sum((X[:, None, :].astype(np.float64) - X[None, :, :]) ** 2, axis=-1) + 1e-3)
    runs = {
        "numpy": lambda f: f(X, X),
        "tensorflow": lambda f: f(tf.constant(X), tf.constant(X)).numpy(),
        "jax": lambda f: np.asarray(f(jax.numpy.asarray(X), jax.numpy.asarray(X))),
        "torch": lambda f: f(torch.tensor(X), torch.tensor(X)).numpy(),
    }
    for target, run in runs.items():
        module = modules(target)
        squared, distance = run(module.pairwise_sq_dist), run(module.pairwise_dist)
        assert squared.dtype == np.float32 and squared.min() >= 0, target
        assert np.isfinite(distance).all(), target
        # float32's rounding of |x|^2 ~ 1e7, relative to the distance's scale
        np.testing.assert_allclose(distance, reference, atol=2.0, err_msg=target)


def test_the_gradient_is_finite_at_coincident_rows(modules, torch):
    """Through autograd: the gradient of the distances of a set of points to themselves."""
    x = torch.tensor(X[:8].astype(np.float64), requires_grad=True)
    (grad,) = torch.autograd.grad(modules("torch").pairwise_dist(x, x).sum(), x)
    assert torch.isfinite(grad).all()
    expected = torch.func.grad(lambda v: torch.sqrt(((v[:, None] - v[None]) ** 2).sum(-1) + 1e-3).sum())(x.detach())
    np.testing.assert_allclose(grad.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)
