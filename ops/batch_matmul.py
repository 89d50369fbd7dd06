"""Batched matrix product with broadcast batch axes (TensorFlow's BatchMatMulV2, V3): `adj_x` and
`adj_y` take the adjoint (the conjugate transpose) of a complex input."""

import sympy as sp

from symgrad import dims, indices, op, tensor

M, K, N = dims("M K N")
i, j, k = indices("i j k")


@op("BatchMatMulV2", attrs={"adj_x": bool, "adj_y": bool}, complex=True)
def batch_mat_mul_v2(adj_x, adj_y):
    """output = op(x) @ op(y) over broadcast leading axes, op the adjoint when its flag is set."""
    x = tensor("x", (..., K, M) if adj_x else (..., M, K))
    y = tensor("y", (..., N, K) if adj_y else (..., K, N))
    X = sp.conjugate(x[..., k, i]) if adj_x else x[..., i, k]
    Y = sp.conjugate(y[..., j, k]) if adj_y else y[..., k, j]
    return {"output": ((..., i, j), sp.Sum(X * Y, (k, 0, K - 1)))}


@op("BatchMatMul", attrs={"adj_x": bool, "adj_y": bool}, complex=True)
def batch_mat_mul(adj_x, adj_y):
    """BatchMatMulV2 without broadcasting: TensorFlow's op takes equal batch axes only."""
    return batch_mat_mul_v2.fn(adj_x, adj_y)


@op("BatchMatMulV3", attrs={"adj_x": bool, "adj_y": bool}, complex=True)
def batch_mat_mul_v3(adj_x, adj_y):
    """BatchMatMulV2 with its output dtype an attribute (`Tout`, here the inputs')."""
    return batch_mat_mul_v2.fn(adj_x, adj_y)
