"""Second order: an op's gradient op G (`gradient_op`), checked as a first-order op.

For an op with inputs x1..xn and upstream gradients g (one per output), G takes (g..., x1..xn)
and gives (grad_x1..grad_xn). Its forward is the derived numpy `<op>_grad` (finite differences
of it are the reference); its gradient, for upstream cotangents v (one per input of the op),
is a target's second order w.r.t. g and each x:

* `numpy`: the generated `<op>_grad_grad(v..., g..., x..., *, attrs)`, where the module has it;
* `tensorflow`: nested `tf.GradientTape`s over the generated `tf.custom_gradient` wrapper;
* `tensorflow-graph` (where TensorFlow has the op type): `tf.gradients` of `tf.gradients` of
  `tf.raw_ops.<OpType>` under `gradient_override_map`, the generated `<op>_grad` registered;
* `jax`: `jax.vjp` of `jax.vjp` of the generated `custom_vjp` op: JAX differentiating the
  derived `<op>_vjp`;
* `torch`: `torch.autograd.grad` twice (`create_graph=True`) of the generated op: PyTorch's
  double backward through the derived `<op>_vjp`.

`symgrad diff --against tensorflow --order 2` compares them with TensorFlow's own second
derivative of the op (nested tapes over `tf.raw_ops.<OpType>`) where it has a gradient.
"""

from __future__ import annotations

from symgrad.errors import SymgradError
from symgrad.targets import REGISTRY
from symgrad.verify.cases import Case
from symgrad.verify.check import check_dtypes, check_groups
from symgrad.verify.compare import upstream_names
from symgrad.verify.diff import NoReference, TensorFlowReference, diff_groups
from symgrad.verify.gradient_op import GradientOp, GradientVariant, gradient_groups, gradient_variant
from symgrad.verify.ops_under_test import DerivedOp, Variant, import_tf, variants_of
from symgrad.verify.report import Result
from symgrad.verify.sources import (
    Gradients,
    Skipped,
    Unavailable,
    _error_text,
    call_failed,
    derived_import_lines,
    derived_source,
)
from symgrad.verify.tf_sources import TfGradientFunction, _build, _numpy

REFERENCE = "finite differences of the derived gradient"
GRAPH_TARGET = "tensorflow-graph"  # the row of the tf.gradients path, beside "tensorflow"'s tapes
DIFF_DTYPES = ("float64", "complex128")  # float32 differences of a gradient are too noisy


# --- G's inputs ---------------------------------------------------------------------------------


def _split(variant: GradientVariant, values: list) -> tuple[list, list]:
    """(upstream gradients, the op's inputs) of G's inputs `values`."""
    m = variant.op.upstream
    return list(values[:m]), list(values[m:])


def _live(first: Variant) -> list[int]:
    """Positions of the op's inputs that have gradients (not integer positions)."""
    return [k for k, name in enumerate(first.inputs) if name not in first.integers]


def _spread(second: list, m: int, live: list[int], n: int) -> list:
    """Second-order gradients w.r.t. (upstream..., live inputs...) as one per G input."""
    grads = list(second[:m]) + [None] * n
    for k, g in zip(live, second[m:]):
        grads[m + k] = g
    return grads


# --- TensorFlow ---------------------------------------------------------------------------------


class NestedTapes:
    """Second order through nested `tf.GradientTape`s (eager) over a TensorFlow function of the
    op's inputs: the inner tape's gradient for upstream gradients g, differentiated by the outer
    one for cotangents v, w.r.t. g and each input."""

    def __init__(self, build, label: str, call: str, imports: list[str], reference: bool = False):
        self.build = build  # (op variant, input tensors) -> the op's outputs
        self.label = label  # how reports name it
        self.call = call  # snippet source of the call, of `xs` and `attrs`
        self.imports = imports  # snippet lines that import what `call` calls
        self.reference = reference  # a failing gradient is the reference's lack: skipped

    def run(self, variant: GradientVariant, cases: list[Case]) -> list:
        tf = import_tf()
        return [self._run_one(tf, variant, case) for case in cases]

    def run_many(self, groups: list[tuple[Variant, list[Case]]]) -> list[list]:
        return [self.run(variant, cases) for variant, cases in groups]

    def _run_one(self, tf, variant: GradientVariant, case: Case):
        first, live = variant.first, _live(variant.first)
        gs, xs = (list(map(tf.constant, part)) for part in _split(variant, case.inputs))
        wrt = [xs[k] for k in live]
        with tf.GradientTape() as outer:
            outer.watch(gs + wrt)
            with tf.GradientTape() as inner:
                inner.watch(wrt)
                try:
                    outs = tf.nest.flatten(self.build(first, xs))
                except Exception as exc:  # the op does not take these inputs
                    return Skipped(f"{self.label} rejects the inputs: {_error_text(exc)}")
            try:  # as tensors: a gather's gradient is IndexedSlices
                grads = inner.gradient(outs, wrt, output_gradients=gs, unconnected_gradients="zero")
                grads = [tf.convert_to_tensor(g) for g in grads]
            except Exception as exc:  # the first derivative failed
                return self._failed("its first derivative", exc)
        pairs = [(g, tf.constant(case.upstream[k])) for g, k in zip(grads, live)]
        try:
            second = outer.gradient(  # as tensors: a gather's gradient is IndexedSlices
                [g for g, _ in pairs], gs + wrt, output_gradients=[v for _, v in pairs],
                unconnected_gradients="zero",
            )
        except Exception as exc:  # the second derivative failed
            return self._failed("the second derivative", exc)
        second = [tf.convert_to_tensor(g) for g in second]
        return Gradients(_numpy(_spread(second, len(gs), live, len(xs))))

    def _failed(self, what: str, exc: Exception):
        if not self.reference:
            return call_failed(exc, what)
        return Skipped(f"{self.label} raised, in {what}, {_error_text(exc)}")

    def call_lines(self, variant: GradientVariant) -> list[str]:
        gs, vs = upstream_names(variant.first), upstream_names(variant)
        live = _live(variant.first)
        return self.imports + [
            "import tensorflow as tf",
            f"xs = [tf.constant(v) for v in ({', '.join(variant.first.inputs)},)]",
            f"wrt = [xs[k] for k in {live}]",
            f"gs = [tf.constant(v) for v in ({', '.join(gs)},)]",
            "with tf.GradientTape() as outer:",
            "    outer.watch(gs + wrt)",
            "    with tf.GradientTape() as inner:",
            "        inner.watch(wrt)",
            f"        outs = tf.nest.flatten({self.call})",
            "    grads = inner.gradient(outs, wrt, output_gradients=gs)",
            f"vs = [tf.constant(v) for k, v in enumerate([{', '.join(vs)}]) if k in {live}]",
            f"print({self.label!r}, outer.gradient(grads, gs + wrt, output_gradients=vs))",
        ]


def wrapper_tapes(op: DerivedOp) -> NestedTapes:
    """Nested tapes over the generated `tf.custom_gradient` wrapper `<op>(inputs..., attrs...)`."""
    fn = op.function("tensorflow")
    label = f"derived {op.stem}_tf.{op.decl.func_name} under nested GradientTapes"
    imports = derived_import_lines(op, fn, label)
    return NestedTapes(lambda first, xs: fn(*xs, **first.attrs), label, f"{fn.__name__}(*xs, **attrs)", imports)


def registered_tapes(op_type: str) -> NestedTapes:
    """Nested tapes over `tf.raw_ops.<OpType>`: TensorFlow's own second derivative."""
    raw = getattr(import_tf().raw_ops, op_type)
    label = f"TensorFlow's own second derivative of {op_type}"
    call = f"tf.raw_ops.{op_type}(**op_inputs(xs), **attrs)"
    return NestedTapes(lambda first, xs: _build(raw, first, xs), label, call, [f"# {label}"], reference=True)


_OVERRIDES: dict[int, tuple] = {}  # id(gradient function) -> (it, the name it is registered as)


def _override_name(tf, fn, op_type: str) -> str:
    """`fn` registered under a name of its own (once per process), for gradient_override_map:
    the generated module's own registrations are undone as it is imported for verification."""
    if id(fn) not in _OVERRIDES:
        name = f"SymgradSecondOrder{op_type}_{len(_OVERRIDES)}"
        tf.RegisterGradient(name)(fn)
        _OVERRIDES[id(fn)] = (fn, name)
    return _OVERRIDES[id(fn)][1]


class GraphGradients(TfGradientFunction):
    """Second order by `tf.gradients` of `tf.gradients` of `tf.raw_ops.<OpType>` in a
    `tf.function`, the generated `<op>_grad(op, *grads)` applied by `gradient_override_map`
    (also to the op where the gradient reuses its outputs)."""

    def _trace_one(self, tf, raw, variant: GradientVariant, tensors, failures, k):
        first, live = variant.first, _live(variant.first)
        (gs, xs), vs = _split(variant, tensors[0]), tensors[1]
        name = _override_name(tf, self.fn, first.op.name)
        try:
            with tf.compat.v1.get_default_graph().gradient_override_map({first.op.name: name}):
                outs = _build(raw, first, xs)
        except Exception as exc:  # TensorFlow's op rejects these inputs
            failures[k] = Skipped(f"tf.raw_ops.{first.op.name} rejects the inputs: {_error_text(exc)}")
            return []
        wrt = [xs[j] for j in live]
        try:
            grads = tf.gradients(outs, wrt, grad_ys=gs, unconnected_gradients="zero")
            grads = [tf.convert_to_tensor(g) for g in grads]  # a gather's gradient is IndexedSlices
            second = tf.gradients(grads, gs + wrt, grad_ys=[vs[j] for j in live], unconnected_gradients="zero")
            second = [tf.convert_to_tensor(g) for g in second]
        except Exception as exc:  # the function under test failed
            failures[k] = call_failed(exc)
            return []
        return _spread(second, len(gs), live, len(xs))

    @staticmethod
    def _rejected(tf, raw, variant: GradientVariant, case: Case) -> Skipped | None:
        _, xs = _split(variant, case.inputs)
        try:
            _build(raw, variant.first, [tf.constant(x) for x in xs])
        except Exception as exc:
            return Skipped(f"tf.raw_ops.{variant.op.name} rejects the inputs: {_error_text(exc)}")
        return None

    def call_lines(self, variant: GradientVariant) -> list[str]:
        first = variant.first
        gs, vs = upstream_names(first), upstream_names(variant)
        live = [first.inputs[k] for k in _live(first)]
        build = ", ".join(f"{n}={n}" for n in first.inputs)
        if getattr(first.op.decl, "variadic", None):
            build = f"{first.op.decl.variadic}=[{', '.join(first.inputs)}]"
        return self.imports + [
            "import tensorflow as tf",
            f'tf.RegisterGradient("Mine")({self.fn.__name__})',
            "",
            "@tf.function",
            f"def second_order({', '.join(first.inputs + tuple(gs) + tuple(vs))}):",
            f'    with tf.compat.v1.get_default_graph().gradient_override_map({{"{first.op.name}": "Mine"}}):',
            f"        out = tf.nest.flatten(tf.raw_ops.{first.op.name}({build}, **attrs))",
            f"    grads = tf.gradients(out, [{', '.join(live)}], grad_ys=[{', '.join(gs)}])",
            f"    return tf.gradients(grads, [{', '.join(tuple(gs) + tuple(live))}], grad_ys=[{', '.join('grad_' + n for n in live)}])",
            "",
            f"print({self.label!r}, second_order({', '.join(first.inputs + tuple(gs) + tuple(vs))}))",
        ]


def graph_gradients(op: DerivedOp) -> GraphGradients:
    fn = op.function("tensorflow", "_grad")
    label = f"derived {op.stem}_tf.{op.decl.func_name}_grad under tf.gradients twice"
    return GraphGradients(fn, label, derived_import_lines(op, fn, label))


# --- the runs -----------------------------------------------------------------------------------


def second_order_sources(op: DerivedOp, targets: tuple[str, ...]) -> tuple[dict, list[Result]]:
    """({row target: source}, error rows of targets that have no second order for `op`)."""
    sources, missing = {}, []
    if "numpy" in targets:
        try:
            sources["numpy"] = derived_source(_gradient_op(op), "numpy")
        except SymgradError as exc:
            # as for a target whose module leaves the op out: a gap it states, not a failure
            missing.append(Result(op.name, None, None, "numpy", REFERENCE, "unavailable", message=str(exc)))
    if "tensorflow" in targets:
        sources["tensorflow"] = wrapper_tapes(op)
        if hasattr(import_tf().raw_ops, op.name):
            sources[GRAPH_TARGET] = graph_gradients(op)
    for target in targets:  # the frameworks that differentiate the derived gradient themselves
        second_order_source = getattr(REGISTRY[target].backend, "second_order_source", None)
        source = second_order_source(op) if second_order_source else None
        if isinstance(source, Unavailable):
            missing.append(Result(op.name, None, None, target, REFERENCE, "unavailable", message=source.reason))
        elif source is not None:
            sources[target] = source
    return sources, missing


def _gradient_op(op: DerivedOp) -> GradientOp:
    return gradient_variant(_first_variant(op)).op


def _first_variant(op: DerivedOp) -> Variant:
    return variants_of(op)[0]


def run_second_order_check(
    ops: list[DerivedOp], targets: tuple[str, ...], dtypes: tuple[str, ...] | None = None, sample: int | None = None
) -> list[Result]:
    """`symgrad check --order 2`: one row per op x variant x dtype x second-order path (one
    error row per op for a target without one)."""
    return _per_op(ops, REFERENCE, lambda op: _check_op(op, targets, dtypes, sample))


def _check_op(op: DerivedOp, targets, dtypes, sample) -> list[Result]:
    sources, missing = second_order_sources(op, targets)
    groups = gradient_groups(op, check_dtypes(dtypes), sample)
    rows = check_groups(op.name, groups, sources, REFERENCE)
    for row in rows:
        if row.status == "match" and not row.cases:
            row.message = "the derived forward or its gradient is not finite on any generated case"
    return rows + missing


def run_second_order_diff(
    ops: list[DerivedOp], targets: tuple[str, ...], dtypes: tuple[str, ...] | None = None, sample: int | None = None
) -> list[Result]:
    """`symgrad diff --against tensorflow --order 2`: the derived second orders against
    TensorFlow's own second derivative of the op, where TensorFlow has a gradient of its own."""
    return _per_op(ops, "tensorflow", lambda op: _diff_op(op, targets, dtypes, sample))


def _diff_op(op: DerivedOp, targets, dtypes, sample) -> list[Result]:
    found = TensorFlowReference().source_for(op)
    if isinstance(found, NoReference):
        return [Result(op.name, None, None, None, "tensorflow", "no-reference", message=found.reason)]
    ours, missing = second_order_sources(op, targets)
    wanted = tuple(d for d in DIFF_DTYPES if dtypes is None or d in dtypes)
    groups = gradient_groups(op, wanted, sample)
    return diff_groups(op.name, "tensorflow", groups, ours, registered_tapes(op.name)) + missing


def _per_op(ops: list[DerivedOp], reference: str, run) -> list[Result]:
    results = []
    for op in ops:
        try:
            results += run(op)
        except Exception as exc:  # one op's failure is its row; the others still run
            message = str(exc) if isinstance(exc, SymgradError) else f"{type(exc).__name__}: {exc}"
            results.append(Result(op.name, None, None, None, reference, "error", message=message))
    return results
