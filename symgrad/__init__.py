"""symgrad: derive gradients of ops declared with SymPy, emit numpy and TensorFlow modules."""

from symgrad.declare import (
    all_entries,
    axis_attr,
    const_input,
    const_ints,
    dims,
    elementwise,
    indices,
    ints,
    length_of,
    op,
    rank_of,
    scalar_input,
    stage,
    stop_gradient,
    tensor,
)
from symgrad.functions import exact_div, first_maximum, indicator, maximum, minimum, product, read_outside

__version__ = "0.1.0"
__all__ = [
    "all_entries",
    "axis_attr",
    "const_input",
    "const_ints",
    "dims",
    "elementwise",
    "exact_div",
    "first_maximum",
    "indicator",
    "indices",
    "ints",
    "length_of",
    "maximum",
    "minimum",
    "op",
    "product",
    "read_outside",
    "rank_of",
    "scalar_input",
    "stage",
    "stop_gradient",
    "tensor",
    "__version__",
]
