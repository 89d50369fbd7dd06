"""Convolution kernels, each with the index formula it computes, and how to find one.

A contraction of a windowed read (a tensor entry read at `u*s + k*d - p` per spatial axis)
with a tensor indexed by the window is a convolution; its gradients are too (the filter's
reads the input in windows, the input's reads the upstream gradient at `(h + p - k*d) / s`
where that divides). Each is computed by a convolution kernel, never by gathering every
window. As in `symgrad.fused`, the table holds formulas, never op names: a sum is matched by
what it computes, wherever it comes from. Channels last, filter `(*window, C, O)`:

* `conv`:                 `y[n, *u, o]  = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, o], k, c)`
* `conv_backprop_filter`: `df[*k, c, o] = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, o], n, u)`
* `conv_backprop_input`:  `dx[n, *h, c] = sum(g[n, *((h + p - k*d) / s), o] * f[*k, c, o], k, o)`

Depthwise: each input channel c with its own M filters, the channel never summed (the
result's channel pair `(c, m)` is one axis `c*M + m` where an op declares it as a group; the
sums see the pair). Filter `(*window, C, M)`:

* `depthwise_conv`:                 `y[n, *u, c, m]  = sum(x[n, *(u*s + k*d - p), c] * f[*k, c, m], k)`
* `depthwise_conv_backprop_filter`: `df[*k, c, m]    = sum(x[n, *(u*s + k*d - p), c] * g[n, *u, c, m], n, u)`
* `depthwise_conv_backprop_input`:  `dx[n, *h, c]    = sum(g[n, *((h + p - k*d) / s), c, m] * f[*k, c, m], k, m)`

Entries read outside their tensor are zero (the padding), and `(h + p - k*d) / s` names no
entry where `s` does not divide it.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from symgrad.functions import exact_div

WINDOW = "window"  # a windowed read: u*s + k*d - p
TRANSPOSED = "transposed"  # its inverse: (h + p - k*d) / s
SPATIAL = ("u", "k", "h")  # letters standing for one index per spatial axis


@dataclass(frozen=True)
class ConvKernel:
    """One convolution kernel as the index formula it computes, over any number of spatial axes."""

    name: str  # "conv", "conv_backprop_filter", "depthwise_conv", ...: the helper called
    first: tuple[str, ...]  # subscripts of the operand read through the map, letters
    second: tuple[str, ...]  # subscripts of the other operand
    out: tuple[str, ...]  # subscripts of the result
    summed: frozenset[str]  # letters summed over

    def __str__(self) -> str:
        return f"{self.name}[{', '.join(self.out)}] = sum({self.first} * {self.second}, {sorted(self.summed)})"


KERNELS = (
    ConvKernel("conv", ("n", WINDOW, "c"), ("k", "c", "o"), ("n", "u", "o"), frozenset("kc")),
    ConvKernel("conv_backprop_filter", ("n", WINDOW, "c"), ("n", "u", "o"), ("k", "c", "o"), frozenset("nu")),
    ConvKernel("conv_backprop_input", ("n", TRANSPOSED, "o"), ("k", "c", "o"), ("n", "h", "c"), frozenset("ko")),
)

DEPTHWISE_KERNELS = (
    ConvKernel("depthwise_conv", ("n", WINDOW, "c"), ("k", "c", "m"), ("n", "u", "c", "m"), frozenset("k")),
    ConvKernel(
        "depthwise_conv_backprop_filter", ("n", WINDOW, "c"), ("n", "u", "c", "m"), ("k", "c", "m"), frozenset("nu")
    ),
    ConvKernel(
        "depthwise_conv_backprop_input", ("n", TRANSPOSED, "c", "m"), ("k", "c", "m"), ("n", "h", "c"), frozenset("km")
    ),
)


@dataclass(frozen=True)
class ConvMatch:
    """A kernel found for a sum, with its operands and geometry per spatial axis."""

    kernel: ConvKernel  # the table entry
    operands: tuple[sp.Indexed, sp.Indexed]  # (first, second), as the kernel takes them
    strides: tuple[sp.Expr, ...]  # s per spatial axis
    dilations: tuple[sp.Expr, ...]  # d per spatial axis
    pads: tuple[sp.Expr, ...]  # p per spatial axis: padding before the first entry
    bound: tuple[tuple[tuple[str, int | None], sp.Symbol], ...]  # (letter, axis) -> its index

    def result_spatial(self) -> list[sp.Symbol]:
        """The result's spatial indices, first axis first."""
        letter = next(letter for letter in self.kernel.out if letter in SPATIAL)
        return [index for (name, axis), index in sorted(self.bound, key=str) if name == letter]


def find_convolution(
    entries, out: tuple, summed: tuple, is_index, kernels=KERNELS + DEPTHWISE_KERNELS
) -> ConvMatch | None:
    """The first kernel computing `Sum(entries[0] * entries[1], summed)` indexed by `out`.

    Args:
        entries: two tensor entries (`sp.Indexed`).
        out: the result's indices, in the order of its axes.
        summed: the indices summed over.
        is_index: tells index symbols from sizes and attributes.
        kernels: the table searched, in order.
    """
    if len(entries) != 2:
        return None
    for kernel in kernels:
        for first, second in (entries, entries[::-1]):
            found = _match(kernel, first, second, tuple(out), set(summed), is_index)
            if found is not None:
                return found
    return None


def _expanded(letters: tuple, rank: int) -> list:
    """Template subscripts with each spatial letter (or map) as one slot per spatial axis."""
    slots = []
    for letter in letters:
        if letter in SPATIAL or letter in (WINDOW, TRANSPOSED):
            slots += [(letter, axis) for axis in range(rank)]
        else:
            slots.append((letter, None))
    return slots


def _match(kernel, first, second, out, summed, is_index) -> ConvMatch | None:
    # the first operand's subscripts: `before` plain ones, one map per spatial axis, `after` plain ones
    before = next(n for n, letter in enumerate(kernel.first) if letter in (WINDOW, TRANSPOSED))
    after = len(kernel.first) - before - 1
    rank = len(first.indices) - before - after
    if rank < 1:
        return None
    plain = [
        (_expanded(kernel.second, rank), tuple(second.indices)),
        (_expanded(kernel.out, rank), out),
        ([s for s in _expanded(kernel.first, rank) if s[0] not in (WINDOW, TRANSPOSED)],
         tuple(first.indices[:before] + first.indices[before + rank :])),
    ]
    bound = _bind(plain, is_index)
    if bound is None or {bound[s] for s in bound if s[0] in kernel.summed} != summed:
        return None
    maps = first.indices[before : before + rank]
    parse = _window if kernel.first[before] == WINDOW else _transposed
    geometry = [parse(maps[axis], bound, axis, is_index) for axis in range(rank)]
    if None in geometry:
        return None
    strides, dilations, pads = (tuple(g[n] for g in geometry) for n in range(3))
    return ConvMatch(kernel, (first, second), strides, dilations, pads, tuple(sorted(bound.items(), key=lambda item: str(item[0]))))


def _bind(plain, is_index) -> dict | None:
    """Template slot -> index, one to one, from subscripts that are plain indices."""
    bound: dict = {}
    for slots, actual in plain:
        if len(slots) != len(actual):
            return None
        for slot, index in zip(slots, actual):
            if not is_index(index) or bound.setdefault(slot, index) != index:
                return None
    if len(set(bound.values())) != len(bound):
        return None
    return bound


def _window(subscript, bound, axis, is_index) -> tuple | None:
    """(s, d, p) when `subscript` is `u*s + k*d - p` for the bound u and k of `axis`."""
    u, k = bound.get(("u", axis)), bound.get(("k", axis))
    if u is None or k is None or subscript.has(exact_div):
        return None
    expr = sp.expand(subscript)
    s, d = expr.coeff(u), expr.coeff(k)
    pad = sp.expand(s * u + d * k - expr)
    return _geometry(s, d, pad, is_index)


def _transposed(subscript, bound, axis, is_index) -> tuple | None:
    """(s, d, p) when `subscript` is `(h + p - k*d) / s` (exactly) for the bound h and k."""
    h, k = bound.get(("h", axis)), bound.get(("k", axis))
    if h is None or k is None:
        return None
    numerator, s = subscript.args if isinstance(subscript, exact_div) else (subscript, sp.S.One)
    expr = sp.expand(numerator)
    if expr.coeff(h) != 1:
        return None
    d = -expr.coeff(k)
    pad = sp.expand(expr - h + d * k)
    return _geometry(s, d, pad, is_index)


def _geometry(s, d, pad, is_index) -> tuple | None:
    """(s, d, p) when none depends on an index and neither s nor d is known not positive."""
    if any(any(is_index(x) for x in e.free_symbols) for e in (s, d, pad)):
        return None
    if s.is_positive is False or d.is_positive is False:
        return None
    return s, d, pad
