"""ExpandDims: a size-1 axis added, a literal 0 among the output's indices (an input of rank 2
or more, an axis among the last three); BroadcastTo: the input broadcast to a shape given as a
constant input, an elementwise op whose gradient is summed over the broadcast axes; Fill: a
scalar broadcast to a shape input."""

from symgrad import Attribute, Axis, Input, Ints, attr, dims, elementwise, indices, op, tensor

P, Q = dims("P Q")
p, q = indices("p q")


@op("ExpandDims", attrs={"axis": attr((-1, -2, -3), Input(1))})
def expand_dims(axis):
    """The input with a size-1 axis inserted at `axis` (counted from the end of the output)."""
    x = tensor("input", (..., P, Q))
    out = {-1: (..., p, q, 0), -2: (..., p, 0, q), -3: (..., 0, p, q)}[axis]
    return {"output": (out, x[..., p, q])}



@elementwise(
    "BroadcastTo",
    attrs={"shape": attr(Ints(), Input(1))},
    broadcast_to="shape",
    outputs=("output",),
    samples={"shape": ((2, 3, 4), (3, 1, 2))},
)
def broadcast_to(input, shape):
    """The input broadcast to `shape` (numpy's rules): its gradient is summed back."""
    return input


@elementwise(
    "Fill",
    attrs={"dims": attr(Ints(), Input(0))},
    broadcast_to="dims",
    outputs=("output",),
    scalars=("value",),
    samples={"dims": ((2, 3, 4), (3, 1), ())},
)
def fill(value, dims):
    """An array of shape `dims` holding the scalar `value` everywhere: its gradient is the sum."""
    return value


# the size-1 axes removed, counted from the end (sorted)
SQUEEZED = ((-1,), (-2,), (-3, -1))


@op("Squeeze", attrs={"axis": attr(Axis("input", SQUEEZED), Attribute(stored_as="squeeze_dims"))})
def squeeze(axis):
    """The input without its size-1 axes `axis` (TensorFlow keeps the attribute as
    `squeeze_dims`)."""
    kept = [(P, p), (Q, q)]
    shape, read = [], []
    for position in range(-len(kept) - len(axis), 0):
        if position in axis:
            shape.append(1)
            read.append(0)
        else:
            size, index = kept.pop(0)
            shape.append(size)
            read.append(index)
    x = tensor("input", (...,) + tuple(shape))
    return {"output": ((..., p, q), x[(...,) + tuple(read)])}
