"""SymPy's functions as TensorFlow calls: the `tf.math` function of each, and the special
functions TensorFlow has under other names or orders (polygamma's digamma, Li2 as spence,
the Bessel functions of orders 0 and 1)."""

from __future__ import annotations

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

from symgrad.functions import dawsn, nextafter, rint, sigmoid, softplus


class TensorflowFunctions:
    """The TensorFlow printer's functions of SymPy expressions (a mixin of `TensorflowPrinter`)."""

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
        sp.conjugate: "tensorflow.math.conj",
        sp.re: "tensorflow.math.real",
        sp.im: "tensorflow.math.imag",
        expm1: "tensorflow.math.expm1",
        log1p: "tensorflow.math.log1p",
        sp.erfinv: "tensorflow.math.erfinv",
        sp.zeta: "tensorflow.math.zeta",
        sp.Ei: "tensorflow.math.special.expint",
        sp.fresnelc: "tensorflow.math.special.fresnel_cos",
        sp.fresnels: "tensorflow.math.special.fresnel_sin",
        rint: "tensorflow.math.rint",
        dawsn: "tensorflow.math.special.dawsn",
        nextafter: "tensorflow.math.nextafter",
        sigmoid: "tensorflow.math.sigmoid",
        softplus: "tensorflow.math.softplus",
    }
    # Bessel functions of orders 0 and 1, the ones TensorFlow has
    bessel = {
        # the module's own: TensorFlow's overflow where I is finite, and its I1' is 1 at 0
        (sp.besseli, 0): "_bessel_i0",
        (sp.besseli, 1): "_bessel_i1",
        (sp.besselj, 0): "tensorflow.math.special.bessel_j0",
        (sp.besselj, 1): "tensorflow.math.special.bessel_j1",
        (sp.besselk, 0): "tensorflow.math.special.bessel_k0",
        (sp.besselk, 1): "tensorflow.math.special.bessel_k1",
        (sp.bessely, 0): "tensorflow.math.special.bessel_y0",
        (sp.bessely, 1): "tensorflow.math.special.bessel_y1",
    }

    def _print_Function(self, expr):
        name = self.mapping.get(type(expr))
        if name is None:
            return self._print_not_supported(expr)
        args = [self._print(a) for a in expr.args]
        return f"{self._module_format(name)}({', '.join(args)})"

    def _print_Pi(self, expr):
        return repr(float(expr))

    def _print_polygamma(self, expr):
        order, x = expr.args
        if order == 0:
            return f"{self._module_format('tensorflow.math.digamma')}({self._print(x)})"
        n = self._print_branch(order) if order.is_number else self._print(order)
        return f"{self._module_format('tensorflow.math.polygamma')}({n}, {self._print(x)})"

    def _print_polylog(self, expr):
        order, z = expr.args
        if order == 1:  # what the derivative of order 2 gives, a negation as one factor
            return f"(-{self._print(sp.log(1 - z))})"
        if order != 2:
            return self._print_not_supported(expr)
        # Li2(z) = spence(1 - z)
        return f"{self._module_format('tensorflow.math.special.spence')}({self._print(1 - z)})"

    def _print_BesselBase(self, expr):
        order, x = expr.args
        name = self.bessel.get((type(expr), order))
        if name is not None and name.startswith("_"):  # the module's own (symgrad's runtime)
            return f"{name}({self._print(x)})"
        if name is not None:
            return f"{self._module_format(name)}({self._print(x)})"
        return self._print_bessel_of_order_two(expr)

    def _print_scaled_besseli(self, expr):
        order, x = expr.args
        if order in (0, 1):
            return f"{self._module_format(f'tensorflow.math.special.bessel_i{order}e')}({self._print(x)})"
        return self._print_bessel_of_order_two(expr)

    def _print_Exp1(self, expr):
        return repr(float(expr))
