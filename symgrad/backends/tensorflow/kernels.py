"""The convolution and pooling helpers generated TensorFlow modules call, in TensorFlow's
layouts (NHWC, HWIO): geometry, padding, the kernels and their backprops. Part of the runtime
module generated modules import from, as `runtime.py`'s helpers are (`RUNTIME` names both
files).
"""

from __future__ import annotations

import tensorflow as tf


class _UnknownSize(Exception):
    """An axis size not known while tracing."""


def _static_size(x, axis):
    size = x.shape[axis]
    if size is None:
        raise _UnknownSize
    return size


def _conv_geometry(geometry):
    """(pads, sizes) of a convolution from `geometry(size)`: Python ints where the sizes it
    reads are known while tracing, else int64 tensors."""
    try:
        return geometry(_static_size)
    except _UnknownSize:
        return geometry(lambda x, axis: tf.shape(x, out_type=tf.int64)[axis])


def _int_max(a, b):
    """The larger of two integers: a Python int where both are."""
    if tf.is_tensor(a) or tf.is_tensor(b):
        return tf.math.maximum(tf.cast(a, tf.int64), tf.cast(b, tf.int64))
    return max(a, b)


def _int_min(a, b):
    """The smaller of two integers: a Python int where both are."""
    if tf.is_tensor(a) or tf.is_tensor(b):
        return tf.math.minimum(tf.cast(a, tf.int64), tf.cast(b, tf.int64))
    return min(a, b)


def _sizes(x, first, stop):
    """Axes `first` to `stop - 1` of `x`'s shape: Python ints where known, else int64 tensors."""
    dynamic = tf.shape(x, out_type=tf.int64)
    static = tf.TensorShape(x.shape)  # x may be a numpy array
    static = [None] * stop if static.rank is None else static
    return [static[n] if static[n] is not None else dynamic[n] for n in range(first, stop)]


def _is_int(*values):
    return all(isinstance(v, int) for group in values for v in group)


def _int32_vector(values):
    if _is_int(values):
        return list(values)
    return tf.cast(tf.stack([tf.cast(v, tf.int64) for v in values]), tf.int32)


def _conv_spans(strides, dilations, counts, kernel):
    """How many input entries `counts` windows of `kernel` entries take, per spatial axis."""
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise ValueError(f"convolution strides and dilations must be positive, got {strides}, {dilations}")
    return [(q - 1) * s + (k - 1) * d + 1 for s, d, q, k in zip(strides, dilations, counts, kernel)]


def _padding_attrs(strides, dilations, pads, spans, extents, kernel):
    """TensorFlow's `padding` and `explicit_paddings` giving windows over exactly `spans`
    entries from `-pads`, or None where no non-negative padding does (or the sizes are not
    known while tracing). "SAME" or "VALID" where they are that padding: the CPU's backprop
    kernels are faster with them than with "EXPLICIT"."""
    if len(strides) != 2 or not _is_int(pads, spans, extents, kernel):
        return None
    afters = [q - h - p for q, h, p in zip(spans, extents, pads)]
    if any(p < 0 for p in pads) or any(a <= -s for a, s in zip(afters, strides)):
        return None  # windows past the end of the input would be counted
    if all(p == 0 and a <= 0 for p, a in zip(pads, afters)):
        return "VALID", []
    counts = [(q - (k - 1) * d - 1) // s + 1 for q, k, d, s in zip(spans, kernel, dilations, strides)]
    same = [max((-(-h // s) - 1) * s + (k - 1) * d + 1 - h, 0) // 2 for h, s, k, d in zip(extents, strides, kernel, dilations)]
    if same == list(pads) and counts == [-(-h // s) for h, s in zip(extents, strides)]:
        return "SAME", []
    return "EXPLICIT", [0, 0] + [n for p, a in zip(pads, afters) for n in (p, max(a, 0))] + [0, 0]


def _window_span(x, pads, spans, fill=0):
    """`x` cut or padded with `fill` along its spatial axes (all but the first and last) so
    that spatial axis n holds `spans[n]` entries from position `-pads[n]` of `x`'s."""
    extents = _sizes(x, 1, len(pads) + 1)
    if _is_int(pads, spans, extents) and all(p == 0 and q == h for p, q, h in zip(pads, spans, extents)):
        return x
    widths = [[_int_max(p, 0), _int_max(q - h - p, 0)] for p, q, h in zip(pads, spans, extents)]
    x = tf.pad(x, [[0, 0]] + widths + [[0, 0]], constant_values=fill)
    cut = tuple(slice(_int_max(-p, 0), _int_max(-p, 0) + q) for p, q in zip(pads, spans))
    return x[(slice(None),) + cut + (slice(None),)]


def _window_unspan(x, pads, sizes):
    """The adjoint view of `_window_span`: entries `pads[n]` to `pads[n] + sizes[n] - 1` of
    spatial axis n of `x`, zero where `x` has none."""
    extents = _sizes(x, 1, len(pads) + 1)
    widths = [[_int_max(-p, 0), _int_max(h + p - q, 0)] for p, h, q in zip(pads, sizes, extents)]
    x = tf.pad(x, [[0, 0]] + widths + [[0, 0]])
    cut = tuple(slice(_int_max(p, 0), _int_max(p, 0) + h) for p, h in zip(pads, sizes))
    return x[(slice(None),) + cut + (slice(None),)]


def _attr(values):
    return [1] + [int(v) for v in values] + [1]


def _raw_conv(x, f, strides, dilations, padding="VALID", explicit=()):
    """TensorFlow's Conv2D or Conv3D kernel."""
    if len(strides) == 2:
        return tf.raw_ops.Conv2D(
            input=x, filter=f, strides=_attr(strides), padding=padding,
            explicit_paddings=list(explicit), dilations=_attr(dilations),
        )
    return tf.raw_ops.Conv3D(input=x, filter=f, strides=_attr(strides), padding=padding, dilations=_attr(dilations))


def _one_spatial_axis(kernel, operands, unit_axes, squeezed, strides, dilations, geometry):
    """`kernel` over one spatial axis, which TensorFlow's kernels (2-D and 3-D) lack: run over
    a unit height (each operand given a size-1 axis at `unit_axes`, no padding there; its
    stride the other's, which a depthwise kernel needs equal, and which one entry ignores)
    and that axis taken away again (axis `squeezed` of the result)."""
    lifted = [tf.expand_dims(x, axis) for x, axis in zip(operands, unit_axes)]

    def geometry_2d(size):
        pads, sizes = geometry(size)
        return [0] + list(pads), [1] + list(sizes)

    result = kernel(*lifted, [strides[0]] + list(strides), [1] + list(dilations), geometry_2d)
    return tf.squeeze(result, squeezed)


def _conv(x, f, strides, dilations, geometry):
    """`y[n, *u, o] = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, o], k, c)`, zero outside `x`."""
    if len(strides) == 1:
        return _one_spatial_axis(_conv, (x, f), (1, 0), 1, strides, dilations, geometry)
    pads, sizes = _conv_geometry(geometry)
    rank = len(strides)
    spans = _conv_spans(strides, dilations, sizes, _sizes(f, 0, rank))
    padding = _padding_attrs(strides, dilations, pads, spans, _sizes(x, 1, rank + 1), _sizes(f, 0, rank))
    if padding is not None:
        return _raw_conv(x, f, strides, dilations, *padding)
    return _raw_conv(_window_span(x, pads, spans), f, strides, dilations)


def _conv_backprop_filter(x, g, strides, dilations, geometry):
    """`df[*k, c, o] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, o], n, u)`."""
    if len(strides) == 1:
        return _one_spatial_axis(_conv_backprop_filter, (x, g), (1, 1), 0, strides, dilations, geometry)
    pads, sizes = _conv_geometry(geometry)
    rank = len(strides)
    spans = _conv_spans(strides, dilations, _sizes(g, 1, rank + 1), sizes)
    if any(d != 1 for d in dilations):  # no CPU kernel: a forward convolution, roles swapped
        xt = tf.transpose(_window_span(x, pads, spans), [rank + 1] + list(range(1, rank + 1)) + [0])
        gt = tf.transpose(g, list(range(1, rank + 1)) + [0, rank + 1])
        return tf.transpose(_raw_conv(xt, gt, dilations, strides), list(range(1, rank + 1)) + [0, rank + 1])
    filter_sizes = _int32_vector(list(sizes) + [_sizes(x, rank + 1, rank + 2)[0], _sizes(g, rank + 1, rank + 2)[0]])
    padding = _padding_attrs(strides, dilations, pads, spans, _sizes(x, 1, rank + 1), sizes)
    if padding is not None:
        return tf.raw_ops.Conv2DBackpropFilter(
            input=x, filter_sizes=filter_sizes, out_backprop=g, strides=_attr(strides),
            padding=padding[0], explicit_paddings=padding[1], dilations=_attr(dilations),
        )
    kernel = tf.raw_ops.Conv2DBackpropFilter if rank == 2 else tf.raw_ops.Conv3DBackpropFilterV2
    return kernel(
        input=_window_span(x, pads, spans), filter_sizes=filter_sizes, out_backprop=g,
        strides=_attr(strides), padding="VALID",
    )


def _zero_inserted(g, axis, stride, rank):
    """`g` with `stride - 1` zeros between neighbours along spatial axis `axis`."""
    if stride == 1:
        return g
    shape = tf.shape(g, out_type=tf.int64)
    paddings = [[0, 0]] * (rank + 3)
    paddings[axis + 1] = [0, stride - 1]
    spread = tf.pad(tf.expand_dims(g, axis + 1), paddings)
    merged = tf.concat([shape[:axis], shape[axis : axis + 1] * stride, shape[axis + 1 :]], 0)
    keep = (shape[axis] - 1) * stride + 1
    return tf.gather(tf.reshape(spread, merged), tf.range(keep), axis=axis)


def _conv_backprop_input(g, f, strides, dilations, geometry):
    """`dx[n, *h, c] = sum(g[n, *((h + p - k*d) / s), o] * f[*k, c, o], k, o)`, where s divides."""
    if len(strides) == 1:
        return _one_spatial_axis(_conv_backprop_input, (g, f), (1, 0), 1, strides, dilations, geometry)
    pads, sizes = _conv_geometry(geometry)
    rank = len(strides)
    kernel = _sizes(f, 0, rank)
    spans = _conv_spans(strides, dilations, _sizes(g, 1, rank + 1), kernel)
    if any(d != 1 for d in dilations):  # no CPU kernel: the zero-inserted upstream, filter flipped
        for axis, s in enumerate(strides):
            g = _zero_inserted(g, axis + 1, s, rank)
        reach = [[(k - 1) * d] * 2 for k, d in zip(kernel, dilations)]
        g = tf.pad(g, [[0, 0]] + reach + [[0, 0]])
        flipped = tf.transpose(tf.reverse(f, list(range(rank))), list(range(rank)) + [rank + 1, rank])
        return _window_unspan(_raw_conv(g, flipped, [1] * rank, dilations), pads, sizes)
    batch, channels = _sizes(g, 0, 1), _sizes(f, rank, rank + 1)
    padding = _padding_attrs(strides, dilations, pads, spans, sizes, kernel)
    if padding is not None:
        return tf.raw_ops.Conv2DBackpropInput(
            input_sizes=_int32_vector(batch + list(sizes) + channels), filter=f, out_backprop=g,
            strides=_attr(strides), padding=padding[0], explicit_paddings=padding[1], dilations=_attr(dilations),
        )
    op = tf.raw_ops.Conv2DBackpropInput if rank == 2 else tf.raw_ops.Conv3DBackpropInputV2
    dx = op(input_sizes=_int32_vector(batch + spans + channels), filter=f, out_backprop=g, strides=_attr(strides), padding="VALID")
    return _window_unspan(dx, pads, sizes)


def _dilated_filter(f, dilations):
    """`f` with `d - 1` zeros between neighbours along its spatial axes: the same taps at
    dilation 1 over `(k - 1)*d + 1` positions."""
    for axis, d in enumerate(dilations):
        f = _zero_inserted(f, axis, d, len(dilations))
    return f


def _depthwise_kernel_geometry(strides, dilations):
    """(the stride given to the CPU's depthwise kernels, whether it differs from `strides`):
    they take one stride for both spatial axes, so unequal strides run at stride 1 (the
    forward subsampled, the upstream zero-inserted). Dilations above 1 they refuse or ignore:
    the callers dilate the filter with zeros instead."""
    equal = len(set(int(s) for s in strides)) == 1
    return (int(strides[0]) if equal else 1), not equal


def _merged_channels(g):
    """`g[n, *u, c, m]` as `g[n, *u, c*M + m]`, the layout of TensorFlow's depthwise kernels."""
    return tf.reshape(g, _int32_vector(_sizes(g, 0, len(g.shape) - 2) + [-1]))


def _depthwise_conv(x, f, strides, dilations, geometry):
    """`y[n, *u, c, m] = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, m], k)`, zero outside `x`."""
    if len(strides) == 1:
        return _one_spatial_axis(_depthwise_conv, (x, f), (1, 0), 1, strides, dilations, geometry)
    pads, sizes = _conv_geometry(geometry)
    rank = len(strides)
    kernel = _sizes(f, 0, rank)
    spans = _conv_spans(strides, dilations, sizes, kernel)
    stride, rewritten = _depthwise_kernel_geometry(strides, dilations)
    if not rewritten and all(d == 1 for d in dilations):
        padding = _padding_attrs(strides, dilations, pads, spans, _sizes(x, 1, rank + 1), kernel)
    else:
        padding = None
    if padding is not None:
        y = tf.raw_ops.DepthwiseConv2dNative(
            input=x, filter=f, strides=_attr(strides), padding=padding[0], explicit_paddings=padding[1],
        )
    else:  # windows over exactly the spans; a dilated filter and subsampling where the kernel cannot
        y = tf.raw_ops.DepthwiseConv2dNative(
            input=_window_span(x, pads, spans), filter=_dilated_filter(f, dilations),
            strides=_attr([stride] * rank), padding="VALID",
        )
        if rewritten:
            y = y[(slice(None),) + tuple(slice(None, None, int(s)) for s in strides) + (slice(None),)]
    return tf.reshape(y, _int32_vector(_sizes(y, 0, rank + 1) + _sizes(f, rank, rank + 2)))


def _depthwise_conv_backprop_filter(x, g, strides, dilations, geometry):
    """`df[*k, c, m] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, c, m], n, u)`."""
    if len(strides) == 1:
        return _one_spatial_axis(_depthwise_conv_backprop_filter, (x, g), (1, 1), 0, strides, dilations, geometry)
    pads, sizes = _conv_geometry(geometry)
    rank = len(strides)
    spans = _conv_spans(strides, dilations, _sizes(g, 1, rank + 1), sizes)
    channels = _sizes(g, rank + 1, rank + 3)
    stride, rewritten = _depthwise_kernel_geometry(strides, dilations)
    if not rewritten and all(d == 1 for d in dilations):
        padding = _padding_attrs(strides, dilations, pads, spans, _sizes(x, 1, rank + 1), sizes)
        if padding is not None:
            return tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
                input=x, filter_sizes=_int32_vector(list(sizes) + channels), out_backprop=_merged_channels(g),
                strides=_attr(strides), padding=padding[0], explicit_paddings=padding[1],
            )
    if rewritten:  # stride 1 over the zero-inserted upstream
        for axis, s in enumerate(strides):
            g = _zero_inserted(g, axis + 1, s, rank + 1)
    # the taps of a dilated filter, every d-th kept
    dilated = [(k - 1) * d + 1 for k, d in zip(sizes, dilations)]
    df = tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
        input=_window_span(x, pads, spans), filter_sizes=_int32_vector(dilated + channels),
        out_backprop=_merged_channels(g), strides=_attr([stride] * rank), padding="VALID",
    )
    if any(d != 1 for d in dilations):
        df = df[tuple(slice(None, None, int(d)) for d in dilations)]
    return df


def _depthwise_conv_backprop_input(g, f, strides, dilations, geometry):
    """`dx[n, *h, c] = sum(g[n, *((h + p - k*d) / s), c, m] * f[*k, c, m], k, m)`, where s divides."""
    if len(strides) == 1:
        return _one_spatial_axis(_depthwise_conv_backprop_input, (g, f), (1, 0), 1, strides, dilations, geometry)
    pads, sizes = _conv_geometry(geometry)
    rank = len(strides)
    kernel = _sizes(f, 0, rank)
    spans = _conv_spans(strides, dilations, _sizes(g, 1, rank + 1), kernel)
    batch, channels = _sizes(g, 0, 1), _sizes(f, rank, rank + 1)
    stride, rewritten = _depthwise_kernel_geometry(strides, dilations)
    if not rewritten and all(d == 1 for d in dilations):
        padding = _padding_attrs(strides, dilations, pads, spans, sizes, kernel)
        if padding is not None:
            return tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
                input_sizes=_int32_vector(batch + list(sizes) + channels), filter=f,
                out_backprop=_merged_channels(g), strides=_attr(strides),
                padding=padding[0], explicit_paddings=padding[1],
            )
    if rewritten:  # stride 1 over the zero-inserted upstream
        for axis, s in enumerate(strides):
            g = _zero_inserted(g, axis + 1, s, rank + 1)
    dx = tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
        input_sizes=_int32_vector(batch + spans + channels), filter=_dilated_filter(f, dilations),
        out_backprop=_merged_channels(g), strides=_attr([stride] * rank), padding="VALID",
    )
    return _window_unspan(dx, pads, sizes)


def _max_pool_backprop(x, y, g, window, strides, geometry):
    """`dx[n, *h, c]`: each window's `g[n, *u, c]` added at the first entry (row-major) of
    window u of `x`, read at `u*s + k - p` (padding never the maximum), equal to its maximum
    `y[n, *u, c]`: TensorFlow's MaxPoolGrad, which routes a window's gradient so."""
    pads, sizes = _conv_geometry(geometry)
    spans = [(q - 1) * s + k for q, s, k in zip(_sizes(g, 1, len(strides) + 1), strides, window)]
    padding = _padding_attrs(strides, [1] * len(strides), pads, spans, sizes, window)
    if padding is not None:
        return _raw_max_pool_grad(x, y, g, window, strides, *padding)
    spanned = _window_span(x, pads, spans, fill=float("-inf"))
    if len(strides) != 2:  # MaxPool3DGrad routes to every entry near the maximum, not the first
        return _window_unspan(_first_maximum_routed(spanned, y, g, window, strides), pads, sizes)
    return _window_unspan(_raw_max_pool_grad(spanned, y, g, window, strides), pads, sizes)


def _first_maximum_routed(x, y, g, window, strides):
    """`_max_pool_backprop` over windows from position 0 of `x`, any number of spatial axes:
    a loop over the window's positions, each a strided slice of `x`, its share added back
    with zeros between neighbours."""
    rank, counts, extents = len(strides), _sizes(g, 1, len(strides) + 1), _sizes(x, 1, len(strides) + 1)
    dx = tf.zeros_like(x, dtype=g.dtype)
    unclaimed = tf.ones_like(g, dtype=tf.bool)
    offsets = [()]
    for size in window:  # the window's positions in row-major order
        offsets = [k + (j,) for k in offsets for j in range(size)]
    for k in offsets:
        cut = tuple(slice(j, j + (q - 1) * s + 1, s) for j, q, s in zip(k, counts, strides))
        first = tf.logical_and(unclaimed, tf.equal(x[(slice(None),) + cut], y))
        share = tf.where(first, g, tf.zeros_like(g))
        for axis, s in enumerate(strides):
            share = _zero_inserted(share, axis + 1, s, rank)
        widths = [[j, h - j - (q - 1) * s - 1] for j, q, s, h in zip(k, counts, strides, extents)]
        dx += tf.pad(share, [[0, 0]] + widths + [[0, 0]])
        unclaimed = tf.logical_and(unclaimed, tf.logical_not(first))
    return dx


def _raw_max_pool_grad(x, y, g, window, strides, padding="VALID", explicit=()):
    """MaxPoolGrad, or MaxPoolGradV2 where the window or strides are tensors (read at run time)."""
    if not _is_int(window, strides):
        return tf.raw_ops.MaxPoolGradV2(
            orig_input=x, orig_output=y, grad=g, ksize=_int32_vector([1, *window, 1]),
            strides=_int32_vector([1, *strides, 1]), padding=padding,
        )
    return tf.raw_ops.MaxPoolGrad(
        orig_input=x, orig_output=y, grad=g, ksize=_attr(window), strides=_attr(strides),
        padding=padding, explicit_paddings=list(explicit),
    )
