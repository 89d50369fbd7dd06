"""IR and SymPy expressions -> JAX source: numpy's printer, in `jax.numpy` and
`jax.scipy.special` (`symgrad.backends.namesake`)."""

from __future__ import annotations

from symgrad.backends.namesake import NamesakePrinter

# scipy.special functions jax.scipy.special does not have (checked against JAX 0.10)
MISSING = {"iv", "ive", "jv", "yv", "kv", "kn"}


class JaxPrinter(NamesakePrinter):
    target = "jax"
    framework = "JAX"
    aliases = {"jax.numpy": "jnp", "numpy": "np"}
    modules = {"numpy": "jax.numpy", "scipy.special": "jax.scipy.special"}
    missing = frozenset(f"scipy.special.{name}" for name in MISSING)
    computes_requested = True  # `custom_vjp`'s symbolic zeros say which inputs are differentiated

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
