"""Generated functions kept under `LONGEST` lines, as a person splits one: the longest branch
of a function's if/elif chain over its variants (FusedBatchNorm's second order in training)
becomes a function of its own, `_<function>_<test>`, right after it, which the branch returns
the call of.

It works on the formatted module's text, through its syntax tree, so that it is the same for
every target. A branch moves only where that keeps the function's meaning: the chain is
followed by nothing but the function's `return`, which the new function ends with, and every
name the branch reads from the function (a parameter, or a name assigned before the chain) is
passed to it, in the order the function has them.
"""

from __future__ import annotations

import ast
import re

LONGEST = 150  # lines of a generated function, its signature and docstring included
SHORTEST_MOVED = 20  # lines of a branch worth a function of its own


def split_long_functions(text: str) -> str | None:
    """`text` (a formatted module) with a branch of each function over `LONGEST` lines moved
    into a function of its own, while one moves; None where none does (the caller formats
    the text again only where it changed)."""
    changed = False
    while True:
        lines, tree = text.split("\n"), ast.parse(text)
        taken = {getattr(n, "name", None) for n in tree.body}
        moved = next((m for f in _functions(tree) if (m := _moved(f, lines, taken)) is not None), None)
        if moved is None:
            return text if changed else None
        text, changed = moved, True


def _functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The module's top-level functions longer than `LONGEST` lines, longest first."""
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and _span(n) > LONGEST]
    return sorted(found, key=_span, reverse=True)


def _span(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def _moved(function: ast.FunctionDef, lines: list[str], taken: set[str]) -> str | None:
    """The module's text with the longest movable branch of `function` moved; None where it
    has none. `taken`: the module's top-level names."""
    body = function.body
    if len(body) < 2 or not isinstance(body[-2], ast.If) or not isinstance(body[-1], ast.Return):
        return None
    chain, returned = body[-2:]
    known = list(dict.fromkeys(_parameters(function) + _assigned(body[:-2])))
    for test, branch in sorted(_branches(chain), key=lambda b: _lines_of(b[1]), reverse=True):
        name = f"_{function.name}_{_slug(test)}"
        if _lines_of(branch) >= SHORTEST_MOVED and name not in taken and _returns_defined(branch, returned, known):
            return _with_branch_moved(function, name, test, branch, returned, known, lines)
    return None


def _parameters(function: ast.FunctionDef) -> list[str]:
    arguments = function.args
    return [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]


def _assigned(statements: list[ast.stmt]) -> list[str]:
    """The names `statements` assign, in order, once each."""
    names = [n.id for s in statements for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    return list(dict.fromkeys(names))


def _branches(statement: ast.If) -> list[tuple[ast.expr | None, list[ast.stmt]]]:
    """The (test, body) of each branch of an if/elif/else chain; the else's test is None, or
    after one if the negation of its test (`is_training` after `not is_training`)."""
    if statement.orelse and not _elif(statement):
        test = statement.test
        negation = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else ast.UnaryOp(ast.Not(), test)
        return [(test, statement.body), (negation, statement.orelse)]
    found = [(statement.test, statement.body)]
    while _elif(statement):
        statement = statement.orelse[0]
        found.append((statement.test, statement.body))
    return found + ([(None, statement.orelse)] if statement.orelse else [])


def _elif(statement: ast.If) -> bool:
    """Whether `statement`'s else is an `elif` (not an `else:` holding an `if`)."""
    orelse = statement.orelse
    return len(orelse) == 1 and isinstance(orelse[0], ast.If) and orelse[0].col_offset == statement.col_offset


def _lines_of(statements: list[ast.stmt]) -> int:
    return statements[-1].end_lineno - statements[0].lineno + 1


def _returns_defined(branch: list[ast.stmt], returned: ast.Return, known: list[str]) -> bool:
    """Whether everything `returned` reads is assigned in `branch` or passed to it, and the
    branch neither returns nor raises on its own (a branch that only raises stays)."""
    exits = (ast.Return, ast.Raise, ast.FunctionDef, ast.Lambda, ast.Global, ast.Nonlocal)
    if any(isinstance(n, exits) for s in branch for n in ast.walk(s)):
        return False
    read = {n.id for n in ast.walk(returned) if isinstance(n, ast.Name)}
    return read <= set(_assigned(branch)) | set(known)


def _with_branch_moved(function, name, test, branch, returned, known, lines) -> str:
    """The module's `lines` with `branch` replaced by a return of its new function's call,
    and the new function after `function`."""
    read = {n.id for s in branch + [returned] for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    passed = [parameter for parameter in known if parameter in read]
    indent = " " * branch[0].col_offset
    first, last = branch[0].lineno - 1, branch[-1].end_lineno  # 0-based, end exclusive
    body = [line[len(indent) - 4 :] if line.strip() else "" for line in lines[first:last]]
    where = "otherwise" if test is None else f"where {ast.unparse(test)}"
    new = [
        f"def {name}({', '.join(passed)}):",
        f'    """{function.name} {where}: that branch, as a function of its own."""',
        *body,
        "    " + "\n".join(lines[returned.lineno - 1 : returned.end_lineno]).strip(),
    ]
    call = [f"{indent}return {name}({', '.join(passed)})"]
    end = function.end_lineno
    return "\n".join(lines[:first] + call + lines[last:end] + ["", ""] + new + lines[end:])


def _slug(test: ast.expr | None) -> str:
    """A test as a name's tail: `padding == "SAME"` -> `padding_same`."""
    if test is None:
        return "otherwise"
    return re.sub(r"\W+", "_", ast.unparse(test)).strip("_").lower()[:40].strip("_")
