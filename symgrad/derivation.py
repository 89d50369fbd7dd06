"""What a derivation is: the forward values and gradients of one op variant, each tensor given
entry-wise as a sum of `Term`s (a product of entries, summed over indices)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy as sp

from symgrad.declaration import OpVariant


@dataclass(frozen=True)
class Term:
    """`Sum(factor, *sums)`: a product of tensor entries and scalars, summed over indices."""

    factor: sp.Expr  # a product with no Sum and no Add inside
    sums: tuple[tuple[sp.Symbol, sp.Expr, sp.Expr], ...]  # (index, lowest, highest)

    def __str__(self) -> str:
        return str(self.as_sum())

    def as_sum(self) -> sp.Expr:
        """`Sum(factor, *sums)`, a range bounded by another summed index inside that index's
        sum (SymPy sums over its first limit innermost)."""
        if not self.sums:
            return self.factor
        return sp.Sum(self.factor, *innermost_first(self.sums))


def innermost_first(sums: tuple) -> tuple:
    """The limits in order, but for a range bounded by another summed index, which goes
    before (inside) that index's limit."""
    ordered, pending = [], list(sums)
    while pending:
        bounds = lambda lim: sp.sympify(lim[1]).free_symbols | sp.sympify(lim[2]).free_symbols
        named = set().union(*(bounds(lim) for lim in pending))
        inner = next((lim for lim in pending if lim[0] not in named), pending[0])
        ordered.append(inner)
        pending.remove(inner)
    return tuple(ordered)


@dataclass(frozen=True)
class TensorValue:
    """A tensor given entry-wise: `value[indices] = sum(terms)`."""

    indices: tuple[sp.Symbol, ...]  # one per axis
    terms: tuple[Term, ...]  # summed

    def __str__(self) -> str:
        return f"[{', '.join(map(str, self.indices))}] = " + " + ".join(map(str, self.terms))


@dataclass(frozen=True)
class Derivation:
    """The forward values and the vector-Jacobian product of one op variant."""

    variant: OpVariant  # what was derived
    grad_names: tuple[str, ...]  # the upstream gradient's name, one per output
    forward: dict  # output name -> sympy expr (elementwise) or TensorValue (index)
    vjp: dict  # input name -> sympy expr / TensorValue, or None where the gradient is zero
    ranges: dict = dataclasses.field(default_factory=dict)  # index -> (lowest, highest)
    staging: Staging | None = None  # a composed op's stages (then `forward` reads them)


@dataclass(frozen=True)
class Staging:
    """The stages of a composed op: forward values in order, gradients in reverse order."""

    stages: tuple  # the stages (`Output`s), in forward order
    tensors: tuple  # `TensorInput` per stage: its name and shape
    outputs: tuple  # the op's outputs (`Output`s) as expressions of the stages
    values: dict  # stage name -> TensorValue (its forward value)
    grads: dict  # stage name -> TensorValue in terms of later gradients, or None; reverse order
