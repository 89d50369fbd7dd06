"""TensorFlow as a source of gradients: a gradient function `fn(op, *grads)` called on a real
op (or a stand-in for one), and TensorFlow's registered gradient through a GradientTape."""

from __future__ import annotations

import inspect

import numpy as np

from symgrad.dtypes import output_dtype
from symgrad.verify.cases import Case, call_forward
from symgrad.verify.compare import GradientCallError, upstream_names
from symgrad.verify.ops_under_test import Variant, import_tf
from symgrad.verify.sources import Gradients, Skipped, _as_list, _error_text, call_failed


def tf_raw_op(variant: Variant):
    """`tf.raw_ops.<OpType>`, or None when TensorFlow has no op of that type."""
    return getattr(import_tf().raw_ops, variant.op.name, None)


def op_inputs(variant: Variant, tensors) -> dict:
    """Keyword arguments of `tf.raw_ops.<OpType>` for the tensor inputs (a list input as a list)."""
    variadic = getattr(variant.op.decl, "variadic", None)
    return {variadic: list(tensors)} if variadic else dict(zip(variant.inputs, tensors))


def _build(raw, variant: Variant, tensors) -> list:
    return _as_list(raw(**op_inputs(variant, tensors), **variant.attrs, **implied_attrs(variant, tensors)))


def implied_attrs(variant: Variant, tensors) -> dict:
    """The op's attributes a call must pass that the declaration leaves out: its dtypes no
    input carries (`output_dtypes`), and a shape it promises of its output (PlaceholderWithDefault's
    `shape`) as None, which promises nothing."""
    from tensorflow.python.framework import op_def_registry  # TensorFlow's op definitions

    op_def = op_def_registry.get(variant.op.name)
    if op_def is None:
        return {}
    shapes = {a.name: None for a in op_def.attr if a.type == "shape" and not a.HasField("default_value")}
    return {**{k: v for k, v in shapes.items() if k not in variant.attrs}, **output_dtypes(variant, tensors, op_def)}


def output_dtypes(variant: Variant, tensors, op_def) -> dict:
    """The op's dtype attributes no input carries (BatchMatMulV3's `Tout`), which a call must
    pass: the dtype of the inputs, or of the output it types where the declaration gives that
    output a dtype of its own (`output_dtypes`: ComplexAbs's `Tout`)."""
    if not tensors:
        return {}
    carried = {a.type_attr for a in op_def.input_arg} | {a.type_list_attr for a in op_def.input_arg}
    dtype = next((t.dtype for t in tensors if t.dtype.is_floating or t.dtype.is_complex), tensors[0].dtype)
    typed = {o.type_attr: o.name for o in op_def.output_arg if o.type_attr}
    of = lambda attr: tf_dtype(output_dtype(variant.op.decl, typed[attr], dtype.as_numpy_dtype, variant.attrs)) if attr in typed else dtype
    return {a.name: of(a.name) for a in op_def.attr if a.type == "type" and a.name not in carried | set(variant.attrs)}


def tf_dtype(dtype):
    return import_tf().as_dtype(dtype)


def _strip_consts(variant: Variant, grads: list) -> list:
    """One gradient per op input -> one per tensor input (constant inputs have none)."""
    want = len(variant.inputs) + len(variant.const_positions)
    if len(grads) != want:
        raise GradientCallError(f"returned {len(grads)} gradient(s) for the op's {want} input(s)")
    return [g for n, g in enumerate(grads) if n not in variant.const_positions]


def _numpy(grads: list) -> list:
    return [None if g is None else np.asarray(g) for g in grads]


class TfGradientFunction:
    """A TensorFlow gradient function `fn(op, *grads)`, called on a real op in a `tf.function`
    (on an eager stand-in with `inputs`, `outputs` and `get_attr` when TensorFlow has no op of
    the type)."""

    def __init__(self, fn, label: str, imports: list[str], stand_in: bool = False):
        self.fn = fn  # the gradient function
        self.label = label  # how reports name it
        self.imports = imports  # snippet lines that import it
        self.stand_in = stand_in  # always call it on the stand-in (outputs from the numpy forward)

    def run(self, variant: Variant, cases: list[Case]) -> list:
        return self.run_many([(variant, cases)])[0]

    def run_many(self, groups: list[tuple[Variant, list[Case]]]) -> list[list]:
        """`run` of each (variant, cases) group, every real-op case in one `tf.function`."""
        tf = import_tf()
        items = [(variant, case) for variant, cases in groups for case in cases]
        raws = [None if self.stand_in else tf_raw_op(variant) for variant, _ in items]
        results = [
            self._run_stand_in(tf, *item) if raw is None else None for item, raw in zip(items, raws)
        ]
        in_graph = [k for k, raw in enumerate(raws) if raw is not None]
        for k, outcome in zip(
            in_graph, self._run_graph(tf, [(raws[k], *items[k]) for k in in_graph])
        ):
            results[k] = outcome
        grouped, start = [], 0
        for _, cases in groups:
            grouped.append(results[start : start + len(cases)])
            start += len(cases)
        return grouped

    def _run_graph(self, tf, items: list[tuple]) -> list:
        """(raw op, variant, case) items in one `tf.function` (one trace). If the graph fails at
        run time, the items whose op itself rejects the inputs (run alone, eagerly) are skipped
        and the rest run again, halved until each failing item runs alone."""
        try:
            return self._run_graph_once(tf, items)
        except Exception as exc:  # failed while running, not while tracing
            rejected = [self._rejected(tf, *item) for item in items]
            kept = [item for item, skipped in zip(items, rejected) if skipped is None]
            ran = iter(self._halves(tf, items, exc) if len(kept) == len(items) else self._run_halving(tf, kept))
            return [next(ran) if skipped is None else skipped for skipped in rejected]

    def _run_halving(self, tf, items: list[tuple]) -> list:
        try:
            return self._run_graph_once(tf, items)
        except Exception as exc:  # failed while running, not while tracing
            return self._halves(tf, items, exc)

    def _halves(self, tf, items: list[tuple], exc: Exception) -> list:
        """Each half of items that failed together (with `exc`) run on its own."""
        if len(items) == 1:
            return [call_failed(exc)]
        middle = len(items) // 2
        return self._run_halving(tf, items[:middle]) + self._run_halving(tf, items[middle:])

    def _run_graph_once(self, tf, items: list[tuple]) -> list:
        """The items in one `tf.function`; raises what the graph raised at run time."""
        if not items:
            return []
        failures: dict[int, object] = {}

        def graph(batch):
            return [
                self._trace_one(tf, raw, variant, tensors, failures, k)
                for k, ((raw, variant, _), tensors) in enumerate(zip(items, batch))
            ]

        outputs = tf.function(graph, autograph=False)([self._tensors(tf, case) for *_, case in items])
        return [
            failures[k] if k in failures else self._finish(items[k][1], out)
            for k, out in enumerate(outputs)
        ]

    @staticmethod
    def _tensors(tf, case: Case) -> tuple[list, list]:
        return [tf.constant(x) for x in case.inputs], [tf.constant(u) for u in case.upstream]

    def _trace_one(self, tf, raw, variant, tensors, failures, k):
        inputs, upstream = tensors
        try:
            outs = _build(raw, variant, inputs)
        except Exception as exc:  # TensorFlow's op rejects these inputs
            failures[k] = Skipped(f"tf.raw_ops.{variant.op.name} rejects the inputs: {_error_text(exc)}")
            return []
        try:
            grads = _as_list(self.fn(outs[0].op, *upstream))
            return [None if g is None else tf.convert_to_tensor(g) for g in grads]
        except Exception as exc:  # the function under test failed
            failures[k] = call_failed(exc)
            return []

    def _finish(self, variant: Variant, grads: list):
        try:
            return Gradients(_numpy(_strip_consts(variant, grads)))
        except GradientCallError as exc:
            return exc

    @staticmethod
    def _rejected(tf, raw, variant: Variant, case: Case) -> Skipped | None:
        """Skipped when TensorFlow's kernel, run alone, rejects the case's inputs."""
        try:
            _build(raw, variant, [tf.constant(x) for x in case.inputs])
        except Exception as op_exc:
            return Skipped(f"tf.raw_ops.{variant.op.name} rejects the inputs: {_error_text(op_exc)}")
        return None

    def _run_stand_in(self, tf, variant: Variant, case: Case):
        forward = variant.op.function("numpy")
        outs = call_forward(lambda *xs: forward(*xs, **variant.attrs), case.inputs)
        inputs, upstream = self._tensors(tf, case)
        op = StandInOp(variant, inputs, [tf.constant(o) for o in outs or ()])
        try:
            grads = _as_list(self.fn(op, *upstream))
            return Gradients(
                _numpy(
                    _strip_consts(
                        variant, [None if g is None else tf.convert_to_tensor(g) for g in grads]
                    )
                )
            )
        except GradientCallError as exc:
            return exc
        except Exception as exc:  # the function under test failed
            return call_failed(exc)

    def call_lines(self, variant: Variant) -> list[str]:
        if self.stand_in or tf_raw_op(variant) is None:
            return self._wrapper_lines(variant)
        ups = upstream_names(variant)
        params = ", ".join(list(variant.inputs) + ups)
        build = _build_args(variant, list(variant.inputs))
        return self.imports + [
            "import tensorflow as tf",
            "",
            "@tf.function",
            f"def gradient({params}):",
            f"    out = tf.raw_ops.{variant.op.name}({build}, **attrs)",
            "    op = (out if isinstance(out, tf.Tensor) else out[0]).op",
            f"    return {self.fn.__name__}(op, {', '.join(ups)})",
            "",
            f"print({self.label!r}, gradient({params}))",
        ]

    def _wrapper_lines(self, variant: Variant) -> list[str]:
        """Without TensorFlow's op: the generated `tf.custom_gradient` wrapper under a tape."""
        func = variant.op.decl.func_name
        if not hasattr(inspect.getmodule(self.fn), func):
            return [f"# {self.label}: TensorFlow has no op {variant.op.name} to call it on"]
        ups = ", ".join(upstream_names(variant))
        return self.imports[:-1] + [
            self.imports[-1] + f", {func}",
            "import tensorflow as tf",
            f"xs = [tf.constant(v) for v in ({', '.join(variant.inputs)},)]",
            "with tf.GradientTape() as tape:",
            "    tape.watch(xs)",
            f"    out = {func}(*xs, **attrs)",
            f"print({self.label!r}, tape.gradient(out, xs, output_gradients=[tf.constant(v) for v in ({ups},)]))",
        ]


def _build_args(variant: Variant, names: list[str]) -> str:
    """Snippet source of `op_inputs`."""
    variadic = getattr(variant.op.decl, "variadic", None)
    if variadic:
        return f"{variadic}=[{', '.join(names)}]"
    return ", ".join(f"{n}={v}" for n, v in zip(variant.inputs, names))


class StandInOp:
    """What a gradient function reads of an op, for op types TensorFlow does not have."""

    skip_input_indices = None

    def __init__(self, variant: Variant, tensors: list, outputs: list):
        import tensorflow as tf

        inputs = list(tensors)
        total = len(inputs) + len(variant.const_positions)
        consts = {
            a.input_position % total: a.name
            for a in variant.op.decl.attrs
            if a.input_position is not None
        }
        for position in sorted(consts):
            inputs.insert(position, tf.constant(variant.attrs[consts[position]]))
        self.type = self.name = variant.op.name
        self.inputs, self.outputs = inputs, outputs
        stored = {a.name: a.stored_name for a in variant.op.decl.attrs}
        self._attrs = {stored.get(name, name): value for name, value in variant.attrs.items()}

    def get_attr(self, name: str):
        if name not in self._attrs:
            raise ValueError(f"Operation {self.type!r} has no attr named {name!r}")
        return self._attrs[name]


class TfRegistered:
    """TensorFlow's registered gradient of `tf.raw_ops.<OpType>`, through a GradientTape.

    Where a kernel of TensorFlow's gradient refuses inputs its forward took (Conv2D's backprop
    on the CPU refuses dilations above 1), the case is skipped with TensorFlow's message: it has
    no gradient there to compare with. Errors of the gradient function itself are errors.
    """

    def __init__(self, op_type: str, ties: str | None = None):
        self.label = f"TensorFlow's registered gradient of {op_type}"
        self.ties = ties  # why cases with values tied on purpose are not compared, if they are not

    def run(self, variant: Variant, cases: list[Case]) -> list:
        tf = import_tf()
        raw = tf_raw_op(variant)
        return [self._run_one(tf, raw, variant, case) for case in cases]

    def run_many(self, groups: list[tuple[Variant, list[Case]]]) -> list[list]:
        return [self.run(variant, cases) for variant, cases in groups]

    def _run_one(self, tf, raw, variant: Variant, case: Case):
        if self.ties and case.ties:
            return Skipped(self.ties)
        xs = [tf.constant(x) for x in case.inputs]
        try:
            with tf.GradientTape() as tape:
                tape.watch(xs)
                outs = _build(raw, variant, xs)
        except Exception as exc:  # TensorFlow's op rejects these inputs
            return Skipped(f"tf.raw_ops.{variant.op.name} rejects the inputs: {_error_text(exc)}")
        try:
            grads = tape.gradient(
                outs,
                xs,
                output_gradients=[tf.constant(u) for u in case.upstream],
                unconnected_gradients=tf.UnconnectedGradients.ZERO,
            )
        except tf.errors.OpError as exc:  # a kernel of TensorFlow's gradient refuses the inputs
            return Skipped(f"{self.label} fails: {_error_text(exc)}")
        except Exception as exc:  # TensorFlow's gradient failed
            return call_failed(exc)
        grads = [tf.convert_to_tensor(g) for g in grads]
        return Gradients(_numpy(grads), tuple(o.numpy() for o in outs))

    def call_lines(self, variant: Variant) -> list[str]:
        ups = upstream_names(variant)
        build = _build_args(variant, [f"xs[{k}]" for k in range(len(variant.inputs))])
        return [
            f"# {self.label}",
            "import tensorflow as tf",
            f"xs = [tf.constant(v) for v in ({', '.join(variant.inputs)},)]",
            "with tf.GradientTape() as tape:",
            "    tape.watch(xs)",
            f"    out = tf.raw_ops.{variant.op.name}({build}, **attrs)",
            f"upstream = [tf.constant(v) for v in ({', '.join(ups)},)]",
            f"print({self.label!r}, tape.gradient(out, xs, output_gradients=upstream))",
        ]
