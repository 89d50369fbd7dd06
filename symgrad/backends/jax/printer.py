"""IR and SymPy expressions -> JAX source: numpy's printer, in `jax.numpy` and
`jax.scipy.special` (`symgrad.backends.namesake`)."""

from __future__ import annotations

from symgrad import ir
from symgrad.backends.namesake import NamesakePrinter

# jax.lax's cumulative reductions, which scan from the end themselves (`reverse=True`): on CPU
# 2.7x faster than numpy's spelling, a cumsum between two flips (measured, 1024 x 1024 float32)
LAX_SCANS = {"sum": "cumsum", "prod": "cumprod", "logsumexp": "cumlogsumexp"}

# scipy.special functions jax.scipy.special does not have (checked against JAX 0.10)
MISSING = {"iv", "ive", "jv", "yv", "kv", "kn"}


class JaxPrinter(NamesakePrinter):
    target = "jax"
    framework = "JAX"
    aliases = {"jax.numpy": "jnp", "numpy": "np"}
    modules = {"numpy": "jax.numpy", "scipy.special": "jax.scipy.special"}
    missing = frozenset(f"scipy.special.{name}" for name in MISSING)
    computes_requested = True  # `custom_vjp`'s symbolic zeros say which inputs are differentiated

    def _print_Scan(self, value: ir.Scan):
        """A reverse inclusive scan of a variable as `jax.lax.cumsum(x, axis, reverse=True)`,
        its axis counted from the first (`axis % rank`: XLA takes no negative axis)."""
        named = isinstance(value.x, str) or (isinstance(value.x, ir.Elementwise) and value.x.expr.is_Symbol)
        if not value.reverse or value.exclusive or value.kind not in LAX_SCANS or not named:
            return super()._print_Scan(value)
        x = self._print_operand(value.x)
        axis = f"{value.axis} % {self._rank_of(x)}"
        return f"{self._module_format('jax.lax.' + LAX_SCANS[value.kind])}({x}, axis={axis}, reverse=True)"

    def _print_nextafter(self, expr):  # jnp.nextafter has no derivative rule
        return f"_nextafter({self._print(expr.args[0])}, {self._print(expr.args[1])})"

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
