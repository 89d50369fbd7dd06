"""IR and SymPy expressions -> numpy source (special functions from `scipy.special`)."""

from __future__ import annotations

import math

import sympy as sp
from sympy.printing.numpy import SciPyPrinter

from symgrad import ir
from symgrad.functions import indicator, indicator_equal
from symgrad.backends.printing import SCAN_IDENTITY, ArrayCodeMixin, integer_form, merged_shape, nested as _nested


class NumpyPrinter(ArrayCodeMixin, SciPyPrinter):
    """Prints vectorised numpy code: `np.where` for Piecewise, `scipy.special` for erf & co."""

    target = "numpy"
    where = "numpy.where"
    int_extreme = "numpy.{}"
    sqrt = "numpy.sqrt"
    aliases = {"numpy": "np"}

    def _print_Pi(self, expr):
        return self._module_format("numpy.pi")

    def _print_Piecewise(self, expr):
        """`np.where`; of numbers only (a mask, `where(c, 1, 0)`) in the dtype computed in, as an
        integer array would promote a float32 gradient to float64 (positions stay integers)."""
        if self._integer_context or self.dtype_source is None or not all(v.is_number for v, _ in expr.args):
            return super()._print_Piecewise(expr)
        condition = _mask_condition(expr)  # a count's terms: the condition itself, as 1 and 0
        text = super()._print_Piecewise(expr) if condition is None else self._print_condition(condition)
        return self._typed(text, self.dtype_source)

    def _typed(self, text: str, like: str) -> str:
        """`text`, an array of numbers, in the dtype of the variable `like`."""
        return f"{self._module_format('numpy.asarray')}({text}, {like}.dtype)"

    def _print_Mul(self, expr):
        """A product with masks (`where(c, 1, 0)`, a relu's) as one select of the rest:
        `np.where(c, rest, 0)`, in the dtype of the rest."""
        conditions = [_mask_condition(a) for a in expr.args if _mask_condition(a) is not None]
        rest = [a for a in expr.args if _mask_condition(a) is None]
        if not conditions or not rest or self._integer_context:
            return super()._print_Mul(expr)
        condition = sp.And(*conditions, evaluate=False) if len(conditions) > 1 else conditions[0]
        return f"{self._module_format(self.where)}({self._print_condition(condition)}, {self._print(sp.Mul(*rest))}, 0)"

    def _print_polygamma(self, expr):
        """digamma, and (-1)**(n + 1) n! zeta(n + 1, x) for an order n: both keep float32, which
        `scipy.special.polygamma` does not."""
        order, x = expr.args
        if order == 0:
            return self._call("scipy.special.digamma", x)
        if order.is_Integer and order > 0:
            coefficient = (-1) ** (int(order) + 1) * math.factorial(int(order))
            zeta = self._call("scipy.special.zeta", order + 1, x)
            return zeta if coefficient == 1 else f"({coefficient} * {zeta})"
        return self._call("scipy.special.polygamma", order, x)

    def _print_recomputed_or_reused(self, expr):
        return self._print(expr.reused)  # scipy.special's erf & co. cost many divisions

    def _print_Abs(self, expr):
        return f"{self._module_format('numpy.abs')}({self._print(expr.args[0])})"

    # --- functions SciPyPrinter does not know ---

    def _call(self, name: str, *args) -> str:
        return f"{self._module_format(name)}({', '.join(self._print(a) for a in args)})"

    def _print_erfinv(self, expr):
        return self._call("scipy.special.erfinv", *expr.args)

    def _print_zeta(self, expr):
        return self._call("scipy.special.zeta", *expr.args)

    def _print_polylog(self, expr):
        order, z = expr.args
        if order == 1:  # what the derivative of order 2 gives, a negation as one factor
            return f"(-{self._print(sp.log(1 - z))})"
        if order != 2:
            return self._print_not_supported(expr)
        return self._call("scipy.special.spence", 1 - z)  # Li2(z) = spence(1 - z)

    def _print_rint(self, expr):
        return self._call("numpy.rint", *expr.args)

    def _print_dawsn(self, expr):
        return self._call("scipy.special.dawsn", *expr.args)

    def _print_nextafter(self, expr):
        return self._call("numpy.nextafter", *expr.args)

    def _print_scaled_besseli(self, expr):
        return self._call("scipy.special.ive", *expr.args)

    def _print_sigmoid(self, expr):
        self._module_format("scipy.special.expit")  # imported: the helper calls it for real x
        return f"_sigmoid({self._print(expr.args[0])})"

    def _print_softplus(self, expr):
        return f"{self._module_format('numpy.logaddexp')}(0, {self._print(expr.args[0])})"

    # --- IR values ---

    def _print_Elementwise(self, value: ir.Elementwise):
        return self._print(value.expr)

    def _print_FusedCall(self, value: ir.FusedCall):
        return self._print(value.value)  # numpy has no fused kernels

    def _print_Conj(self, value: ir.Conj):
        return f"_conj({value.x})"

    def _print_modulus(self, expr):
        return self._print(sp.Abs(expr.args[0]))

    def _print_conjugate(self, expr):
        return f"_conj({self._print(expr.args[0])})"

    def _print_MatMul(self, value: ir.MatMul):
        a = self._matrix_transpose(value.a, value.batched) if value.transpose_a else value.a
        b = self._matrix_transpose(value.b, value.batched) if value.transpose_b else value.b
        return f"{a} @ {b}"

    def _matrix_transpose(self, x: str, batched: bool) -> str:
        return f"{self._module_format('numpy.swapaxes')}({x}, -1, -2)" if batched else f"{x}.T"

    def _print_Einsum(self, value: ir.Einsum):
        operands = ", ".join(value.operands)
        return f'{self._module_format("numpy.einsum")}("{value.spec}", {operands}, optimize=True)'

    def _print_Reduce(self, value: ir.Reduce):
        function = self._module_format(f"numpy.{value.kind}")
        keepdims = ", keepdims=True" if value.keepdims else ""
        if value.batch_before is not None:
            leading = f"tuple(range({self._rank_of(value.x)} - {value.batch_before}))"
            axes = f"{leading} + {value.axes}" if value.axes else leading
            return f"{function}({value.x}, axis={axes}{keepdims})"
        if not value.axes:
            return f"{function}({self._print_operand(value.x)}{keepdims})"
        axes = value.axes[0] if len(value.axes) == 1 else value.axes
        return f"{function}({self._print_operand(value.x)}, axis={axes}{keepdims})"

    def _print_Stack(self, value: ir.Stack):
        return f"{self._module_format('numpy.stack')}([{', '.join(value.values)}], axis={value.axis})"

    def _print_Squeeze(self, value: ir.Squeeze):
        axes = value.axes[0] if len(value.axes) == 1 else value.axes
        return f"{self._module_format('numpy.squeeze')}({value.x}, axis={axes})"

    def _shape_of(self, x: str) -> str:
        """The shape of array `x`, a tuple of Python ints."""
        return f"{self._module_format('numpy.shape')}({x})"

    def _rank_of(self, x: str) -> str:
        """The number of axes of array `x`, a Python int."""
        return f"{self._module_format('numpy.ndim')}({x})"

    def _print_DimSize(self, value: ir.DimSize):
        return f"{self._shape_of(value.x)}[{value.axis}]"

    def _print_Eye(self, value: ir.Eye):
        size = f"{self._shape_of(value.x)}[{value.axis}]"
        return f"{self._module_format('numpy.eye')}({size}, dtype={self._module_format('numpy.result_type')}({value.x}))"

    def _print_DiagPart(self, value: ir.DiagPart):
        return f"{self._module_format('numpy.diagonal')}({value.x}, axis1=-2, axis2=-1)"

    def _print_NegativeAxis(self, value: ir.NegativeAxis):
        rank = self._rank_of(value.x)
        rank = f"({rank} + 1)" if value.inserted else rank
        scalar = self._is_scalar(value.axis)
        return f"{value.axis} - {rank} if {scalar} and {value.axis} >= 0 else {value.axis}"

    def _print_Constant(self, value: ir.Constant):
        dtype = f"{self._module_format('numpy.result_type')}({value.like})"
        return f"{self._module_format('numpy.asarray')}({_nested(value.values)}, dtype={dtype})"

    def _print_AsValues(self, value: ir.AsValues):
        dtype = f"{self._module_format('numpy.result_type')}({value.like})"
        return f"{self._module_format('numpy.asarray')}({value.x}, dtype={dtype})"

    def _print_Iota(self, value: ir.Iota):
        return f"{self._module_format('numpy.arange')}({self._shape_of(value.x)}[{value.axis}])"

    def _print_Expand(self, value: ir.Expand):
        return f"{value.x}[..., {', '.join(value.subscript)}]"

    def _print_BroadcastTo(self, value: ir.BroadcastTo):
        shape = self._shape_of(value.like)
        return f"{self._module_format('numpy.broadcast_to')}({self._print(value.value)}, {shape})"

    def _print_BroadcastToShape(self, value: ir.BroadcastToShape):
        return f"{self._module_format('numpy.broadcast_to')}({self._print(value.value)}, tuple({value.shape}))"

    def _print_Scan(self, value: ir.Scan):
        """numpy has no exclusive or reverse cumsum: flip, and shift in the identity."""
        if value.kind == "linear":
            return self._print_linear_scan(value)
        x = self._print_operand(value.x)
        flip = self._module_format("numpy.flip")
        if value.reverse:
            x = f"{flip}({x}, axis={value.axis})"
        text = f"{self._scan_function(value.kind)}({x}, axis={value.axis})"
        if value.exclusive:
            text = f"_shift_right({text}, axis={value.axis}, fill={SCAN_IDENTITY[value.kind]})"
        return f"{flip}({text}, axis={value.axis})" if value.reverse else text

    def _scan_function(self, kind: str) -> str:
        if kind == "logsumexp":  # log-space: no exp of an entry overflows
            return f"{self._module_format('numpy.logaddexp')}.accumulate"
        return self._module_format(f"numpy.cum{kind}")

    def _print_Transpose(self, value: ir.Transpose):
        if value.perm == (1, 0):
            return f"{value.x}.T"
        return f"{self._module_format('numpy.transpose')}({value.x}, {value.perm})"

    def _print_SumToShape(self, value: ir.SumToShape):
        shape = self._shape_of(value.like)
        product = summed_product(value.value.expr)
        if product is None:
            return f"_sum_to_shape({self._print(value.value)}, {shape})"
        sign, factors = product
        call = f"_sum_product_to_shape(({', '.join(map(self._print, factors))},), {shape})"
        return f"-{call}" if sign < 0 else call

    def _print_mask(self, expr):  # int8: a float32 product stays float32 (np.where's 1 is int64)
        condition = self._print_condition(expr.args[0])
        return f"{self._module_format('numpy.asarray')}({condition}, dtype={self._module_format('numpy.int8')})"

    def _print_python_float(self, expr):
        return f"float({self._print(expr.args[0])})"

    def _print_exact_div(self, expr):
        m, c = self._division_operands(*expr.args)
        return f"{self._module_format('numpy.where')}({m} % {c} == 0, {m} // {c}, -1)"

    def _print_IntSize(self, value: ir.IntSize):
        return f"{self._shape_of(value.x)}[{value.axis}]"

    def _print_Arange(self, value: ir.Arange):
        return f"{self._module_format('numpy.arange')}({value.n})"

    def _print_Gather(self, value: ir.Gather):
        fill = f", fill={self._print(value.fill)}" if value.fill != 0 else ""
        return f"_gather({value.x}, {value.positions}, {value.axis}{fill})"

    def _print_Flip(self, value: ir.Flip):  # the axis positional: torch's is named `dims`
        return f"{self._module_format('numpy.flip')}({value.x}, ({value.axis},))"

    def _print_ScatterAdd(self, value: ir.ScatterAdd):
        if value.kind in ("max", "min"):  # a segment's maximum or minimum
            return f'_scatter_extremum({value.values}, {value.positions}, {value.trailing}, {value.size}, "{value.kind}")'
        if value.kind == "prod":  # a segment's product
            return f"_scatter_product({value.values}, {value.positions}, {value.trailing}, {value.size})"
        return f"_scatter_add({value.values}, {value.positions}, {value.trailing}, {value.size})"

    def _print_NegativeAxes(self, value: ir.NegativeAxes):
        rank = self._rank_of(value.x)
        return f"tuple(sorted(int(a) - {rank} if a >= 0 else int(a) for a in {self._ravelled(value.axes)}))"

    def _print_AsTuple(self, value: ir.AsTuple):
        return f"tuple(int(a) for a in {self._ravelled(value.x)})"

    def _is_scalar(self, x: str) -> str:
        """Whether attribute `x` is one number, not a sequence of them."""
        return f"{self._rank_of(x)} == 0"

    def _ravelled(self, x: str) -> str:
        """The numbers of attribute `x` (a number or a sequence of them), in order."""
        return f"{self._module_format('numpy.ravel')}({x})"

    def _print_IntArray(self, value: ir.IntArray):
        return f"{self._module_format('numpy.asarray')}({value.x}, dtype={self._module_format('numpy.int64')})"

    def _print_Length(self, value: ir.Length):
        return f"len({value.x})"

    def _print_Rank(self, value: ir.Rank):
        if value.axis is not None:
            return f"{self._shape_of(value.x)}[{value.axis}]"
        return self._rank_of(value.x)

    def _print_ZerosLike(self, value: ir.ZerosLike):
        return f"{self._module_format('numpy.zeros_like')}({value.like})"

    def _print_MergeAxes(self, value: ir.MergeAxes):
        x = self._print_operand(value.x)
        if value.broadcast:
            sizes = f"({', '.join(value.sizes)}{',' if len(value.sizes) == 1 else ''})"
            if value.leading:
                sizes = f"{self._shape_of(x)}[:{-len(value.sizes)}] + {sizes}"
            x = f"{self._module_format('numpy.broadcast_to')}({x}, {sizes})"
        shape = merged_shape(value.sizes, value.groups)
        shape = f"({', '.join(shape)}{',' if len(shape) == 1 else ''})"
        if value.leading:
            shape = f"{self._shape_of(x)}[:{-len(value.sizes)}] + {shape}"
        return f"{self._module_format('numpy.reshape')}({x}, {shape})"

    def _print_SplitAxis(self, value: ir.SplitAxis):
        shape = self._shape_of(value.x)
        tail = f" + {shape}[{value.axis + 1}:]" if value.axis != -1 else ""
        sizes = ", ".join((*value.outer, "-1", *value.inner))
        return f"{self._module_format('numpy.reshape')}({value.x}, {shape}[:{value.axis}] + ({sizes}){tail})"

    def _print_Convolution(self, value: ir.Convolution):
        return self._kernel_call(f"_{value.kind}", value, ("strides", "dilations", "pads", "sizes"))

    def _print_MaxPoolBackprop(self, value: ir.MaxPoolBackprop):
        return self._kernel_call("_max_pool_backprop", value, ("window", "strides", "pads", "sizes"))

    def _kernel_call(self, helper: str, value, geometry: tuple[str, ...]) -> str:
        """`helper(operands, name=(ints), ...)` for each field of `value` named in `geometry`."""
        keywords = ", ".join(f"{name}={self._int_tuple(getattr(value, name))}" for name in geometry)
        return f"{helper}({', '.join(value.operands)}, {keywords})"

    def _int_tuple(self, exprs) -> str:
        return "(" + ", ".join(self._print(integer_form(e)) for e in exprs) + ("," if len(exprs) == 1 else "") + ")"

    def _print_axis_size(self, expr):
        x, axis = expr.args
        return f"{self._shape_of(x)}[{axis}]"


def summed_product(expr: sp.Expr) -> tuple[int, tuple[sp.Symbol, ...]] | None:
    """(sign, variables) when `expr` is a product of two or more variables, up to its sign:
    summed to a shape as one einsum, so that the full-size product is never written."""
    coeff, rest = expr.as_coeff_Mul()
    factors = sp.Mul.make_args(rest)
    if coeff not in (1, -1) or len(factors) < 2 or not all(isinstance(f, sp.Symbol) for f in factors):
        return None
    return int(coeff), factors


def _mask_condition(expr):
    """c, for a mask (1 where c holds, else 0: `Piecewise((1, c), (0, True))`, an `indicator`);
    else None."""
    if isinstance(expr, (indicator, indicator_equal)):
        expr = expr.as_piecewise()
    if isinstance(expr, sp.Piecewise) and len(expr.args) == 2 and expr.args[0][0] == 1 and expr.args[1] == (0, True):
        return expr.args[0][1]
    return None
