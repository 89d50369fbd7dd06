"""Variant bodies of different lengths merged into one (`symgrad.runs_apart`): the statements
they share in place, the runs apart under inner ifs, each variant computing what its own
branch did, whatever its temporaries were numbered."""

from __future__ import annotations

import textwrap

import pytest

from symgrad.dispatch import chain
from symgrad.runs_apart import merged_apart

ERROR = 'raise ValueError("unsupported")'
VALID = ("t0 = x[0]", "t1 = x[1]", "t2 = t0 * 2 + t1", "t3 = t2 - 1", "t4 = t3 * t0", "out = t4 + t2")
SAME = ("t0 = x[0]", "t1 = x[1]", "t2 = len(x)", "t3 = t0 * 2 + t1 - t2 // 2", "t4 = t3 - 1", "t5 = t4 * t0", "out = t5 + t3")


def _run(lines, **scope):
    body = textwrap.indent("\n".join(lines), "    ")
    namespace: dict = {}
    exec(f"def f(x, {', '.join(scope)}):\n{body}\n    return out", namespace)
    return namespace["f"]([10, 20, 30, 40], **scope)


def _per_variant(branches):
    lines = []
    for n, (values, statements) in enumerate(branches):
        test = " and ".join(f"{name} == {value!r}" for name, value in values)
        lines += [f"{'if' if n == 0 else 'elif'} {test}:"] + ["    " + s for s in statements]
    return lines + ["else:", f"    {ERROR}"]


def test_a_run_only_one_variant_has_goes_under_an_inner_if_and_the_rest_is_shared():
    merged = merged_apart([VALID, SAME], ["padding == 'VALID'", "padding == 'SAME'"])
    assert merged[:2] == ("t0 = x[0]", "t1 = x[1]")
    assert merged[2] == "if padding == 'VALID':\n    t2 = t0 * 2 + t1\nelse:\n    t3 = len(x)\n    t2 = t0 * 2 + t1 - t3 // 2"
    assert merged[3:] == ("t4 = t2 - 1", "t5 = t4 * t0", "out = t5 + t2")


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_each_variant_computes_what_its_own_branch_did(padding):
    branches = [((("padding", "VALID"),), list(VALID)), ((("padding", "SAME"),), list(SAME))]
    lines = chain(branches, ERROR)
    assert lines[0] == "if padding in ('VALID', 'SAME'):"
    assert _run(lines, padding=padding) == _run(_per_variant(branches), padding=padding)


def test_a_temporary_an_inner_if_assigns_is_renamed_with_the_rest():
    """A body merged before (over another attribute) assigns temporaries inside an inner if:
    they are the body's own, numbered apart like any other."""
    first = ("t0 = x[0]", "if mode == 'A':\n    t1 = x[1]\nelse:\n    t1 = x[2]", "t2 = t0 + t1", "t3 = t2 * 2", "out = t3 + t0")
    second = ("t0 = x[0]", "t1 = len(x)", "if mode == 'A':\n    t2 = x[1] + t1\nelse:\n    t2 = x[2] + t1", "t3 = t0 + t2", "t4 = t3 * 2", "out = t4 + t0")
    merged = merged_apart([first, second], ["k == 1", "k == 2"])
    for k, body in ((1, first), (2, second)):
        for mode in ("A", "B"):
            assert _run(merged, k=k, mode=mode) == _run(body, k=k, mode=mode)


def test_recomputed_stages_are_merged_inside_their_block():
    valid = ("if s is None:\n    t0 = x[0]\n    t1 = t0 * 2\n    t2 = t1 + 1\n    s = t2 * 2", "t3 = s + x[1]", "t4 = t3 * 3", "out = t4 - s")
    same = ("if s is None:\n    t0 = x[0]\n    t1 = len(x)\n    t2 = t0 * 2 - t1\n    t3 = t2 + 1\n    s = t3 * 2", "t4 = s + x[1]", "t5 = t4 * 3", "out = t5 - s")
    merged = merged_apart([valid, same], ["padding == 'VALID'", "padding == 'SAME'"])
    assert merged[0].startswith("if s is None:\n    t0 = x[0]\n    if padding == 'VALID':")
    for padding, body in (("VALID", valid), ("SAME", same)):
        for s in (None, 5):
            assert _run(merged, padding=padding, s=s) == _run(body, padding=padding, s=s)


def test_bodies_mostly_apart_stay_branches():
    assert merged_apart([("t0 = x[0]", "out = t0"), ("t0 = len(x)", "t1 = t0 * 2", "out = t1")], ["k == 1", "k == 2"]) is None


PADS = {"VALID": "(0, 0)", "SAME": "(same(x[0]), same(x[1]))", "EXPLICIT": "(x[2], x[3])"}


def test_calls_differing_in_keyword_values_read_variables_set_per_variant():
    """Conv2D's gradient under three paddings: one call per kernel, `pads` set per padding
    once for every call that takes it; a keyword's name is no variable, so `pads` is free."""
    branches = [
        ((("padding", p),), [f"t0 = conv(x, pads={v}, sizes=(1, 2))", f"t1 = conv(t0, pads={v}, sizes=(3, 4))", "out = t0 + t1"])
        for p, v in PADS.items()
    ]
    lines = chain(branches, ERROR)
    assert lines[:3] == ["if padding in ('VALID', 'SAME', 'EXPLICIT'):", "    if padding == 'VALID':", "        pads = (0, 0)"]
    assert "    t1 = conv(t0, pads=pads, sizes=(3, 4))" in lines and sum("pads = " in line for line in lines) == 3
    scope = {"conv": lambda x, pads, sizes: sum(pads) + sum(sizes) + (x if isinstance(x, int) else len(x)), "same": lambda v: v // 3}
    for padding in PADS:
        assert _run(lines, padding=padding, **scope) == _run(_per_variant(branches), padding=padding, **scope)


def test_statements_differing_outside_keyword_values_are_not_read_from_variables():
    branches = [((("mode", m),), [f"t0 = {f}(x, pads=(0, {n}))", "t1 = t0 + 1", "t2 = t1 * 2", "out = t2"]) for m, f, n in (("A", "min", 1), ("B", "max", 2))]
    assert not any("pads = " in line for line in chain(branches, ERROR))
