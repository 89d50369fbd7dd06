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
    "dims",
    "elementwise",
    "indices",
    "op",
    "stage",
    "stop_gradient",
    "tensor",
)
_ATTRIBUTES = (
    "Attribute",
    "Axis",
    "Choice",
    "DType",
    "Input",
    "Ints",
    "LengthOf",
    "Number",
    "RankOf",
    "SizeOf",
    "attr",
)
_INTEGERS = ("integer_function",)
_FUNCTIONS = ("exact_div", "indicator", "product", "read_outside")
_EXTREMA = ("argmax", "argmin", "first_maximum", "maximum", "minimum")
_NAMESAKES = ("Namesake",)
__all__ = sorted(_DECLARE + _ATTRIBUTES + _FUNCTIONS + _EXTREMA + _INTEGERS + _NAMESAKES) + ["__version__"]

if TYPE_CHECKING:
    from symgrad.attributes import Attribute, Axis, Choice, DType, Input, Ints, LengthOf, Number, RankOf, SizeOf, attr
    from symgrad.declare import (
        all_entries,
        dims,
        elementwise,
        indices,
        op,
        stage,
        stop_gradient,
        tensor,
    )
    from symgrad.integers import integer_function
    from symgrad.functions import exact_div, indicator, product, read_outside
    from symgrad.extrema import argmax, argmin, first_maximum, maximum, minimum
    from symgrad.namesakes import Namesake


def __getattr__(name: str):
    modules = {
        "symgrad.declare": _DECLARE,
        "symgrad.attributes": _ATTRIBUTES,
        "symgrad.functions": _FUNCTIONS,
        "symgrad.extrema": _EXTREMA,
        "symgrad.integers": _INTEGERS,
        "symgrad.namesakes": _NAMESAKES,
    }
    module = next((m for m, names in modules.items() if name in names), None)
    if module is None:
        raise AttributeError(f"module 'symgrad' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
