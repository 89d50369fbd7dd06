"""Index inversion done right: derived gradients of affine index maps against brute force.

Zero where no forward index maps (odd positions under stride 2), exact at the edges where
reads fall outside the input (padding), for strides, dilations, offsets, negative
coefficients and two indices in one subscript; property tests draw the maps at random.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import ROOT, import_path
from verify_support import derived_folder

MAPS = ROOT / "tests" / "fixtures" / "affine_maps.py"


@pytest.fixture(scope="module")
def module():
    return import_path(derived_folder(MAPS) / "affine_maps_numpy.py", "_symgrad_affine_maps_numpy")


def brute_window_map(x, w, c_out, c_window, offset, out_size):
    y = np.zeros(out_size)
    for i, k in itertools.product(range(out_size), range(len(w))):
        position = c_out * i + c_window * k + offset
        if 0 <= position < len(x):
            y[i] += x[position] * w[k]
    return y


def brute_vjp(forward, inputs: dict, upstream) -> dict:
    """The vector-Jacobian product by linearity in each input, one unit vector at a time."""
    grads = {}
    for name, value in inputs.items():
        grad = np.zeros_like(value)
        for n in np.ndindex(value.shape):
            unit = np.zeros_like(value)
            unit[n] = 1.0
            grad[n] = np.sum(upstream * forward(**{**inputs, name: unit}))
        grads[name] = grad
    return grads


def test_stride_two_leaves_odd_positions_zero(module):
    """y[i] = x[2i]: SymPy's own delta summation gives g[j/2] at every j; here odd j get 0."""
    x, w = np.arange(1.0, 8.0), np.ones(1)
    grad_x, _ = module.window_map_grad(np.array([10.0, 20.0, 30.0]), x, w, c_out=2, c_window=1, offset=0, out_size=3)
    np.testing.assert_array_equal(grad_x, [10, 0, 20, 0, 30, 0, 0])


def test_reads_outside_the_input_are_padding(module):
    """y[i] = x[i - 2] for i < 6 reads zeros at i = 0, 1: those get no gradient anywhere."""
    x, w = np.arange(1.0, 5.0), np.ones(1)
    y = module.window_map(x, w, c_out=1, c_window=1, offset=-2, out_size=6)
    np.testing.assert_array_equal(y, [0, 0, 1, 2, 3, 4])
    grad_x, grad_w = module.window_map_grad(np.arange(6.0), x, w, c_out=1, c_window=1, offset=-2, out_size=6)
    np.testing.assert_array_equal(grad_x, [2, 3, 4, 5])
    np.testing.assert_array_equal(grad_w, [np.dot(np.arange(6.0), y)])


@settings(max_examples=60, deadline=None)
@given(
    c_out=st.integers(-3, 3).filter(bool),  # a coefficient solved for must not be 0
    c_window=st.integers(-3, 3),
    offset=st.integers(-6, 6),
    x_size=st.integers(1, 9),
    k_size=st.integers(1, 4),
    out_size=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_random_window_maps_match_brute_force(module, c_out, c_window, offset, x_size, k_size, out_size, seed):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(x_size), rng.standard_normal(k_size)
    attrs = dict(c_out=c_out, c_window=c_window, offset=offset, out_size=out_size)
    np.testing.assert_allclose(module.window_map(x, w, **attrs), brute_window_map(x, w, **attrs), atol=1e-12)
    upstream = rng.standard_normal(out_size)
    expected = brute_vjp(lambda x, w: brute_window_map(x, w, **attrs), {"x": x, "w": w}, upstream)
    grad_x, grad_w = module.window_map_grad(upstream, x, w, **attrs)
    np.testing.assert_allclose(grad_x, expected["x"], atol=1e-12)
    np.testing.assert_allclose(grad_w, expected["w"], atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    c_i=st.integers(-3, 3).filter(bool),
    c_j=st.integers(-3, 3),
    offset=st.integers(-4, 8),
    x_size=st.integers(1, 8),
    rows=st.integers(1, 4),
    cols=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_two_indices_in_one_subscript(module, c_i, c_j, offset, x_size, rows, cols, seed):
    """Several forward entries read the same x[p]: their gradients add up at p."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_size)
    upstream = rng.standard_normal((rows, cols))
    attrs = dict(c_i=c_i, c_j=c_j, offset=offset, rows=rows, cols=cols)
    expected = np.zeros(x_size)
    for i, j in itertools.product(range(rows), range(cols)):
        p = c_i * i + c_j * j + offset
        if 0 <= p < x_size:
            expected[p] += upstream[i, j] * 2 * x[p]
    (grad_x,) = module.two_index_map_grad(upstream, x, **attrs)
    np.testing.assert_allclose(grad_x, expected, atol=1e-12)


def test_a_whole_axis_read_backwards_is_a_flip_in_every_target(module):
    """`x[b, N - 1 - i]` over the whole axis is the framework's flip (no positions gathered)
    and its gradient flips back; `x[1 - i]` over two entries of a longer axis stays a gather."""
    rng = np.random.default_rng(3)
    x, w, upstream = rng.normal(size=(3, 5)), rng.normal(size=5), rng.normal(size=(3, 5))
    np.testing.assert_allclose(module.reversed_rows(x, w), x[:, ::-1] * w)
    forward = lambda x, w: x[:, ::-1] * w
    expected = brute_vjp(forward, {"x": x, "w": w}, upstream)
    for got, name in zip(module.reversed_rows_grad(upstream, x, w), ("x", "w")):
        np.testing.assert_allclose(got, expected[name], rtol=1e-12)
    folder = derived_folder(MAPS)
    flips = {"numpy": "np.flip(", "tf": "tf.reverse(", "jax": "jnp.flip(", "torch": "_flip("}
    for suffix, flip in flips.items():
        text = (folder / f"affine_maps_{suffix}.py").read_text()  # the op's functions, up to the next op's
        reversed_code = text[text.index("def reversed_rows(") : text.index("def first_two_swapped(")]
        assert flip in reversed_code and "_gather(" not in reversed_code, (suffix, reversed_code)
    swapped = import_path(folder / "affine_maps_numpy.py", "_symgrad_affine_maps_numpy_2")
    np.testing.assert_allclose(swapped.first_two_swapped(np.arange(4.0)), [1.0, 0.0])
    assert "_gather(" in (folder / "affine_maps_numpy.py").read_text().split("def first_two_swapped")[1]
