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
# declared for the main diagonal (k = 0), sizes from the input (-1) and padding 0, where they
# are MatrixDiag, MatrixDiagPart and MatrixSetDiag. V3 adds `align`, which a single diagonal
# does not need.
K0 = attr((0,), Input(1))
ALIGN = ("RIGHT_LEFT",)


@op("MatrixDiagPartV2", attrs={"k": K0, "padding_value": attr((0,), Input(2))})
def matrix_diag_part_v2(k, padding_value):
    """The main diagonal of the last two axes."""
    return matrix_diag_part.fn()


@op("MatrixDiagPartV3", attrs={"k": K0, "padding_value": attr((0,), Input(2)), "align": ALIGN})
def matrix_diag_part_v3(k, padding_value, align):
    """The main diagonal of the last two axes."""
    return matrix_diag_part.fn()


DIAG_V2 = {
    "k": K0,
    "num_rows": attr((-1,), Input(2)),
    "num_cols": attr((-1,), Input(3)),
    "padding_value": attr((0,), Input(4)),
}


@op("MatrixDiagV2", attrs=DIAG_V2)
def matrix_diag_v2(k, num_rows, num_cols, padding_value):
    """A batch of square diagonal matrices with the given main diagonals."""
    return matrix_diag.fn()


@op("MatrixDiagV3", attrs={**DIAG_V2, "align": ALIGN})
def matrix_diag_v3(k, num_rows, num_cols, padding_value, align):
    """A batch of square diagonal matrices with the given main diagonals."""
    return matrix_diag.fn()


@op("MatrixSetDiagV2", attrs={"k": attr((0,), Input(2))})
def matrix_set_diag_v2(k):
    """input with the main diagonal of its last two axes replaced by `diagonal`."""
    return matrix_set_diag.fn()


@op("MatrixSetDiagV3", attrs={"k": attr((0,), Input(2)), "align": ALIGN})
def matrix_set_diag_v3(k, align):
    """input with the main diagonal of its last two axes replaced by `diagonal`."""
    return matrix_set_diag.fn()
