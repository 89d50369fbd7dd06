"""What the JAX and PyTorch printers share: numpy's printer, with numpy's functions mapped to
the framework's namesakes, and attribute arithmetic kept in numpy.

Both frameworks follow numpy's API closely, so `NumpyPrinter` serves once its module names
are mapped (`modules`, and `renames` for the functions whose names differ). What else they
share: attribute and shape arithmetic (axes, sizes, lists of ints) stays in numpy, computed
in Python while a function runs or is traced instead of staged into it, so that a size is a
number where `arange` and slicing need one; selects are guarded, as the gradient code is
differentiated again; a special function the framework lacks is a lowering error naming it.
"""

from __future__ import annotations

import contextlib

import sympy as sp

from symgrad import ir
from symgrad.guards import guarded
from symgrad.backends.numpy.printer import NumpyPrinter

# values computed from shapes and attributes alone (static under `jit`, Python numbers in torch)
STATIC_VALUES = (ir.DimSize, ir.IntSize, ir.Rank, ir.Length, ir.AsTuple, ir.NegativeAxis, ir.NegativeAxes)


class NamesakePrinter(NumpyPrinter):
    """numpy's printer for a framework with numpy's API under other module names."""

    modules: dict[str, str] = {}  # numpy's module -> the framework's namesake
    renames: dict[str, str] = {}  # a numpy function -> the framework's, where names differ
    missing: frozenset[str] = frozenset()  # numpy or scipy.special functions it lacks
    guards_branches = True  # the framework differentiates the gradient code again

    def __init__(self, settings=None):
        super().__init__(settings)
        self._static = False  # printing attribute arithmetic: numpy, not the framework
        self._static_names: set[str] = set()  # variables holding attributes, sizes, ranks

    def begin_function(self, op) -> None:
        self._static_names = {name for name, _ in op.enumerated_attrs + op.numeric_attrs}

    def assigned(self, target: str, value) -> None:
        """Track which variables are static (known before the code runs): a size computed
        from them stays a number."""
        if (
            isinstance(value, STATIC_VALUES)
            or (isinstance(value, (ir.IndexArith, ir.Elementwise)) and self._is_static(value.expr))
            or (isinstance(value, ir.IntArray) and value.x in self._static_names)
        ):
            self._static_names.add(target)
        else:
            self._static_names.discard(target)

    def _is_static(self, expr) -> bool:
        return all(str(s).split("[")[0] in self._static_names for s in expr.free_symbols)

    def _print_sigmoid(self, expr):  # the framework's expit takes complex inputs
        return self._call("scipy.special.expit", *expr.args)

    def _module_format(self, fqn, register=True):
        if not self._static:
            if fqn in self.missing:
                name = fqn.rsplit(".", 1)[1]
                self._not_supported.add(sp.Symbol(f"{fqn} ({self.framework} has no {name})"))
            fqn = self.renames.get(fqn, fqn)
            for module, namesake in self.modules.items():
                if fqn.startswith(module + "."):
                    fqn = namesake + fqn[len(module) :]
                    break
        return super()._module_format(fqn, register)

    def print_static(self, expr) -> str:
        """`expr`, arithmetic of sizes and attributes, as numpy computes it in Python."""
        with self._attribute_arithmetic():
            return self.doprint(expr)

    @contextlib.contextmanager
    def _attribute_arithmetic(self):
        self._static, before = True, self._static
        try:
            yield
        finally:
            self._static = before

    def _print_safe_where(self, expr):
        x, mask = expr.args
        if self._is_static(x):  # an attribute: a number, without a gradient to keep finite
            return self._print(x)
        return f"{self._module_format(self.where)}({self._print_condition(mask)}, 1, {self._print(x)})"

    def _print_besseli(self, expr):
        """Orders 0 and 1 by the runtime's `_bessel_i0` and `_bessel_i1`, from the framework's
        exponentially scaled functions (its i0 and i1 overflow where I is finite); order 2 by
        the recurrence."""
        order, x = expr.args
        if order in (0, 1):
            self._module_format(f"scipy.special.i{order}e")  # what the helper calls: imported
            return f"_bessel_i{order}({self._print(x)})"
        return self._print_bessel_of_order_two(expr)

    def _print_scaled_besseli(self, expr):
        order, x = expr.args
        if order in (0, 1):
            return self._call(f"scipy.special.i{order}e", x)
        return self._print_bessel_of_order_two(expr)

    # --- IR values: attribute arithmetic in numpy ---

    def _print_SumToShape(self, value: ir.SumToShape):
        """Always the full product, summed (the framework fuses or allocates it once)."""
        return f"_sum_to_shape({self._print(value.value)}, {self._static_call('numpy.shape', value.like)})"

    def _static_call(self, name: str, *args: str) -> str:
        with self._attribute_arithmetic():
            return f"{self._module_format(name)}({', '.join(args)})"

    def _print_IndexArith(self, value: ir.IndexArith):
        if not self._is_static(value.expr):
            return super()._print_IndexArith(value)
        with self._attribute_arithmetic():
            return super()._print_IndexArith(value)

    def _print_Piecewise(self, expr):
        """A select of tensors, each branch computed on inputs made safe where it is not taken
        (`guarded`: the double where), as the framework differentiates it again; a select
        among attribute values (a size given as -1: the rest) stays in numpy, or is a Python
        conditional among numbers (a range given as attributes: PyTorch's where takes tensors)."""
        if self._selects_numbers(expr):
            return self._conditional(expr)
        if not self._integer_context:
            return super()._print_Piecewise(guarded(expr) if self.guards_branches else expr)
        if self._static or not self._is_static(expr):
            return super()._print_Piecewise(expr)
        with self._attribute_arithmetic():
            return super()._print_Piecewise(expr)

    def _print_SafePiecewise(self, expr):
        return self._conditional(expr) if self._selects_numbers(expr) else super()._print_SafePiecewise(expr)

    def _selects_numbers(self, expr) -> bool:
        """Whether `expr`, a select outside integer arithmetic, reads attributes alone."""
        return not self._integer_context and bool(expr.free_symbols) and self._is_static(expr)

    def _conditional(self, expr) -> str:
        """`(a if c else (b if d else e))`, each condition a Python bool."""
        *branches, (last, _) = expr.args
        text = self._print(last)
        with self._attribute_arithmetic():
            for value, condition in reversed(branches):
                text = f"({self._print(value)} if {self._python_condition(condition)} else {text})"
        return text

    def _python_condition(self, condition) -> str:
        """A condition on numbers as Python: `not`, `and`, `or` (`~True` is -2, which is true)."""
        if isinstance(condition, sp.Not):
            return f"(not {self._python_condition(condition.args[0])})"
        if isinstance(condition, (sp.And, sp.Or)):
            word = " and " if isinstance(condition, sp.And) else " or "
            return "(" + word.join(self._python_condition(a) for a in condition.args) + ")"
        return f"({self._print_condition(condition)})"

    def _print_IntegerFunctionBase(self, expr):
        """A call of the module's function of attributes and sizes, computed in numpy; of
        arrays of positions, a call of its definition in the framework (`array_definition`)."""
        if self._static or self._is_static(expr):
            with self._attribute_arithmetic():
                return super()._print_IntegerFunctionBase(expr)
        self.array_functions[type(expr).__name__] = type(expr)
        return f"_{type(expr).__name__}({', '.join(self._print(a) for a in expr.args)})"

    def integer_definition(self, template) -> str:
        with self._attribute_arithmetic():
            return super().integer_definition(template)

    def array_definition(self, template) -> str:
        """The definition in the framework, on arrays: its selects are `where`s."""
        return self._print(ir.IndexArith(template))  # of no static name: in the framework

    def _print_NegativeAxis(self, value: ir.NegativeAxis):
        with self._attribute_arithmetic():
            return super()._print_NegativeAxis(value)

    def _print_NegativeAxes(self, value: ir.NegativeAxes):
        with self._attribute_arithmetic():
            return super()._print_NegativeAxes(value)

    def _print_AsTuple(self, value: ir.AsTuple):
        with self._attribute_arithmetic():
            return super()._print_AsTuple(value)

    def _print_IntArray(self, value: ir.IntArray):
        if value.x not in self._static_names:  # positions read from a tensor (GatherNd's)
            return super()._print_IntArray(value)
        with self._attribute_arithmetic():
            return super()._print_IntArray(value)

    def _print_python_float(self, expr):
        with self._attribute_arithmetic():
            return super()._print_python_float(expr)

    def _int_tuple(self, exprs) -> str:
        """A kernel's geometry (strides, pads, sizes): from shapes and attributes, static."""
        with self._attribute_arithmetic():
            return super()._int_tuple(exprs)
