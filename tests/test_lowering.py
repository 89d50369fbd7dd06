"""The lowering rule table: each rule lowers the expressions it is for, tried in order.

Each case lowers one expression with `TensorLowering` directly, records which rules of
`rules.EXPRESSION_RULES` and `rules.SUM_RULES` lowered something, and, where the statements
print as plain numpy, runs them and compares the result with `np.einsum` or a loop.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp

from symgrad import ir
from symgrad.declaration import Location
from symgrad.errors import LoweringError
from symgrad.backends.numpy import runtime
from symgrad.extrema import argmax
from symgrad.functions import indicator, logsumexp, product
from symgrad.lowering import rules
from symgrad.lowering.signature import OpSignature
from symgrad.lowering.tensor import TensorLowering
from symgrad.backends.numpy.printer import NumpyPrinter

SIGNATURE = OpSignature("Example", "example", "", Location("ops/example.py", 3), False, False, ())
i, j, k, n, m = sp.symbols("i j k n m", integer=True)
M, N, K = sp.symbols("M N K", integer=True, positive=True)
a = sp.IndexedBase("a", shape=(M, K))
b = sp.IndexedBase("b", shape=(K, N))
c = sp.IndexedBase("c", shape=(M, N))
v = sp.IndexedBase("v", shape=(K,))
DIMS = {M: ("a", -2), K: ("a", -1), N: ("b", -1)}
RANGES = {i: (0, M - 1), j: (0, N - 1), k: (0, K - 1), n: (0, K - 1)}
RNG = np.random.default_rng(0)
ARRAYS = {"a": RNG.normal(size=(3, 4)), "b": RNG.normal(size=(4, 5)), "c": RNG.normal(size=(3, 5)),
          "v": RNG.normal(size=4)}


@pytest.fixture
def used(monkeypatch) -> list[str]:
    """The names of the rules that lowered something, in the order they did."""
    names: list[str] = []

    def recorded(table):
        def wrap(rule):
            def lower(lowering, expr, axes):
                result = rule.lower(lowering, expr, axes)
                if result is not None:
                    names.append(rule.name)
                return result
            return dataclasses.replace(rule, lower=lower)
        return tuple(wrap(rule) for rule in table)

    monkeypatch.setattr(rules, "EXPRESSION_RULES", recorded(rules.EXPRESSION_RULES))
    monkeypatch.setattr(rules, "SUM_RULES", recorded(rules.SUM_RULES))
    return names


def outermost(used: list[str]) -> str:
    """The rule that lowered the whole expression (recorded last: its parts finish first);
    for a Sum, the sum rule that did."""
    return used[-2] if used[-1] == "a sum, by the sum rules below" else used[-1]


def lowered(expr, axes) -> tuple[TensorLowering, sp.Expr]:
    lowering = TensorLowering(SIGNATURE, DIMS, RANGES)
    return lowering, lowering.array(expr, axes)


def run(lowering: TensorLowering, result: sp.Expr) -> np.ndarray:
    """Execute the statements as numpy, then the result expression."""
    printer = NumpyPrinter()
    helpers = {name: getattr(runtime, name) for name in ("_shift_right", "_gather", "_linear_scan")}
    scope = {"np": np, "numpy": np, **helpers, **{name: x.copy() for name, x in ARRAYS.items()}}
    for statement in lowering.body:
        exec(f"{statement.target} = {printer._print(statement.value)}", scope)
    return np.asarray(eval(printer._print(ir.Elementwise(result)), scope))


CASES = [
    # (expression, axes, the rule that must lower its outermost part, the numpy reference)
    (sp.Sum(a[i, k] * b[k, j], (k, 0, K - 1)), (i, j), "a matmul or einsum", lambda: ARRAYS["a"] @ ARRAYS["b"]),
    (sp.Sum(a[i, k] * v[k], (k, 0, K - 1)), (i,), "a matmul or einsum", lambda: ARRAYS["a"] @ ARRAYS["v"]),
    (sp.Sum(sp.exp(a[i, k]), (k, 0, K - 1)), (i,), "a reduction", lambda: np.exp(ARRAYS["a"]).sum(-1)),
    (sp.Sum(2 * c[i, j] * a[i, k], (k, 0, K - 1)), (i, j), "constant factors moved out",
     lambda: 2 * ARRAYS["c"] * ARRAYS["a"].sum(-1)[:, None]),
    (sp.Sum(v[n], (n, 0, k)), (k,), "a cumulative sum", lambda: np.cumsum(ARRAYS["v"])),
    (sp.Sum((a[i, k] - b[k, j]) ** 2, (k, 0, K - 1)), (i, j), "a sum of expanded terms",
     lambda: ((ARRAYS["a"][:, :, None] - ARRAYS["b"][None]) ** 2).sum(1)),
    (sp.Sum(sp.Piecewise((a[i, k] * b[k, j], c[i, j] > 0), (0, True)), (k, 0, K - 1)), (i, j),
     "a mask applied after the sum", lambda: np.where(ARRAYS["c"] > 0, ARRAYS["a"] @ ARRAYS["b"], 0)),
    (sp.KroneckerDelta(k, n), (k, n), "an identity or one-hot", lambda: np.eye(4)),
    (k, (k,), "an index's positions (iota)", lambda: np.arange(4)),
    (argmax(a[i, k], (k, 0, K - 1)), (i,), "the first position of a maximum or minimum (argmax)",
     lambda: np.argmax(ARRAYS["a"], -1)),
    (sp.tanh(a[i, k]) + c[i, j], (i, j, k), "elementwise arithmetic and functions",
     lambda: np.tanh(ARRAYS["a"])[:, None, :] + ARRAYS["c"][:, :, None]),
    (a[i, k], (k, i), "a tensor entry, gathered where its subscripts are maps", lambda: ARRAYS["a"].T),
    (logsumexp(v[n], (n, 0, k)), (k,), "a product, maximum, minimum or log-sum-exp",
     lambda: np.log(np.cumsum(np.exp(ARRAYS["v"])))),
    (sp.Sum(v[n] * sp.exp(v[k] - v[n]), (n, k, K - 1)), (k,), "a cumulative sum of exponentials, in log space",
     lambda: [sum(ARRAYS["v"][m] * np.exp(ARRAYS["v"][p] - ARRAYS["v"][m]) for m in range(p, 4)) for p in range(4)]),
    (sp.Sum(a[i, k] * v[n], (k, 0, K - 1), (n, 0, K - 1)), (i,), "a product of sums over separate indices",
     lambda: ARRAYS["a"].sum(-1) * ARRAYS["v"].sum()),
    (sp.Sum(a[i, m] * v[n], (n, m, K - 1), (m, 0, K - 1)), (i,), "a sum inside a sum whose index bounds its range",
     lambda: [sum(ARRAYS["a"][r, p] * ARRAYS["v"][p:].sum() for p in range(4)) for r in range(3)]),
    # a cumulative product's gradient: sum_{n >= k} v[n] prod_{k < m <= n} a[i, m], and the
    # mirror image one short of k, read one entry off: sum_{n < k} v[n] prod_{n <= m < k - 1} a[i, m + 1]
    (sp.Sum(v[n] * product(a[i, j], (j, k + 1, n)), (n, k, K - 1)), (i, k),
     "a sum weighted by running products (a linear recurrence)",
     lambda: [[sum(ARRAYS["v"][m] * np.prod(ARRAYS["a"][r, p + 1 : m + 1]) for m in range(p, 4)) for p in range(4)]
              for r in range(3)]),
    (sp.Sum(v[n] * product(a[i, j + 1], (j, n, k - 2)), (n, 0, k - 1)), (i, k),
     "a sum weighted by running products (a linear recurrence)",
     lambda: [[sum(ARRAYS["v"][m] * np.prod(ARRAYS["a"][r, m + 1 : p]) for m in range(p)) for p in range(4)]
              for r in range(3)]),
    # a decay (1/2)**(k - n), an exponential moving average's: the same recurrence, by 1/2
    (sp.Sum(sp.Rational(1, 2) ** (k - n) * v[n], (n, 0, k)), (k,),
     "a sum weighted by running products (a linear recurrence)",
     lambda: [sum(0.5 ** (p - m) * ARRAYS["v"][m] for m in range(p + 1)) for p in range(4)]),
    # causal: a range ending at k, over a summand that reads k too: k's whole axis, masked
    (sp.Sum(sp.sin(v[k] * v[n]), (n, 0, k)), (k,), "a sum up to an index its summand reads, masked (triangular)",
     lambda: [sum(np.sin(ARRAYS["v"][p] * ARRAYS["v"][m]) for m in range(p + 1)) for p in range(4)]),
    (sp.Sum(indicator(n <= k) * v[n], (n, 0, K - 1)), (k,),
     "a sum masked up to (from) an index its summand does not read: cumulative", lambda: np.cumsum(ARRAYS["v"])),
    # sum_{n >= k, j} b[n, j] * sin(b[k, j]): the sum over n first, a reverse cumulative sum
    (sp.Sum(b[n, j] * sp.sin(b[k, j]), (n, k, K - 1), (j, 0, N - 1)), (k,),
     "a sum over an index whose range ends at another: that index first",
     lambda: [sum(np.sin(ARRAYS["b"][p, q]) * ARRAYS["b"][p:, q].sum() for q in range(5)) for p in range(4)]),
]


@pytest.mark.parametrize("expr, axes, rule, reference", CASES, ids=[c[2] for c in CASES])
def test_each_rule_lowers_what_it_is_for(used, expr, axes, rule, reference):
    lowering, result = lowered(expr, axes)
    assert outermost(used) == rule, used
    assert lowering.largest_rank <= max(len(axes), 2)  # no array over every index in play
    np.testing.assert_allclose(run(lowering, result), reference(), rtol=1e-12)


def test_every_rule_is_exercised_by_a_case_or_by_the_index_map_tests():
    covered = {case[2] for case in CASES}
    elsewhere = {  # printed with the generated modules' runtime helpers: tests/test_index_maps.py and others
        "a number, attribute or size", "an entry filled outside the tensor", "a sum, by the sum rules below",
        "a mask of indices", "a stack of the pieces at each position",
        "(an error: indices that are not axes here)", "a convolution kernel", "a scatter-add at mapped positions",
        "a scatter-add at positions other axes name",  # tests/test_row_maps.py
        "a value over an axis, read at positions", "a product, maximum or minimum over the entries ids select",  # tests/test_segments.py, test_conditional_product.py
        "a max-pooling gradient kernel", "the first entry attaining a maximum",  # tests/test_pooling.py
    }
    names = [rule.name for rule in rules.EXPRESSION_RULES + rules.SUM_RULES]
    assert len(set(names)) == len(names)
    assert set(names) == covered | elsewhere


def test_a_rule_returning_none_passes_the_expression_on(used, monkeypatch):
    declined = rules.Rule("declines everything", lambda expr: True, lambda lowering, expr, axes: None)
    monkeypatch.setattr(rules, "SUM_RULES", (declined,) + rules.SUM_RULES)
    lowering, result = lowered(sp.Sum(a[i, k] * b[k, j], (k, 0, K - 1)), (i, j))
    assert outermost(used) == "a matmul or einsum"
    assert [type(s.value) for s in lowering.body] == [ir.MatMul]


def test_a_sum_over_an_index_that_is_not_an_axis_names_the_op_and_its_line():
    with pytest.raises(LoweringError, match=r"lowering failed for Example \(ops/example.py:3\): .* depends on indices outside"):
        lowered(sp.Sum(a[i, k] * b[k, j], (k, 0, K - 1)), (i,))


def test_the_matmul_rule_sets_transpose_flags_instead_of_transposing():
    lowering, _ = lowered(sp.Sum(a[k, i] * b[j, k], (k, 0, K - 1)), (i, j))
    (statement,) = lowering.body
    assert statement.value == ir.MatMul("a", "b", True, True, False)


def test_a_temporary_computed_again_reads_the_first_and_one_in_a_recomputation_does_not():
    """`epsilon + variance` per output of a second order: computed once; a stage's value
    again (a cumulative product a second order recomputes) reads the stage. A repeat of a
    temporary computed only when a stage was not passed, or of one whose operand is assigned
    again in between, stays: the first may not have run, or be of other values."""
    from symgrad.lowering.shared import idle_temporaries_dropped

    e, v, x = sp.symbols("e v x")
    t = sp.symbols("t0:8")
    Assign, Elementwise = ir.Assign, ir.Elementwise
    body = [
        Assign("t0", Elementwise(e + v)),
        Assign("t1", Elementwise(x * t[0])),
        Assign("t2", Elementwise(e + v)),
        Assign("t3", Elementwise(x * t[2])),  # a repeat once t2 reads t0
        Assign("out", Elementwise(t[1] + t[3])),
    ]
    kept = idle_temporaries_dropped(body, "t", 0)
    assert [str(s) for s in kept] == ["t0 = e + v", "t1 = t0*x", "out = 2*t1"]

    recomputed = [
        ir.Recompute(("s",), (Assign("t0", Elementwise(e + v)), Assign("s", Elementwise(t[0] * 2)))),
        Assign("t1", Elementwise(e + v)),
        Assign("out", Elementwise(t[1] * sp.Symbol("s"))),
    ]
    assert [s.target for s in idle_temporaries_dropped(recomputed, "t", 0)[1:]] == ["t1", "out"]
    stage_again = [recomputed[0], Assign("t1", Elementwise(t[0] * 2)), recomputed[2]]  # s, passed or not
    assert [str(s) for s in idle_temporaries_dropped(stage_again, "t", 0)[1:]] == ["out = s**2"]

    reassigned = [
        Assign("t0", Elementwise(e + x)),
        Assign("x", Elementwise(x * 2)),
        Assign("t1", Elementwise(e + x)),
        Assign("out", Elementwise(t[0] * t[1])),
    ]
    assert [s.target for s in idle_temporaries_dropped(reassigned, "t", 0)] == ["t0", "x", "t1", "out"]


def test_a_temporary_nothing_reads_goes_inside_a_recomputation_too():
    """A stage's recomputation kept a transpose only an unread product read (a batch norm's
    second order): both go, the stage and what it reads stay."""
    from symgrad.lowering.shared import idle_temporaries_dropped

    x, s = sp.symbols("x s")
    t = sp.symbols("t0:4")
    body = [
        ir.Recompute(("s",), (ir.Assign("t0", ir.Elementwise(x * 2)), ir.Assign("t1", ir.Elementwise(t[0] + 1)),
                              ir.Assign("t2", ir.Elementwise(x * 3)), ir.Assign("s", ir.Elementwise(t[2] - 1)))),
        ir.Assign("out", ir.Elementwise(s * x)),
    ]
    kept = idle_temporaries_dropped(body, "t", 0)
    assert [str(a) for a in kept[0].body] == ["t0 = 3*x", "s = t0 - 1"] and str(kept[1]) == "out = s*x"


def test_a_reduction_of_a_transpose_reduces_the_array_itself():
    """`np.sum(np.transpose(x, (3, 0, 1, 2)), axis=(-3, -2, -1))` (a batch norm's gradient) is
    `np.sum(x, axis=(-4, -3, -2))`: the transpose goes, and a sum the body already has is read.
    Where the axes kept would come out in another order, or the transpose is read elsewhere,
    it stays. Checked by numpy on an array."""
    from symgrad.lowering.shared import idle_temporaries_dropped

    x, t = sp.Symbol("x"), sp.symbols("t0:4")
    body = [
        ir.Assign("t0", ir.Reduce("sum", "x", (-4, -3, -2))),
        ir.Assign("t1", ir.Transpose("x", (3, 0, 1, 2))),
        ir.Assign("t2", ir.Reduce("sum", "t1", (-3, -2, -1))),
        ir.Assign("out", ir.Elementwise(t[0] * t[2])),
    ]
    assert [str(s) for s in idle_temporaries_dropped(body, "t", 0)] == [
        "t0 = reduce_sum(x, axes=(-4, -3, -2))", "out = t0**2"]
    a = np.random.default_rng(0).normal(size=(2, 3, 4, 5))
    # (perm, axes reduced, whether the axes kept stay in order)
    for perm, axes, in_order in (((3, 0, 1, 2), (-3, -2, -1), True), ((1, 0, 2, 3), (-4, -3), True),
                                 ((2, 1, 0, 3), (-2,), False), ((1, 2, 0, 3), (-4, -1), False)):
        swapped = [ir.Assign("t0", ir.Transpose("x", perm)), ir.Assign("out", ir.Reduce("sum", "t0", axes))]
        kept = idle_temporaries_dropped(swapped, "t", 0)
        assert (kept[-1].value.x == "x") == in_order and len(kept) == (1 if in_order else 2)
        if in_order:  # the same sums
            np.testing.assert_allclose(a.sum(axis=kept[-1].value.axes), a.transpose(perm).sum(axis=axes))
    read_too = [ir.Assign("t0", ir.Transpose("x", (1, 0))), ir.Assign("t1", ir.Reduce("sum", "t0", (-1,))),
                ir.Assign("out", ir.Elementwise(t[0] + t[1]))]
    assert [s.target for s in idle_temporaries_dropped(read_too, "t", 0)] == ["t0", "t1", "out"]


def test_a_repeat_whose_reading_would_cancel_a_term_stays():
    """`out = (t3 - sum1) / s` with t3 the same sum as the stage sum1 (a sum of centred
    values): read through, SymPy makes it 0, a number with no batch shape. It stays."""
    from symgrad.lowering.shared import idle_temporaries_dropped

    x, s, sum1, t3 = sp.symbols("x s sum1 t3")
    body = [
        ir.Assign("sum1", ir.Elementwise(x * 2)),
        ir.Assign("t3", ir.Elementwise(x * 2)),
        ir.Assign("out", ir.Elementwise((t3 - sum1) / s)),
    ]
    assert [str(a) for a in idle_temporaries_dropped(body, "t", 0)][-1] == "out = (-sum1 + t0)/s"
