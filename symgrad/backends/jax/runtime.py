"""The helpers generated JAX modules call, as real Python: `symgrad.runtime_module` writes
them as the runtime module each folder of generated modules imports from, so that generated
files import nothing of symgrad. Every helper is traceable (`jit`, `vmap`) and differentiable again: no
in-place update, no branch on a traced value; shapes and attribute values are static.
"""

from __future__ import annotations

import inspect
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero


def _conj(x):
    """Complex conjugate; real arrays are returned as they are."""
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def _custom_vjp(forward, vjp, outputs, stages=False):
    """`forward(*inputs, **attrs)` as a `jax.custom_vjp` function, the attributes static
    (`nondiff_argnums`), whose gradient is the derived `vjp(cotangents..., *inputs, **outputs,
    **stages, **attrs)`, given the forward's `outputs` (their names, "a b", a list's starred)
    and, with `stages`, its stages as residuals. JAX's cotangents of complex arrays are the
    conjugates of TensorFlow's, which `vjp` gives: `jax_vjp(ct) = conj(tensorflow_vjp(conj(ct)))`.
    With symbolic zeros, a `vjp` taking `needs_grad` computes only the gradients of the inputs
    JAX differentiates (perturbed ones); a cotangent JAX left symbolic is zeros."""
    outputs = [name.lstrip("*") for name in outputs.split()]
    several = len(outputs) > 1
    takes_needs = "needs_grad" in inspect.signature(vjp).parameters

    def run(attrs, *inputs):
        return forward(*inputs, **attrs)

    def run_saving(attrs, *primals):
        inputs = tuple(p.value for p in primals)
        values, found = forward(*inputs, **attrs, return_stages=True) if stages else (run(attrs, *inputs), {})
        # which gradients are asked for, as pytree structure (None: not perturbed), which stays static
        asked = tuple(() if p.perturbed else None for p in primals)
        return values, (inputs, values, found, asked)

    def gradient(attrs, saved, cotangent):
        inputs, values, found, asked = saved
        given = dict(zip(outputs, values if several else (values,)))
        cotangents = [jax.tree_util.tree_map(_conj, _instantiated(c)) for c in (cotangent if several else (cotangent,))]
        needs = {"needs_grad": tuple(a is not None for a in asked)} if takes_needs else {}
        grads = vjp(*cotangents, *inputs, **given, **found, **attrs, **needs)
        return tuple(None if g is None else _conj(g) for g in grads)

    function = jax.custom_vjp(run, nondiff_argnums=(0,))
    function.defvjp(run_saving, gradient, symbolic_zeros=True)
    return lambda *inputs, **attrs: function(attrs, *inputs)


def _instantiated(cotangent):
    """`cotangent` with each symbolic zero JAX passes (an output nobody differentiates) made
    an array of zeros (of float0 for an integer output)."""
    def zeros(c):
        if not isinstance(c, SymbolicZero):
            return c
        return np.zeros(c.shape, c.dtype) if c.dtype == jax.dtypes.float0 else jnp.zeros(c.shape, c.dtype)

    return jax.tree_util.tree_map(zeros, cotangent, is_leaf=lambda c: isinstance(c, SymbolicZero))


def _split_exp(value, u):
    """`value * exp(u)` with the exp in two halves, multiplied one after the other: finite
    wherever the product is, though exp(u) alone may overflow (Ei's derivative exp(x) / x; a
    Bessel I from its scaled function, where `jax.scipy.special.i0` and `i1` multiply by
    exp(|x|) at once: inf from |x| = 88.7 in float32, where I0 is below 2e37)."""
    half = jnp.exp(u / 2)
    return value * half * half


def _nextafter(x1, x2):
    """`jnp.nextafter`, differentiable: JAX has no rule for it, so its step is computed on
    values with no gradient and added to x1 (exactly: the step is one unit in the last place),
    which gives the derivative 1 in x1 and 0 in x2."""
    fixed = jax.lax.stop_gradient(x1)
    return x1 + (jnp.nextafter(fixed, jax.lax.stop_gradient(x2)) - fixed)


def _bessel_i0(x):
    """I0, finite up to where it overflows (`_split_exp`)."""
    return _split_exp(jax.scipy.special.i0e(x), _abs_as_sign(x))


def _bessel_i1(x):
    """I1, finite up to where it overflows (`_split_exp`)."""
    return _split_exp(jax.scipy.special.i1e(x), _abs_as_sign(x))


def _abs_as_sign(x):
    """|x| as x * sign(x), whose derivative at 0 is 0, as in JAX's derivatives of i0e and i1e:
    JAX differentiates `abs` as 1 there, and i0e(x) * exp(|x|) would have the derivative 1 at 0
    (so has `jax.scipy.special.i0`) where I0' = I1 is 0."""
    return x * jnp.sign(x)


def _sum_to_shape(g, shape):
    """Sum a broadcast gradient `g` back to `shape` (numpy's broadcasting rules reversed); a
    `g` that broadcasts to `shape` (a second order's cotangent of a broadcast input) is
    broadcast first."""
    if jnp.shape(g) == tuple(shape):
        return g
    g = jnp.broadcast_to(g, jnp.broadcast_shapes(jnp.shape(g), tuple(shape)))
    lead = jnp.ndim(g) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + n for n, size in enumerate(shape) if size == 1 and jnp.shape(g)[lead + n] != 1
    )
    return jnp.reshape(jnp.sum(g, axis=axes), shape)


def _shift_right(x, axis, fill, steps=1):
    """`x` moved `steps` along `axis`, `fill` first: an exclusive cumulative sum or product
    from an inclusive one."""
    first = jnp.full_like(jax.lax.slice_in_dim(x, 0, steps, axis=axis), fill)
    rest = jax.lax.slice_in_dim(x, 0, jnp.shape(x)[axis] - steps, axis=axis)
    return jnp.concatenate([first, rest], axis=axis)


def _linear_scan(x, by, axis, exclusive=False, reverse=False):
    """y[m] = x[m] + by[m] * y[m - 1] along `axis` (y[m + 1] with `reverse`; `exclusive`: each
    result one step on, 0 first): the sum over i <= m of x[i] times the product of `by` over
    i < k <= m, a cumulative product's gradient without a division. By recursive doubling:
    ceil(log2 n) steps of whole-array products and sums, each differentiable again."""
    x, by = jnp.broadcast_arrays(x, by)  # a constant decay, weakly typed, takes x's dtype
    if reverse:
        flip = lambda t: jnp.flip(t, axis=axis)
        return flip(_linear_scan(flip(x), flip(by), axis, exclusive))
    step = 1
    while step < jnp.shape(x)[axis]:
        x, by = x + by * _shift_right(x, axis, 0, step), by * _shift_right(by, axis, 0, step)
        step *= 2
    return _shift_right(x, axis, 0) if exclusive else x


def _gather(x, positions, axis, fill=0):
    """`x` read along `axis` (negative) at integer `positions`, whose axes replace that axis;
    positions outside the axis read as `fill` (the padding of an index map)."""
    positions = jnp.asarray(positions)
    size = jnp.shape(x)[axis]
    inside = (positions >= 0) & (positions < size)
    taken = jnp.take(x, jnp.where(inside, positions, 0), axis=axis, mode="clip")
    inside = jnp.reshape(inside, jnp.shape(inside) + (1,) * (-axis - 1))
    return jnp.where(inside, taken, jnp.asarray(fill, taken.dtype))


def _scatter_add(values, positions, trailing, size):
    """The adjoint of `_gather`: the axes of `values` that `positions` has (those before the
    last `trailing`) are summed into `size` slots at `positions`; positions outside 0..size-1
    are dropped (`.at[].add`, never a one-hot matrix)."""
    return _scatter_at(values, positions, trailing, size, "add")


def _scatter_extremum(values, positions, trailing, size, kind):
    """`_scatter_add`'s layout, the values at equal positions reduced to their maximum (`kind`
    "max") or minimum ("min"), the dtype's lowest (highest) value where no position names a
    slot (TensorFlow's unsorted segment max and min)."""
    return _scatter_at(values, positions, trailing, size, kind)


def _scatter_product(values, positions, trailing, size):
    """`_scatter_add`'s layout, the values at equal positions multiplied (1 in a slot no
    position names), as TensorFlow's unsorted segment prod. Differentiable: JAX does not
    differentiate `.at[].multiply` at repeated positions, so its derivative is given, each
    entry's tangent times the product of the others in its slot (`_product_of_others`)."""

    @jax.custom_jvp
    def product(values, positions):  # the positions an argument: they may be traced
        return _scatter_at(values, positions, trailing, size, "multiply")

    @product.defjvp
    def _(primals, tangents):
        values, positions = primals
        others = _product_of_others(values, positions, trailing, size)
        return product(values, positions), _scatter_add(others * tangents[0], positions, trailing, size)

    return product(values, jnp.asarray(positions))


def _product_of_others(values, positions, trailing, size):
    """For each entry, the product of the others at its position, exact at zeros: the product
    divided by the entry where it is not 0; where it is, the nonzero entries' product if it
    is the only zero, else 0."""
    nonzero = values != 0
    at_entries = lambda slots: _gather(slots, positions, -trailing - 1)
    total = at_entries(_scatter_product(values, positions, trailing, size))  # differentiable again
    kept = at_entries(_scatter_product(jnp.where(nonzero, values, 1), positions, trailing, size))
    zeros = at_entries(_scatter_add(jnp.where(nonzero, 0, 1), positions, trailing, size))
    return jnp.where(nonzero, total / jnp.where(nonzero, values, 1), jnp.where(zeros == 1, kept, 0))


def _scatter_at(values, positions, trailing, size, kind):
    """`values` reduced into `size` slots at `positions` by `.at[].add`, `.max`, `.min` or
    `.multiply`."""
    positions = jnp.asarray(positions)
    count = jnp.ndim(positions)
    values = jnp.reshape(values, (1,) * max(0, count + trailing - jnp.ndim(values)) + jnp.shape(values))
    start = jnp.ndim(values) - trailing - count
    shape = jnp.shape(values)
    values = jnp.broadcast_to(values, shape[:start] + jnp.shape(positions) + shape[start + count :])
    if kind in ("add", "multiply"):
        fill = 0 if kind == "add" else 1
    else:
        fill = jnp.finfo(values.dtype).min if kind == "max" else jnp.finfo(values.dtype).max
    slots = jnp.full(shape[:start] + (size,) + shape[start + count :], fill, values.dtype)
    positions = jnp.where(positions < 0, size, positions)  # dropped, not counted from the end
    at = slots.at[(slice(None),) * start + (positions,)]
    return getattr(at, kind)(values, mode="drop")


# --- windows: convolutions and pooling, channels last ---


def _window_span(x, pads, spans, fill=0):
    """`x` cut or padded with `fill` along its spatial axes (all but the first and last) so
    that spatial axis n holds `spans[n]` entries from position `-pads[n]` of `x`'s."""
    widths = [(max(p, 0), max(q - h - p, 0)) for p, q, h in zip(pads, spans, jnp.shape(x)[1:-1])]
    if any(w != (0, 0) for w in widths):
        x = jnp.pad(x, [(0, 0)] + widths + [(0, 0)], constant_values=fill)
    cut = tuple(slice(max(-p, 0), max(-p, 0) + q) for p, q in zip(pads, spans))
    return x[(slice(None),) + cut + (slice(None),)]


def _window_unspan(x, pads, sizes):
    """The adjoint view of `_window_span`: entries `pads[n]` to `pads[n] + sizes[n] - 1` of
    spatial axis n of `x`, zero where `x` has none."""
    widths = [(max(-p, 0), max(h + p - q, 0)) for p, h, q in zip(pads, sizes, jnp.shape(x)[1:-1])]
    if any(w != (0, 0) for w in widths):
        x = jnp.pad(x, [(0, 0)] + widths + [(0, 0)])
    cut = tuple(slice(max(p, 0), max(p, 0) + h) for p, h in zip(pads, sizes))
    return x[(slice(None),) + cut + (slice(None),)]


def _conv_spans(strides, dilations, counts, kernel):
    """How many input entries `counts` windows of `kernel` entries take, per spatial axis."""
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise ValueError(f"convolution strides and dilations must be positive, got {strides}, {dilations}")
    return [(q - 1) * s + (k - 1) * d + 1 for s, d, q, k in zip(strides, dilations, counts, kernel)]


def _channels_last(rank):
    """`lax.conv_general_dilated`'s dimension numbers for input `[n, *spatial, c]`, filter
    `[*spatial, c, o]` and output `[n, *spatial, o]`."""
    spatial = tuple(range(1, rank + 1))
    return jax.lax.ConvDimensionNumbers((0, rank + 1) + spatial, (rank + 1, rank) + tuple(range(rank)), (0, rank + 1) + spatial)


def _conv(x, f, strides, dilations, pads, sizes):
    """`y[n, *u, o] = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, o], k, c)`, zero outside `x`:
    one `lax.conv_general_dilated` over the span of `x` the windows read."""
    rank = len(strides)
    x = _window_span(x, pads, _conv_spans(strides, dilations, sizes, jnp.shape(f)[:rank]))
    return jax.lax.conv_general_dilated(
        x, f, tuple(strides), [(0, 0)] * rank, rhs_dilation=tuple(dilations),
        dimension_numbers=_channels_last(rank), precision=jax.lax.Precision.HIGHEST,
    )


def _depthwise_conv(x, f, strides, dilations, pads, sizes):
    """`y[n, *u, c, m] = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, m], k)`: a convolution with
    one group per channel."""
    rank = len(strides)
    channels, multiplier = jnp.shape(f)[-2:]
    x = _window_span(x, pads, _conv_spans(strides, dilations, sizes, jnp.shape(f)[:rank]))
    y = jax.lax.conv_general_dilated(
        x, jnp.reshape(f, jnp.shape(f)[:rank] + (1, channels * multiplier)), tuple(strides), [(0, 0)] * rank,
        rhs_dilation=tuple(dilations), dimension_numbers=_channels_last(rank), feature_group_count=channels,
        precision=jax.lax.Precision.HIGHEST,
    )
    return jnp.reshape(y, jnp.shape(y)[:-1] + (channels, multiplier))


def _transposed(linear, like, g):
    """The transpose of the linear map `linear` (of an array shaped and typed as `like`) at
    `g`: how a convolution's gradients are the convolutions JAX transposes it to."""
    return jax.linear_transpose(linear, like)(g)[0]


def _conv_backprop_input(g, f, strides, dilations, pads, sizes):
    """`dx[n, *h, c] = sum(g[n, *((h + p - k*d) / s), o] * f[*k, c, o], k, o)`, where s divides."""
    x = jax.ShapeDtypeStruct((jnp.shape(g)[0], *sizes, jnp.shape(f)[-2]), jnp.result_type(g, f))
    counts = tuple(jnp.shape(g)[1:-1])
    return _transposed(lambda x: _conv(x, f, strides, dilations, pads, counts), x, g)


def _conv_backprop_filter(x, g, strides, dilations, pads, sizes):
    """`df[*k, c, o] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, o], n, u)`."""
    f = jax.ShapeDtypeStruct((*sizes, jnp.shape(x)[-1], jnp.shape(g)[-1]), jnp.result_type(x, g))
    counts = tuple(jnp.shape(g)[1:-1])
    return _transposed(lambda f: _conv(x, f, strides, dilations, pads, counts), f, g)


def _depthwise_conv_backprop_input(g, f, strides, dilations, pads, sizes):
    """`dx[n, *h, c] = sum(g[n, *((h + p - k*d) / s), c, m] * f[*k, c, m], k, m)`, where s divides."""
    x = jax.ShapeDtypeStruct((jnp.shape(g)[0], *sizes, jnp.shape(f)[-2]), jnp.result_type(g, f))
    counts = tuple(jnp.shape(g)[1:-2])
    return _transposed(lambda x: _depthwise_conv(x, f, strides, dilations, pads, counts), x, g)


def _depthwise_conv_backprop_filter(x, g, strides, dilations, pads, sizes):
    """`df[*k, c, m] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, c, m], n, u)`."""
    f = jax.ShapeDtypeStruct((*sizes, *jnp.shape(g)[-2:]), jnp.result_type(x, g))
    counts = tuple(jnp.shape(g)[1:-2])
    return _transposed(lambda f: _depthwise_conv(x, f, strides, dilations, pads, counts), f, g)


def _max_pool_backprop(x, y, g, window, strides, pads, sizes):
    """`dx[n, *h, c]`: each window's `g[n, *u, c]` added at the first entry (row-major) of
    window u of `x`, read at `u*s + k - p` (padding never the maximum), equal to its maximum
    `y[n, *u, c]`: a loop over the window's positions, each a strided slice of `x`."""
    counts, ones = jnp.shape(g)[1:-1], (1,) * len(strides)
    x = _window_span(x, pads, _conv_spans(strides, ones, counts, window), fill=-jnp.inf)
    dx = jnp.zeros(jnp.shape(x), jnp.result_type(x, g))
    unclaimed = jnp.ones(jnp.shape(g), dtype=bool)
    for k in itertools.product(*(range(w) for w in window)):
        cut = (slice(None),) + tuple(slice(j, j + (q - 1) * s + 1, s) for j, q, s in zip(k, counts, strides))
        first = unclaimed & (x[cut] == y)
        dx = dx.at[cut].add(jnp.where(first, g, 0))
        unclaimed = unclaimed & ~first
    return _window_unspan(dx, pads, sizes)


def _like_dtype(value, like):
    """`value` in the dtype of `like`, its real part where `like` is real: a gradient in its
    input's dtype."""
    if jnp.iscomplexobj(value) and not jnp.iscomplexobj(like):
        value = jnp.real(value)
    return jnp.asarray(value).astype(jnp.result_type(like))


def _as_dtype(value, dtype):
    """`value` in `dtype` (a name or a dtype), its real part for a real dtype (TensorFlow's Cast)."""
    dtype = jnp.dtype(getattr(dtype, "name", dtype))
    if jnp.iscomplexobj(value) and not jnp.issubdtype(dtype, jnp.complexfloating):
        value = jnp.real(value)
    return jnp.asarray(value).astype(dtype)


def _promoted(value, like):
    """`value` in the complex dtype of `like` where `like` is complex and `value` real."""
    if jnp.iscomplexobj(like) and not jnp.iscomplexobj(value):
        return jnp.asarray(value).astype(jnp.result_type(like))
    return value


def _attention_mask(mask, is_causal, rows, cols, like):
    """The additive mask an attention adds to its scores, `(rows, cols)`: with `is_causal`,
    -inf where a column is past its row (`j > i`), as `jax.nn.dot_product_attention`'s
    `is_causal` masks; else `mask`, or zeros where it is None (no mask)."""
    if is_causal and mask is not None:
        raise ValueError("an explicit mask and is_causal=True: give one of them")
    if is_causal:
        past = jnp.arange(cols)[None, :] > jnp.arange(rows)[:, None]
        return jnp.where(past, -jnp.inf, 0).astype(like.dtype)
    return jnp.zeros((rows, cols), dtype=like.dtype) if mask is None else mask
