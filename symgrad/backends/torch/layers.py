"""TensorFlow's layers as PyTorch's functions, for `symgrad.backends.torch.functions`:
convolutions and pools (NHWC and HWIO filters permuted to PyTorch's NCHW and back,
TensorFlow's asymmetric SAME padding added by `F.pad`), matmuls, biases, losses and
normalisations. Each takes what the op's generated numpy forward takes."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from symgrad.backends.tf_layout import expressible, spatial, tf_pads


def torch_pads(pairs) -> tuple[int, ...]:
    """TensorFlow's (before, after) per axis, first axis first, as F.pad's flat list, which
    starts at the last axis."""
    return tuple(int(v) for pair in reversed(list(pairs)) for v in pair)


# --- convolutions and pooling ------------------------------------------------------------------


def _padded(x, pads, value=0.0):
    """(input, padding argument): symmetric padding is PyTorch's function's own; TensorFlow's
    asymmetric SAME padding is added by F.pad first."""
    if all(before == after for before, after in pads):
        return x, tuple(before for before, _ in pads)
    return F.pad(x, torch_pads(pads), value=value), 0


def nchw(x):
    return x.movedim(-1, 1)


def nhwc(x):
    return x.movedim(1, -1)


def _conv(conv, input, filter, padding, strides, dilations, explicit=None, groups=1, op=""):
    strides, dilations = spatial(strides, "strides", op), spatial(dilations, "dilations", op)
    kernel = filter.shape[:-2]
    pads = tf_pads(input.shape[1:-1], kernel, strides, dilations, padding, explicit)
    x, padding = _padded(nchw(input), pads)
    weight = filter.movedim((-1, -2), (0, 1))  # (*spatial, in, out) -> (out, in, *spatial)
    return nhwc(conv(x, weight, None, strides, padding, dilations, groups))


def conv2d(
    input, filter, *, padding="VALID", strides, explicit_paddings=(), dilations=(1, 1, 1, 1)
):
    return _conv(
        F.conv2d, input, filter, padding, strides, dilations, explicit_paddings, op="Conv2D"
    )


def conv3d(input, filter, *, padding="VALID", strides, dilations=(1, 1, 1, 1, 1)):
    return _conv(F.conv3d, input, filter, padding, strides, dilations, op="Conv3D")


def depthwise_conv2d_native(
    input, filter, *, padding="VALID", strides, explicit_paddings=(), dilations=(1, 1, 1, 1)
):
    # one group per input channel c, its M filters giving output channels c * M + m
    kh, kw, channels, multiplier = filter.shape
    grouped = filter.reshape(kh, kw, 1, channels * multiplier)
    op = "DepthwiseConv2dNative"
    return _conv(
        F.conv2d, input, grouped, padding, strides, dilations, explicit_paddings, channels, op
    )


def extract_image_patches(images, *, padding="VALID", ksizes, strides, rates):
    op = "ExtractImagePatches"
    ksizes, strides, rates = (
        spatial(v, k, op) for v, k in ((ksizes, "ksizes"), (strides, "strides"), (rates, "rates"))
    )
    pads = tf_pads(images.shape[1:3], ksizes, strides, rates, padding)
    x, padding = _padded(nchw(images), pads)
    cols = F.unfold(x, ksizes, rates, padding, strides)
    padded = (size + sum(pad) for size, pad in zip(images.shape[1:3], pads))
    oh, ow = ((p - r * (k - 1) - 1) // s + 1 for p, k, s, r in zip(padded, ksizes, strides, rates))
    n, c = images.shape[0], images.shape[-1]
    # unfold orders a patch (channel, row, column); TensorFlow (row, column, channel)
    patches = cols.reshape(n, c, ksizes[0], ksizes[1], oh, ow).permute(0, 4, 5, 2, 3, 1)
    return patches.reshape(n, oh, ow, -1)


def max_pool(input, *, padding="VALID", data_format="NHWC", ksize, strides):
    expressible(data_format == "NHWC", f"MaxPool: declared for NHWC only, got {data_format!r}")
    ksize, strides = spatial(ksize, "ksize", "MaxPool"), spatial(strides, "strides", "MaxPool")
    pads = tf_pads(input.shape[1:3], ksize, strides, (1, 1), padding)
    x, padding = _padded(nchw(input), pads, value=-math.inf)  # padding never wins
    return nhwc(F.max_pool2d(x, ksize, strides, padding))


def max_pool_v2(input, *, padding="VALID", ksize, strides):
    return max_pool(input, padding=padding, ksize=ksize, strides=strides)


def _avg_pool_nd(pool, value, ksize, strides, padding, op):
    ksize, strides = spatial(ksize, "ksize", op), spatial(strides, "strides", op)
    pads = tf_pads(value.shape[1:-1], ksize, strides, (1,) * len(ksize), padding)
    x = nchw(value)
    if all(before == after for before, after in pads):
        symmetric = tuple(before for before, _ in pads)
        return nhwc(pool(x, ksize, strides, symmetric, count_include_pad=False))
    # SAME padding one longer after than before, which pool cannot pad: window sums over the
    # zero-padded input, divided by the count of the input's own entries in each window
    sums = pool(F.pad(x, torch_pads(pads)), ksize, strides, divisor_override=1)
    ones = F.pad(torch.ones_like(x[:1, :1]), torch_pads(pads))
    return nhwc(sums / pool(ones, ksize, strides, divisor_override=1))


def avg_pool(value, *, padding="VALID", ksize, strides):
    return _avg_pool_nd(F.avg_pool2d, value, ksize, strides, padding, "AvgPool")


def avg_pool3d(input, *, padding="VALID", ksize, strides):
    return _avg_pool_nd(F.avg_pool3d, input, ksize, strides, padding, "AvgPool3D")


# --- nn ----------------------------------------------------------------------------------------


def matmul(a, b, *, transpose_a=False, transpose_b=False):
    return torch.matmul(a.mT if transpose_a else a, b.mT if transpose_b else b)


def batch_mat_mul(x, y, *, adj_x=False, adj_y=False):
    return torch.matmul(x.mH if adj_x else x, y.mH if adj_y else y)


def bias_add(value, bias, *, data_format="NHWC"):
    return torch.add(value, bias[:, None, None] if data_format == "NCHW" else bias)


def bias_add_backprop(out_backprop, *, data_format="NHWC"):
    if data_format == "NCHW":
        return torch.sum(out_backprop, (0, 2, 3))
    return torch.sum(out_backprop.reshape(-1, out_backprop.shape[-1]), 0)


def softmax_cross_entropy_with_logits(features, labels):
    loss = F.cross_entropy(features, labels, reduction="none")  # labels: class probabilities
    return loss, torch.softmax(features, -1) - labels


# torch.batch_norm and torch.group_norm, not their F. wrappers, which refuse one value per
# channel (or group): the statistics of one value are still defined
def batch_norm_training(x, scale, offset, *, epsilon=0.001):
    return nhwc(torch.batch_norm(nchw(x), scale, offset, None, None, True, 0.0, epsilon, False))


def group_norm(x, scale, offset, *, epsilon=0.001, groups=2):
    # PyTorch's group g holds channels g*C .. g*C + C-1, as the declaration's (groups, C) split
    return nhwc(torch.group_norm(nchw(x), int(groups), scale, offset, epsilon, False))


def layer_norm(x, scale, offset, *, epsilon=0.001):
    return F.layer_norm(x, x.shape[-1:], scale, offset, eps=epsilon)


def mlp_block(x, w1, b1, w2, b2):
    return torch.addmm(b2, F.relu(torch.addmm(b1, x, w1)), w2)
