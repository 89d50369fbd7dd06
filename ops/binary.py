"""Binary elementwise ops with numpy broadcasting, with TensorFlow's op type and names.

Where an op has a kink or a guarded point, the declaration is a `Piecewise` whose conditions
fix the derivative there; each states the convention and that it is TensorFlow's.
"""

import sympy as sp
from sympy.codegen.cfunctions import log1p

from symgrad import elementwise, stop_gradient
from symgrad.functions import nextafter

Z = ("z",)  # TensorFlow's output name for the binary ops


@elementwise("AddV2", complex=True, outputs=Z)
def add(x, y):
    """z = x + y."""
    return x + y


@elementwise("Add", complex=True, outputs=Z)
def add_legacy(x, y):
    """z = x + y (AddV2's older op type)."""
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


@elementwise("Div", complex=True, outputs=Z)
def div(x, y):
    """z = x / y (RealDiv's older op type, for floating-point dtypes)."""
    return x / y


@elementwise("MulNoNan", outputs=Z)
def mul_no_nan(x, y):
    """z = x * y, and 0 where y == 0 even if x is infinite or NaN."""
    # for finite x that is x * y everywhere; both partials are TensorFlow's
    # (mul_no_nan(grad, y), mul_no_nan(x, grad)), equal to grad * y and x * grad for finite x
    return x * y


@elementwise("FloorDiv", outputs=Z)
def floor_div(x, y):
    """z = floor(x / y)."""
    # piecewise constant: no gradient, as TensorFlow's FloorDivGrad (None, None)
    return stop_gradient(sp.floor(x / y))


@elementwise("TruncateDiv", outputs=Z)
def truncate_div(x, y):
    """z = x / y rounded towards zero."""
    # piecewise constant: no gradient, as TensorFlow's TruncateDivGrad (None, None)
    return stop_gradient(sp.Piecewise((sp.floor(x / y), x / y >= 0), (sp.ceiling(x / y), True)))


@elementwise("FloorMod", outputs=Z)
def floor_mod(x, y):
    """z = x - y * floor(x / y), with the sign of y."""
    # the floor is piecewise constant: dz/dy = -floor(x / y), as TensorFlow's FloorModGrad
    return x - y * stop_gradient(sp.floor(x / y))


@elementwise("Pow", outputs=Z)
def power(x, y):
    """z = x ** y."""
    # real only: for complex x TensorFlow guards `x != 0` instead, which this does not state
    # dz/dy = z * log(x) only where x > 0; 0 where x <= 0, as TensorFlow's PowGrad (real dtypes);
    # x**0 is 1 and x**1 is x for every x <= 0 too: there d/dx is 0 and d2/dx2 is 0, where
    # y * x**(y - 1) is 0 * inf at x = 0 (y = 0), and y * (y - 1) * x**(y - 2) (y = 1)
    return sp.Piecewise((x**y, x > 0), (1, sp.Eq(y, 0)), (x, sp.Eq(y, 1)), (x ** stop_gradient(y), True))


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


@elementwise("Xlog1py", outputs=Z)
def xlog1py(x, y):
    """z = x * log(1 + y), and 0 where x == 0."""
    # x == 0: both partials 0, even where y == -1, as TensorFlow's Xlog1pyGrad
    return sp.Piecewise((0, sp.Eq(x, 0)), (x * log1p(y), True))


@elementwise("DivNoNan", complex=True, outputs=Z)
def div_no_nan(x, y):
    """z = x / y, and 0 where y == 0."""
    # y == 0: both partials 0, as TensorFlow's DivNoNanGrad
    return sp.Piecewise((0, sp.Eq(y, 0)), (x / y, True))


@elementwise("NextAfter", outputs=("output",))
def next_after(x1, x2):
    """output = the next float after x1 towards x2: x1 moved by at most one unit in the last
    place, so its gradient is (grad, 0), as TensorFlow's NextAfterGrad."""
    return nextafter(x1, x2)
