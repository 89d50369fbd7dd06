"""The backend-neutral IR: straight-line array statements, grouped into functions.

Values name their operands by variable name; `Elementwise` holds a SymPy expression whose
symbols are variable names (and numeric attributes), printed by each backend's SymPy printer.

| module | what |
| --- | --- |
| `arrays` | array values: elementwise expressions, matmuls, einsums, reductions, scans, reshapes |
| `shapes` | integer values: sizes, ranks, negative axes, index arithmetic, merged and split axes |
| `kernels` | gathers, scatter-adds, convolutions, max-pooling's backprop |
| `values` | `Value`, any of those, and the variables a value reads |
| `code` | statements, branches, functions, an op's code |

Everything is importable from `symgrad.ir` itself.
"""

from symgrad.ir.arrays import (
    AsValues,
    BroadcastTo,
    BroadcastToShape,
    Conj,
    Constant,
    DiagPart,
    Einsum,
    Elementwise,
    Expand,
    Flip,
    Eye,
    FusedCall,
    Iota,
    MatMul,
    Reduce,
    Scan,
    Softmax,
    SoftmaxBackward,
    Squeeze,
    Stack,
    SumToShape,
    Transpose,
    ZerosLike,
)
from symgrad.ir.code import Assign, Branch, Convention, DeclaredShape, Formula, Function, LinearSecondOrder, OpCode, Recompute, Requested, Unset, statements
from symgrad.ir.kernels import Convolution, Gather, MaxPoolBackprop, ScatterAdd
from symgrad.ir.shapes import (
    Arange,
    AsTuple,
    DimSize,
    IndexArith,
    IntArray,
    IntSize,
    Length,
    MergeAxes,
    NegativeAxes,
    NegativeAxis,
    Rank,
    SplitAxis,
    axis_size,
)
from symgrad.ir.values import Value, names_in, reads

__all__ = [
    "Arange", "AsTuple", "AsValues", "Assign", "Branch", "BroadcastTo", "BroadcastToShape", "Conj", "Constant", "Convention", "Convolution",
    "DeclaredShape", "DiagPart", "DimSize", "Einsum", "Elementwise", "Expand", "Eye", "Flip", "Formula", "Function", "FusedCall", "Gather",
    "IndexArith", "IntArray", "IntSize", "Iota", "Length", "LinearSecondOrder", "MatMul", "MaxPoolBackprop",
    "MergeAxes", "NegativeAxes", "NegativeAxis", "OpCode", "Rank", "Recompute", "Reduce", "Requested", "Scan", "ScatterAdd",
    "Softmax", "SoftmaxBackward", "SplitAxis", "Squeeze", "Stack", "SumToShape", "Transpose", "Unset", "Value", "ZerosLike", "axis_size", "names_in", "reads",
    "statements",
]
