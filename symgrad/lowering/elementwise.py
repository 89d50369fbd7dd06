"""An elementwise op's branches: its forward and gradient as elementwise statements, each
subexpression they repeat computed once before them (lowered again with the branches of a
partial function guarded, where one has any), a gradient summed back to its input's shape
where inputs broadcast, else a fused kernel's call where one computes it exactly."""

from __future__ import annotations

import sympy as sp

from symgrad.derivation import Derivation
from symgrad.fused import find_kernel
from symgrad.ir import Assign, Branch, BroadcastToShape, Elementwise, FusedCall, SumToShape
from symgrad.lowering.signature import OpSignature
from symgrad.simplify import share_subexpressions


def lower_elementwise_forward(op: OpSignature, derivation: Derivation) -> Branch:
    """One variant's forward branch (and its guarded body, where it differs)."""
    body = _forward_body(op, derivation)
    if not any(v.has(sp.Piecewise) for v in derivation.forward.values()):
        return Branch(derivation.variant.attr_values, body)
    guarded = _forward_body(op, derivation, guard=True)
    return Branch(derivation.variant.attr_values, body, guarded_body=guarded if guarded != body else None)


def lower_elementwise_vjp(op: OpSignature, derivation: Derivation) -> Branch:
    """One variant's gradient branch (and its guarded body, where it differs)."""
    body = tuple(_vjp_body(op, derivation))
    if not any(v is not None and v.has(sp.Piecewise) for v in derivation.vjp.values()):
        return Branch(derivation.variant.attr_values, body)  # nothing to guard: lowered once
    guarded = tuple(_vjp_body(op, derivation, guard=True))
    return Branch(derivation.variant.attr_values, body, guarded_body=guarded if guarded != body else None)


def _forward_body(op: OpSignature, derivation: Derivation, guard: bool = False) -> tuple[Assign, ...]:
    """The outputs' expressions, each subexpression they repeat computed once before them."""
    temps, reduced = share_subexpressions(list(derivation.forward.values()), prefix="tmp", guard=guard)
    body = [Assign(str(symbol), Elementwise(expr)) for symbol, expr in temps]
    shape = op.broadcast_to
    for name, expr in zip(derivation.forward, reduced):
        body.append(Assign(name, BroadcastToShape(Elementwise(expr), shape) if shape else Elementwise(expr)))
    return tuple(body)


def _vjp_body(op: OpSignature, derivation: Derivation, guard: bool = False) -> list[Assign]:
    names = [n for n, e in derivation.vjp.items() if e is not None]
    temps, reduced = share_subexpressions([derivation.vjp[n] for n in names], prefix="tmp", guard=guard)
    body = [Assign(str(symbol), Elementwise(expr)) for symbol, expr in temps]
    broadcasting = len(derivation.variant.inputs) > 1 or op.broadcast_to is not None
    for name, expr in zip(names, reduced):
        if broadcasting:
            value = SumToShape(Elementwise(expr), name)
        else:  # every array has one shape, as fused kernels need
            arrays = _array_names(derivation) | {str(symbol) for symbol, _ in temps}
            value = _fused_or_plain(expr, arrays, op.complex_ok)
        body.append(Assign(f"grad_{name}", value))
    return body


def _array_names(derivation: Derivation) -> set[str]:
    """The arrays an elementwise gradient reads: upstream gradients, inputs, outputs."""
    variant = derivation.variant
    return {*derivation.grad_names, *(t.name for t in variant.inputs), *(o.name for o in variant.outputs)}


def _fused_or_plain(expr: sp.Expr, arrays: set[str], complex_ok: bool) -> FusedCall | Elementwise:
    """A fused kernel call where one computes exactly `expr`, else `expr` itself."""
    found = find_kernel(expr, arrays, complex_ok)
    if found is None:
        return Elementwise(expr)
    operands = tuple((param, Elementwise(operand)) for param, operand in found.operands)
    return FusedCall(found.kernel.name, operands, Elementwise(expr))
