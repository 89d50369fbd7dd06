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
# matrices, sizes from the input (-1) and padding 0; the V3 ops also for a band of diagonals
# k = (low, high), which `align` packs into rows of one length. An offset diagonal reads
# `input[..., i, i + k]`: a gather along two axes at once, its adjoint a scatter-add.
K = attr((0, 1, -2), Input(1))


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


ALIGNS = ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT")
BANDS = (0, 1, -2, (-1, 1), (1, 2))  # one diagonal, or diagonals k[0] to k[1]
ONE_ALIGN_FOR_ONE_DIAGONAL = lambda k, align, **_: isinstance(k, tuple) or align == "RIGHT_LEFT"


def _offset(d, size, longest, align):
    """Where diagonal d (of `size - |d|` entries) starts in its row of `longest`: "RIGHT"
    pads before it (superdiagonals' alignment first, then subdiagonals')."""
    right = {"RIGHT_LEFT": d >= 0, "LEFT_RIGHT": d < 0, "RIGHT_RIGHT": sp.true, "LEFT_LEFT": sp.false}[align]
    return sp.Piecewise((longest - (size - sp.Abs(d)), right), (0, True))


def _longest(size, low, high):
    """The longest diagonal's length between diagonals `low` and `high` of a square `size`."""
    return size - (0 if low <= 0 <= high else min(abs(low), abs(high)))


def _diagonal_band(k, align):
    """Diagonals k[0] to k[1] of square matrices, one row each (the highest first), each as
    long as the longest, the shorter ones placed by `align` with zeros: positions computed
    from the row."""
    input = tensor("input", (..., N, N))
    m, n = indices("m n")
    low, high = k
    longest = _longest(N, low, high)
    d = high - m
    at = n - _offset(d, N, longest, align)
    read = input[..., at + sp.Max(-d, 0), at + sp.Max(d, 0)]
    return {"diagonal": ((..., (m, high - low + 1), (n, longest)), read)}


def _band_entry(diagonal, r, c, size, k, align):
    """Entry (r, c) of a square matrix of `size` from the band `diagonal` (one row per
    diagonal, the highest first, `align`ed), 0 off the band."""
    low, high = k
    d = c - r
    along = r - sp.Max(-d, 0) + _offset(d, size, _longest(size, low, high), align)
    within = sp.And(d >= low, d <= high)
    return sp.Piecewise((diagonal[..., high - d, along], within), (0, True)), within


def _band_matrix(k, align):
    """Square matrices zero but for the band of diagonals k = (low, high), as `align` packs it."""
    low, high = k
    L = dims("L")[0]
    diagonal = tensor("diagonal", (..., high - low + 1, L))
    size = sp.Max(L - min(high, 0), L + max(low, 0))
    entry, _ = _band_entry(diagonal, i, j, size, k, align)
    return {"output": ((..., (i, size), (j, size)), entry)}


def _set_band(k, align):
    """`input` with the band of diagonals k = (low, high) replaced, as `align` packs it."""
    low, high = k
    input = tensor("input", (..., N, N))
    diagonal = tensor("diagonal", (..., high - low + 1, _longest(N, low, high)))
    entry, within = _band_entry(diagonal, i, j, N, k, align)
    return {"output": ((..., (i, N), (j, N)), entry + sp.Piecewise((0, within), (input[..., i, j], True)))}


@op(
    "MatrixDiagPartV3",
    attrs={"k": attr(BANDS, Input(1)), "padding_value": attr((0,), Input(2)), "align": ALIGNS},
    valid=ONE_ALIGN_FOR_ONE_DIAGONAL,
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


@op("MatrixDiagV3", attrs={**DIAG_V2, "k": attr(BANDS, Input(1)), "align": ALIGNS}, valid=ONE_ALIGN_FOR_ONE_DIAGONAL)
def matrix_diag_v3(k, num_rows, num_cols, padding_value, align):
    """A batch of square matrices, zero but for the given diagonal k or band k = (low, high)."""
    return _band_matrix(k, align) if isinstance(k, tuple) else _diagonal_matrix(k)


@op("MatrixSetDiagV2", attrs={"k": attr((0, 1, -2), Input(2))})
def matrix_set_diag_v2(k):
    """input with diagonal k of its last two axes replaced by `diagonal`."""
    return _set_diagonal(k)


@op("MatrixSetDiagV3", attrs={"k": attr(BANDS, Input(2)), "align": ALIGNS}, valid=ONE_ALIGN_FOR_ONE_DIAGONAL)
def matrix_set_diag_v3(k, align):
    """input with diagonal k, or the band k = (low, high), of its last two axes replaced."""
    return _set_band(k, align) if isinstance(k, tuple) else _set_diagonal(k)
