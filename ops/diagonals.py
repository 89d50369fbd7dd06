"""Diagonals of the last two axes: trace, diagonal parts, diagonal matrices."""

import sympy as sp

from symgrad import Input, attr, dims, indices, op, tensor

N = dims("N")[0]
i, j = indices("i j")


@op("Trace")
def trace():
    """Sum of the diagonal of the last two axes (TensorFlow composes it: tf.linalg.trace)."""
    x = tensor("x", (..., N, N))
    return {"y": ((...,), sp.Sum(x[..., i, i], (i, 0, N - 1)))}


@op("MatrixDiagPart")
def matrix_diag_part():
    """The diagonal of the last two axes."""
    input = tensor("input", (..., N, N))
    return {"diagonal": ((..., i), input[..., i, i])}


@op("MatrixDiag")
def matrix_diag():
    """A batch of diagonal matrices with the given diagonals."""
    diagonal = tensor("diagonal", (..., N))
    return {"output": ((..., i, j), sp.KroneckerDelta(i, j) * diagonal[..., i])}


@op("MatrixSetDiag")
def matrix_set_diag():
    """input with the diagonal of its last two axes replaced by `diagonal`."""
    input = tensor("input", (..., N, N))
    diagonal = tensor("diagonal", (..., N))
    delta = sp.KroneckerDelta(i, j)
    return {"output": ((..., i, j), (1 - delta) * input[..., i, j] + delta * diagonal[..., i])}


@op("Diag")
def diag():
    """A square matrix with the given vector as its diagonal (rank 1 only)."""
    diagonal = tensor("diagonal", (N,))
    return {"output": ((i, j), sp.KroneckerDelta(i, j) * diagonal[i])}


@op("DiagPart")
def diag_part():
    """The diagonal of a square matrix (rank 2 only)."""
    input = tensor("input", (N, N))
    return {"diagonal": ((i,), input[i, i])}


@op("MatrixBandPart", attrs={"num_lower": attr(int, Input(1)), "num_upper": attr(int, Input(2))})
def matrix_band_part(num_lower, num_upper):
    """The band of the last two axes: num_lower diagonals below, num_upper above (negative: all)."""
    M = dims("M")[0]
    input = tensor("input", (..., M, N))
    below = sp.Or(num_lower < 0, i - j <= num_lower)
    above = sp.Or(num_upper < 0, j - i <= num_upper)
    return {"band": ((..., i, j), sp.Piecewise((input[..., i, j], sp.And(below, above)), (0, True)))}


# The V2 and V3 ops take the diagonal offset k, the output size and the padding as inputs:
# declared for one diagonal, k = 0 (the main one), above (k > 0) or below it, of square
# matrices, sizes from the input (-1) and padding 0. `align` places diagonals of several
# lengths, which a single diagonal does not need. An offset diagonal reads
# `input[..., i, i + k]`: a gather along two axes at once, its adjoint a scatter-add.
K = attr((0, 1, -2), Input(1))
ALIGN = ("RIGHT_LEFT",)


def _diagonal_part(k):
    input = tensor("input", (..., N, N))
    return {"diagonal": ((..., (i, N - abs(k))), input[..., i + max(-k, 0), i + max(k, 0)])}


def _diagonal_matrix(k):
    diagonal = tensor("diagonal", (..., N))
    size = N + abs(k)
    entry = sp.KroneckerDelta(j, i + k) * diagonal[..., i - max(-k, 0)]
    return {"output": ((..., (i, size), (j, size)), entry)}


def _set_diagonal(k):
    input = tensor("input", (..., N, N))
    diagonal = tensor("diagonal", (..., N - abs(k)))
    on = sp.KroneckerDelta(j, i + k)
    return {"output": ((..., (i, N), (j, N)), (1 - on) * input[..., i, j] + on * diagonal[..., i - max(-k, 0)])}


@op("MatrixDiagPartV2", attrs={"k": K, "padding_value": attr((0,), Input(2))})
def matrix_diag_part_v2(k, padding_value):
    """Diagonal k of the last two axes."""
    return _diagonal_part(k)


def _diagonal_band(k, align):
    """Diagonals k[0] to k[1] of square matrices, one row each (the highest first), each as
    long as the longest, the shorter ones placed by `align` (superdiagonals first, then
    subdiagonals; "RIGHT" pads before) with zeros: positions computed from the row."""
    input = tensor("input", (..., N, N))
    m, n = indices("m n")
    low, high = k
    longest = N - (0 if low <= 0 <= high else min(abs(low), abs(high)))
    d = high - m
    right = {"RIGHT_LEFT": d >= 0, "LEFT_RIGHT": d < 0, "RIGHT_RIGHT": sp.true, "LEFT_LEFT": sp.false}[align]
    offset = sp.Piecewise((longest - (N - sp.Abs(d)), right), (0, True))
    at = n - offset
    read = input[..., at + sp.Max(-d, 0), at + sp.Max(d, 0)]
    return {"diagonal": ((..., (m, high - low + 1), (n, longest)), read)}


@op(
    "MatrixDiagPartV3",
    attrs={"k": attr((0, 1, -2, (-1, 1), (1, 2)), Input(1)), "padding_value": attr((0,), Input(2)),
           "align": ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT")},
    valid=lambda k, padding_value, align: isinstance(k, tuple) or align == "RIGHT_LEFT",
)
def matrix_diag_part_v3(k, padding_value, align):
    """Diagonal k of the last two axes, or the band of diagonals k = (low, high), aligned."""
    return _diagonal_band(k, align) if isinstance(k, tuple) else _diagonal_part(k)


DIAG_V2 = {
    "k": K,
    "num_rows": attr((-1,), Input(2)),
    "num_cols": attr((-1,), Input(3)),
    "padding_value": attr((0,), Input(4)),
}


@op("MatrixDiagV2", attrs=DIAG_V2)
def matrix_diag_v2(k, num_rows, num_cols, padding_value):
    """A batch of square matrices, zero but for the given diagonals k."""
    return _diagonal_matrix(k)


@op("MatrixDiagV3", attrs={**DIAG_V2, "align": ALIGN})
def matrix_diag_v3(k, num_rows, num_cols, padding_value, align):
    """A batch of square matrices, zero but for the given diagonals k."""
    return _diagonal_matrix(k)


@op("MatrixSetDiagV2", attrs={"k": attr((0, 1, -2), Input(2))})
def matrix_set_diag_v2(k):
    """input with diagonal k of its last two axes replaced by `diagonal`."""
    return _set_diagonal(k)


@op("MatrixSetDiagV3", attrs={"k": attr((0, 1, -2), Input(2)), "align": ALIGN})
def matrix_set_diag_v3(k, align):
    """input with diagonal k of its last two axes replaced by `diagonal`."""
    return _set_diagonal(k)
