"""IR and SymPy expressions -> PyTorch source: numpy's printer, in `torch` and `torch.special`
(`symgrad.backends.namesake`), with the calls whose names or arguments differ from numpy's."""

from __future__ import annotations

from symgrad import ir
from symgrad.backends.namesake import NamesakePrinter
from symgrad.backends.printing import SCAN_IDENTITY, nested

# numpy and scipy.special functions whose PyTorch namesakes are named otherwise
RENAMES = {
    "numpy.mod": "torch.remainder",  # the sign of the divisor, as numpy's
    "numpy.max": "torch.amax",  # torch.max over an axis returns (values, indices)
    "numpy.min": "torch.amin",
    "numpy.rint": "torch.round",  # half to even, as numpy's
    "numpy.maximum": "_maximum",  # torch.maximum takes no Python number
    "numpy.minimum": "_minimum",
    "numpy.prod": "_prod",  # torch.prod takes one axis
    "numpy.int64": "torch.int64",
    "numpy.int8": "torch.int8",
}
# the Bessel functions torch.special has but does not differentiate, by scipy's letter
TORCH_BESSEL = {"j": "bessel_j", "y": "bessel_y", "k": "modified_bessel_k"}
# what shapes and ranks are read with: Python numbers, as numpy gives them of a tensor
STATIC = ("numpy.shape", "numpy.ndim", "numpy.ravel", "numpy.broadcast_shapes")
# scipy.special functions torch.special does not have (checked against PyTorch 2.13)
MISSING = ("dawsn", "fresnel", "spence", "expi", "iv", "ive", "jv", "yv", "kv", "kn", "expn")


class TorchPrinter(NamesakePrinter):
    target = "torch"
    framework = "PyTorch"
    aliases = {"numpy": "np"}
    modules = {"scipy.special": "torch.special", "numpy": "torch"}
    renames = {**RENAMES, **{name: name for name in STATIC}}
    missing = frozenset(f"scipy.special.{name}" for name in MISSING)
    computes_requested = True  # the backward passes `ctx.needs_input_grad` as `needs_grad`

    def begin_function(self, op) -> None:
        super().begin_function(op)
        self._complex_op = op.complex_ok

    def _print_sigmoid(self, expr):  # torch's complex sigmoid is NaN where exp(-x) overflows
        if getattr(self, "_complex_op", False):
            return f"_sigmoid({self._print(expr.args[0])})"
        return super()._print_sigmoid(expr)

    # --- fused elementwise kernels (`symgrad.lowering.pointwise_kernels`) ---

    def _print_gelu_tanh(self, expr):
        return f'torch.nn.functional.gelu({self._print(expr.args[0])}, approximate="tanh")'

    def _print_gelu_erf(self, expr):
        return f"torch.nn.functional.gelu({self._print(expr.args[0])})"

    def _print_gelu_tanh_backward(self, expr):
        return f'torch.ops.aten.gelu_backward({self._print(expr.args[0])}, {self._print(expr.args[1])}, approximate="tanh")'

    def _print_gelu_erf_backward(self, expr):
        return f"torch.ops.aten.gelu_backward({self._print(expr.args[0])}, {self._print(expr.args[1])})"

    def _module_format(self, fqn, register=True):
        if fqn in STATIC:  # numpy's, on tensors too
            with self._attribute_arithmetic():
                return super()._module_format(fqn, register)
        return super()._module_format(fqn, register)

    # --- shapes and ranks: a tensor's own, which torch.compile traces (numpy's break its graph) ---

    def _shape_of(self, x: str) -> str:
        return f"{x}.shape" if self._is_tensor(x) else super()._shape_of(x)

    def _rank_of(self, x: str) -> str:
        return f"{x}.ndim" if self._is_tensor(x) else super()._rank_of(x)

    def _static_call(self, name: str, *args: str) -> str:
        if name in ("numpy.shape", "numpy.ndim") and self._is_tensor(*args):
            return self._shape_of(*args) if name == "numpy.shape" else self._rank_of(*args)
        return super()._static_call(name, *args)

    def _is_scalar(self, x: str) -> str:
        return f"_scalar({x})"

    def _ravelled(self, x: str) -> str:
        return f"_flat({x})"

    def _is_tensor(self, x: str) -> bool:
        """Whether `x` names a tensor: a variable that is not an attribute, size or rank."""
        return str(x).isidentifier() and str(x) not in self._static_names

    # --- special functions by what torch.special has ---

    def _print_besselk(self, expr):
        return self._bessel_of_order(expr, "k")

    def _print_bessely(self, expr):
        return self._bessel_of_order(expr, "y")

    def _print_besselj(self, expr):
        return self._bessel_of_order(expr, "j")

    def _bessel_of_order(self, expr, letter: str):
        """Orders 0 and 1 through `_bessel`: torch.special's J, Y and K have no derivative
        (their outputs do not require grad), so its double backward would read them as
        constants; order 2 by the recurrence."""
        order, x = expr.args
        if order in (0, 1):
            return f'_bessel("{TORCH_BESSEL[letter]}{order}", {self._print(x)})'
        return self._print_bessel_of_order_two(expr)

    def _print_polygamma(self, expr):
        """torch.special.polygamma takes one Python int order: `_polygamma` one per order."""
        order, x = expr.args
        if order.is_number:
            return super()._print_polygamma(expr)
        return f"_polygamma({self._print(order)}, {self._print(x)})"

    def _print_softplus(self, expr):
        x = self._print(expr.args[0])
        return f"{self._module_format('numpy.logaddexp')}({self._module_format('numpy.zeros_like')}({x}), {x})"

    def _typed(self, text: str, like: str) -> str:
        return f"{self._module_format('numpy.asarray')}({text}, dtype={like}.dtype)"

    # --- IR values whose calls differ from numpy's ---

    def _print_Einsum(self, value: ir.Einsum):
        return f'{self._module_format("numpy.einsum")}("{value.spec}", {", ".join(value.operands)})'

    def _print_Flip(self, value: ir.Flip):
        return f"_flip({value.x}, {value.axis})"

    def _print_Softmax(self, value: ir.Softmax):
        """`torch.softmax`; masked, of the row with `-inf` outside the mask, and 0 there (a row
        the mask leaves empty too, where the softmax is NaN and the formula 0)."""
        if value.mask:
            row = f'torch.where({value.mask}, {value.x}, float("-inf"))'
            return f"torch.where({value.mask}, torch.softmax({row}, {value.axis}), 0)"
        return f"torch.{'log_softmax' if value.log else 'softmax'}({value.x}, {value.axis})"

    def _print_SoftmaxBackward(self, value: ir.SoftmaxBackward):
        kernel = "_log_softmax_backward_data" if value.log else "_softmax_backward_data"
        return f"torch.{kernel}({value.grad}, {value.output}, {value.axis}, {value.output}.dtype)"

    def _print_Reduce(self, value: ir.Reduce):
        """A reduction over axes counted at run time through `_over`: torch reads an empty
        tuple of axes as all of them."""
        if value.batch_before is None:
            return super()._print_Reduce(value)
        leading = f"tuple(range({self._rank_of(value.x)} - {value.batch_before}))"
        axes = f"{leading} + {value.axes}" if value.axes else leading
        keepdims = ", keepdims=True" if value.keepdims else ""
        return f"_over({self._module_format(f'numpy.{value.kind}')}, {value.x}, {axes}{keepdims})"

    def _print_Mod(self, expr):
        """Python's `%`: of tensors as of numbers, the sign of the divisor, as numpy's `mod`."""
        return " % ".join(self._division_operands(*expr.args))

    def _print_Arange(self, value: ir.Arange):
        """`torch.arange` of a Python int: a size computed by numpy is a 0-d array."""
        return f"{self._module_format('numpy.arange')}(int({value.n}))"

    def _print_Transpose(self, value: ir.Transpose):
        if value.perm == (1, 0):
            return f"{value.x}.T"
        return f"{self._module_format('numpy.permute')}({value.x}, {value.perm})"

    def _print_DiagPart(self, value: ir.DiagPart):
        return f"{self._module_format('numpy.diagonal')}({value.x}, dim1=-2, dim2=-1)"

    def _print_Eye(self, value: ir.Eye):
        size = f"{self._shape_of(value.x)}[{value.axis}]"
        return f"{self._module_format('numpy.eye')}({size}, dtype={value.x}.dtype)"

    def _print_Constant(self, value: ir.Constant):
        return f"{self._module_format('numpy.asarray')}({nested(value.values)}, dtype={value.like}.dtype)"

    def _print_AsValues(self, value: ir.AsValues):
        return f"{self._module_format('numpy.asarray')}({value.x}, dtype={value.like}.dtype)"

    def _print_IntArray(self, value: ir.IntArray):
        if value.x in self._static_names:
            return super()._print_IntArray(value)
        return f"{self._module_format('numpy.as_tensor')}({value.x}, dtype={self._module_format('numpy.int64')})"

    def _print_mask(self, expr):
        return f"({self._print_condition(expr.args[0])}).to({self._module_format('numpy.int8')})"

    def _print_Scan(self, value: ir.Scan):
        """torch has no exclusive or reverse cumsum: flip, and shift in the identity."""
        if value.kind == "linear":
            return self._print_linear_scan(value)
        x = self._print_operand(value.x)
        flip = self._module_format("numpy.flip")
        if value.reverse:
            x = f"{flip}({x}, dims=({value.axis},))"
        scan = "numpy.logcumsumexp" if value.kind == "logsumexp" else f"numpy.cum{value.kind}"
        text = f"{self._module_format(scan)}({x}, dim={value.axis})"
        if value.exclusive:
            text = f"_shift_right({text}, axis={value.axis}, fill={SCAN_IDENTITY[value.kind]})"
        return f"{flip}({text}, dims=({value.axis},))" if value.reverse else text
