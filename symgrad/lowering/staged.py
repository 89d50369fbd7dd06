"""The forward stages a gradient reads: recomputed apart from the rest of it, under a guard,
so that a caller holding them (a wrapper's forward) passes them instead; then the stages'
own gradients, last stage first."""

from __future__ import annotations

import dataclasses

from symgrad.errors import LoweringError
from symgrad.ir import Recompute, reads, statements
from symgrad.lowering.signature import OpSignature
from symgrad.lowering.symbols import free_indices
from symgrad.lowering.tensor import TensorLowering, as_expression, viewed
from symgrad.stages import tensors_read


def lower_stage_grads(lowering: TensorLowering, staging, vjp: dict, views: dict, conj: bool) -> None:
    """The forward stages the gradient reads, recomputed apart unless the caller passes them
    (a wrapper's forward has them; TensorFlow's gradient function sees only the op's inputs
    and outputs), then each stage's gradient, last stage first."""
    grads = {name: viewed(value, views) for name, value in staging.grads.items() if value is not None}
    read = [*vjp.values(), *grads.values()]
    needed = _stages_read(staging, read)
    if needed:
        recompute = lowering.apart()
        for stage in staging.stages:
            if stage.name in needed:
                recompute.assign(stage.name, viewed(staging.values[stage.name], views))
        lowering.include(recompute, tuple(s.name for s in staging.stages if s.name in needed), conj)
    for name, value in grads.items():
        like = name if name in needed else None  # a gradient constant along an axis: its shape
        if like is None and set(value.indices) - free_indices(as_expression(value)):
            lowering.assign(name, viewed(staging.values[name], views))
            like = name
        lowering.assign(f"grad_{name}", value, like=like)


def stages_passed(body: list, op: OpSignature) -> list:
    """`body` with its recomputation's stages narrowed to those read after it: the ones a
    caller may pass. Anything else it computes and the rest reads is a lowering error."""
    result = []
    for n, statement in enumerate(body):
        if isinstance(statement, Recompute):
            read_after = set().union(*(reads(s.value) for s in statements(body[n + 1 :])))
            assigned = {s.target for s in statement.body}
            if (assigned & read_after) - set(statement.stages):
                raise LoweringError(
                    f"internal error: the gradient reads {sorted((assigned & read_after) - set(statement.stages))}, "
                    f"computed only with the stages it recomputes", op.name, op.location,
                )
            stages = tuple(name for name in statement.stages if name in read_after)
            statement = dataclasses.replace(statement, stages=stages) if stages else None
        if statement is not None:
            result.append(statement)
    return result


def _stages_read(staging, values) -> set[str]:
    """The stages `values` read, and the stages those read, and so on."""
    names = {s.name for s in staging.stages}
    read, pending = set(), list(values)
    while pending:
        value = pending.pop()
        if value is None:
            continue
        for term in value.terms:
            for name in tensors_read(term.factor):
                if name in names and name not in read:
                    read.add(name)
                    pending.append(staging.values[name])
    return read


def stages_accepted(branches) -> tuple[str, ...]:
    """The stages any variant's gradient accepts, in the order they are first computed."""
    names = [name for b in branches for s in b.body if isinstance(s, Recompute) for name in s.stages]
    return tuple(dict.fromkeys(names))
