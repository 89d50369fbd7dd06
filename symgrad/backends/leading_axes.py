"""Runtime helpers the PyTorch and JAX modules share (`symgrad.runtime_module` writes them
into both runtime modules): an op declared over one leading batch axis, called with any
number of them, as its namesake is (`symgrad.backends.conventions`). Only the arrays'
own `reshape`, so the same code serves torch tensors and JAX arrays."""


def _leading_flattened(ranks, *arrays):
    """(the leading axes, `arrays` with them flattened into one): array n is declared with
    `ranks[n]` axes, the first of them the batch axis; the first array's extra axes lead."""
    first, rank = arrays[0], ranks[0]
    lead = tuple(first.shape[: first.ndim - rank + 1])
    return lead, tuple(x.reshape((-1,) + tuple(x.shape[x.ndim - r + 1 :])) for x, r in zip(arrays, ranks))


def _leading_restored(lead, y):
    """`y`, its first axis the flattened leading axes `lead`, with them back."""
    return y.reshape(tuple(lead) + tuple(y.shape[1:]))
