"""A generated function over `LONGEST` lines has its longest variant branch moved into a
function of its own (`symgrad.long_functions`): each variant still computes what it did, and
the branches that cannot move stay."""

from __future__ import annotations

import ast

import pytest
from conftest import GENERATED

from symgrad import long_functions
from symgrad.long_functions import split_long_functions
from symgrad.render import format_module


def _module(branch_lines: int, after_chain: str = "", training_extra: str = "") -> str:
    """A gradient function with a prologue, a short and a long variant, a raising else and
    one return."""
    long_body = "\n".join(f"        t{n} = t{n - 1} * x + {n}" for n in range(1, branch_lines))
    return format_module(f'''
def f_grad(grad, x, *, scale=None, mode="a"):
    """Doc."""
    if scale is None:
        scale = 2 * x
    if mode == "a":
        out = grad * scale
    elif mode == "b":
        t0 = grad + scale
{long_body}
{training_extra}        out = t{branch_lines - 1}
    else:
        raise ValueError(mode)
{after_chain}    return out, None
''')


def _run(text: str, **kwargs):
    scope = {}
    exec(text, scope)
    return scope["f_grad"](3.0, 0.5, **kwargs)


def test_a_long_branch_moves_and_each_variant_computes_what_it_did(monkeypatch):
    monkeypatch.setattr(long_functions, "LONGEST", 30)
    text = _module(40)
    split = format_module(split_long_functions(text))
    functions = {n.name: n for n in ast.parse(split).body}
    assert list(functions) == ["f_grad", "_f_grad_mode_b"]
    assert "return _f_grad_mode_b(grad, x, scale)" in split
    assert functions["f_grad"].end_lineno - functions["f_grad"].lineno < 30
    assert '"""f_grad where mode == \'b\': that branch, as a function of its own."""' in split
    for mode in ("a", "b"):
        assert _run(split, mode=mode) == _run(text, mode=mode)
        assert _run(split, mode=mode, scale=1.5) == _run(text, mode=mode, scale=1.5)
    with pytest.raises(ValueError):
        _run(split, mode="c")


def test_short_functions_and_branches_that_cannot_move_stay(monkeypatch):
    monkeypatch.setattr(long_functions, "LONGEST", 30)
    assert split_long_functions(_module(10)) is None  # short enough
    # the chain is followed by more than the return: the moved branch would skip it
    assert split_long_functions(_module(40, after_chain="    out = out + 1\n")) is None
    # a branch that returns on its own
    assert split_long_functions(_module(40, training_extra="        if x > 9:\n            return None, None\n")) is None


def test_no_function_of_generated_is_over_the_limit():
    """Today's library: every generated function, its new ones included, is at most `LONGEST`
    lines."""
    long = [
        (path.name, node.name)
        for path in sorted(GENERATED.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > long_functions.LONGEST
    ]
    assert not long


def test_an_else_after_one_test_is_named_by_that_tests_negation(monkeypatch):
    monkeypatch.setattr(long_functions, "LONGEST", 30)
    text = _module(40).replace('if mode == "a":', "if not training:").replace('elif mode == "b":', "else:")
    text = text.replace('mode="a"', "training=True").split("    else:\n        raise ValueError(mode)\n")[0] + "    return out, None\n"
    split = format_module(split_long_functions(format_module(text)))
    assert "return _f_grad_training(grad, x, scale)" in split
    assert all(_run(split, training=t) == _run(text, training=t) for t in (False, True))
