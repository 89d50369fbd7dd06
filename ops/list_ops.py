"""Ops that take or return a list of tensors: ConcatV2, Concat, Pack, Unpack, Split, SplitV, AddN,
IdentityN.

A list input is declared with `op(variadic="values")` and one `tensor("values_<k>", ...)` per
tensor, its length an enumerated attribute `attr(..., LengthOf("values"))` (TensorFlow's `N`, which
TensorFlow infers from the list); a list output is returned as a list of (indices, expression)
pairs. Concatenation and splitting are index maps that read zero outside the tensor (entry k
shifted by the sizes before it), so every gradient is a gather of the upstream gradient.
Stacking puts tensor k at position k of a new axis (a Kronecker delta of a literal position),
unstacking reads position k: their gradients are a gather at one position and a stack.
"""

import sympy as sp

from symgrad import Axis, Input, Ints, LengthOf, attr, dims, indices, op, tensor

P = dims("P")[0]
SIZES = dims("D0 D1 D2")
p, j = indices("p j")
AXES = (p, j)


def _offsets(sizes):
    """Where each piece starts along the joined axis: the sizes of the pieces before it."""
    return [sum(sizes[:k], sp.S.Zero) for k in range(len(sizes))]


@op(
    "ConcatV2",
    attrs={"N": attr((2, 3), LengthOf("values")), "axis": attr(Axis("values", (-1, -2)), Input(-1))},
    variadic="values",
)
def concat_v2(N, axis):
    """The tensors of `values` joined along `axis`: entry k shifted by the sizes before it."""
    shapes = [(..., P, SIZES[k]) if axis == -1 else (..., SIZES[k], P) for k in range(N)]
    values = [tensor(f"values_{k}", shape) for k, shape in enumerate(shapes)]
    joined = (j, sum(SIZES[:N]))
    out = (..., p, joined) if axis == -1 else (..., joined, p)
    pieces = [(p, j - start) if axis == -1 else (j - start, p) for start in _offsets(SIZES[:N])]
    return {"output": (out, sum(x[(...,) + at] for x, at in zip(values, pieces)))}


@op(
    "Concat",
    attrs={"concat_dim": attr(Axis("values", (-1, -2)), Input(0)), "N": attr((2, 3), LengthOf("values"))},
    variadic="values",
)
def concat(concat_dim, N):
    """ConcatV2 with the axis passed first, as `concat_dim`."""
    return concat_v2.fn(N, concat_dim)


def _pieces(axis, value, sizes, starts):
    """The pieces of `value` along `axis`, piece k its `sizes[k]` entries from `starts[k]`
    (each its own index: an index has one range)."""
    pieces = []
    for k, (size, start) in enumerate(zip(sizes, starts)):
        (j,) = indices(f"j{k}")
        out = (..., p, (j, size)) if axis == -1 else (..., (j, size), p)
        at = (p, j + start) if axis == -1 else (j + start, p)
        pieces.append((out, value[(...,) + at]))
    return pieces


@op("Split", attrs={"num_split": (2, 3), "axis": attr(Axis("value", (-1, -2)), Input(0))})
def split(num_split, axis):
    """`value` cut along `axis` into `num_split` pieces of equal size."""
    D = SIZES[0]
    value = tensor("value", (..., P, D) if axis == -1 else (..., D, P))
    size = sp.floor(D / num_split)  # TensorFlow requires that num_split divides D
    return {"output": _pieces(axis, value, [size] * num_split, [k * size for k in range(num_split)])}


@op(
    "SplitV",
    attrs={
        "num_split": (2, 3),
        "size_splits": attr(Ints(), Input(1)),
        "axis": attr(Axis("value", (-1, -2)), Input(2)),
    },
    samples={"size_splits": lambda num_split: ([2] * (num_split - 1) + [-1], [-1] + [2] * (num_split - 1))},
)
def split_v(num_split, size_splits, axis):
    """`value` cut along `axis` into pieces of `size_splits[k]` entries (one may be -1: the rest)."""
    D = SIZES[0]
    value = tensor("value", (..., P, D) if axis == -1 else (..., D, P))
    given = [size_splits[k] for k in range(num_split)]
    sizes = [
        sp.Piecewise((D - sum(given[:k] + given[k + 1 :]), sp.Eq(given[k], -1)), (given[k], True))
        for k in range(num_split)
    ]
    return {"output": _pieces(axis, value, sizes, _offsets(sizes))}


def _trailing(count):
    """The sizes of the `count` axes after a stack's axis (the axes before it are `...`)."""
    return (P, SIZES[0])[:count]


def _inserted(items, axis, item):
    """`items` (the trailing axes) with `item` inserted at `axis`, counted from the end of the
    result."""
    items = list(items)
    items.insert(len(items) + 1 + axis, item)
    return tuple(items)


@op(
    "Pack",
    attrs={"N": attr((2, 3), LengthOf("values")), "axis": Axis("values", (-1, -2, -3), inserted=True)},
    variadic="values",
)
def pack(N, axis):
    """The tensors of `values`, of one shape, stacked along a new axis `axis`.

    The axis is counted from the end of the output; entry k sits at position k of it.
    """
    trailing = _trailing(-axis - 1)
    values = [tensor(f"values_{k}", (...,) + trailing) for k in range(N)]
    (c,) = indices("c")
    out = (...,) + _inserted(AXES[: len(trailing)], axis, (c, N))
    entries = [x[(...,) + AXES[: len(trailing)]] for x in values]
    return {"output": (out, sum(sp.KroneckerDelta(c, k) * x for k, x in enumerate(entries)))}


@op("Unpack", attrs={"num": (2, 3), "axis": Axis("value", (-1, -2, -3))})
def unpack(num, axis):
    """`value` taken apart along axis `axis` (of `num` entries), that axis dropped.

    Output k reads position k.
    """
    trailing = _trailing(-axis - 1)
    value = tensor("value", (...,) + _inserted(trailing, axis, num))
    out = (...,) + AXES[: len(trailing)]
    return {"output": [(out, value[(...,) + _inserted(AXES[: len(trailing)], axis, k)]) for k in range(num)]}


@op("AddN", attrs={"N": attr((2, 3), LengthOf("inputs"))}, variadic="inputs", complex=True)
def add_n(N):
    """The sum of the tensors of `inputs`, all of one shape."""
    inputs = [tensor(f"inputs_{k}", (..., P)) for k in range(N)]
    return {"sum": ((..., p), sum(x[..., p] for x in inputs))}


@op("IdentityN", attrs={"N": attr((1, 2, 3), LengthOf("input"))}, variadic="input", complex=True)
def identity_n(N):
    """Each tensor of `input` as it is, a list of any shapes (an index per output: each its
    own size)."""
    inputs = [tensor(f"input_{k}", (..., SIZES[k])) for k in range(N)]
    each = indices("q0 q1 q2")
    return {"output": [((..., q), x[..., q]) for x, q in zip(inputs, each)]}
