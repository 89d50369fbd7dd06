"""Composed ops, as users write them: normalisations, attention, an MLP block, kernels, RoPE.

None of these is one TensorFlow op type: each is a composition a person would otherwise
differentiate by hand. Reductions nested in other expressions become stages, so the gradient
is taken stage by stage (reverse mode); `stage()` names an intermediate explicitly.
"""

import sympy as sp

from symgrad import Namesake, dims, indices, maximum, op, stage, stop_gradient, tensor

B, H, W, C, M, N, D, E, K, G = dims("B H W C M N D E K G")
b, h, w, c, i, j, k, l, d, e, g = indices("b h w c i j k l d e g")

EPSILON = {"epsilon": float}
SMALL = {"epsilon": 1e-3}

# what the ops stand for in PyTorch and JAX: their wrappers there take these conventions
LAYER_NORM = {
    "torch": Namesake("torch.nn.functional.layer_norm(x, x.shape[-1:], scale, offset, eps)",
                      keywords={"epsilon": "eps"}, defaults={"epsilon": 1e-5}),
    "jax": Namesake("jax.nn.standardize(x, epsilon=epsilon) * scale + offset", defaults={"epsilon": 1e-5}),
}
ATTENTION = {
    "torch": Namesake("torch.nn.functional.scaled_dot_product_attention(q, k, v, mask, is_causal=is_causal, "
                      "scale=scale)", causal_mask="mask", scaled=("q", 1 / sp.sqrt(D))),
    # JAX's takes (batch, length, heads, head width): one head here, PyTorch's axis order
    "jax": Namesake("jax.nn.dot_product_attention(q[:, :, None], k[:, :, None], v[:, :, None], "
                    "bias=None if mask is None else mask[:, None], scale=scale, is_causal=is_causal)[:, :, 0]",
                    causal_mask="mask", scaled=("q", 1 / sp.sqrt(D))),
}


@op("LayerNorm", attrs=EPSILON, defaults=SMALL, namesakes=LAYER_NORM)
def layer_norm(epsilon):
    """Normalised over the last axis, scaled and shifted: the variance a sum around the mean."""
    x = tensor("x", (..., N))
    scale = tensor("scale", (N,))
    offset = tensor("offset", (N,))
    mean = sp.Sum(x[..., k], (k, 0, N - 1)) / N
    variance = sp.Sum((x[..., k] - mean) ** 2, (k, 0, N - 1)) / N
    return {"y": ((..., i), scale[i] * (x[..., i] - mean) / sp.sqrt(variance + epsilon) + offset[i])}


@op("LayerNormMoments", attrs=EPSILON, defaults=SMALL)
def layer_norm_moments(epsilon):
    """Layer norm with the variance from the first two moments, one letter summed in both."""
    x = tensor("x", (..., N))
    scale = tensor("scale", (N,))
    offset = tensor("offset", (N,))
    mean = sp.Sum(x[..., k], (k, 0, N - 1)) / N
    variance = sp.Sum(x[..., k] ** 2, (k, 0, N - 1)) / N - mean**2
    return {"y": ((..., i), scale[i] * (x[..., i] - mean) / sp.sqrt(variance + epsilon) + offset[i])}


@op("BatchNormTraining", attrs=EPSILON, defaults=SMALL)
def batch_norm_training(epsilon):
    """Batch normalisation in training mode (NHWC): statistics over the batch and space."""
    x = tensor("x", (B, H, W, C))
    scale = tensor("scale", (C,))
    offset = tensor("offset", (C,))
    count = B * H * W
    over_batch = lambda f: sp.Sum(f, (b, 0, B - 1), (h, 0, H - 1), (w, 0, W - 1))
    mean = stage("mean", (c,), over_batch(x[b, h, w, c]) / count)
    variance = stage("variance", (c,), over_batch((x[b, h, w, c] - mean[c]) ** 2) / count)
    normalised = (x[b, h, w, c] - mean[c]) / sp.sqrt(variance[c] + epsilon)
    return {"y": ((b, h, w, c), scale[c] * normalised + offset[c])}


@op("GroupNorm", attrs={"epsilon": float, "groups": int}, defaults={"epsilon": 1e-3, "groups": 2},
    samples={"groups": (2,)})
def group_norm(epsilon, groups):
    """Group normalisation (NHWC): channels in `groups` groups, normalised over space and group."""
    x = tensor("x", (B, H, W, (groups, C)))
    scale = tensor("scale", ((groups, C),))
    offset = tensor("offset", ((groups, C),))
    count = H * W * C
    over_group = lambda f: sp.Sum(f, (h, 0, H - 1), (w, 0, W - 1), (c, 0, C - 1))
    mean = stage("mean", (b, (g, groups)), over_group(x[b, h, w, g, c]) / count)
    variance = stage("variance", (b, (g, groups)), over_group((x[b, h, w, g, c] - mean[b, g]) ** 2) / count)
    normalised = (x[b, h, w, g, c] - mean[b, g]) / sp.sqrt(variance[b, g] + epsilon)
    return {"y": ((b, h, w, (g, (c, C))), scale[g, c] * normalised + offset[g, c])}


@op("ScaledDotProductAttention", namesakes=ATTENTION)
def scaled_dot_product_attention():
    """softmax(q @ k.T / sqrt(D) + mask) @ v, the row maximum subtracted (no overflow)."""
    q = tensor("q", (..., M, D))
    keys = tensor("k", (..., N, D))
    v = tensor("v", (..., N, E))
    mask = tensor("mask", (..., M, N))
    scores = stage("scores", (..., i, j), sp.Sum(q[..., i, d] * keys[..., j, d], (d, 0, D - 1)) / sp.sqrt(D) + mask[..., i, j])
    largest = stop_gradient(maximum(scores[..., i, l], (l, 0, N - 1)))
    total = sp.Sum(sp.exp(scores[..., i, l] - largest), (l, 0, N - 1))
    weights = stage("weights", (..., i, j), sp.exp(scores[..., i, j] - largest) / total)
    return {"output": ((..., i, e), sp.Sum(weights[..., i, j] * v[..., j, e], (j, 0, N - 1)))}


@op("MlpBlock")
def mlp_block():
    """relu(x @ w1 + b1) @ w2 + b2, one op: the hidden layer a stage of its own."""
    x = tensor("x", (M, D))
    w1 = tensor("w1", (D, H))
    b1 = tensor("b1", (H,))
    w2 = tensor("w2", (H, E))
    b2 = tensor("b2", (E,))
    hidden = sp.Sum(x[i, d] * w1[d, h], (d, 0, D - 1)) + b1[h]
    relu = sp.Piecewise((hidden, hidden > 0), (0, True))
    return {"y": ((i, e), sp.Sum(relu * w2[h, e], (h, 0, H - 1)) + b2[e])}


@op("CosineSimilarity", attrs=EPSILON, defaults={"epsilon": 1e-8})
def cosine_similarity(epsilon):
    """Cosine of the angle between x and y along the last axis, for every leading position."""
    x = tensor("x", (..., D))
    y = tensor("y", (..., D))
    dot = sp.Sum(x[..., d] * y[..., d], (d, 0, D - 1))
    norms = sp.sqrt(sp.Sum(x[..., d] ** 2, (d, 0, D - 1)) * sp.Sum(y[..., d] ** 2, (d, 0, D - 1)) + epsilon)
    return {"output": ((...,), dot / norms)}


@op("RbfKernel", attrs={"length_scale": float}, defaults={"length_scale": 1.0})
def rbf_kernel(length_scale):
    """exp(-|x_i - y_j|^2 / (2 s^2)) for every row i of x and j of y."""
    x = tensor("x", (M, D))
    y = tensor("y", (N, D))
    distance = sp.Sum((x[i, d] - y[j, d]) ** 2, (d, 0, D - 1))
    return {"kernel": ((i, j), sp.exp(-distance / (2 * length_scale**2)))}


@op("LogSumExpMatMul")
def log_sum_exp_mat_mul():
    """log(sum_j exp((a @ b)[i, j])) per row, the row maximum subtracted (no overflow)."""
    a = tensor("a", (M, K))
    b_ = tensor("b", (K, N))
    product = lambda col: sp.Sum(a[i, k] * b_[k, col], (k, 0, K - 1))
    largest = stop_gradient(maximum(product(j), (j, 0, N - 1)))
    return {"output": ((i,), largest + sp.log(sp.Sum(sp.exp(product(j) - largest), (j, 0, N - 1))))}


@op("BiasGelu")
def bias_gelu():
    """GELU (tanh form) of x + bias, the bias along the last axis: a fused layer's activation."""
    x = tensor("x", (..., C))
    bias = tensor("bias", (C,))
    z = x[..., c] + bias[c]
    inner = sp.sqrt(2 / sp.pi) * (z + sp.Rational(44715, 1000000) * z**3)
    return {"y": ((..., c), z * (1 + sp.tanh(inner)) / 2)}


@op("RotaryEmbedding")
def rotary_embedding():
    """Rotary position embedding, GPT-NeoX's "rotate half" form: x * cos + rotate_half(x) * sin,
    rotate_half(x) = concat(-x2, x1) of the last axis's halves x1 (c = 0) and x2 (c = 1)."""
    x = tensor("x", (..., N, (2, D)))
    cos = tensor("cos", (N, (2, D)))
    sin = tensor("sin", (N, (2, D)))
    other_half = x[..., i, 1 - c, d]
    rotated = x[..., i, c, d] * cos[i, c, d] + (2 * c - 1) * other_half * sin[i, c, d]
    return {"y": ((..., i, ((c, 2), (d, D))), rotated)}
