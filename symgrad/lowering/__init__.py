"""Lowering: derivations in, IR functions out (matmuls, reductions, gathers; never a Jacobian).

`op.lower_op` lowers every variant of one op, given its `OpSignature`: an elementwise op's
branches by `elementwise`; each tensor value by a `tensor.TensorLowering`, which owns
alignment and temporaries and applies the ordered table of `rules` (one module per kind of
math: `entries`, `sums`, `reductions`, `contraction`, `convolution`, `scatters`, `indices`);
`staged` lowers the forward stages a gradient reads, recomputed apart unless they are passed.

The package imports none of its modules: each is imported by name (`symgrad.lowering.op`),
so that the rule modules can import the package's others without a cycle through it.
"""
