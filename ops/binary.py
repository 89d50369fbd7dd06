"""Binary elementwise ops with numpy broadcasting, with TensorFlow's op type and names.

Where an op has a kink or a guarded point, the declaration is a `Piecewise` whose conditions
fix the derivative there; each states the convention and that it is TensorFlow's.
"""

import sympy as sp

from symgrad import elementwise, stop_gradient

Z = ("z",)  # TensorFlow's output name for the binary ops


@elementwise("AddV2", complex=True, outputs=Z)
def add(x, y):
    """z = x + y."""
    return x + y


@elementwise("Sub", complex=True, outputs=Z)
def subtract(x, y):
    """z = x - y."""
    return x - y


@elementwise("Mul", complex=True, outputs=Z)
def multiply(x, y):
    """z = x * y."""
    return x * y


@elementwise("RealDiv", complex=True, outputs=Z)
def real_div(x, y):
    """z = x / y."""
    return x / y


@elementwise("Pow", outputs=Z)
def power(x, y):
    """z = x ** y."""
    # real only: for complex x TensorFlow guards `x != 0` instead, which this does not state
    # dz/dy = z * log(x) only where x > 0; 0 where x <= 0, as TensorFlow's PowGrad (real dtypes)
    return sp.Piecewise((x**y, x > 0), (x ** stop_gradient(y), True))


@elementwise("Maximum", outputs=Z)
def maximum(x, y):
    """z = max(x, y)."""
    # tie: x == y sends the whole gradient to x, as TensorFlow's MaximumGrad (`x >= y`)
    return sp.Piecewise((x, x >= y), (y, True))


@elementwise("Minimum", outputs=Z)
def minimum(x, y):
    """z = min(x, y)."""
    # tie: x == y sends the whole gradient to x, as TensorFlow's MinimumGrad (`x <= y`)
    return sp.Piecewise((x, x <= y), (y, True))


@elementwise("SquaredDifference", outputs=Z)
def squared_difference(x, y):
    """z = (x - y) ** 2."""
    # real only: TensorFlow's complex SquaredDifference is |x - y|**2, not (x - y)**2
    return (x - y) ** 2


@elementwise("Atan2", outputs=Z)
def atan2(y, x):
    """z = the angle of the point (x, y), in (-pi, pi]."""
    return sp.atan2(y, x)


@elementwise("Xlogy", complex=True, outputs=Z)
def xlogy(x, y):
    """z = x * log(y), and 0 where x == 0."""
    # x == 0: both partials 0, even where y == 0, as TensorFlow's XlogyGrad
    return sp.Piecewise((0, sp.Eq(x, 0)), (x * sp.log(y), True))


@elementwise("Xdivy", complex=True, outputs=Z)
def xdivy(x, y):
    """z = x / y, and 0 where x == 0."""
    # x == 0: both partials 0, even where y == 0, as TensorFlow's XdivyGrad
    return sp.Piecewise((0, sp.Eq(x, 0)), (x / y, True))


@elementwise("DivNoNan", complex=True, outputs=Z)
def div_no_nan(x, y):
    """z = x / y, and 0 where y == 0."""
    # y == 0: both partials 0, as TensorFlow's DivNoNanGrad
    return sp.Piecewise((0, sp.Eq(y, 0)), (x / y, True))
