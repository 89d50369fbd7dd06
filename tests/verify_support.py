"""Shared by the tests of `symgrad diff`, `symgrad check` and `symgrad.testing`."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from conftest import ROOT

HANDWRITTEN = ROOT / "tests" / "fixtures" / "handwritten"
OPS = HANDWRITTEN / "ops.py"  # declarations of the ops below
FAULTY = HANDWRITTEN / "faulty.py"  # their hand-written gradients, one classic fault each
CORRECT = HANDWRITTEN / "correct.py"  # the same without the faults


def run_symgrad(*args, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`python -m symgrad ARGS` as a subprocess."""
    return start_symgrad(*args, cwd=cwd).wait()


class Background:
    """`python ARGS` (`-m symgrad ...`, a script) started in the background; `wait()` gives
    its outcome. `env` adds to the environment; PYTHONPATH is `env`'s, then the checkout."""

    def __init__(self, args: tuple, cwd: Path, niceness: int = 0, env: dict | None = None):
        path = os.pathsep.join(filter(None, [(env or {}).get("PYTHONPATH"), str(ROOT)]))
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {}), "PYTHONPATH": path}
        self.args = [sys.executable, *map(str, args)]
        self.out, self.err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            self.args, stdout=self.out, stderr=self.err, text=True, cwd=cwd, env=env,
            preexec_fn=(lambda: os.nice(niceness)) if niceness else None,
        )
        self.result: subprocess.CompletedProcess | None = None

    def wait(self) -> subprocess.CompletedProcess:
        if self.result is None:
            try:
                code = self.process.wait(timeout=1500)  # the whole library: minutes on 2 busy cores
            except subprocess.TimeoutExpired:
                self.process.kill()
                raise
            self.out.seek(0), self.err.seek(0)
            self.result = subprocess.CompletedProcess(self.args, code, self.out.read(), self.err.read())
        return self.result


def start_symgrad(*args, cwd: Path = ROOT, niceness: int = 0) -> Background:
    """`python -m symgrad ARGS` in the background (`niceness`: yielding the CPU to the tests)."""
    return Background(("-m", "symgrad", *args), cwd, niceness)


@functools.lru_cache(maxsize=None)
def derived_folder(op_file: Path) -> Path:
    """`op_file` derived once per test session into a temporary folder, through symgrad's
    cache (as the `derived` fixture derives ops/)."""
    from symgrad.cache import Cache, default_cache_dir
    from symgrad.generate import generate
    from symgrad.targets import TARGETS

    folder = Path(tempfile.mkdtemp(prefix="symgrad-test-derived-"))
    for name, text in generate([op_file], TARGETS, cache=Cache(default_cache_dir())).items():
        (folder / name).write_text(text)
    return folder


def rows(report: dict, op: str, **where) -> list[dict]:
    """The results of `op` in a JSON report, with the given field values."""
    return [
        r for r in report["results"] if r["op"] == op and all(r[k] == v for k, v in where.items())
    ]


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def vjps_in_every_target(folder: Path, stem: str, name: str, values: list, grad, **attrs) -> dict:
    """{target: (output, [gradient per input])} of op function `name` of the `<stem>_*`
    modules derived into `folder`, at `values` with upstream `grad`: numpy's `<name>_grad`,
    and each framework's own autodiff through the generated op (PyTorch's autograd, JAX's
    `vjp`, TensorFlow's GradientTape)."""
    import jax
    import numpy as np
    import tensorflow as tf
    import torch

    from conftest import import_path

    module = lambda target: import_path(folder / f"{stem}_{target}.py")
    numpy_module = module("numpy")
    got = {"numpy": (getattr(numpy_module, name)(*values, **attrs), getattr(numpy_module, name + "_grad")(grad, *values, **attrs))}
    tensors = [torch.tensor(v, requires_grad=True) for v in values]
    out = getattr(module("torch"), name)(*tensors, **attrs)
    got["torch"] = (out.detach().numpy(), [g.numpy() for g in torch.autograd.grad(out, tensors, torch.tensor(grad))])
    out, vjp = jax.vjp(lambda *a: getattr(module("jax"), name)(*a, **attrs), *map(jax.numpy.asarray, values))
    got["jax"] = (np.asarray(out), [np.asarray(g) for g in vjp(jax.numpy.asarray(grad))])
    constants = [tf.constant(v) for v in values]
    with tf.GradientTape() as tape:
        tape.watch(constants)
        out = getattr(module("tf"), name)(*constants, **attrs)
    got["tensorflow"] = (out.numpy(), [g.numpy() for g in tape.gradient(out, constants, output_gradients=tf.constant(grad))])
    return got
