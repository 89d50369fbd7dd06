"""Per-output dtypes: an output whose dtype is not its inputs'.

A declaration's inputs share one dtype, T (TensorFlow's `T`, or Cast's `SrcT`), which runs
over the real dtypes, and the complex ones too with `complex=True` (`complex="only"`: the
complex ones alone). `output_dtypes={output: kind}` gives an output another dtype:

| kind | the output's dtype |
| --- | --- |
| `"real"` | the real dtype of T's precision (ComplexAbs's: float32 for complex64) |
| `"complex"` | the complex dtype of T's precision (Complex's: complex64 for float32) |
| the name of a `DType()` attribute | that attribute's value, read at run time (Cast's `DstT`) |

Such an op's gradient is taken by Wirtinger derivatives (`symgrad.wirtinger`), and each
input's gradient is returned in that input's dtype (its real part for a real input).
"""

from __future__ import annotations

import numpy as np

from symgrad.errors import DeclarationError

KINDS = ("real", "complex")


def checked_output_dtypes(name, location, kind, complex_ok, output_names, attrs, output_dtypes: dict) -> tuple:
    """`output_dtypes` as (output, kind) pairs, checked against the declaration."""
    if complex_ok not in (False, True, "only"):
        raise DeclarationError(f'complex is False, True or "only", got {complex_ok!r}', name, location)
    dtype_attrs = {a.name for a in attrs if a.is_dtype}
    for output, dtype in output_dtypes.items():
        if dtype not in KINDS and dtype not in dtype_attrs:
            raise DeclarationError(
                f"output_dtypes[{output!r}] is 'real', 'complex' or a DType() attribute "
                f"{sorted(dtype_attrs)}, got {dtype!r}",
                name,
                location,
            )
        if kind == "elementwise" and output not in output_names:
            raise DeclarationError(f"output_dtypes names {output!r}, not an output {output_names}", name, location)
    return tuple(output_dtypes.items())


def real_dtype(dtype) -> np.dtype:
    """The real dtype of `dtype`'s precision (float32 for complex64)."""
    return np.finfo(np.dtype(dtype)).dtype


def complex_dtype(dtype) -> np.dtype:
    """The complex dtype of `dtype`'s precision (complex64 for float32)."""
    return np.result_type(real_dtype(dtype), np.complex64)


def output_dtype(decl, output: str, dtype, attrs: dict) -> np.dtype:
    """The dtype of `output` of `decl` called with inputs of `dtype` and attributes `attrs`."""
    kind = dict(decl.output_dtypes).get(output)
    if kind is None:
        return np.dtype(dtype)
    if kind == "real":
        return real_dtype(dtype)
    if kind == "complex":
        return complex_dtype(dtype)
    return np.dtype(str(attrs[kind]))


def output_real(decl, output: str, attr_values: dict) -> bool:
    """Whether `output` is real whatever T is (its upstream gradient is real): declared
    "real", or of a DType attribute whose enumerated value is real; T real only."""
    kind = dict(decl.output_dtypes).get(output)
    if kind == "real":
        return True
    if kind == "complex" or kind is not None:
        return False
    return not decl.complex_ok
