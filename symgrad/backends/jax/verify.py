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

from symgrad.compare import GradientCallError, upstream_names
from symgrad.sources import Gradients, _error_text, _input_args, accepted_kwargs, derived_import_lines


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
    """A verification source over the generated function `<op><suffix>` of the op's JAX module."""

    def __init__(self, op, suffix: str, label: str):
        self.fn = op.function("jax", suffix)
        self.label = label
        self.imports = derived_import_lines(op, self.fn, label)

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
    """`jax.vjp` of the generated function `<op><suffix>` of the op's JAX module."""

    def __init__(self, op, suffix: str = "", label: str | None = None, eager_fallback: bool = True):
        super().__init__(op, suffix, label or f"derived {op.stem}_jax.{op.decl.func_name}{suffix} under jax.vjp")
        self.eager_fallback = eager_fallback  # run eagerly what `jit` cannot trace

    def _run_one(self, variant, case):
        jax = import_jax()
        inputs = [jax.numpy.asarray(x) for x in case.inputs]
        free, function = self._bound(variant, inputs)

        def gradients(free_inputs, upstream):
            return _tensorflow_vjp(jax, function, variant, free_inputs, upstream)

        args = ([inputs[k] for k in free], [jax.numpy.asarray(u) for u in case.upstream])
        try:  # under jit: one compilation per case, not one per primitive and shape
            try:
                grads = jax.jit(gradients)(*args)
            except tracing_errors():  # a shape that depends on values (SegmentSum's): eagerly
                if not self.eager_fallback:
                    raise
                grads = gradients(*args)
        except Exception as exc:  # the function under test failed: report it, go on
            return GradientCallError(f"raised {_error_text(exc)}")
        result = [None] * len(inputs)
        for k, g in zip(free, grads):
            result[k] = np.asarray(g)
        return Gradients(result)

    def call_lines(self, variant) -> list[str]:
        ups = upstream_names(variant)
        inputs = ", ".join(variant.inputs)
        cotangent = f"[{', '.join(ups)}]" if variant.list_output else (ups[0] if len(ups) == 1 else f"({', '.join(ups)})")
        return self.imports + [
            "import jax",
            'jax.config.update("jax_enable_x64", True)',
            f"outputs, vjp = jax.vjp(lambda {inputs}: {self.fn.__name__}({inputs}, **attrs), {inputs})",
            f"print({self.label!r}, vjp({cotangent}))",
        ]


def _tensorflow_vjp(jax, function, variant, free_inputs, upstream) -> list:
    """The gradients of `function` at `free_inputs` for the upstream gradients `upstream`, in
    TensorFlow's complex convention: `conj(jax_vjp(conj(upstream)))`."""
    conj = jax.numpy.conj
    outputs, vjp = jax.vjp(function, *free_inputs)
    return list(jax.tree_util.tree_map(conj, vjp(_cotangent(jax, variant, outputs, [conj(u) for u in upstream]))))


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
    `symgrad.second_order_check`): `jax.vjp` of `(g, x) -> jax.vjp(<op>)(x)(g)`, the inner
    vjp the derived gradient (through the `custom_vjp` op) differentiated by JAX, in
    TensorFlow's complex convention both times."""

    def __init__(self, op):
        super().__init__(op, "", f"derived {op.stem}_jax.{op.decl.func_name} under jax.vjp twice")

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
            return GradientCallError(f"raised {_error_text(exc)}")
        result = [np.asarray(g) for g in grad_ups] + [None] * len(xs)
        for k, g in zip(free, grad_xs):
            result[count + k] = np.asarray(g)
        return Gradients(result)

    def call_lines(self, variant) -> list[str]:
        return self.imports + ["# jax.vjp of (g, x) -> jax.vjp(op)(x)(g), applied to the cotangents"]
