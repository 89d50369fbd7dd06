"""Timing of one case: the contenders per target, run interleaved, compared by their medians.

Per target, each contender is a zero-argument call that returns once its result is computed:

* numpy: `ours` is the generated `<op>_grad` given the forward's outputs (and the stages it
  reads, from `return_stages=True`); `autograd` is the
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
* composed ops (`Case.composed`: no TensorFlow op, the references are forwards written by hand)
  take the TensorFlow path above, and in numpy also `ours+forward` (the generated forward,
  then `<op>_grad` given its outputs and stages) against `autograd+forward` (`make_vjp`,
  then its vjp). The generated TensorFlow wrapper hands its forward's stages to the gradient.

Before any timing, `check_references` runs every reference's forward and gradient, and the
generated TensorFlow ones, at the smoke size in float64 and compares them with the generated
numpy forward and gradient: a reference that computes anything but the declared op fails the
run (`ReferenceMismatch`), in every mode.

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
    jax: Any = None  # the generated JAX module, None without JAX
    torch: Any = None  # the generated PyTorch module, None without PyTorch


@dataclass(frozen=True)
class Libraries:
    """The contenders' libraries that could be imported (None: skipped)."""

    tf: Any  # the tensorflow module
    autograd: Any  # namespace: np (autograd.numpy), special (autograd.scipy.special)
    jax: Any  # namespace: np (jax.numpy), nn (jax.nn), special (jax.scipy.special), lax (jax.lax)
    torch: Any = None  # namespace: torch, functions (PyTorch's own function per op type)


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


def agree(ours, reference, rtol: float = 2e-3, atol: float = 2e-4, in_norm: bool = False) -> bool:
    """Gradients equal up to float32 round-off (by default), relative to the reference's
    magnitude: `atol` is relative to the reference's largest entry. `in_norm`: the difference's
    norm within `rtol` of the reference's instead, for a case with a kink (`Case.kink`)."""
    pairs = list(zip(as_tuple(ours), as_tuple(reference), strict=True))
    for a, b in pairs:
        if a is None or b is None:
            if a is not b:
                return False
            continue
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return False
        if in_norm:
            if not np.linalg.norm(a - b) <= rtol * np.linalg.norm(b):
                return False
            continue
        scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-30)
        if not np.allclose(a, b, rtol=rtol, atol=atol * scale):
            return False
    return True


# --- the references checked against the declared op -----------------------------------------

CHECK_DTYPE = np.float64  # round-off far below any difference between two formulas
# float64 round-off passes, and so does a constant rounded to float32 (TensorFlow's GELU
# gradient differs by 6e-9 of its largest entry in float64); an epsilon added outside the
# square root instead of inside (5e-4 relative) or any other formula does not
CHECK_TOLERANCE = {"rtol": 1e-6, "atol": 1e-7}


class ReferenceMismatch(AssertionError):
    """A reference computes something other than the declared op: its ratios would mean nothing."""


def check_references(case: Case, gen: Generated, libs: Libraries) -> list[str]:
    """Each reference's forward and gradient, and the generated TensorFlow ones, against the
    generated numpy forward and gradient: at the smoke size, in float64. Returns the names of
    the references checked; raises `ReferenceMismatch` naming every difference."""
    inputs = [x.astype(CHECK_DTYPE) for x in make_inputs(case, "smoke")]
    forward = getattr(gen.numpy, gen.func)
    grad_fn = getattr(gen.numpy, gen.func + "_grad")
    outputs = as_tuple(forward(*inputs, **case.attrs))
    rng = np.random.default_rng(2)
    upstream = [rng.standard_normal(np.shape(y)).astype(CHECK_DTYPE) for y in outputs]
    given = dict(zip(_keyword_only(grad_fn), outputs))
    grads = as_tuple(grad_fn(*upstream, *inputs, **given, **case.attrs))
    computed = {}
    for name, fn in case.reference_forwards(libs.tf, libs.autograd, libs.jax).items():
        if name.startswith("tf-"):
            computed[name] = _tf_check(libs.tf, fn, inputs, upstream)
        elif name == "autograd":
            computed[name] = _autograd_check(fn, inputs, upstream)
        else:
            computed[name] = _jax_check(fn, inputs, upstream)
    if libs.torch is not None and case.op in libs.torch.functions:
        own = libs.torch.functions[case.op]
        computed["torch"] = _torch_check(libs.torch.torch, lambda *xs: own(*xs, **case.attrs), inputs, upstream)
    if libs.tf is not None and gen.tf is not None:
        wrapper = getattr(gen.tf, gen.func)
        computed["generated TensorFlow"] = _tf_check(
            libs.tf, lambda *xs: wrapper(*xs, **case.attrs), inputs, upstream
        )
    differences = []
    for name, (ys, gs) in computed.items():
        for what, mine, theirs in (("forward", outputs, ys), ("gradient", grads, gs)):
            difference = _difference(mine, theirs)
            if difference:
                differences.append(f"{name} {what}: {difference}")
    if differences:
        raise ReferenceMismatch(
            f"REFERENCE MISMATCH in {case.label}: at the smoke size in float64, these differ from "
            "the generated numpy forward or gradient (the declared op):\n  "
            + "\n  ".join(differences)
        )
    return [name for name in computed if name != "generated TensorFlow"]


def _difference(ours, reference) -> str | None:
    """None where equal up to float64 round-off; else what differs. No gradient (None) is 0."""
    ours, reference = as_tuple(ours), as_tuple(reference)
    if len(ours) != len(reference):
        return f"{len(reference)} arrays, not {len(ours)}"
    for n, (a, b) in enumerate(zip(ours, reference)):
        a = np.zeros(np.shape(b)) if a is None else np.asarray(a, dtype=np.float64)
        b = np.zeros(np.shape(a)) if b is None else np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return f"array {n}: shape {b.shape}, not {a.shape}"
        if not agree(a, b, **CHECK_TOLERANCE):
            error = float(np.max(np.abs(a - b)))
            scale = float(np.max(np.abs(a), initial=0.0))
            return f"array {n}: largest difference {error:.3g} (largest entry {scale:.3g})"
    return None


def _autograd_check(fn, inputs, upstream):
    import autograd

    vjp, ys = autograd.make_vjp(lambda xs: fn(*xs))(tuple(inputs))
    return ys, vjp(upstream[0])


def _torch_check(torch, fn, inputs, upstream):
    """PyTorch's own function's outputs and autograd gradient, float64."""
    xs = [torch.from_numpy(x).requires_grad_(True) for x in inputs]
    ys = as_tuple(fn(*xs))
    grads = torch.autograd.grad(ys, xs, [torch.from_numpy(g) for g in upstream], allow_unused=True)
    return [y.detach().numpy() for y in ys], [None if g is None else g.numpy() for g in grads]


def _jax_check(fn, inputs, upstream):
    import jax

    with jax.enable_x64(True):  # float64 for the check only
        xs = [jax.numpy.asarray(x) for x in inputs]
        ys, vjp = jax.vjp(fn, *xs)
        grads = vjp(jax.numpy.asarray(upstream[0]))
        return np.asarray(ys), [np.asarray(g) for g in grads]


def _tf_check(tf, fn, inputs, upstream):
    xs = [tf.constant(x) for x in inputs]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        ys = list(as_tuple(fn(*xs)))
    grads = tape.gradient(ys, xs, output_gradients=[tf.constant(g) for g in upstream])
    to_numpy = lambda t: None if t is None else tf.convert_to_tensor(t).numpy()
    return [y.numpy() for y in ys], [to_numpy(g) for g in grads]


# --- numpy ------------------------------------------------------------------------------------


def numpy_contenders(case, gen, inputs, upstream, libs) -> tuple[list, list, dict]:
    """Phases of contenders, comparisons and {reference: agrees} of the numpy target.

    jax.jit is timed in a phase of its own: after each call, OpenBLAS's and XLA's worker threads
    spin for a while, and on two cores they slow whichever library runs next.
    """
    forward = getattr(gen.numpy, gen.func)
    grad_fn = getattr(gen.numpy, gen.func + "_grad")
    staged = "return_stages" in inspect.signature(forward).parameters
    outputs, stages = _forward_and_stages(forward, inputs, case.attrs, staged)
    given = dict(zip(_keyword_only(grad_fn), outputs))  # outputs come first, then attributes

    def ours():  # given what the forward kept, as autograd's closure and jax's residuals are
        return grad_fn(*upstream, *inputs, **given, **stages, **case.attrs)

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
    agrees = {name: agree(mine, run(), in_norm=case.kink) for name, run in references.items()}
    comparisons = [Comparison("numpy", name) for name in references]
    if case.composed and "autograd" in references:
        with_forward = _autograd_vjp_with_forward(case, libs.autograd, inputs, upstream)

        def ours_with_forward():
            ys, kept = _forward_and_stages(forward, inputs, case.attrs, staged)
            return grad_fn(*upstream, *inputs, **dict(zip(given, ys)), **kept, **case.attrs)

        phases[0] += [
            Contender("ours+forward", ours_with_forward),
            Contender("autograd+forward", with_forward),
        ]
        comparisons.append(Comparison("numpy", "autograd+forward", ours="ours+forward"))
        agrees["autograd+forward"] = agree(ours_with_forward(), with_forward(), in_norm=case.kink)
    return phases, comparisons + [Comparison("numpy", "forward")], agrees


def jax_contenders(case, gen, inputs, upstream, libs) -> tuple[list, list, dict]:
    """The JAX target: `jax.vjp` of the generated `custom_vjp` op (its gradient the derived
    one) against `jax.vjp` of the forward written in jax.numpy (JAX's autodiff), both closures
    applied under `jax.jit` with their residuals already computed."""
    op = getattr(gen.jax, gen.func)
    ours = _jax_vjp(_Reference(lambda _, *xs: op(*xs, **case.attrs)), None, inputs, upstream)
    theirs = _jax_vjp(case, libs.jax, inputs, upstream)
    phases = [[Contender("ours", ours), Contender("jax.jit", theirs)]]
    return phases, [Comparison("jax", "jax.jit")], {"jax.jit": agree(ours(), theirs(), in_norm=case.kink)}


def torch_contenders(case, gen, inputs, upstream, libs) -> tuple[list, list, dict]:
    """The PyTorch target: `torch.autograd.grad` through the generated Function (its backward
    the derived one) against the same through PyTorch's own function of the op type (its
    hand-written derivative), each forward run once beforehand, its graph retained."""
    op = getattr(gen.torch, gen.func)
    ours = _torch_backward(libs.torch.torch, lambda *xs: op(*xs, **case.attrs), inputs, upstream)
    own = libs.torch.functions[case.op]
    theirs = _torch_backward(libs.torch.torch, lambda *xs: own(*xs, **case.attrs), inputs, upstream)
    phases = [[Contender("ours", ours), Contender("torch", theirs)]]
    return phases, [Comparison("torch", "torch")], {"torch": agree(ours(), theirs(), in_norm=case.kink)}


def _torch_backward(torch, fn, inputs, upstream):
    """The backward of `fn` at `inputs` for `upstream`, its forward already run."""
    xs = [torch.from_numpy(np.ascontiguousarray(x)).requires_grad_(True) for x in inputs]
    ys = as_tuple(fn(*xs))
    gs = [torch.from_numpy(np.ascontiguousarray(g)) for g in upstream]

    def backward():
        grads = torch.autograd.grad(ys, xs, gs, retain_graph=True, allow_unused=True)
        return [None if g is None else g.numpy() for g in grads]

    return backward


@dataclass(frozen=True)
class _Reference:
    """A forward in the shape `_jax_vjp` reads a case's: `jax(namespace, *inputs)`."""

    jax: Any


def _forward_and_stages(forward, inputs, attrs, staged: bool) -> tuple[tuple, dict]:
    """The generated forward's outputs, and the stages its gradient reads (`return_stages`)."""
    if not staged:
        return as_tuple(forward(*inputs, **attrs)), {}
    outputs, stages = forward(*inputs, **attrs, return_stages=True)
    return as_tuple(outputs), stages


def _keyword_only(fn) -> list[str]:
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]


def _autograd_vjp(case, namespace, inputs, upstream):
    """autograd's vjp closure, its forward already evaluated."""
    import autograd

    vjp, _ = autograd.make_vjp(lambda xs: case.autograd(namespace, *xs))(tuple(inputs))
    return lambda: vjp(upstream[0])


def _autograd_vjp_with_forward(case, namespace, inputs, upstream):
    """autograd's forward and its vjp, as one training step runs them."""
    import autograd

    make = autograd.make_vjp(lambda xs: case.autograd(namespace, *xs))
    return lambda: make(tuple(inputs))[0](upstream[0])


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
        agrees = {"tf-registered": agree(ours(), reference(), in_norm=case.kink)}
    else:
        ours, ours_tape, reference = _composite_gradients(case, gen, tf, xs, ys, gs)
        contenders += [
            Contender("ours", ours),
            Contender("ours+forward", ours_tape),
            Contender("tf-autodiff+forward", reference),
        ]
        comparisons = [Comparison("tensorflow", "tf-autodiff+forward", ours="ours+forward")]
        agrees = {"tf-autodiff+forward": agree(ours_tape(), reference(), in_norm=case.kink)}
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
    """Result rows of one case, both targets: {op, variant, target, reference, ratio, ...}.

    Its references are checked against the declared op first (`check_references`)."""
    checked = check_references(case, gen, libs)
    inputs = make_inputs(case, size)
    outputs = as_tuple(getattr(gen.numpy, gen.func)(*inputs, **case.attrs))
    rng = np.random.default_rng(1)
    upstream = [rng.standard_normal(np.shape(y)).astype(DTYPE) for y in outputs]
    rows = []
    builders = [numpy_contenders]
    if libs.tf is not None and gen.tf is not None and (case.tf_op or case.tf_composite):
        builders.insert(0, lambda *args: tf_contenders(*args[:-1], libs.tf))
    if libs.jax is not None and gen.jax is not None and case.jax is not None:
        builders.append(jax_contenders)
    if libs.torch is not None and gen.torch is not None and case.op in libs.torch.functions:
        builders.append(torch_contenders)
    for build in builders:
        phases, comparisons, agrees = build(case, gen, inputs, upstream, libs)
        medians = {}
        for contenders in phases:
            time.sleep(timing.settle)
            medians.update(time_interleaved(contenders, timing.repeats, timing.min_sample))
        rows += [
            _row(case, size, c, medians, agrees.get(c.reference), checked) for c in comparisons
        ]
    return rows


CHECKED_AS = {"autograd+forward": "autograd"}  # a row's reference -> the forward checked for it


def _row(case, size, comparison, medians, agrees, checked) -> dict:
    ours, reference = medians[comparison.ours], medians[comparison.reference]
    name = CHECKED_AS.get(comparison.reference, comparison.reference)
    return {
        "op": case.op,
        "group": case.group,
        "variant": (
            case.variant if size == "full" else f"{case.variant} [{size}: {_shapes(case, size)}]"
        ),
        "target": comparison.target,
        "reference": comparison.reference,
        "ratio": ours / reference,
        "ours_s": ours,
        "reference_s": reference,
        "agrees": agrees,  # same gradient as ours at this size, float32 (None: the forward)
        # the reference's forward and gradient equal the declared op's (smoke size, float64)
        "reference_checked": True if name in checked else None,
    }


def _shapes(case, size) -> str:
    return ", ".join("x".join(map(str, shape)) for shape in case.shapes[size])
