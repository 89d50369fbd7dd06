"""`symgrad explain`: how an op's gradient is derived, as Markdown, the way one would explain
to a colleague which gradient a custom op needs and why.

Per op, for its default attribute variant: the forward in index notation, each input's partial
derivatives, their contraction with the upstream gradient, the Kronecker deltas eliminated,
the gradient as generated (simplified), and the array operations it is lowered to.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy as sp

from symgrad.backends.numpy.printer import NumpyPrinter
from symgrad.declaration import ELEMENTWISE, OpDecl, OpVariant
from symgrad.instantiate import instantiate
from symgrad.derivation import Derivation
from symgrad.derive import (
    InputSteps,
    derive,
    grad_names,
    input_steps,
    partial_derivative,
)
from symgrad.ir import Formula
from symgrad.lowering.op import lower_op
from symgrad.lowering.signature import OpSignature
from symgrad.notation import (
    IndexNotationPrinter,
    formula,
    gradient_formulas,
    printer_for,
    term_text,
)
from symgrad.render import format_module, print_function_body
from symgrad.simplify import simplify
from symgrad.stages import split_stages
from symgrad.validate import index_ranges
from symgrad.wirtinger import independent, uses_wirtinger


@dataclass(frozen=True)
class Step:
    """One input of one part of an op (the op, or a stage of a composed op), differentiated."""

    part: OpVariant  # its outputs: the op's, or one stage
    input: str  # the input (or earlier stage) differentiated by
    steps: InputSteps  # partials, contraction, deltas eliminated
    printer: IndexNotationPrinter  # knows the part's index ranges and upstream gradients


def explain_ops(decls: list[OpDecl]) -> str:
    """Every op of `decls` explained, one Markdown section each."""
    return "\n\n".join(explain_op(decl) for decl in decls) + "\n"


def explain_op(decl: OpDecl) -> str:
    """One op's derivation, for its default attribute variant, as Markdown."""
    attr_values = default_variant(decl)
    derivation = derive(instantiate(decl, attr_values))
    simplified = simplify(derivation)
    if decl.kind == ELEMENTWISE:
        middle = _elementwise_steps(derivation)
    else:
        middle = _index_steps(derivation, _steps(derivation))
    sections = [
        _introduction(decl, attr_values),
        _forward(derivation),
        *middle,
        _gradient(simplified),
        _lowering(decl, simplified),
    ]
    return "\n\n".join(sections)


def default_variant(decl: OpDecl) -> tuple:
    """The attribute values explained: every enumerated attribute at its default where that
    is one of its values, else the first variant."""
    variants = decl.variants()
    defaults = {a.name: a.default for a in decl.enumerated_attrs}
    return next((v for v in variants if all(defaults[n] == value for n, value in v)), variants[0])


def _introduction(decl: OpDecl, attr_values: tuple) -> str:
    lines = [
        f"# {decl.name}",
        "",
        f"Declared at {decl.location}" + (f": {decl.doc}" if decl.doc else "."),
    ]
    others = len(decl.variants()) - 1
    if attr_values:
        values = ", ".join(f"{n}={v!r}" for n, v in attr_values)
        names = ", ".join(n for n, _ in attr_values)
        variants = "variant" if others == 1 else "variants"
        lines += [
            "",
            f"Explained for {values}, the defaults; the {others} other {variants} of {names} "
            "are derived alike (the generated gradients' docstrings state their formulas).",
        ]
    if decl.complex_ok:
        lines += [
            "",
            "Complex inputs: the gradient is TensorFlow's, the conjugate of the derivative, "
            "so it reads the inputs and outputs conjugated (`conj`).",
        ]
    if decl.wirtinger:
        lines += [
            "",
            "Wirtinger derivatives (a function of conj(z), or an output of another dtype): "
            "grad_z = grad * conj(d/dz) + conj(grad) * d/d(conj z), each gradient in its input's dtype.",
        ]
    return "\n".join(lines)


def _forward(derivation: Derivation) -> str:
    printer, staging = printer_for(derivation, conjugate=False), derivation.staging
    lines = (
        [str(formula(s.name, staging.values[s.name], printer)) for s in staging.stages]
        if staging
        else []
    )
    lines += [str(formula(name, value, printer)) for name, value in derivation.forward.items()]
    intro = (
        "Stages (intermediates the gradient reads) first, then the outputs:"
        if staging
        else ("What the op computes, in index notation (a sum binds the product after it):")
    )
    return _section("Forward", intro, lines)


def _steps(derivation: Derivation) -> list[Step]:
    """Each input of each part differentiated, as `derive` does: the op as a whole, or a
    composed op's outputs and then each stage with a gradient, last first (reverse mode)."""
    variant = derivation.variant  # as differentiated: rewritten to stay finite
    staged = split_stages(variant)
    if not staged.stages:
        parts = [(dataclasses.replace(variant, outputs=staged.outputs), grad_names(variant))]
    else:
        parts = [(staged.part(variant, None), grad_names(variant))]
        parts += [
            (staged.part(variant, n), (f"grad_{s.name}",))
            for n, s in reversed(list(enumerate(staged.stages)))
            if derivation.staging.grads.get(s.name) is not None
        ]
    found = []
    for part, grads in parts:
        ranges = index_ranges(part)
        for inp in part.inputs:
            steps = None if inp.integer else input_steps(part, inp, grads, ranges)
            if steps is not None and any(t.factor != 0 for t in steps.contracted):
                all_ranges = {**ranges, **steps.axis_ranges}
                found.append(
                    Step(part, inp.name, steps, IndexNotationPrinter(grads, (), all_ranges))
                )
    return found


def _index_steps(derivation: Derivation, steps: list[Step]) -> list[str]:
    staged = derivation.staging is not None
    partials = [
        _partial_line(s, name, partial)
        for s in steps
        for name, partial in s.steps.partials
        if partial != 0
    ]
    contractions = [_terms_line(s, s.steps.contracted, staged) for s in steps]
    eliminated = []
    for s in steps:
        before = set().union(*(t.factor.atoms(sp.KroneckerDelta) for t in s.steps.contracted))
        after = set().union(*(t.factor.atoms(sp.KroneckerDelta) for t in s.steps.eliminated))
        gone = sorted(before - after, key=sp.default_sort_key)
        summed = ", ".join(_substitution(s, delta) for delta in gone)
        lead = f"`{summed}` summed out" if summed else "no delta"
        eliminated.append(f"- {lead}:\n  `{_terms_line(s, s.steps.eliminated, staged)}`")
    adding = " Contributions to one input add up, stage by stage from the last." if staged else ""
    return [
        _section(
            "Partial derivatives",
            "Of each output (stage) by an entry of each input it reads, by SymPy:",
            partials,
        ),
        _section(
            "Contraction with the upstream gradient",
            "Each partial times the upstream gradient, summed "
            f"over the output's indices (a vector-Jacobian product, no Jacobian built).{adding}",
            contractions,
        ),
        "## Kronecker deltas eliminated\n\nEach delta summed out against a summed index (the index takes the "
        "other's value), leaving sums only where the gradient really reduces:\n\n"
        + "\n".join(eliminated),
    ]


def _substitution(step: Step, delta) -> str:
    """`delta(a_0, i): i := a_0`, the summed index taking the other's value."""
    summed = {lim[0] for t in step.steps.contracted for lim in t.sums}
    u, v = delta.args if delta.args[0] in summed else reversed(delta.args)
    print_ = step.printer._print
    return f"{print_(delta)}: {print_(u)} := {print_(v)}" if u in summed else print_(delta)


def _partial_line(step: Step, output: str, partial) -> str:
    out = next(o for o in step.part.outputs if o.name == output)
    indices = f"[{', '.join(map(step.printer._print, out.indices))}]" if out.indices else ""
    return f"d {output}{indices} / d {step.printer._print(step.steps.entry)} = {step.printer._print(partial)}"


def _terms_line(step: Step, terms, accumulated: bool) -> str:
    rhs = Formula("", "", tuple(term_text(t, step.printer) for t in terms) or ("0",)).rhs
    return f"{_target(step)} {'+=' if accumulated else '='} {rhs}"


def _target(step: Step) -> str:
    entry = step.steps.entry
    indices = (
        f"[{', '.join(map(step.printer._print, entry.indices))}]"
        if isinstance(entry, sp.Indexed)
        else ""
    )
    return f"grad_{step.input}{indices}"


def _elementwise_steps(derivation: Derivation) -> list[str]:
    variant = derivation.variant
    plain = IndexNotationPrinter(derivation.grad_names)
    partials = [  # of a function of conj(z): (d/dz, d/d(conj z)), Wirtinger's
        f"d {o.name} / d {t.name} = {plain._print(_partials(variant, o.expr, t.base))}"
        for t in variant.inputs
        for o in variant.outputs
    ]
    contractions = [
        str(formula(f"grad_{name}", value, plain))
        for name, value in derivation.vjp.items()
        if value is not None
    ]
    return [
        _section("Partial derivatives", "Of each output by each input, by SymPy:", partials),
        _section(
            "Contraction with the upstream gradient",
            "Each partial times its output's upstream gradient, "
            "summed over the outputs (elementwise: no index is summed):",
            contractions,
        ),
        "## Kronecker deltas eliminated\n\nNone: an elementwise op reads every input at the output's own position.",
    ]


def _partials(variant, expr, z):
    """d expr / dz; of a Wirtinger op (a function of conj(z)), the pair (d/dz, d/d(conj z))."""
    if not uses_wirtinger(variant) or z.is_real:
        return partial_derivative(variant, expr, z)
    f, zc = independent(expr, z)
    back = lambda e: e.xreplace({zc: sp.conjugate(z)})
    return sp.Tuple(back(partial_derivative(variant, f, z)), back(partial_derivative(variant, f, zc)))


def _gradient(simplified: Derivation) -> str:
    lines = [str(f) for f in gradient_formulas(simplified)]
    return _section(
        "Contracted gradient",
        "As generated: simplified (forward outputs and stages reused, terms over "
        "one reduction merged), each input's axes named as the declaration reads it; the generated "
        "gradient's docstring states the same:",
        lines,
    )


def _lowering(decl: OpDecl, simplified: Derivation) -> str:
    code = lower_op(OpSignature.of(decl), [simplified])
    branch = dataclasses.replace(code.vjp.branches[0], attr_values=())
    body = format_module(
        print_function_body(dataclasses.replace(code.vjp, branches=(branch,)), NumpyPrinter(), code)
    )
    return (
        "## Lowering\n\nThe gradient as array operations, no Jacobian (numpy's `<op>_grad`; the other "
        f"targets compute the same operations under their own names):\n\n```python\n{body}```"
    )


def _section(title: str, intro: str, lines: list[str]) -> str:
    return f"## {title}\n\n{intro}\n\n```text\n" + "\n".join(lines) + "\n```"
