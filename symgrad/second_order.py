"""Second order: an op's vector-Jacobian product declared as an op of its own, derived again.

The gradient op G of an op has as inputs the upstream gradients and then the op's inputs, and
an output `vjp_<input>` per input with a gradient (not None in `<op>_grad`'s results): the
derived gradient.
Its own gradient, derived by the same engine (`derive`, `simplify`, lowering), is the op's
second-order vector-Jacobian product, emitted in the numpy module as
`<op>_grad_grad(grad_vjp_<input>..., grads..., inputs..., *, attrs)` (a cotangent per input of
the op, unused where `<op>_grad` gives None): one array per input of G,
the gradients w.r.t. the upstream gradients first (a Jacobian-vector product of the op), then
w.r.t. each input (a Hessian-vector product). G's forward is the op's `<op>_grad` itself.

Taken from the derivation before simplification: its outputs' values are then written in the
op's inputs alone (a reused forward output, `y` for `exp(x)`, would be a second input that is
not one). A composed op's gradient op is composed too (`_gradient_stages`): its stages are
the op's forward stages, then each stage's gradient, last stage first, as a hand-written
second order would keep them. A list input's gradients are a list output of G, and a list
output's upstream gradients a list input of G, before the op's inputs (`<op>_grad` takes them
as one list).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits

from symgrad.declare import BATCH, BATCH_DIM, Tensor, stop_gradient
from symgrad.declaration import ELEMENTWISE, OpVariant, Output, TensorInput
from symgrad.derivation import Derivation
from symgrad.derive import derive, elementwise_vjp, partial_derivative, upstream_symbol
from symgrad.errors import SymgradError
from symgrad.functions import at_position
from symgrad.ir import Assign, Conj, OpCode
from symgrad.simplify import simplify
from symgrad.stages import split_stages
from symgrad.wirtinger import uses_wirtinger, wirtinger_vjp

PREFIX = "vjp_"  # G's outputs: vjp_<input>; its upstream gradients: grad_vjp_<input>


def supported(derivation: Derivation) -> bool:
    """Whether this derivation's gradient op can be declared (see the module's docstring):
    not where nothing has a gradient, nor for a list input and a list output (IdentityN's),
    whose gradient op would take two lists of varying length."""
    both_lists = derivation.variant.decl.variadic and derivation.variant.outputs[0].list_name
    if uses_wirtinger(derivation.variant) and derivation.variant.decl.kind != ELEMENTWISE:
        return False  # an index op's gradient op in conj(x[...]) is not declared yet
    return not both_lists and any(v is not None for v in derivation.vjp.values())


def gradient_op(derivation: Derivation) -> OpVariant:
    """The gradient op of `derivation`'s variant, for one attribute variant."""
    variant = derivation.variant
    name = f"{variant.decl.name}Grad"
    with_gradient = [t for t in variant.inputs if derivation.vjp[t.name] is not None]
    if uses_wirtinger(variant):
        return wirtinger_gradient_op(derivation, with_gradient)
    if variant.decl.kind == ELEMENTWISE:
        grads = tuple(TensorInput(g, sp.Symbol(g, real=True)) for g in derivation.grad_names)
        stopped = elementwise_vjp(variant, stopped=True)
        outputs = tuple(Output(PREFIX + t.name, (), stopped[t.name]) for t in with_gradient)
    else:
        grads = tuple(_grad_input(derivation, g, o) for g, o in zip(derivation.grad_names, variant.outputs))
        # the outputs' own index names: `x_0` would be taken by the engine for input x's first axis
        outputs = tuple(
            _value_output(derivation, PREFIX + t.name, derivation.vjp[t.name], t.base, "_", t.groups)
            for t in with_gradient
        )
    variadic = variant.decl.variadic
    if variadic:  # a list input's gradients: a list output
        listed = {PREFIX + t.name for t in variant.inputs if t.name.startswith(f"{variadic}_")}
        outputs = tuple(dataclasses.replace(o, list_name=PREFIX + variadic) if o.name in listed else o for o in outputs)
    elif variant.outputs[0].list_name:  # a list output's upstream gradients: a list input
        variadic = f"grad_{variant.outputs[0].list_name}"
    stages = _gradient_stages(derivation) if derivation.staging is not None else ()
    outputs, stages = _read_as_declared(grads + variant.inputs, outputs, stages, derivation.staging)
    decl = dataclasses.replace(
        variant.decl,
        complex_ok=False,  # its holomorphic partials: `complex_form` turns them into the vjp
        name=name,
        variadic=variadic,
        func_name=f"{variant.decl.func_name}_grad",
        inputs=tuple(t.name for t in grads + variant.inputs),
        output_names=tuple(o.name for o in outputs),
    )
    return OpVariant(decl, variant.attr_values, grads + variant.inputs, outputs, stages)


def wirtinger_gradient_op(derivation: Derivation, with_gradient: list) -> OpVariant:
    """The gradient op of an elementwise Wirtinger op: `vjp_x = g conj(df/dx) + conj(g)
    df/d(conj x)` in x itself (its real part for a real x), a function of g, conj(g), x and
    conj(x) derived again by Wirtinger derivatives; the upstream gradient of a real output is
    real, and so is `vjp_x` of a real x (`output_dtypes`)."""
    variant = derivation.variant
    grads = tuple(TensorInput(g, upstream_symbol(variant, g, o)) for g, o in zip(derivation.grad_names, variant.outputs))
    differentiate = lambda expr, wrt: partial_derivative(variant, expr, wrt, stopped=True)
    outputs = tuple(
        Output(PREFIX + t.name, (), sum(
            (wirtinger_vjp(o.expr, t.base, g.base, differentiate) for o, g in zip(variant.outputs, grads)),
            sp.S.Zero,
        ))
        for t in with_gradient
    )
    decl = dataclasses.replace(
        variant.decl,
        name=f"{variant.decl.name}Grad",
        func_name=f"{variant.decl.func_name}_grad",
        inputs=tuple(t.name for t in grads + variant.inputs),
        output_names=tuple(o.name for o in outputs),
        complex_ok=True,  # its inputs read conjugated, its gradient in TensorFlow's convention
        real_ok=False,  # taken by Wirtinger derivatives
        output_dtypes=tuple((PREFIX + t.name, "real") for t in with_gradient if t.base.is_real),
    )
    return OpVariant(decl, variant.attr_values, grads + variant.inputs, outputs)


def _gradient_stages(derivation: Derivation) -> tuple[Output, ...]:
    """A composed op's gradient op's stages: the op's forward stages as split (the markers
    `stop_gradient` kept), then `vjp_<stage>` per stage with a gradient (the first order's
    `grad_<stage>`: G's own gradients take those names), last stage first."""
    staging = derivation.staging
    split = split_stages(derivation.variant)
    shapes = {t.name: t.base for t in staging.tensors}
    forward = tuple(dataclasses.replace(s, sizes=_sizes(s.indices, shapes[s.name])) for s in split.stages)
    backward = tuple(
        _value_output(derivation, PREFIX + name, value, shapes[name], "_axis")
        for name, value in staging.grads.items()
        if value is not None
    )
    return forward + backward


def _read_as_declared(inputs, outputs, stages, staging) -> tuple:
    """`outputs` and `stages` with every tensor read through the one base the gradient op
    declares for it (the derivation built some reads anew: an upstream gradient per stage),
    a stage's first-order gradient `grad_<stage>` read as the stage `vjp_<stage>`."""
    bases = {t.name: t.base for t in inputs if isinstance(t.base, sp.IndexedBase)}
    for stage in stages:
        if stage.indices and stage.name.startswith(PREFIX):  # the forward's are read as split
            sizes = dict(stage.sizes)
            shape = tuple(BATCH_DIM if i == BATCH else sizes[i] for i in stage.indices)
            bases[stage.name] = Tensor(stage.name, shape=shape)
    renamed = {f"grad_{name}": PREFIX + name for name in staging.grads} if staging is not None else {}
    label = lambda e: renamed.get(str(e.base.label), str(e.base.label))
    canonical = lambda e: isinstance(e, sp.Indexed) and label(e) in bases
    read = lambda e: bases[label(e)][e.indices]
    scalars = {sp.Symbol(old): sp.Symbol(new) for old, new in renamed.items()}  # stages with no axes
    restate = lambda values: tuple(
        dataclasses.replace(o, expr=o.expr.replace(canonical, read).xreplace(scalars)) for o in values
    )
    return restate(outputs), restate(stages)


def _value_output(derivation: Derivation, name: str, value, base, axis: str, groups: tuple = ()) -> Output:
    """`name[axes] = value` (a `TensorValue`: an input's gradient, a stage's) with axes
    `<name><axis><n>` of its own, each sized as `base`'s (an index may read no axis directly,
    Pad's `grad[i + before]`, or none at all, Sum's gradient along the summed axis) and
    grouped as `groups`, the op's own outputs it reads written as their expressions, what the
    declaration stops stopped again."""
    shape = base.shape if isinstance(base, sp.IndexedBase) else ()
    axes = tuple(BATCH if d == BATCH_DIM else sp.Symbol(f"{name}{axis}{n}", integer=True) for n, d in enumerate(shape))
    expr = _outputs_expanded(derivation, _summed(name, value)).xreplace(dict(zip(value.indices, axes)))
    return Output(name, axes, _stopped_again(derivation.variant, expr), sizes=_sizes(axes, base), groups=groups)


def _sizes(indices: tuple, base) -> tuple:
    """(index, size) for each of `indices` but the batch, sized as `base`'s axes (a scalar's: none)."""
    shape = base.shape if isinstance(base, sp.IndexedBase) else ()
    return tuple((i, d) for i, d in zip(indices, shape) if i != BATCH)


def _stopped_again(variant: OpVariant, expr: sp.Expr) -> sp.Expr:
    """An index op's `expr` with what the declaration wraps in `stop_gradient` wrapped again
    wherever it occurs, since its first-order derivation strips the marker (an elementwise
    op's gradient op keeps the markers: `elementwise_vjp`): a compound value, or an input read
    nowhere else, has no derivative at second order either; an input also read outside the
    marker is differentiated. A composed op's stages count as split: a stopped stage
    (softmax's maximum) is read as stopped wherever it is."""
    wrapped, tensors = _stopped(variant)
    expr = expr.replace(lambda e: isinstance(e, sp.Indexed) and e.base in tensors, stop_gradient)
    return expr.xreplace({e: stop_gradient(e) for e in wrapped if not (isinstance(e, sp.Indexed) and e.base in tensors)})


@functools.lru_cache(maxsize=8)
def _stopped(variant: OpVariant) -> tuple[frozenset, frozenset]:
    """(the values `variant` stops, the tensors it reads only stopped), found once per variant:
    `_stopped_again` restates every output and stage of its gradient op, and splitting the
    stages of a composed op is not cheap."""
    split = split_stages(variant)
    exprs = [o.expr for o in variant.outputs + variant.stages + split.stages + split.outputs]
    stopped = {e.args[0] for x in exprs for e in x.atoms(stop_gradient)}
    outside = [x.replace(lambda e: isinstance(e, stop_gradient), lambda e: sp.S.Zero) for x in exprs]
    unstopped = set().union(*(x.free_symbols for x in outside))
    wrapped = {e for e in stopped if not (isinstance(e, sp.Symbol) and e in unstopped)}
    # a tensor read only inside the marker (a maximum's stage) is stopped at any indices
    read_outside = {e.base for x in outside for e in x.atoms(sp.Indexed)}
    tensors = {e.base for e in wrapped if isinstance(e, sp.Indexed)} - read_outside
    return frozenset(wrapped), frozenset(tensors)


def _grad_input(derivation: Derivation, name: str, out: Output) -> TensorInput:
    """The upstream gradient of `out` as an input: the very IndexedBase the derivation reads,
    its axes grouped as the output's are (Tile's `(r, multiples[k])`: one axis, two indices)."""
    staged = derivation.staging.grads.values() if derivation.staging is not None else ()
    for value in (*derivation.vjp.values(), *staged):
        for term in value.terms if value is not None else ():
            for entry in term.factor.atoms(sp.Indexed):
                if str(entry.base.label) == name:
                    return TensorInput(name, entry.base, groups=out.groups)
    shape = tuple(derivation.ranges[i][1] + 1 for i in out.indices if i in derivation.ranges)
    return TensorInput(name, sp.IndexedBase(name, shape=shape), groups=out.groups)


def _summed(name: str, value) -> sp.Expr:
    """`value` (a `TensorValue`) as one expression, every index a reduction binds renamed
    apart (`<name>_s0`, ...): the gradient op's stages may bind one letter over two ranges
    (a product's partial products, a cumulative sum's)."""
    expr = sp.Add(*[t.as_sum() for t in value.terms])
    count = itertools.count()

    def apart(reduction):
        fresh = {lim[0]: sp.Symbol(f"{name}_s{next(count)}", integer=True) for lim in reduction.limits if lim[0] != BATCH}
        return reduction.xreplace(fresh)

    return expr.replace(lambda e: isinstance(e, ExprWithLimits), apart)


def _outputs_expanded(derivation: Derivation, expr: sp.Expr) -> sp.Expr:
    """`expr` with each entry of an op output replaced by the output's expression there; read
    at a position a map names (a segment's maximum at an entry's id), a reduction over other
    indices is computed over the output's axis and read there (`at_position`)."""
    staged = derivation.staging.outputs if derivation.staging is not None else derivation.variant.outputs
    outputs = {o.name: o for o in staged}  # a composed op's read its stages

    def expanded(entry):
        out = outputs[str(entry.base.label)]
        reduced = {i for r in out.expr.atoms(ExprWithLimits) for i in r.free_symbols}
        mapped = {i: s for i, s in zip(out.indices, entry.indices) if i in reduced and not (s.is_Symbol or s.is_Integer)}
        expr = out.expr.xreplace({i: s for i, s in zip(out.indices, entry.indices) if i not in mapped})
        sizes = dict(out.sizes)
        for index, position in mapped.items():
            low, high = derivation.ranges.get(index) or (0, sizes[index] - 1)
            expr = at_position(expr, index, position, low, high)
        return expr

    return expr.replace(lambda e: isinstance(e, sp.Indexed) and str(e.base.label) in outputs, expanded)


def complex_form(code: OpCode, grads: tuple[str, ...]) -> OpCode:
    """The gradient op's code (`OpCode`, of the holomorphic partials of K, the op's vjp with
    nothing conjugated) as TensorFlow's convention gives it on complex dtypes. The op's vjp is
    conj(K(conj(g), x)), so for cotangents v: w.r.t. g, v * dK/dg at (conj(g), x); w.r.t. an
    input x, conj(v * dK/dx) there. A reused output (an op's gradient, conj(K)) is conjugated
    back to K. A no-op on real dtypes."""
    taken = set(grads) | set(code.outputs_used)
    prologue = code.vjp.prologue + tuple(Assign(n, Conj(n)) for n in code.inputs + code.outputs if n in taken)
    upstream = {f"grad_{g}" for g in grads}

    def conjugated(branch):
        # a list input's gradients are packed into `grads` last: conjugated before that
        at = len(branch.body) - 1 if code.variadic else len(branch.body)
        results = _results(branch) if code.variadic else code.vjp.results
        conj = tuple(Assign(r, Conj(r)) for r in results if r not in upstream and _assigned(branch, r))
        return dataclasses.replace(branch, body=branch.body[:at] + conj + branch.body[at:])

    branches = tuple(conjugated(b) for b in code.vjp.branches)
    return dataclasses.replace(code, vjp=dataclasses.replace(code.vjp, prologue=prologue, branches=branches))


def _results(branch) -> tuple[str, ...]:
    """The gradients a list input's vjp packs into `grads` (its last statement)."""
    return tuple(str(e) for e in branch.body[-1].value.expr)


def _assigned(branch, name: str) -> bool:
    return name is not None and any(getattr(s, "target", None) == name for s in branch.body)


def derive_second_order(derivation: Derivation) -> Derivation | None:
    """The simplified derivation of the gradient op, or None where it cannot be declared or
    derived (reported by the order-2 check as not generated)."""
    if not supported(derivation):
        return None
    try:
        # `<op>_grad` returns its gradients summed to each input's shape: not the values of
        # the gradient op's outputs where inputs broadcast, so they are not reused
        return _without_point_masses(simplify(derive(gradient_op(derivation)), reuse_outputs=False))
    except SymgradError:
        return None


def _without_point_masses(derivation: Derivation) -> Derivation:
    """DiracDelta (the derivative of `sign`, `Abs`'s and Heaviside's at 0) as 0: a point mass,
    not a value; as the derivative of `sign` is 0 in TensorFlow's and PyTorch's autodiff."""
    zero = lambda e: e.replace(sp.DiracDelta, lambda *args: sp.S.Zero) if isinstance(e, sp.Basic) else e

    def value(v):  # None where nothing but point masses was left
        if v is None or isinstance(v, sp.Basic):
            v = None if v is None else zero(v)
            return None if v == 0 else v
        terms = tuple(dataclasses.replace(t, factor=zero(t.factor)) for t in v.terms)
        terms = tuple(t for t in terms if t.factor != 0)
        return dataclasses.replace(v, terms=terms) if terms else None

    return dataclasses.replace(derivation, vjp={n: value(v) for n, v in derivation.vjp.items()})


def linear_inputs(derivation: Derivation) -> tuple[str, ...] | None:
    """The inputs with a gradient, where each output of the op is linear in each of them
    separately (of degree one in its entries: a convolution in its input and in its filter),
    else None. Such an op's second order is composed of its own forward and gradient
    (`ir.LinearSecondOrder`): what its gradient op would derive, without declaring it."""
    variant = derivation.variant
    if derivation.staging is not None or variant.decl.variadic or len(variant.outputs) != 1:
        return None
    names = tuple(t.name for t in variant.inputs if derivation.vjp[t.name] is not None)
    # complex too: TensorFlow's gradient of a map R-linear in an input (x @ y, conj(x) @ y, a
    # conjugate transpose) is its adjoint for the real inner product Re(sum(conj(u) * v)), so
    # the composition holds as for real dtypes (`symgrad check --order 2` on BatchMatMulV2's
    # complex adjoints)
    bases = {t.name: t.base for t in variant.inputs}
    expr = variant.outputs[0].expr
    if not names or expr.has(stop_gradient) or any(_degree(expr, bases[n]) != 1 for n in names):
        return None
    return names


def _degree(expr: sp.Expr, base) -> int | None:
    """The degree of `expr` in the entries of tensor `base` (a symbol, elementwise), None where
    it is not a polynomial in them (or not the same degree in every term and branch)."""
    if expr == base or (isinstance(expr, sp.Indexed) and expr.base == base):
        return 1
    if not expr.has(base):
        return 0
    if isinstance(expr, sp.conjugate):
        return _degree(expr.args[0], base)
    if isinstance(expr, sp.Mul):
        degrees = [_degree(a, base) for a in expr.args]
        return None if None in degrees else sum(degrees)
    if isinstance(expr, sp.Pow) and expr.exp.is_Integer and expr.exp > 0:
        degree = _degree(expr.base, base)
        return None if degree is None else degree * int(expr.exp)
    if isinstance(expr, sp.Piecewise):  # conditions on indices only
        if any(c.has(base) for _, c in expr.args):
            return None
        parts = {_degree(e, base) for e, _ in expr.args if e != 0}
    elif isinstance(expr, sp.Add):
        parts = {_degree(a, base) for a in expr.args}
    elif isinstance(expr, sp.Sum):  # a product, maximum or minimum over entries is not linear
        return _degree(expr.function, base)
    else:
        return None
    return parts.pop() if len(parts) == 1 else None
