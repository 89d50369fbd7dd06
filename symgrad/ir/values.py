"""`Value`, any value of the IR, and the variables a value reads."""

from __future__ import annotations

import dataclasses
import re
from typing import Union

import sympy as sp

from symgrad.ir.arrays import BroadcastTo, BroadcastToShape, Conj, Constant, DiagPart, Einsum, Elementwise, Expand, Eye, Flip, FusedCall, Iota, MatMul, Reduce, Scan, Softmax, SoftmaxBackward, Squeeze, Stack, SumToShape, Transpose, ZerosLike
from symgrad.ir.kernels import Convolution, Gather, MaxPoolBackprop, ScatterAdd
from symgrad.ir.shapes import Arange, AsTuple, DimSize, IndexArith, IntArray, IntSize, Length, MergeAxes, NegativeAxes, NegativeAxis, Rank, SplitAxis

Value = Union[
    Elementwise, FusedCall, Conj, MatMul, Flip, Einsum, Reduce, Transpose, SumToShape, ZerosLike, Expand,
    BroadcastTo, BroadcastToShape, Scan, Squeeze, DimSize, Eye, DiagPart, NegativeAxis, Constant, Iota,
    IntSize, IndexArith, Arange, Gather, ScatterAdd, Rank, NegativeAxes, AsTuple, IntArray,
    MergeAxes, SplitAxis, Length, Stack, Convolution, MaxPoolBackprop, Softmax, SoftmaxBackward,
]


def reads(value: Value) -> set[str]:
    """The variables whose values `value` reads (not only their shapes)."""
    if isinstance(value, (Elementwise, IndexArith)):
        return {str(s) for s in value.expr.free_symbols}
    if isinstance(value, Gather):
        return {value.x, value.positions}
    if isinstance(value, ScatterAdd):
        return {value.values, value.positions}
    if isinstance(value, (MergeAxes, SplitAxis)):
        return reads(value.x) if isinstance(value.x, Elementwise) else {value.x}
    if isinstance(value, Arange):
        return {value.n}
    if isinstance(value, (SumToShape, BroadcastTo, FusedCall)):
        return reads(value.value)
    if isinstance(value, BroadcastToShape):
        return reads(value.value) | {value.shape}
    if isinstance(value, MatMul):
        return {value.a, value.b}
    if isinstance(value, SoftmaxBackward):
        return {value.grad, value.output}
    if isinstance(value, Softmax):
        return {value.x} | ({value.mask} if value.mask else set())
    if isinstance(value, (Einsum, Convolution, MaxPoolBackprop)):
        return set(value.operands)
    if isinstance(value, Stack):
        return set(value.values)
    if isinstance(value, (ZerosLike, DimSize, Eye, Constant, Iota, IntSize, Rank, Length)):
        return set()
    if isinstance(value, NegativeAxis):
        return {value.axis}
    if isinstance(value, NegativeAxes):
        return {value.axes}
    if isinstance(value, Scan) and value.by is not None:
        return (reads(value.x) if isinstance(value.x, Elementwise) else {value.x}) | reads(value.by)
    return reads(value.x) if isinstance(value.x, Elementwise) else {value.x}


def names_in(value) -> set[str]:
    """Every variable `value` names, for its values or its shapes (an iota reads a shape;
    a shape given as text, "(t1, t2)", names t1 and t2)."""
    if isinstance(value, str):
        return set(re.findall(r"[A-Za-z_]\w*", value))
    if isinstance(value, sp.Basic):
        return {str(s) for s in value.free_symbols}
    if isinstance(value, (tuple, list)):
        return set().union(*(names_in(v) for v in value))
    if dataclasses.is_dataclass(value):
        return set().union(*(names_in(getattr(value, f.name)) for f in dataclasses.fields(value)))
    return set()
