"""What the benchmark shows: the table, the targets of issue 6 checked, the bar chart."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Target:
    """A speed target over the rows of some comparisons."""

    name: str  # as docs/benchmarks.md states it
    target: str | None  # "numpy", "tensorflow", or None for both
    references: tuple[str, ...]  # the comparisons' references it covers
    median_max: float | None  # bound on the median ratio (None: no median bound)
    each_max: float  # bound on every row's ratio
    group: str = "op"  # the cases' group (`Case.group`): "op", or "composed"


TARGETS = (
    Target(
        "TF gradient / TF hand-written",
        "tensorflow",
        ("tf-registered", "tf-autodiff+forward"),
        1.05,
        1.25,
    ),
    Target("numpy gradient / autograd", "numpy", ("autograd",), 1.0, 1.25),
    Target("JAX gradient / jax.vjp under jit", "jax", ("jax.jit",), 1.05, 1.25),
    Target("PyTorch backward / PyTorch's own function's", "torch", ("torch",), 1.05, 1.25),
    Target("gradient / its forward", None, ("forward",), None, 3.0),
    # composed ops (ops/composed.py) against their forwards written by hand, under autodiff
    Target(
        "composed: TF gradient / TF autodiff (both with forward)",
        "tensorflow",
        ("tf-autodiff+forward",),
        None,
        1.1,
        "composed",
    ),
    Target("composed: numpy gradient / autograd", "numpy", ("autograd",), None, 1.0, "composed"),
    Target("composed: gradient / its forward", None, ("forward",), None, 3.0, "composed"),
)

# chart series: (target, reference) -> legend label
SERIES = {
    ("tensorflow", "tf-registered"): "TF: ours / TF registered gradient",
    ("tensorflow", "tf-autodiff+forward"): "TF: ours / TF autodiff (both with forward)",
    ("numpy", "autograd"): "numpy: ours / autograd",
    ("numpy", "jax.jit"): "numpy: ours / jax.vjp under jit",
    ("jax", "jax.jit"): "JAX: ours / jax.vjp under jit (both jitted)",
    ("torch", "torch"): "PyTorch: ours / PyTorch's own function's backward",
    ("numpy", "autograd+forward"): "numpy: ours / autograd (both with forward)",
    ("tensorflow", "forward"): "TF: gradient / forward",
    ("numpy", "forward"): "numpy: gradient / forward",
}


def _label(row) -> str:
    return f"{row['op']} {row['variant']}"


def format_rows(rows: list[dict]) -> str:
    """A fixed-width table of result rows."""
    lines = [
        f"{'op':<44} {'target':<10} {'reference':<20} {'ours ms':>9} {'ref ms':>9} {'ratio':>6}",
    ]
    for row in rows:
        note = "" if row.get("agrees") in (True, None) else "  GRADIENTS DIFFER"
        lines.append(
            f"{_label(row)[:44]:<44} {row['target']:<10} {row['reference']:<20} "
            f"{row['ours_s'] * 1e3:>9.3f} {row['reference_s'] * 1e3:>9.3f} {row['ratio']:>6.2f}{note}"
        )
    return "\n".join(lines)


def check_targets(rows: list[dict]) -> list[dict]:
    """Each target: its median and worst ratio, whether it is met, and the rows that miss it."""
    results = []
    for target in TARGETS:
        covered = [
            r
            for r in rows
            if r["reference"] in target.references
            and target.target in (None, r["target"])
            and r.get("group", "op") == target.group
        ]
        if not covered:
            continue
        ratios = [r["ratio"] for r in covered]
        median = statistics.median(ratios)
        misses = [r for r in covered if r["ratio"] > target.each_max]
        median_ok = target.median_max is None or median <= target.median_max
        results.append(
            {
                "target": target.name,
                "median_max": target.median_max,
                "each_max": target.each_max,
                "median": median,
                "max": max(ratios),
                "met": median_ok and not misses,
                "misses": [f"{r['target']} {_label(r)}: {r['ratio']:.2f}x" for r in misses],
            }
        )
    return results


def format_targets(results: list[dict]) -> str:
    lines = []
    for t in results:
        bound = f"median <= {t['median_max']}, " if t["median_max"] is not None else ""
        verdict = "met" if t["met"] else "MISSED"
        lines.append(
            f"{t['target']}: {bound}each <= {t['each_max']}: median {t['median']:.2f}, "
            f"max {t['max']:.2f}: {verdict}"
        )
        lines += [f"    above {t['each_max']}x: {miss}" for miss in t["misses"]]
    return "\n".join(lines)


def write_chart(rows: list[dict], path: Path) -> None:
    """Horizontal bars of the ratios per op: against the references, and against the forward."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    labels = list(dict.fromkeys(_label(r) for r in rows))
    panels = (
        (
            "ours / reference (log scale; < 1: ours is faster)",
            [k for k in SERIES if k[1] != "forward"],
            1.25,
            "log",
        ),
        ("gradient / its forward", [k for k in SERIES if k[1] == "forward"], 3.0, "linear"),
    )
    fig, axes = plt.subplots(1, 2, figsize=(15, 0.45 * len(labels) + 2.6), sharey=True)
    for ax, (title, keys, limit, scale) in zip(axes, panels):
        floor = 0.1 if scale == "log" else None  # numpy's Sum/Mean gradients are views: ~0
        _bars(ax, rows, labels, keys, floor)
        if floor:
            ax.set_xlim(left=floor)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.axvline(
            limit, color="red", linestyle="--", linewidth=0.8, label=f"target: at most {limit}x"
        )
        ax.set_xscale(scale)
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(axis="x", which="both", linewidth=0.3)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.04), ncol=2)
    axes[0].set_yticks(range(len(labels)), labels, fontsize=8)
    axes[0].set_ylim(len(labels) - 0.5, -0.5)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _bars(ax, rows, labels, keys, floor=None) -> None:
    """One bar per row of each series in `keys`; bars under `floor` are cut and labelled."""
    present = [k for k in keys if any((r["target"], r["reference"]) == k for r in rows)]
    height = 0.8 / max(len(present), 1)
    for n, key in enumerate(present):
        ratio = {_label(r): r["ratio"] for r in rows if (r["target"], r["reference"]) == key}
        offset = (n - (len(present) - 1) / 2) * height
        ys = [i + offset for i, label in enumerate(labels) if label in ratio]
        values = [ratio[label] for label in labels if label in ratio]
        shown = [max(v, floor) if floor else v for v in values]
        ax.barh(ys, shown, height, label=SERIES[key])
        for y, value in zip(ys, values):
            if floor and value < floor:
                ax.text(floor * 1.05, y, f"{value:.1g}", va="center", fontsize=6)


def format_markdown(rows: list[dict]) -> str:
    """One markdown row per op and variant: medians in ms, and ratios ours / reference."""
    by_label: dict[str, dict] = {}
    for row in rows:
        by_label.setdefault(_label(row), {})[(row["target"], row["reference"])] = row
    head = (
        "| op | TF ours ms | TF ref ms | ours/TF | TF grad/fwd | numpy ours ms | autograd ms "
        "| ours/autograd | jax ms | ours/jax | numpy grad/fwd |"
    )
    lines = [head, "|" + " --- |" * head.count(" | ") + " --- |"]
    for label, cells in by_label.items():
        tf_ref = cells.get(("tensorflow", "tf-registered")) or cells.get(
            ("tensorflow", "tf-autodiff+forward")
        )
        autograd, jax = cells.get(("numpy", "autograd")), cells.get(("numpy", "jax.jit"))
        numpy_fwd, tf_fwd = cells.get(("numpy", "forward")), cells.get(("tensorflow", "forward"))
        lines.append(
            f"| {label} | {_ms(tf_ref, 'ours_s')} | {_ms(tf_ref, 'reference_s')} | {_x(tf_ref)} "
            f"| {_x(tf_fwd)} | {_ms(numpy_fwd, 'ours_s')} | {_ms(autograd, 'reference_s')} "
            f"| {_x(autograd)} | {_ms(jax, 'reference_s')} | {_x(jax)} | {_x(numpy_fwd)} |"
        )
    return "\n".join(lines)


def _ms(row, key) -> str:
    return "" if row is None else f"{row[key] * 1e3:.3g}"


def _x(row) -> str:
    return "" if row is None else f"{row['ratio']:.2f}"


if __name__ == "__main__":  # python benchmarks/bench_report.py benchmarks/results.json
    import json
    import sys

    print(format_markdown(json.loads(Path(sys.argv[1]).read_text())["results"]))
