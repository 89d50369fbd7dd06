"""TensorFlow's gradient kernels (SigmoidGrad, ReluGrad, ...) as ops: their gradients are the
second derivatives of the activations, which TensorFlow also hand-writes.

Inputs are TensorFlow's: the `y, dy` kernels take the forward output y and the upstream dy;
the nn kernels take `gradients` and `features` (or the forward `outputs`).
"""

import sympy as sp

from symgrad import elementwise

from unary import SELU_ALPHA, SELU_SCALE  # noqa: E402  (op files are imported by path)

Z = ("z",)
BACKPROPS = ("backprops",)


@elementwise("SigmoidGrad", outputs=Z)
def sigmoid_grad(y, dy):
    """z = dy * y * (1 - y), Sigmoid's backprop from its output y."""
    return dy * y * (1 - y)


@elementwise("TanhGrad", outputs=Z)
def tanh_grad(y, dy):
    """z = dy * (1 - y**2), Tanh's backprop from its output y."""
    return dy * (1 - y**2)


@elementwise("SqrtGrad", outputs=Z)
def sqrt_grad(y, dy):
    """z = dy / (2 y), Sqrt's backprop from its output y."""
    return dy / (2 * y)


@elementwise("RsqrtGrad", outputs=Z)
def rsqrt_grad(y, dy):
    """z = -dy * y**3 / 2, Rsqrt's backprop from its output y."""
    return -dy * y**3 / 2


@elementwise("ReciprocalGrad", outputs=Z)
def reciprocal_grad(y, dy):
    """z = -dy * y**2, Reciprocal's backprop from its output y."""
    return -dy * y**2


@elementwise("InvGrad", outputs=Z)
def inv_grad(y, dy):
    """z = -dy * y**2, Inv's backprop from its output y."""
    return -dy * y**2


@elementwise("ReluGrad", outputs=BACKPROPS)
def relu_grad(gradients, features):
    """backprops = gradients where features > 0, else 0."""
    # a step in features: no gradient for features, as TensorFlow's ReluGradGrad
    return sp.Piecewise((gradients, features > 0), (0, True))


@elementwise("Relu6Grad", outputs=BACKPROPS)
def relu6_grad(gradients, features):
    """backprops = gradients where 0 < features < 6, else 0."""
    return sp.Piecewise((gradients, (features > 0) & (features < 6)), (0, True))


@elementwise("LeakyReluGrad", attrs={"alpha": float}, defaults={"alpha": 0.2}, outputs=BACKPROPS)
def leaky_relu_grad(gradients, features, alpha):
    """backprops = gradients where features > 0, else alpha * gradients."""
    return sp.Piecewise((gradients, features > 0), (alpha * gradients, True))


@elementwise("EluGrad", outputs=BACKPROPS)
def elu_grad(gradients, outputs):
    """backprops = gradients where Elu's outputs > 0, else gradients * (outputs + 1)."""
    # the branches meet at outputs == 0; there the derivative in outputs is 0, as
    # TensorFlow's EluGradGrad (`outputs < 0`)
    return sp.Piecewise((gradients, outputs >= 0), (gradients * (outputs + 1), True))


@elementwise("SeluGrad", outputs=BACKPROPS)
def selu_grad(gradients, outputs):
    """backprops = gradients * scale where Selu's outputs >= 0, else gradients * (outputs + scale * alpha)."""
    return sp.Piecewise(
        (gradients * (outputs + SELU_SCALE * SELU_ALPHA), outputs < 0),
        (gradients * SELU_SCALE, True),
    )


@elementwise("SoftplusGrad", outputs=BACKPROPS)
def softplus_grad(gradients, features):
    """backprops = gradients * sigmoid(features), Softplus's backprop."""
    # sigmoid as (1 + tanh(x / 2)) / 2: neither it nor its derivative overflows at large |x|
    return gradients * (1 + sp.tanh(features / 2)) / 2
