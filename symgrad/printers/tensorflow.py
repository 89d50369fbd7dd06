"""IR and SymPy expressions -> TensorFlow source, public `tf.*` API only."""

from __future__ import annotations

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p
from sympy.printing.pycode import PythonCodePrinter

from symgrad import ir
from symgrad.printers.common import ArrayCodeMixin


class TensorflowPrinter(ArrayCodeMixin, PythonCodePrinter):
    """Prints TensorFlow code: `tf.where` for Piecewise, operators where TensorFlow has them.

    Not SymPy's TensorflowPrinter: importing that imports TensorFlow itself, and deriving
    must neither need TensorFlow nor pay for its import.
    """

    target = "TensorFlow"
    where = "tensorflow.where"
    sqrt = "tensorflow.math.sqrt"
    aliases = {"tensorflow": "tf"}
    mapping = {
        **{
            f: f"tensorflow.math.{f.__name__}"
            for f in (sp.exp, sp.log, sp.sin, sp.cos, sp.tan, sp.asin, sp.acos, sp.atan, sp.atan2)
        },
        **{
            f: f"tensorflow.math.{f.__name__}"
            for f in (sp.sinh, sp.cosh, sp.tanh, sp.asinh, sp.acosh, sp.atanh, sp.erf, sp.erfc, sp.sign)
        },
        sp.Abs: "tensorflow.math.abs",
        sp.floor: "tensorflow.math.floor",
        sp.ceiling: "tensorflow.math.ceil",
        sp.loggamma: "tensorflow.math.lgamma",
        sp.Max: "tensorflow.math.maximum",
        sp.Min: "tensorflow.math.minimum",
        sp.conjugate: "tensorflow.math.conj",
        sp.re: "tensorflow.math.real",
        sp.im: "tensorflow.math.imag",
        expm1: "tensorflow.math.expm1",
        log1p: "tensorflow.math.log1p",
    }

    def _print_Function(self, expr):
        name = self.mapping.get(type(expr))
        if name is None:
            return self._print_not_supported(expr)
        args = [self._print(a) for a in expr.args]
        if type(expr) in (sp.Max, sp.Min) and len(args) > 2:
            return self._print(type(expr)(expr.args[0], type(expr)(*expr.args[1:])))
        return f"{self._module_format(name)}({', '.join(args)})"

    _print_Abs = _print_Function
    _print_sign = _print_Function
    _print_Max = _print_Function
    _print_Min = _print_Function
    _print_floor = _print_Function
    _print_ceiling = _print_Function
    _print_conjugate = _print_Function
    _print_re = _print_Function
    _print_im = _print_Function
    _print_atan2 = _print_Function
    _print_expm1 = _print_Function
    _print_log1p = _print_Function
    _print_loggamma = _print_Function

    def _print_Pi(self, expr):
        return repr(float(expr))

    def _print_Exp1(self, expr):
        return repr(float(expr))

    def _print_Equality(self, expr):
        return f"{self._module_format('tensorflow.equal')}({self._print(expr.lhs)}, {self._print(expr.rhs)})"

    def _print_Unequality(self, expr):
        return f"{self._module_format('tensorflow.not_equal')}({self._print(expr.lhs)}, {self._print(expr.rhs)})"

    # --- IR values ---

    def _print_Elementwise(self, value: ir.Elementwise):
        return self._print(value.expr)

    def _print_Conj(self, value: ir.Conj):
        return f"{self._module_format('tensorflow.math.conj')}({value.x})"

    def _print_MatMul(self, value: ir.MatMul):
        flags = "".join(
            f", {flag}=True"
            for flag, on in (("transpose_a", value.transpose_a), ("transpose_b", value.transpose_b))
            if on
        )
        return f"{self._module_format('tensorflow.linalg.matmul')}({value.a}, {value.b}{flags})"

    def _print_Einsum(self, value: ir.Einsum):
        return f'{self._module_format("tensorflow.einsum")}("{value.spec}", {", ".join(value.operands)})'

    def _print_ReduceSum(self, value: ir.ReduceSum):
        return f"{self._module_format('tensorflow.reduce_sum')}({value.x}, axis={list(value.axes)})"

    def _print_Transpose(self, value: ir.Transpose):
        return f"{self._module_format('tensorflow.transpose')}({value.x}, perm={list(value.perm)})"

    def _print_SumToShape(self, value: ir.SumToShape):
        return f"_sum_to_shape({self._print(value.value)}, {value.like})"

    def _print_ZerosLike(self, value: ir.ZerosLike):
        return f"{self._module_format('tensorflow.zeros_like')}({value.like})"
