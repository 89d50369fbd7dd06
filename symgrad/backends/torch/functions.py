"""PyTorch's own function for each op type it has one for, the reference of `symgrad diff
--against torch`: symgrad's derived gradient is compared with PyTorch's hand-written derivative
(tools/autograd/derivatives.yaml) of the call here, not with autodiff of a formula.

Each entry takes what the op's generated numpy forward takes (`<stem>_numpy.<op>`): the same
positional inputs, as torch tensors (integer positions as int64 tensors or as the numpy
forward's Python values), and the same keyword attributes; it returns the same outputs, a
tuple where the numpy forward returns one. Attribute values PyTorch's function cannot express
raise NotImplementedError; inputs TensorFlow rejects (a slice past the end) raise ValueError.
Layouts are TensorFlow's (NHWC, HWIO filters): convolutions and pools permute to NCHW and back.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from symgrad.backends.tf_layout import expressible, ints, of_inputs, single_diagonal, slice_ends, split_sizes
from symgrad.backends.torch import layers
from symgrad.backends.torch.layers import nchw, nhwc, torch_pads

aten = torch.ops.aten


def _broadcast_batch(tensors, trailing):
    """`tensors` with their leading axes broadcast, each keeping its last `trailing[k]` axes:
    symgrad broadcasts `...` between inputs, torch.cat and friends take equal shapes."""
    batch = torch.broadcast_shapes(*(t.shape[: t.ndim - n] for t, n in zip(tensors, trailing)))
    return [t.expand(batch + t.shape[t.ndim - n :]) for t, n in zip(tensors, trailing)]


# --- reductions and scans ----------------------------------------------------------------------


def _reduction(reduce):
    """An entry for Sum, Mean, ...: `reduce(input, dim, keepdim=)` over the one axis."""
    return lambda input, *, axis=-1, keep_dims=False: reduce(
        input, dim=int(axis), keepdim=bool(keep_dims)
    )


def _scan(scan, x, axis, exclusive, reverse, fill):
    """`scan` along `axis`, reversed by flips; exclusive as the inclusive scan of the input
    shifted one step, `fill` first."""
    axis = int(axis)
    if reverse:
        x = torch.flip(x, (axis,))
    if exclusive and x.shape[axis]:
        first = torch.full_like(x.narrow(axis, 0, 1), fill)
        x = torch.cat([first, x.narrow(axis, 0, x.shape[axis] - 1)], axis)
    out = scan(x, axis)
    return torch.flip(out, (axis,)) if reverse else out


def _cumsum(x, *, axis=-1, exclusive=False, reverse=False):
    return _scan(torch.cumsum, x, axis, exclusive, reverse, 0.0)


def _cumprod(x, *, axis=-1, exclusive=False, reverse=False):
    return _scan(torch.cumprod, x, axis, exclusive, reverse, 1.0)


def _cumulative_logsumexp(x, *, axis=-1, reverse=False):
    return _scan(torch.logcumsumexp, x, axis, False, reverse, None)


# --- gathers and scatters ----------------------------------------------------------------------


def _gather_v2(params, indices, *, axis=0):
    axis, indices = int(axis) % params.ndim, torch.as_tensor(indices)
    rows = torch.index_select(params, axis, indices.reshape(-1))
    return rows.reshape(params.shape[:axis] + indices.shape + params.shape[axis + 1 :])


def _scatter_nd(indices, updates, *, shape):
    indices = torch.as_tensor(indices)
    # the sizes after the indexed axes are updates', as the declaration reads them
    size = ints(shape)[: indices.shape[-1]] + updates.shape[indices.ndim - 1 :]
    zeros = updates.new_zeros(size)
    return torch.index_put(zeros, tuple(indices.unbind(-1)), updates, accumulate=True)


def _unsorted_segment_sum(data, segment_ids, *, num_segments):
    ids = torch.as_tensor(segment_ids)
    rows = data.reshape((-1,) + data.shape[ids.ndim :])
    return torch.index_add(
        rows.new_zeros((int(num_segments),) + rows.shape[1:]), 0, ids.reshape(-1), rows
    )


def _segment_sum(data, segment_ids):
    ids = torch.as_tensor(segment_ids)
    # one row per id up to the last (ascending): the lengths of the runs of equal ids
    lengths = torch.bincount(ids, minlength=int(ids[-1]) + 1)
    return torch.segment_reduce(data, "sum", lengths=lengths, axis=0, unsafe=True)


# --- diagonals ---------------------------------------------------------------------------------


def _trace(x):
    if x.ndim == 2:
        return torch.trace(x)
    return torch.diagonal(x, 0, -2, -1).sum(-1)  # torch.trace takes one matrix only


def _matrix_diag_part_v2(input, *, k=0, padding_value=0):
    return torch.diagonal(input, single_diagonal(k, "MatrixDiagPartV2"), -2, -1)


def _matrix_diag_part_v3(input, *, k=0, padding_value=0, align="RIGHT_LEFT"):
    return torch.diagonal(input, single_diagonal(k, "MatrixDiagPartV3"), -2, -1)


def _diagonal_matrix(diagonal, k, num_rows, num_cols, padding_value, op):
    given = (int(num_rows), int(num_cols), float(padding_value))
    message = f"{op}: diag_embed sizes the matrix itself and fills zeros, got {given}"
    expressible(given == (-1, -1, 0), message)
    return torch.diag_embed(diagonal, single_diagonal(k, op))


def _matrix_diag_v2(diagonal, *, k=0, num_rows=-1, num_cols=-1, padding_value=0):
    return _diagonal_matrix(diagonal, k, num_rows, num_cols, padding_value, "MatrixDiagV2")


def _matrix_diag_v3(
    diagonal, *, k=0, num_rows=-1, num_cols=-1, padding_value=0, align="RIGHT_LEFT"
):
    return _diagonal_matrix(diagonal, k, num_rows, num_cols, padding_value, "MatrixDiagV3")


def _matrix_set_diag(input, diagonal, k=0, op="MatrixSetDiag"):
    input, diagonal = _broadcast_batch([input, diagonal], [2, 1])
    return torch.diagonal_scatter(input, diagonal, single_diagonal(k, op), -2, -1)


def _matrix_set_diag_v2(input, diagonal, *, k=0):
    return _matrix_set_diag(input, diagonal, k, "MatrixSetDiagV2")


def _matrix_set_diag_v3(input, diagonal, *, k=0, align="RIGHT_LEFT"):
    return _matrix_set_diag(input, diagonal, k, "MatrixSetDiagV3")


def _matrix_band_part(input, *, num_lower, num_upper):
    band = input if int(num_lower) < 0 else torch.triu(input, -int(num_lower))
    return band if int(num_upper) < 0 else torch.tril(band, int(num_upper))


# --- pads, slices, lists, space ----------------------------------------------------------------


def _mirror_pad(input, *, mode="REFLECT", paddings):
    expressible(
        mode == "REFLECT", f"MirrorPad: F.pad has no {mode} mode (reflect repeats no edge entry)"
    )
    pairs = [ints(pair) for pair in paddings]
    while pairs and pairs[0] == (0, 0):  # F.pad reflects the last 1 to 3 axes only
        pairs.pop(0)
    expressible(
        len(pairs) <= 3, f"MirrorPad: F.pad reflects at most 3 axes, got paddings={paddings}"
    )
    if not pairs:
        return input.clone()
    # one batch axis before the reflected ones, the form F.pad takes
    kept, reflected = input.shape[: input.ndim - len(pairs)], input.shape[input.ndim - len(pairs) :]
    y = F.pad(input.reshape((-1,) + reflected), torch_pads(pairs), mode="reflect")
    return y.reshape(kept + y.shape[1:])


def _slice(input, *, begin, size):
    ends = slice_ends(begin, size, input.shape)
    return input[tuple(slice(b, e) for b, e in zip(ints(begin), ends))]


def _concat_v2(*values, axis=-1):
    axis = int(axis)
    trailing = -axis if axis < 0 else values[0].ndim - axis
    return torch.cat(_broadcast_batch(values, [trailing] * len(values)), axis)


def _split(value, *, num_split=2, axis=-1):
    size, num_split = value.shape[int(axis)], int(num_split)
    if size % num_split:
        raise ValueError(f"Split: num_split={num_split} does not divide the axis' {size} entries")
    return torch.split(value, size // num_split, int(axis))


def _split_v(value, *, num_split=2, axis=-1, size_splits):
    return torch.split(value, split_sizes(size_splits, value.shape[int(axis)]), int(axis))


def _unpack(value, *, num=2, axis=-1):
    if value.shape[int(axis)] != int(num):
        raise ValueError(f"Unpack: axis {axis} has {value.shape[int(axis)]} entries, not num={num}")
    return torch.unbind(value, int(axis))


# TensorFlow orders a pixel's depth (block row, block column, channel), pixel_shuffle (channel,
# block row, block column): the depth axis is regrouped on the NHWC side


def _depth_to_space(input, *, data_format="NHWC", block_size):
    expressible(
        data_format == "NHWC", f"DepthToSpace: declared for NHWC only, got {data_format!r}"
    )
    n, h, w, depth = input.shape
    r = int(block_size)
    x = input.reshape(n, h, w, r * r, depth // (r * r)).transpose(-1, -2).reshape(n, h, w, depth)
    return nhwc(F.pixel_shuffle(nchw(x), r))


def _space_to_depth(input, *, data_format="NHWC", block_size):
    expressible(
        data_format == "NHWC", f"SpaceToDepth: declared for NHWC only, got {data_format!r}"
    )
    r, channels = int(block_size), input.shape[-1]
    y = nhwc(F.pixel_unshuffle(nchw(input), r))
    n, h, w, depth = y.shape
    return y.reshape(n, h, w, channels, r * r).transpose(-1, -2).reshape(n, h, w, depth)


# --- the table ---------------------------------------------------------------------------------

# elementwise ops, keyed by their inputs' names in the numpy forwards
# fmt: off
_OF_X = {
    "Abs": torch.abs, "Acos": torch.acos, "Acosh": torch.acosh, "Asin": torch.asin,
    "Asinh": torch.asinh, "Atan": torch.atan, "Atanh": torch.atanh, "Ceil": torch.ceil,
    "Cos": torch.cos, "Cosh": torch.cosh, "Erf": torch.special.erf, "Erfc": torch.special.erfc,
    "Exp": torch.exp, "Expm1": torch.special.expm1, "Floor": torch.floor, "Inv": torch.reciprocal,
    "Log": torch.log, "Log1p": torch.log1p, "Neg": torch.neg, "Reciprocal": torch.reciprocal,
    "Rint": torch.round, "Round": torch.round,  # both round ties to even
    "Rsqrt": torch.rsqrt, "Sigmoid": torch.sigmoid, "Sign": torch.sign, "Sin": torch.sin,
    "Sinh": torch.sinh, "Sqrt": torch.sqrt, "Square": torch.square, "Tan": torch.tan,
    "Tanh": torch.tanh, "BesselI0": torch.special.i0, "BesselI0e": torch.special.i0e,
    "BesselI1": torch.special.i1, "BesselI1e": torch.special.i1e,
    "Digamma": torch.special.digamma, "Erfinv": torch.special.erfinv,
    "Lgamma": torch.special.gammaln, "Ndtri": torch.special.ndtri,
}
_OF_FEATURES = {
    "Elu": F.elu, "Relu": F.relu, "Relu6": F.relu6, "Selu": F.selu, "Softplus": F.softplus,
    "Softsign": F.softsign,
}
_OF_X_Y = {
    "Add": torch.add, "AddV2": torch.add, "Div": torch.div, "RealDiv": torch.div,
    "Maximum": torch.maximum, "Minimum": torch.minimum, "Mul": torch.mul, "Pow": torch.pow,
    "Sub": torch.sub, "Xlog1py": torch.special.xlog1py, "Xlogy": torch.xlogy,
    "FloorDiv": functools.partial(torch.div, rounding_mode="floor"),
    "TruncateDiv": functools.partial(torch.div, rounding_mode="trunc"),
    "FloorMod": torch.remainder,  # the sign of y, as Python's %
}
# fmt: on


FUNCTIONS = {  # op type -> the matching PyTorch call
    **of_inputs(_OF_X, 1),
    **of_inputs(_OF_FEATURES, 1),
    **of_inputs(_OF_X_Y, 2),
    "LeakyRelu": lambda features, *, alpha=0.2: F.leaky_relu(features, alpha),
    "Atan2": lambda y, x: torch.atan2(y, x),
    # PyTorch has no derivative in x (nor has TensorFlow's ZetaGrad; the declaration stops it)
    "Zeta": lambda x, q: torch.special.zeta(x.detach(), q),
    # TensorFlow's gradient ops as PyTorch's backward functions (each with its own derivative)
    "EluGrad": lambda gradients, outputs: aten.elu_backward(
        gradients, 1.0, 1.0, 1.0, True, outputs
    ),
    "LeakyReluGrad": lambda gradients, features, *, alpha=0.2: aten.leaky_relu_backward(
        gradients, features, alpha, False
    ),
    "Relu6Grad": lambda gradients, features: aten.hardtanh_backward(gradients, features, 0.0, 6.0),
    "ReluGrad": lambda gradients, features: aten.threshold_backward(gradients, features, 0.0),
    "SigmoidGrad": lambda y, dy: aten.sigmoid_backward(dy, y),
    "SoftplusGrad": lambda gradients, features: aten.softplus_backward(
        gradients, features, 1.0, 20.0
    ),
    "TanhGrad": lambda y, dy: aten.tanh_backward(dy, y),
    # matmuls and einsum
    "BatchMatMul": layers.batch_mat_mul,
    "BatchMatMulV2": layers.batch_mat_mul,
    "Einsum": lambda *inputs, equation="ij,jk->ik": torch.einsum(equation, *inputs),
    "MatMul": layers.matmul,
    "SparseMatMul": layers.matmul,
    # softmax, losses, normalisations, composed layers
    "BatchNormTraining": layers.batch_norm_training,
    "BiasAdd": layers.bias_add,
    "BiasAddGrad": layers.bias_add_backprop,
    "BiasAddV1": lambda value, bias: torch.add(value, bias),
    "BiasGelu": lambda x, bias: F.gelu(x + bias, approximate="tanh"),
    "Cross": lambda a, b: torch.linalg.cross(*torch.broadcast_tensors(a, b)),
    "GroupNorm": layers.group_norm,
    "L2Loss": lambda t: F.mse_loss(t, torch.zeros_like(t), reduction="sum") / 2,
    "LayerNorm": layers.layer_norm,
    "LayerNormMoments": layers.layer_norm,
    "LogSoftmax": lambda logits: torch.log_softmax(logits, -1),
    "LogSumExpMatMul": lambda a, b: torch.logsumexp(torch.matmul(a, b), -1),
    "MlpBlock": layers.mlp_block,
    "ScaledDotProductAttention": lambda q, k, v, mask: F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask
    ),
    "Softmax": lambda logits: torch.softmax(logits, -1),
    "SoftmaxCrossEntropyWithLogits": layers.softmax_cross_entropy_with_logits,
    # reductions and scans
    "Cumprod": _cumprod,
    "Cumsum": _cumsum,
    "CumulativeLogsumexp": _cumulative_logsumexp,
    "EuclideanNorm": _reduction(torch.linalg.vector_norm),
    "Max": _reduction(torch.amax),  # amax shares the gradient among tied maxima, as declared
    "Mean": _reduction(torch.mean),
    "Min": _reduction(torch.amin),
    "Prod": _reduction(torch.prod),
    "ReduceLogSumExp": lambda input: torch.logsumexp(input, -1),
    "Sum": _reduction(torch.sum),
    # convolutions and pooling
    "AvgPool": layers.avg_pool,
    "AvgPool3D": layers.avg_pool3d,
    "Conv2D": layers.conv2d,
    "Conv3D": layers.conv3d,
    "DepthwiseConv2dNative": layers.depthwise_conv2d_native,
    "ExtractImagePatches": layers.extract_image_patches,
    "MaxPool": layers.max_pool,
    "MaxPoolV2": layers.max_pool_v2,
    # gathers (GatherNd: advanced indexing, aten::index) and scatters
    "Gather": lambda params, indices: _gather_v2(params, indices),
    "GatherNd": lambda params, indices: params[tuple(torch.as_tensor(indices).unbind(-1))],
    "GatherV2": _gather_v2,
    "ScatterNd": _scatter_nd,
    "SegmentSum": _segment_sum,
    "UnsortedSegmentSum": _unsorted_segment_sum,
    # diagonals
    "Diag": lambda diagonal: torch.diag(diagonal),
    "DiagPart": lambda input: torch.diagonal(input),
    "MatrixBandPart": _matrix_band_part,
    "MatrixDiag": lambda diagonal: torch.diag_embed(diagonal),
    "MatrixDiagPart": lambda input: torch.diagonal(input, 0, -2, -1),
    "MatrixDiagPartV2": _matrix_diag_part_v2,
    "MatrixDiagPartV3": _matrix_diag_part_v3,
    "MatrixDiagV2": _matrix_diag_v2,
    "MatrixDiagV3": _matrix_diag_v3,
    "MatrixSetDiag": lambda input, diagonal: _matrix_set_diag(input, diagonal),
    "MatrixSetDiagV2": _matrix_set_diag_v2,
    "MatrixSetDiagV3": _matrix_set_diag_v3,
    "Trace": _trace,
    # shapes, pads, slices, lists
    "AddN": lambda *inputs: functools.reduce(torch.add, inputs),  # PyTorch has no add_n
    "BroadcastTo": lambda input, *, shape: torch.broadcast_to(input, ints(shape)),
    "ConcatV2": _concat_v2,
    "DepthToSpace": _depth_to_space,
    "ExpandDims": lambda input, *, axis=-1: torch.unsqueeze(input, int(axis)),
    "Identity": lambda input: torch.clone(input),
    "MirrorPad": _mirror_pad,
    "Pack": lambda *values, axis=-1: torch.stack(values, int(axis)),
    "Pad": lambda input, *, paddings: F.pad(input, torch_pads(paddings)),
    "ReverseV2": lambda tensor, *, axis=(-1,): torch.flip(tensor, ints(axis)),
    "Slice": _slice,
    "SpaceToDepth": _space_to_depth,
    "Split": _split,
    "SplitV": _split_v,
    "Tile": lambda input, *, multiples: torch.tile(input, ints(multiples)),
    "Transpose": lambda x, *, perm=(1, 0): torch.permute(x, ints(perm)),
    "Unpack": _unpack,
}
