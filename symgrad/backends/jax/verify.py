"""How verification obtains the JAX target's gradients: `jax.vjp` of a generated function (the
`custom_vjp` op, whose gradient is the derived one, or `<op>_forward`, whose gradient is JAX's
own autodiff), in float64 with JAX's 64-bit mode on.

JAX's cotangents are not TensorFlow's for complex inputs: for a holomorphic f, `jax.vjp` gives
`ct * f'(z)`, TensorFlow (and symgrad's derived gradients) `ct * conj(f'(z))`. In general
`tensorflow_vjp(ct) = conj(jax_vjp(conj(ct)))`; `JaxFunction` reports TensorFlow's, so that
every target is compared in one convention.
"""

from __future__ import annotations

import os

import numpy as np

from symgrad.verify.compare import upstream_names
from symgrad.verify.sources import Gradients, Skipped, _error_text, _input_args, accepted_kwargs, call_failed, derived_import_lines


def tracing_errors() -> tuple:
    """What `jax.jit` raises for code that needs a value while tracing."""
    import jax

    return (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError,
            jax.errors.TracerBoolConversionError, jax.errors.TracerIntegerConversionError, TypeError)


# verification compiles each case's function once and runs it once: XLA's optimisations cost
# more than they save there (measured: 41 s -> 16 s for LayerNorm's and Conv2D's checks)
FAST_COMPILATION = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def import_jax():
    """JAX, with 64-bit arrays (float64 cases stay float64), compiling fast unless the user
    set XLA's flags (effective where this process has not run JAX yet)."""
    os.environ.setdefault("XLA_FLAGS", FAST_COMPILATION)
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


class _JaxSource:
    """A verification source over a function of JAX arrays taking the numpy forward's
    arguments: a generated one, or JAX's own function of the op type."""

    def __init__(self, fn, label: str, imports: list[str], call_name: str | None = None, reference: bool = False):
        self.fn, self.label, self.imports = fn, label, imports
        self.call_name = call_name or fn.__name__  # what the snippet calls it
        self.reference = reference  # a function that cannot express the attributes skips the case
        self._compiled = {}  # JaxFunction: (variant, fixed inputs) -> its gradient, jitted

    def run(self, variant, cases) -> list:
        return [self._run_one(variant, case) for case in cases]

    def run_many(self, groups) -> list[list]:
        import_jax()
        return [self.run(variant, cases) for variant, cases in groups]

    def _bound(self, variant, inputs: list):
        """(positions of the inputs with a gradient, the function of those alone: the others
        fixed at `inputs`, the attributes given)."""
        attrs = {k: variant.attrs[k] for k in accepted_kwargs(self.fn, variant.attrs)}
        free = [k for k, name in enumerate(variant.inputs) if name not in variant.integers]

        def function(*given):
            full = list(inputs)
            for k, x in zip(free, given):
                full[k] = x
            return self.fn(*_input_args(variant, full), **attrs)

        return free, function


class JaxFunction(_JaxSource):
    """`jax.vjp` of a function of JAX arrays: a generated one (`derived`) or JAX's own function
    of the op type (`symgrad.backends.jax.functions`)."""

    eager_fallback = True  # run eagerly what `jit` cannot trace

    @classmethod
    def derived(cls, op, suffix: str = "", label: str | None = None) -> "JaxFunction":
        """Of the generated function `<op><suffix>` of the op's JAX module."""
        fn = op.function("jax", suffix)
        label = label or f"derived {op.stem}_jax.{op.decl.func_name}{suffix} under jax.vjp"
        return cls(fn, label, derived_import_lines(op, fn, label))

    def _run_one(self, variant, case):
        jax = import_jax()
        inputs = [jax.numpy.asarray(x) for x in case.inputs]
        free, gradients, jitted = self._gradients(variant, inputs)
        args = ([inputs[k] for k in free], [jax.numpy.asarray(u) for u in case.upstream])
        try:  # under jit: one compilation per variant and shape, not one per primitive
            try:
                outputs, grads = jitted(*args)
            except tracing_errors():  # a shape that depends on values (SegmentSum's): eagerly
                if not self.eager_fallback:
                    raise
                outputs, grads = gradients(*args)
        except (NotImplementedError, ValueError) as exc:  # JAX's function cannot express the
            if not self.reference:  # attributes, or TensorFlow rejects the inputs
                raise
            return Skipped(f"{self.label}: {_error_text(exc)}")
        except Exception as exc:  # the function under test failed: report it, go on
            return call_failed(exc)
        result = [None] * len(inputs)
        for k, g in zip(free, grads):
            result[k] = np.asarray(g)
        # a reference's outputs are checked against the declaration's (the same op?)
        return Gradients(result, tuple(np.asarray(o) for o in outputs) if self.reference else None)

    def _gradients(self, variant, inputs: list):
        """(free input positions, the function of the free inputs and the upstream gradients
        giving the outputs and the gradients, its `jax.jit`): kept per variant and fixed
        (integer) inputs, so that the cases of one shape and dtype compile once."""
        key = _fixed_key(variant, inputs)
        if key not in self._compiled:
            jax = import_jax()
            free, function = self._bound(variant, inputs)

            def gradients(free_inputs, upstream):
                return _outputs_and_tensorflow_vjp(jax, function, variant, free_inputs, upstream)

            self._compiled[key] = (free, gradients, jax.jit(gradients), variant)
        return self._compiled[key][:3]

    def call_lines(self, variant) -> list[str]:
        ups = upstream_names(variant)
        inputs = ", ".join(variant.inputs)
        cotangent = f"[{', '.join(ups)}]" if variant.list_output else (ups[0] if len(ups) == 1 else f"({', '.join(ups)})")
        return self.imports + [
            "import jax",
            'jax.config.update("jax_enable_x64", True)',
            f"outputs, vjp = jax.vjp(lambda {inputs}: {self.call_name}({inputs}, **attrs), {inputs})",
            f"print({self.label!r}, vjp({cotangent}))",
        ]


def _fixed_key(variant, inputs: list) -> tuple:
    """What a variant's jitted gradient closes over: the variant (by identity, kept alive in
    the cache) and the values of its inputs without a gradient (integer positions)."""
    fixed = [np.asarray(x) for name, x in zip(variant.inputs, inputs) if name in variant.integers]
    return (id(variant), *((x.dtype.str, x.shape, x.tobytes()) for x in fixed))


def _tensorflow_vjp(jax, function, variant, free_inputs, upstream) -> list:
    """The gradients of `function` at `free_inputs` for the upstream gradients `upstream`, in
    TensorFlow's complex convention: `conj(jax_vjp(conj(upstream)))`."""
    return _outputs_and_tensorflow_vjp(jax, function, variant, free_inputs, upstream)[1]


def _outputs_and_tensorflow_vjp(jax, function, variant, free_inputs, upstream) -> tuple:
    """(`function`'s outputs as a flat tuple, `_tensorflow_vjp`)."""
    conj = jax.numpy.conj
    outputs, vjp = jax.vjp(function, *free_inputs)
    grads = vjp(_cotangent(jax, variant, outputs, [conj(u) for u in upstream]))
    flat = tuple(outputs) if isinstance(outputs, (list, tuple)) else (outputs,)
    return flat, list(jax.tree_util.tree_map(conj, grads))


def _cotangent(jax, variant, outputs, upstream: list):
    """The upstream gradients in the structure of `outputs` (a tensor, a tuple, a list), float0
    zeros for an integer output (JAX's cotangent of one)."""
    def like(output, up):
        if not jax.numpy.issubdtype(output.dtype, jax.numpy.inexact):
            return np.zeros(np.shape(output), jax.dtypes.float0)
        return jax.numpy.asarray(up, output.dtype)

    if isinstance(outputs, (list, tuple)):  # a list output, or several outputs
        return type(outputs)(like(o, u) for o, u in zip(outputs, upstream))
    return like(outputs, upstream[0])


class JaxSecondOrder(_JaxSource):
    """The second order of the JAX target, as the gradient of the gradient op G (see
    `symgrad.verify.second_order`): `jax.vjp` of `(g, x) -> jax.vjp(<op>)(x)(g)`, the inner
    vjp the derived gradient (through the `custom_vjp` op) differentiated by JAX, in
    TensorFlow's complex convention both times."""

    def __init__(self, op):
        fn = op.function("jax", "")
        label = f"derived {op.stem}_jax.{op.decl.func_name} under jax.vjp twice"
        super().__init__(fn, label, derived_import_lines(op, fn, label))

    def _run_one(self, variant, case):
        jax = import_jax()
        first = variant.first
        count = len(variant.inputs) - len(first.inputs)  # upstream gradients before the inputs
        ups = [jax.numpy.asarray(u) for u in case.inputs[:count]]
        xs = [jax.numpy.asarray(x) for x in case.inputs[count:]]
        free, op = self._bound(first, xs)

        def gradient(ups, free_xs):  # G
            return _tensorflow_vjp(jax, op, first, free_xs, ups)

        try:
            cotangents = [jax.numpy.asarray(case.upstream[k]) for k in free]
            grad_ups, grad_xs = _tensorflow_vjp(jax, gradient, first, (ups, [xs[k] for k in free]), cotangents)
        except Exception as exc:  # the function under test failed: report it, go on
            return call_failed(exc)
        # an integer output's upstream gradient has none: JAX's float0 cotangent
        as_array = lambda g: None if g.dtype == jax.dtypes.float0 else np.asarray(g)
        result = [as_array(g) for g in grad_ups] + [None] * len(xs)
        for k, g in zip(free, grad_xs):
            result[count + k] = as_array(g)
        return Gradients(result)

    def call_lines(self, variant) -> list[str]:
        return self.imports + ["# jax.vjp of (g, x) -> jax.vjp(op)(x)(g), applied to the cotangents"]

