"""Costly subexpressions a branch's statements repeat, computed once (`lowering.sharing`)."""

from __future__ import annotations

import numpy as np
import sympy as sp

from symgrad.backends.numpy.printer import NumpyPrinter
from symgrad.ir import Assign, Elementwise, Reduce, SumToShape
from symgrad.lowering.sharing import share_costly

x, g, h, t0 = sp.symbols("x g h t0", real=True)


def printed(body) -> list[str]:
    printer = NumpyPrinter()
    return [f"{s.target} = {printer._print(s.value)}" for s in body]


def run(body, **values) -> dict:
    scope = {"np": np, **values}
    for line in printed(body):
        exec(line, scope)
    return scope


def test_a_function_read_by_two_statements_is_computed_once():
    body = [
        Assign("grad_grad", Elementwise(g * sp.tanh(x + h) ** 2 - g)),
        Assign("grad_x", Elementwise(h * sp.tanh(x + h) + x)),
    ]
    shared = share_costly(body, "t")
    assert printed(shared) == [
        "t0 = np.tanh(h + x)",
        "grad_grad = g*t0**2 - g",
        "grad_x = h*t0 + x",
    ]
    values = {"x": np.array([0.3, -1.2]), "g": np.array([2.0, 0.5]), "h": np.array([0.1, 0.7])}
    before, after = run(body, **values), run(shared, **values)
    for name in ("grad_grad", "grad_x"):
        np.testing.assert_array_equal(before[name], after[name])


def test_cheap_subexpressions_stay_in_place_and_forms_are_kept():
    body = [Assign("a", Elementwise(g * (-x + h))), Assign("b", Elementwise(h * (-x + h) + g))]
    assert share_costly(body, "t") == body


def test_a_value_two_statements_compute_whole_is_one_variable():
    """`grad_x = T; grad_x = sum_to_shape(grad_x); t0 = T` keeps T in `t0`, computed first."""
    value = g * sp.exp(x)
    body = [
        Assign("grad_x", Elementwise(value)),
        Assign("grad_x", SumToShape(Elementwise(sp.Symbol("grad_x")), "x")),
        Assign("t0", Elementwise(value)),
        Assign("grad_bias", Reduce("sum", "t0", ())),
    ]
    shared = share_costly(body, "t")
    assert [str(s) for s in shared[:2]] == ["t0 = g*exp(x)", "grad_x = t0"]
    assert len(shared) == 4


def test_nothing_is_shared_across_an_assignment_of_what_it_reads():
    body = [
        Assign("a", Elementwise(sp.exp(x) + g)),
        Assign("x", Elementwise(x + 1)),
        Assign("b", Elementwise(sp.exp(x) * g)),
    ]
    assert share_costly(body, "t") == body


def test_a_function_under_a_select_stays_there():
    """A framework differentiating the code again guards a branch's partial function in place."""
    select = sp.Piecewise((sp.log(x), x > 0), (0, True))
    body = [Assign("a", Elementwise(g * select)), Assign("b", Elementwise(h * select))]
    assert share_costly(body, "t") == body
