"""Index notation: a derivation's values as one readable line each, the way a reviewer checks
them against the code (`grad_a[i, k] = sum_j grad[i, j] * conj(b[k, j])`).

Pure formatting, SymPy in and strings out, for the generated gradients' docstrings and
`symgrad explain`. A sum binds the product after it (`sum_j a * b + c` is `(sum_j a * b) + c`);
a complex op's inputs, outputs and stages are read conjugated, as its gradient reads them.
"""

from __future__ import annotations

import dataclasses
import re

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits
from sympy.printing.precedence import PRECEDENCE, precedence
from sympy.printing.str import StrPrinter

from symgrad.declare import BATCH
from symgrad.derivation import Derivation, TensorValue, Term
from symgrad.ir import Formula, Function

SUM_PRECEDENCE = PRECEDENCE["Mul"] - 5  # parenthesised in a product, not in a sum of terms
SPARE_INDICES = "ijklmnpqrstuvw"  # for an axis whose declared index is taken
REDUCTION_NAMES = {"Sum": "sum", "Product": "prod", "product": "prod"}  # else `kind` or the class


class IndexNotationPrinter(StrPrinter):
    """SymPy's str printer, with sums, deltas, selects and products as they read on paper."""

    printmethod = "_index_notation"  # not `_sympystr`, by which an Indexed prints itself

    def __init__(self, upstream=(), conjugated=(), ranges=None):
        super().__init__()
        self.upstream = set(upstream)  # names of upstream gradients: first in each product
        self.conjugated = set(conjugated)  # names (Indexed) and Symbols read conjugated
        self.ranges = ranges or {}  # index -> (lowest, highest): bounds printed only if others

    def parenthesize(self, item, level, strict=False):
        inner = SUM_PRECEDENCE if isinstance(item, ExprWithLimits) else precedence(item)
        return (
            f"({self._print(item)})"
            if inner < level or (not strict and inner <= level)
            else self._print(item)
        )

    def _print_Indexed(self, expr):
        text = f"{expr.base.label}[{', '.join(self._print(i) for i in expr.indices)}]"
        return f"conj({text})" if str(expr.base.label) in self.conjugated else text

    def _print_Symbol(self, expr):
        return f"conj({expr.name})" if expr in self.conjugated else expr.name

    def _print_Float(self, expr):
        return repr(float(expr))

    def _print_Mul(self, expr):
        coeff, rest = expr.as_coeff_Mul()
        sign = "-" if coeff.is_negative else ""
        numer, denom = _numerator_denominator(abs(coeff), rest)
        numer.sort(
            key=lambda f: (not f.is_number, _name_of(f) not in self.upstream)
        )  # else SymPy's order
        if len(numer) == 1 and isinstance(numer[0], ExprWithLimits) and not denom:
            return sign + self._print(numer[0])  # `-sum_j ...`
        text = " * ".join(self.parenthesize(f, PRECEDENCE["Mul"]) for f in numer) or "1"
        if len(denom) == 1:
            text += " / " + self.parenthesize(denom[0], PRECEDENCE["Mul"])
        elif denom:
            text += f" / ({' * '.join(self.parenthesize(f, PRECEDENCE['Mul']) for f in denom)})"
        return sign + text

    def _print_Pow(self, expr, rational=False):
        if expr.exp.is_number and expr.exp.is_negative:
            return self._print_Mul(sp.Mul(sp.S.One, expr, evaluate=False))
        return super()._print_Pow(expr, rational)

    def _print_Sum(self, expr):
        return self._print_ExprWithLimits(expr)

    def _print_Product(self, expr):
        return self._print_ExprWithLimits(expr)

    def _print_ExprWithLimits(self, expr):
        """`sum_j f`, `max_{k, l} f`, `sum_{j = i..N - 1} f` (bounds other than the index's own)."""
        name = REDUCTION_NAMES.get(type(expr).__name__) or getattr(
            expr, "kind", type(expr).__name__
        )
        limits = [self._limit(limit) for limit in expr.limits]
        over = (
            limits[0] if len(limits) == 1 and limits[0].isalpha() else "{" + ", ".join(limits) + "}"
        )
        return f"{name}_{over} {self.parenthesize(expr.function, PRECEDENCE['Mul'], strict=True)}"

    def _limit(self, limit) -> str:
        """The index alone where it runs over its whole range (its own, or 0 to a size - 1)."""
        index, *bounds = limit
        own = self.ranges.get(index)
        ends_at_an_index = len(bounds) == 2 and any(  # a causal range: always shown
            s.is_integer and not s.is_positive for b in bounds for s in sp.sympify(b).free_symbols
        )
        if len(bounds) != 2 or (
            not ends_at_an_index and own is not None and all(sp.simplify(a - b) == 0 for a, b in zip(bounds, own))
        ):
            return self._print(index)
        low, high = map(sp.sympify, bounds)
        if (
            low == 0
            and (high + 1).free_symbols
            and all(s.is_positive for s in (high + 1).free_symbols)
        ):
            return self._print(index)  # sizes are positive symbols, indices are not
        return f"{self._print(index)} = {self._print(low)}..{self._print(high)}"

    def _print_conjugate(self, expr):
        (arg,) = expr.args
        name = str(arg.base.label) if isinstance(arg, sp.Indexed) else arg
        if name in self.conjugated:  # conj(conj(x)): the input as given
            if isinstance(arg, sp.Indexed):
                return f"{arg.base.label}[{', '.join(self._print(i) for i in arg.indices)}]"
            return arg.name
        return f"conj({self._print(arg)})"

    def _print_promoted(self, expr):  # a dtype, not a value
        return self._print(expr.args[0])

    def _print_modulus(self, expr):
        return f"|{self._print(expr.args[0])}|"

    def _print_ImaginaryUnit(self, expr):
        return "i"

    def _print_KroneckerDelta(self, expr):
        return f"delta({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    def _print_Piecewise(self, expr):
        """`(a if c else b)`, Python's select."""
        parts = []
        for value, condition in expr.args:
            if condition == sp.true:
                return "(" + " else ".join(parts + [self._print(value)]) + ")"
            parts.append(f"{self._print(value)} if {self._print(condition)}")
        return "(" + " else ".join(parts + ["nan"]) + ")"

    def _print_Relational(self, expr):
        op = {"==": "==", "!=": "!="}.get(expr.rel_op, expr.rel_op)
        level = precedence(expr)
        return f"{self.parenthesize(expr.lhs, level)} {op} {self.parenthesize(expr.rhs, level)}"

    def _print_And(self, expr):
        return " and ".join(self.parenthesize(a, PRECEDENCE["And"]) for a in expr.args)

    def _print_Or(self, expr):
        return " or ".join(self.parenthesize(a, PRECEDENCE["Or"]) for a in expr.args)

    def _print_Not(self, expr):
        return f"not {self.parenthesize(expr.args[0], PRECEDENCE['Not'])}"

    def _print_recomputed_or_reused(self, expr):
        return self._print(expr.args[0])  # the formula; the code may read the forward's outputs

    def _print_safe_where(self, expr):
        return self._print(expr.args[0])  # a select's guard: the value where it is read

    def _print_at_position(self, expr):
        value, index, position = expr.args[:3]
        return f"({self._print(value)} at {self._print(index)} = {self._print(position)})"

    def _print_holds(self, expr):
        return self._print(expr.entry)

    def _print_computed_position(self, expr):
        return self._print(expr.args[0])

    def _print_position_select(self, expr):
        return self._print(expr.as_piecewise())


def _numerator_denominator(coeff, rest) -> tuple[list, list]:
    """The factors above and below the line, a rational coefficient split between them."""
    numer, denom = [], []
    if coeff.is_Rational:
        numer += [sp.Integer(coeff.p)] if coeff.p != 1 else []
        denom += [sp.Integer(coeff.q)] if coeff.q != 1 else []
    elif coeff != 1:
        numer.append(coeff)
    for factor in rest.as_ordered_factors() if rest != 1 else ():
        base, exp = factor.as_base_exp()
        if factor.is_Pow and exp.as_coeff_Mul()[0].is_negative:
            denom.append(base if exp == -1 else sp.Pow(base, -exp, evaluate=False))
        else:
            numer.append(factor)
    return numer, denom


def _name_of(factor) -> str:
    return str(factor.base.label) if isinstance(factor, sp.Indexed) else str(factor)


# --- a derivation's values -----------------------------------------------------------------


def printer_for(derivation: Derivation, conjugate: bool = True) -> IndexNotationPrinter:
    """The printer of one derivation: its upstream gradients first, a complex op's values
    conjugated (as its gradient reads them; unless not to `conjugate`), its index ranges known."""
    variant, staging = derivation.variant, derivation.staging
    stages = [s.name for s in staging.stages] if staging else []
    upstream = list(derivation.grad_names) + [f"grad_{s}" for s in stages]
    conjugated = set()
    if variant.decl.complex_ok and conjugate:
        values = [t for t in variant.inputs if not t.integer]  # positions and conditions are real
        conjugated = {t.name for t in values} | {o.name for o in variant.outputs} | set(stages)
        conjugated |= {t.base for t in values if isinstance(t.base, sp.Symbol)}
        conjugated |= {sp.Symbol(o.name, real=True) for o in variant.outputs}
    return IndexNotationPrinter(upstream, conjugated, derivation.ranges)


def terms_of(value, printer: IndexNotationPrinter) -> tuple[str, ...]:
    """A value's terms, printed, each with its sign: a `TensorValue`'s `Term`s, or the terms
    of a scalar expression (an elementwise op's)."""
    if isinstance(value, TensorValue):
        return tuple(term_text(t, printer) for t in value.terms) or ("0",)
    return tuple(printer._print(t) for t in sp.sympify(value).as_ordered_terms())


def term_text(term: Term, printer: IndexNotationPrinter) -> str:
    """`sum_j f`, a negative coefficient in front: `-sum_j f`."""
    factor = term.factor
    if not term.sums:
        return printer._print(factor)
    sign = "-" if factor.as_coeff_Mul()[0].is_negative else ""
    return sign + printer._print(sp.Sum(-factor if sign else factor, *term.sums))


def formula(target: str, value, printer: IndexNotationPrinter) -> Formula:
    """`target[indices] = value` (no indices for an elementwise op's value)."""
    indices = value.indices if isinstance(value, TensorValue) else ()
    lhs = f"{target}[{', '.join(map(printer._print, indices))}]" if indices else target
    return Formula(target, lhs, terms_of(value, printer))


def with_formulas(vjp: Function, derivations: list[Derivation]) -> Function:
    """A gradient function whose branches (one per derivation) hold their formulas."""
    branches = tuple(
        dataclasses.replace(b, formulas=gradient_formulas(d))
        for b, d in zip(vjp.branches, derivations)
    )
    return dataclasses.replace(vjp, branches=branches)


def gradient_formulas(derivation: Derivation) -> tuple[Formula, ...]:
    """What a gradient function computes, in index notation: a composed op's forward stages
    and their gradients (which its inputs' read), then each input's gradient; axes named as
    the declaration reads them (`readable_axes`)."""
    printer, staging = printer_for(derivation), derivation.staging
    formulas = []
    if staging:
        formulas += [formula(s.name, staging.values[s.name], printer) for s in staging.stages]
        own = {s.name: s.indices for s in staging.stages}
        for name, value in staging.grads.items():
            if value is not None:
                readable = readable_axes(derivation, name, value, [own[name]])
                formulas.append(formula(f"grad_{name}", readable, printer))
    for t in derivation.variant.inputs:
        value = derivation.vjp[t.name]
        if value is not None:
            formulas.append(
                formula(f"grad_{t.name}", readable_axes(derivation, t.name, value), printer)
            )
    return tuple(formulas)


def readable_axes(derivation: Derivation, name: str, value, preferred=()):
    """`value` (the gradient of tensor `name`) with its axis indices (`a_0, a_1`) renamed to
    those the declaration reads the tensor with (`a[i, k]`: `i, k`; `preferred` first), or
    where those are taken in `value`, to a free letter."""
    if not isinstance(value, TensorValue):
        return value
    rank = len(value.indices)
    reads = [
        r
        for r in list(preferred) + [e.indices for e in _entries_read(derivation, name)]
        if len(r) == rank
    ]
    taken = {s.name for t in value.terms for s in _as_expr(t).atoms(sp.Symbol)}
    taken |= {i.name for i in value.indices} | _tensor_names(derivation)
    renamed = {}
    for n, axis in enumerate(value.indices):
        if axis == BATCH or not re.fullmatch(r".+_\d+", axis.name):
            continue  # already a declared index
        letters = [r[n].name for r in reads if "_" not in r[n].name] + list(SPARE_INDICES)
        letter = next((c for c in letters if c not in taken), None)
        if letter is not None:
            renamed[axis] = sp.Symbol(letter, integer=True)
            taken.add(letter)
    terms = tuple(
        Term(
            t.factor.xreplace(renamed), tuple(tuple(sp.Tuple(*s).xreplace(renamed)) for s in t.sums)
        )
        for t in value.terms
    )
    return TensorValue(tuple(renamed.get(i, i) for i in value.indices), terms)


def _as_expr(term: Term) -> sp.Expr:
    return sp.Sum(term.factor, *term.sums) if term.sums else term.factor


def _tensor_names(derivation: Derivation) -> set[str]:
    variant, staging = derivation.variant, derivation.staging
    names = (
        {t.name for t in variant.inputs}
        | {o.name for o in variant.outputs}
        | set(derivation.grad_names)
    )
    return names | ({s.name for s in staging.stages} if staging else set())


def _entries_read(derivation: Derivation, name: str) -> list:
    """The entries of tensor `name` the declaration reads with distinct plain indices, those
    indexed by an output's (a stage's) own indices first, then in SymPy's order."""
    staging = derivation.staging
    declared = list(derivation.variant.outputs) + list(
        staging.stages if staging else derivation.variant.stages
    )
    own = set().union(*(o.indices for o in declared))
    entries = {e for o in declared for e in o.expr.atoms(sp.Indexed) if str(e.base.label) == name}
    plain = [
        e
        for e in entries
        if all(isinstance(i, sp.Symbol) for i in e.indices)
        and len(set(e.indices)) == len(e.indices)
    ]
    return sorted(plain, key=lambda e: (not set(e.indices) <= own, sp.default_sort_key(e)))
