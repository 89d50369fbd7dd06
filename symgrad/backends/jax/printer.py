"""IR and SymPy expressions -> JAX source: numpy's printer, in `jax.numpy` and `jax.scipy.special`.

JAX follows numpy's API, so the numpy printer serves once its module names are mapped. What
differs: attribute arithmetic (axes, lists of ints) stays in numpy, computed while a function
is traced instead of staged into it; selects are guarded (`jax.grad` differentiates the
gradient code again); special functions JAX lacks are a lowering error naming the op.
"""

from __future__ import annotations

import contextlib

import sympy as sp

from symgrad import ir
from symgrad.backends.numpy.printer import NumpyPrinter

# numpy's module -> JAX's namesake
MODULES = {"numpy": "jax.numpy", "scipy.special": "jax.scipy.special"}
# values computed from shapes and attributes alone (static under `jit`)
STATIC_VALUES = (ir.DimSize, ir.IntSize, ir.Rank, ir.Length, ir.AsTuple, ir.NegativeAxis, ir.NegativeAxes)
# scipy.special functions jax.scipy.special does not have (checked against JAX 0.10)
MISSING = {"iv", "ive", "jv", "yv", "kv", "kn"}


class JaxPrinter(NumpyPrinter):
    target = "jax"
    aliases = {"jax.numpy": "jnp", "numpy": "np"}
    guards_branches = True  # jax.grad of the gradient differentiates its selects

    def __init__(self, settings=None):
        super().__init__(settings)
        self._static = False  # printing attribute arithmetic: numpy, not jax.numpy
        self._static_names: set[str] = set()  # variables holding attributes, sizes, ranks

    def begin_function(self, op) -> None:
        self._static_names = {name for name, _ in op.enumerated_attrs + op.numeric_attrs}

    def assigned(self, target: str, value) -> None:
        """Track which variables are static (known while tracing): a size computed from them
        stays a number, which `jnp.arange` and slicing need under `jit`."""
        if (
            isinstance(value, STATIC_VALUES)
            or (isinstance(value, ir.IndexArith) and self._is_static(value.expr))
            or (isinstance(value, ir.IntArray) and value.x in self._static_names)
        ):
            self._static_names.add(target)
        else:
            self._static_names.discard(target)

    def _is_static(self, expr) -> bool:
        return all(str(s).split("[")[0] in self._static_names for s in expr.free_symbols)

    def _module_format(self, fqn, register=True):
        if not self._static:
            for module, namesake in MODULES.items():
                if fqn.startswith(module + "."):
                    if module == "scipy.special" and fqn[len(module) + 1 :] in MISSING:
                        self._not_supported.add(sp.Symbol(f"{fqn} (JAX has no {fqn[len(module) + 1:]})"))
                    fqn = namesake + fqn[len(module) :]
                    break
        return super()._module_format(fqn, register)

    @contextlib.contextmanager
    def _attribute_arithmetic(self):
        self._static, before = True, self._static
        try:
            yield
        finally:
            self._static = before

    def _print_safe_where(self, expr):
        x, mask = expr.args
        return f"{self._module_format(self.where)}({self._print_condition(mask)}, 1, {self._print(x)})"

    # --- special functions by what jax.scipy.special has ---

    def _print_besseli(self, expr):
        order, x = expr.args
        if order in (0, 1):
            return self._call(f"scipy.special.i{order}", x)
        return self._print_bessel_of_order_two(expr)

    def _print_scaled_besseli(self, expr):
        order, x = expr.args
        if order in (0, 1):
            return self._call(f"scipy.special.i{order}e", x)
        return self._print_bessel_of_order_two(expr)

    def _print_besselk(self, expr):  # jax.scipy.special has no K or Y functions
        return self._print_not_supported(expr)

    def _print_bessely(self, expr):
        return self._print_not_supported(expr)

    def _print_polygamma(self, expr):
        """jax.scipy.special.polygamma takes an integer order only."""
        order, x = expr.args
        if order.is_number:
            return super()._print_polygamma(expr)
        function, integer = self._module_format("scipy.special.polygamma"), self._module_format("numpy.asarray")
        return f"{function}({integer}({self._print(order)}, int), {self._print(x)})"

    def _print_besselj(self, expr):
        """Not printed: jax.scipy.special.bessel_jn is NaN at 0 and wrong beyond small
        arguments (JAX 0.10.2: J1(100) = -0.435, where it is -0.0771)."""
        return self._print_not_supported(expr)

    # --- IR values ---

    def _print_SumToShape(self, value: ir.SumToShape):
        """Always the full product, summed: XLA fuses the product into the reduction."""
        return f"_sum_to_shape({self._print(value.value)}, {self._module_format('numpy.shape')}({value.like}))"

    def _print_IndexArith(self, value: ir.IndexArith):
        if not self._is_static(value.expr):
            return super()._print_IndexArith(value)
        with self._attribute_arithmetic():
            return super()._print_IndexArith(value)

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
