"""Einsum, one derivation per equation: the declaration reads the equation like numpy does."""

import sympy as sp

from symgrad import dims, indices, op, tensor

EQUATIONS = (
    "ij,jk->ik",  # matrix product
    "ij,kj->ik",  # matrix product with the second operand transposed
    "bij,bjk->bik",  # batched contraction
    "i,j->ij",  # outer product
    "ij->ji",  # transpose
    "ijk->kij",  # axis permutation
    "ii->",  # trace
    "ii->i",  # diagonal
    "ij->i",  # row sums
    "i,i->",  # dot product
    "ij,ij->ij",  # elementwise product
    "ij,jk,kl->il",  # three operands
    "ij,jk->i",  # k is summed and appears in one operand only
    "bi,bj->bij",  # batched outer product
)


@op("Einsum", attrs={"equation": EQUATIONS}, variadic="inputs")
def einsum(equation):
    """Sum of products of the operands over the indices missing from the output."""
    operands, output = equation.split("->")
    letters = sorted(set(operands.replace(",", "")))
    index = dict(zip(letters, indices(" ".join(letters))))
    size = dict(zip(letters, dims(" ".join(f"D_{c}" for c in letters))))
    product = sp.S.One
    for n, term in enumerate(operands.split(",")):
        t = tensor(f"inputs_{n}", tuple(size[c] for c in term))
        product *= t[tuple(index[c] for c in term)]
    summed = [(index[c], 0, size[c] - 1) for c in letters if c not in output]
    value = sp.Sum(product, *summed) if summed else product
    return {"output": (tuple(index[c] for c in output), value)}
