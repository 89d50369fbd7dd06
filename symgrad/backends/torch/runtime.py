"""The helpers generated PyTorch modules call, as real Python: `symgrad.runtime_module`
writes them (after `autograd.py`'s) as the runtime module each folder of generated modules
imports from, so that generated files import nothing of symgrad. Every helper is made of differentiable torch operations, so that a
backward that calls it is differentiated again (double backward); shapes and attribute values
are Python numbers.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch


def _conj(x):
    """Complex conjugate; real tensors are returned as they are."""
    return torch.conj(x) if torch.is_complex(x) else x


def _sigmoid(x):
    """torch's sigmoid for real x; for complex x the formula with an exponential of modulus at
    most 1 (`exp(x) / (1 + exp(x))` where the real part is negative): torch's own is NaN where
    exp(-x) overflows (x = -1000 + 0.4j), though the value is finite (0)."""
    if not x.is_complex():
        return torch.sigmoid(x)
    right = x.real >= 0
    e = torch.exp(torch.where(right, -x, x))
    return torch.where(right, torch.ones_like(e), e) / (1 + e)


def _tensors(a, b):
    """`a` and `b` as tensors: a Python number in the dtype of the other."""
    like = a if isinstance(a, torch.Tensor) else b
    return tuple(t if isinstance(t, torch.Tensor) else torch.as_tensor(t, dtype=like.dtype) for t in (a, b))


def _maximum(a, b):
    """numpy's `maximum`, of tensors or a tensor and a number (torch's takes tensors only)."""
    return torch.maximum(*_tensors(a, b))


def _minimum(a, b):
    return torch.minimum(*_tensors(a, b))


def _over(reduce, x, axes, keepdims=False):
    """`reduce` (`torch.sum`, `torch.amax`, ...) over `axes`, none where `axes` is empty
    (torch reads an empty tuple of axes as all of them)."""
    return reduce(x, axes, keepdims) if axes else x


def _prod(x, axis=None, keepdims=False):
    """numpy's `prod` over several axes (torch's takes one)."""
    if axis is None:
        product = torch.prod(x)
        return torch.reshape(product, (1,) * x.ndim) if keepdims else product
    for a in sorted((axis,) if isinstance(axis, int) else axis, key=lambda a: a % x.ndim, reverse=True):
        x = torch.prod(x, dim=a, keepdim=keepdims)
    return x


def _bessel(name, x):
    """`torch.special.<name>(x)` (`bessel_j0`, `modified_bessel_k1`, ...), differentiable:
    PyTorch gives these no derivative, so autograd would read them as constants."""
    return _Bessel.apply(name, x)


class _Bessel(torch.autograd.Function):
    """A Bessel function of order 0 or 1 whose derivative is the recurrence in the same
    functions (J0' = -J1, J1' = J0 - J1/x, ...), so differentiable to any order."""

    @staticmethod
    def forward(name, x):
        return getattr(torch.special, name)(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.name = inputs[0]
        ctx.save_for_backward(inputs[1])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        kind, order = ctx.name[:-1], ctx.name[-1]
        f0, f1 = _bessel(kind + "0", x), _bessel(kind + "1", x)
        if order == "0":
            return None, -grad * f1  # J0' = -J1, Y0' = -Y1, K0' = -K1
        safe = torch.where(x == 0, 1, x)  # J1'(0) = 1/2; Y1 and K1 have a pole at 0
        derivative = (-f0 if kind == "modified_bessel_k" else f0) - f1 / safe  # K1' = -K0 - K1/x
        return None, grad * (torch.where(x == 0, 0.5, derivative) if kind == "bessel_j" else derivative)


def _split_exp(value, u):
    """`value * exp(u)` with the exp in two halves, multiplied one after the other: finite
    wherever the product is, though exp(u) alone may overflow (Ei's derivative exp(x) / x; a
    Bessel I from its scaled function, where `torch.special.i0` and `i1` multiply by exp(|x|)
    at once: inf from |x| = 88.7 in float32, where I0 is below 2e37)."""
    half = torch.exp(u / 2)
    return value * half * half


def _bessel_i0(x):
    """I0, finite up to where it overflows (`_split_exp`)."""
    return _split_exp(torch.special.i0e(x), torch.abs(x))


def _bessel_i1(x):
    """I1, finite up to where it overflows (`_split_exp`)."""
    return _split_exp(torch.special.i1e(x), torch.abs(x))


def _polygamma(n, x):
    """`polygamma` of orders `n` given as a tensor of integers (torch's takes one int order)."""
    n, x = torch.broadcast_tensors(torch.as_tensor(n, dtype=x.dtype), x)
    result = torch.zeros_like(x)
    for order in torch.unique(n).tolist():
        result = torch.where(n == order, torch.special.polygamma(int(order), x), result)
    return result


def _scalar(x):
    """Whether an attribute is one number (numpy's `ndim(x) == 0`), in Python, which
    torch.compile traces (a numpy call breaks its graph)."""
    if isinstance(x, (tuple, list)):
        return False
    return isinstance(x, (int, float, torch.SymInt)) or getattr(x, "ndim", 0) == 0


def _flat(x):
    """The numbers of an attribute, a number or a (nested) sequence of them, in order
    (numpy's `ravel`), in Python where it is not an array."""
    if isinstance(x, (tuple, list)):
        return [a for item in x for a in _flat(item)]
    if isinstance(x, torch.Tensor):
        return x.reshape(-1).tolist()
    return [x] if _scalar(x) else list(np.ravel(x))


def _sum_to_shape(g, shape):
    """Sum a broadcast gradient `g` back to `shape` (numpy's broadcasting rules reversed); a
    `g` that broadcasts to `shape` (a second order's cotangent of a broadcast input) is
    broadcast first."""
    if tuple(g.shape) == tuple(shape):
        return g
    g = torch.broadcast_to(g, torch.broadcast_shapes(tuple(g.shape), tuple(shape)))
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + n for n, size in enumerate(shape) if size == 1 and g.shape[lead + n] != 1)
    return torch.reshape(torch.sum(g, dim=axes) if axes else g, tuple(shape))


def _shift_right(x, axis, fill, steps=1):
    """`x` moved `steps` along `axis`, `fill` first: an exclusive cumulative sum or product
    from an inclusive one."""
    first = torch.full_like(torch.narrow(x, axis, 0, steps), fill)
    return torch.cat([first, torch.narrow(x, axis, 0, x.shape[axis] - steps)], dim=axis)


def _linear_scan(x, by, axis, exclusive=False, reverse=False):
    """y[m] = x[m] + by[m] * y[m - 1] along `axis` (y[m + 1] with `reverse`; `exclusive`: each
    result one step on, 0 first): the sum over i <= m of x[i] times the product of `by` over
    i < k <= m, a cumulative product's gradient without a division. By recursive doubling:
    ceil(log2 n) steps of whole-array products and sums, each differentiable again."""
    by = by if torch.is_tensor(by) else torch.as_tensor(by, dtype=x.dtype, device=x.device)  # a constant decay
    x, by = torch.broadcast_tensors(x, by)
    if reverse:
        flip = lambda t: torch.flip(t, dims=(axis,))
        return flip(_linear_scan(flip(x), flip(by), axis, exclusive))
    step = 1
    while step < x.shape[axis]:
        x, by = x + by * _shift_right(x, axis, 0, step), by * _shift_right(by, axis, 0, step)
        step *= 2
    return _shift_right(x, axis, 0) if exclusive else x


def _flip(x, axis):
    """`x` read backwards along `axis`: the positions in reverse, selected (`torch.flip`'s CPU
    kernel took 93 us where this takes 27, on rotate-half's (8, 4, 64, 2, 8) floats)."""
    return torch.index_select(x, axis, torch.arange(x.shape[axis] - 1, -1, -1, device=x.device))


def _gather(x, positions, axis, fill=0):
    """`x` read along `axis` (negative) at integer `positions`, whose axes replace that axis;
    positions outside the axis read as `fill` (the padding of an index map). Compiled, the
    select is always made: whether every position is inside is known only at run time."""
    positions = torch.as_tensor(positions).long()
    size, at, count = x.shape[axis], x.ndim + axis, positions.ndim
    inside = (positions >= 0) & (positions < size)
    rows = torch.index_select(torch.movedim(x, axis, 0), 0, torch.where(inside, positions, 0).reshape(-1))
    taken = torch.reshape(rows, tuple(positions.shape) + tuple(rows.shape[1:]))  # a 0-d position too
    taken = torch.movedim(taken, tuple(range(count)), tuple(range(at, at + count)))
    if not torch.compiler.is_compiling() and bool(inside.all()):  # eager: skip the select
        return taken
    inside = torch.reshape(inside, tuple(inside.shape) + (1,) * (-axis - 1))
    return torch.where(inside, taken, torch.as_tensor(fill, dtype=taken.dtype))


def _scatter_add(values, positions, trailing, size):
    """The adjoint of `_gather`: the axes of `values` that `positions` has (those before the
    last `trailing`) are summed into `size` slots at `positions`; positions outside 0..size-1
    are dropped (`index_add`, never a one-hot matrix)."""
    flat, slots, start = _scatter_layout(values, positions, trailing, size)
    summed = flat.new_zeros((size + 1,) + tuple(flat.shape[1:])).index_add(0, slots, flat)
    return torch.movedim(summed[:size], 0, start)


def _scatter_extremum(values, positions, trailing, size, kind):
    """`_scatter_add`'s layout, the values at equal positions reduced to their maximum (`kind`
    "max") or minimum ("min"), the dtype's lowest (highest) value where no position names a
    slot (TensorFlow's unsorted segment max and min)."""
    flat, slots, start = _scatter_layout(values, positions, trailing, size)
    info = torch.finfo(flat.dtype)
    result = flat.new_full((size + 1,) + tuple(flat.shape[1:]), info.min if kind == "max" else info.max)
    index = torch.reshape(slots, (-1,) + (1,) * (flat.ndim - 1)).expand(flat.shape)
    result = result.scatter_reduce(0, index, flat, "amax" if kind == "max" else "amin")
    return torch.movedim(result[:size], 0, start)


def _scatter_product(values, positions, trailing, size):
    """`_scatter_add`'s layout, the values at equal positions multiplied (1 in a slot no
    position names), as TensorFlow's unsorted segment prod."""
    flat, slots, start = _scatter_layout(values, positions, trailing, size)
    ones = flat.new_ones((size + 1,) + tuple(flat.shape[1:]))
    index = torch.reshape(slots, (-1,) + (1,) * (flat.ndim - 1)).expand(flat.shape)
    return torch.movedim(ones.scatter_reduce(0, index, flat, "prod")[:size], 0, start)


def _scatter_layout(values, positions, trailing, size):
    """(rows, slots, start): `values` broadcast to the positions' axes (those before the last
    `trailing`, which start at axis `start`), one row per position; a position outside
    0..size-1 names slot `size`, one past the last, which the caller drops (a fixed shape,
    as torch.compile needs: no boolean mask)."""
    positions = torch.as_tensor(positions).long()
    count = positions.ndim
    values = torch.reshape(values, (1,) * max(0, count + trailing - values.ndim) + tuple(values.shape))
    start = values.ndim - trailing - count
    shape = tuple(values.shape)
    values = torch.broadcast_to(values, shape[:start] + tuple(positions.shape) + shape[start + count :])
    moved = torch.movedim(values, tuple(range(start, start + count)), tuple(range(count)))
    flat, slots = torch.reshape(moved, (-1,) + tuple(moved.shape[count:])), torch.reshape(positions, (-1,))
    inside = (slots >= 0) & (slots < size)
    return flat, torch.where(inside, slots, size), start


# --- windows: convolutions and pooling, channels last ---


def _pad_spatial(x, widths, fill=0):
    """`x` padded with `fill` by `widths[n]` (before, after) along spatial axis n (all axes
    but the first and last)."""
    flat = [0, 0] + [w for pair in reversed(widths) for w in pair]  # last axis first
    return torch.nn.functional.pad(x, flat, value=fill)


def _window_span(x, pads, spans, fill=0):
    """`x` cut or padded with `fill` along its spatial axes so that spatial axis n holds
    `spans[n]` entries from position `-pads[n]` of `x`'s."""
    widths = [(max(p, 0), max(q - h - p, 0)) for p, q, h in zip(pads, spans, x.shape[1:-1])]
    if any(before > 0 or after > 0 for before, after in widths):  # torch.compile: no tuple compared
        x = _pad_spatial(x, widths, fill)
    cut = tuple(slice(max(-p, 0), max(-p, 0) + q) for p, q in zip(pads, spans))
    return x[(slice(None),) + cut + (slice(None),)]


def _window_unspan(x, pads, sizes):
    """The adjoint view of `_window_span`: entries `pads[n]` to `pads[n] + sizes[n] - 1` of
    spatial axis n of `x`, zero where `x` has none."""
    widths = [(max(-p, 0), max(h + p - q, 0)) for p, h, q in zip(pads, sizes, x.shape[1:-1])]
    if any(before > 0 or after > 0 for before, after in widths):
        x = _pad_spatial(x, widths)
    cut = tuple(slice(max(p, 0), max(p, 0) + h) for p, h in zip(pads, sizes))
    return x[(slice(None),) + cut + (slice(None),)]


def _conv_spans(strides, dilations, counts, kernel):
    """How many input entries `counts` windows of `kernel` entries take, per spatial axis."""
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise ValueError(f"convolution strides and dilations must be positive, got {strides}, {dilations}")
    return [(q - 1) * s + (k - 1) * d + 1 for s, d, q, k in zip(strides, dilations, counts, kernel)]


def _channels_first_conv(x, weight, strides, dilations, groups=1):
    """`torch.nn.functional.conv<rank>d` of channels-last `x` with an `[o, c, *k]` weight,
    unpadded, the result channels last."""
    rank = len(strides)
    conv = getattr(torch.nn.functional, f"conv{rank}d")
    y = conv(torch.movedim(x, -1, 1), weight, stride=tuple(strides), dilation=tuple(dilations), groups=groups)
    return torch.movedim(y, 1, -1)


def _conv(x, f, strides, dilations, pads, sizes):
    """`y[n, *u, o] = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, o], k, c)`, zero outside `x`:
    one convolution over the span of `x` the windows read."""
    rank = len(strides)
    x = _window_span(x, pads, _conv_spans(strides, dilations, sizes, f.shape[:rank]))
    return _channels_first_conv(x, _conv_weight(f, rank), strides, dilations)


def _depthwise_conv(x, f, strides, dilations, pads, sizes):
    """`y[n, *u, c, m] = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, m], k)`: a convolution with
    one group per channel."""
    rank = len(strides)
    channels, multiplier = f.shape[-2:]
    x = _window_span(x, pads, _conv_spans(strides, dilations, sizes, f.shape[:rank]))
    y = _channels_first_conv(x, _conv_weight(f, rank, channels), strides, dilations, channels)
    return torch.reshape(y, tuple(y.shape[:-1]) + (channels, multiplier))


def _conv_grads(g, x, weight, strides, dilations, groups, mask):
    """PyTorch's own convolution backward (`aten.convolution_backward`, one kernel for both
    gradients, differentiable again) of `_channels_first_conv(x, weight, ...)` at `g`, both
    channels last: (the gradient of x, that of the `[o, c / groups, *k]` weight), each None
    where `mask` does not ask for it. Of the one not asked for, only the shape is read."""
    rank = len(strides)
    grad_x, grad_weight, _ = torch.ops.aten.convolution_backward(
        torch.movedim(g, -1, 1), torch.movedim(x, -1, 1), weight, None, list(strides), [0] * rank,
        list(dilations), False, [0] * rank, groups, [bool(mask[0]), bool(mask[1]), False],
    )
    return (None if grad_x is None else torch.movedim(grad_x, 1, -1)), grad_weight


def _conv_weight(f, rank, groups=1):
    """A channels-last filter `[*k, c, o]` (a depthwise one `[*k, c, m]`, `groups` = c) as
    PyTorch's `[o, c / groups, *k]` weight."""
    if groups > 1:
        f = torch.reshape(f, tuple(f.shape[:rank]) + (1, f.shape[-2] * f.shape[-1]))
    return torch.permute(f, (rank + 1, rank, *range(rank)))


def _input_gradient(g, weight, channels, groups, strides, dilations, pads, sizes):
    """The gradient of a convolution's channels-last input (spatial `sizes`, `channels`) at the
    channels-last `g`: taken over the span its windows read, then unspanned."""
    spans = _conv_spans(strides, dilations, tuple(g.shape[1:-1]), weight.shape[2:])
    spanned = g.new_zeros((g.shape[0], *spans, channels))
    grad, _ = _conv_grads(g, spanned, weight, strides, dilations, groups, (True, False))
    return _window_unspan(grad, pads, sizes)


def _filter_gradient(x, g, weight_shape, groups, strides, dilations, pads):
    """The gradient of a convolution's `[o, c / groups, *k]` weight (of `weight_shape`) at the
    channels-last `g`, laid out channels last, `[*k, c / groups, o]`."""
    rank = len(strides)
    spanned = _window_span(x, pads, _conv_spans(strides, dilations, tuple(g.shape[1:-1]), weight_shape[2:]))
    _, grad = _conv_grads(g, spanned, g.new_zeros(weight_shape), strides, dilations, groups, (False, True))
    return torch.permute(grad, (*range(2, rank + 2), 1, 0))


def _conv_backprop_input(g, f, strides, dilations, pads, sizes):
    """`dx[n, *h, c] = sum(g[n, *((h + p - k*d) / s), o] * f[*k, c, o], k, o)`, where s divides."""
    dtype = torch.promote_types(g.dtype, f.dtype)
    weight = _conv_weight(f.to(dtype), len(strides))
    return _input_gradient(g.to(dtype), weight, f.shape[-2], 1, strides, dilations, pads, sizes)


def _conv_backprop_filter(x, g, strides, dilations, pads, sizes):
    """`df[*k, c, o] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, o], n, u)`."""
    dtype = torch.promote_types(x.dtype, g.dtype)
    return _filter_gradient(x.to(dtype), g.to(dtype), (g.shape[-1], x.shape[-1], *sizes), 1, strides, dilations, pads)


def _depthwise_conv_backprop_input(g, f, strides, dilations, pads, sizes):
    """`dx[n, *h, c] = sum(g[n, *((h + p - k*d) / s), c, m] * f[*k, c, m], k, m)`, where s divides:
    a convolution of one group per channel, `g`'s channel pair one axis."""
    dtype, channels = torch.promote_types(g.dtype, f.dtype), f.shape[-2]
    flat = torch.reshape(g, tuple(g.shape[:-2]) + (-1,)).to(dtype)
    weight = _conv_weight(f.to(dtype), len(strides), channels)
    return _input_gradient(flat, weight, channels, channels, strides, dilations, pads, sizes)


def _depthwise_conv_backprop_filter(x, g, strides, dilations, pads, sizes):
    """`df[*k, c, m] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, c, m], n, u)`."""
    dtype, (channels, multiplier) = torch.promote_types(x.dtype, g.dtype), g.shape[-2:]
    flat = torch.reshape(g, tuple(g.shape[:-2]) + (-1,)).to(dtype)
    grad = _filter_gradient(x.to(dtype), flat, (channels * multiplier, 1, *sizes), channels, strides, dilations, pads)
    return torch.reshape(grad, (*sizes, channels, multiplier))


def _max_pool_backprop(x, y, g, window, strides, pads, sizes):
    """`dx[n, *h, c]`: each window's `g[n, *u, c]` added at the first entry (row-major) of
    window u of `x`, read at `u*s + k - p` (padding never the maximum), equal to its maximum
    `y[n, *u, c]`: a loop over the window's positions, each a strided slice of `x`."""
    counts, ones = tuple(g.shape[1:-1]), (1,) * len(strides)
    x = _window_span(x, pads, _conv_spans(strides, ones, counts, window), fill=-np.inf)
    dx = torch.zeros(x.shape, dtype=torch.promote_types(x.dtype, g.dtype))
    unclaimed = torch.ones(g.shape, dtype=torch.bool)
    for k in itertools.product(*(range(w) for w in window)):
        cut = (slice(None),) + tuple(slice(j, j + (q - 1) * s + 1, s) for j, q, s in zip(k, counts, strides))
        first = unclaimed & (x[cut] == y)
        dx[cut] += torch.where(first, g, 0)
        unclaimed = unclaimed & ~first
    return _window_unspan(dx, pads, sizes)


def _like_dtype(value, like):
    """`value` in the dtype of `like`, its real part where `like` is real: a gradient in its
    input's dtype."""
    value = torch.as_tensor(value)
    if value.is_complex() and not like.is_complex():
        value = torch.real(value)
    return value.to(like.dtype)


def _as_dtype(value, dtype):
    """`value` in `dtype` (a name or a dtype), its real part for a real dtype (TensorFlow's Cast)."""
    if not isinstance(dtype, torch.dtype):
        dtype = getattr(torch, getattr(dtype, "name", str(dtype)))
    value = torch.as_tensor(value)
    if value.is_complex() and not dtype.is_complex:
        value = torch.real(value)
    return value.to(dtype)


def _promoted(value, like):
    """`value` in the complex dtype of `like` where `like` is complex and `value` real."""
    if like.is_complex() and not torch.as_tensor(value).is_complex():
        return torch.as_tensor(value).to(like.dtype)
    return value


def _attention_mask(mask, is_causal, rows, cols, like):
    """The additive mask an attention adds to its scores, `(rows, cols)`: with `is_causal`,
    -inf where a column is past its row (`j > i`), as `F.scaled_dot_product_attention`'s
    `is_causal` masks; else `mask`, or zeros where it is None (no mask)."""
    if is_causal and mask is not None:
        raise ValueError("an explicit mask and is_causal=True: give one of them (as PyTorch's attention asks)")
    if is_causal:
        return torch.full((rows, cols), float("-inf"), dtype=like.dtype, device=like.device).triu(1)
    return torch.zeros((rows, cols), dtype=like.dtype, device=like.device) if mask is None else mask
