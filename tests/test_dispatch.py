"""The if/elif chain over an op's variants (`symgrad.dispatch`): bodies that differ only in
literals an attribute explains become one, statements every branch shares come first, and
the chain computes what the branch-per-variant chain computed, for every variant."""

from __future__ import annotations

import ast
import itertools
import re
import textwrap

import pytest
from conftest import ROOT

from symgrad.dispatch import chain

ERROR = 'raise ValueError("unsupported")'


def _run(lines: list[str], **scope):
    body = textwrap.indent("\n".join(lines), "    ")
    namespace: dict = {}
    exec(f"def f(x, {', '.join(scope)}):\n{body}\n    return out", namespace)
    return namespace["f"]([10, 20, 30, 40], **scope)


def _per_variant(branches) -> list[str]:
    lines = []
    for n, (values, statements) in enumerate(branches):
        test = " and ".join(f"{name} == {value!r}" for name, value in values)
        lines += [f"{'if' if n == 0 else 'elif'} {test}:"] + ["    " + s for s in statements]
    return lines + ["else:", f"    {ERROR}"]


AXES = [((("axis", a),), ["t0 = len(x)", f"out = x[{a}] + t0"]) for a in (-1, -2, -3)]


def test_bodies_differing_in_the_axis_become_one_reading_it():
    assert chain(AXES, ERROR) == [
        "if axis in (-1, -2, -3):",
        "    t0 = len(x)",
        "    out = x[axis] + t0",
        "else:",
        f"    {ERROR}",
    ]


def test_entry_statements_stay_out_of_the_merging():
    """A branch's entry statements (its inputs' shapes checked) run first: once before the
    chain where every branch's are the same; where the branches merged check other shapes,
    each its own under an inner if, and the bodies still merge."""
    same = [("check(x, 'N')",)] * len(AXES)
    assert chain(AXES, ERROR, same) == ["check(x, 'N')"] + chain(AXES, ERROR)
    own = [(f"check(x, {a})",) for a in (-1, -2, -3)]
    assert chain(AXES, ERROR, own) == [
        "if axis in (-1, -2, -3):",
        "    if axis == -1:",
        "        check(x, -1)",
        "    elif axis == -2:",
        "        check(x, -2)",
        "    else:",
        "        check(x, -3)",
        "    t0 = len(x)",
        "    out = x[axis] + t0",
        "else:",
        f"    {ERROR}",
    ]
    check = lambda x, a: None
    for axis in (-1, -2, -3):
        assert _run(chain(AXES, ERROR, own), axis=axis, check=check) == _run(_per_variant(AXES), axis=axis)


def test_a_literal_offset_from_the_attribute_is_read_as_such():
    branches = [((("axis", a),), [f"out = x[{a - 2}]"]) for a in (0, 1)]
    assert chain(branches, ERROR)[:2] == ["if axis in (0, 1):", "    out = x[axis - 2]"]
    branches = [((("axis", a),), [f"out = x[{1 - a}] * 2"]) for a in (0, 1)]
    assert chain(branches, ERROR)[:2] == ["if axis in (0, 1):", "    out = x[1 - axis] * 2"]


def test_a_mode_passed_on_as_a_string_is_the_attribute():
    branches = [((("padding", p),), [f'out = f(x, padding="{p}")']) for p in ("VALID", "SAME")]
    assert chain(branches, ERROR)[:2] == ["if padding in ('VALID', 'SAME'):", "    out = f(x, padding=padding)"]


def test_bodies_that_differ_in_code_stay_apart():
    branches = [((("mode", "A"),), ["out = x[0] + 1"]), ((("mode", "B"),), ["out = x[0] - 1"])]
    lines = chain(branches, ERROR)
    assert lines[0] == "if mode == 'A':" and "elif mode == 'B':" in lines


def test_only_variants_equal_in_every_other_attribute_merge():
    branches = [
        ((("axis", -1), ("keep", False)), ["out = x[-1]"]),
        ((("axis", -1), ("keep", True)), ["out = [x[-1]]"]),
        ((("axis", -2), ("keep", False)), ["out = x[-2]"]),
        ((("axis", -2), ("keep", True)), ["out = [x[-2]]"]),
    ]
    assert chain(branches, ERROR)[:4] == [
        "if axis in (-1, -2) and not keep:",
        "    out = x[axis]",
        "elif axis in (-1, -2) and keep:",
        "    out = [x[axis]]",
    ]


def test_a_statement_is_hoisted_only_with_everything_it_reads():
    branches = [
        ((("mode", "A"),), ["t0 = len(x)", "t1 = x[0] + 1", "t2 = t1 + t0", "out = t2"]),
        ((("mode", "B"),), ["t0 = len(x)", "t1 = x[0] - 1", "t2 = t1 + t0", "out = t2 * 2"]),
    ]
    lines = chain(branches, ERROR)
    assert lines[0] == "t0 = len(x)" and lines[1].startswith("if ")
    assert lines.count("    t2 = t1 + t0") == 2  # reads t1, which the branches compute apart


def test_a_statement_reading_a_tested_attribute_stays_inside_the_chain():
    """Hoisted, it would run (and fail) for a value the chain rejects with its error."""
    branches = [((("axis", a), ("keep", k)), [f"t0 = x[{a}]", "out = t0" if k else "out = -t0"])
                for a, k in itertools.product((0, 1), (False, True))]
    lines = chain(branches, ERROR)
    assert not lines[0].startswith("t0")


def test_statements_every_branch_ends_with_follow_the_chain_once():
    branches = [
        ((("mode", "A"),), ["t0 = x[0] + 1", "t1 = t0 * 2", "out = t1 + len(x)"]),
        ((("mode", "B"),), ["t0 = x[1] - 1", "t1 = t0 * 2", "out = t1 + len(x)"]),
    ]
    lines = chain(branches, ERROR)
    assert lines[-2:] == ["t1 = t0 * 2", "out = t1 + len(x)"] and lines[-3] == f"    {ERROR}"
    assert lines.count("    t0 = x[0] + 1") == 1 and not any(line.startswith("    t1") for line in lines)
    for mode in ("A", "B"):
        assert _run(lines, mode=mode) == _run(_per_variant(branches), mode=mode)
    with pytest.raises(ValueError):
        _run(lines, mode="C")


def test_a_common_statement_nothing_later_depends_on_moves_after_the_chain():
    branches = [
        ((("mode", "A"),), ["t0 = len(x)", "t0 = t0 + 1", "t1 = min(x)", "out = t0 + t1"]),
        ((("mode", "B"),), ["t0 = sum(x)", "t0 = t0 + 1", "t1 = max(x)", "out = t0 - t1"]),
    ]
    lines = chain(branches, ERROR)
    assert lines[-1] == f"    {ERROR}" and lines.count("    t0 = t0 + 1") == 2  # out reads it after t1
    branches = [
        ((("mode", "A"),), ["t0 = len(x)", "t0 = t0 + 1", "t1 = min(x)", "out = t1 * 2"]),
        ((("mode", "B"),), ["t0 = sum(x)", "t0 = t0 + 1", "t1 = max(x)", "out = -t1"]),
    ]
    lines = chain(branches, ERROR)
    assert lines[-1] == "t0 = t0 + 1" and "    t0 = t0 + 1" not in lines
    for mode in ("A", "B"):
        assert _run(lines, mode=mode) == _run(_per_variant(branches), mode=mode)


def test_a_common_tail_leaves_every_branch_a_statement():
    branches = [((("mode", m),), ["out = x[0]"]) for m in ("A", "B")]
    branches[1][1].insert(0, "x = x[::-1]")
    lines = chain(branches, ERROR)
    assert "    out = x[0]" in lines and lines[-1] == f"    {ERROR}"


@pytest.mark.parametrize("axis", [-1, -2, -3])
def test_the_chain_computes_what_one_branch_per_variant_computed(axis):
    assert _run(chain(AXES, ERROR), axis=axis) == _run(_per_variant(AXES), axis=axis)
    with pytest.raises(ValueError):
        _run(chain(AXES, ERROR), axis=-4)


def test_no_two_branches_in_generated_code_could_be_one():
    """The duplicate scan: in every if/elif chain of generated/, no two branches whose code is
    the same but for numbers and strings (what one parametrised body would read). An einsum's
    equation is code, not a value: branches with other equations do other things."""
    literal = re.compile(r"""(?<![\w.])-?\d+(\.\d+)?|'[^'>]*'|"[^">]*\"""")
    found = []
    for path in sorted((ROOT / "generated").glob("*.py")):
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef):
                continue
            for statement in function.body:
                bodies = _chain_bodies(statement) if isinstance(statement, ast.If) else []
                shapes = [literal.sub("L", "\n".join(ast.unparse(s) for s in body)) for body in bodies]
                found += [(path.name, function.name) for n, s in enumerate(shapes) if s in shapes[:n]]
    assert not found


def _chain_bodies(node) -> list:
    bodies = []
    while True:
        bodies.append(node.body)
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
        else:
            return bodies


def test_a_tuple_attribute_is_read_by_entry_or_by_where_a_value_sits():
    branches = [((("axis", a),), [f"out = x[{a[0]}]"]) for a in ((-1,), (-2,))]
    assert chain(branches, ERROR)[:2] == ["if axis in ((-1,), (-2,)):", "    out = x[axis[0]]"]
    perms = ((1, 2, 0), (2, 0, 1))  # the gradient transposes by the inverse permutation
    branches = [((("perm", p),), [f"out = f(x, ({p.index(0)}, {p.index(1)}, {p.index(2)}))"]) for p in perms]
    assert chain(branches, ERROR)[1] == "    out = f(x, (perm.index(0), perm.index(1), perm.index(2)))"


def test_a_boolean_attribute_and_its_negation_are_an_if_and_its_else():
    """Every value takes one of `not training` and `training`: no unsupported value is left for
    a raising else, and the second test is the chain's else."""
    branches = [((("training", t),), [f"out = x[0] {'+' if t else '-'} 1"]) for t in (False, True)]
    lines = chain(branches, ERROR)
    assert lines == ["if not training:", "    out = x[0] - 1", "else:", "    out = x[0] + 1"]
    assert [_run(lines, training=t) for t in (False, True, 0, 1)] == [9, 11, 9, 11]
    # a boolean with a second attribute keeps its tests and its raising else
    branches = [((("training", t), ("mode", m)), [f"out = x[0] + {int(t)} * {len(m)} - 1"]) for t in (False, True) for m in ("A", "BB")]
    assert chain(branches, ERROR)[-2:] == ["else:", f"    {ERROR}"]


def test_an_attribute_of_one_value_is_tested_once_before_the_chain():
    branches = [((("mode", m), ("padding", 0)), [f"out = x[0] {'+' if m == 'A' else '-'} 1"]) for m in ("A", "B")]
    lines = chain(branches, ERROR)
    assert lines[:3] == ["if padding != 0:", f"    {ERROR}", "if mode == 'A':"]
    assert _run(lines, mode="B", padding=0) == 9
    with pytest.raises(ValueError):
        _run(lines, mode="A", padding=1)


def test_a_tuple_entry_plus_an_offset_explains_a_literal():
    """A band of diagonals k = (low, high): its code reads `k[1] - 1`, `-k[0]`."""
    bands = ((-1, 1), (1, 2))
    branches = [((("k", k),), [f"out = x[{k[1] - 1}] + {-k[0]}"]) for k in bands]
    lines = chain(branches, ERROR)
    assert lines[:2] == ["if k in ((-1, 1), (1, 2)):", "    out = x[k[1] - 1] + -k[0]"]
    assert [_run(lines, k=k) for k in bands] == [_run(_per_variant(branches), k=k) for k in bands]


ALIGNED = [
    ((("k", k), ("align", a)), ["t0 = len(x)", f"t1 = x[{k}]", t2, "t3 = t1 * t0 + t2", "out = t3 - t0"])
    for k in (0, 1)
    for a, t2 in (("L", "t2 = t0 - 1"), ("R", "t2 = max(t0, 2)"), ("C", "t2 = t0 // 2"))
]


def test_bodies_differing_in_a_few_statements_share_the_rest():
    """Variants that compute one name another way (how `align` places a diagonal) share every
    other statement; the few they differ in sit under an inner if on the attribute."""
    lines = chain(ALIGNED, ERROR)
    assert lines == [
        "if k in (0, 1) and align in ('L', 'R', 'C'):",
        "    t0 = len(x)",
        "    t1 = x[k]",
        "    if align == 'L':",
        "        t2 = t0 - 1",
        "    elif align == 'R':",
        "        t2 = max(t0, 2)",
        "    else:",
        "        t2 = t0 // 2",
        "    t3 = t1 * t0 + t2",
        "    out = t3 - t0",
        "else:",
        f"    {ERROR}",
    ]
    for k, a in itertools.product((0, 1), "LRC"):
        assert _run(lines, k=k, align=a) == _run(_per_variant(ALIGNED), k=k, align=a)
    with pytest.raises(ValueError):
        _run(lines, k=2, align="L")


def test_bodies_differing_in_most_statements_stay_apart_and_temporaries_named_apart_merge():
    mostly = [((("mode", m),), [f"t0 = x[0] {op} 1", f"out = t0 {op} 2"]) for m, op in (("A", "+"), ("B", "-"))]
    assert "elif mode == 'B':" in chain(mostly, ERROR)
    named = [((("mode", m),), ["t0 = len(x)", "t1 = t0 + 1", s, "out = t0 + t1"]) for m, s in (("A", "t2 = 1"), ("B", "t3 = 2"))]
    lines = chain(named, ERROR)
    assert "elif mode == 'B':" not in lines and "    else:" in lines  # t3 renamed: one body, the runs apart
    for mode in ("A", "B"):
        assert _run(lines, mode=mode) == _run(_per_variant(named), mode=mode)
