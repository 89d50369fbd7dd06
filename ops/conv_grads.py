"""TensorFlow's convolution and pooling gradient kernels as ops (Conv2DBackpropInput, ...):
each is declared as the sum it computes, its output shape given by a constant input
(`input_sizes`, `filter_sizes`, `orig_input_shape`), and is derived like any op; its forward
is then a convolution kernel again, and its gradients are the convolution and its other
backprop, as TensorFlow's hand-written ones.

An input gradient places each product at the input position its window read, a Kronecker
delta `delta(h, i*stride + a*dilation - pad)`; derivation solves it for the window's
position i (`exact_div(h + pad - a*dilation, stride)`, none where the stride does not divide).
"""

import sympy as sp

from symgrad import Input, Ints, attr, dims, first_maximum, indices, indicator, op, read_outside, tensor

from conv import CONV_DEFAULTS, PADDING, POOL_3D_ATTRS, POOL_3D_SAMPLES, POOL_ATTRS, POOL_SAMPLES, _pool_window, _window_3d, window  # noqa: E402  (op files are imported by path)

N, D, H, W, C, O, M = dims("N D H W C O M")
KD, KH, KW = dims("KD KH KW")
n, z, i, j, c, o, m = indices("n z i j c o m")
a, b, e = indices("a b e")

h, w, y = indices("h w y")
BACKPROP_SAMPLES = {
    "strides": ((1, 1, 1, 1), (1, 2, 3, 1)),
    "dilations": ((1, 1, 1, 1), (1, 2, 1, 1)),
    "explicit_paddings": ((0, 0, 1, 2, 2, 0, 0, 0),),
}
# as DepthwiseConv2dNative's: dilated, TensorFlow's float32 kernels compute another op
# (SAME padding), and it has no float64 ones
DEPTHWISE_SAMPLES = {k: v for k, v in BACKPROP_SAMPLES.items() if k != "dilations"}
CONV_ATTRS = {"strides": Ints(4), "padding": PADDING, "explicit_paddings": Ints(8), "dilations": Ints(4)}


@op(
    "Conv2DBackpropInput",
    attrs={"input_sizes": attr(Ints(4), Input(0)), **CONV_ATTRS},
    defaults=CONV_DEFAULTS,
    samples={"input_sizes": ((2, 5, 6, 3),), **BACKPROP_SAMPLES},
)
def conv2d_backprop_input(input_sizes, strides, padding, explicit_paddings, dilations):
    """Conv2D's gradient in its input, of shape `input_sizes`: each entry of out_backprop
    times the filter, added at the input positions its window read."""
    oh, ph = window(input_sizes[1], KH, strides[1], dilations[1], padding, explicit_paddings[2:4])
    ow, pw = window(input_sizes[2], KW, strides[2], dilations[2], padding, explicit_paddings[4:6])
    filter = tensor("filter", (KH, KW, input_sizes[3], O))
    out_backprop = tensor("out_backprop", (input_sizes[0], oh, ow, O))
    at = sp.KroneckerDelta(h, i * strides[1] + a * dilations[1] - ph) * sp.KroneckerDelta(w, j * strides[2] + b * dilations[2] - pw)
    terms = at * out_backprop[n, i, j, o] * filter[a, b, c, o]
    total = sp.Sum(terms, (i, 0, oh - 1), (j, 0, ow - 1), (a, 0, KH - 1), (b, 0, KW - 1), (o, 0, O - 1))
    return {"output": ((n, (h, input_sizes[1]), (w, input_sizes[2]), c), total)}


@op(
    "Conv2DBackpropFilter",
    attrs={"filter_sizes": attr(Ints(4), Input(1)), **CONV_ATTRS},
    defaults=CONV_DEFAULTS,
    samples={"filter_sizes": ((2, 3, 3, 2),), **BACKPROP_SAMPLES},
)
def conv2d_backprop_filter(filter_sizes, strides, padding, explicit_paddings, dilations):
    """Conv2D's gradient in its filter, of shape `filter_sizes`: each window of the input
    times out_backprop at the window's position, summed over the batch and positions."""
    input = tensor("input", (N, H, W, filter_sizes[2]))
    oh, ph = window(H, filter_sizes[0], strides[1], dilations[1], padding, explicit_paddings[2:4])
    ow, pw = window(W, filter_sizes[1], strides[2], dilations[2], padding, explicit_paddings[4:6])
    out_backprop = tensor("out_backprop", (N, oh, ow, filter_sizes[3]))
    x = input[n, i * strides[1] + a * dilations[1] - ph, j * strides[2] + b * dilations[2] - pw, c]
    total = sp.Sum(x * out_backprop[n, i, j, o], (n, 0, N - 1), (i, 0, oh - 1), (j, 0, ow - 1))
    return {"output": (((a, filter_sizes[0]), (b, filter_sizes[1]), c, o), total)}


@op(
    "DepthwiseConv2dNativeBackpropInput",
    attrs={"input_sizes": attr(Ints(4), Input(0)), **CONV_ATTRS},
    defaults=CONV_DEFAULTS,
    samples={"input_sizes": ((2, 5, 6, 3),), **DEPTHWISE_SAMPLES},
)
def depthwise_conv2d_native_backprop_input(input_sizes, strides, padding, explicit_paddings, dilations):
    """DepthwiseConv2dNative's gradient in its input, of shape `input_sizes`: channel c of
    out_backprop's (c, m) pairs times its filters, added where its windows read."""
    oh, ph = window(input_sizes[1], KH, strides[1], dilations[1], padding, explicit_paddings[2:4])
    ow, pw = window(input_sizes[2], KW, strides[2], dilations[2], padding, explicit_paddings[4:6])
    filter = tensor("filter", (KH, KW, input_sizes[3], M))
    out_backprop = tensor("out_backprop", (input_sizes[0], oh, ow, (input_sizes[3], M)))
    at = sp.KroneckerDelta(h, i * strides[1] + a * dilations[1] - ph) * sp.KroneckerDelta(w, j * strides[2] + b * dilations[2] - pw)
    terms = at * out_backprop[n, i, j, c, m] * filter[a, b, c, m]
    total = sp.Sum(terms, (i, 0, oh - 1), (j, 0, ow - 1), (a, 0, KH - 1), (b, 0, KW - 1), (m, 0, M - 1))
    return {"output": ((n, (h, input_sizes[1]), (w, input_sizes[2]), c), total)}


@op(
    "DepthwiseConv2dNativeBackpropFilter",
    attrs={"filter_sizes": attr(Ints(4), Input(1)), **CONV_ATTRS},
    defaults=CONV_DEFAULTS,
    samples={"filter_sizes": ((2, 3, 3, 2),), **DEPTHWISE_SAMPLES},
)
def depthwise_conv2d_native_backprop_filter(filter_sizes, strides, padding, explicit_paddings, dilations):
    """DepthwiseConv2dNative's gradient in its filter, of shape `filter_sizes`: each window
    of input channel c times out_backprop's (c, m) at the window's position."""
    input = tensor("input", (N, H, W, C))
    oh, ph = window(H, filter_sizes[0], strides[1], dilations[1], padding, explicit_paddings[2:4])
    ow, pw = window(W, filter_sizes[1], strides[2], dilations[2], padding, explicit_paddings[4:6])
    out_backprop = tensor("out_backprop", (N, oh, ow, (C, filter_sizes[3])))
    x = input[n, i * strides[1] + a * dilations[1] - ph, j * strides[2] + b * dilations[2] - pw, c]
    total = sp.Sum(x * out_backprop[n, i, j, c, m], (n, 0, N - 1), (i, 0, oh - 1), (j, 0, ow - 1))
    return {"output": (((a, filter_sizes[0]), (b, filter_sizes[1]), c, (m, filter_sizes[3])), total)}


CONV3D_ATTRS = {"strides": Ints(5), "padding": ("VALID", "SAME"), "dilations": Ints(5)}
CONV3D_SAMPLES = {"strides": ((1, 1, 1, 1, 1), (1, 2, 1, 3, 1))}


@op(
    "Conv3DBackpropInputV2",
    attrs={"input_sizes": attr(Ints(5), Input(0)), **CONV3D_ATTRS},
    defaults={"dilations": (1, 1, 1, 1, 1)},
    samples={"input_sizes": ((2, 4, 5, 3, 2),), **CONV3D_SAMPLES},
)
def conv3d_backprop_input_v2(input_sizes, strides, padding, dilations):
    """Conv3D's gradient in its input, of shape `input_sizes`."""
    od, pd = window(input_sizes[1], KD, strides[1], dilations[1], padding)
    oh, ph = window(input_sizes[2], KH, strides[2], dilations[2], padding)
    ow, pw = window(input_sizes[3], KW, strides[3], dilations[3], padding)
    filter = tensor("filter", (KD, KH, KW, input_sizes[4], O))
    out_backprop = tensor("out_backprop", (input_sizes[0], od, oh, ow, O))
    at = (
        sp.KroneckerDelta(y, z * strides[1] + e * dilations[1] - pd)
        * sp.KroneckerDelta(h, i * strides[2] + a * dilations[2] - ph)
        * sp.KroneckerDelta(w, j * strides[3] + b * dilations[3] - pw)
    )
    terms = at * out_backprop[n, z, i, j, o] * filter[e, a, b, c, o]
    limits = (z, 0, od - 1), (i, 0, oh - 1), (j, 0, ow - 1), (e, 0, KD - 1), (a, 0, KH - 1), (b, 0, KW - 1), (o, 0, O - 1)
    return {"output": ((n, (y, input_sizes[1]), (h, input_sizes[2]), (w, input_sizes[3]), c), sp.Sum(terms, *limits))}


@op(
    "Conv3DBackpropFilterV2",
    attrs={"filter_sizes": attr(Ints(5), Input(1)), **CONV3D_ATTRS},
    defaults={"dilations": (1, 1, 1, 1, 1)},
    samples={"filter_sizes": ((2, 2, 3, 2, 3),), **CONV3D_SAMPLES},
)
def conv3d_backprop_filter_v2(filter_sizes, strides, padding, dilations):
    """Conv3D's gradient in its filter, of shape `filter_sizes`."""
    input = tensor("input", (N, D, H, W, filter_sizes[3]))
    od, pd = window(D, filter_sizes[0], strides[1], dilations[1], padding)
    oh, ph = window(H, filter_sizes[1], strides[2], dilations[2], padding)
    ow, pw = window(W, filter_sizes[2], strides[3], dilations[3], padding)
    out_backprop = tensor("out_backprop", (N, od, oh, ow, filter_sizes[4]))
    x = input[
        n,
        z * strides[1] + e * dilations[1] - pd,
        i * strides[2] + a * dilations[2] - ph,
        j * strides[3] + b * dilations[3] - pw,
        c,
    ]
    total = sp.Sum(x * out_backprop[n, z, i, j, o], (n, 0, N - 1), (z, 0, od - 1), (i, 0, oh - 1), (j, 0, ow - 1))
    return {"output": (((e, filter_sizes[0]), (a, filter_sizes[1]), (b, filter_sizes[2]), c, o), total)}


@op(
    "AvgPoolGrad",
    attrs={"orig_input_shape": attr(Ints(4), Input(0)), **POOL_ATTRS},
    samples={"orig_input_shape": ((2, 5, 6, 3),), **POOL_SAMPLES},
)
def avg_pool_grad(orig_input_shape, ksize, strides, padding):
    """AvgPool's gradient in its input, of shape `orig_input_shape`: each entry of grad
    divided by its window's count, added at the positions the window read."""
    H_, W_ = orig_input_shape[1], orig_input_shape[2]
    kh, kw = ksize[1], ksize[2]
    oh, ph = window(H_, kh, strides[1], 1, padding)
    ow, pw = window(W_, kw, strides[2], 1, padding)
    grad = tensor("grad", (orig_input_shape[0], oh, ow, orig_input_shape[3]))
    row, col = i * strides[1] + a - ph, j * strides[2] + b - pw
    count = sp.Sum(indicator(sp.And(row >= 0, row <= H_ - 1, col >= 0, col <= W_ - 1)), (a, 0, kh - 1), (b, 0, kw - 1))
    at = sp.KroneckerDelta(h, i * strides[1] + e - ph) * sp.KroneckerDelta(w, j * strides[2] + m - pw)
    total = sp.Sum(at * grad[n, i, j, c] / count, (i, 0, oh - 1), (j, 0, ow - 1), (e, 0, kh - 1), (m, 0, kw - 1))
    return {"output": ((n, (h, H_), (w, W_), c), total)}


@op(
    "AvgPool3DGrad",
    attrs={"orig_input_shape": attr(Ints(5), Input(0)), "ksize": Ints(5), "strides": Ints(5), "padding": ("VALID", "SAME")},
    samples={"orig_input_shape": ((2, 4, 5, 3, 2),), "ksize": ((1, 2, 2, 2, 1),), "strides": ((1, 2, 2, 2, 1), (1, 1, 2, 1, 1))},
)
def avg_pool3d_grad(orig_input_shape, ksize, strides, padding):
    """AvgPool3D's gradient in its input, of shape `orig_input_shape`."""
    D_, H_, W_ = orig_input_shape[1], orig_input_shape[2], orig_input_shape[3]
    od, pd = window(D_, ksize[1], strides[1], 1, padding)
    oh, ph = window(H_, ksize[2], strides[2], 1, padding)
    ow, pw = window(W_, ksize[3], strides[3], 1, padding)
    grad = tensor("grad", (orig_input_shape[0], od, oh, ow, orig_input_shape[4]))
    depth, row, col = z * strides[1] + e - pd, i * strides[2] + a - ph, j * strides[3] + b - pw
    inside = sp.And(depth >= 0, depth <= D_ - 1, row >= 0, row <= H_ - 1, col >= 0, col <= W_ - 1)
    count = sp.Sum(indicator(inside), (e, 0, ksize[1] - 1), (a, 0, ksize[2] - 1), (b, 0, ksize[3] - 1))
    u, v, t = indices("u v t")
    at = (
        sp.KroneckerDelta(y, z * strides[1] + t - pd)
        * sp.KroneckerDelta(h, i * strides[2] + u - ph)
        * sp.KroneckerDelta(w, j * strides[3] + v - pw)
    )
    limits = (z, 0, od - 1), (i, 0, oh - 1), (j, 0, ow - 1), (t, 0, ksize[1] - 1), (u, 0, ksize[2] - 1), (v, 0, ksize[3] - 1)
    return {"output": ((n, (y, D_), (h, H_), (w, W_), c), sp.Sum(at * grad[n, z, i, j, c] / count, *limits))}





POSITIONS = (h, w, y)  # an input entry's spatial position


def _routing(x, sums, out):
    """Declares `orig_output`, the window maxima of `x` (MaxPool's output: padding never
    wins, the gradient to a window's first maximum), and returns d maxima / d x[n, *p, c]
    (a sum over the window) as (summand, window limits, positions p); `out` is the maxima's
    indices with sizes, (n, (i, oh), ..., c)."""
    pooled = first_maximum(read_outside(x, -sp.oo), *sums)
    windows = out[1:-1]
    tensor("orig_output", (N, *(size for _, size in windows), C), equals=((out[0], *(u for u, _ in windows), out[-1]), pooled))
    spatial = POSITIONS[: len(windows)]
    routed = sp.diff(pooled, x.base[(out[0], *spatial, out[-1])])
    return routed.function, routed.limits, spatial


def _routed_back(x, out, sums):
    """MaxPool's gradient in its input: each window's `grad` added at its first maximum."""
    summand, window, spatial = _routing(x, sums, out)
    windows = out[1:-1]
    grad = tensor("grad", (N, *(size for _, size in windows), C))
    total = sp.Sum(grad[(out[0], *(u for u, _ in windows), out[-1])] * summand, *window, *((u, 0, size - 1) for u, size in windows))
    return {"output": ((out[0], *zip(spatial, x.base.shape[1:-1]), out[-1]), total)}


def _read_at_maxima(x, out, sums):
    """MaxPoolGrad's gradient in its `grad`: `grad` read at each window's first maximum."""
    summand, window, spatial = _routing(x, sums, out)
    grad = tensor("grad", x.base.shape)
    positions = ((p, 0, size - 1) for p, size in zip(spatial, x.base.shape[1:-1]))
    return {"output": (out, sp.Sum(grad[(out[0], *spatial, out[-1])] * summand, *window, *positions))}


@op("MaxPoolGrad", attrs={**POOL_ATTRS, "data_format": ("NHWC",)}, samples=POOL_SAMPLES)
def max_pool_grad(ksize, strides, padding, data_format):
    """MaxPool's gradient in its input `orig_input`: each window's `grad` added at the first
    entry attaining the window's maximum, `orig_output` (MaxPool of `orig_input`)."""
    return _routed_back(*_pool_window("orig_input", ksize, strides, padding)[:3])


V2_WINDOW = {"ksize": attr(Ints(), Input(3)), "strides": attr(Ints(), Input(4)), "padding": ("VALID", "SAME")}


@op("MaxPoolGradV2", attrs=V2_WINDOW, samples=POOL_SAMPLES)
def max_pool_grad_v2(ksize, strides, padding):
    """MaxPoolGrad with the window and strides passed as constant inputs."""
    return _routed_back(*_pool_window("orig_input", ksize, strides, padding)[:3])


@op("MaxPoolGradGrad", attrs={**POOL_ATTRS, "data_format": ("NHWC",)}, samples=POOL_SAMPLES)
def max_pool_gradgrad(ksize, strides, padding, data_format):
    """MaxPoolGrad's gradient in its `grad`: `grad` (shaped as `orig_input`) read at each
    window's first maximum, `orig_output`."""
    return _read_at_maxima(*_pool_window("orig_input", ksize, strides, padding)[:3])


@op("MaxPool3DGrad", attrs={**POOL_3D_ATTRS, "data_format": ("NDHWC",)}, samples=POOL_3D_SAMPLES)
def max_pool3d_grad(ksize, strides, padding, data_format):
    """MaxPool3D's gradient in its input `orig_input`, as MaxPoolGrad's."""
    return _routed_back(*_window_3d("orig_input", ksize, strides, padding))


@op("MaxPool3DGradGrad", attrs={**POOL_3D_ATTRS, "data_format": ("NDHWC",)}, samples=POOL_3D_SAMPLES)
def max_pool3d_gradgrad(ksize, strides, padding, data_format):
    """MaxPool3DGrad's gradient in its `grad`, as MaxPoolGradGrad's."""
    return _read_at_maxima(*_window_3d("orig_input", ksize, strides, padding))
