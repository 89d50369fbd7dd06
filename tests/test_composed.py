"""Composed ops (ops/composed.py) against TensorFlow's autodiff of the same forward written in
plain TF: the generated numpy gradient, the generated `tf.custom_gradient` wrapper (forward and
gradient) and the generated TF gradient function, float32 and float64, several shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest

RNG = np.random.default_rng(11)
TOLERANCE = {"float64": (1e-9, 1e-10), "float32": (2e-4, 2e-5)}  # (rtol, atol)


def normal(*shape):
    return RNG.standard_normal(shape)


def layer_norm(tf, x, scale, offset, epsilon=1e-3):
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    variance = tf.reduce_mean((x - mean) ** 2, axis=-1, keepdims=True)
    return scale * (x - mean) / tf.sqrt(variance + epsilon) + offset


def batch_norm(tf, x, scale, offset, epsilon=1e-3):
    mean, variance = tf.nn.moments(x, axes=[0, 1, 2])
    return tf.nn.batch_normalization(x, mean, variance, offset, scale, epsilon)


def group_norm(tf, x, scale, offset, epsilon=1e-3, groups=2):
    b, h, w, c = x.shape
    grouped = tf.reshape(x, (b, h, w, groups, c // groups))
    mean, variance = tf.nn.moments(grouped, axes=[1, 2, 4], keepdims=True)
    normalised = tf.reshape((grouped - mean) / tf.sqrt(variance + epsilon), (b, h, w, c))
    return scale * normalised + offset


def attention(tf, q, k, v, mask):
    scores = tf.matmul(q, k, transpose_b=True) / math.sqrt(q.shape[-1]) + mask
    return tf.matmul(tf.nn.softmax(scores, axis=-1), v)


def mlp_block(tf, x, w1, b1, w2, b2):
    return tf.nn.relu(x @ w1 + b1) @ w2 + b2


def cosine_similarity(tf, x, y, epsilon=1e-8):
    dot = tf.reduce_sum(x * y, axis=-1)
    return dot / tf.sqrt(tf.reduce_sum(x * x, axis=-1) * tf.reduce_sum(y * y, axis=-1) + epsilon)


def rbf_kernel(tf, x, y, length_scale=1.0):
    distance = tf.reduce_sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
    return tf.exp(-distance / (2 * length_scale**2))


def log_sum_exp_mat_mul(tf, a, b):
    return tf.reduce_logsumexp(a @ b, axis=-1)


def bias_gelu(tf, x, bias):
    z = x + bias  # tf.nn.gelu(approximate=True) differs by 2e-8 in float64: its constants' rounding
    return 0.5 * z * (1 + tf.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))


# (generated function, TF reference, inputs by name, attributes)
CASES = [
    ("layer_norm", layer_norm, {"x": (3, 5), "scale": (5,), "offset": (5,)}, {}),
    ("layer_norm", layer_norm, {"x": (2, 3, 4), "scale": (4,), "offset": (4,)}, {"epsilon": 0.01}),
    ("layer_norm", layer_norm, {"x": (7,), "scale": (7,), "offset": (7,)}, {}),
    ("layer_norm_moments", layer_norm, {"x": (3, 5), "scale": (5,), "offset": (5,)}, {}),
    ("layer_norm_moments", layer_norm, {"x": (2, 2, 6), "scale": (6,), "offset": (6,)}, {}),
    ("batch_norm_training", batch_norm, {"x": (2, 3, 4, 5), "scale": (5,), "offset": (5,)}, {}),
    ("batch_norm_training", batch_norm, {"x": (4, 1, 2, 3), "scale": (3,), "offset": (3,)}, {"epsilon": 0.1}),
    ("group_norm", group_norm, {"x": (2, 3, 2, 6), "scale": (6,), "offset": (6,)}, {"groups": 2}),
    ("group_norm", group_norm, {"x": (1, 2, 3, 6), "scale": (6,), "offset": (6,)}, {"groups": 3}),
    ("scaled_dot_product_attention", attention, {"q": (3, 4), "k": (5, 4), "v": (5, 2), "mask": (3, 5)}, {}),
    ("scaled_dot_product_attention", attention, {"q": (2, 3, 4), "k": (2, 6, 4), "v": (2, 6, 3), "mask": (2, 3, 6)}, {}),
    ("mlp_block", mlp_block, {"x": (4, 3), "w1": (3, 6), "b1": (6,), "w2": (6, 2), "b2": (2,)}, {}),
    ("cosine_similarity", cosine_similarity, {"x": (3, 4), "y": (3, 4)}, {}),
    ("cosine_similarity", cosine_similarity, {"x": (2, 2, 5), "y": (2, 2, 5)}, {}),
    ("rbf_kernel", rbf_kernel, {"x": (3, 2), "y": (4, 2)}, {"length_scale": 1.5}),
    ("log_sum_exp_mat_mul", log_sum_exp_mat_mul, {"a": (3, 4), "b": (4, 5)}, {}),
    ("bias_gelu", bias_gelu, {"x": (3, 4), "bias": (4,)}, {}),
    ("bias_gelu", bias_gelu, {"x": (2, 3, 5), "bias": (5,)}, {}),
]


def _id(case):
    func, _, shapes, attrs = case
    return f"{func}-{'-'.join('x'.join(map(str, s)) for s in shapes.values())}{'-' + str(attrs) if attrs else ''}"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_composed_op_against_tensorflow_autodiff(tf, numpy_module, tf_module, case, dtype):
    func, reference, shapes, attrs = case
    inputs = {name: normal(*shape).astype(dtype) for name, shape in shapes.items()}
    tensors = [tf.constant(x) for x in inputs.values()]
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        expected = reference(tf, *tensors, **attrs)
    upstream = normal(*expected.shape).astype(dtype)
    expected_grads = tape.gradient(expected, tensors, output_gradients=tf.constant(upstream))
    rtol, atol = TOLERANCE[dtype]

    np_module = numpy_module("composed")
    forward = getattr(np_module, func)(*inputs.values(), **attrs)
    np.testing.assert_allclose(forward, expected.numpy(), rtol=rtol, atol=atol)
    np_grads = getattr(np_module, f"{func}_grad")(upstream, *inputs.values(), **attrs)

    with tf.GradientTape() as tape:
        tape.watch(tensors)
        wrapped = getattr(tf_module("composed"), func)(*tensors, **attrs)
    np.testing.assert_allclose(wrapped.numpy(), expected.numpy(), rtol=rtol, atol=atol)
    tf_grads = tape.gradient(wrapped, tensors, output_gradients=tf.constant(upstream))

    for name, want, ours_np, ours_tf in zip(inputs, expected_grads, np_grads, tf_grads):
        scale = float(np.max(np.abs(want.numpy()))) or 1.0  # float32 rounding, relative to the largest
        np.testing.assert_allclose(ours_np, want.numpy(), rtol=rtol, atol=atol * scale, err_msg=f"numpy {name}")
        np.testing.assert_allclose(ours_tf.numpy(), want.numpy(), rtol=rtol, atol=atol * scale, err_msg=f"tf {name}")
        assert ours_np.dtype == np.dtype(dtype) and ours_tf.dtype.name == dtype, name


def test_attention_gradient_reads_as_written_by_hand(derived):
    """softmax's gradient as a person writes it, then two matmuls with transpose flags."""
    _, files = derived
    text = files["composed_numpy.py"]
    grad = text[text.index("def scaled_dot_product_attention_grad(") :]
    assert "grad_scores = weights * (grad_weights - t" in grad
    assert "grad_q = " in grad and "grad_scores @ k" in grad
    assert "np.swapaxes(grad_scores, -1, -2) @ q" in grad
    assert "einsum" not in grad


def test_mlp_block_gradient_is_matmuls_and_a_mask(derived):
    _, files = derived
    text = files["composed_numpy.py"]
    grad = text[text.index("def mlp_block_grad(") : text.index("def cosine_similarity(")]
    assert "grad @ w2.T" in grad and "grad_affine1 @ w1.T" in grad and "x.T @ grad_affine1" in grad
    assert "einsum" not in grad and "np.eye" not in grad


def test_what_two_gradients_both_compute_is_computed_once(derived):
    """BiasGelu: x's gradient and the summand of bias's are one product, `grad * (...)`,
    computed once and read by both (the tanh too); batch norm's sums over the rows its
    gradients share are taken once."""
    _, files = derived
    text = files["composed_numpy.py"]
    gelu = text[text.index("def bias_gelu_grad(") : text.index("def rotary_embedding(")].split('"""')[2]
    assert gelu.count("grad *") == 1 and gelu.count("np.tanh(") == 1, gelu
    assert "grad_x = (1 / 400000) * t" in gelu, gelu
    norm = text[text.index("def batch_norm_training_grad(") : text.index("def group_norm(")].split('"""')[2]
    assert norm.count("np.sum(grad,") == 1 and norm.count("np.sum(grad * ") == 1, norm
