"""Diagonals of the last two axes: trace, diagonal parts, diagonal matrices."""

import sympy as sp

from symgrad import dims, indices, op, scalar_input, tensor

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


@op("MatrixBandPart", attrs={"num_lower": scalar_input(1), "num_upper": scalar_input(2)})
def matrix_band_part(num_lower, num_upper):
    """The band of the last two axes: num_lower diagonals below, num_upper above (negative: all)."""
    M = dims("M")[0]
    input = tensor("input", (..., M, N))
    below = sp.Or(num_lower < 0, i - j <= num_lower)
    above = sp.Or(num_upper < 0, j - i <= num_upper)
    return {"band": ((..., i, j), sp.Piecewise((input[..., i, j], sp.And(below, above)), (0, True)))}
