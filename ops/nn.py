"""Normalisations and losses over the last axis, declared for any number of leading axes."""

import sympy as sp

from symgrad import dims, indices, op, tensor

M, N = dims("M N")
i, j, k = indices("i j k")


@op("Softmax")
def softmax():
    """exp(logits) normalised over the last axis."""
    logits = tensor("logits", (..., N))
    total = sp.Sum(sp.exp(logits[..., k]), (k, 0, N - 1))
    return {"softmax": ((..., i), sp.exp(logits[..., i]) / total)}


@op("LogSoftmax")
def log_softmax():
    """logits minus the log of the sum of their exponentials over the last axis."""
    logits = tensor("logits", (..., N))
    total = sp.Sum(sp.exp(logits[..., k]), (k, 0, N - 1))
    return {"logsoftmax": ((..., i), logits[..., i] - sp.log(total))}


@op("L2Loss")
def l2_loss():
    """Half the sum of squares of a matrix."""
    t = tensor("t", (M, N))
    return {"output": ((), sp.Sum(t[i, j] ** 2, (i, 0, M - 1), (j, 0, N - 1)) / 2)}
