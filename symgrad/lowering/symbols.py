"""What the lowering rules ask of SymPy expressions: which symbols are indices, which sizes."""

from __future__ import annotations

import sympy as sp

from symgrad.declare import BATCH
from symgrad.extrema import REDUCTIONS


def is_index(symbol) -> bool:
    """Index symbols are integers not known positive (dimension sizes are positive)."""
    return isinstance(symbol, sp.Symbol) and bool(symbol.is_integer) and symbol.is_positive is not True


def free_indices(expr) -> set:
    return {s for s in expr.free_symbols if is_index(s)}


def sizes_in(expr) -> list:
    """The dimension sizes in `expr`, in a fixed order (temporaries are numbered by it)."""
    return sorted((d for d in expr.free_symbols if d.is_integer and d.is_positive), key=str)


def is_map(subscript) -> bool:
    """An affine or indirect subscript (not an index, not a literal 0 for a kept axis)."""
    return not isinstance(subscript, sp.Symbol) and not subscript.is_Integer


def map_indices(subscript, axes: tuple) -> tuple:
    """The indices a mapped subscript depends on, in `axes` order, then by name."""
    found = free_indices(subscript)
    return tuple(sorted(found, key=lambda i: (axes.index(i) if i in axes else len(axes), str(i))))


def spans_axis(index, size, ranges: dict) -> bool:
    """Whether `index` runs over the whole axis of `size` entries: 0 to size - 1."""
    low, high = ranges.get(index, (None, None))
    return low == 0 and high is not None and sp.simplify(high - size + 1) == 0


def whole_axes(entry: sp.Indexed, ranges: dict) -> bool:
    """Whether each plain index of `entry` runs over its whole axis (0 to the size - 1)."""
    shape = getattr(entry.base, "shape", None)
    if shape is None:
        return False
    return all(spans_axis(i, size, ranges) for i, size in zip(entry.indices, shape) if is_index(i))


def has_reduction(expr) -> bool:
    return bool(expr.atoms(*REDUCTIONS))


def has_dependent_range(expr) -> bool:
    """A Sum or product whose range starts or ends at another index (a cumulative one)."""
    return any(free_indices(sp.sympify(b)) for lim in expr.limits for b in lim[1:])


def transcendental(scalar) -> bool:
    """A scalar with a root, an exponential, a logarithm or a trigonometric function in it."""
    if any(not p.exp.is_Integer for p in scalar.atoms(sp.Pow)):
        return True
    kinds = (sp.exp, sp.log, sp.functions.elementary.trigonometric.TrigonometricFunction,
             sp.functions.elementary.hyperbolic.HyperbolicFunction)
    return any(isinstance(f, kinds) for f in scalar.atoms(sp.Function))


def layout(body, axes: tuple, summed: tuple) -> list:
    """Axes for reducing `body`: the order of its first tensor entry that holds them all and
    keeps `axes` in order (no transpose needed), else `axes` then the summed indices. Of
    `axes`, a leading run `body` does not vary along may be left out (the result broadcasts
    against them as it is): batch norm's `sum_{b, h, w} grad[b, h, w, c] * x[b, h, w, c]`
    inside a value over (i, j, k, c) is summed as grad and x are laid out, over their first
    three axes."""
    varying = [i for i in axes if i in free_indices(body)]
    kept = axes[len(axes) - len(varying):] if BATCH not in axes and tuple(varying) == axes[len(axes) - len(varying):] else axes
    for kept_axes in dict.fromkeys((tuple(axes), tuple(kept))):
        wanted = set(kept_axes) | set(summed)
        for entry in sorted(body.atoms(sp.Indexed), key=str):
            order = list(dict.fromkeys(i for i in entry.indices if i in wanted))
            if set(order) == wanted and [i for i in order if i in kept_axes] == list(kept_axes):
                return order
    return [BATCH] * (BATCH in summed) + list(axes) + [i for i in summed if i != BATCH]


def laid_out(factor, order: tuple) -> tuple:
    """`factor`'s indices in the order its tensors' axes have them (no transpose to compute
    it), the others as in `order`."""
    seen = [BATCH]  # the leading `...` axes lead (other arrays broadcast against them)
    seen += [i for e in sorted(factor.atoms(sp.Indexed), key=str) for i in e.indices if is_index(i)]
    seen += [i for i in order if i in free_indices(factor)]
    return tuple(i for i in dict.fromkeys(seen) if i in free_indices(factor))
