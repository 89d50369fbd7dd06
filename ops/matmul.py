"""Matrix product, declared as an index summation (TensorFlow's MatMul)."""

import sympy as sp

from symgrad import Namesake, dims, indices, op, tensor

M, K, N = dims("M K N")
i, j, k = indices("i j k")

# two matrices (BatchMatMulV2 multiplies batches); the flags transpose, as `.mT` does
MATMUL = {
    "torch": Namesake("torch.matmul(a.mT if transpose_a else a, b.mT if transpose_b else b)"),
    "jax": Namesake("jnp.matmul(a.mT if transpose_a else a, b.mT if transpose_b else b)"),
}


@op("MatMul", attrs={"transpose_a": bool, "transpose_b": bool}, complex=True, namesakes=MATMUL)
def matmul(transpose_a, transpose_b):
    """product = op(a) @ op(b), op transposing when its flag is set."""
    a = tensor("a", (K, M) if transpose_a else (M, K))
    b = tensor("b", (N, K) if transpose_b else (K, N))
    A = a[k, i] if transpose_a else a[i, k]
    B = b[j, k] if transpose_b else b[k, j]
    return {"product": ((i, j), sp.Sum(A * B, (k, 0, K - 1)))}


@op("SparseMatMul", attrs={"transpose_a": bool, "transpose_b": bool})
def sparse_mat_mul(transpose_a, transpose_b):
    """MatMul with hints that a or b is mostly zeros (float32 only in TensorFlow)."""
    return matmul.fn(transpose_a, transpose_b)
