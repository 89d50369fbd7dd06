"""What a generated gradient function's docstring says after its first line: each value it
computes in index notation (`ir.Formula`, from `symgrad.notation`), next to the expression the
code computes it with, so that a reviewer can check the math without deriving it again.

Every attribute variant when that stays short, else the default one, naming the attributes
that change it. Laid out for a line length, and the same for the same declarations.
"""

from __future__ import annotations

import textwrap

from symgrad import ir

LINE_LENGTH = 100  # as the generated code's (`render.LINE_LENGTH`)
FUNCTION_INDENT = 4  # a docstring's lines are indented as its function's body
MOST_VARIANTS = 4  # more variants than this: the default one only
MOST_LINES = 8  # lines of one formula; beyond, elided
ELIDED = "... (`symgrad explain` prints it whole)"


def gradient_doc(op: ir.OpCode, printed: list[dict]) -> str:
    """The docstring's formulas, "" for a function without (a gradient op's).

    Args:
        op: the op, whose gradient's branches hold the formulas.
        printed: per branch, each variable -> the expression defining it, as printed.
    """
    branches = [(b, code) for b, code in zip(op.vjp.branches, printed) if b.formulas]
    if not branches:
        return ""
    if not branches[0][0].attr_values:
        return "In index notation, next to the code computing it:\n" + _block(branches[0], 4)
    if len(branches) <= MOST_VARIANTS and all(_fits(f, 8) for b, _ in branches for f in b.formulas):
        blocks = [f"    {_variant(b.attr_values)}:\n{_block((b, code), 8)}" for b, code in branches]
        return "In index notation, next to the code computing it, per variant:\n" + "\n".join(
            blocks
        )
    default = _default_branch(op, branches)
    changing = ", ".join(name for name, _ in op.enumerated_attrs)
    lead = (
        f"In index notation, next to the code computing it, for {_variant(default[0].attr_values)}"
    )
    lead = textwrap.fill(f"{lead} (other values of {changing} change it):", _width(0))
    return f"{lead}\n{_block(default, 4)}"


def _block(branch_and_code: tuple, indent: int) -> str:
    """A branch's formulas, each with its code, indented by `indent`."""
    branch, code = branch_and_code
    formatted = _black_formatted([code.get(f.target) for f in branch.formulas])
    lines = []
    for formula, expression in zip(branch.formulas, formatted):
        lines += _formula_lines(formula, expression, _width(indent))
    return "\n".join(" " * indent + line for line in lines).replace("\\", "\\\\")


def _formula_lines(formula: ir.Formula, code: str | None, width: int) -> list[str]:
    """`lhs = terms` wrapped before a term's sign, then `i.e. <code>` (unless it reads as the
    formula does: an elementwise op's), on the last line where it fits."""
    lines = _wrapped(formula, width)
    if code is None or code == formula.rhs:
        return lines
    tail = f", i.e. `{code}`"
    if len(lines[-1]) + len(tail) <= width:
        return lines[:-1] + [lines[-1] + tail]
    return lines + [f"    i.e. `{_elided(code, width - 11)}`"]


def _wrapped(formula: ir.Formula, width: int) -> list[str]:
    """The formula's lines: a term per continuation line where the line is full, a term
    longer than a line broken at spaces; past `MOST_LINES`, elided."""
    lines = [f"{formula.lhs} = {formula.terms[0]}"]
    for term in formula.terms[1:]:
        signed = f"- {term[1:]}" if term.startswith("-") else f"+ {term}"
        if len(lines[-1]) + 1 + len(signed) <= width:
            lines[-1] += " " + signed
        else:
            lines.append("    " + signed)
    broken = [
        part
        for line in lines
        for part in textwrap.wrap(
            line,
            width,
            subsequent_indent="        " if line.startswith("    ") else "    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    ]
    return broken if len(broken) <= MOST_LINES else broken[: MOST_LINES - 1] + ["    " + ELIDED]


def _elided(code: str, width: int) -> str:
    """`code`, cut at a space before `width` where longer, ending in `...`."""
    if len(code) <= width:
        return code
    return code[: code.rfind(" ", 0, width - 4)] + " ..."


def _fits(formula: ir.Formula, indent: int) -> bool:
    return len(str(formula)) <= _width(indent)


def _width(indent: int) -> int:
    return LINE_LENGTH - FUNCTION_INDENT - indent


def _variant(attr_values) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in attr_values)


def _default_branch(op: ir.OpCode, branches: list) -> tuple:
    """The branch of the attributes' defaults, else the first."""
    defaults = dict(op.enumerated_attrs)
    return next(
        (b for b in branches if all(defaults.get(n) == v for n, v in b[0].attr_values)), branches[0]
    )


def _black_formatted(expressions: list[str | None]) -> list[str | None]:
    """Each expression as black writes it in the code below the docstring (one line each)."""
    import black  # only when something is rendered: it costs seconds at start-up

    given = [(n, e) for n, e in enumerate(expressions) if e is not None]
    if not given:
        return expressions
    source = "".join(f"_{n} = {e}\n" for n, e in given)
    text = black.format_str(source, mode=black.Mode(line_length=10**6, magic_trailing_comma=False))
    formatted = list(expressions)
    for line in text.splitlines():  # `_<n> = <expression>`, one line each at this length
        name, _, value = line.partition(" = ")
        if name[1:].isdigit():
            formatted[int(name[1:])] = value
    return formatted
