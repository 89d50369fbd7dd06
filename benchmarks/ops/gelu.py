"""A GELU activation for the benchmarks, in its exact (erf) form, as `tf.nn.gelu(x)`.

Declared here rather than in ops/: TensorFlow has no GELU op (`tf.nn.gelu` composes Erf, Mul
and AddV2), so this one is benchmarked against TensorFlow's autodiff of that composite.

The tanh approximation, `x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))`, is not
used: symgrad's forward-output reuse hands it to `sympy.solve`, which does not return.
"""

import sympy as sp

from symgrad import elementwise


@elementwise("GeluErf", outputs=("activations",))
def gelu_erf(features):
    """activations = features / 2 * (1 + erf(features / sqrt(2)))."""
    return features / 2 * (1 + sp.erf(features / sp.sqrt(2)))
