"""Printers: what each backend's printed code calls, typing of where-branches, constants."""

from __future__ import annotations

import dataclasses
import inspect
import types

import pytest
import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

from symgrad import ir, render
from symgrad.errors import LoweringError
from symgrad.backends.numpy.printer import NumpyPrinter
from symgrad.backends.tensorflow.printer import TensorflowPrinter
from symgrad.targets import REGISTRY, TARGETS

x = sp.Symbol("x", real=True)
FUNCTIONS = [
    sp.exp,
    sp.log,
    sp.sin,
    sp.cos,
    sp.tan,
    sp.asin,
    sp.acos,
    sp.atan,
    sp.sinh,
    sp.cosh,
    sp.tanh,
    sp.asinh,
    sp.acosh,
    sp.atanh,
    sp.erf,
    sp.erfc,
    sp.Abs,
    sp.sign,
    expm1,
    log1p,
]


@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_tensorflow_functions_are_tf_math(function):
    # PythonCodePrinter prints these as `math.<name>`, which fails on tensors
    assert TensorflowPrinter()._print(function(x)).startswith("tf.math.")


def test_tensorflow_reports_functions_it_lacks():
    printer = TensorflowPrinter()
    printer._print(sp.gamma(x))  # in Python's math module, not in the TensorFlow mapping
    assert printer._not_supported == {sp.gamma(x)}


def test_tensorflow_where_branch_numbers_take_the_dtype(tf):
    # a Python number in tf.where becomes an int32 tensor in a graph, clashing with float64
    printer = TensorflowPrinter()
    printer.dtype_source = "grad"
    text = printer._print(sp.Piecewise((0, x > 0), (sp.Rational(1, 2), x < -1), (x, True)))
    selected = tf.function(eval(f"lambda x, grad: {text}", {"tf": tf}))
    values = tf.constant([1.0, -2.0, -0.5], dtype=tf.float64)
    # only grad's dtype is taken, not its shape (it may be broadcast or reduced differently)
    result = selected(values, tf.ones((5,), dtype=tf.float64))
    assert result.dtype == tf.float64
    assert result.numpy().tolist() == [0.0, 0.5, -0.5]


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
def test_tensorflow_indicator_is_a_cast_of_its_condition(tf, dtype):
    """1 where a condition holds, else 0 (a max-pool's first-maximum mask): the condition cast
    to the computation's dtype, as one writes it, in a graph too; not a where of two typed
    constants, which has no branch to guard."""
    y = sp.Symbol("y", real=True)
    printer = TensorflowPrinter()
    printer.dtype_source = "grad"
    text = printer._print(sp.Piecewise((1, sp.Eq(x, y) & (x > 0)), (0, True)))
    assert text == "tf.cast(tf.equal(x, y) & (x > 0), grad.dtype)"
    selected = tf.function(eval(f"lambda x, y, grad: {text}", {"tf": tf}))
    values = tf.constant([1.0, -2.0, 3.0], dtype=tf.float64)
    result = selected(values, tf.constant([1.0, -2.0, 2.0], dtype=tf.float64), tf.ones((1,), dtype=dtype))
    assert result.dtype == dtype and result.numpy().tolist() == [1, 0, 0]


@pytest.mark.parametrize("printer", [NumpyPrinter, TensorflowPrinter], ids=lambda p: p.target)
def test_irrational_constants_fold_to_one_literal(printer):
    assert printer()._print(2 * x / sp.sqrt(sp.pi)) == "1.1283791670955126*x"
    assert printer()._print(x + sp.log(2)) == "x + 0.6931471805599453"


@pytest.mark.parametrize("printer", [NumpyPrinter, TensorflowPrinter])
def test_a_size_scalar_keeps_its_parentheses_inside_a_product(printer):
    """`x * float(a + b)`: TensorFlow prints no `float(...)`, so the sum needs its brackets
    (without them the product was `x * a + b`, a wrong gradient)."""
    from symgrad.functions import python_float

    x, a, b = sp.symbols("x a b")
    text = printer().doprint(x * python_float(a + sp.log(b)))
    assert "(a + " in text and text.index("x") < text.index("(a + ")
    if printer is NumpyPrinter:
        import numpy as np

        assert eval(text, {"np": np, "x": 2.0, "a": 3.0, "b": 1.0}) == 6.0


# IR classes that are not values: statements and the functions and ops they make up
STRUCTURE = {"Assign", "Branch", "Convention", "DeclaredShape", "Formula", "Function", "LinearSecondOrder", "OpCode", "Recompute", "Requested", "Unset"}
IR_VALUES = sorted(
    name for name, cls in inspect.getmembers(ir, inspect.isclass)
    if cls.__module__.startswith(ir.__name__ + ".") and dataclasses.is_dataclass(cls) and name not in STRUCTURE
)


BACKEND_PRINTERS = [REGISTRY[name].backend.PRINTER for name in TARGETS]


@pytest.mark.parametrize("printer", BACKEND_PRINTERS, ids=lambda p: p.target)
def test_every_ir_value_is_printed_by_every_backend(printer):
    missing = [name for name in IR_VALUES if not hasattr(printer, f"_print_{name}")]
    assert not missing and len(IR_VALUES) > 30


@dataclasses.dataclass(frozen=True)
class SomeNewIR:
    x: str


@pytest.mark.parametrize("printer", BACKEND_PRINTERS, ids=lambda p: p.target)
def test_a_value_a_printer_cannot_print_is_a_lowering_error_naming_op_and_class(printer):
    op = types.SimpleNamespace(name="Fresh", location="ops/fresh.py:3")
    with pytest.raises(LoweringError) as raised:
        render.print_statement(ir.Assign("t0", SomeNewIR("a")), printer(), op)
    message = str(raised.value)
    assert f"the {printer.target} printer cannot print SomeNewIR" in message
    assert "Fresh" in message and "ops/fresh.py:3" in message
