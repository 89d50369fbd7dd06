"""JAX's own function for each op type it has one for, the reference of `symgrad diff --against
jax`: symgrad's derived gradient is compared with the differentiation rules JAX writes by hand
for the call here (a `lax` primitive's JVP and transpose rules, a `jax.nn` function's
`custom_jvp`), not with JAX's autodiff of symgrad's own generated formula.

Each entry takes what the op's generated numpy forward takes (`<stem>_numpy.<op>`): the same
positional inputs, as JAX arrays (integer positions concrete, never traced), and the same
keyword attributes; it returns the same outputs, a tuple where the numpy forward returns one.
Attribute values JAX's function cannot express raise NotImplementedError; inputs TensorFlow
rejects raise ValueError. Layouts are TensorFlow's (NHWC, HWIO filters), which `lax` takes as
they are.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import jax.scipy.special as special
from jax import lax

from symgrad.backends.jax import layers
from symgrad.backends.jax.layers import broadcast_batch
from symgrad.backends.tf_layout import expressible, ints, of_inputs, single_diagonal, slice_ends, split_sizes


def _vjp_of(fn):
    """TensorFlow's gradient op of an activation (`gradients * fn'(features)`) as JAX's own
    rule for `fn`, applied by `jax.vjp`."""
    return lambda gradients, features: jax.vjp(fn, features)[1](gradients)[0]


# --- reductions and scans ----------------------------------------------------------------------


def _reduction(reduce):
    """An entry for Sum, Mean, ...: `reduce(input, axis=, keepdims=)` over the one axis."""
    return lambda input, *, axis=-1, keep_dims=False: reduce(input, axis=int(axis), keepdims=bool(keep_dims))


def _scan(scan, x, axis, exclusive, reverse, fill):
    """The `lax` scan along `axis` (its own `reverse`); exclusive as the inclusive scan of the
    input shifted one step, `fill` first."""
    axis = int(axis) % x.ndim
    if exclusive and x.shape[axis]:
        first = jnp.full_like(lax.slice_in_dim(x, 0, 1, axis=axis), fill)
        if reverse:
            x = jnp.concatenate([lax.slice_in_dim(x, 1, None, axis=axis), first], axis)
        else:
            x = jnp.concatenate([first, lax.slice_in_dim(x, 0, x.shape[axis] - 1, axis=axis)], axis)
    return scan(x, axis, reverse=bool(reverse))


def _cumsum(x, *, axis=-1, exclusive=False, reverse=False):
    return _scan(lax.cumsum, x, axis, exclusive, reverse, 0.0)


def _cumprod(x, *, axis=-1, exclusive=False, reverse=False):
    return _scan(lax.cumprod, x, axis, exclusive, reverse, 1.0)


def _cumulative_logsumexp(x, *, axis=-1, reverse=False):
    return _scan(lax.cumlogsumexp, x, axis, False, reverse, None)


# --- gathers and scatters ----------------------------------------------------------------------


def _scatter_nd(indices, updates, *, shape):
    indices = jnp.asarray(indices)
    # the sizes after the indexed axes are updates', as the declaration reads them
    size = ints(shape)[: indices.shape[-1]] + updates.shape[indices.ndim - 1 :]
    return jnp.zeros(size, updates.dtype).at[tuple(jnp.moveaxis(indices, -1, 0))].add(updates)


def _unsorted_segment_sum(data, segment_ids, *, num_segments):
    ids = jnp.asarray(segment_ids)
    rows = data.reshape((-1,) + data.shape[ids.ndim :])
    return jax.ops.segment_sum(rows, ids.reshape(-1), int(num_segments))


def _segment_sum(data, segment_ids):
    ids = jnp.asarray(segment_ids)  # ascending: one row per id up to the last
    return jax.ops.segment_sum(data, ids, int(ids[-1]) + 1, indices_are_sorted=True)


# --- diagonals ---------------------------------------------------------------------------------


def _diagonal_matrix(diagonal, k=0, num_rows=-1, num_cols=-1, padding_value=0, op="MatrixDiag"):
    given = (int(num_rows), int(num_cols), float(padding_value))
    expressible(given == (-1, -1, 0), f"{op}: jnp.diag sizes the matrix itself and fills zeros, got {given}")
    offset = single_diagonal(k, op)
    return jnp.vectorize(lambda d: jnp.diag(d, offset), signature="(n)->(m,m)")(diagonal)


def _matrix_set_diag(input, diagonal, k=0, op="MatrixSetDiag"):
    input, diagonal = broadcast_batch([input, diagonal], [2, 1])
    offset = single_diagonal(k, op)
    rows = jnp.arange(diagonal.shape[-1]) + max(-offset, 0)
    return input.at[..., rows, rows + offset].set(diagonal)


def _matrix_band_part(input, *, num_lower, num_upper):
    band = input if int(num_lower) < 0 else jnp.triu(input, -int(num_lower))
    return band if int(num_upper) < 0 else jnp.tril(band, int(num_upper))


# --- pads, slices, lists, space ----------------------------------------------------------------


def _mirror_pad(input, *, mode="REFLECT", paddings):
    pairs = [ints(pair) for pair in paddings]
    # TensorFlow mirrors at most the axis' entries (REFLECT: but the edge one); jnp.pad repeats on
    reach = [size - (mode == "REFLECT") for size in input.shape]
    if any(max(pair) > limit for pair, limit in zip(pairs, reach)):
        raise ValueError(f"MirrorPad: paddings={pairs} reach past {tuple(input.shape)} in {mode} mode")
    return jnp.pad(input, pairs, mode=mode.lower())


def _slice(input, *, begin, size):
    ends = slice_ends(begin, size, input.shape)
    return lax.slice(input, ints(begin), ends)


def _concat_v2(*values, axis=-1):
    axis = int(axis)
    trailing = -axis if axis < 0 else values[0].ndim - axis
    return jnp.concatenate(broadcast_batch(values, [trailing] * len(values)), axis)


def _split(value, *, num_split=2, axis=-1):
    size, num_split = value.shape[int(axis)], int(num_split)
    if size % num_split:
        raise ValueError(f"Split: num_split={num_split} does not divide the axis' {size} entries")
    return jnp.split(value, num_split, int(axis))


def _split_v(value, *, num_split=2, axis=-1, size_splits):
    sizes = split_sizes(size_splits, value.shape[int(axis)])
    return jnp.split(value, list(itertools.accumulate(sizes[:-1])), int(axis))


def _unpack(value, *, num=2, axis=-1):
    if value.shape[int(axis)] != int(num):
        raise ValueError(f"Unpack: axis {axis} has {value.shape[int(axis)]} entries, not num={num}")
    return tuple(jnp.moveaxis(value, int(axis), 0))


# TensorFlow orders a pixel's depth (block row, block column, channel)


def _depth_to_space(input, *, data_format="NHWC", block_size):
    expressible(data_format == "NHWC", f"DepthToSpace: declared for NHWC only, got {data_format!r}")
    n, h, w, depth = input.shape
    r = int(block_size)
    blocks = input.reshape(n, h, w, r, r, depth // (r * r)).transpose(0, 1, 3, 2, 4, 5)
    return blocks.reshape(n, h * r, w * r, depth // (r * r))


def _space_to_depth(input, *, data_format="NHWC", block_size):
    expressible(data_format == "NHWC", f"SpaceToDepth: declared for NHWC only, got {data_format!r}")
    n, h, w, c = input.shape
    r = int(block_size)
    blocks = input.reshape(n, h // r, r, w // r, r, c).transpose(0, 1, 3, 2, 4, 5)
    return blocks.reshape(n, h // r, w // r, r * r * c)


# --- the table ---------------------------------------------------------------------------------

# elementwise ops, keyed by their inputs' names in the numpy forwards
# fmt: off
_OF_X = {
    "Abs": jnp.abs, "Acos": jnp.arccos, "Acosh": jnp.arccosh, "Asin": jnp.arcsin,
    "Asinh": jnp.arcsinh, "Atan": jnp.arctan, "Atanh": jnp.arctanh, "Ceil": jnp.ceil,
    "Cos": jnp.cos, "Cosh": jnp.cosh, "Erf": special.erf, "Erfc": special.erfc,
    "Exp": jnp.exp, "Expm1": jnp.expm1, "Floor": jnp.floor, "Inv": jnp.reciprocal,
    "Log": jnp.log, "Log1p": jnp.log1p, "Neg": jnp.negative, "Reciprocal": jnp.reciprocal,
    "Rint": jnp.round, "Round": jnp.round,  # both round ties to even
    "Rsqrt": lax.rsqrt, "Sigmoid": jax.nn.sigmoid, "Sign": jnp.sign, "Sin": jnp.sin,
    "Sinh": jnp.sinh, "Sqrt": jnp.sqrt, "Square": jnp.square, "Tan": jnp.tan,
    "Tanh": jnp.tanh, "BesselI0": special.i0, "BesselI0e": special.i0e,
    "BesselI1": special.i1, "BesselI1e": special.i1e,
    "Digamma": special.digamma, "Erfinv": special.erfinv, "Expint": special.expi,
    "Lgamma": special.gammaln, "Ndtri": special.ndtri, "Spence": special.spence,
}
_OF_FEATURES = {
    "Elu": jax.nn.elu, "Relu": jax.nn.relu, "Relu6": jax.nn.relu6, "Selu": jax.nn.selu,
    "Softplus": jax.nn.softplus, "Softsign": jax.nn.soft_sign,
}
_OF_X_Y = {
    "Add": jnp.add, "AddV2": jnp.add, "Div": jnp.divide, "RealDiv": jnp.divide,
    "Maximum": jnp.maximum, "Minimum": jnp.minimum, "Mul": jnp.multiply, "Pow": jnp.power,
    "Sub": jnp.subtract, "Xlog1py": special.xlog1py, "Xlogy": special.xlogy,
    "FloorDiv": jnp.floor_divide, "FloorMod": jnp.remainder,  # the sign of y, as Python's %
    "TruncateDiv": lambda x, y: jnp.trunc(x / y),
    "SquaredDifference": lambda x, y: jnp.square(x - y),
}
# TensorFlow's activation gradient ops, as JAX's rule for the activation (not LeakyReluGrad:
# at 0 JAX's leaky_relu has slope 1, TensorFlow's LeakyReluGrad alpha)
_GRAD_OF = {
    "Relu6Grad": jax.nn.relu6, "ReluGrad": jax.nn.relu, "SoftplusGrad": jax.nn.softplus,
    "SoftsignGrad": jax.nn.soft_sign,
}
# fmt: on


FUNCTIONS = {  # op type -> the matching JAX call
    **of_inputs(_OF_X, 1),
    **of_inputs(_OF_FEATURES, 1),
    **of_inputs(_OF_X_Y, 2),
    **{op: _vjp_of(fn) for op, fn in _GRAD_OF.items()},
    "LeakyRelu": lambda features, *, alpha=0.2: jax.nn.leaky_relu(features, alpha),
    "Atan2": lambda y, x: jnp.arctan2(y, x),
    # the order, an integer JAX takes as one, gets no gradient (nor in TensorFlow's PolygammaGrad)
    "Polygamma": lambda a, x: special.polygamma(lax.stop_gradient(a).astype(int), x),
    # no derivative in x (nor has TensorFlow's ZetaGrad; the declaration stops it)
    "Zeta": lambda x, q: special.zeta(lax.stop_gradient(x), q),
    # matmuls and einsum
    "BatchMatMul": layers.batch_mat_mul,
    "BatchMatMulV2": layers.batch_mat_mul,
    "Einsum": lambda *inputs, equation="ij,jk->ik": jnp.einsum(equation, *inputs),
    "MatMul": layers.matmul,
    "SparseMatMul": layers.matmul,
    # softmax, losses, normalisations, composed layers
    "BatchNormTraining": layers.batch_norm_training,
    "BiasAdd": layers.bias_add,
    "BiasAddGrad": layers.bias_add_backprop,
    "BiasAddV1": lambda value, bias: jnp.add(value, bias),
    "BiasGelu": lambda x, bias: jax.nn.gelu(x + bias, approximate=True),
    "Cross": lambda a, b: jnp.cross(a, b),
    "GroupNorm": layers.group_norm,
    "L2Loss": lambda t: jnp.sum(jnp.square(t)) / 2,
    "LayerNorm": layers.layer_norm,
    "LayerNormMoments": layers.layer_norm,
    "LogSoftmax": lambda logits: jax.nn.log_softmax(logits, -1),
    "LogSumExpMatMul": lambda a, b: jax.nn.logsumexp(jnp.matmul(a, b), -1),
    "MlpBlock": layers.mlp_block,
    "ScaledDotProductAttention": layers.attention,
    "Softmax": lambda logits: jax.nn.softmax(logits, -1),
    "SoftmaxCrossEntropyWithLogits": layers.softmax_cross_entropy_with_logits,
    # reductions and scans
    "Cumprod": _cumprod,
    "Cumsum": _cumsum,
    "CumulativeLogsumexp": _cumulative_logsumexp,
    "EuclideanNorm": _reduction(lambda x, axis, keepdims: jnp.linalg.norm(x, axis=axis, keepdims=keepdims)),
    "Max": _reduction(jnp.max),  # JAX shares the gradient among tied maxima, as declared
    "Mean": _reduction(jnp.mean),
    "Min": _reduction(jnp.min),
    "Prod": _reduction(jnp.prod),
    "ReduceLogSumExp": lambda input: jax.nn.logsumexp(input, -1),
    "Sum": _reduction(jnp.sum),
    # convolutions and pooling
    "AvgPool": lambda value, *, padding="VALID", ksize, strides: layers.avg_pool_nd(value, ksize, strides, padding, "AvgPool"),
    "AvgPool3D": lambda input, *, padding="VALID", ksize, strides: layers.avg_pool_nd(input, ksize, strides, padding, "AvgPool3D"),
    "Conv2D": layers.conv2d,
    "Conv3D": layers.conv3d,
    "DepthwiseConv2dNative": layers.depthwise_conv2d_native,
    "ExtractImagePatches": layers.extract_image_patches,
    "MaxPool": layers.max_pool,
    "MaxPoolV2": lambda input, *, padding="VALID", ksize, strides: layers.max_pool(input, padding=padding, ksize=ksize, strides=strides),
    # gathers (lax.gather) and scatters (lax.scatter_add)
    "Gather": lambda params, indices: jnp.take(params, jnp.asarray(indices), axis=0),
    "GatherNd": lambda params, indices: params[tuple(jnp.moveaxis(jnp.asarray(indices), -1, 0))],
    "GatherV2": lambda params, indices, *, axis=0: jnp.take(params, jnp.asarray(indices), axis=int(axis)),
    "ScatterNd": _scatter_nd,
    "SegmentSum": _segment_sum,
    "UnsortedSegmentSum": _unsorted_segment_sum,
    # diagonals
    "Diag": lambda diagonal: jnp.diag(diagonal),
    "DiagPart": lambda input: jnp.diagonal(input),
    "MatrixBandPart": _matrix_band_part,
    "MatrixDiag": lambda diagonal: _diagonal_matrix(diagonal),
    "MatrixDiagPart": lambda input: jnp.diagonal(input, 0, -2, -1),
    "MatrixDiagPartV2": lambda input, *, k=0, padding_value=0: jnp.diagonal(input, single_diagonal(k, "MatrixDiagPartV2"), -2, -1),
    "MatrixDiagPartV3": lambda input, *, k=0, padding_value=0, align="RIGHT_LEFT": jnp.diagonal(
        input, single_diagonal(k, "MatrixDiagPartV3"), -2, -1
    ),
    "MatrixDiagV2": lambda diagonal, *, k=0, num_rows=-1, num_cols=-1, padding_value=0: _diagonal_matrix(
        diagonal, k, num_rows, num_cols, padding_value, "MatrixDiagV2"
    ),
    "MatrixDiagV3": lambda diagonal, *, k=0, num_rows=-1, num_cols=-1, padding_value=0, align="RIGHT_LEFT": _diagonal_matrix(
        diagonal, k, num_rows, num_cols, padding_value, "MatrixDiagV3"
    ),
    "MatrixSetDiag": lambda input, diagonal: _matrix_set_diag(input, diagonal),
    "MatrixSetDiagV2": lambda input, diagonal, *, k=0: _matrix_set_diag(input, diagonal, k, "MatrixSetDiagV2"),
    "MatrixSetDiagV3": lambda input, diagonal, *, k=0, align="RIGHT_LEFT": _matrix_set_diag(input, diagonal, k, "MatrixSetDiagV3"),
    "Trace": lambda x: jnp.trace(x, axis1=-2, axis2=-1),
    # shapes, pads, slices, lists
    "AddN": lambda *inputs: functools.reduce(jnp.add, inputs),
    "BroadcastTo": lambda input, *, shape: jnp.broadcast_to(input, ints(shape)),
    "ConcatV2": _concat_v2,
    "DepthToSpace": _depth_to_space,
    "ExpandDims": lambda input, *, axis=-1: jnp.expand_dims(input, int(axis)),
    "Identity": lambda input: jnp.asarray(input),
    "MirrorPad": _mirror_pad,
    "Pack": lambda *values, axis=-1: jnp.stack(values, int(axis)),
    "Pad": lambda input, *, paddings: jnp.pad(input, [ints(pair) for pair in paddings]),
    "ReverseV2": lambda tensor, *, axis=(-1,): jnp.flip(tensor, ints(axis)),
    "Slice": _slice,
    "SpaceToDepth": _space_to_depth,
    "Split": _split,
    "SplitV": _split_v,
    "Tile": lambda input, *, multiples: jnp.tile(input, ints(multiples)),
    "Transpose": lambda x, *, perm=(1, 0): jnp.transpose(x, ints(perm)),
    "Unpack": _unpack,
}
