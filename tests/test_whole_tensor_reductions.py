"""Reductions over every entry inside an op: a tensor divided by its whole norm, a norm as a
scalar output, `all_entries` over the leading `...` axes. The reduction is a 0-d stage in the
op's dtype (never a Python float, which JAX cannot trace and PyTorch cannot differentiate),
over every axis however many `...` holds, and generated, verified (against finite differences
in every target), jitted and differentiated twice like any other op."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import import_path

from symgrad.generate import generate

OPS = '''import sympy as sp

from symgrad import all_entries, dims, indices, op, tensor

M, N = dims("M N")
i, j, k, l = indices("i j k l")


@op("NormalizeFixed")
def normalize_fixed():
    """A matrix over its Frobenius norm."""
    x = tensor("x", (M, N))
    total = sp.Sum(x[k, l] ** 2, (k, 0, M - 1), (l, 0, N - 1))
    return {"y": ((i, j), x[i, j] / sp.sqrt(total + 1e-6))}


@op("FrobNorm")
def frob_norm():
    """The Frobenius norm, a scalar output."""
    x = tensor("x", (M, N))
    return {"norm": ((), sp.sqrt(sp.Sum(x[k, l] ** 2, (k, 0, M - 1), (l, 0, N - 1))))}


@op("NormalizeAll")
def normalize_all():
    """Any tensor over the norm of all its entries."""
    x = tensor("x", (...,))
    return {"y": ((...,), x[...] / sp.sqrt(all_entries(x[...] ** 2) + 1e-6))}
'''
X = np.random.default_rng(3).normal(size=(3, 4))


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole")
    (folder / "whole.py").write_text(OPS)
    for name, text in generate([folder / "whole.py"], ("numpy", "tensorflow", "jax", "torch")).items():
        (folder / name).write_text(text)
    return lambda target: import_path(folder / f"whole_{target}.py")


def test_the_reduction_is_an_array_of_the_ops_dtype_not_a_python_float(modules):
    numpy = modules("numpy")
    assert "float(" not in open(numpy.__file__).read()
    norm = numpy.frob_norm(X.astype(np.float32))
    assert np.asarray(norm).dtype == np.float32
    np.testing.assert_allclose(norm, np.linalg.norm(X), rtol=1e-6)


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_all_entries_sums_every_leading_axis(modules, shape):
    numpy = modules("numpy")
    x = np.random.default_rng(4).normal(size=shape)
    np.testing.assert_allclose(numpy.normalize_all(x), x / np.sqrt((x**2).sum() + 1e-6), rtol=1e-12)
    upstream = np.random.default_rng(5).normal(size=shape)
    (grad,) = numpy.normalize_all_grad(upstream, x)
    direction = np.random.default_rng(6).normal(size=shape)
    step = 1e-6
    slope = np.sum(upstream * (numpy.normalize_all(x + step * direction) - numpy.normalize_all(x - step * direction))) / (2 * step)
    np.testing.assert_allclose(np.sum(grad * direction), slope, rtol=1e-7)


def test_jax_jits_and_differentiates_twice(modules, jax):
    jnp = jax.numpy
    module = modules("jax")
    for op, forward in ((module.normalize_fixed, module.normalize_fixed_forward),
                        (module.normalize_all, module.normalize_all_forward)):
        loss = lambda f: (lambda x: jnp.sum(jnp.sin(f(x))))
        np.testing.assert_allclose(jax.jit(op)(X), forward(X), rtol=1e-12)
        np.testing.assert_allclose(jax.hessian(loss(op))(X), jax.hessian(loss(forward))(X), rtol=1e-8, atol=1e-10)


def test_torch_gradgradcheck(modules, torch):
    module = modules("torch")
    x = torch.tensor(X, requires_grad=True)
    for op in (module.normalize_fixed, module.frob_norm, module.normalize_all):
        assert torch.autograd.gradcheck(op, (x,))
        assert torch.autograd.gradgradcheck(op, (x,))
