"""symgrad: derive gradients of ops declared with SymPy, emit numpy and TensorFlow modules.

The declaration language (`from symgrad import op, tensor, ...`) is imported, with SymPy, when
a name of it is first used, so that the command line starts at once.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

_DECLARE = (
    "all_entries",
    "axis_attr",
    "const_input",
    "const_ints",
    "dims",
    "elementwise",
    "indices",
    "ints",
    "length_of",
    "op",
    "rank_of",
    "scalar_input",
    "stage",
    "stop_gradient",
    "tensor",
)
_FUNCTIONS = (
    "exact_div",
    "first_maximum",
    "indicator",
    "maximum",
    "minimum",
    "product",
    "read_outside",
)
__all__ = sorted(_DECLARE + _FUNCTIONS) + ["__version__"]

if TYPE_CHECKING:
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
    from symgrad.functions import (
        exact_div,
        first_maximum,
        indicator,
        maximum,
        minimum,
        product,
        read_outside,
    )


def __getattr__(name: str):
    module = "symgrad.declare" if name in _DECLARE else "symgrad.functions" if name in _FUNCTIONS else None
    if module is None:
        raise AttributeError(f"module 'symgrad' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
