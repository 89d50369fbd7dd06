"""Convolutions and pooling over NHWC (NDHWC) inputs: index sums with affine input maps.

An input entry is read at `i*stride + k*dilation - pad` (output position i, window offset
k): positions outside the input read as zero, which is the padding. TensorFlow's padding
modes fix the output size and the padding before the first element:

* `VALID`: no padding; `SAME`: output size ceil(size / stride), padding split evenly with
  the extra one after; `EXPLICIT`: `explicit_paddings` gives (before, after) per axis.
"""

import sympy as sp

from symgrad import Input, Ints, attr, dims, first_maximum, indicator, indices, integer_function, op, read_outside, tensor

N, D, H, W, C, O, M = dims("N D H W C O M")
KD, KH, KW = dims("KD KH KW")
n, z, i, j, c, o, m = indices("n z i j c o m")
a, b, e = indices("a b e")
PADDING = ("VALID", "SAME", "EXPLICIT")
CONV_DEFAULTS = {"dilations": (1, 1, 1, 1), "explicit_paddings": ()}


@integer_function
def same_padding(size, kernel, stride, dilation):
    """The padding before an axis of `size` entries under SAME, as TensorFlow computes it:
    half of what ceil(size / stride) windows need, the odd one after."""
    out = sp.ceiling(size / stride)
    return sp.floor(sp.Max((out - 1) * stride + dilation * (kernel - 1) + 1 - size, 0) / 2)


def window(size, kernel, stride, dilation, padding, explicit=(0, 0)):
    """(output size, padding before) of one spatial axis, as TensorFlow computes them."""
    reach = dilation * (kernel - 1) + 1
    if padding == "VALID":
        return sp.floor((size - reach) / stride) + 1, 0
    if padding == "SAME":
        return sp.ceiling(size / stride), same_padding(size, kernel, stride, dilation)
    before, after = explicit
    return sp.floor((size + before + after - reach) / stride) + 1, before


@op(
    "Conv2D",
    attrs={"strides": Ints(4), "padding": PADDING, "explicit_paddings": Ints(8), "dilations": Ints(4)},
    defaults=CONV_DEFAULTS,
    samples={
        "strides": ((1, 1, 1, 1), (1, 2, 3, 1)),
        "dilations": ((1, 1, 1, 1), (1, 2, 3, 1)),
        "explicit_paddings": ((0, 0, 1, 2, 2, 0, 0, 0),),
    },
)
def conv2d(strides, padding, explicit_paddings, dilations):
    """2-D convolution (cross-correlation), NHWC input, HWIO filter."""
    input = tensor("input", (N, H, W, C))
    filter = tensor("filter", (KH, KW, C, O))
    oh, ph = window(H, KH, strides[1], dilations[1], padding, explicit_paddings[2:4])
    ow, pw = window(W, KW, strides[2], dilations[2], padding, explicit_paddings[4:6])
    x = input[n, i * strides[1] + a * dilations[1] - ph, j * strides[2] + b * dilations[2] - pw, c]
    total = sp.Sum(x * filter[a, b, c, o], (a, 0, KH - 1), (b, 0, KW - 1), (c, 0, C - 1))
    return {"output": ((n, (i, oh), (j, ow), o), total)}


@op(
    "DepthwiseConv2dNative",
    attrs={"strides": Ints(4), "padding": PADDING, "explicit_paddings": Ints(8), "dilations": Ints(4)},
    defaults=CONV_DEFAULTS,
    samples={"strides": ((1, 1, 1, 1), (1, 2, 2, 1)), "explicit_paddings": ((0, 0, 1, 2, 2, 0, 0, 0),)},
)
def depthwise_conv2d_native(strides, padding, explicit_paddings, dilations):
    """Each input channel c convolved with its own M filters: output channel c*M + m."""
    input = tensor("input", (N, H, W, C))
    filter = tensor("filter", (KH, KW, C, M))
    oh, ph = window(H, KH, strides[1], dilations[1], padding, explicit_paddings[2:4])
    ow, pw = window(W, KW, strides[2], dilations[2], padding, explicit_paddings[4:6])
    x = input[n, i * strides[1] + a * dilations[1] - ph, j * strides[2] + b * dilations[2] - pw, c]
    total = sp.Sum(x * filter[a, b, c, m], (a, 0, KH - 1), (b, 0, KW - 1))
    return {"output": ((n, (i, oh), (j, ow), (c, m)), total)}


@op("ExtractImagePatches", attrs={"ksizes": Ints(4), "strides": Ints(4), "rates": Ints(4), "padding": ("VALID", "SAME")})
def extract_image_patches(ksizes, strides, rates, padding):
    """Each window of the input as one channel axis, ordered (row, column, channel)."""
    images = tensor("images", (N, H, W, C))
    oh, ph = window(H, ksizes[1], strides[1], rates[1], padding)
    ow, pw = window(W, ksizes[2], strides[2], rates[2], padding)
    x = images[n, i * strides[1] + a * rates[1] - ph, j * strides[2] + b * rates[2] - pw, c]
    return {"patches": ((n, (i, oh), (j, ow), ((a, ksizes[1]), (b, ksizes[2]), c)), x)}


@op(
    "Conv3D",
    attrs={"strides": Ints(5), "padding": ("VALID", "SAME"), "dilations": Ints(5)},
    defaults={"dilations": (1, 1, 1, 1, 1)},
    samples={"strides": ((1, 1, 1, 1, 1), (1, 2, 1, 3, 1))},
)
def conv3d(strides, padding, dilations):
    """3-D convolution (cross-correlation), NDHWC input, DHWIO filter."""
    input = tensor("input", (N, D, H, W, C))
    filter = tensor("filter", (KD, KH, KW, C, O))
    od, pd = window(D, KD, strides[1], dilations[1], padding)
    oh, ph = window(H, KH, strides[2], dilations[2], padding)
    ow, pw = window(W, KW, strides[3], dilations[3], padding)
    x = input[
        n,
        z * strides[1] + e * dilations[1] - pd,
        i * strides[2] + a * dilations[2] - ph,
        j * strides[3] + b * dilations[3] - pw,
        c,
    ]
    total = sp.Sum(x * filter[e, a, b, c, o], (e, 0, KD - 1), (a, 0, KH - 1), (b, 0, KW - 1), (c, 0, C - 1))
    return {"output": ((n, (z, od), (i, oh), (j, ow), o), total)}


def _pool_window(name, ksize, strides, padding):
    """(input entry, output indices with sizes, window sums, inside) of a 2-D NHWC pool."""
    input = tensor(name, (N, H, W, C))
    kh, kw = ksize[1], ksize[2]
    oh, ph = window(H, kh, strides[1], 1, padding)
    ow, pw = window(W, kw, strides[2], 1, padding)
    row, col = i * strides[1] + a - ph, j * strides[2] + b - pw
    inside = sp.And(row >= 0, row <= H - 1, col >= 0, col <= W - 1)
    sums = ((a, 0, kh - 1), (b, 0, kw - 1))
    return input[n, row, col, c], (n, (i, oh), (j, ow), c), sums, inside


POOL_ATTRS = {"ksize": Ints(4), "strides": Ints(4), "padding": ("VALID", "SAME")}
# windows of 2 by 2 taken 2 apart; then 3 by 2, and overlapping windows (strides 1 and 2)
POOL_SAMPLES = {"ksize": ((1, 2, 2, 1), (1, 3, 2, 1)), "strides": ((1, 2, 2, 1), (1, 1, 2, 1))}


@op("AvgPool", attrs=POOL_ATTRS, samples=POOL_SAMPLES)
def avg_pool(ksize, strides, padding):
    """Mean over each window; padding is left out of the count, as TensorFlow's kernel does."""
    x, out, sums, inside = _pool_window("value", ksize, strides, padding)
    count = sp.Sum(indicator(inside), *sums)
    return {"output": (out, sp.Sum(x, *sums) / count)}


@op("MaxPool", attrs={**POOL_ATTRS, "data_format": ("NHWC",)}, samples=POOL_SAMPLES)
def max_pool(ksize, strides, padding, data_format):
    """Maximum over each window; padding reads as minus infinity, so it never wins."""
    x, out, sums, _ = _pool_window("input", ksize, strides, padding)
    # the gradient goes to the first maximum of a window (row-major), as TensorFlow's does
    return {"output": (out, first_maximum(read_outside(x, -sp.oo), *sums))}


def _window_3d(name, ksize, strides, padding):
    """(input entry, output indices with sizes, window sums) of a 3-D NDHWC window."""
    input = tensor(name, (N, D, H, W, C))
    od, pd = window(D, ksize[1], strides[1], 1, padding)
    oh, ph = window(H, ksize[2], strides[2], 1, padding)
    ow, pw = window(W, ksize[3], strides[3], 1, padding)
    x = input[n, z * strides[1] + e - pd, i * strides[2] + a - ph, j * strides[3] + b - pw, c]
    sums = ((e, 0, ksize[1] - 1), (a, 0, ksize[2] - 1), (b, 0, ksize[3] - 1))
    return x, (n, (z, od), (i, oh), (j, ow), c), sums


WINDOW_3D = {"strides": Ints(5), "padding": ("VALID", "SAME")}
WINDOW_3D_SAMPLES = {"strides": ((1, 2, 2, 2, 1), (1, 1, 2, 1, 1))}
POOL_3D_ATTRS = {"ksize": Ints(5), **WINDOW_3D}
POOL_3D_SAMPLES = {"ksize": ((1, 2, 2, 2, 1),), **WINDOW_3D_SAMPLES}


@op("MaxPool3D", attrs=POOL_3D_ATTRS, samples=POOL_3D_SAMPLES)
def max_pool3d(ksize, strides, padding):
    """Maximum over each 3-D window (NDHWC), its gradient to the window's first maximum."""
    x, out, sums = _window_3d("input", ksize, strides, padding)
    return {"output": (out, first_maximum(read_outside(x, -sp.oo), *sums))}


@op("ExtractVolumePatches", attrs={"ksizes": Ints(5), **WINDOW_3D}, samples={"ksizes": ((1, 2, 2, 2, 1),), **WINDOW_3D_SAMPLES})
def extract_volume_patches(ksizes, strides, padding):
    """Each 3-D window as one channel axis, ordered (plane, row, column, channel)."""
    x, (batch, planes, rows, cols, _), _ = _window_3d("input", ksizes, strides, padding)
    return {"patches": ((batch, planes, rows, cols, ((e, ksizes[1]), (a, ksizes[2]), (b, ksizes[3]), c)), x)}


@op(
    "Dilation2D",
    attrs={"strides": Ints(4), "rates": Ints(4), "padding": ("VALID", "SAME")},
    samples={"strides": ((1, 1, 1, 1), (1, 2, 3, 1)), "rates": ((1, 1, 1, 1), (1, 2, 1, 1))},
)
def dilation2d(strides, rates, padding):
    """Grayscale morphological dilation: the maximum over each window of input + filter (NHWC
    input, HWC filter), windows read `rates` apart; padding reads as minus infinity."""
    input = tensor("input", (N, H, W, C))
    filter = tensor("filter", (KH, KW, C))
    oh, ph = window(H, KH, strides[1], rates[1], padding)
    ow, pw = window(W, KW, strides[2], rates[2], padding)
    x = input[n, i * strides[1] + a * rates[1] - ph, j * strides[2] + b * rates[2] - pw, c]
    # ties: the first maximum of a window (row-major), as TensorFlow's Dilation2DBackprop* kernels
    largest = first_maximum(read_outside(x, -sp.oo) + filter[a, b, c], (a, 0, KH - 1), (b, 0, KW - 1))
    return {"output": ((n, (i, oh), (j, ow), c), largest)}


@op(
    "AvgPool3D",
    attrs={"ksize": Ints(5), "strides": Ints(5), "padding": ("VALID", "SAME")},
    samples={"ksize": ((1, 2, 2, 2, 1),), "strides": ((1, 2, 2, 2, 1), (1, 1, 2, 1, 1))},
)
def avg_pool3d(ksize, strides, padding):
    """Mean over each 3-D window (NDHWC); padding is left out of the count."""
    input = tensor("input", (N, D, H, W, C))
    od, pd = window(D, ksize[1], strides[1], 1, padding)
    oh, ph = window(H, ksize[2], strides[2], 1, padding)
    ow, pw = window(W, ksize[3], strides[3], 1, padding)
    depth, row, col = z * strides[1] + e - pd, i * strides[2] + a - ph, j * strides[3] + b - pw
    inside = sp.And(depth >= 0, depth <= D - 1, row >= 0, row <= H - 1, col >= 0, col <= W - 1)
    sums = ((e, 0, ksize[1] - 1), (a, 0, ksize[2] - 1), (b, 0, ksize[3] - 1))
    count = sp.Sum(indicator(inside), *sums)
    total = sp.Sum(input[n, depth, row, col, c], *sums)
    return {"output": ((n, (z, od), (i, oh), (j, ow), c), total / count)}


@op(
    "MaxPoolV2",
    attrs={"ksize": attr(Ints(), Input(1)), "strides": attr(Ints(), Input(2)), "padding": ("VALID", "SAME")},
    samples=POOL_SAMPLES,
)
def max_pool_v2(ksize, strides, padding):
    """MaxPool with the window and strides passed as constant inputs."""
    x, out, sums, _ = _pool_window("input", ksize, strides, padding)
    return {"output": (out, first_maximum(read_outside(x, -sp.oo), *sums))}


