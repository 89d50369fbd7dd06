"""The helpers generated numpy modules call, as real Python: `symgrad.runtime_module` writes
them, in this order, as the runtime module each folder of generated modules imports from, so
that generated files import nothing of symgrad."""

from __future__ import annotations

import numpy as np
import scipy.sparse
import scipy.special


def _conj(x):
    """Complex conjugate; real arrays are returned as they are, without a copy."""
    return np.conj(x) if np.iscomplexobj(x) else x


def _sigmoid(x):
    """1 / (1 + exp(-x)): scipy's `expit` for real x, which takes no complex input; for
    complex x the formula, with an exponential of modulus at most 1 (`exp(x) / (1 + exp(x))`
    where the real part is negative), finite wherever the value is."""
    if not np.iscomplexobj(x):
        return scipy.special.expit(x)
    right = np.real(x) >= 0
    e = np.exp(np.where(right, -x, x))
    return np.where(right, 1, e) / (1 + e)


def _split_exp(value, u):
    """`value * exp(u)` with the exp in two halves, multiplied one after the other: finite
    wherever the product is, though exp(u) alone may overflow (Ei's derivative exp(x) / x)."""
    half = np.exp(u / 2)
    return value * half * half


def _sum_to_shape(g, shape):
    """Sum a broadcast gradient `g` back to `shape` (numpy's broadcasting rules reversed); a
    `g` that broadcasts to `shape` (a second order's cotangent of a broadcast input) is
    broadcast first."""
    if np.shape(g) == tuple(shape):
        return g
    g = np.broadcast_to(g, np.broadcast_shapes(np.shape(g), tuple(shape)))
    lead = np.ndim(g) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + n for n, size in enumerate(shape) if size == 1 and np.shape(g)[lead + n] != 1
    )
    return np.reshape(np.sum(g, axis=axes), shape)


def _sum_product_to_shape(factors, shape):
    """The product of `factors` summed back to `shape`, as `_sum_to_shape` would, in one
    einsum: a reduced broadcast gradient never writes the full-size product."""
    arrays = [f for f in factors if np.ndim(f) > 0]
    full = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    if full == tuple(shape) or not arrays:
        product = factors[0]
        for f in factors[1:]:
            product = product * f
        return product
    lead = len(full) - len(shape)
    operands = []  # einsum's sublist form: each array, then the axes it holds (numbered)
    for a in arrays:
        operands += [a, list(range(len(full) - np.ndim(a), len(full)))]
    kept = [lead + n for n, size in enumerate(shape) if size != 1 or full[lead + n] == 1]
    result = np.reshape(np.einsum(*operands, kept, optimize=len(arrays) > 2), shape)
    for f in factors:
        if np.ndim(f) == 0:  # a scalar attribute: multiplied last, as numpy would promote it
            result = result * f
    return result


def _shift_right(x, axis, fill, steps=1):
    """`x` moved `steps` along `axis`, `fill` first: an exclusive cumulative sum or product
    from an inclusive one."""
    size = np.shape(x)[axis]
    first = np.full_like(np.take(x, range(steps), axis=axis), fill)
    return np.concatenate([first, np.take(x, range(size - steps), axis=axis)], axis=axis)


def _linear_scan(x, by, axis, exclusive=False, reverse=False):
    """y[m] = x[m] + by[m] * y[m - 1] along `axis` (y[m + 1] with `reverse`; `exclusive`: each
    result one step on, 0 first): the sum over i <= m of x[i] times the product of `by` over
    i < k <= m, a cumulative product's gradient without a division. By recursive doubling:
    ceil(log2 n) steps of whole-array products and sums."""
    by = np.asarray(by, dtype=np.result_type(x, by))  # a constant decay: x's dtype
    x, by = np.broadcast_arrays(x, by)
    if reverse:
        flip = lambda t: np.flip(t, axis=axis)
        return flip(_linear_scan(flip(x), flip(by), axis, exclusive))
    step = 1
    while step < np.shape(x)[axis]:
        x, by = x + by * _shift_right(x, axis, 0, step), by * _shift_right(by, axis, 0, step)
        step *= 2
    return _shift_right(x, axis, 0) if exclusive else x


def _gather(x, positions, axis, fill=0):
    """`x` read along `axis` (negative) at integer `positions`, whose axes replace that axis;
    positions outside the axis read as `fill` (the padding of an index map)."""
    positions = np.asarray(positions)
    size = np.shape(x)[axis]
    inside = (positions >= 0) & (positions < size)
    taken = np.take(x, np.where(inside, positions, 0), axis=axis)
    if inside.all():
        return taken
    return np.where(inside.reshape(inside.shape + (1,) * (-axis - 1)), taken, np.asarray(fill, taken.dtype))


def _scatter_add(values, positions, trailing, size):
    """The adjoint of `_gather`: the axes of `values` that `positions` has (those before the
    last `trailing`) are summed into `size` slots at `positions`; positions outside 0..size-1
    are dropped. A scatter-add, as a sparse one-hot matrix product (never a dense one)."""
    rows, flat, start = _scatter_layout(values, positions, trailing)
    inside = np.flatnonzero((flat >= 0) & (flat < size))
    one_hot = scipy.sparse.csr_matrix(
        (np.ones(inside.size, dtype=rows.dtype), (flat[inside], inside)), shape=(size, flat.size)
    )
    summed = np.reshape(np.asarray(one_hot @ np.reshape(rows, (flat.size, -1))), (size,) + rows.shape[1:])
    return np.moveaxis(summed, 0, start)


def _scatter_extremum(values, positions, trailing, size, kind):
    """`_scatter_add`'s layout, the values at equal positions reduced to their maximum (`kind`
    "max") or minimum ("min"): a segment's, as TensorFlow's unsorted segment max and min, a
    slot no position names holding the dtype's lowest (highest) value."""
    rows, flat, start = _scatter_layout(values, positions, trailing)
    inside = (flat >= 0) & (flat < size)
    info = np.finfo(rows.dtype)
    result = np.full((size,) + rows.shape[1:], info.min if kind == "max" else info.max, rows.dtype)
    reduce = np.maximum if kind == "max" else np.minimum
    reduce.at(result, flat[inside], rows[inside])
    return np.moveaxis(result, 0, start)


def _scatter_product(values, positions, trailing, size):
    """`_scatter_add`'s layout, the values at equal positions multiplied (a segment's product,
    as TensorFlow's unsorted segment prod, 1 in a slot no position names): `np.multiply.at`."""
    rows, flat, start = _scatter_layout(values, positions, trailing)
    inside = (flat >= 0) & (flat < size)
    result = np.ones((size,) + rows.shape[1:], rows.dtype)
    np.multiply.at(result, flat[inside], rows[inside])
    return np.moveaxis(result, 0, start)


def _scatter_layout(values, positions, trailing):
    """(rows, flat positions, start): `values` broadcast to the positions' axes (those before
    the last `trailing`, which start at axis `start`), one row per position."""
    count = np.ndim(positions)
    values = np.reshape(values, (1,) * max(0, count + trailing - np.ndim(values)) + np.shape(values))
    start = np.ndim(values) - trailing - count
    shape = np.shape(values)
    values = np.broadcast_to(values, shape[:start] + np.shape(positions) + shape[start + count :])
    moved = np.moveaxis(values, tuple(range(start, start + count)), tuple(range(count)))
    flat = np.reshape(positions, -1)
    return np.reshape(moved, (flat.size,) + moved.shape[count:]), flat, start


def _window_span(x, pads, spans, fill=0):
    """`x` cut or padded with `fill` along its spatial axes (all but the first and last) so
    that spatial axis n holds `spans[n]` entries from position `-pads[n]` of `x`'s."""
    rank = len(pads)
    widths = [(max(p, 0), max(q - h - p, 0)) for p, q, h in zip(pads, spans, np.shape(x)[1:-1])]
    if any(w != (0, 0) for w in widths):
        x = np.pad(x, [(0, 0)] + widths + [(0, 0)], constant_values=fill)
    cut = tuple(slice(max(-p, 0), max(-p, 0) + q) for p, q in zip(pads, spans))
    return x[(slice(None),) + cut + (slice(None),)] if rank else x


def _window_unspan(x, pads, sizes):
    """The adjoint view of `_window_span`: entries `pads[n]` to `pads[n] + sizes[n] - 1` of
    spatial axis n of `x`, zero where `x` has none."""
    widths = [(max(-p, 0), max(h + p - q, 0)) for p, h, q in zip(pads, sizes, np.shape(x)[1:-1])]
    if any(w != (0, 0) for w in widths):
        x = np.pad(x, [(0, 0)] + widths + [(0, 0)])
    cut = tuple(slice(max(p, 0), max(p, 0) + h) for p, h in zip(pads, sizes))
    return x[(slice(None),) + cut + (slice(None),)]


def _conv_spans(strides, dilations, counts, kernel):
    """How many input entries `counts` windows of `kernel` entries take, per spatial axis."""
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise ValueError(f"convolution strides and dilations must be positive, got {strides}, {dilations}")
    return [(q - 1) * s + (k - 1) * d + 1 for s, d, q, k in zip(strides, dilations, counts, kernel)]


def _window_positions(strides, dilations, counts, kernel):
    """(window position, the strided slices of the spatial axes it reads) for each position
    in the window: a loop over the window, never over the output."""
    for k in np.ndindex(*kernel):
        cut = tuple(slice(j * d, j * d + (q - 1) * s + 1, s) for j, d, q, s in zip(k, dilations, counts, strides))
        yield k, (slice(None),) + cut


def _conv(x, f, strides, dilations, pads, sizes):
    """`y[n, *u, o] = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, o], k, c)`, zero outside `x`:
    one matrix product per window position, over a strided view of `x`."""
    rank = len(strides)
    kernel = np.shape(f)[:rank]
    x = _window_span(x, pads, _conv_spans(strides, dilations, sizes, kernel))
    y = np.zeros((np.shape(x)[0], *sizes, np.shape(f)[-1]), dtype=np.result_type(x, f))
    for k, cut in _window_positions(strides, dilations, sizes, kernel):
        y += np.tensordot(x[cut], f[k], axes=([rank + 1], [0]))
    return y


def _conv_backprop_filter(x, g, strides, dilations, pads, sizes):
    """`df[*k, c, o] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, o], n, u)`."""
    counts = np.shape(g)[1:-1]
    x = _window_span(x, pads, _conv_spans(strides, dilations, counts, sizes))
    df = np.zeros((*sizes, np.shape(x)[-1], np.shape(g)[-1]), dtype=np.result_type(x, g))
    g = np.reshape(g, (-1, np.shape(g)[-1]))
    for k, cut in _window_positions(strides, dilations, counts, sizes):
        # rows of channels, then one product with the transposed flag (no transposed copy)
        df[k] = np.reshape(x[cut], (-1, np.shape(x)[-1])).T @ g
    return df


def _conv_backprop_input(g, f, strides, dilations, pads, sizes):
    """`dx[n, *h, c] = sum(g[n, *((h + p - k*d) / s), o] * f[*k, c, o], k, o)`, where s
    divides: each window position's products added into the input positions it reads,
    a strided slice per position (a loop over the window, not over the output)."""
    rank = len(strides)
    counts, kernel = np.shape(g)[1:-1], np.shape(f)[:rank]
    spans = _conv_spans(strides, dilations, counts, kernel)
    shape = (np.shape(g)[0], *spans, np.shape(f)[-2])
    dx = np.zeros(shape, dtype=np.result_type(g, f))
    for k, cut in _window_positions(strides, dilations, counts, kernel):
        dx[cut] += np.tensordot(g, f[k], axes=([rank + 1], [1]))
    return _window_unspan(dx, pads, sizes)


def _depthwise_conv(x, f, strides, dilations, pads, sizes):
    """`y[n, *u, c, m] = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, m], k)`, zero outside `x`:
    one product per window position, elementwise in the channel, over a strided view of `x`."""
    rank = len(strides)
    kernel = np.shape(f)[:rank]
    x = _window_span(x, pads, _conv_spans(strides, dilations, sizes, kernel))
    y = np.zeros((np.shape(x)[0], *sizes, *np.shape(f)[-2:]), dtype=np.result_type(x, f))
    for k, cut in _window_positions(strides, dilations, sizes, kernel):
        y += x[cut][..., None] * f[k]
    return y


def _depthwise_conv_backprop_filter(x, g, strides, dilations, pads, sizes):
    """`df[*k, c, m] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, c, m], n, u)`."""
    counts = np.shape(g)[1:-2]
    x = _window_span(x, pads, _conv_spans(strides, dilations, counts, sizes))
    df = np.zeros((*sizes, *np.shape(g)[-2:]), dtype=np.result_type(x, g))
    for k, cut in _window_positions(strides, dilations, counts, sizes):
        df[k] = np.einsum("...c,...cm->cm", x[cut], g, optimize=True)
    return df


def _depthwise_conv_backprop_input(g, f, strides, dilations, pads, sizes):
    """`dx[n, *h, c] = sum(g[n, *((h + p - k*d) / s), c, m] * f[*k, c, m], k, m)`, where s
    divides: each window position's products added into the input positions it reads."""
    rank = len(strides)
    counts, kernel = np.shape(g)[1:-2], np.shape(f)[:rank]
    spans = _conv_spans(strides, dilations, counts, kernel)
    dx = np.zeros((np.shape(g)[0], *spans, np.shape(f)[-2]), dtype=np.result_type(g, f))
    for k, cut in _window_positions(strides, dilations, counts, kernel):
        dx[cut] += np.einsum("...cm,cm->...c", g, f[k], optimize=True)
    return _window_unspan(dx, pads, sizes)


def _max_pool_backprop(x, y, g, window, strides, pads, sizes):
    """`dx[n, *h, c]`: each window's `g[n, *u, c]` added at the first entry (row-major) of
    window u of `x`, read at `u*s + k - p` (padding never the maximum), equal to its maximum
    `y[n, *u, c]`: a loop over the window's positions, each a strided slice of `x`."""
    counts, ones = np.shape(g)[1:-1], (1,) * len(strides)
    x = _window_span(x, pads, _conv_spans(strides, ones, counts, window), fill=-np.inf)
    dx = np.zeros(np.shape(x), dtype=np.result_type(x, g))
    unclaimed = np.ones(np.shape(g), dtype=bool)
    for _, cut in _window_positions(strides, ones, counts, window):
        first = unclaimed & (x[cut] == y)
        dx[cut] += np.where(first, g, 0)
        unclaimed &= ~first
    return _window_unspan(dx, pads, sizes)


def _like_dtype(value, like):
    """`value` in the dtype of `like`, its real part where `like` is real: a gradient in its
    input's dtype."""
    if np.iscomplexobj(value) and not np.iscomplexobj(like):
        value = np.real(value)
    return np.asarray(value).astype(np.asarray(like).dtype, copy=False)


def _as_dtype(value, dtype):
    """`value` in `dtype` (a name or a dtype), its real part for a real dtype (TensorFlow's Cast)."""
    dtype = np.dtype(getattr(dtype, "name", dtype))
    if np.iscomplexobj(value) and not np.issubdtype(dtype, np.complexfloating):
        value = np.real(value)
    return np.asarray(value).astype(dtype, copy=False)


def _promoted(value, like):
    """`value` in the complex dtype of `like` where `like` is complex and `value` real."""
    if np.iscomplexobj(like) and not np.iscomplexobj(value):
        return np.asarray(value).astype(np.asarray(like).dtype)
    return value
