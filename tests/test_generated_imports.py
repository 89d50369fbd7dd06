"""Generated modules import their runtime module wherever they live: their folder on
`sys.path`, a subpackage of a user's package, or loaded by file path. Each way is run in a
fresh interpreter, for all four targets, on a wheel of a toy user package holding the derived
folder, with symgrad made unimportable: the folder needs nothing of symgrad at run time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT
from verify_support import derived_folder

from symgrad.targets import REGISTRY

TOY_PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "toypkg"
version = "0.1"

[tool.setuptools]
packages = ["toypkg", "toypkg.grads"]
"""

# Each way's script: import the four generated matmul modules as that way says (MODULES:
# suffix -> module), then take the gradient of sum(a @ b) w.r.t. a through each, which is
# [[21, 30], [21, 30]] for these a and b (TensorFlow's MatMul seed, /work/shared/REFERENCE.md).
COMMON = """\
import sys
sys.modules["symgrad"] = None  # any import of symgrad now fails
import numpy as np
a = np.array([[1.0, 2.0], [3.0, 4.0]])
b = np.array([[6.0, 7.0, 8.0], [9.0, 10.0, 11.0]])
"""

CHECK = """\
expected = [[21.0, 30.0], [21.0, 30.0]]
numpy_grad = MODULES["numpy"].matmul_grad(np.ones((2, 3)), a, b)[0]

import tensorflow as tf
ta, tb = tf.constant(a), tf.constant(b)
with tf.GradientTape() as tape:
    tape.watch(ta)
    total = tf.reduce_sum(MODULES["tf"].matmul(ta, tb))
tf_grad = tape.gradient(total, ta).numpy()

import jax
jax.config.update("jax_enable_x64", True)
jax_grad = np.asarray(jax.grad(lambda x: MODULES["jax"].matmul(x, b).sum())(a))

import torch
x = torch.tensor(a, requires_grad=True)
MODULES["torch"].matmul(x, torch.tensor(b)).sum().backward()
torch_grad = x.grad.numpy()

for name, got in [("numpy", numpy_grad), ("tf", tf_grad), ("jax", jax_grad), ("torch", torch_grad)]:
    np.testing.assert_allclose(got, expected, err_msg=name)
assert "symgrad" not in {m.split(".")[0] for m, v in sys.modules.items() if v is not None}
runtimes = sorted(m for m in sys.modules if "_symgrad_" in m)
print("runtimes:", " ".join(runtimes))
"""

WAYS = {
    # the folder on sys.path, as the README's examples do
    "sys_path": """\
import importlib
sys.path.insert(0, str(GRADS))
MODULES = {s: importlib.import_module(f"matmul_{s}") for s in ("numpy", "tf", "jax", "torch")}
""",
    # a subpackage of the user's installed package
    "package": """\
import importlib
MODULES = {s: importlib.import_module(f"toypkg.grads.matmul_{s}") for s in ("numpy", "tf", "jax", "torch")}
""",
    # by file path, as test runners and plug-in loaders do; the folder on no path at all
    "file_path": """\
import importlib.util
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
MODULES = {s: load(GRADS / f"matmul_{s}.py", f"plugin_{s}") for s in ("numpy", "tf", "jax", "torch")}
""",
}

RUNTIMES = sorted(target.runtime_module for target in REGISTRY.values())
EXPECTED_RUNTIMES = {
    "sys_path": RUNTIMES,
    "package": [f"toypkg.grads.{name}" for name in RUNTIMES],
    "file_path": RUNTIMES,
}


@pytest.fixture(scope="module")
def installed_toy_package(tmp_path_factory) -> Path:
    """A toy user package whose subpackage `toypkg.grads` is ops/matmul.py derived (four
    targets and their runtime modules), built as a wheel and installed into a folder of its
    own: that folder."""
    work = tmp_path_factory.mktemp("toy")
    source = work / "src"
    grads = source / "toypkg" / "grads"
    shutil.copytree(derived_folder(ROOT / "ops" / "matmul.py"), grads)
    (source / "toypkg" / "__init__.py").write_text('"""A user\'s package."""\n')
    (grads / "__init__.py").write_text('"""Gradients derived by symgrad."""\n')
    (source / "pyproject.toml").write_text(TOY_PYPROJECT)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run(pip + ["wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(work / "dist"), str(source)])
    wheel = next((work / "dist").glob("toypkg-*.whl"))
    _run(pip + ["install", "--quiet", "--no-deps", "--no-index", "--target", str(work / "site"), str(wheel)])
    return work / "site"


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_wheel_holds_every_targets_module_and_runtime(installed_toy_package):
    grads = installed_toy_package / "toypkg" / "grads"
    names = {p.name for p in grads.glob("*.py")}
    modules = {f"matmul{target.suffix}" for target in REGISTRY.values()}
    assert modules | {f"{name}.py" for name in RUNTIMES} | {"__init__.py"} == names


def test_generated_modules_import_three_ways_with_nothing_of_symgrad(installed_toy_package):
    """Each way in a fresh interpreter (run side by side): the gradients through all four
    targets are right, symgrad was never imported, and the runtime modules are the folder's
    own (siblings inside the package)."""
    site = installed_toy_package
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no checkout on the path
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    processes = {}
    for way, body in WAYS.items():
        grads = f"from pathlib import Path\nGRADS = Path({str(site / 'toypkg' / 'grads')!r})\n"
        path = "" if way != "package" else f"sys.path.insert(0, {str(site)!r})\n"
        script = COMMON + path + grads + body + CHECK
        processes[way] = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, cwd=site.parent,
        )
    for way, process in processes.items():
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, f"{way}:\n{textwrap.indent(err[-3000:], '  ')}"
        assert out.splitlines()[-1] == "runtimes: " + " ".join(EXPECTED_RUNTIMES[way]), way
