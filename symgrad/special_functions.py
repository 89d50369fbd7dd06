"""Elementwise functions symgrad adds to SymPy for the special functions and stable forms the
backends print (`nextafter`, Dawson's integral, `sigmoid`, `softplus`, scaled Bessel I,
`exp` in two halves, `rint`), each with its derivative: SymPy has none of them, or none that
stays finite where the value does (`symgrad.stability` writes the stable ones)."""

from __future__ import annotations

import sympy as sp
from sympy.core.logic import fuzzy_and


class rint(sp.Function):
    """x rounded to the nearest integer, ties to even (numpy's `rint`, TensorFlow's Rint and
    Round); piecewise constant, so declarations wrap it in `stop_gradient`."""

    nargs = 1


class dawsn(sp.Function):
    """Dawson's integral exp(-x**2) * integral of exp(t**2) from 0 to x (SymPy has none):
    it solves D' = 1 - 2 x D (DLMF 7.5.1 with 7.2.5)."""

    nargs = 1

    def fdiff(self, argindex=1):
        x = self.args[0]
        return 1 - 2 * x * self


class nextafter(sp.Function):
    """The next float after x1 in the direction of x2 (C's `nextafter`; SymPy has none): x1
    moved by at most one unit in the last place, so its derivative is 1 in x1 and 0 in x2,
    as TensorFlow's NextAfter gradient (grad, zeros)."""

    nargs = 2

    def fdiff(self, argindex=1):
        return sp.S.One if argindex == 1 else sp.S.Zero


class sigmoid(sp.Function):
    """The logistic function 1 / (1 + exp(-x)), in (0, 1) for every x: what the stability rules
    write for ratios of `exp` that overflow (`tf.math.sigmoid`, `scipy.special.expit`)."""

    nargs = 1

    def fdiff(self, argindex=1):
        return self * (1 - self)  # as TensorFlow's SigmoidGrad: the forward's value reused

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return 1 / (1 + sp.exp(-x))

    def _eval_evalf(self, prec):
        return self.rewrite(sp.exp)._eval_evalf(prec)


class softplus(sp.Function):
    """log(1 + exp(x)), finite for every x (`tf.math.softplus`, `numpy.logaddexp(0, x)`)."""

    nargs = 1

    def fdiff(self, argindex=1):
        return sigmoid(self.args[0])

    def _eval_rewrite_as_exp(self, x, **kwargs):
        return sp.log(1 + sp.exp(x))

    def _eval_evalf(self, prec):
        return self.rewrite(sp.exp)._eval_evalf(prec)


class scaled_besseli(sp.Function):
    """I_n(x) * exp(-|x|), the modified Bessel function scaled: finite where I_n overflows
    (`scipy.special.ive`, TensorFlow's `bessel_i0e` and `bessel_i1e`); what the stability
    rules write for that product (BesselI0e and BesselI1e, and their derivatives)."""

    nargs = 2

    @classmethod
    def eval(cls, n, x):
        if n.is_integer and n.is_negative:
            return cls(-n, x)  # I_{-n} = I_n for integer n
        return None

    def fdiff(self, argindex=2):
        n, x = self.args
        if argindex == 1:
            raise sp.ArgumentIndexError(self, argindex)
        return (scaled_besseli(n - 1, x) + scaled_besseli(n + 1, x)) / 2 - sp.sign(x) * self

    def _eval_rewrite_as_besseli(self, n, x, **kwargs):
        return sp.besseli(n, x) * sp.exp(-sp.Abs(x))

    def _eval_evalf(self, prec):
        return self.rewrite(sp.besseli)._eval_evalf(prec)


class split_exp(sp.Function):
    """`split_exp(s, u)` is s * exp(u), computed as (s * exp(u/2)) * exp(u/2): neither factor
    nor the first product overflows where the value does not, though exp(u) alone may (Ei's
    derivative exp(x) / x in float32 for 88.7 < x < 93); what the stability rule `split_growth`
    writes for that product, printed as each runtime's `_split_exp`. A function of its own:
    SymPy would merge exp(u/2) * exp(u/2) into exp(u)."""

    nargs = 2

    def fdiff(self, argindex=1):
        s, u = self.args
        return sp.exp(u) if argindex == 1 else self  # exp(u) * s' is split again by the rule

    def _eval_rewrite_as_exp(self, s, u, **kwargs):
        return s * sp.exp(u)

    def _eval_evalf(self, prec):
        return self.rewrite(sp.exp)._eval_evalf(prec)

    def _eval_is_real(self):
        return fuzzy_and([self.args[0].is_real, self.args[1].is_real])
