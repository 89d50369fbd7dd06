"""The declaration API: what an op file says, frozen into `OpDecl` objects (`declaration`).

An op file declares ops with two decorators:

* `@elementwise("Sigmoid")` on a function of scalar SymPy symbols (one per input) that
  returns the output's scalar expression; inputs broadcast like numpy.
* `@op("MatMul", attrs=...)` on a function of the op's enumerated attributes that creates
  its input tensors with `tensor()` and returns `{output: (free_indices, expression)}`.

Attributes (`symgrad.attributes`) are enumerated (`bool`, a tuple of values, an axis: one
derivation per combination) or numeric (`float`, `int`, integers: a symbol in the derivation,
read at run time).
"""

from __future__ import annotations

import contextvars
import inspect
from typing import Callable

import sympy as sp

from symgrad.attributes import make_attrs, with_samples
from symgrad.declaration import ELEMENTWISE, INDEX, Location, OpDecl, Output, TensorInput
from symgrad.dtypes import checked_output_dtypes
from symgrad.errors import DeclarationError
from symgrad.functions import holds
from symgrad.namesakes import checked_namesakes

collected_tensors: contextvars.ContextVar[list | None] = contextvars.ContextVar("symgrad_tensors", default=None)
collected_stages: contextvars.ContextVar[list | None] = contextvars.ContextVar("symgrad_stages", default=None)
# while an op file loads, every declaration is appended here (even one whose name is rebound)
declared: contextvars.ContextVar[list | None] = contextvars.ContextVar("symgrad_declared", default=None)


def dims(names: str) -> tuple[sp.Symbol, ...]:
    """Symbolic dimension sizes: positive integers, e.g. `M, K, N = dims("M K N")`."""
    return sp.symbols(names, integer=True, positive=True, seq=True)


def indices(names: str) -> tuple[sp.Symbol, ...]:
    """Index symbols, e.g. `i, j, k = indices("i j k")`; ranges come from tensors and Sums."""
    return sp.symbols(names, integer=True, seq=True)


# `...` in a shape or a subscript: any number of leading batch axes, as in einsum
BATCH_DIM = sp.Symbol("batch_shape", integer=True, positive=True)
BATCH = sp.Symbol("batch", integer=True)


def with_batch(items) -> tuple:
    """Replace a leading `...` by the batch index; `...` anywhere else is an error."""
    items = tuple(items) if isinstance(items, (tuple, list, sp.Tuple)) else (items,)
    if any(item is Ellipsis for item in items[1:]):
        raise DeclarationError(f"`...` may only lead a shape or subscript, got {items}")
    return (BATCH,) + items[1:] if items and items[0] is Ellipsis else items


def all_entries(expr: sp.Expr) -> sp.Sum:
    """Sum `expr` over the leading batch axes `...` (all axes of `tensor(name, (...,))`)."""
    return sp.Sum(expr, (BATCH, 0, BATCH_DIM - 1))


class Tensor(sp.IndexedBase):
    """An input tensor: an `IndexedBase` whose subscripts may start with `...`."""

    def __getitem__(self, indices):
        return super().__getitem__(with_batch(indices))


class BoolTensor(Tensor):
    """A bool input tensor: its entries are conditions, `holds(entry)`."""

    def __getitem__(self, indices):
        return holds(super().__getitem__(indices))


def tensor(
    name: str,
    shape: tuple,
    *,
    integer: bool = False,
    ascending: bool = False,
    boolean: bool = False,
    distinct: bool = False,
    equals: tuple | None = None,
) -> Tensor:
    """Declare the next input tensor of the op being built, with its symbolic shape.

    A leading `...` in `shape` (and then in every subscript) stands for any number of leading
    batch axes, so one declaration serves every rank. An `integer` tensor holds positions
    (Gather's `indices`), read in other tensors' subscripts; its gradient is None. An
    `ascending` one holds them in ascending order (SegmentSum's ids), and is drawn so. A
    `distinct` one never holds one position twice along its first axis (TensorScatterUpdate's
    rows of indices, where TensorFlow leaves a repeated position undefined), and is drawn so. A
    `boolean` tensor holds conditions (`sp.Piecewise((x[i], mask[i]), (0, True))`); its
    gradient is None too.

    An axis given as a tuple of sizes, `(H, block_size)`, is indexed as that many axes,
    row-major (axis position `h*block_size + b` is entry `[h, b]`): one of the sizes is a
    dimension, inferred from the axis's size at run time, the others are attributes or numbers.
    """
    registry = collected_tensors.get()
    if registry is None:
        raise DeclarationError(f"tensor({name!r}) called outside an @op declaration")
    if any(t.name == name for t in registry):
        raise DeclarationError(f"input {name!r} declared twice")
    dims_, groups = _axis_sizes(name, shape)
    base = (BoolTensor if boolean else Tensor)(name, shape=dims_)
    if (ascending or distinct) and not integer:
        raise DeclarationError(f"input {name!r}: only an integer tensor can be ascending or distinct")
    equals = _checked_equals(name, equals, len(dims_))
    registry.append(TensorInput(name, base, integer or boolean, groups, ascending, boolean, distinct, equals))
    return base


def _axis_sizes(name: str, shape: tuple) -> tuple[tuple, tuple]:
    """The sizes a tensor's declaration indexes (an axis given as a group of sizes, each of
    them), and (first axis, count) per group."""
    dims_, groups = [], []
    for d in with_batch(shape):
        if isinstance(d, tuple):
            members = tuple(sp.sympify(m) for m in d)
            inferred = [m for m in members if m.is_Symbol and m.is_integer and m.is_positive]
            if len(members) < 2 or len(inferred) != 1:
                raise DeclarationError(
                    f"input {name!r}: an axis given as a group has two sizes or more, exactly one "
                    f"of them a dimension (inferred at run time), got {d!r}"
                )
            groups.append((len(dims_), len(members)))
            dims_.extend(members)
        else:
            dims_.append(BATCH_DIM if d is BATCH else sp.sympify(d))
    return tuple(dims_), tuple(groups)


def _checked_equals(name: str, equals, rank: int) -> tuple | None:
    """A tensor's `equals=(indices, expression)`, checked: one index per axis of `rank`."""
    if equals is None:
        return None
    if not (isinstance(equals, tuple) and len(equals) == 2 and len(tuple(equals[0])) == rank):
        raise DeclarationError(f"input {name!r}: equals=(indices, expression) with one index per axis, got {equals!r}")
    return tuple(equals[0]), sp.sympify(equals[1])


def stage(name: str, indices: tuple, expr) -> Tensor:
    """Name an intermediate tensor of the op being built (attention's scores, a hidden layer):
    `name[indices] = expr`, over the inputs and earlier stages. Use the returned tensor in later
    expressions; the gradient is then taken stage by stage (reverse mode), each stage's
    vector-Jacobian product on its own, and the forward's stages are reused by the gradient.

    Each index takes its size from a tensor axis it subscripts in `expr`, or is given as
    `(index, size)`; a leading `...` is the batch axes, as for outputs.
    """
    registry, tensors = collected_stages.get(), collected_tensors.get()
    if registry is None:
        raise DeclarationError(f"stage({name!r}) called outside an @op declaration")
    if any(s.name == name for s in registry) or any(t.name == name for t in tensors):
        raise DeclarationError(f"stage {name!r}: the name is already an input or a stage")
    expr = sp.sympify(expr)
    plain, sizes, shape = [], [], []
    for item in with_batch(indices):
        index, size = item if isinstance(item, tuple) else (item, None)
        if index is BATCH:
            size = BATCH_DIM
        elif size is None:
            size = _axis_size_of(expr, index)
            if size is None:
                raise DeclarationError(
                    f"stage {name!r}: index {index} subscripts no tensor axis directly in {expr}; "
                    f"give its size as ({index}, size)"
                )
        plain.append(index)
        shape.append(sp.sympify(size))
        if index is not BATCH:
            sizes.append((index, sp.sympify(size)))
    registry.append(Output(name, tuple(plain), expr, tuple(sizes)))
    return Tensor(name, shape=tuple(shape))


def _axis_size_of(expr, index):
    """The size of a tensor axis that `index` subscripts directly in `expr`, else None."""
    for entry in sorted(expr.atoms(sp.Indexed), key=str):
        shape = entry.base.shape or ()
        for axis, sub in enumerate(entry.indices):
            if sub == index and axis < len(shape):
                return shape[axis]
    return None


class stop_gradient(sp.Function):
    """The value of its argument, with derivative zero (as `tf.stop_gradient`)."""

    def fdiff(self, argindex=1):
        return sp.S.Zero


def op(
    name: str,
    attrs: dict | None = None,
    *,
    defaults: dict | None = None,
    complex: bool | str = False,
    variadic: str | None = None,
    samples: dict | None = None,
    valid: Callable | None = None,
    output_dtypes: dict | None = None,
    namesakes: dict | None = None,
):
    """Declare an index-summation op: `fn(**enumerated_attrs)` returns its outputs.

    `valid(**enumerated_attrs)` says which combinations of enumerated values are variants
    (GatherV2's `batch_dims <= axis`); the others get the generated code's "unsupported
    attributes" error, as values not enumerated do.

    `variadic` names the op's list input (Einsum's `inputs`, ConcatV2's `values`): its
    tensors are declared as `tensor("values_0", ...)`, `tensor("values_1", ...)`, ..., as many
    as the variant has, and they must be the op's only tensor inputs (constant inputs may come
    before or after them: `Input(-1)` is the input after the list). An output
    returned as a list of `(indices, expression)` pairs is a list output (Unpack's `output`),
    which must be the op's only output.

    `samples` gives, per numeric attribute, the values `symgrad diff` and `symgrad check` call
    the op with (`{"strides": ((1, 1, 1, 1), (1, 2, 2, 1))}`), or a function of the enumerated
    attributes returning them (`lambda rank: ([1] * rank,)`); the first is used throughout,
    each further one in a variant of its own. Without samples an attribute takes its default.

    `complex`, `output_dtypes` and `namesakes` as for `elementwise`; `sp.conjugate(x[...])` of
    an entry makes a complex op's gradient a Wirtinger one (ConjugateTranspose).
    """
    return _decorator(
        name, INDEX, attrs, defaults, complex, output_names=(), variadic=variadic, samples=samples, valid=valid,
        output_dtypes=output_dtypes, namesakes=namesakes,
    )


def elementwise(
    name: str,
    attrs: dict | None = None,
    *,
    defaults: dict | None = None,
    complex: bool | str = False,
    outputs: tuple[str, ...] = ("y",),
    broadcast_to: str | None = None,
    samples: dict | None = None,
    boolean: tuple[str, ...] = (),
    scalars: tuple[str, ...] = (),
    output_dtypes: dict | None = None,
    namesakes: dict | None = None,
):
    """Declare an elementwise op: `fn(*inputs, **attrs)` returns a scalar expression.

    `boolean` names the inputs that are bools (SelectV2's `condition`), used as conditions
    (`sp.Piecewise((t, condition), (e, True))`); their gradient is None.

    `broadcast_to` names an `attr(Ints(), Input(position))` attribute holding a shape the inputs are broadcast to
    (BroadcastTo's `shape`): the output has that shape, and each gradient is summed back to
    its input's shape, as for inputs that broadcast with each other. `scalars` names the inputs
    that are 0-D (Fill's `value`, QuantizeAndDequantizeV2's range): they are verified as
    scalars only.

    `complex`: False (real dtypes), True (real and complex), "only" (complex: Real's input).
    `output_dtypes={output: "real" | "complex" | a DType() attribute}` gives an output a dtype
    of its own (`symgrad.dtypes`); such an op's inputs are complex symbols where they may be
    complex, and its gradient is taken by Wirtinger derivatives (`symgrad.wirtinger`).

    `namesakes={"torch": Namesake(...), "jax": Namesake(...)}`: the function the op stands for
    in PyTorch or JAX, whose conventions (keywords, defaults, `is_causal`, `scale`, leading
    batch axes) the op's wrapper there takes beside TensorFlow's (`symgrad.namesakes`).
    """
    return _decorator(
        name, ELEMENTWISE, attrs, defaults, complex, output_names=tuple(outputs), samples=samples,
        broadcast_to=broadcast_to, boolean=tuple(boolean), scalars=tuple(scalars), output_dtypes=output_dtypes,
        namesakes=namesakes,
    )


def _decorator(name, kind, attrs, defaults, complex_ok, output_names, variadic=None, samples=None, broadcast_to=None, boolean=(), valid=None, scalars=(), output_dtypes=None, namesakes=None):
    def wrap(fn: Callable) -> OpDecl:
        location = Location(fn.__code__.co_filename, fn.__code__.co_firstlineno)
        attr_objs = make_attrs(name, location, attrs or {}, defaults or {}, variadic)
        if broadcast_to is not None and not any(a.name == broadcast_to and a.is_list_input for a in attr_objs):
            raise DeclarationError(
                f"broadcast_to names an attr(Ints(), Input(position)) attribute, got {broadcast_to!r}", name, location
            )
        attr_objs = with_samples(name, location, attr_objs, samples or {})
        params = list(inspect.signature(fn).parameters)
        attr_names = [a.name for a in attr_objs]
        inputs = tuple(p for p in params if p not in attr_names)
        if kind == INDEX and inputs:
            raise DeclarationError(
                f"parameters {inputs} are not attributes; index ops declare inputs with tensor()",
                name,
                location,
            )
        if set(boolean) - set(inputs):
            raise DeclarationError(f"boolean names {sorted(set(boolean) - set(inputs))}, not inputs {inputs}", name, location)
        if set(scalars) - set(inputs):
            raise DeclarationError(f"scalars names inputs of the op {inputs}, got {scalars}", name, location)
        doc = (inspect.getdoc(fn) or "").splitlines()
        dtypes = checked_output_dtypes(name, location, kind, complex_ok, output_names, attr_objs, output_dtypes or {})
        decl = OpDecl(
            name, fn.__name__, kind, attr_objs, inputs, output_names, bool(complex_ok), fn, location,
            doc[0] if doc else "", variadic, broadcast_to, boolean, scalars, valid, dtypes, complex_ok != "only",
            checked_namesakes(name, location, namesakes, attr_names),
        )
        if not decl.variants():
            raise DeclarationError("valid() accepts none of the enumerated attribute values", name, location)
        collector = declared.get()
        if collector is not None:
            collector.append(decl)
        return decl

    return wrap
