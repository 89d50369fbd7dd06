"""Special functions (gamma, error-function inverses, Bessel, Fresnel, ...), with TensorFlow's
op type and input names.

The exponentially scaled Bessel functions are the plain ones times exp(-|x|) (I) or exp(x) (K):
SymPy differentiates the product, so their gradients come from the orders 0 and 1 and the
scaling. Where TensorFlow's gradient leaves an input out (Polygamma's order, Zeta's x), the
declaration says so with `stop_gradient`.
"""

import sympy as sp

from symgrad import elementwise, stop_gradient
from symgrad.functions import dawsn as sp_dawsn

Z = ("z",)  # TensorFlow's output name for the binary ops


# --- gamma and zeta -------------------------------------------------------------------------


@elementwise("Lgamma")
def lgamma(x):
    """y = log|gamma(x)|."""
    return sp.loggamma(x)


@elementwise("Digamma")
def digamma(x):
    """y = d/dx log(gamma(x))."""
    return sp.polygamma(0, x)


@elementwise("Polygamma", outputs=Z)
def polygamma(a, x):
    """z = the a-th derivative of digamma at x, for integer a >= 0."""
    # the order a is an integer: TensorFlow's PolygammaGrad gives it no gradient
    return sp.polygamma(stop_gradient(a), x)


@elementwise("Zeta", outputs=Z)
def zeta(x, q):
    """z = the Hurwitz zeta function, sum over n >= 0 of (n + q) ** -x, for x > 1."""
    # TensorFlow's ZetaGrad gives x no gradient (it has no formula for d/dx)
    return sp.zeta(stop_gradient(x), q)


# --- error functions and integrals ----------------------------------------------------------


@elementwise("Erfinv")
def erfinv(x):
    """y = the inverse of erf, for x in (-1, 1)."""
    return sp.erfinv(x)


@elementwise("Ndtri")
def ndtri(x):
    """y = the inverse of the standard normal CDF, for x in (0, 1)."""
    return sp.sqrt(2) * sp.erfinv(2 * x - 1)


@elementwise("Dawsn")
def dawsn(x):
    """y = Dawson's integral, exp(-x**2) times the integral of exp(t**2) from 0 to x."""
    return sp_dawsn(x)


@elementwise("Expint")
def expint(x):
    """y = Ei(x), the exponential integral, for x >= 0 (TensorFlow's Expint is NaN below 0)."""
    return sp.Piecewise((sp.Ei(x), x >= 0), (sp.nan, True))


@elementwise("FresnelCos")
def fresnel_cos(x):
    """y = the integral of cos(pi t**2 / 2) from 0 to x."""
    return sp.fresnelc(x)


@elementwise("FresnelSin")
def fresnel_sin(x):
    """y = the integral of sin(pi t**2 / 2) from 0 to x."""
    return sp.fresnels(x)


@elementwise("Spence")
def spence(x):
    """y = the integral of log(t) / (1 - t) from 1 to x, for x >= 0 (dilog(1 - x))."""
    # x == 1: log(x) / (1 - x) is 0/0 there; the limit, -1, as TensorFlow's SpenceGrad, is the
    # derivative of the branch 1 - x, which has the value 0 = spence(1)
    return sp.Piecewise((1 - x, sp.Eq(x, 1)), (sp.polylog(2, 1 - x), True))


# --- Bessel functions -----------------------------------------------------------------------


@elementwise("BesselI0")
def bessel_i0(x):
    """y = I0(x), the modified Bessel function of the first kind, order 0."""
    return sp.besseli(0, x)


@elementwise("BesselI1")
def bessel_i1(x):
    """y = I1(x), the modified Bessel function of the first kind, order 1."""
    return sp.besseli(1, x)


@elementwise("BesselI0e")
def bessel_i0e(x):
    """y = I0(x) exp(-|x|)."""
    return sp.besseli(0, x) * sp.exp(-sp.Abs(x))


@elementwise("BesselI1e")
def bessel_i1e(x):
    """y = I1(x) exp(-|x|)."""
    return sp.besseli(1, x) * sp.exp(-sp.Abs(x))


@elementwise("BesselJ0")
def bessel_j0(x):
    """y = J0(x), the Bessel function of the first kind, order 0."""
    return sp.besselj(0, x)


@elementwise("BesselJ1")
def bessel_j1(x):
    """y = J1(x), the Bessel function of the first kind, order 1."""
    return sp.besselj(1, x)


@elementwise("BesselK0")
def bessel_k0(x):
    """y = K0(x), the modified Bessel function of the second kind, order 0, for x > 0."""
    return sp.besselk(0, x)


@elementwise("BesselK1")
def bessel_k1(x):
    """y = K1(x), the modified Bessel function of the second kind, order 1, for x > 0."""
    return sp.besselk(1, x)


@elementwise("BesselK0e")
def bessel_k0e(x):
    """y = K0(x) exp(x), for x > 0."""
    return sp.besselk(0, x) * sp.exp(x)


@elementwise("BesselK1e")
def bessel_k1e(x):
    """y = K1(x) exp(x), for x > 0."""
    return sp.besselk(1, x) * sp.exp(x)


@elementwise("BesselY0")
def bessel_y0(x):
    """y = Y0(x), the Bessel function of the second kind, order 0, for x > 0."""
    return sp.bessely(0, x)


@elementwise("BesselY1")
def bessel_y1(x):
    """y = Y1(x), the Bessel function of the second kind, order 1, for x > 0."""
    return sp.bessely(1, x)
