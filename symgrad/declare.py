"""The declaration API: what an op file says, frozen into `OpDecl` objects.

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
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import sympy as sp

from symgrad.attributes import Attr, AttributeGroups, make_attrs, with_samples
from symgrad.errors import DeclarationError

ELEMENTWISE = "elementwise"
INDEX = "index"


@dataclass(frozen=True)
class Location:
    """Where a declaration sits in its op file, for error messages."""

    file: str  # path of the op file as given
    line: int  # line of the declaration's first decorator

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class OpDecl(AttributeGroups):
    """One declared op, as written; instantiate it per attribute variant with `build`."""

    name: str  # the op type, e.g. "MatMul" (TensorFlow's name when TensorFlow has it)
    func_name: str  # the Python name of the generated functions, e.g. "matmul"
    kind: str  # ELEMENTWISE or INDEX
    attrs: tuple[Attr, ...]  # every attribute, in declaration order
    inputs: tuple[str, ...]  # elementwise input names (index ops name theirs in `tensor()`)
    output_names: tuple[str, ...]  # elementwise output names
    complex_ok: bool  # the op supports complex dtypes: partials are conjugated
    fn: Callable = field(compare=False, repr=False)  # the user's declaration function
    location: Location = field(compare=False)  # where it is declared
    doc: str = ""  # first line of the declaration's docstring
    variadic: str | None = None  # name of the one list input whose length varies by variant
    broadcast_to: str | None = None  # elementwise: the attribute holding the output's shape

    def variants(self) -> list[tuple[tuple[str, Any], ...]]:
        """Every combination of enumerated attribute values, in a stable order."""
        attrs = self.enumerated_attrs
        combos = itertools.product(*(a.values for a in attrs))
        return [tuple(zip((a.name for a in attrs), combo)) for combo in combos]


@dataclass(frozen=True)
class TensorInput:
    """An input of one op variant: a scalar symbol (elementwise) or an IndexedBase."""

    name: str  # input name, as the generated code's parameter
    base: Any  # sp.Symbol (elementwise) or sp.IndexedBase with a symbolic shape (index)
    integer: bool = False  # integer positions (a gather's indices): no gradient
    groups: tuple = ()  # (first axis, count) of the axes of `shape` that one axis of the input is
    ascending: bool = False  # integer positions in ascending order (SegmentSum's segment ids)

    @property
    def shape(self) -> tuple | None:
        """The shape the declaration indexes: an axis declared as a group is several axes."""
        return getattr(self.base, "shape", None)

    @property
    def merged_shape(self) -> tuple | None:
        """The input's own shape: each group of axes of `shape` one axis, their sizes' product."""
        if not self.groups:
            return self.shape
        starts, shape, n = dict(self.groups), [], 0
        while n < len(self.shape):
            count = starts.get(n, 1)
            shape.append(sp.Mul(*self.shape[n : n + count]))
            n += count
        return tuple(shape)


@dataclass(frozen=True)
class Output:
    """An output of one op variant."""

    name: str  # output name
    indices: tuple  # free indices in axis order (empty for elementwise)
    expr: sp.Expr  # its value, in terms of the inputs
    sizes: tuple = ()  # (index, size) for indices declared with their axis size
    groups: tuple = ()  # (first position, count) of index groups one output axis enumerates
    list_name: str | None = None  # the list output this is entry `name` of (Unpack's `output`)


@dataclass(frozen=True)
class OpVariant:
    """An op instantiated for one combination of enumerated attribute values."""

    decl: OpDecl  # the declaration it comes from
    attr_values: tuple[tuple[str, Any], ...]  # the enumerated attributes' values
    inputs: tuple[TensorInput, ...]  # inputs in op order
    outputs: tuple[Output, ...]  # outputs in op order
    stages: tuple[Output, ...] = ()  # intermediate tensors declared with `stage()`, in order


# --- the user-facing API -------------------------------------------------------------------

_tensors: contextvars.ContextVar[list | None] = contextvars.ContextVar("symgrad_tensors", default=None)
_stages: contextvars.ContextVar[list | None] = contextvars.ContextVar("symgrad_stages", default=None)
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


def _with_batch(items) -> tuple:
    """Replace a leading `...` by the batch index; `...` anywhere else is an error."""
    items = tuple(items) if isinstance(items, (tuple, list)) else (items,)
    if any(item is Ellipsis for item in items[1:]):
        raise DeclarationError(f"`...` may only lead a shape or subscript, got {items}")
    return (BATCH,) + items[1:] if items and items[0] is Ellipsis else items


def all_entries(expr: sp.Expr) -> sp.Sum:
    """Sum `expr` over the leading batch axes `...` (all axes of `tensor(name, (...,))`)."""
    return sp.Sum(expr, (BATCH, 0, BATCH_DIM - 1))


class Tensor(sp.IndexedBase):
    """An input tensor: an `IndexedBase` whose subscripts may start with `...`."""

    def __getitem__(self, indices):
        return super().__getitem__(_with_batch(indices))


def tensor(name: str, shape: tuple, *, integer: bool = False, ascending: bool = False) -> Tensor:
    """Declare the next input tensor of the op being built, with its symbolic shape.

    A leading `...` in `shape` (and then in every subscript) stands for any number of leading
    batch axes, so one declaration serves every rank. An `integer` tensor holds positions
    (Gather's `indices`), read in other tensors' subscripts; its gradient is None. An
    `ascending` one holds them in ascending order (SegmentSum's ids), and is drawn so.

    An axis given as a tuple of sizes, `(H, block_size)`, is indexed as that many axes,
    row-major (axis position `h*block_size + b` is entry `[h, b]`): one of the sizes is a
    dimension, inferred from the axis's size at run time, the others are attributes or numbers.
    """
    registry = _tensors.get()
    if registry is None:
        raise DeclarationError(f"tensor({name!r}) called outside an @op declaration")
    if any(t.name == name for t in registry):
        raise DeclarationError(f"input {name!r} declared twice")
    dims_, groups = [], []
    for d in _with_batch(shape):
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
    base = Tensor(name, shape=tuple(dims_))
    if ascending and not integer:
        raise DeclarationError(f"input {name!r}: only an integer tensor can be ascending")
    registry.append(TensorInput(name, base, integer, tuple(groups), ascending))
    return base


def stage(name: str, indices: tuple, expr) -> Tensor:
    """Name an intermediate tensor of the op being built (attention's scores, a hidden layer):
    `name[indices] = expr`, over the inputs and earlier stages. Use the returned tensor in later
    expressions; the gradient is then taken stage by stage (reverse mode), each stage's
    vector-Jacobian product on its own, and the forward's stages are reused by the gradient.

    Each index takes its size from a tensor axis it subscripts in `expr`, or is given as
    `(index, size)`; a leading `...` is the batch axes, as for outputs.
    """
    registry, tensors = _stages.get(), _tensors.get()
    if registry is None:
        raise DeclarationError(f"stage({name!r}) called outside an @op declaration")
    if any(s.name == name for s in registry) or any(t.name == name for t in tensors):
        raise DeclarationError(f"stage {name!r}: the name is already an input or a stage")
    expr = sp.sympify(expr)
    plain, sizes, shape = [], [], []
    for item in _with_batch(indices):
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
    complex: bool = False,
    variadic: str | None = None,
    samples: dict | None = None,
):
    """Declare an index-summation op: `fn(**enumerated_attrs)` returns its outputs.

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
    """
    return _decorator(
        name, INDEX, attrs, defaults, complex, output_names=(), variadic=variadic, samples=samples
    )


def elementwise(
    name: str,
    attrs: dict | None = None,
    *,
    defaults: dict | None = None,
    complex: bool = False,
    outputs: tuple[str, ...] = ("y",),
    broadcast_to: str | None = None,
    samples: dict | None = None,
):
    """Declare an elementwise op: `fn(*inputs, **attrs)` returns a scalar expression.

    `broadcast_to` names an `attr(Ints(), Input(position))` attribute holding a shape the inputs are broadcast to
    (BroadcastTo's `shape`): the output has that shape, and each gradient is summed back to
    its input's shape, as for inputs that broadcast with each other.
    """
    return _decorator(
        name, ELEMENTWISE, attrs, defaults, complex, output_names=tuple(outputs), samples=samples,
        broadcast_to=broadcast_to,
    )


def _decorator(name, kind, attrs, defaults, complex_ok, output_names, variadic=None, samples=None, broadcast_to=None):
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
        doc = (inspect.getdoc(fn) or "").splitlines()
        decl = OpDecl(
            name, fn.__name__, kind, attr_objs, inputs, output_names, complex_ok, fn, location,
            doc[0] if doc else "", variadic, broadcast_to,
        )
        collector = declared.get()
        if collector is not None:
            collector.append(decl)
        return decl

    return wrap


# --- instantiation -------------------------------------------------------------------------


def instantiate(decl: OpDecl, attr_values: tuple[tuple[str, Any], ...]) -> OpVariant:
    """Run the declaration function for one attribute variant.

    Raises:
        DeclarationError: when the function raises or returns something malformed.
    """
    numeric = {a.name: a.value_in_declaration for a in decl.numeric_attrs}
    kwargs = {**dict(attr_values), **numeric}
    if decl.kind == ELEMENTWISE:
        return _instantiate_elementwise(decl, attr_values, kwargs)
    return _instantiate_index(decl, attr_values, kwargs)


def _instantiate_elementwise(decl, attr_values, kwargs) -> OpVariant:
    symbols = {name: sp.Symbol(name, real=True) for name in decl.inputs}
    result = _call(decl, {**symbols, **kwargs})
    exprs = result if isinstance(result, (tuple, list)) else (result,)
    if len(exprs) != len(decl.output_names):
        raise DeclarationError(
            f"declares outputs {decl.output_names} but returned {len(exprs)} expression(s)",
            decl.name,
            decl.location,
        )
    outputs = tuple(
        Output(name, (), _as_expr(decl, e)) for name, e in zip(decl.output_names, exprs)
    )
    inputs = tuple(TensorInput(name, symbols[name]) for name in decl.inputs)
    return OpVariant(decl, attr_values, inputs, outputs)


def _instantiate_index(decl, attr_values, kwargs) -> OpVariant:
    token, stages_token = _tensors.set([]), _stages.set([])
    try:
        result = _call(decl, kwargs)
        inputs, stages = tuple(_tensors.get()), tuple(_stages.get())
    finally:
        _tensors.reset(token)
        _stages.reset(stages_token)
    _check_list_input(decl, attr_values, inputs)
    if not isinstance(result, dict) or not result:
        raise DeclarationError(
            f"must return {{output_name: (indices, expression)}}, got {type(result).__name__}",
            decl.name,
            decl.location,
        )
    outputs = []
    for out_name, value, list_name in _list_outputs_flattened(decl, result):
        if not (isinstance(value, tuple) and len(value) == 2):
            raise DeclarationError(
                f"output {out_name!r} must be (indices, expression), got {value!r}",
                decl.name,
                decl.location,
            )
        idx, expr = value
        idx, sizes, groups = _sized(decl, out_name, _with_batch(idx))
        outputs.append(Output(out_name, idx, _as_expr(decl, expr), sizes, groups, list_name))
    return OpVariant(decl, attr_values, inputs, tuple(outputs), stages)


def _check_list_input(decl: OpDecl, attr_values, inputs) -> None:
    """A list input's tensors are the op's only ones, `<list>_0`, `<list>_1`, ... in order, as
    many as an attribute `attr(..., LengthOf(<list>))` says."""
    if decl.variadic is None:
        return
    names = [t.name for t in inputs]
    if names != [f"{decl.variadic}_{k}" for k in range(len(names))]:
        raise DeclarationError(
            f"the tensors of list input {decl.variadic!r} are {decl.variadic}_0, "
            f"{decl.variadic}_1, ... and the op's only tensor inputs, got {names}",
            decl.name,
            decl.location,
        )
    for attr in decl.attrs:
        if attr.length_of is not None and dict(attr_values)[attr.name] != len(names):
            raise DeclarationError(
                f"{attr.name}={dict(attr_values)[attr.name]} is the length of {attr.length_of!r}, "
                f"but {len(names)} tensor(s) were declared",
                decl.name,
                decl.location,
            )


def _list_outputs_flattened(decl: OpDecl, result: dict) -> list[tuple]:
    """(name, value, list output or None) per output: a list output `output` as `output_0`,
    `output_1`, ..., each naming `output`."""
    lists = [name for name, value in result.items() if isinstance(value, list)]
    if lists and len(result) > 1:
        raise DeclarationError(
            f"a list output must be the op's only output, got outputs {list(result)}",
            decl.name,
            decl.location,
        )
    if lists and not result[lists[0]]:
        raise DeclarationError(f"list output {lists[0]!r} is empty", decl.name, decl.location)
    if lists:
        return [(f"{lists[0]}_{k}", value, lists[0]) for k, value in enumerate(result[lists[0]])]
    return [(name, value, None) for name, value in result.items()]


def _sized(decl: OpDecl, out_name: str, idx: tuple) -> tuple[tuple, tuple, tuple]:
    """Output indices, some given as `(index, size)` (an output axis no input has, such as a
    convolution's), some as a group `(c, (m, M))`: one axis enumerating several indices,
    row-major (DepthwiseConv2dNative's channel `c*M + m`).
    Returns (the indices, ((index, size), ...), ((first position, count) per group))."""
    plain, sizes, groups = [], [], []
    for item in idx:
        members = item if _is_group(item) else None
        if members is not None:
            if len(members) < 2 or BATCH in members:
                raise DeclarationError(
                    f"output {out_name!r}: an index group has two indices or more, none `...`, got {item!r}",
                    decl.name,
                    decl.location,
                )
            groups.append((len(plain), len(members)))
        for member in members if members is not None else (item,):
            if isinstance(member, tuple):
                if len(member) != 2 or not isinstance(member[0], sp.Symbol):
                    raise DeclarationError(
                        f"output {out_name!r}: an index with its size is (index, size), got {member!r}",
                        decl.name,
                        decl.location,
                    )
                sizes.append((member[0], sp.sympify(member[1])))
                member = member[0]
            plain.append(member)
    return tuple(plain), tuple(sizes), tuple(groups)


def _is_group(item) -> bool:
    """An index group: a tuple of indices and (index, size) pairs, not one (index, size)."""
    if not isinstance(item, tuple):
        return False
    is_index = lambda m: isinstance(m, sp.Symbol) and m.is_integer and m.is_positive is not True
    return len(item) > 2 or any(isinstance(m, tuple) for m in item) or (len(item) == 2 and is_index(item[1]))


def _call(decl: OpDecl, kwargs: dict):
    try:
        return decl.fn(**kwargs)
    except DeclarationError as exc:
        raise DeclarationError(exc.what, decl.name, _user_line(exc, decl)) from None
    except Exception as exc:  # the user's code failed: report it at their line
        raise DeclarationError(
            f"{type(exc).__name__}: {exc}", decl.name, _user_line(exc, decl)
        ) from None


def _user_line(exc: BaseException, decl: OpDecl) -> Location:
    """The innermost traceback line inside the op file, else the declaration's line."""
    line = decl.location.line
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == decl.location.file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return Location(decl.location.file, line)


def _as_expr(decl: OpDecl, value) -> sp.Expr:
    try:
        return sp.sympify(value)
    except (sp.SympifyError, TypeError) as exc:
        raise DeclarationError(f"output is not a SymPy expression: {exc}", decl.name, decl.location)
