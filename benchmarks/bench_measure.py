"""Timing of one case: the contenders per target, run interleaved, compared by their medians.

Per target, each contender is a zero-argument call that returns once its result is computed:

* numpy: `ours` is the generated `<op>_grad` given the forward's outputs; `autograd` is the
  vjp closure of `autograd.make_vjp` (its forward already done); `jax.jit` is the vjp closure of
  `jax.vjp` applied under `jax.jit` (residuals already computed); `forward` is the generated
  forward.
* tensorflow, for an op TensorFlow has: `ours` and `tf-registered` each call a gradient
  function, the generated `<op>_grad` or TensorFlow's registered one, on the real op inside a
  `tf.function`, with the op's outputs passed in as tensors, so neither recomputes the forward;
  `forward` is the generated wrapper's forward in a `tf.function`. For an op TensorFlow
  composes from others (no op, so no registered gradient): `ours+forward` and
  `tf-autodiff+forward` both run the forward and the gradient under a `GradientTape`, and
  `ours` is the generated `<op>_vjp` alone.

Contenders run in phases, one library's threads at a time: TensorFlow's; numpy's (ours, the
forward, autograd: all OpenBLAS); JAX's. Within a phase they are interleaved.
"""

from __future__ import annotations

import gc
import inspect
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from bench_cases import Case

DTYPE = np.float32  # every contender, every target


@dataclass(frozen=True)
class Contender:
    """One timed computation."""

    name: str  # "ours", "forward", or the reference's name
    run: Callable[[], Any]  # one call; returns once the result is computed


@dataclass(frozen=True)
class Comparison:
    """A ratio to report: `ours` contender's median time over `reference`'s."""

    target: str  # "numpy" or "tensorflow"
    reference: str  # the contender in the denominator
    ours: str = "ours"  # the contender in the numerator


@dataclass(frozen=True)
class Timing:
    """How much to time."""

    repeats: int  # samples per contender, interleaved
    min_sample: float  # seconds a sample lasts at least: short ops are called repeatedly
    settle: float  # seconds to sleep before each phase, for other libraries' threads to park


@dataclass(frozen=True)
class Generated:
    """The generated modules of one op."""

    func: str  # Python name of the generated functions, e.g. "matmul"
    numpy: Any  # the generated numpy module
    tf: Any  # the generated TensorFlow module, None without TensorFlow


@dataclass(frozen=True)
class Libraries:
    """The contenders' libraries that could be imported (None: skipped)."""

    tf: Any  # the tensorflow module
    autograd: Any  # namespace: np (autograd.numpy), special (autograd.scipy.special)
    jax: Any  # namespace: np (jax.numpy), nn (jax.nn), special (jax.scipy.special), lax (jax.lax)


def make_inputs(case: Case, size: str, seed: int = 0) -> list[np.ndarray]:
    """Seeded inputs: standard normal, or in [0.5, 2) for the case's `positive` inputs."""
    rng = np.random.default_rng(seed)
    return [
        (rng.uniform(0.5, 2.0, shape) if n in case.positive else rng.standard_normal(shape)).astype(
            DTYPE
        )
        for n, shape in enumerate(case.shapes[size])
    ]


def time_interleaved(
    contenders: list[Contender], repeats: int, min_sample: float
) -> dict[str, float]:
    """Median seconds per call of each contender.

    Each repeat takes one sample of every contender, in an order rotated by one per repeat; a
    sample times enough back-to-back calls to last `min_sample` seconds (one call for slow
    contenders), so that millisecond ops are not lost in timer and scheduler noise.
    """
    calls = {c.name: _calls_per_sample(c, min_sample) for c in contenders}
    samples: dict[str, list[float]] = {c.name: [] for c in contenders}
    gc.collect()
    gc.disable()
    try:
        for repeat in range(repeats):
            shift = repeat % len(contenders)
            for contender in contenders[shift:] + contenders[:shift]:
                n = calls[contender.name]
                start = time.perf_counter()
                for _ in range(n):
                    contender.run()
                samples[contender.name].append((time.perf_counter() - start) / n)
    finally:
        gc.enable()
    return {name: statistics.median(times) for name, times in samples.items()}


def _calls_per_sample(contender: Contender, min_sample: float) -> int:
    if min_sample <= 0:
        return 1
    start = time.perf_counter()
    contender.run()
    return max(1, math.ceil(min_sample / max(time.perf_counter() - start, 1e-6)))


def as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def agree(ours, reference) -> bool:
    """Gradients equal up to float32 round-off, relative to the reference's magnitude."""
    pairs = list(zip(as_tuple(ours), as_tuple(reference), strict=True))
    for a, b in pairs:
        if a is None or b is None:
            if a is not b:
                return False
            continue
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-30)
        if a.shape != b.shape or not np.allclose(a, b, rtol=2e-3, atol=2e-4 * scale):
            return False
    return True


# --- numpy ------------------------------------------------------------------------------------


def numpy_contenders(case, gen, inputs, upstream, libs) -> tuple[list, list, dict]:
    """Phases of contenders, comparisons and {reference: agrees} of the numpy target.

    jax.jit is timed in a phase of its own: after each call, OpenBLAS's and XLA's worker threads
    spin for a while, and on two cores they slow whichever library runs next.
    """
    forward = getattr(gen.numpy, gen.func)
    grad_fn = getattr(gen.numpy, gen.func + "_grad")
    outputs = as_tuple(forward(*inputs, **case.attrs))
    given = dict(zip(_keyword_only(grad_fn), outputs))  # outputs come first, then attributes

    def ours():
        return grad_fn(*upstream, *inputs, **given, **case.attrs)

    phases = [
        [Contender("ours", ours), Contender("forward", lambda: forward(*inputs, **case.attrs))]
    ]
    references = {}
    if libs.autograd is not None and case.autograd is not None:
        references["autograd"] = _autograd_vjp(case, libs.autograd, inputs, upstream)
        phases[0].append(Contender("autograd", references["autograd"]))
    if libs.jax is not None and case.jax is not None:
        references["jax.jit"] = _jax_vjp(case, libs.jax, inputs, upstream)
        phases.append([Contender("jax.jit", references["jax.jit"])])
    mine = ours()
    agrees = {name: agree(mine, run()) for name, run in references.items()}
    comparisons = [Comparison("numpy", name) for name in references] + [
        Comparison("numpy", "forward")
    ]
    return phases, comparisons, agrees


def _keyword_only(fn) -> list[str]:
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]


def _autograd_vjp(case, namespace, inputs, upstream):
    """autograd's vjp closure, its forward already evaluated."""
    import autograd

    vjp, _ = autograd.make_vjp(lambda xs: case.autograd(namespace, *xs))(tuple(inputs))
    return lambda: vjp(upstream[0])


def _jax_vjp(case, namespace, inputs, upstream):
    """jax.vjp's closure applied under jax.jit, its residuals already computed."""
    import jax

    xs = [jax.device_put(x) for x in inputs]
    _, vjp = jax.vjp(lambda *args: case.jax(namespace, *args), *xs)
    apply = jax.jit(lambda fn, g: fn(g))
    g = jax.device_put(upstream[0])
    return lambda: jax.block_until_ready(apply(vjp, g))


# --- TensorFlow -------------------------------------------------------------------------------


def _function(tf, fn):
    """`tf.function` without AutoGraph: nothing here branches on tensors, and tracing is faster."""
    return tf.function(fn, autograph=False)


class _OpWithOutputs:
    """A real op whose outputs are given tensors: a gradient function reads them, so the
    forward is not recomputed inside the function (the unused op is pruned)."""

    def __init__(self, op, outputs):
        self._op = op
        self.outputs = list(outputs)

    def __getattr__(self, name):
        return getattr(self._op, name)


def tf_contenders(case, gen, inputs, upstream, tf) -> tuple[list, list, dict]:
    """Phases of contenders (one), comparisons and {reference: agrees} of the TensorFlow target."""
    xs = [tf.constant(x) for x in inputs]
    gs = [tf.constant(g) for g in upstream]
    wrapper = getattr(gen.tf, gen.func)
    forward = _function(tf, lambda *args: wrapper(*args, **case.attrs))
    ys = list(as_tuple(forward(*xs)))
    contenders = [Contender("forward", lambda: forward(*xs))]
    if case.tf_op is not None:
        ours, reference = _op_gradients(case, gen, tf, xs, ys, gs)
        contenders += [Contender("ours", ours), Contender("tf-registered", reference)]
        comparisons = [Comparison("tensorflow", "tf-registered")]
        agrees = {"tf-registered": agree(ours(), reference())}
    else:
        ours, ours_tape, reference = _composite_gradients(case, gen, tf, xs, ys, gs)
        contenders += [
            Contender("ours", ours),
            Contender("ours+forward", ours_tape),
            Contender("tf-autodiff+forward", reference),
        ]
        comparisons = [Comparison("tensorflow", "tf-autodiff+forward", ours="ours+forward")]
        agrees = {"tf-autodiff+forward": agree(ours_tape(), reference())}
    return [contenders], comparisons + [Comparison("tensorflow", "forward")], agrees


def _op_gradients(case, gen, tf, xs, ys, gs):
    """The generated and the registered gradient function, each on the real op."""
    from tensorflow.python.framework import ops as tf_ops

    ours_fn = getattr(gen.tf, gen.func + "_grad")

    def gradient(pick):
        def call(xs, ys, gs):
            op = as_tuple(case.tf_op(tf, *xs))[0].op
            grads = pick(op)(_OpWithOutputs(op, ys), *gs)
            return [g for g in as_tuple(grads) if g is not None]

        fn = _function(tf, call)
        return lambda: fn(xs, ys, gs)

    return gradient(lambda op: ours_fn), gradient(tf_ops.get_gradient_function)


def _composite_gradients(case, gen, tf, xs, ys, gs):
    """The generated vjp alone; forward and gradient under a tape, generated and TensorFlow's."""
    vjp = getattr(gen.tf, gen.func + "_vjp")
    wrapper = getattr(gen.tf, gen.func)
    vjp_fn = _function(tf, lambda xs, ys, gs: vjp(*gs, *xs, *ys, **case.attrs))

    def taped(forward):
        def call(xs, gs):
            with tf.GradientTape() as tape:
                tape.watch(xs)
                outputs = forward(*xs)
            return tape.gradient(outputs, xs, output_gradients=gs)

        fn = _function(tf, call)
        return lambda: fn(xs, gs)

    return (
        lambda: vjp_fn(xs, ys, gs),
        taped(lambda *args: wrapper(*args, **case.attrs)),
        taped(lambda *args: case.tf_composite(tf, *args)),
    )


# --- one case ---------------------------------------------------------------------------------


def run_case(case: Case, gen: Generated, libs: Libraries, size: str, timing: Timing) -> list[dict]:
    """Result rows of one case, both targets: {op, variant, target, reference, ratio, ...}."""
    inputs = make_inputs(case, size)
    outputs = as_tuple(getattr(gen.numpy, gen.func)(*inputs, **case.attrs))
    rng = np.random.default_rng(1)
    upstream = [rng.standard_normal(np.shape(y)).astype(DTYPE) for y in outputs]
    rows = []
    builders = [numpy_contenders]
    if libs.tf is not None and gen.tf is not None and (case.tf_op or case.tf_composite):
        builders.insert(0, lambda *args: tf_contenders(*args[:-1], libs.tf))
    for build in builders:
        phases, comparisons, agrees = build(case, gen, inputs, upstream, libs)
        medians = {}
        for contenders in phases:
            time.sleep(timing.settle)
            medians.update(time_interleaved(contenders, timing.repeats, timing.min_sample))
        rows += [_row(case, size, c, medians, agrees.get(c.reference)) for c in comparisons]
    return rows


def _row(case, size, comparison, medians, agrees) -> dict:
    ours, reference = medians[comparison.ours], medians[comparison.reference]
    return {
        "op": case.op,
        "variant": (
            case.variant if size == "full" else f"{case.variant} [{size}: {_shapes(case, size)}]"
        ),
        "target": comparison.target,
        "reference": comparison.reference,
        "ratio": ours / reference,
        "ours_s": ours,
        "reference_s": reference,
        "agrees": agrees,
    }


def _shapes(case, size) -> str:
    return ", ".join("x".join(map(str, shape)) for shape in case.shapes[size])
