"""TensorFlow's layers as JAX's functions, for `symgrad.backends.jax.functions`: convolutions
and pools (`lax.conv_general_dilated`, `lax.reduce_window`, which take NHWC and HWIO filters
as they are, TensorFlow's SAME padding as explicit pairs), matmuls, biases, losses and
normalisations (`jax.nn`). Each takes what the op's generated numpy forward takes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from symgrad.backends.tf_layout import expressible, spatial, tf_pads


def broadcast_batch(arrays, trailing):
    """`arrays` with their leading axes broadcast, each keeping its last `trailing[k]` axes."""
    batch = jnp.broadcast_shapes(*(a.shape[: a.ndim - n] for a, n in zip(arrays, trailing)))
    return [jnp.broadcast_to(a, batch + a.shape[a.ndim - n :]) for a, n in zip(arrays, trailing)]


# --- convolutions and pooling ------------------------------------------------------------------

_LAYOUTS = {2: ("NHWC", "HWIO", "NHWC"), 3: ("NDHWC", "DHWIO", "NDHWC")}


def _conv(input, filter, padding, strides, dilations, explicit=None, groups=1, op=""):
    strides, dilations = spatial(strides, "strides", op), spatial(dilations, "dilations", op)
    pads = tf_pads(input.shape[1:-1], filter.shape[:-2], strides, dilations, padding, explicit)
    return lax.conv_general_dilated(
        input, filter, strides, pads, rhs_dilation=dilations,
        dimension_numbers=_LAYOUTS[len(strides)], feature_group_count=groups,
    )


def conv2d(input, filter, *, padding="VALID", strides, explicit_paddings=(), dilations=(1, 1, 1, 1)):
    return _conv(input, filter, padding, strides, dilations, explicit_paddings, op="Conv2D")


def conv3d(input, filter, *, padding="VALID", strides, dilations=(1, 1, 1, 1, 1)):
    return _conv(input, filter, padding, strides, dilations, op="Conv3D")


def depthwise_conv2d_native(input, filter, *, padding="VALID", strides, explicit_paddings=(), dilations=(1, 1, 1, 1)):
    # one group per input channel c, its M filters giving output channels c * M + m
    kh, kw, channels, multiplier = filter.shape
    grouped = filter.reshape(kh, kw, 1, channels * multiplier)
    return _conv(input, grouped, padding, strides, dilations, explicit_paddings, channels, "DepthwiseConv2dNative")


def extract_image_patches(images, *, padding="VALID", ksizes, strides, rates):
    op = "ExtractImagePatches"
    ksizes, strides, rates = (spatial(v, k, op) for v, k in ((ksizes, "ksizes"), (strides, "strides"), (rates, "rates")))
    pads = tf_pads(images.shape[1:3], ksizes, strides, rates, padding)
    patches = lax.conv_general_dilated_patches(
        images, ksizes, strides, pads, rhs_dilation=rates, dimension_numbers=("NHWC", "OIHW", "NHWC")
    )
    # a patch's depth is ordered (channel, row, column) here, (row, column, channel) in TensorFlow
    n, oh, ow, _ = patches.shape
    c = images.shape[-1]
    return patches.reshape(n, oh, ow, c, ksizes[0] * ksizes[1]).swapaxes(-1, -2).reshape(n, oh, ow, -1)


def _window(x, init, reduce, ksize, strides, padding, op):
    """`lax.reduce_window` over the spatial axes of an NHWC (NDHWC) `x`, TensorFlow's padding."""
    ksize, strides = spatial(ksize, "ksize", op), spatial(strides, "strides", op)
    pads = tf_pads(x.shape[1:-1], ksize, strides, (1,) * len(ksize), padding)
    return lax.reduce_window(x, init, reduce, (1, *ksize, 1), (1, *strides, 1), [(0, 0), *pads, (0, 0)])


def max_pool(input, *, padding="VALID", data_format="NHWC", ksize, strides):
    expressible(data_format == "NHWC", f"MaxPool: declared for NHWC only, got {data_format!r}")
    return _window(input, -jnp.inf, lax.max, ksize, strides, padding, "MaxPool")


def avg_pool_nd(value, ksize, strides, padding, op):
    """Window sums divided by the count of the input's own entries in each window, as
    TensorFlow's SAME padding averages."""
    sums = _window(value, 0.0, lax.add, ksize, strides, padding, op)
    counts = _window(jnp.ones(value.shape, value.real.dtype), 0.0, lax.add, ksize, strides, padding, op)
    return sums / lax.stop_gradient(counts)


# --- nn ----------------------------------------------------------------------------------------


def matmul(a, b, *, transpose_a=False, transpose_b=False):
    return jnp.matmul(a.mT if transpose_a else a, b.mT if transpose_b else b)


def batch_mat_mul(x, y, *, adj_x=False, adj_y=False):
    return jnp.matmul(x.mT.conj() if adj_x else x, y.mT.conj() if adj_y else y)


def bias_add(value, bias, *, data_format="NHWC"):
    return jnp.add(value, bias[:, None, None] if data_format == "NCHW" else bias)


def bias_add_backprop(out_backprop, *, data_format="NHWC"):
    if data_format == "NCHW":
        return jnp.sum(out_backprop, (0, 2, 3))
    return jnp.sum(out_backprop.reshape(-1, out_backprop.shape[-1]), 0)


def softmax_cross_entropy_with_logits(features, labels):
    loss = -jnp.sum(labels * jax.nn.log_softmax(features, -1), -1)
    return loss, jax.nn.softmax(features, -1) - labels


def normalised(x, axes, scale, offset, epsilon):
    return jax.nn.standardize(x, axes, epsilon=epsilon) * scale + offset


def batch_norm_training(x, scale, offset, *, epsilon=0.001):
    return normalised(x, tuple(range(x.ndim - 1)), scale, offset, epsilon)


def group_norm(x, scale, offset, *, epsilon=0.001, groups=2):
    # group g holds channels g*C .. g*C + C-1, as the declaration's (groups, C) split
    grouped = x.reshape(x.shape[:-1] + (int(groups), -1))
    axes = tuple(range(1, x.ndim - 1)) + (x.ndim,)  # space and the channels of a group
    return jax.nn.standardize(grouped, axes, epsilon=epsilon).reshape(x.shape) * scale + offset


def layer_norm(x, scale, offset, *, epsilon=0.001):
    return normalised(x, -1, scale, offset, epsilon)


def attention(q, k, v, mask):
    q, k, v, mask = broadcast_batch([q, k, v, mask], [2, 2, 2, 2])
    batch, m, (n, e) = q.shape[:-2], q.shape[-2], v.shape[-2:]
    heads = [t.reshape((-1, t.shape[-2], 1, t.shape[-1])) for t in (q, k, v)]  # (B, T, heads=1, D)
    out = jax.nn.dot_product_attention(*heads, bias=mask.reshape(-1, 1, m, n))
    return out.reshape(batch + (m, e))


def mlp_block(x, w1, b1, w2, b2):
    return jnp.matmul(jax.nn.relu(jnp.matmul(x, w1) + b1), w2) + b2
