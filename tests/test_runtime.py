"""Each backend's runtime helpers (`symgrad/backends/<target>/runtime.py`), imported as Python and
run: against brute-force numpy (`np.add.at`, loops) and each other; and the selection of the
helpers a generated module carries."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from conftest import GENERATED, require_jax, require_tf, require_torch

from symgrad.render import helper_sources
from symgrad.targets import REGISTRY

RNG = np.random.default_rng(3)


def _runtime(target: str):
    if target == "tensorflow":
        require_tf()
    elif target == "jax":
        require_jax()
    elif target == "torch":
        require_torch()
    return importlib.import_module(f"symgrad.backends.{target}.runtime")


def _given(target: str, x):
    """`x` as the target's helpers take arrays: torch's read tensors' attributes."""
    return require_torch().as_tensor(x) if target == "torch" else x


def _array(x) -> np.ndarray:
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)


def _scatter_add_by_loop(values, positions, size):
    """`out[..., p, :] += values[..., k, :]` for each position k inside 0..size-1 (one trailing axis)."""
    out = np.zeros(values.shape[:-2] + (size,) + values.shape[-1:])
    for k, p in enumerate(positions):
        if 0 <= p < size:
            np.add.at(out, (..., p, slice(None)), values[..., k, :])
    return out


@pytest.mark.parametrize("target", list(REGISTRY))
def test_gather_reads_fill_outside(target):
    runtime = _runtime(target)
    x = RNG.normal(size=(2, 5, 3))
    positions = np.array([4, -1, 0, 5, 2])
    got = _array(runtime._gather(_given(target, x), _given(target, positions), -2, -7.0))
    expected = np.stack([x[:, p] if 0 <= p < 5 else np.full((2, 3), -7.0) for p in positions], axis=1)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("target", list(REGISTRY))
def test_gather_of_rank_9_reads_fill_outside(target):
    """Nine axes after the gather: TensorFlow's select and pad stop at eight (ExtractVolumePatches' gradient)."""
    runtime = _runtime(target)
    x = RNG.normal(size=(1, 2, 1, 2, 1, 2, 1, 3))
    positions = np.array([[2, -1], [0, 3]])
    got = _array(runtime._gather(_given(target, x), _given(target, positions), -3, 0.0))
    expected = np.zeros(x.shape[:-3] + (2, 2) + x.shape[-2:])
    for (a, b), p in np.ndenumerate(positions):
        if 0 <= p < x.shape[-3]:
            expected[..., a, b, :, :] = x[..., p, :, :]
    np.testing.assert_array_equal(got, expected)


def test_tensorflow_einsum_takes_diagonals_above_rank_6():
    """`abcdefgcegh->abcdefgh` (11 axes, three repeated): TensorFlow's einsum refuses diagonals
    above rank 6; `_einsum_of_diagonals` takes them first, as numpy's einsum does at once."""
    runtime = _runtime("tensorflow")
    x = RNG.normal(size=(2, 1, 2, 3, 2, 2, 1, 2, 2, 1, 2))
    spec = "abcdefgcegh->abcdefgh"
    got = _array(runtime._einsum_of_diagonals(spec, x))
    np.testing.assert_allclose(got, np.einsum(spec, x), rtol=1e-12)
    y = RNG.normal(size=(4, 2, 2, 2, 2, 3, 2))
    spec = "...ab,...kbdeak->...kde"  # leading batch axes, a repeated pair after them
    z = RNG.normal(size=(4, 3, 2))
    np.testing.assert_allclose(_array(runtime._einsum_of_diagonals(spec, z, y)), np.einsum(spec, z, y), rtol=1e-12)


@pytest.mark.parametrize("target", list(REGISTRY))
def test_scatter_add_sums_repeated_positions_and_drops_outside(target):
    runtime = _runtime(target)
    values = RNG.normal(size=(2, 6, 3))
    positions = np.array([1, 1, -1, 4, 6, 0])
    got = _array(runtime._scatter_add(_given(target, values), _given(target, positions), 1, 5))
    np.testing.assert_allclose(got, _scatter_add_by_loop(values, positions, 5), rtol=1e-12)


@pytest.mark.parametrize("target", list(REGISTRY))
def test_sum_to_shape_reverses_broadcasting(target):
    runtime = _runtime(target)
    g = RNG.normal(size=(4, 3, 5))
    like = np.zeros((3, 1))
    shape = like.shape if target != "tensorflow" else None
    got = _array(runtime._sum_to_shape(_given(target, g), shape if shape else _tf_constant(like)))
    np.testing.assert_allclose(got, g.sum(axis=(0, 2)).reshape(3, 1), rtol=1e-12)


def _tf_constant(x):
    return require_tf().constant(x)


def _recurrence_by_loop(x, by, exclusive, reverse):
    """y[m] = x[m] + by[m] * y[m -+ 1] along the middle axis, one entry at a time."""
    y, running = np.zeros_like(x), 0.0
    for m in reversed(range(x.shape[1])) if reverse else range(x.shape[1]):
        y[:, m] = running if exclusive else x[:, m] + by[:, m] * running
        running = x[:, m] + by[:, m] * running
    return y


@pytest.mark.parametrize("target", list(REGISTRY))
@pytest.mark.parametrize("exclusive, reverse", [(False, False), (False, True), (True, False), (True, True)])
def test_linear_scan_is_the_recurrence(target, exclusive, reverse):
    """`_linear_scan` (recursive doubling) against the recurrence run entry by entry, with
    zeros among the coefficients (a cumulative product's gradient at zeros), axis -2 of a
    length that is no power of two, the coefficient broadcast along the last axis."""
    runtime = _runtime(target)
    x = RNG.normal(size=(2, 7, 3))
    by = np.where(RNG.random((2, 7, 1)) < 0.3, 0.0, RNG.normal(size=(2, 7, 1)))
    got = _array(runtime._linear_scan(_given(target, x), _given(target, by), -2, exclusive, reverse))
    np.testing.assert_allclose(got, _recurrence_by_loop(x, by + 0 * x, exclusive, reverse), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("target", list(REGISTRY))
def test_generated_modules_carry_exactly_the_helpers_they_refer_to(target):
    """Each committed module of the target defines every runtime helper its own code (what is
    not a helper) refers to, directly or through another helper, and no other."""
    runtime = importlib.import_module(f"symgrad.backends.{target}").RUNTIME  # the file(s) helpers come from
    assert helper_sources("y = a @ b", runtime) == ""
    files = (runtime,) if isinstance(runtime, Path) else runtime
    definitions = {
        k: v for path in files for k, v in _top_level(ast.parse(path.read_text())).items() if k.startswith("_")
    }
    modules = sorted(GENERATED.glob(f"*{REGISTRY[target].suffix}"))
    assert len(modules) >= 15
    for path in modules:
        nodes = _top_level(ast.parse(path.read_text()))
        carried = {name for name in nodes if name in definitions}
        own = [node for name, node in nodes.items() if name not in definitions]
        needed, pending = set(), set().union(*(_names(n) for n in own)) & set(definitions)
        while pending:
            name = pending.pop()
            needed.add(name)
            pending |= (_names(definitions[name]) & set(definitions)) - needed
        assert carried == needed, path.name


def _top_level(tree) -> dict:
    """Name -> node of a module's top-level functions, classes and assignments."""
    found = {}
    for n, node in enumerate(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node
        else:
            found[f"<statement {n}>"] = node
    return found


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
