"""The helpers generated TensorFlow modules call, as real Python: `symgrad.runtime_module`
writes them (with `kernels.py`'s), in this order, as the runtime module each folder of
generated modules imports from, so that generated files import nothing of symgrad.
"""

from __future__ import annotations

import tensorflow as tf

def _register(op_type, gradient_fn):
    """Register `gradient_fn` as `Symgrad<op_type>`, and as `op_type` where that is free; the
    names it is registered under (a generated module's `REGISTERED[op_type]`)."""
    names = []
    for name in (op_type, "Symgrad" + op_type):
        try:
            tf.RegisterGradient(name)(gradient_fn)
            names.append(name)
        except KeyError:  # TensorFlow's own gradient, or this module imported twice
            pass
    return tuple(names)


def _custom_gradient(op_type, inputs, forward, vjp, outputs, read=False, stages=False, declares=None):
    """`forward(*inputs, **attrs)` with the derived gradient `vjp(cotangents..., *inputs,
    **outputs, **attrs, **stages)` (`tf.custom_gradient`), for eager mode and `tf.function`.
    `inputs` and `outputs` are TensorFlow's names, "a b", a list's starred. The forward is
    TensorFlow's own kernel of `op_type` where TensorFlow runs it and `declares(*inputs,
    **attrs)`, where given, says the formula takes the attributes (others still raise as the
    formula does); else the formula, whose `stages` the gradient is then given. Where the
    gradient reads the outputs (`read`) it reads them again through a custom gradient of their
    own, so that a second order differentiates them by the derived gradient too, not by
    TensorFlow's gradient of its kernel."""
    names, outputs = inputs.split(), outputs.split()
    single, listed = len(outputs) == 1, outputs[0].startswith("*")
    outputs = [name.lstrip("*") for name in outputs]

    def apply(*values, **attrs):
        found = {}  # the formula's stages

        @tf.custom_gradient
        def run(*values):
            def backward(*cotangents):
                again = outputs_again(*values) if read else result
                given = dict(zip(outputs, (again,) if single else again))
                cotangents = [list(cotangents)] if listed else cotangents
                return vjp(*cotangents, *values, **given, **attrs, **found)

            @tf.custom_gradient
            def outputs_again(*values):
                return tf.nest.map_structure(tf.identity, result), backward

            declared = declares is None or declares(*values, **attrs)
            kernel = declared and _tf_kernel(op_type, len(outputs), _named(names, values), attrs, listed)
            if kernel:  # TensorFlow's own kernel
                result = kernel[0] if single else tuple(kernel)
            elif stages:  # else the declared formula
                result, computed = forward(*values, **attrs, return_stages=True)
                found.update(computed)
            else:
                result = forward(*values, **attrs)
            return result, backward

        return run(*values)

    return apply


def _named(names, values):
    """TensorFlow's input names -> the values; a starred name (a list input, last) takes the
    rest as a tuple."""
    if names and names[-1].startswith("*"):
        return {**dict(zip(names[:-1], values)), names[-1][1:]: tuple(values[len(names) - 1 :])}
    return dict(zip(names, values))


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
    # a `g` that broadcasts to `x` (a second order's cotangent of a broadcast input) is
    # broadcast first; a larger one is passed through
    g = tf.broadcast_to(g, tf.broadcast_dynamic_shape(tf.shape(g), shape))
    axes, _ = tf.raw_ops.BroadcastGradientArgs(s0=shape, s1=tf.shape(g))
    return tf.reshape(tf.reduce_sum(g, axes), shape)


def _einsum_over_batch(spec, *operands):
    """`tf.einsum(spec, ...)` where `spec` sums the leading `...` axes away, which TensorFlow's
    einsum refuses: they are kept, then summed."""
    inputs, output = spec.split("->")
    product = tf.einsum(f"{inputs}->...{output}", *operands)
    return tf.reduce_sum(product, axis=tf.range(tf.rank(product) - len(output)))


def _einsum_of_diagonals(spec, *operands):
    """`tf.einsum(spec, ...)` where an operand repeats a subscript (a diagonal) at a rank
    TensorFlow's einsum refuses to take diagonals at (above 6): each repeated pair taken first
    by `tf.linalg.diag_part` over the two axes moved last."""
    inputs, output = spec.split("->")
    taken = [_diagonals(x, term) for x, term in zip(operands, inputs.split(","))]
    return tf.einsum(f"{','.join(t for _, t in taken)}->{output}", *(x for x, _ in taken))


def _diagonals(x, term):
    """(x, its subscripts) with every repeated subscript of `term` taken as one axis, last."""
    letters = term.replace("...", "")
    repeated = next((c for c in letters if letters.count(c) > 1), None)
    if repeated is None:
        return x, term
    lead, _, tail = term.rpartition("...") if "..." in term else ("", "", term)
    rank = len(x.shape)
    axes = [k for k, c in enumerate(lead) if c == repeated] + [rank - len(tail) + k for k, c in enumerate(tail) if c == repeated]
    perm = [a for a in range(rank) if a not in axes[:2]] + axes[:2]
    return _diagonals(tf.linalg.diag_part(tf.transpose(x, perm)), term.replace(repeated, "", 2) + repeated)


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
    by = by if tf.is_tensor(by) else tf.constant(by, x.dtype)  # a constant decay
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
    positions outside the axis read as `fill` (the padding of an index map): they read one
    `fill` entry appended to the axis, so that no mask is broadcast against the result (a
    select, which TensorFlow broadcasts up to rank 8 only)."""
    x, positions = tf.convert_to_tensor(x), tf.cast(positions, tf.int64)
    size = tf.shape(x, out_type=tf.int64)[axis]
    inside = (positions >= 0) & (positions < size)
    entry_shape = tf.tensor_scatter_nd_update(tf.shape(x), [[x.shape.rank + axis]], [1])
    padded = tf.concat([x, tf.fill(entry_shape, tf.constant(fill, x.dtype))], axis)  # tf.pad stops at rank 8
    return tf.gather(padded, tf.where(inside, positions, tf.zeros_like(positions) + size), axis=axis)


def _scatter_add(values, positions, trailing, size):
    """The adjoint of `_gather`: the axes of `values` that `positions` has (those before the
    last `trailing`) are summed into `size` slots at `positions`; positions outside 0..size-1
    are dropped. A scatter-add, as TensorFlow's unsorted segment sum."""
    return _scatter_segments(tf.math.unsorted_segment_sum, values, positions, trailing, size)


def _scatter_rows(values, positions, trailing, size):
    """`_scatter_add` of a gradient at the positions an input gives (a gather's indices), as
    TensorFlow's own gather gradient: the rows and their positions, a `tf.IndexedSlices` that
    optimizers apply sparsely, where the positions index the first axis (else dense)."""
    values, positions = tf.convert_to_tensor(values), tf.convert_to_tensor(positions)
    count = positions.shape.rank
    if values.shape.rank != count + trailing:  # leading axes, or values broadcast: dense
        return _scatter_add(values, positions, trailing, size)
    rows = tf.reshape(values, tf.concat([[-1], tf.shape(values)[count:]], 0))
    rest = tf.shape(values, out_type=tf.int64)[count:]
    dense_shape = tf.concat([tf.reshape(tf.cast(size, tf.int64), [1]), rest], 0)
    return tf.IndexedSlices(rows, tf.reshape(positions, [-1]), dense_shape)


def _scatter_extremum(values, positions, trailing, size, kind):
    """`_scatter_add`'s layout, the values at equal positions reduced to their maximum (`kind`
    "max") or minimum ("min"), as TensorFlow's unsorted segment max and min (the dtype's
    lowest or highest value in a slot no position names)."""
    reduce = tf.math.unsorted_segment_max if kind == "max" else tf.math.unsorted_segment_min
    return _scatter_segments(reduce, values, positions, trailing, size)


def _scatter_product(values, positions, trailing, size):
    """`_scatter_add`'s layout, the values at equal positions multiplied, as TensorFlow's
    unsorted segment prod (1 in a slot no position names)."""
    return _scatter_segments(tf.math.unsorted_segment_prod, values, positions, trailing, size)


def _scatter_segments(reduce, values, positions, trailing, size):
    """`values` reduced into `size` slots at `positions` by the segment reduction `reduce`,
    the positions' axes those of `values` before the last `trailing`."""
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
    summed = reduce(data, slots, size + 1)[:size]
    back = list(range(1, start + 1)) + [0] + list(range(start + 1, rank - count + 1))
    return tf.transpose(summed, back)


def _like_dtype(value, like):
    """`value` in the dtype of `like`, its real part where `like` is real: a gradient in its
    input's dtype."""
    value = tf.convert_to_tensor(value)
    if value.dtype.is_complex and not like.dtype.is_complex:
        value = tf.math.real(value)
    return tf.cast(value, like.dtype)


def _as_dtype(value, dtype):
    """`value` in `dtype` (a name or a dtype), its real part for a real dtype (TensorFlow's Cast)."""
    dtype = tf.as_dtype(getattr(dtype, "name", dtype))
    value = tf.convert_to_tensor(value)
    if value.dtype.is_complex and not dtype.is_complex:
        value = tf.math.real(value)
    return tf.cast(value, dtype)


def _promoted(value, like):
    """`value` in the complex dtype of `like` where `like` is complex and `value` real."""
    value = tf.convert_to_tensor(value)
    if like.dtype.is_complex and not value.dtype.is_complex:
        return tf.cast(value, like.dtype)
    return value


def _modulus(x):
    """|x| in the dtype of x (TensorFlow's `abs` of a complex tensor is real)."""
    return tf.cast(tf.math.abs(x), x.dtype)
