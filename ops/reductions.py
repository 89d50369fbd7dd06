"""Reductions and cumulative sums over one axis, for inputs of any rank.

TensorFlow passes the axis as a constant input (`op.inputs[1]`). The declarations cover the
last three axes, -1, -2 and -3 (0, 1, 2 ... of an input of rank r are r - 3 ... of those, made
negative at run time); a list of axes raises. `keep_dims` keeps the reduced axis with size 1
(index 0 in the output's indices).
"""

import sympy as sp

from symgrad import Axis, DType, Input, argmax, argmin, attr, dims, indices, maximum, minimum, op, product, stop_gradient, tensor

N, P, Q = dims("N P Q")
i, k, p, q = indices("i k p q")
AXIS = attr(Axis("input", (-1, -2, -3)), Input(1))
TRAILING = ((p, P), (q, Q))  # indices and sizes of the axes after the reduced one


def _input(name: str, axis: int):
    """The input, for a reduction over `axis`: (tensor, its trailing indices)."""
    trailing = TRAILING[: -axis - 1]
    x = tensor(name, (..., N) + tuple(size for _, size in trailing))
    return x, tuple(index for index, _ in trailing)


def _entry(x, index, trailing):
    return x[(..., index) + trailing]


def _reduced(keep_dims, trailing):
    """The output indices of a reduction: the reduced axis kept with size 1, or dropped."""
    return (..., 0) + trailing if keep_dims else (...,) + trailing


@op("Sum", attrs={"axis": AXIS, "keep_dims": bool})
def reduce_sum(axis, keep_dims):
    """Sum over one axis."""
    x, trailing = _input("input", axis)
    total = sp.Sum(_entry(x, k, trailing), (k, 0, N - 1))
    return {"output": (_reduced(keep_dims, trailing), total)}


@op("Mean", attrs={"axis": AXIS, "keep_dims": bool})
def reduce_mean(axis, keep_dims):
    """Mean over one axis."""
    x, trailing = _input("input", axis)
    total = sp.Sum(_entry(x, k, trailing), (k, 0, N - 1))
    return {"output": (_reduced(keep_dims, trailing), total / N)}


@op("EuclideanNorm", attrs={"axis": AXIS, "keep_dims": bool})
def euclidean_norm(axis, keep_dims):
    """Square root of the sum of squares over one axis; at 0 its gradient is 0 (a subgradient).

    The value at the origin is stated as a branch of its own: the gradient there is that
    branch's, 0, where x / |x| is 0/0 (TensorFlow's EuclideanNorm and tf.norm give NaN)."""
    x, trailing = _input("input", axis)
    total = sp.Sum(_entry(x, k, trailing) ** 2, (k, 0, N - 1))
    return {"output": (_reduced(keep_dims, trailing), sp.Piecewise((0, sp.Eq(total, 0)), (sp.sqrt(total), True)))}


@op("ReduceLogSumExp")
def reduce_log_sum_exp():
    """log(sum(exp(x))) over the last axis, the maximum subtracted (no overflow).

    TensorFlow composes it; it has no op of its own."""
    x = tensor("input", (..., N))
    largest = stop_gradient(maximum(x[..., p], (p, 0, N - 1)))
    return {"output": ((...,), largest + sp.log(sp.Sum(sp.exp(x[..., k] - largest), (k, 0, N - 1))))}


@op("Cumsum", attrs={"axis": attr(Axis("x", (-1, -2, -3)), Input(1)), "exclusive": bool, "reverse": bool})
def cumsum(axis, exclusive, reverse):
    """Cumulative sum along one axis; `exclusive` leaves each element out of its sum."""
    x, trailing = _input("x", axis)
    if reverse:
        first, last = (i + 1 if exclusive else i), N - 1
    else:
        first, last = 0, (i - 1 if exclusive else i)
    return {"out": ((..., i) + trailing, sp.Sum(_entry(x, k, trailing), (k, first, last)))}


@op("Prod", attrs={"axis": AXIS, "keep_dims": bool})
def reduce_prod(axis, keep_dims):
    """Product over one axis; its gradient is finite with zeros in the slice."""
    x, trailing = _input("input", axis)
    return {"output": (_reduced(keep_dims, trailing), product(_entry(x, k, trailing), (k, 0, N - 1)))}


@op("Max", attrs={"axis": AXIS, "keep_dims": bool})
def reduce_max(axis, keep_dims):
    """Maximum over one axis; tied maxima share the gradient equally."""
    x, trailing = _input("input", axis)
    return {"output": (_reduced(keep_dims, trailing), maximum(_entry(x, k, trailing), (k, 0, N - 1)))}


@op("Min", attrs={"axis": AXIS, "keep_dims": bool})
def reduce_min(axis, keep_dims):
    """Minimum over one axis; tied minima share the gradient equally."""
    x, trailing = _input("input", axis)
    return {"output": (_reduced(keep_dims, trailing), minimum(_entry(x, k, trailing), (k, 0, N - 1)))}


POSITION = {"output": "output_type"}  # an integer output, of the dtype `output_type` names
POSITION_ATTRS = {"dimension": attr(Axis("input", (-1, -2, -3)), Input(1)), "output_type": DType()}
POSITION_SAMPLES = {"output_type": ("int64", "int32")}
INT64 = {"output_type": "int64"}  # TensorFlow's default


@op("ArgMax", attrs=POSITION_ATTRS, defaults=INT64, output_dtypes=POSITION, samples=POSITION_SAMPLES)
def arg_max(dimension, output_type):
    """The position of the maximum along one axis, the first of ties (an integer: no gradient)."""
    x, trailing = _input("input", dimension)
    return {"output": (_reduced(False, trailing), argmax(_entry(x, k, trailing), (k, 0, N - 1)))}


@op("ArgMin", attrs=POSITION_ATTRS, defaults=INT64, output_dtypes=POSITION, samples=POSITION_SAMPLES)
def arg_min(dimension, output_type):
    """The position of the minimum along one axis, the first of ties (an integer: no gradient)."""
    x, trailing = _input("input", dimension)
    return {"output": (_reduced(False, trailing), argmin(_entry(x, k, trailing), (k, 0, N - 1)))}


@op("Cumprod", attrs={"axis": attr(Axis("x", (-1, -2, -3)), Input(1)), "exclusive": bool, "reverse": bool})
def cumprod(axis, exclusive, reverse):
    """Cumulative product along one axis; its gradient is finite where entries are zero."""
    x, trailing = _input("x", axis)
    if reverse:
        first, last = (i + 1 if exclusive else i), N - 1
    else:
        first, last = 0, (i - 1 if exclusive else i)
    return {"out": ((..., i) + trailing, product(_entry(x, k, trailing), (k, first, last)))}


@op("CumulativeLogsumexp", attrs={"axis": attr(Axis("x", (-1, -2, -3)), Input(1)), "reverse": bool})
def cumulative_logsumexp(axis, reverse):
    """log of the cumulative sum of exp along one axis, computed in log space.

    Not `exclusive`: its first entry would be log(0) = -inf, where no gradient is finite."""
    x, trailing = _input("x", axis)
    first, last = (i, N - 1) if reverse else (0, i)
    total = sp.Sum(sp.exp(_entry(x, k, trailing)), (k, first, last))
    return {"out": ((..., i) + trailing, sp.log(total))}
