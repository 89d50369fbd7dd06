"""Lowering: derivations in, IR functions out (matmuls, reductions, gathers; never a Jacobian).

`op.lower_op` lowers every variant of one op, given its `OpSignature`; each tensor value is
lowered by a `tensor.TensorLowering`, which owns alignment and temporaries and applies the
ordered table of `rules` (one module per kind of math: `entries`, `sums`, `reductions`,
`contraction`, `convolution`, `scatters`, `indices`); `staged` lowers the forward stages a
gradient reads, recomputed apart unless they are passed.
"""

from symgrad.lowering.op import lower_op
from symgrad.lowering.signature import OpSignature

__all__ = ["OpSignature", "lower_op"]
