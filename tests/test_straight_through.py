"""A gradient convention declared, not special-cased: the straight-through estimator of
quantize-and-dequantize (ops/quantize.py), `input + stop_gradient(quantized - input)`.

The forward against TensorFlow's kernels (every mode, both precisions, ranges on either side
of 0 and empty); the gradient against TensorFlow's registered one; and `symgrad check`, which
differences the forward with each `stop_gradient` held at its value (`held_forward`): the
straight-through derivative 1, where the forward's own differences are 0."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import OPS

from symgrad.testing import assert_gradients_close_to_finite_differences
from symgrad.verify.cases import Case, bound_forward
from symgrad.verify.check import held_forward, stopped_inputs
from symgrad.verify.ops_under_test import load_derived, variants_of

RANGES = [(-1.0, 1.0), (-0.3, 2.0), (-2.0, 0.25), (0.0, 1.5), (-1.5, 0.0), (0.5, 2.0), (-2.0, -0.5), (0.0, 0.0)]
MODES = list(itertools.product((True, False), (False, True), ("HALF_TO_EVEN", "HALF_UP"), (8, 3)))


def values(dtype):
    """Entries inside and outside every range, and exact ties of a 3-bit grid."""
    rng = np.random.default_rng(0)
    ties = np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.5, 1 / 6, -1 / 14], dtype)
    return np.concatenate([rng.uniform(-3, 3, 40).astype(dtype), ties])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_is_tensorflows_kernel(numpy_module, tf, dtype):
    module = numpy_module("quantize")
    x = values(dtype)
    for (signed, narrow, mode, bits), (low, high) in itertools.product(MODES, RANGES):
        attrs = dict(signed_input=signed, narrow_range=narrow, num_bits=bits)
        lo, hi = np.asarray(low, dtype), np.asarray(high, dtype)
        theirs = tf.raw_ops.QuantizeAndDequantizeV2(input=x, input_min=lo, input_max=hi, range_given=True, round_mode=mode, **attrs)
        ours = module.quantize_and_dequantize_v2(x, lo, hi, round_mode=mode, **attrs)
        assert ours.dtype == dtype
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-6, atol=1e-30, err_msg=str((attrs, mode, low, high)))
        if mode == "HALF_TO_EVEN":
            v3 = tf.raw_ops.QuantizeAndDequantizeV3(input=x, input_min=lo, input_max=hi, num_bits=bits, range_given=True,
                                                    signed_input=signed, narrow_range=narrow)
            np.testing.assert_allclose(module.quantize_and_dequantize_v3(x, lo, hi, **attrs), v3.numpy(), rtol=1e-6, atol=1e-30)


def test_every_target_passes_the_gradient_straight_through(tf_module, jax_module, torch_module, tf, jax, torch):
    x = values(np.float64)
    grad = np.random.default_rng(1).standard_normal(x.shape)
    lo, hi = np.float64(-1.0), np.float64(1.5)
    for name, module, wrap in (("tensorflow", tf_module("quantize"), tf.constant), ("jax", jax_module("quantize"), np.asarray),
                               ("torch", torch_module("quantize"), torch.tensor)):
        args = [wrap(v) for v in (x, lo, hi)]
        out = module.quantize_and_dequantize_v2(*args, num_bits=3)
        extra = (out,) if name == "tensorflow" else ()
        grads = module.quantize_and_dequantize_v2_vjp(wrap(grad), *args, *extra, num_bits=3)
        np.testing.assert_array_equal(np.asarray(grads[0]), grad, err_msg=name)
        assert grads[1] is None and grads[2] is None, name
    # the attribute-only range of the first version: Python conditionals, not PyTorch's where
    out = torch_module("quantize").quantize_and_dequantize(torch.tensor(x), num_bits=3, input_min=-1.0, input_max=1.5)
    np.testing.assert_allclose(out.numpy(), numpy_module_v1(x), rtol=1e-12)


def numpy_module_v1(x):
    """3 signed bits on [-1, 1.5]: the high side sets the scale, 3 / 1.5 (the low one allows 4)."""
    return np.rint(np.clip(x, -4 / 2, 1.5) * 2) / 2


def test_check_differences_the_forward_with_the_rounding_held(derived):
    """`held_forward`: the declaration with `stop_gradient(quantized - input)` fixed at the
    case's inputs, whose difference quotient in input is 1; the forward's own is 0 between
    the levels."""
    op = next(o for o in load_derived([OPS / "quantize.py"], generated=derived[0]) if o.name == "QuantizeAndDequantizeV2")
    variant = variants_of(op)[0]
    forward = bound_forward(variant)
    x, lo, hi = np.array([-0.61, 0.13, 0.4]), np.asarray(-1.0), np.asarray(1.0)
    case = Case("levels", (x, lo, hi))
    held = held_forward(variant, case, forward, stopped_inputs(variant))
    h = 1e-4
    quotient = lambda f: (np.asarray(f(x + h, lo, hi)) - np.asarray(f(x - h, lo, hi))) / (2 * h)
    np.testing.assert_allclose(quotient(held), 1.0, rtol=1e-9)
    np.testing.assert_array_equal(quotient(forward), 0.0)
    np.testing.assert_allclose(held(x, lo, hi), forward(x, lo, hi), rtol=1e-12)


def test_quantize_ops_agree_with_finite_differences_of_the_held_forward(derived):
    results = assert_gradients_close_to_finite_differences(OPS / "quantize.py", generated=derived[0], targets=("numpy",))
    assert {r.op for r in results} == {"QuantizeAndDequantize", "QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3"}
    assert all(r.cases for r in results)
