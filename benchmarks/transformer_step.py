"""A small transformer's training step on CPU: the generated PyTorch ops against stock PyTorch,
eager and under `torch.compile`.

    python benchmarks/transformer_step.py [--steps N] [--repeats N] [--quick | --smoke]
        [--json FILE] [--no-compile] [--backend NAME] [--threads N] [--generated DIR]

The model, built twice with the same initial weights: a decoder-only transformer of 2 layers,
d_model 64, 4 heads, context 64, a byte vocabulary (256), pre-LayerNorm (eps 1e-5), a tanh-GELU
MLP of width 256, rotary position embeddings (GPT-NeoX's rotate-half form) on q and k, causal
attention, and an output head tied to the embedding (logits = h @ wte.T). Trained with AdamW
(lr 1e-3, weight decay 0.01) on the bytes of README.md and docs/*.md, batch 8, the batches drawn
by a seeded generator.

* generated: `gather_v2` (the embedding), `layer_norm`, `matmul`, `bias_add`, `bias_gelu`,
  `rotary_embedding`, `scaled_dot_product_attention` (an additive causal mask of -inf), `add`
  (the residuals) and `sparse_softmax_cross_entropy_with_logits` (the mean of its loss per
  row), from generated/*_torch.py. Reshapes, head transposes and that mean are torch's own.
* stock: `F.embedding`, `F.layer_norm`, `F.linear`, `F.gelu(approximate="tanh")`, `+`,
  `torch.cat` for the rotation, `F.scaled_dot_product_attention(is_causal=True)` (the same
  1/sqrt(head width) scale) and `F.cross_entropy`.

First the two must compute the same thing, or the run fails: in float64 one step's parameter
gradients agree (each within 1e-10 of the stock gradient's largest entry), and in float32 the
losses of the first steps of AdamW agree (and, compiled, with the eager ones). Then warm steps
are timed, the contenders interleaved (a sample is `--steps` steps, the order rotated each
repeat): median ms per step and generated / stock, eager and compiled (inductor). Also: the
generated model's graph breaks under torch.compile (dynamo's counters), and the bytes
autograd saves for backward in one forward of each model. Peak memory is not measured: CPU
tensors are invisible to tracemalloc and torch keeps no CPU allocator statistics; the bytes
saved are what differs between the two. No time is asserted; the load average at the start is
printed. `--threads 1` steadies the numbers on a machine other work keeps busy (two intra-op
threads wait on each other whenever one is descheduled). `--smoke` (tests/test_transformer_step.py
runs it, under 20 s on two busy cores): one thread, one step per sample, one repeat, compiled with
torch.compile's aot_eager backend, which traces the same forward and derived backward in
seconds (so graph breaks and compiled losses are checked), where inductor takes 10-20 s a
model there.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

# inductor compiles in this process: a pool of compile workers would outlive the compilation
# and compete with the timed steps on a small machine
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench_measure import Contender, time_interleaved  # noqa: E402
from symgrad.backends.torch.costs import saved_bytes  # noqa: E402
from symgrad.runtime_module import import_generated  # noqa: E402

VOCAB, WIDTH, HEADS, CONTEXT, LAYERS, HIDDEN = 256, 64, 4, 64, 2, 256
HEAD = WIDTH // HEADS
BATCH, EPS, LEARNING_RATE, WEIGHT_DECAY = 8, 1e-5, 1e-3, 0.01
CHECK_STEPS = 3  # float32 steps whose losses must agree
GRAD_RTOL, LOSS_RTOL = 1e-10, 1e-5


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer repeats and steps")
    size.add_argument("--smoke", action="store_true", help="one step per sample, one repeat")
    parser.add_argument("--steps", type=int, help="training steps per timed sample (default 10)")
    parser.add_argument(
        "--repeats", type=int, help="interleaved samples per contender (default 21)"
    )
    parser.add_argument("--json", type=Path, help="write the results as JSON to this file")
    parser.add_argument("--no-compile", action="store_true", help="eager only")
    parser.add_argument(
        "--backend", help="torch.compile's backend (default inductor; aot_eager with --smoke)"
    )
    parser.add_argument(
        "--threads", type=int, help="torch's intra-op threads (default: torch's own)"
    )
    parser.add_argument(
        "--generated", type=Path, default=ROOT / "generated", help="folder of the generated modules"
    )
    return parser


# --- data -------------------------------------------------------------------------------------


def load_text() -> torch.Tensor:
    """The bytes of README.md and docs/*.md, as int64 tokens."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    data = b"".join(p.read_bytes() for p in paths if p.is_file())
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def batches(
    text: torch.Tensor, count: int, seed: int = 1
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`count` (tokens, next tokens) pairs of BATCH windows of CONTEXT bytes at seeded offsets."""
    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(text) - CONTEXT - 1, (count, BATCH), generator=generator)
    windows = starts[..., None] + torch.arange(CONTEXT + 1)
    return [(text[w[:, :-1]], text[w[:, 1:]]) for w in windows]


# --- parameters -------------------------------------------------------------------------------


def initial_parameters(seed: int = 0) -> dict[str, torch.Tensor]:
    """GPT-2's initialisation, in float64: normal(0, 0.02) matrices (the residual outputs'
    scaled by 1/sqrt(2 * layers)), zero biases, LayerNorm scale 1 and offset 0."""
    generator = torch.Generator().manual_seed(seed)
    f64 = dict(dtype=torch.float64)
    normal = lambda *shape, std: torch.randn(*shape, generator=generator, **f64) * std
    residual = 0.02 / math.sqrt(2 * LAYERS)
    dense = (("qkv", WIDTH, 3 * WIDTH, 0.02), ("out", WIDTH, WIDTH, residual))
    dense += (("up", WIDTH, HIDDEN, 0.02), ("down", HIDDEN, WIDTH, residual))
    norm = lambda name: {
        f"{name}.scale": torch.ones(WIDTH, **f64),
        f"{name}.offset": torch.zeros(WIDTH, **f64),
    }
    params = {"wte": normal(VOCAB, WIDTH, std=0.02)}
    for n in range(LAYERS):
        params |= norm(f"{n}.ln1") | norm(f"{n}.ln2")
        for name, rows, columns, std in dense:
            params |= {
                f"{n}.{name}.w": normal(rows, columns, std=std),
                f"{n}.{name}.b": torch.zeros(columns, **f64),
            }
    params |= norm("lnf")
    return params


def copies(params: dict, dtype) -> dict[str, torch.Tensor]:
    """Leaf tensors of `dtype` holding `params`' values: one model's own parameters."""
    return {k: v.to(dtype).clone().requires_grad_(True) for k, v in params.items()}


def rotary_tables(dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (CONTEXT, HEAD) in the rotate-half layout: each half the same angles."""
    frequencies = 10000.0 ** (-torch.arange(0, HEAD, 2, dtype=torch.float64) / HEAD)
    angles = torch.arange(CONTEXT, dtype=torch.float64)[:, None] * frequencies
    angles = torch.cat([angles, angles], dim=-1)
    return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)


# --- the two sets of ops ----------------------------------------------------------------------


class GeneratedOps:
    """The layers from the generated PyTorch ops."""

    name = "generated"

    def __init__(self, folder: Path, dtype):
        module = lambda stem: import_generated(
            folder / f"{stem}_torch.py", f"_transformer_step_{stem}_torch"
        )
        self.gather, self.composed, self.nn = module("gather"), module("composed"), module("nn")
        self.mm, self.binary = module("matmul"), module("binary")
        self.cos, self.sin = rotary_tables(dtype)
        self.mask = torch.triu(torch.full((CONTEXT, CONTEXT), float("-inf"), dtype=dtype), 1)

    def embed(self, table, tokens):
        return self.gather.gather_v2(table, tokens, axis=0)

    def layer_norm(self, x, scale, offset):
        return self.composed.layer_norm(x, scale, offset, epsilon=EPS)

    def dense(self, x, w, b):
        return self.nn.bias_add(self.mm.matmul(x, w), b)

    def dense_gelu(self, x, w, b):
        return self.composed.bias_gelu(self.mm.matmul(x, w), b)

    def add(self, x, y):
        return self.binary.add(x, y)

    def rotary(self, x):
        return self.composed.rotary_embedding(x, self.cos, self.sin)

    def attention(self, q, k, v):
        return self.composed.scaled_dot_product_attention(q, k, v, self.mask)

    def logits(self, x, table):
        return self.mm.matmul(x, table, transpose_b=True)

    def loss(self, logits, labels):
        return torch.mean(self.nn.sparse_softmax_cross_entropy_with_logits(logits, labels)[0])


class StockOps:
    """The same layers from torch.nn.functional."""

    name = "stock"

    def __init__(self, dtype):
        self.cos, self.sin = rotary_tables(dtype)

    embed = staticmethod(lambda table, tokens: F.embedding(tokens, table))
    layer_norm = staticmethod(
        lambda x, scale, offset: F.layer_norm(x, (WIDTH,), scale, offset, EPS)
    )
    dense = staticmethod(lambda x, w, b: F.linear(x, w.t(), b))
    dense_gelu = staticmethod(lambda x, w, b: F.gelu(F.linear(x, w.t(), b), approximate="tanh"))
    add = staticmethod(torch.add)
    attention = staticmethod(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    )
    logits = staticmethod(lambda x, table: F.linear(x, table))
    loss = staticmethod(F.cross_entropy)

    def rotary(self, x):
        first, second = x.chunk(2, dim=-1)
        return x * self.cos + torch.cat([-second, first], dim=-1) * self.sin


def forward_loss(ops, p: dict, tokens, labels):
    """The model's mean cross-entropy of the next byte."""
    batch = tokens.shape[0]
    rows = batch * CONTEXT
    x = ops.embed(p["wte"], tokens)
    for n in range(LAYERS):
        h = ops.layer_norm(x, p[f"{n}.ln1.scale"], p[f"{n}.ln1.offset"]).reshape(rows, WIDTH)
        qkv = ops.dense(h, p[f"{n}.qkv.w"], p[f"{n}.qkv.b"])
        q, k, v = qkv.reshape(batch, CONTEXT, 3, HEADS, HEAD).permute(2, 0, 3, 1, 4)
        heads = ops.attention(ops.rotary(q), ops.rotary(k), v)
        heads = heads.transpose(1, 2).reshape(rows, WIDTH)
        x = ops.add(x, ops.dense(heads, p[f"{n}.out.w"], p[f"{n}.out.b"]).reshape(x.shape))
        h = ops.layer_norm(x, p[f"{n}.ln2.scale"], p[f"{n}.ln2.offset"]).reshape(rows, WIDTH)
        h = ops.dense_gelu(h, p[f"{n}.up.w"], p[f"{n}.up.b"])
        x = ops.add(x, ops.dense(h, p[f"{n}.down.w"], p[f"{n}.down.b"]).reshape(x.shape))
    h = ops.layer_norm(x, p["lnf.scale"], p["lnf.offset"]).reshape(rows, WIDTH)
    return ops.loss(ops.logits(h, p["wte"]), labels.reshape(rows))


class Model:
    """One contender: its own parameters, AdamW, and its loss eager or compiled by `backend`."""

    def __init__(self, ops, params: dict, dtype, backend: str | None = None):
        self.name = ops.name + (" compiled" if backend else " eager")
        self.params = copies(params, dtype)
        self.loss = lambda p, tokens, labels: forward_loss(ops, p, tokens, labels)
        if backend:
            self.loss = torch.compile(self.loss, backend=backend)
        self.optimizer = torch.optim.AdamW(
            self.params.values(), lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY, foreach=True
        )

    def step(self, tokens, labels) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss(self.params, tokens, labels)
        loss.backward()
        self.optimizer.step()
        return loss.detach()


# --- checks -----------------------------------------------------------------------------------


def check_gradients(folder: Path, params: dict, data) -> dict:
    """One step's parameter gradients in float64, generated against stock: the largest
    difference relative to the stock gradient's largest entry, per tensor; fails above GRAD_RTOL."""
    grads = []
    for ops in (GeneratedOps(folder, torch.float64), StockOps(torch.float64)):
        p = copies(params, torch.float64)
        forward_loss(ops, p, *data[0]).backward()
        grads.append({k: v.grad for k, v in p.items()})
    worst_name, worst = "", 0.0
    for name, stock in grads[1].items():
        ours = grads[0][name]
        if ours is None:
            raise SystemExit(f"FAIL: the generated model computed no gradient of {name}")
        error = float((ours - stock).abs().max() / stock.abs().max().clamp_min(1e-300))
        if error > worst:
            worst_name, worst = name, error
    agree = worst <= GRAD_RTOL
    print(
        f"gradients agree: {agree} (float64, one step, {len(grads[1])} parameter tensors; "
        f"largest difference {worst:.2g} of the gradient's largest entry, at {worst_name};"
        f" rtol {GRAD_RTOL:g})"
    )
    if not agree:
        raise SystemExit(
            f"FAIL: float64 gradients differ: {worst_name} by {worst:.3g} > {GRAD_RTOL:g}"
        )
    return {
        "gradients_agree": agree,
        "gradient_max_rel_diff": worst,
        "gradient_worst_param": worst_name,
    }


def train_losses(model: Model, data) -> list[float]:
    return [float(model.step(*batch)) for batch in data[:CHECK_STEPS]]


def check_losses(names: list[str], losses: list[list[float]], rtol: float = LOSS_RTOL) -> float:
    """Fails if the models' losses of the same steps differ beyond `rtol`; returns the largest
    relative difference from the first model's."""
    worst = 0.0
    for n, values in enumerate(zip(*losses)):
        worst = max(worst, *(abs(v - values[0]) / abs(values[0]) for v in values))
        if worst > rtol:
            raise SystemExit(f"FAIL: float32 step {n} losses differ: {dict(zip(names, values))}")
    return worst


def compiled_losses(model: Model, data) -> tuple[list[float], dict]:
    """The compiled model's losses of the check's steps, and what dynamo made of it: graphs,
    graph breaks and why (torch._dynamo's counters, which `torch._dynamo.explain` reads too)."""
    counters = torch._dynamo.utils.counters
    counters.clear()
    losses = train_losses(model, data)
    breaks = counters["graph_break"]
    dynamo = {
        "graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": sum(breaks.values()),
        "reasons": [r.splitlines()[0] for r in breaks],
    }
    return losses, dynamo


def bytes_saved(ops, params: dict, data) -> int:
    """Bytes of the storages autograd saves for backward in one float32 forward."""
    p = copies(params, torch.float32)
    return saved_bytes(lambda: forward_loss(ops, p, *data[0]))[0]


# --- timing -----------------------------------------------------------------------------------


def time_steps(models: list[Model], data, steps: int, repeats: int) -> dict[str, float]:
    """Median seconds per warm step of each model, interleaved."""

    def run(model):
        loss = None
        for n in range(steps):
            loss = model.step(*data[n % len(data)])
        float(loss)

    contenders = []
    for model in models:
        run(model)  # warm: compiled, caches filled
        contenders.append(Contender(model.name, lambda model=model: run(model)))
    medians = time_interleaved(contenders, repeats, min_sample=0.0)
    return {name: t / steps for name, t in medians.items()}


def load_average() -> str:
    try:
        load = os.getloadavg()
    except (AttributeError, OSError):
        return "unknown"
    return "{:.2f} {:.2f} {:.2f}".format(*load) + (
        f" (busy: {os.cpu_count()} cores)" if load[0] > 1.0 else ""
    )


def compiled_pair(
    folder: Path, params: dict, data, eager_losses, backend: str
) -> tuple[list[Model], dict]:
    """The two models compiled, warmed by the check's steps (their losses within 1e-4 of the
    eager ones): with the generated model's graphs and breaks, and the seconds compiling took."""
    started = time.perf_counter()
    pair = [
        Model(GeneratedOps(folder, torch.float32), params, torch.float32, backend),
        Model(StockOps(torch.float32), params, torch.float32, backend),
    ]
    losses, dynamo = compiled_losses(pair[0], data)
    losses = [losses, train_losses(pair[1], data)]
    check_losses(
        [m.name for m in pair] + ["generated eager", "stock eager"],
        losses + eager_losses,
        rtol=1e-4,
    )
    return pair, {**dynamo, "compile_s": time.perf_counter() - started}


def checked_models(folder: Path, params: dict, data, backend: str | None, report: dict) -> list:
    """The eager models (and compiled ones, unless `backend` is None), their float32 losses
    checked, the bytes each saves for backward and dynamo's graphs noted in `report`."""
    generated, stock = GeneratedOps(folder, torch.float32), StockOps(torch.float32)
    eager = [Model(generated, params, torch.float32), Model(stock, params, torch.float32)]
    eager_losses = [train_losses(m, data) for m in eager]
    difference = check_losses([m.name for m in eager], eager_losses)
    print(
        f"float32 losses agree over {CHECK_STEPS} AdamW steps (largest relative difference"
        f" {difference:.1g}): " + ", ".join(f"{v:.6f}" for v in eager_losses[0])
    )
    report |= {
        "losses": dict(zip(("generated", "stock"), eager_losses)),
        "loss_max_rel_diff": difference,
        "saved_bytes": {ops.name: bytes_saved(ops, params, data) for ops in (generated, stock)},
    }
    if backend is None:
        return eager
    pair, dynamo = compiled_pair(folder, params, data, eager_losses, backend)
    report |= {"backend": backend, "dynamo": dynamo}
    print(
        f"generated model under torch.compile: {dynamo['graphs']} graph(s), "
        f"{dynamo['graph_breaks']} graph break(s) {dynamo['reasons'] or ''}"
    )
    print(
        f"compiled ({backend}) losses agree with eager over {CHECK_STEPS} steps; "
        f"compiling both took {dynamo['compile_s']:.0f} s"
    )
    return eager + pair


def print_table(per_step: dict[str, float]) -> dict:
    """ms per step of each contender and generated / stock, per mode; returned as printed."""
    print(f"  {'':10} {'generated ms':>13} {'stock ms':>9} {'generated/stock':>16}")
    rows = {}
    for mode in ("eager", "compiled"):
        if f"generated {mode}" in per_step:
            ours, theirs = per_step[f"generated {mode}"], per_step[f"stock {mode}"]
            rows[mode] = {
                "generated_ms": 1e3 * ours,
                "stock_ms": 1e3 * theirs,
                "ratio": ours / theirs,
            }
            print(f"  {mode:10} {1e3 * ours:13.3f} {1e3 * theirs:9.3f} {ours / theirs:16.2f}")
    return rows


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    steps = args.steps or (1 if args.smoke else 5 if args.quick else 10)
    repeats = args.repeats or (1 if args.smoke else 7 if args.quick else 21)
    # inductor takes 10-20 s a model on two busy cores; aot_eager traces the same forward and
    # derived backward (so graph breaks and compiled gradients show) in a few
    backend = args.backend or ("aot_eager" if args.smoke else "inductor")
    # a smoke run shares the machine with a test suite: one thread
    threads = args.threads or (1 if args.smoke else None)
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    print(
        f"load average at start {load_average()}; torch {torch.__version__},"
        f" {torch.get_num_threads()} threads"
    )
    text = load_text()
    data = batches(text, max(steps, CHECK_STEPS))
    params = initial_parameters()
    print(
        f"data: {len(text)} bytes of README.md and docs/*.md; batch {BATCH}, context {CONTEXT}; "
        f"{sum(v.numel() for v in params.values())} parameters (head tied to the embedding)"
    )
    report = {
        "load_average_at_start": load_average(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "steps_per_sample": steps,
        "repeats": repeats,
        **check_gradients(args.generated, params, data),
    }

    models = checked_models(
        args.generated, params, data, None if args.no_compile else backend, report
    )

    started = time.perf_counter()
    per_step = time_steps(models, data, steps, repeats)
    print(
        f"\nwarm training step, median of {repeats} interleaved samples of {steps} steps"
        f" ({time.perf_counter() - started:.0f} s):"
    )
    report["step"] = print_table(per_step)
    saved = report["saved_bytes"]
    print(
        f"bytes saved for backward by one forward: generated {saved['generated'] / 2**20:.2f} MiB,"
        f" stock {saved['stock'] / 2**20:.2f} MiB ({saved['generated'] / saved['stock']:.2f}x);"
        " peak memory not measured"
    )
    report["load_average_at_end"] = load_average()
    print(f"load average at end {report['load_average_at_end']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
