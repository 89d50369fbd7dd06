"""The benchmark's op table: one `Case` per op and variant, each with its references.

Adding an op is one entry in `CASES`: its op type (as declared, TensorFlow's name), the input
shapes per size, the attributes, and how each reference computes the same forward: TensorFlow's
raw op (whose registered gradient is the reference), autograd's and JAX's numpy expressions.
A case whose op is not derived (yet) is skipped, so entries may run ahead of ops/.

A composed op (`composed=True`: LayerNorm, attention, an MLP block, from ops/composed.py) has
no TensorFlow op type and no registered gradient: its references are its forward written by
hand in each framework, as a user would (`tf_composite` in plain TF ops, `autograd` in
autograd.numpy, `jax` in jax.numpy), each differentiated by that framework's autodiff. Every
reference forward (`reference_forwards`) is checked against the declared op before anything
is timed: its forward and its gradient must equal the generated ones in float64 at the smoke
size (`bench_measure.check_references`), or the run fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

Shapes = tuple[tuple[int, ...], ...]
SIZES = ("full", "quick", "smoke")


@dataclass(frozen=True)
class Case:
    """One row group of the benchmark: an op at one variant (attributes and shapes)."""

    op: str  # op type, as declared with @op / @elementwise
    variant: str  # what tells this row from the op's other rows
    shapes: dict[str, Shapes]  # size ("full", "quick", "smoke") -> one shape per input
    attrs: dict[str, Any] = field(
        default_factory=dict
    )  # keyword attributes of the generated functions
    tf_op: Callable | None = (
        None  # (tf, *inputs) -> output of TensorFlow's op (registered gradient)
    )
    tf_composite: Callable | None = None  # (tf, *inputs) -> output, for ops TF composes (autodiff)
    autograd: Callable | None = None  # (namespace with np, special, *inputs) -> output
    jax: Callable | None = None  # (namespace with np, nn, special, *inputs) -> output
    positive: tuple[int, ...] = ()  # inputs drawn from [0.5, 2): denominators
    composed: bool = False  # a composition (no TF op, no registered gradient): own targets
    # a kink (ReLU): at full size, float32 round-off in another library's product can put a
    # pre-activation on the other side of it (one of 4M in MlpBlock: a row of the input's
    # gradient changes by 0.7% of its largest entry), so the timed gradients agree in norm
    kink: bool = False

    @property
    def label(self) -> str:
        return f"{self.op} {self.variant}"

    @property
    def group(self) -> str:
        """Which targets its rows count towards: "composed" or "op" (bench_report.TARGETS)."""
        return "composed" if self.composed else "op"

    def reference_forwards(self, tf=None, autograd=None, jax=None) -> dict[str, Callable]:
        """The forward each reference differentiates, `(*inputs) -> output`, per reference name
        (as in the result rows), for the libraries given (None: not installed)."""
        forwards = {}
        if tf is not None and self.tf_op is not None:
            forwards["tf-registered"] = lambda *xs: self.tf_op(tf, *xs)
        if tf is not None and self.tf_composite is not None:
            forwards["tf-autodiff+forward"] = lambda *xs: self.tf_composite(tf, *xs)
        if autograd is not None and self.autograd is not None:
            forwards["autograd"] = lambda *xs: self.autograd(autograd, *xs)
        if jax is not None and self.jax is not None:
            forwards["jax.jit"] = lambda *xs: self.jax(jax, *xs)
        return forwards


def sizes(full: Shapes, quick: Shapes | None = None, smoke: Shapes | None = None) -> dict:
    """Input shapes per size; `quick` defaults to `full`, `smoke` to one small shape per input."""
    quick = quick or full
    smoke = smoke or tuple(tuple(min(n, 8) for n in shape) for shape in full)
    return {"full": full, "quick": quick, "smoke": smoke}


def _t(transpose: bool) -> str:
    return "T" if transpose else "N"


def matmul(ta: bool, tb: bool) -> Case:
    """MatMul at 1024 x 1024 with transpose flags `ta`, `tb`."""
    op_a = (lambda x: x.T) if ta else (lambda x: x)
    op_b = (lambda x: x.T) if tb else (lambda x: x)
    return Case(
        "MatMul",
        f"{_t(ta)}{_t(tb)} 1024x1024",
        sizes(((1024, 1024), (1024, 1024)), ((512, 512), (512, 512))),
        attrs={"transpose_a": ta, "transpose_b": tb},
        tf_op=lambda tf, a, b: tf.raw_ops.MatMul(a=a, b=b, transpose_a=ta, transpose_b=tb),
        autograd=lambda m, a, b: m.np.matmul(op_a(a), op_b(b)),
        jax=lambda m, a, b: m.np.matmul(op_a(a), op_b(b)),
    )


def batch_matmul(variant: str, shapes: Shapes, quick: Shapes) -> Case:
    """BatchMatMulV2 without adjoints; broadcasting when the shapes' batch axes differ."""
    smoke = tuple((2, 8, 8)[-len(shape) :] for shape in shapes)
    return Case(
        "BatchMatMulV2",
        variant,
        sizes(shapes, quick, smoke),
        attrs={"adj_x": False, "adj_y": False},
        tf_op=lambda tf, x, y: tf.raw_ops.BatchMatMulV2(x=x, y=y),
        autograd=lambda m, x, y: m.np.matmul(x, y),
        jax=lambda m, x, y: m.np.matmul(x, y),
    )


def unary(op: str, tf_op=None, autograd=None, jax=None, tf_composite=None) -> Case:
    """An elementwise op on 10^7 elements."""
    return Case(
        op,
        "1e7",
        sizes(((10**7,),), ((10**6,),), ((64,),)),
        tf_op=tf_op,
        tf_composite=tf_composite,
        autograd=autograd,
        jax=jax,
    )


def binary(op: str, variant: str, shapes: Shapes, tf_op, expr, positive=()) -> Case:
    """A broadcasting binary op: `expr(x, y)` in autograd and JAX."""
    smoke = tuple(tuple(min(n, 8) for n in shape) for shape in shapes)
    quick = tuple(tuple(n // 4 if n > 1 else 1 for n in shape) for shape in shapes)
    return Case(
        op,
        variant,
        sizes(shapes, quick, smoke),
        tf_op=tf_op,
        autograd=lambda m, x, y: expr(x, y),
        jax=lambda m, x, y: expr(x, y),
        positive=positive,
    )


def last_axis(op: str, shape, attrs, tf_op, expr) -> Case:
    """A reduction or scan over the last axis: `expr(np, x)` in autograd and JAX."""
    return Case(
        op,
        "x".join(map(str, shape)) + ", axis -1",
        sizes((shape,), (tuple(n // 4 for n in shape),)),
        attrs=attrs,
        tf_op=tf_op,
        autograd=lambda m, x: expr(m, x),
        jax=lambda m, x: expr(m, x),
    )


def _gelu(m, x):
    """The exact GELU as an autograd user writes it."""
    return 0.5 * x * (1.0 + m.special.erf(x / math.sqrt(2.0)))


# --- composed ops: their forwards written by hand, as each framework's users write them ---------

LAYER_NORM_EPSILON = 1e-3  # ops/composed.py's default, passed to the generated functions too


def _layer_norm(m, x, scale, offset):
    """LayerNorm in numpy terms (autograd.numpy, jax.numpy): the variance around the mean."""
    mean = m.np.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    variance = m.np.mean(centred**2, axis=-1, keepdims=True)
    return scale * centred / m.np.sqrt(variance + LAYER_NORM_EPSILON) + offset


def _tf_layer_norm(tf, x, scale, offset):
    mean = tf.reduce_mean(x, axis=-1, keepdims=True)
    centred = x - mean
    variance = tf.reduce_mean(tf.square(centred), axis=-1, keepdims=True)
    return scale * centred * tf.math.rsqrt(variance + LAYER_NORM_EPSILON) + offset


def _scores(m, q, k, mask):
    return m.np.matmul(q, m.np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1]) + mask


def _attention_autograd(m, q, k, v, mask):
    """softmax(q k^T / sqrt(D) + mask) v; autograd has no softmax: exp(s - logsumexp(s))."""
    scores = _scores(m, q, k, mask)
    weights = m.np.exp(scores - m.special.logsumexp(scores, axis=-1, keepdims=True))
    return m.np.matmul(weights, v)


def _attention_jax(m, q, k, v, mask):
    return m.np.matmul(m.nn.softmax(_scores(m, q, k, mask), axis=-1), v)


def _tf_attention(tf, q, k, v, mask):
    scores = tf.matmul(q, k, transpose_b=True) / math.sqrt(q.shape[-1]) + mask
    return tf.matmul(tf.nn.softmax(scores, axis=-1), v)


def _mlp_autograd(m, x, w1, b1, w2, b2):
    return m.np.matmul(m.np.maximum(m.np.matmul(x, w1) + b1, 0.0), w2) + b2


def _mlp_jax(m, x, w1, b1, w2, b2):
    return m.np.matmul(m.nn.relu(m.np.matmul(x, w1) + b1), w2) + b2


def _tf_mlp(tf, x, w1, b1, w2, b2):
    return tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2


def composed(
    op: str, variant: str, shapes: dict, autograd, jax, tf, attrs=None, kink=False
) -> Case:
    """A composed op: each reference is its forward written by hand, differentiated by autodiff."""
    return Case(
        op,
        variant,
        shapes,
        attrs=attrs or {},
        tf_composite=tf,
        autograd=autograd,
        jax=jax,
        composed=True,
        kink=kink,
    )


COMPOSED: tuple[Case, ...] = (
    composed(
        "ScaledDotProductAttention",
        "8x512x64",  # q, k, v 8x512x64 (batch, positions, features); mask 8x512x512
        sizes(
            ((8, 512, 64), (8, 512, 64), (8, 512, 64), (8, 512, 512)),
            ((2, 256, 64), (2, 256, 64), (2, 256, 64), (2, 256, 256)),
            ((2, 5, 3), (2, 6, 3), (2, 6, 4), (2, 5, 6)),  # M != N, D != E: no axis mixed up
        ),
        autograd=_attention_autograd,
        jax=_attention_jax,
        tf=_tf_attention,
    ),
    composed(
        "LayerNorm",
        "4096x1024",
        sizes(
            ((4096, 1024), (1024,), (1024,)), ((1024, 1024), (1024,), (1024,)), ((6, 5), (5,), (5,))
        ),
        autograd=_layer_norm,
        jax=_layer_norm,
        tf=_tf_layer_norm,
        attrs={"epsilon": LAYER_NORM_EPSILON},
    ),
    composed(
        "MlpBlock",
        "1024x1024 @ 1024x4096 @ 4096x1024",
        sizes(
            ((1024, 1024), (1024, 4096), (4096,), (4096, 1024), (1024,)),
            ((256, 512), (512, 2048), (2048,), (2048, 512), (512,)),
            ((5, 3), (3, 7), (7,), (7, 4), (4,)),
        ),
        autograd=_mlp_autograd,
        jax=_mlp_jax,
        tf=_tf_mlp,
        kink=True,
    ),
)

ROWS = (4096, 1024)  # a batch of activations: 4096 rows of 1024 features
LOGITS = (256, 4096)  # 256 rows of 4096 classes

MIRROR_PADDINGS = [[0, 0], [2, 2], [2, 2], [0, 0]]

CASES: tuple[Case, ...] = (
    *(matmul(ta, tb) for ta in (False, True) for tb in (False, True)),
    batch_matmul(
        "32x256x256 @ 32x256x256",
        ((32, 256, 256), (32, 256, 256)),
        ((8, 256, 256), (8, 256, 256)),
    ),
    batch_matmul(
        "32x256x256 @ 256x256 (broadcast)",
        ((32, 256, 256), (256, 256)),
        ((8, 256, 256), (256, 256)),
    ),
    unary(
        "Sigmoid",
        tf_op=lambda tf, x: tf.raw_ops.Sigmoid(x=x),
        autograd=lambda m, x: m.special.expit(x),
        jax=lambda m, x: m.nn.sigmoid(x),
    ),
    unary(
        "Tanh",
        tf_op=lambda tf, x: tf.raw_ops.Tanh(x=x),
        autograd=lambda m, x: m.np.tanh(x),
        jax=lambda m, x: m.np.tanh(x),
    ),
    unary(
        "Softplus",
        tf_op=lambda tf, x: tf.raw_ops.Softplus(features=x),
        autograd=lambda m, x: m.np.logaddexp(0.0, x),
        jax=lambda m, x: m.nn.softplus(x),
    ),
    unary(
        "GeluErf",
        tf_composite=lambda tf, x: tf.nn.gelu(x, approximate=False),
        autograd=_gelu,
        jax=lambda m, x: m.nn.gelu(x, approximate=False),
    ),
    binary(
        "Mul",
        "4096x1024 * 1x1024",
        (ROWS, (1, 1024)),
        lambda tf, x, y: tf.raw_ops.Mul(x=x, y=y),
        lambda x, y: x * y,
    ),
    binary(
        "Mul",
        "4096x1024 * 4096x1024",
        (ROWS, ROWS),
        lambda tf, x, y: tf.raw_ops.Mul(x=x, y=y),
        lambda x, y: x * y,
    ),
    binary(
        "RealDiv",
        "4096x1024 / 1x1024",
        (ROWS, (1, 1024)),
        lambda tf, x, y: tf.raw_ops.RealDiv(x=x, y=y),
        lambda x, y: x / y,
        positive=(1,),
    ),
    binary(
        "RealDiv",
        "4096x1024 / 4096x1",
        (ROWS, (4096, 1)),
        lambda tf, x, y: tf.raw_ops.RealDiv(x=x, y=y),
        lambda x, y: x / y,
        positive=(1,),
    ),
    Case(
        "Softmax",
        "256x4096",
        sizes((LOGITS,), ((64, 4096),)),
        tf_op=lambda tf, x: tf.raw_ops.Softmax(logits=x),
        autograd=lambda m, x: m.np.exp(x - m.special.logsumexp(x, axis=-1, keepdims=True)),
        jax=lambda m, x: m.nn.softmax(x, axis=-1),
    ),
    Case(
        "LogSoftmax",
        "256x4096",
        sizes((LOGITS,), ((64, 4096),)),
        tf_op=lambda tf, x: tf.raw_ops.LogSoftmax(logits=x),
        autograd=lambda m, x: x - m.special.logsumexp(x, axis=-1, keepdims=True),
        jax=lambda m, x: m.nn.log_softmax(x, axis=-1),
    ),
    last_axis(
        "Sum",
        ROWS,
        {"axis": -1, "keep_dims": False},
        lambda tf, x: tf.raw_ops.Sum(input=x, axis=-1, keep_dims=False),
        lambda m, x: m.np.sum(x, axis=-1),
    ),
    last_axis(
        "Mean",
        ROWS,
        {"axis": -1, "keep_dims": False},
        lambda tf, x: tf.raw_ops.Mean(input=x, axis=-1, keep_dims=False),
        lambda m, x: m.np.mean(x, axis=-1),
    ),
    last_axis(
        "Cumsum",
        ROWS,
        {"axis": -1, "exclusive": False, "reverse": False},
        lambda tf, x: tf.raw_ops.Cumsum(x=x, axis=-1, exclusive=False, reverse=False),
        lambda m, x: m.np.cumsum(x, axis=-1),
    ),
    Case(
        "Conv2D",
        "32x64x64x64 * 3x3x64x64, SAME",
        sizes(((32, 64, 64, 64), (3, 3, 64, 64)), ((8, 32, 32, 32), (3, 3, 32, 32)), ((2, 8, 8, 4), (3, 3, 4, 4))),
        {"strides": [1, 1, 1, 1], "padding": "SAME", "explicit_paddings": [], "dilations": [1, 1, 1, 1]},
        tf_op=lambda tf, x, w: tf.raw_ops.Conv2D(input=x, filter=w, strides=[1, 1, 1, 1], padding="SAME"),
        jax=lambda m, x, w: m.lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        ),
    ),
    Case(
        "ExtractVolumePatches",
        "8x8x16x16x8, 2x2x2 patches, stride 2, VALID",
        sizes(((8, 8, 16, 16, 8),), ((4, 4, 8, 8, 4),), ((2, 4, 4, 4, 3),)),
        {"ksizes": [1, 2, 2, 2, 1], "strides": [1, 2, 2, 2, 1], "padding": "VALID"},
        tf_op=lambda tf, x: tf.raw_ops.ExtractVolumePatches(input=x, ksizes=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1], padding="VALID"),
    ),
    Case(
        "MirrorPad",
        "32x64x64x16, 2 each side of H and W, REFLECT",
        sizes(((32, 64, 64, 16),), ((8, 32, 32, 16),), ((2, 8, 8, 3),)),
        {"paddings": MIRROR_PADDINGS, "mode": "REFLECT"},
        tf_op=lambda tf, x: tf.raw_ops.MirrorPad(input=x, paddings=MIRROR_PADDINGS, mode="REFLECT"),
        jax=lambda m, x: m.np.pad(x, MIRROR_PADDINGS, mode="reflect"),
    ),
    *COMPOSED,
)
