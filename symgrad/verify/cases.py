"""Inputs that find gradient bugs: random values in each op's domain, plus edge probes.

Declarations state no domains, so each op's domain is probed: every input draws from each
candidate range in `DOMAINS` (all combinations for up to three inputs, the same range for
all inputs beyond), the numpy forward runs on each combination, and the combinations where
every output is finite are kept. Random values come from every kept combination; shape
cases use the first kept one (the widest range that works, in `DOMAINS` order).

Edge probes, kept only where the forward is finite in the dtype under test:
* elementwise ops: every combination of the values in `SMALL_PROBES` (zeros, repeated
  zeros, signs, ties between inputs) and the op's own kinks (`kinks`: the roots of its branch
  conditions and of its `Abs`/`sign` arguments), another with `LARGE_PROBES`; shapes with
  size-1 axes that broadcast, a scalar input, and size-1 inputs;
* index ops: per dimension symbol a size (distinct sizes, all equal, all 1), leading batch
  axes (none, one, broadcast between inputs), and values zeros, repeated zeros, negatives,
  ties and large magnitudes. Sizes grow until each declared output size (a convolution's,
  a pool's) is at least 2 (1 for "sizes 1"); dimensions that shrink an output (a kernel's)
  get the small distinct sizes. Integer inputs (positions) are not probed: they hold
  positions within the axis they index (`symgrad.verify.positions`);
* complex dtypes: every value gets an imaginary part of magnitude 0.2 to 0.6.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass, replace

import numpy as np

from symgrad.dtypes import complex_dtype, output_dtype
from symgrad.targets import COMPLEX_DTYPES, REAL_DTYPES
from symgrad.verify.kinks import kink_points
from symgrad.verify.ops_under_test import DerivedOp, Variant, variants_of
from symgrad.verify.positions import bound, position_bounds, positions, with_distinct_room
from symgrad.verify.shapes import broadcast_shapes, shape_configs, shapes_broadcasting_to
from symgrad.verify.tied import with_tied_values


@dataclass(frozen=True)
class Domain:
    """A candidate range of input values."""

    name: str  # shown in case labels
    low: float
    high: float


DOMAINS = (
    Domain("real", -3.0, 3.0),
    Domain("positive", 0.1, 3.0),
    Domain("negative", -3.0, -0.1),
    Domain("unit", -0.9, 0.9),
    Domain("above one", 1.1, 4.0),
)
SMALL_PROBES = (0.0, 1.0, -1.0, 0.5, -2.0)
LARGE_PROBES = (30.0, -30.0, 1e3, -1e3)
SAMPLES_PER_DOMAIN = 4


@dataclass(frozen=True)
class Case:
    """One set of inputs (and, once cast to a dtype, upstream gradients) for an op variant."""

    label: str  # what the case probes, with its shapes
    inputs: tuple[np.ndarray, ...]  # one array per tensor input, in op order
    upstream: tuple[np.ndarray, ...] = ()  # one per output; set by `for_dtype`
    aligned: bool = False  # elementwise with equal 1-D shapes: element k of each meets in output k
    ties: bool = False  # values tied on purpose (zeros, -1/0/1): maxima tie within a window

    @property
    def size(self) -> int:
        return sum(int(np.size(x)) for x in self.inputs)

    def take(self, keep) -> Case:
        """The elements `keep` (an index array or mask) of an aligned case."""
        pick = lambda arrays: tuple(np.asarray(a)[keep] for a in arrays)
        return replace(self, inputs=pick(self.inputs), upstream=pick(self.upstream))


def make_cases(variant: Variant, forward, complex_values: bool) -> list[Case]:
    """The cases of one variant, in float64 (complex128 when `complex_values`)."""
    rng = np.random.default_rng(zlib.crc32(f"{variant.op.name}|{variant.label}".encode()))
    if variant.shapes is None:
        conditions = lambda inputs: as_conditions(variant, inputs)
        cases = [replace(c, inputs=conditions(c.inputs)) for c in _elementwise_cases(variant, lambda *xs: forward(*conditions(xs)), rng)]
    else:
        cases = _index_cases(variant, forward, rng)
    if complex_values:
        cases = [replace(c, inputs=tuple(_with_imaginary(x, rng) for x in c.inputs)) for c in cases]
    return [replace(c, inputs=_tied(variant, c.inputs)) for c in cases] if variant.tied else cases


def _tied(variant: Variant, inputs: tuple) -> tuple:
    """`inputs` with each tied input (`equals=`) holding its value on the others."""
    exprs = [e for _, _, e in variant.tied] + [d for shape in variant.shapes for d in shape]
    return with_tied_values(variant.tied, variant.inputs, variant.shapes, inputs, variant.attr_values(*exprs))


def for_dtype(
    cases: list[Case], dtype, forward, seed: str, upstream_dtypes: tuple | None = None, input_dtypes: tuple | None = None
) -> list[Case]:
    """The cases cast to `dtype` (to `input_dtypes`, one per input, where the inputs' differ:
    a gradient op's upstream gradient of a real output), each with random upstream gradients
    (of `upstream_dtypes`, one per output, where an output's dtype is not the inputs');
    elements (aligned cases) or whole cases where the forward is not finite in `dtype` are
    left out."""
    rng = np.random.default_rng(zlib.crc32(seed.encode()))
    result = []
    for case in cases:
        dtypes = input_dtypes or (dtype,) * len(case.inputs)
        case = replace(case, inputs=tuple(_cast(x, d) for x, d in zip(case.inputs, dtypes)))
        finite = finite_outputs(forward, case.inputs)
        if finite is None:
            continue
        if case.aligned and not finite.all():
            case = case.take(finite)
        elif not finite.all():
            continue
        outputs = call_forward(forward, case.inputs)
        if case.size == 0 or outputs is None:
            continue
        dtypes = upstream_dtypes or (dtype,) * len(outputs)
        upstream = tuple(_random(rng, np.shape(o), d, -2.0, 2.0) for o, d in zip(outputs, dtypes))
        result.append(replace(case, upstream=upstream))
    return result


def _cast(x, dtype) -> np.ndarray:
    """`x` in `dtype`; integer positions and bools stay as they are."""
    x = np.asarray(x)
    return x if discrete(x) else x.astype(dtype)


def discrete(x) -> bool:
    """Whether `x` holds integers or bools (positions, conditions): no dtype of its own to take."""
    dtype = np.asarray(x).dtype
    return bool(np.issubdtype(dtype, np.integer) or dtype == np.bool_)


def call_forward(forward, inputs) -> tuple | None:
    """The forward's outputs as a tuple, None when it raises (the inputs do not fit the op)."""
    try:
        with np.errstate(all="ignore"):
            out = forward(*inputs)
    except Exception:  # a shape the op does not take: the case is not one of its inputs
        return None
    return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else (np.asarray(out),)


def finite_outputs(forward, inputs) -> np.ndarray | None:
    """Per output element (broadcast over all outputs), whether every output is finite."""
    outputs = call_forward(forward, inputs)
    if outputs is None:
        return None
    try:
        return np.logical_and.reduce([np.isfinite(o) for o in np.broadcast_arrays(*outputs)])
    except ValueError:  # outputs of different shapes: finite only if all are
        return np.asarray(all(np.isfinite(o).all() for o in outputs))


# --- elementwise ops ---------------------------------------------------------------------------


def _elementwise_cases(variant: Variant, forward, rng) -> list[Case]:
    n = len(variant.inputs)
    target = variant.op.decl.broadcast_to
    if target is not None:  # BroadcastTo: inputs of the shapes that broadcast to the target
        scalars = variant.op.decl.scalars
        shapes = shapes_broadcasting_to(tuple(variant.attrs[target])) if len(scalars) < n else [()]
        each = lambda shape: [() if name in scalars else shape for name in variant.inputs]
        return [Case(f"shapes {shape} to {tuple(variant.attrs[target])}", _sample(rng, (DOMAINS[0],) * n, each(shape))) for shape in shapes]
    kept = _kept_domains(n, lambda shape, combo: _sample(rng, combo, [shape] * n), forward)
    random = [_sample(rng, combo, [(SAMPLES_PER_DOMAIN,)] * n) for combo in kept]
    cases = [Case("random values", tuple(np.concatenate(xs) for xs in zip(*random)), aligned=True)]
    kinks = kink_points(variant)
    small = [sorted(set(SMALL_PROBES) | kinks.get(name, set())) for name in variant.inputs]
    cases.append(grid_case("probes: zeros, signs, ties, kinks", small, lambda combo: True))
    large = [values + list(LARGE_PROBES) for values in small]
    cases.append(
        grid_case("probes: large magnitudes", large, lambda combo: any(abs(v) > 10 for v in combo))
    )
    primary = kept[0]
    for label, shapes in broadcast_shapes(variant.inputs):
        cases.append(Case(f"shapes {label}", _sample(rng, primary, shapes)))
    return with_scalar_inputs(variant, cases) if variant.op.decl.scalars else cases


def with_scalar_inputs(variant: Variant, cases: list[Case], settings: int = 3) -> list[Case]:
    """Each case once per setting of the inputs declared `scalars` (QuantizeAndDequantizeV2's
    range): the first `settings` distinct values the case drew for them, each input 0-D and
    the others as drawn. Not aligned: a scalar meets every element."""
    scalar = [k for k, name in enumerate(variant.inputs) if name in variant.op.decl.scalars]
    result = []
    for case in cases:
        rows = zip(*(np.ravel(case.inputs[k]) for k in scalar))
        for row in list(dict.fromkeys(rows))[:settings]:
            values = dict(zip(scalar, row))
            inputs = tuple(np.asarray(values[k]) if k in values else x for k, x in enumerate(case.inputs))
            setting = ", ".join(f"{variant.inputs[k]} = {v:g}" for k, v in values.items())
            result.append(replace(case, label=f"{case.label}; {setting}", inputs=inputs, aligned=False))
    return result


def as_conditions(variant: Variant, inputs: tuple) -> tuple:
    """The bool inputs' values from the floats drawn for them: where positive, or (where that
    is the same everywhere) every other entry, so both values occur."""
    result = list(inputs)
    for k, name in enumerate(variant.inputs):
        if name in variant.booleans:
            x = np.asarray(inputs[k])
            condition = x > 0
            if x.size > 1 and (condition.all() or not condition.any()):
                condition = (np.arange(x.size) % 2 == 0).reshape(x.shape)
            result[k] = condition
    return tuple(result)


def grid_case(label: str, values: list[list[float]], keep) -> Case:
    """Every combination of the inputs' probe values, as aligned 1-D arrays."""
    n = len(values)
    if n > 3:  # keep the grid small: three values per input beyond three inputs
        values = [v[:3] for v in values]
    combos = [c for c in itertools.product(*values) if keep(c)]
    return Case(
        label, tuple(np.array(column, dtype=float) for column in zip(*combos)), aligned=True
    )


# --- index-summation ops -----------------------------------------------------------------------


def _index_cases(variant: Variant, forward, rng) -> list[Case]:
    configs = [c for c in map(lambda c: with_distinct_room(variant, c), shape_configs(variant)) if c is not None]
    if not configs:
        return []
    label, shapes, sizes = configs[0]
    draw = lambda combo, shapes, sizes: _draw(rng, variant, combo, shapes, sizes)
    kept = _kept_domains(len(shapes), lambda _, combo: draw(combo, shapes, sizes), forward)
    cases = [Case(f"random values; {label}", draw(kept[0], shapes, sizes))]
    for combo in kept[1:3]:
        names = ", ".join(d.name for d in combo)
        cases.append(Case(f"random values ({names}); {label}", draw(combo, shapes, sizes)))
    base = cases[0].inputs
    probe = lambda f: values_only(variant, base, f)
    cases += [
        Case(f"zeros; {label}", probe(np.zeros_like), ties=True),
        Case(f"repeated zeros; {label}", probe(_with_zeros), ties=True),
        Case(f"negative values; {label}", probe(lambda x: -np.abs(x))),
        Case(
            f"ties (values -1, 0, 1); {label}",
            probe(lambda x: rng.choice([-1.0, 0.0, 1.0], np.shape(x))),
            ties=True,
        ),
        Case(f"large magnitudes; {label}", probe(lambda x: x * 1e3)),
    ]
    cases += [Case(f"random values; {lbl}", draw(kept[0], s, z)) for lbl, s, z in configs[1:]]
    return cases


def values_only(variant: Variant, inputs: tuple, change) -> tuple:
    """`change` applied to each input but the integer ones (positions stay valid)."""
    return tuple(
        x if name in variant.integers else change(x) for name, x in zip(variant.inputs, inputs)
    )


def _with_zeros(x: np.ndarray) -> np.ndarray:
    """`x` with the first two entries of every last-axis slice zero (repeated zeros in a slice)."""
    x = np.array(x, copy=True)
    if x.ndim and x.shape[-1] > 1:
        x[..., :2] = 0.0
    elif x.size:
        x.flat[0] = 0.0
    return x


def _draw(rng, variant: Variant, combo, shapes, sizes: dict) -> tuple[np.ndarray, ...]:
    """Values for one case: integer inputs hold positions within the axis they index."""
    values = list(_sample(rng, combo, shapes))
    bounds = position_bounds(variant) if variant.integers else {}
    for k, name in enumerate(variant.inputs):
        if name in variant.booleans:  # conditions: both values, wherever the shape allows
            values[k] = rng.random(shapes[k]) < 0.5
            if values[k].size > 1:
                values[k].flat[:2] = (True, False)
        elif name in variant.integers:
            size = bound(variant, bounds, name, sizes)
            values[k] = positions(rng, shapes[k], size, name in variant.distinct)
            if name in variant.ascending:  # SegmentSum's ids: sorted, the first two equal still
                values[k] = np.sort(values[k], axis=None).reshape(shapes[k])
    return tuple(values)


# --- sampling ----------------------------------------------------------------------------------


def _kept_domains(n: int, sample, forward) -> list[tuple[Domain, ...]]:
    """The domain combinations where the forward is finite (all "real" if none is)."""
    combos = itertools.product(DOMAINS, repeat=n) if n <= 3 else ((d,) * n for d in DOMAINS)
    kept = []
    for combo in combos:
        finite = finite_outputs(forward, sample((8,), combo))
        if finite is not None and finite.all():
            kept.append(combo)
    return kept or [(DOMAINS[0],) * n]


def _sample(rng, combo, shapes) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(rng.uniform(d.low, d.high, s)) for d, s in zip(combo, shapes))


def _random(rng, shape, dtype, low, high) -> np.ndarray:
    values = rng.uniform(low, high, shape)
    if np.issubdtype(dtype, np.complexfloating):
        values = values + 1j * rng.uniform(low, high, shape)
    return np.asarray(values).astype(dtype)


def _with_imaginary(x: np.ndarray, rng) -> np.ndarray:
    if discrete(x):
        return x
    sign = rng.choice([-1.0, 1.0], np.shape(x))
    return np.asarray(x + 1j * sign * rng.uniform(0.2, 0.6, np.shape(x)))


def dtypes_of(op: DerivedOp, requested: tuple[str, ...] | None) -> list[str]:
    """The input dtypes `op` is run in, of those `requested`; for an op of complex inputs only
    (`complex="only"`), a real dtype requested stands for the complex one of its precision."""
    if not op.decl.real_ok:
        wanted = None if requested is None else {str(complex_dtype(d)) for d in requested}
        return [d for d in COMPLEX_DTYPES if wanted is None or d in wanted]
    dtypes = REAL_DTYPES + (COMPLEX_DTYPES if op.decl.complex_ok else ())
    return [d for d in dtypes if requested is None or d in requested]


def upstream_dtypes(variant: Variant, dtype) -> tuple | None:
    """The dtype of each output of `variant` called with inputs of `dtype`, where the op
    declares `output_dtypes` (else None: the inputs')."""
    decl = variant.op.decl
    if not decl.output_dtypes:
        return None
    return tuple(output_dtype(decl, name, dtype, variant.attrs) for name in variant.outputs)


def bound_forward(variant: Variant, widened: bool = True):
    """The generated numpy forward with the variant's attributes; `widened`, an output of a
    `DType()` attribute's dtype in the widest dtype of its kind (float64, complex128): a
    narrower one rounds the forward, which finite differences would read as its derivative."""
    forward = variant.op.function("numpy")
    widest = lambda name: str(np.result_type(np.dtype(str(name)), np.float64))
    attrs = {k: widest(v) if widened and _is_dtype_attr(variant, k) else v for k, v in variant.attrs.items()}
    return lambda *inputs: forward(*inputs, **attrs)


def _is_dtype_attr(variant: Variant, name: str) -> bool:
    return any(a.name == name and a.is_dtype for a in variant.op.decl.attrs)


def case_groups(
    op: DerivedOp, dtypes, quick: bool = False, sample: int | None = None
) -> list[tuple[Variant, str, list[Case]]]:
    """(variant, dtype, cases) for every variant and dtype of `op` (`quick`: the first case
    whose forward is finite, alone; `sample`: of at most that many variants)."""
    groups = []
    for variant in sampled(variants_of(op), sample):
        forward = bound_forward(variant)
        masters: dict[bool, list[Case]] = {}
        for dtype in dtypes_of(op, dtypes):
            is_complex = dtype.startswith("complex")
            if is_complex not in masters:
                masters[is_complex] = make_cases(variant, forward, is_complex)
            seed = f"{op.name}|{variant.label}|{dtype}"
            master = masters[is_complex]
            upstream = upstream_dtypes(variant, dtype)
            if quick:  # the first case, and the first with batch axes (`...` broadcasting)
                batched = [c for c in master if "batch" in c.label][:1]
                cases = for_dtype(master[:3], np.dtype(dtype), forward, seed, upstream)[:1]
                cases += for_dtype(batched, np.dtype(dtype), forward, seed, upstream)
            else:
                cases = for_dtype(master, np.dtype(dtype), forward, seed, upstream)
            groups.append((variant, dtype, cases))
    return groups


def sampled(variants: list, count: int | None) -> list:
    """At most `count` of `variants`, spread evenly over the list, the first and the last
    included (all of them when `count` is None)."""
    if count is None or len(variants) <= count:
        return variants
    if count == 1:
        return variants[:1]
    picks = sorted({round(k * (len(variants) - 1) / (count - 1)) for k in range(count)})
    return [variants[k] for k in picks]
