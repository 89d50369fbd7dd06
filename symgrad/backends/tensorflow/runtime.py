"""The helpers generated TensorFlow modules call, as real Python: `render` copies the source of
each one a module refers to (and of the helpers those refer to) into it, in this order, so that
generated files import nothing of symgrad and carry only the helpers they use.

`REGISTERED`, which `_register` fills, is the generated module's own (its template defines it).
"""

from __future__ import annotations

import tensorflow as tf

REGISTERED = {}  # in a generated module: op type -> the names its gradient is registered under


def _register(op_type, gradient_fn):
    """Register `gradient_fn` as `Symgrad<op_type>`, and as `op_type` where that is free."""
    names = []
    for name in (op_type, "Symgrad" + op_type):
        try:
            tf.RegisterGradient(name)(gradient_fn)
            names.append(name)
        except KeyError:  # TensorFlow's own gradient, or this module imported twice
            pass
    REGISTERED[op_type] = tuple(names)


_KERNELS = {}


def _tf_kernel(op_type, count, inputs, attrs, list_output=False):
    """The outputs (a list of `count`) of TensorFlow's own kernel of `op_type`,
    `tf.raw_ops.<op_type>`, on `inputs` (TensorFlow's input names -> tensors; a list input as a
    tuple) and `attrs`; None where TensorFlow has no op of that type or does not run it on
    inputs of these dtypes and shapes with these attributes: there the declared formula
    computes the forward."""
    raw = getattr(tf.raw_ops, op_type, None)
    if raw is None:
        return None
    tensors = {
        name: [tf.convert_to_tensor(v) for v in value] if isinstance(value, tuple) else tf.convert_to_tensor(value)
        for name, value in inputs.items()
    }
    signature = tuple(
        (name, tuple(_spec(v) for v in value) if isinstance(value, list) else _spec(value))
        for name, value in tensors.items()
    )
    key = (op_type, signature, repr(sorted(attrs.items())))
    if key not in _KERNELS:
        _KERNELS[key] = _runs(raw, signature, attrs)
    if not _KERNELS[key]:
        return None
    outputs = raw(**tensors, **attrs)
    if list_output:
        return [tuple(outputs)]
    outputs = [outputs] if isinstance(outputs, tf.Tensor) else list(outputs)
    return outputs if len(outputs) == count else None


def _spec(x):
    """A tensor's dtype and static shape (None: unknown rank), hashable."""
    return x.dtype, None if x.shape.rank is None else tuple(x.shape.as_list())


def _runs(raw, signature, attrs):
    """Whether TensorFlow runs op `raw` on inputs of `signature` with `attrs`, tried once,
    eagerly, on zeros (a size unknown while tracing as 1): its definition may refuse the
    dtypes, its kernel be missing for them or refuse the attributes (the CPU kernel of
    DepthwiseConv2dNative takes only equal strides), where the declared formula does not."""

    def zeros(spec):
        dtype, shape = spec
        return tf.zeros([] if shape is None else [1 if d is None else d for d in shape], dtype)

    with tf.init_scope():  # eagerly, also while a tf.function traces
        try:
            probe = {  # a list input's spec is a tuple of specs
                name: zeros(spec) if spec and isinstance(spec[0], tf.DType) else [zeros(s) for s in spec]
                for name, spec in signature
            }
            raw(**probe, **attrs)
        except Exception:  # refused: the declared formula
            return False
    return True




def _string_attr(op, name):
    """A string attribute of `op` as `str` (graph ops give bytes)."""
    value = op.get_attr(name)
    return value.decode() if isinstance(value, bytes) else value


def _const_input(op, index):
    """The value of constant input `index` of `op` (an axis), as a Python int or tuple."""
    value = tf.get_static_value(op.inputs[index])
    if value is None:
        raise ValueError(f"{op.type}: input {index} must be a constant known when the graph is built")
    return value.item() if value.ndim == 0 else tuple(value.tolist())


def _insert_none(grads, positions):
    """One gradient per op input: None for the constant inputs at `positions`."""
    grads = list(grads)
    for position in positions:
        grads.insert(position, None)
    return grads


def _sum_to_shape(g, x):
    """Sum a broadcast gradient `g` back to the shape of `x`, as TensorFlow's own gradients do."""
    g = tf.convert_to_tensor(g)
    if g.shape.is_fully_defined() and g.shape == x.shape:
        return g
    shape = tf.shape(x)
    axes, _ = tf.raw_ops.BroadcastGradientArgs(s0=shape, s1=tf.shape(g))
    return tf.reshape(tf.reduce_sum(g, axes), shape)


def _einsum_over_batch(spec, *operands):
    """`tf.einsum(spec, ...)` where `spec` sums the leading `...` axes away, which TensorFlow's
    einsum refuses: they are kept, then summed."""
    inputs, output = spec.split("->")
    product = tf.einsum(f"{inputs}->...{output}", *operands)
    return tf.reduce_sum(product, axis=tf.range(tf.rank(product) - len(output)))


def _cumprod(x, axis, exclusive=False, reverse=False):
    """`tf.math.cumprod` with a gradient that never divides by x. TensorFlow's divides, and so
    is wrong where x is 0: in a second order it is the gradient of a product's gradient."""

    @tf.custom_gradient
    def cumprod(x):
        def backward(grad):
            return _cumprod_vjp(grad, x, axis, exclusive, reverse)

        return tf.math.cumprod(x, axis=axis, exclusive=exclusive, reverse=reverse), backward

    return cumprod(x)


def _cumprod_vjp(grad, x, axis, exclusive, reverse):
    """The derived gradient of a cumulative product (`symgrad.lowering.recurrences`): entry m
    is the product of the entries before m times a linear recurrence of `grad` (the sum over
    results i from m on of grad[i] times the product of the entries after m up to i): no
    division, so exact at zeros and differentiable again."""
    if reverse:
        flip = lambda t: tf.reverse(t, [axis])
        return flip(_cumprod_vjp(flip(grad), flip(x), axis, exclusive, False))
    x = tf.math.conj(x)
    before = _cumprod(x, axis, exclusive=True)
    if exclusive:  # result i is the product of the entries before i
        return before * _linear_scan(grad, x, axis, exclusive=True, reverse=True)
    return before * (grad + _linear_scan(grad * x, x, axis, exclusive=True, reverse=True))


def _linear_scan(x, by, axis, exclusive=False, reverse=False):
    """y[m] = x[m] + by[m] * y[m - 1] along `axis` (y[m + 1] with `reverse`; `exclusive`: each
    result one step on, 0 first): the sum over i <= m of x[i] times the product of `by` over
    i < k <= m, a cumulative product's gradient without a division. By recursive doubling:
    ceil(log2 n) steps of whole-array products and sums, each differentiable again. The
    axis's length must be known when the function is traced."""
    x, by = x + tf.zeros_like(by), by + tf.zeros_like(x)  # broadcast, static shapes kept
    if reverse:
        flip = lambda t: tf.reverse(t, [axis])
        return flip(_linear_scan(flip(x), flip(by), axis, exclusive))
    size = x.shape[axis]
    if size is None:
        raise ValueError(f"_linear_scan: the length of axis {axis} is not known when traced")
    step = 1
    while step < size:
        x, by = x + by * _shift_right(x, axis, 0, step), by * _shift_right(by, axis, 0, step)
        step *= 2
    return _shift_right(x, axis, 0) if exclusive else x


def _shift_right(x, axis, fill, steps=1):
    """`x` moved `steps` along `axis` (of a length known when traced), `fill` first."""
    size = x.shape[axis]
    first = tf.zeros_like(tf.gather(x, tf.range(steps), axis=axis)) + fill
    return tf.concat([first, tf.gather(x, tf.range(size - steps), axis=axis)], axis=axis)


def _split_exp(value, u):
    """`value * exp(u)` with the exp in two halves, multiplied one after the other: finite
    wherever the product is, though exp(u) alone may overflow (Ei's derivative exp(x) / x; a
    Bessel I from its scaled kernel, where TensorFlow's `bessel_i0` and `bessel_i1` multiply by
    exp(|x|) at once: inf from |x| = 88.7 in float32, where I0 is below 2e37)."""
    half = tf.math.exp(u / 2)
    return value * half * half


def _bessel_i0(x):
    """I0, finite up to where it overflows (`_split_exp`)."""
    return _split_exp(tf.math.special.bessel_i0e(x), tf.math.abs(x))


def _bessel_i1(x):
    """I1, finite up to where it overflows (`_split_exp`), with its derivative 1/2 at 0 by
    a guarded division: TensorFlow's gradient of `bessel_i1` is 1 there, and that of
    `bessel_i1e` NaN when differentiated again (its untaken branch divides by x)."""

    @tf.custom_gradient
    def bessel_i1(x):
        def backward(grad):
            at_zero = tf.equal(x, 0)
            safe = tf.where(at_zero, tf.ones_like(x), x)
            scaled = tf.math.special.bessel_i0e(safe) - tf.math.special.bessel_i1e(safe) / safe
            slope = _split_exp(scaled, tf.math.abs(safe))
            return grad * tf.where(at_zero, tf.fill(tf.shape(x), tf.constant(0.5, x.dtype)), slope)

        return _split_exp(tf.math.special.bessel_i1e(x), tf.math.abs(x)), backward

    return bessel_i1(x)


def _gather(x, positions, axis, fill=0):
    """`x` read along `axis` (negative) at integer `positions`, whose axes replace that axis;
    positions outside the axis read as `fill` (the padding of an index map)."""
    positions = tf.cast(positions, tf.int64)
    size = tf.shape(x, out_type=tf.int64)[axis]
    inside = (positions >= 0) & (positions < size)
    taken = tf.gather(x, tf.where(inside, positions, tf.zeros_like(positions)), axis=axis)
    trailing = tf.ones([-axis - 1], tf.int32)
    inside = tf.reshape(inside, tf.concat([tf.shape(inside), trailing], 0))
    return tf.where(inside, taken, tf.fill(tf.shape(taken), tf.constant(fill, taken.dtype)))


def _scatter_add(values, positions, trailing, size):
    """The adjoint of `_gather`: the axes of `values` that `positions` has (those before the
    last `trailing`) are summed into `size` slots at `positions`; positions outside 0..size-1
    are dropped. A scatter-add, as TensorFlow's unsorted segment sum."""
    values = tf.convert_to_tensor(values)
    positions = tf.cast(positions, tf.int64)
    size = tf.cast(size, tf.int64)
    count = positions.shape.rank
    lead = max(0, count + trailing - values.shape.rank)
    values = tf.reshape(values, tf.concat([tf.ones([lead], tf.int32), tf.shape(values)], 0))
    rank = values.shape.rank
    start = rank - trailing - count
    shape = tf.shape(values)
    values = tf.broadcast_to(values, tf.concat([shape[:start], tf.shape(positions), shape[start + count :]], 0))
    perm = list(range(start, start + count)) + list(range(start)) + list(range(start + count, rank))
    moved = tf.transpose(values, perm)
    flat = tf.reshape(positions, [-1])
    slots = tf.where((flat >= 0) & (flat < size), flat, size)  # outside: one extra slot, dropped
    data = tf.reshape(moved, tf.concat([[-1], tf.shape(moved)[count:]], 0))
    summed = tf.math.unsorted_segment_sum(data, slots, size + 1)[:size]
    back = list(range(1, start + 1)) + [0] + list(range(start + 1, rank - count + 1))
    return tf.transpose(summed, back)


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


def _conv(x, f, strides, dilations, geometry):
    """`y[n, *u, o] = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, o], k, c)`, zero outside `x`."""
    pads, sizes = _conv_geometry(geometry)
    rank = len(strides)
    spans = _conv_spans(strides, dilations, sizes, _sizes(f, 0, rank))
    padding = _padding_attrs(strides, dilations, pads, spans, _sizes(x, 1, rank + 1), _sizes(f, 0, rank))
    if padding is not None:
        return _raw_conv(x, f, strides, dilations, *padding)
    return _raw_conv(_window_span(x, pads, spans), f, strides, dilations)


def _conv_backprop_filter(x, g, strides, dilations, geometry):
    """`df[*k, c, o] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, o], n, u)`."""
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
    return _window_unspan(_raw_max_pool_grad(spanned, y, g, window, strides), pads, sizes)


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
