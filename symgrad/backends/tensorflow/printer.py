"""IR and SymPy expressions -> TensorFlow source, public `tf.*` API only."""

from __future__ import annotations

import sympy as sp
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.pycode import PythonCodePrinter, _known_functions_math

from symgrad import ir
from symgrad.guards import guarded
from symgrad.backends.printing import ArrayCodeMixin, integer_form, merged_shape, nested as _nested
from symgrad.backends.tensorflow.function_calls import TensorflowFunctions


class TensorflowPrinter(TensorflowFunctions, ArrayCodeMixin, PythonCodePrinter):
    """Prints TensorFlow code: `tf.where` for Piecewise, operators where TensorFlow has them.

    Not SymPy's TensorflowPrinter: importing that imports TensorFlow itself, and deriving
    must neither need TensorFlow nor pay for its import.
    """

    target = "TensorFlow"
    where = "tensorflow.where"
    int_extreme = "tensorflow.math.{}"
    sqrt = "tensorflow.math.sqrt"
    aliases = {"tensorflow": "tf"}
    # a variable of the dtype being computed in, set by `render` for each function it prints
    dtype_source: str | None = None

    guards_branches = True  # an outer tape differentiates the gradient code again

    def _print_branch(self, value):
        if self._integer_context:  # positions and sizes are int64 throughout
            if not value.is_number:
                return self._print(value)
            return f"{self._module_format('tensorflow.constant')}({self._print(value)}, {self._module_format('tensorflow.int64')})"
        # In a graph, tf.where turns a Python number into an int32 (or float32) tensor and then
        # fails against the other branch: give it the computation's dtype.
        if not value.is_number or self.dtype_source is None:
            return self._print(value)
        # a scalar of that dtype: it broadcasts against branches of any shape
        return f"{self._module_format('tensorflow.constant')}({self._print(value)}, {self.dtype_source}.dtype)"

    def _print_Piecewise(self, expr):
        """Nested `tf.where`s, each branch computed on inputs made safe where it is not taken
        (`guarded`: the double-where idiom)."""
        if expr.args[-1][1] != sp.true or self._integer_context:
            return super()._print_Piecewise(expr)
        if self._is_indicator(expr):  # 1 where the condition holds, else 0: no branch to guard
            return f"{self._module_format('tensorflow.cast')}({self._print_condition(expr.args[0][1])}, {self.dtype_source}.dtype)"
        *branches, (last, _) = (guarded(expr) if self.guards_branches else expr).args
        text = self._print_branch(last)
        for value, condition in reversed(branches):
            text = f"{self._module_format(self.where)}({self._print_condition(condition)}, {self._print_branch(value)}, {text})"
        return text

    def _is_indicator(self, expr) -> bool:
        """Whether Piecewise `expr` is (1 where a condition holds, 0 elsewhere), in a known dtype."""
        return (len(expr.args) == 2 and self.dtype_source is not None
                and expr.args[0][0] == sp.S.One and expr.args[1][0] == sp.S.Zero)

    def _print_safe_where(self, expr):
        x, mask = expr.args
        # the typed 1 first: in a graph a Python number (an attribute) first would be float32
        one = self._print_branch(sp.S.One) if self.dtype_source is not None else f"{self._module_format('tensorflow.ones_like')}({self._print(x)})"
        return f"{self._module_format(self.where)}({self._print_condition(mask)}, {one}, {self._print(x)})"

    def _print_recomputed_or_reused(self, expr):
        return self._print(expr.recomputed)  # TensorFlow's erf & co. cost about a division

    def _print_Equality(self, expr):
        return f"{self._module_format('tensorflow.equal')}({self._print(expr.lhs)}, {self._print(expr.rhs)})"

    def _print_Unequality(self, expr):
        return f"{self._module_format('tensorflow.not_equal')}({self._print(expr.lhs)}, {self._print(expr.rhs)})"

    # --- IR values ---

    def _print_Elementwise(self, value: ir.Elementwise):
        return self._print(value.expr)

    def _print_FusedCall(self, value: ir.FusedCall):
        operands = ", ".join(f"{name}={self._print(operand)}" for name, operand in value.operands)
        return f"{self._module_format(f'tensorflow.raw_ops.{value.kernel}')}({operands})"

    def _print_modulus(self, expr):
        return f"_modulus({self._print(expr.args[0])})"

    def _print_arg(self, expr):
        return f"{self._module_format('tensorflow.math.angle')}({self._print(expr.args[0])})"

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
        if sums_batch_away(value.spec):  # TensorFlow's einsum keeps `...` in its output
            return f'_einsum_over_batch("{value.spec}", {", ".join(value.operands)})'
        if _diagonal_above_rank_6(value.spec):  # TensorFlow's einsum takes diagonals up to rank 6
            return f'_einsum_of_diagonals("{value.spec}", {", ".join(value.operands)})'
        return f'{self._module_format("tensorflow.einsum")}("{value.spec}", {", ".join(value.operands)})'

    def _print_Reduce(self, value: ir.Reduce):
        if value.kind in ("argmax", "argmin"):  # one axis, no keepdims (`symgrad.lowering.reductions.position`)
            axis = value.axes[0] if value.axes else 0
            return f"{self._module_format(f'tensorflow.math.{value.kind}')}({self._print_operand(value.x)}, axis={axis})"
        function = self._module_format(f"tensorflow.reduce_{value.kind}")
        keepdims = ", keepdims=True" if value.keepdims else ""
        if value.batch_before is not None:
            rank = f"{self._module_format('tensorflow.rank')}({value.x})"
            leading = f"{self._module_format('tensorflow.range')}({rank} - {value.batch_before})"
            if value.axes:
                trailing = f"{self._module_format('tensorflow.constant')}({list(value.axes)})"
                leading = f"{self._module_format('tensorflow.concat')}([{leading}, {trailing}], 0)"
            return f"{function}({value.x}, axis={leading}{keepdims})"
        x = self._print_operand(value.x)
        if not value.axes:
            return f"{function}({x}{keepdims})"
        axes = value.axes[0] if len(value.axes) == 1 else list(value.axes)
        return f"{function}({x}, axis={axes}{keepdims})"

    def _print_Stack(self, value: ir.Stack):
        return f"{self._module_format('tensorflow.stack')}([{', '.join(value.values)}], axis={value.axis})"

    def _print_Squeeze(self, value: ir.Squeeze):
        return f"{self._module_format('tensorflow.squeeze')}({value.x}, axis={list(value.axes)})"

    def _print_DimSize(self, value: ir.DimSize):
        size = f"{self._module_format('tensorflow.shape')}({value.x})[{value.axis}]"
        return f"{self._module_format('tensorflow.cast')}({size}, {value.x}.dtype)"

    def _print_Eye(self, value: ir.Eye):
        size = f"{self._module_format('tensorflow.shape')}({value.x})[{value.axis}]"
        return f"{self._module_format('tensorflow.eye')}({size}, dtype={value.x}.dtype)"

    def _print_DiagPart(self, value: ir.DiagPart):
        return f"{self._module_format('tensorflow.linalg.diag_part')}({value.x})"

    def _print_NegativeAxis(self, value: ir.NegativeAxis):
        scalar = f"isinstance({value.axis}, int)"
        rank = f"(len({value.x}.shape) + 1)" if value.inserted else f"len({value.x}.shape)"
        return f"{value.axis} - {rank} if {scalar} and {value.axis} >= 0 else {value.axis}"

    def _print_Constant(self, value: ir.Constant):
        return f"{self._module_format('tensorflow.constant')}({_nested(value.values)}, dtype={value.like}.dtype)"

    def _print_AsValues(self, value: ir.AsValues):
        return f"{self._module_format('tensorflow.cast')}({value.x}, {value.like}.dtype)"

    def _print_Iota(self, value: ir.Iota):
        # int64, the dtype of TensorFlow's integer inputs such as MatrixBandPart's num_lower
        shape = f"{self._module_format('tensorflow.shape')}({value.x}, out_type={self._module_format('tensorflow.int64')})"
        return f"{self._module_format('tensorflow.range')}({shape}[{value.axis}])"

    def _print_Expand(self, value: ir.Expand):
        return f"{value.x}[..., {', '.join(value.subscript)}]"

    def _print_BroadcastTo(self, value: ir.BroadcastTo):
        shape = f"{self._module_format('tensorflow.shape')}({value.like})"
        return f"{self._module_format('tensorflow.broadcast_to')}({self._print(value.value)}, {shape})"

    def _print_BroadcastToShape(self, value: ir.BroadcastToShape):
        inner = value.value.expr if isinstance(value.value, ir.Elementwise) else None
        x = self._print_branch(inner) if inner is not None and inner.is_number else self._print(value.value)
        return f"{self._module_format('tensorflow.broadcast_to')}({x}, {value.shape})"

    def _print_Scan(self, value: ir.Scan):
        if value.kind == "linear":
            return self._print_linear_scan(value)
        x = self._print_operand(value.x)
        flags = "".join(
            f", {flag}=True" for flag, on in (("exclusive", value.exclusive), ("reverse", value.reverse)) if on
        )
        if value.kind == "prod":  # the module's own: TensorFlow's gradient divides by x
            return f"_cumprod({x}, axis={value.axis}{flags})"
        scan = "cumulative_logsumexp" if value.kind == "logsumexp" else f"cum{value.kind}"
        return f"{self._module_format(f'tensorflow.math.{scan}')}({x}, axis={value.axis}{flags})"

    def _print_Transpose(self, value: ir.Transpose):
        return f"{self._module_format('tensorflow.transpose')}({value.x}, perm={list(value.perm)})"

    def _print_SumToShape(self, value: ir.SumToShape):
        return f"_sum_to_shape({self._print(value.value)}, {value.like})"

    def _print_python_float(self, expr):  # sizes are cast to the arrays' dtype already
        return self.parenthesize(expr.args[0], PRECEDENCE["Func"])  # printed where the call was

    def _print_exact_div(self, expr):
        m, c = self._division_operands(*expr.args)
        where, equal, ones = (self._module_format(f"tensorflow.{f}") for f in ("where", "equal", "ones_like"))
        return f"{where}({equal}({m} % {c}, 0), {m} // {c}, -{ones}({m}))"

    def _print_IntSize(self, value: ir.IntSize):
        return f"{self._module_format('tensorflow.shape')}({value.x}, out_type={self._module_format('tensorflow.int64')})[{value.axis}]"

    def _print_Arange(self, value: ir.Arange):
        int64 = self._module_format("tensorflow.int64")
        return f"{self._module_format('tensorflow.range')}({self._module_format('tensorflow.cast')}({value.n}, {int64}))"

    def _print_Flip(self, value: ir.Flip):
        return f"{self._module_format('tensorflow.reverse')}({value.x}, axis=[{value.axis}])"

    def _print_Gather(self, value: ir.Gather):
        fill = f", fill={self._print(value.fill)}" if value.fill != 0 else ""
        return f"_gather({value.x}, {value.positions}, {value.axis}{fill})"

    def _print_ScatterAdd(self, value: ir.ScatterAdd):
        if value.kind in ("max", "min"):  # a segment's maximum or minimum
            return f'_scatter_extremum({value.values}, {value.positions}, {value.trailing}, {value.size}, "{value.kind}")'
        if value.kind == "prod":  # a segment's product
            return f"_scatter_product({value.values}, {value.positions}, {value.trailing}, {value.size})"
        if value.kind == "rows":  # a gather's gradient: sparse, as TensorFlow's
            return f"_scatter_rows({value.values}, {value.positions}, {value.trailing}, {value.size})"
        return f"_scatter_add({value.values}, {value.positions}, {value.trailing}, {value.size})"

    def _print_NegativeAxes(self, value: ir.NegativeAxes):
        return f"tuple(sorted(int(a) - len({value.x}.shape) if a >= 0 else int(a) for a in {value.axes}))"

    def _print_AsTuple(self, value: ir.AsTuple):
        return f"tuple(int(a) for a in {value.x})"

    def _print_IntArray(self, value: ir.IntArray):
        # int64 tensors: index arithmetic then never mixes Python ints (int32) with sizes
        return f"{self._module_format('tensorflow.cast')}({value.x}, {self._module_format('tensorflow.int64')})"

    def _print_Length(self, value: ir.Length):
        return f"len({value.x})"

    def _print_Rank(self, value: ir.Rank):
        if value.axis is not None:
            return f"{value.x}.shape[{value.axis}]"
        return f"len({value.x}.shape)"

    def _print_ZerosLike(self, value: ir.ZerosLike):
        return f"{self._module_format('tensorflow.zeros_like')}({value.like})"


    def _print_Convolution(self, value: ir.Convolution):
        """A helper calling TensorFlow's kernel; sizes and pads are computed by a function of
        how an axis size is read, so that they are Python ints wherever shapes are known."""
        strides, dilations, pads, sizes = self._geometry_lists(value.strides, value.dilations, value.pads, value.sizes)
        operands = ", ".join(value.operands)
        return f"_{value.kind}({operands}, strides={strides}, dilations={dilations}, geometry={self._geometry(pads, sizes)})"

    def _print_MaxPoolBackprop(self, value: ir.MaxPoolBackprop):
        """A helper calling TensorFlow's MaxPoolGrad; pads and sizes as for a convolution."""
        window, strides, pads, sizes = self._geometry_lists(value.window, value.strides, value.pads, value.sizes)
        operands = ", ".join(value.operands)
        return f"_max_pool_backprop({operands}, window={window}, strides={strides}, geometry={self._geometry(pads, sizes)})"

    def _geometry_lists(self, *groups) -> list[str]:
        """Each group of integer expressions as a list, an axis size read by `size(x, axis)`."""
        self._geometry_context = True
        try:
            return [self._int_list(e) for e in groups]
        finally:
            self._geometry_context = False

    @staticmethod
    def _geometry(pads: str, sizes: str) -> str:
        return f"lambda size: ({pads}, {sizes})"

    def _int_list(self, exprs) -> str:
        return "[" + ", ".join(self._print(integer_form(e)) for e in exprs) + "]"

    def _print_axis_size(self, expr):
        x, axis = expr.args
        return f"size({x}, {axis})"

    def _print_extreme(self, which, args):
        if not self._geometry_context:  # a tensor first: a Python number then takes its dtype
            return super()._print_extreme(which, sorted(args, key=lambda a: a.is_number))
        text = self._print(args[-1])
        for arg in reversed(args[:-1]):
            text = f"_int_{which[:3]}({self._print(arg)}, {text})"
        return text

    _geometry_context = False

    def integer_definition(self, template) -> str:
        """Extremes by `_int_max`/`_int_min`: Python ints stay ints (a kernel's geometry)."""
        self._geometry_context = True
        try:
            return super().integer_definition(template)
        finally:
            self._geometry_context = False

    def _print_MergeAxes(self, value: ir.MergeAxes):
        x = self._print_operand(value.x)
        int64 = self._module_format("tensorflow.int64")
        if value.broadcast:
            sizes = f"[{', '.join(value.sizes)}]"
            if value.leading:
                kept = f"{self._module_format('tensorflow.shape')}({x}, out_type={int64})[:{-len(value.sizes)}]"
                sizes = f"{self._module_format('tensorflow.concat')}([{kept}, {self._module_format('tensorflow.cast')}({sizes}, {int64})], 0)"
            x = f"{self._module_format('tensorflow.broadcast_to')}({x}, {sizes})"
        shape = f"[{', '.join(merged_shape(value.sizes, value.groups))}]"
        if value.leading:
            kept = f"{self._module_format('tensorflow.shape')}({x}, out_type={int64})[:{-len(value.sizes)}]"
            shape = f"{self._module_format('tensorflow.concat')}([{kept}, {self._module_format('tensorflow.cast')}({shape}, {int64})], 0)"
        return f"{self._module_format('tensorflow.reshape')}({x}, {shape})"

    def _print_SplitAxis(self, value: ir.SplitAxis):
        int64 = self._module_format("tensorflow.int64")
        shape = f"{self._module_format('tensorflow.shape')}({value.x}, out_type={int64})"
        parts = [f"{shape}[:{value.axis}]", f"{self._module_format('tensorflow.cast')}([{', '.join((*value.outer, '-1', *value.inner))}], {int64})"]
        if value.axis != -1:
            parts.append(f"{shape}[{value.axis + 1}:]")
        return f"{self._module_format('tensorflow.reshape')}({value.x}, {self._module_format('tensorflow.concat')}([{', '.join(parts)}], 0))"


# Every function TensorFlow has goes through `_print_Function`, and so does every function
# PythonCodePrinter would print as `math.<name>` (scalar only, fails on tensors): those not in
# `mapping` are then reported as unsupported instead of printed wrongly.
for _name in {f.__name__ for f in TensorflowPrinter.mapping} | set(_known_functions_math):
    setattr(TensorflowPrinter, f"_print_{_name}", TensorflowPrinter._print_Function)


def _diagonal_above_rank_6(spec: str) -> bool:
    """Whether an operand of the einsum `spec` repeats a subscript and has more than 6 axes."""
    terms = [t.replace("...", "") for t in spec.split("->")[0].split(",")]
    return any(len(set(t)) < len(t) and len(t) > 6 for t in terms)


def sums_batch_away(spec: str) -> bool:
    """An einsum whose operands have leading `...` axes and whose result has none."""
    inputs, output = spec.split("->")
    return "..." in inputs and "..." not in output
