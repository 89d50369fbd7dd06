"""The gradient op G of an op, checked as a first-order op by `symgrad check --order 2`
(`second_order`).

For an op with inputs x1..xn and upstream gradients g (one per output), G takes (g..., x1..xn),
in the order the generated `<op>_grad` and `<op>_vjp` take them, and gives (grad_x1..grad_xn).
Its forward is the derived numpy `<op>_grad`, its numpy gradient the generated
`<op>_grad_grad`; its cases are the op's, each with its upstream gradients as inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar

import numpy as np

from symgrad.errors import SymgradError
from symgrad.verify.cases import Case, bound_forward, case_groups, for_dtype
from symgrad.verify.compare import upstream_names
from symgrad.verify.ops_under_test import DerivedOp, Variant
from symgrad.verify.sources import accepted_kwargs


class SecondOrderError(SymgradError):
    stage = "second order"


@dataclass(frozen=True)
class GradientOp(DerivedOp):
    """The gradient op G of `first`: its functions are one derivative on (its forward is the
    generated `<op>_grad`, its gradient `<op>_grad_grad`), its name the op's."""

    holds_stop_gradient: ClassVar[bool] = False  # differences of `<op>_grad` itself, as generated
    first: DerivedOp | None = None  # the op whose gradient G is
    upstream: int = 1  # how many upstream gradients G takes before the op's inputs
    list_output: bool = False  # `<op>_grad` takes them as one list (a list output's)

    def function(self, target: str, suffix: str = ""):
        if (target, suffix) == ("numpy", ""):
            return _forward_of(self.first.function("numpy", "_grad"), self.upstream, self.list_output)
        name = self.decl.func_name + suffix
        if (target, suffix) == ("numpy", "_grad") and not hasattr(self.module(target), name):
            raise SecondOrderError(
                f"{self.module(target).__file__} has no {name}: the numpy second order is not "
                f"generated for this op", self.name
            )
        return super().function(target, suffix)


def _forward_of(grad_fn, upstream: int, list_output: bool):
    """G's numpy forward `(g..., x..., **attrs) -> (grad_x...)`: `<op>_grad` with a zero array
    where it returns None (no gradient)."""

    def forward(*args, **attrs):
        ups, xs = list(args[:upstream]), args[upstream:]
        kwargs = {k: attrs[k] for k in accepted_kwargs(grad_fn, attrs)}
        grads = grad_fn(*([ups] if list_output else ups), *xs, **kwargs)
        grads = [grads] if isinstance(grads, np.ndarray) else list(grads)
        dtype = np.result_type(*ups)
        return tuple(np.zeros(np.shape(x), dtype) if g is None else np.asarray(g) for g, x in zip(grads, xs))

    forward.__name__ = grad_fn.__name__
    return forward


@dataclass(frozen=True)
class GradientVariant(Variant):
    """A variant of the gradient op G: inputs (upstream gradients..., the op's inputs...),
    outputs the gradients of the op's inputs; `first` is the op's own variant."""

    first: Variant | None = None


def gradient_variant(variant: Variant) -> GradientVariant:
    """G of one variant. Its `exprs` stay the op's: the branch conditions and the inputs used
    only inside `stop_gradient` (no gradient, so none of G's w.r.t. them either) are the op's."""
    ups = tuple(upstream_names(variant))
    if set(ups) & set(variant.inputs):
        raise SecondOrderError(f"an input is named like an upstream gradient ({', '.join(ups)})", variant.op.name)
    op = variant.op
    gradient_op = GradientOp(
        replace(op.decl, func_name=op.decl.func_name + "_grad"), op.stem, op.source, op.folder,
        op.temporary, first=op, upstream=len(ups), list_output=variant.list_output,
    )
    own = {f.name: getattr(variant, f.name) for f in fields(Variant)}
    return GradientVariant(
        **{
            **own,
            "op": gradient_op,
            "inputs": ups + variant.inputs,
            # an upstream gradient's shape is an output's, which is not declared per input
            "shapes": None if variant.shapes is None else (None,) * len(ups) + variant.shapes,
            "outputs": tuple(f"grad_{n}" for n in variant.inputs),
            "const_positions": (),
            # a list input's gradients: `<op>_grad` returns them as one tuple, and
            # `<op>_grad_grad` takes their cotangents as one list
            "list_output": bool(getattr(op.decl, "variadic", None)),
            # a list output's upstream gradients: `<op>_grad_grad` takes them as one list
            "listed": len(ups) if variant.list_output else 0,
        },
        first=variant,
    )


def gradient_groups(op: DerivedOp, dtypes, sample: int | None = None) -> list[tuple[Variant, str, list[Case]]]:
    """(G's variant, dtype, G's cases) per variant and dtype of `op`: each of the op's cases with
    its upstream gradients as inputs, where the derived gradient is finite (per element, for an
    aligned case), with random cotangents, one per input of the op."""
    groups = []
    for variant, dtype, cases in case_groups(op, dtypes, sample=sample):
        g = gradient_variant(variant)
        lifted = [replace(c, inputs=tuple(c.upstream) + tuple(c.inputs), upstream=()) for c in cases]
        seed = f"{op.name}|{variant.label}|{dtype}|second order"
        # the upstream gradients of their outputs' kind (of a real output, real), in float64
        widest = lambda u: np.result_type(np.asarray(u).dtype, np.float64)
        kept = tuple(map(widest, cases[0].upstream)) + (np.dtype(dtype),) * len(variant.inputs) if cases else None
        groups.append((g, dtype, for_dtype(lifted, np.dtype(dtype), bound_forward(g), seed, input_dtypes=kept)))
    return groups
