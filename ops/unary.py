"""Unary elementwise ops, with TensorFlow's op type, input and output names.

Where an op has a kink, the declaration is a `Piecewise` whose branch conditions fix the
derivative at the kink; each states which side the tie goes to and that it is TensorFlow's.
"""

import sympy as sp
from sympy.codegen.cfunctions import expm1 as sp_expm1
from sympy.codegen.cfunctions import log1p as sp_log1p

from symgrad import elementwise, stop_gradient
from symgrad.functions import rint

# SELU's constants as TensorFlow's kernel has them (Klambauer et al. 2017)
SELU_SCALE = sp.Float("1.0507009873554804934193349852946", 30)
SELU_ALPHA = sp.Float("1.6732632423543772848170429916717", 30)

ACTIVATIONS = ("activations",)  # TensorFlow's output name for the nn activations


# --- exponentials and logarithms ----------------------------------------------------------


@elementwise("Sigmoid", complex=True)
def sigmoid(x):
    """y = 1 / (1 + exp(-x))."""
    return 1 / (1 + sp.exp(-x))


@elementwise("Tanh", complex=True)
def tanh(x):
    """y = tanh(x)."""
    return sp.tanh(x)


@elementwise("Exp", complex=True)
def exp(x):
    """y = exp(x)."""
    return sp.exp(x)


@elementwise("Log", complex=True)
def log(x):
    """y = log(x), the natural logarithm."""
    return sp.log(x)


@elementwise("Log1p", complex=True)
def log1p(x):
    """y = log(1 + x), accurate for small x."""
    return sp_log1p(x)


@elementwise("Expm1", complex=True)
def expm1(x):
    """y = exp(x) - 1, accurate for small x."""
    return sp_expm1(x)


# --- powers ---------------------------------------------------------------------------------


@elementwise("Sqrt", complex=True)
def sqrt(x):
    """y = sqrt(x)."""
    return sp.sqrt(x)


@elementwise("Rsqrt", complex=True)
def rsqrt(x):
    """y = 1 / sqrt(x)."""
    return 1 / sp.sqrt(x)


@elementwise("Reciprocal", complex=True)
def reciprocal(x):
    """y = 1 / x."""
    return 1 / x


@elementwise("Inv", complex=True)
def inv(x):
    """y = 1 / x (Reciprocal's old name)."""
    return 1 / x


@elementwise("Square", complex=True)
def square(x):
    """y = x * x."""
    return x**2


# --- trigonometric and hyperbolic ---------------------------------------------------------


@elementwise("Sin", complex=True)
def sin(x):
    """y = sin(x)."""
    return sp.sin(x)


@elementwise("Cos", complex=True)
def cos(x):
    """y = cos(x)."""
    return sp.cos(x)


@elementwise("Tan", complex=True)
def tan(x):
    """y = tan(x)."""
    return sp.tan(x)


@elementwise("Asin", complex=True)
def asin(x):
    """y = arcsin(x), for x in [-1, 1]."""
    return sp.asin(x)


@elementwise("Acos", complex=True)
def acos(x):
    """y = arccos(x), for x in [-1, 1]."""
    return sp.acos(x)


@elementwise("Atan", complex=True)
def atan(x):
    """y = arctan(x)."""
    return sp.atan(x)


@elementwise("Sinh", complex=True)
def sinh(x):
    """y = sinh(x)."""
    return sp.sinh(x)


@elementwise("Cosh", complex=True)
def cosh(x):
    """y = cosh(x)."""
    return sp.cosh(x)


@elementwise("Asinh", complex=True)
def asinh(x):
    """y = arcsinh(x)."""
    return sp.asinh(x)


@elementwise("Acosh", complex=True)
def acosh(x):
    """y = arccosh(x), for x >= 1."""
    return sp.acosh(x)


@elementwise("Atanh", complex=True)
def atanh(x):
    """y = arctanh(x), for x in (-1, 1)."""
    return sp.atanh(x)


# --- error functions ----------------------------------------------------------------------


@elementwise("Erf")
def erf(x):
    """y = erf(x), the Gauss error function."""
    return sp.erf(x)


@elementwise("Erfc")
def erfc(x):
    """y = 1 - erf(x), accurate where erf(x) is close to 1."""
    return sp.erfc(x)


# --- activations ----------------------------------------------------------------------------


@elementwise("Softplus", outputs=ACTIVATIONS)
def softplus(features):
    """activations = log(1 + exp(features))."""
    # Two branches so that exp never overflows where its branch is used; the gradient of
    # both is TensorFlow's sigmoid(features), the same on either side of 0.
    return sp.Piecewise(
        (features + sp_log1p(sp.exp(-features)), features > 0),
        (sp_log1p(sp.exp(features)), True),
    )


@elementwise("Softsign", outputs=ACTIVATIONS)
def softsign(features):
    """activations = features / (1 + |features|)."""
    # smooth at 0 (derivative 1), so sign(0) = 0 in the derivative is harmless
    return features / (1 + sp.Abs(features))


@elementwise("Relu", outputs=ACTIVATIONS)
def relu(features):
    """activations = max(features, 0)."""
    # tie: gradient 0 at features == 0, as TensorFlow's ReluGrad (`features > 0`)
    return sp.Piecewise((features, features > 0), (0, True))


@elementwise("Relu6", outputs=ACTIVATIONS)
def relu6(features):
    """activations = min(max(features, 0), 6)."""
    # tie: gradient 0 at features == 0 and at 6, as TensorFlow's Relu6Grad (`0 < y < 6`)
    return sp.Piecewise((0, features <= 0), (6, features >= 6), (features, True))


@elementwise("Elu", outputs=ACTIVATIONS)
def elu(features):
    """activations = features where positive, else exp(features) - 1."""
    # tie: gradient exp(0) = 1 at 0, as TensorFlow's EluGrad (`activations > 0` else +1)
    return sp.Piecewise((features, features > 0), (sp_expm1(features), True))


@elementwise("Selu", outputs=ACTIVATIONS)
def selu(features):
    """activations = scale * (features where positive, else alpha * (exp(features) - 1))."""
    # tie: gradient `scale` at 0, as TensorFlow's SeluGrad (`activations < 0` else scale)
    return sp.Piecewise(
        (SELU_SCALE * features, features >= 0),
        (SELU_SCALE * SELU_ALPHA * sp_expm1(features), True),
    )


@elementwise("LeakyRelu", attrs={"alpha": float}, defaults={"alpha": 0.2}, outputs=ACTIVATIONS)
def leaky_relu(features, alpha):
    """activations = features where positive, else alpha * features."""
    # tie: gradient alpha at 0, as TensorFlow's LeakyReluGrad (`features > 0`)
    return sp.Piecewise((features, features > 0), (alpha * features, True))


# --- sign -------------------------------------------------------------------------------------


@elementwise("Abs")
def absolute(x):
    """y = |x|."""
    # tie: d|x|/dx = sign(x), 0 at x == 0, as TensorFlow's AbsGrad
    return sp.Abs(x)


@elementwise("Neg", complex=True)
def negative(x):
    """y = -x."""
    return -x


# --- rounding: piecewise constant, so the gradient is 0 (TensorFlow's: None, or zeros) --------


@elementwise("Floor")
def floor(x):
    """y = the largest integer <= x."""
    return stop_gradient(sp.floor(x))


@elementwise("Ceil")
def ceil(x):
    """y = the smallest integer >= x."""
    return stop_gradient(sp.ceiling(x))


@elementwise("Rint")
def round_to_int(x):
    """y = x rounded to the nearest integer, ties to even."""
    return stop_gradient(rint(x))


@elementwise("Round")
def round_half_even(x):
    """y = x rounded to the nearest integer, ties to even (as Rint, for floats)."""
    return stop_gradient(rint(x))


@elementwise("Sign")
def sign(x):
    """y = -1, 0 or 1 as x is negative, zero or positive."""
    return stop_gradient(sp.sign(x))
