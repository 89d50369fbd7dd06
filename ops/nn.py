"""Normalisations and losses over the last axis, declared for any number of leading axes."""

import sympy as sp

from symgrad import Namesake, all_entries, dims, indices, maximum, op, stop_gradient, tensor

M, N = dims("M N")
i, j, k, l = indices("i j k l")

# what the ops stand for in PyTorch and JAX: their wrappers there take these conventions
SOFTMAX = {"torch": Namesake("torch.softmax(logits, dim=-1)"), "jax": Namesake("jax.nn.softmax(logits)")}
LOG_SOFTMAX = {"torch": Namesake("torch.log_softmax(logits, dim=-1)"), "jax": Namesake("jax.nn.log_softmax(logits)")}
CROSS_ENTROPY = {  # the loss; the classes on the last axis, any number of leading batch axes
    "torch": Namesake("torch.nn.functional.cross_entropy(features.flatten(0, -2), labels.flatten(0, -2), "
                      "reduction='none').reshape(labels.shape[:-1])", batch_axes=True),
    "jax": Namesake("-jnp.sum(labels * jax.nn.log_softmax(features), axis=-1)", batch_axes=True),
}
SPARSE_CROSS_ENTROPY = {  # optax's softmax_cross_entropy_with_integer_labels is the JAX one
    "torch": Namesake("torch.nn.functional.cross_entropy(features.flatten(0, -2), labels.flatten(), "
                      "reduction='none').reshape(labels.shape)", batch_axes=True),
    "jax": Namesake("-jnp.take_along_axis(jax.nn.log_softmax(features), labels[..., None], axis=-1)[..., 0]",
                    batch_axes=True),
}


def _row_maximum(x, *row):
    """The largest entry of a row: subtracted before `exp` so that nothing overflows, and
    without a gradient of its own (the result does not depend on it)."""
    return stop_gradient(maximum(x[(*row, l)], (l, 0, N - 1)))


@op("Softmax", namesakes=SOFTMAX)
def softmax():
    """exp(logits) normalised over the last axis, the row maximum subtracted (no overflow)."""
    logits = tensor("logits", (..., N))
    largest = _row_maximum(logits, ...)
    total = sp.Sum(sp.exp(logits[..., k] - largest), (k, 0, N - 1))
    return {"softmax": ((..., i), sp.exp(logits[..., i] - largest) / total)}


@op("LogSoftmax", namesakes=LOG_SOFTMAX)
def log_softmax():
    """logits minus log(sum(exp(logits))) over the last axis, the row maximum subtracted (no overflow)."""
    logits = tensor("logits", (..., N))
    largest = _row_maximum(logits, ...)
    total = sp.Sum(sp.exp(logits[..., k] - largest), (k, 0, N - 1))
    return {"logsoftmax": ((..., i), logits[..., i] - largest - sp.log(total))}


@op("L2Loss")
def l2_loss():
    """Half the sum of squares of all entries, whatever the rank (`all_entries` sums `...`)."""
    t = tensor("t", (...,))
    return {"output": ((), all_entries(t[...] ** 2) / 2)}


@op("SoftmaxCrossEntropyWithLogits", namesakes=CROSS_ENTROPY)
def softmax_cross_entropy_with_logits():
    """Cross-entropy of softmax(features) against labels, and its gradient w.r.t. features."""
    features = tensor("features", (M, N))
    labels = tensor("labels", (M, N))
    largest = _row_maximum(features, i)
    total = sp.Sum(sp.exp(features[i, k] - largest), (k, 0, N - 1))
    log_softmax = features[i, j] - largest - sp.log(total)
    return {
        "loss": ((i,), -sp.Sum(labels[i, j] * log_softmax, (j, 0, N - 1))),
        "backprop": ((i, j), sp.exp(features[i, j] - largest) / total - labels[i, j]),
    }


@op("SparseSoftmaxCrossEntropyWithLogits", namesakes=SPARSE_CROSS_ENTROPY)
def sparse_softmax_cross_entropy_with_logits():
    """Cross-entropy of softmax(features) against class `labels[i]` of each row.

    `features[i, labels[i]]` is a gather in the row; its adjoint scatters into the same row."""
    features = tensor("features", (M, N))
    labels = tensor("labels", (M,), integer=True)
    largest = _row_maximum(features, i)
    total = sp.Sum(sp.exp(features[i, k] - largest), (k, 0, N - 1))
    return {
        "loss": ((i,), largest + sp.log(total) - features[i, labels[i]]),
        "backprop": ((i, j), sp.exp(features[i, j] - largest) / total - sp.KroneckerDelta(j, labels[i])),
    }


@op("BiasAdd", attrs={"data_format": ("NHWC", "NCHW")})
def bias_add(data_format):
    """value + bias along the channel axis: the last (NHWC, any rank) or the second (NCHW, rank 4)."""
    C, H, W, B = dims("C H W B")
    c, h, w, b = indices("c h w b")
    bias = None
    if data_format == "NHWC":
        value = tensor("value", (..., C))
        bias = tensor("bias", (C,))
        return {"output": ((..., c), value[..., c] + bias[c])}
    value = tensor("value", (B, C, H, W))
    bias = tensor("bias", (C,))
    return {"output": ((b, c, h, w), value[b, c, h, w] + bias[c])}


@op("Cross")
def cross():
    """The cross product of 3-vectors along the last axis (the Levi-Civita symbol contracted)."""
    a, b, c = indices("a b c")
    u = tensor("a", (..., 3))
    v = tensor("b", (..., 3))
    product = sp.LeviCivita(a, b, c) * u[..., b] * v[..., c]
    return {"product": ((..., a), sp.Sum(product, (b, 0, 2), (c, 0, 2)))}


@op("BiasAddV1")
def bias_add_v1():
    """value + bias along the last axis (BiasAdd's first version, no data_format)."""
    C = dims("C")[0]
    c = indices("c")[0]
    value = tensor("value", (..., C))
    bias = tensor("bias", (C,))
    return {"output": ((..., c), value[..., c] + bias[c])}


@op("BiasAddGrad", attrs={"data_format": ("NHWC", "NCHW")})
def bias_add_backprop(data_format):
    """BiasAdd's gradient of bias: out_backprop summed over all but the channel axis.

    Not `bias_add_grad`, the name of the generated gradient of BiasAdd.
    """
    C, H, W, B = dims("C H W B")
    c, h, w, b = indices("c h w b")
    if data_format == "NHWC":
        out_backprop = tensor("out_backprop", (..., C))
        return {"output": ((c,), all_entries(out_backprop[..., c]))}
    out_backprop = tensor("out_backprop", (B, C, H, W))
    total = sp.Sum(out_backprop[b, c, h, w], (b, 0, B - 1), (h, 0, H - 1), (w, 0, W - 1))
    return {"output": ((c,), total)}

