"""IR and SymPy expressions -> numpy source (special functions from `scipy.special`)."""

from __future__ import annotations

from sympy.printing.numpy import SciPyPrinter

from symgrad import ir
from symgrad.printers.common import ArrayCodeMixin


class NumpyPrinter(ArrayCodeMixin, SciPyPrinter):
    """Prints vectorised numpy code: `np.where` for Piecewise, `scipy.special` for erf & co."""

    target = "numpy"
    where = "numpy.where"
    sqrt = "numpy.sqrt"
    aliases = {"numpy": "np"}

    def _print_Pi(self, expr):
        return self._module_format("numpy.pi")

    def _print_Abs(self, expr):
        return f"{self._module_format('numpy.abs')}({self._print(expr.args[0])})"

    # --- IR values ---

    def _print_Elementwise(self, value: ir.Elementwise):
        return self._print(value.expr)

    def _print_Conj(self, value: ir.Conj):
        return f"_conj({value.x})"

    def _print_MatMul(self, value: ir.MatMul):
        a = f"{value.a}.T" if value.transpose_a else value.a
        b = f"{value.b}.T" if value.transpose_b else value.b
        return f"{a} @ {b}"

    def _print_Einsum(self, value: ir.Einsum):
        operands = ", ".join(value.operands)
        return f'{self._module_format("numpy.einsum")}("{value.spec}", {operands}, optimize=True)'

    def _print_ReduceSum(self, value: ir.ReduceSum):
        return f"{self._module_format('numpy.sum')}({value.x}, axis={value.axes})"

    def _print_Transpose(self, value: ir.Transpose):
        if value.perm == (1, 0):
            return f"{value.x}.T"
        return f"{self._module_format('numpy.transpose')}({value.x}, {value.perm})"

    def _print_SumToShape(self, value: ir.SumToShape):
        return f"_sum_to_shape({self._print(value.value)}, {self._module_format('numpy.shape')}({value.like}))"

    def _print_ZerosLike(self, value: ir.ZerosLike):
        return f"{self._module_format('numpy.zeros_like')}({value.like})"
