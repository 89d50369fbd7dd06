"""`Value`, any value of the IR, and the variables a value reads."""

from __future__ import annotations

from typing import Union

from symgrad.ir.arrays import BroadcastTo, BroadcastToShape, Conj, Constant, DiagPart, Einsum, Elementwise, Expand, Eye, FusedCall, Iota, MatMul, Reduce, Scan, Squeeze, Stack, SumToShape, Transpose, ZerosLike
from symgrad.ir.kernels import Convolution, Gather, MaxPoolBackprop, ScatterAdd
from symgrad.ir.shapes import Arange, AsTuple, DimSize, IndexArith, IntArray, IntSize, Length, MergeAxes, NegativeAxes, NegativeAxis, Rank, SplitAxis

Value = Union[
    Elementwise, FusedCall, Conj, MatMul, Einsum, Reduce, Transpose, SumToShape, ZerosLike, Expand,
    BroadcastTo, BroadcastToShape, Scan, Squeeze, DimSize, Eye, DiagPart, NegativeAxis, Constant, Iota,
    IntSize, IndexArith, Arange, Gather, ScatterAdd, Rank, NegativeAxes, AsTuple, IntArray,
    MergeAxes, SplitAxis, Length, Stack, Convolution, MaxPoolBackprop,
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
