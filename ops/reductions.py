"""Reductions and cumulative sums over the last axis, for inputs of any rank.

TensorFlow passes the axis as a constant input (`op.inputs[1]`); these declarations cover
axis -1 (other values raise). `keep_dims` keeps the reduced axis with size 1 (index 0).
"""

import sympy as sp

from symgrad import const_input, dims, indices, maximum, minimum, op, product, tensor

N = dims("N")[0]
i, k = indices("i k")
LAST_AXIS = const_input(1, (-1,))


def _reduced(keep_dims):
    """The output indices of a reduction over the last axis."""
    return (..., 0) if keep_dims else (...,)


@op("Sum", attrs={"axis": LAST_AXIS, "keep_dims": bool})
def reduce_sum(axis, keep_dims):
    """Sum over the last axis."""
    x = tensor("input", (..., N))
    return {"output": (_reduced(keep_dims), sp.Sum(x[..., k], (k, 0, N - 1)))}


@op("Mean", attrs={"axis": LAST_AXIS, "keep_dims": bool})
def reduce_mean(axis, keep_dims):
    """Mean over the last axis."""
    x = tensor("input", (..., N))
    return {"output": (_reduced(keep_dims), sp.Sum(x[..., k], (k, 0, N - 1)) / N)}


@op("EuclideanNorm", attrs={"axis": LAST_AXIS, "keep_dims": bool})
def euclidean_norm(axis, keep_dims):
    """Square root of the sum of squares over the last axis."""
    x = tensor("input", (..., N))
    return {"output": (_reduced(keep_dims), sp.sqrt(sp.Sum(x[..., k] ** 2, (k, 0, N - 1))))}


@op("ReduceLogSumExp")
def reduce_log_sum_exp():
    """log(sum(exp(x))) over the last axis (TensorFlow composes it; it has no op of its own)."""
    x = tensor("input", (..., N))
    return {"output": ((...,), sp.log(sp.Sum(sp.exp(x[..., k]), (k, 0, N - 1))))}


@op("Cumsum", attrs={"axis": LAST_AXIS, "exclusive": bool, "reverse": bool})
def cumsum(axis, exclusive, reverse):
    """Cumulative sum along the last axis; `exclusive` leaves each element out of its sum."""
    x = tensor("x", (..., N))
    if reverse:
        first, last = (i + 1 if exclusive else i), N - 1
    else:
        first, last = 0, (i - 1 if exclusive else i)
    return {"out": ((..., i), sp.Sum(x[..., k], (k, first, last)))}


@op("Prod", attrs={"axis": LAST_AXIS, "keep_dims": bool})
def reduce_prod(axis, keep_dims):
    """Product over the last axis; its gradient is finite with zeros in the slice."""
    x = tensor("input", (..., N))
    return {"output": (_reduced(keep_dims), product(x[..., k], (k, 0, N - 1)))}


@op("Max", attrs={"axis": LAST_AXIS, "keep_dims": bool})
def reduce_max(axis, keep_dims):
    """Maximum over the last axis; tied maxima share the gradient equally."""
    x = tensor("input", (..., N))
    return {"output": (_reduced(keep_dims), maximum(x[..., k], (k, 0, N - 1)))}


@op("Min", attrs={"axis": LAST_AXIS, "keep_dims": bool})
def reduce_min(axis, keep_dims):
    """Minimum over the last axis; tied minima share the gradient equally."""
    x = tensor("input", (..., N))
    return {"output": (_reduced(keep_dims), minimum(x[..., k], (k, 0, N - 1)))}
