"""ExpandDims (a size-1 axis added: a literal 0 among the output's indices, for an input of
rank 2 or more and an axis among the last three) and ClipByValue."""

import sympy as sp

from symgrad import const_input, dims, elementwise, indices, op, tensor

P, Q = dims("P Q")
p, q = indices("p q")


@op("ExpandDims", attrs={"axis": const_input(1, (-1, -2, -3))})
def expand_dims(axis):
    """The input with a size-1 axis inserted at `axis` (counted from the end of the output)."""
    x = tensor("input", (..., P, Q))
    out = {-1: (..., p, q, 0), -2: (..., p, 0, q), -3: (..., 0, p, q)}[axis]
    return {"output": (out, x[..., p, q])}


@elementwise("ClipByValue", outputs=("output",))
def clip_by_value(t, clip_value_min, clip_value_max):
    """`t` limited to [min, max] (broadcasting); at a bound the gradient goes to `t`, as
    TensorFlow's does."""
    return sp.Piecewise((clip_value_min, t < clip_value_min), (clip_value_max, t > clip_value_max), (t, True))
