"""Ops TensorFlow registers no gradient for: symgrad's gradient is registered under their type."""

import sympy as sp

from symgrad import elementwise


@elementwise("SoftsignGrad", outputs=("backprops",))
def softsign_grad(gradients, features):
    """Softsign's backprop, gradients / (1 + |features|)**2: its gradient is Softsign's second order."""
    # at features == 0 the derivative of |features| is taken as 0 (sign(0) = 0)
    return gradients / (1 + sp.Abs(features)) ** 2
