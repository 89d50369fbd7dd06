"""Each backend's runtime helpers (`symgrad/backends/<target>/runtime.py`), imported as Python and
run: against brute-force numpy (`np.add.at`, loops) and each other; the runtime module written
beside generated modules, and the helpers each imports from it."""

from __future__ import annotations

import ast
import importlib
import importlib.util

import numpy as np
import pytest
from conftest import GENERATED, require_jax, require_tf, require_torch

from symgrad.render import runtime_helpers
from symgrad.runtime_module import import_generated, runtime_text
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
def test_generated_modules_import_exactly_the_helpers_they_refer_to(target):
    """The committed runtime module of the target is the one symgrad writes now and defines
    every helper of the runtime files; each committed module of the target imports from it
    exactly the helpers its own code refers to (twice: as a sibling in a package, else from
    its folder), defines none of them, and imports nothing of symgrad."""
    runtime = REGISTRY[target].runtime_module
    written = GENERATED / f"{runtime}.py"
    assert written.read_text() == runtime_text(target)
    definitions = set(runtime_helpers(REGISTRY[target].backend.RUNTIME))
    assert definitions <= set(_top_level(ast.parse(written.read_text()))) and "_sum_to_shape" in definitions
    modules = sorted(set(GENERATED.glob(f"*{REGISTRY[target].suffix}")) - {written})
    assert len(modules) >= 15
    for path in modules:
        tree = ast.parse(path.read_text())
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == runtime]
        block = [n for n in tree.body if any(i in ast.walk(n) for i in imports)]
        referred = set().union(*(_names(n) for n in tree.body if n not in block)) & definitions
        assert sorted(i.level for i in imports) == ([0, 1] if referred else []), path.name
        assert all({a.name for a in i.names} == referred for i in imports), path.name
        assert not set(_top_level(tree)) & definitions, path.name
        assert not set().union(*map(_names, block)) & definitions, path.name  # its own names shadow no helper
        assert not any(n.module and n.module.startswith("symgrad") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))


def test_a_generated_module_imports_the_runtime_of_its_own_folder(tmp_path):
    """Two folders, two runtime modules: each module imported reads its own folder's (a
    process may import `generated/` and a verification's folder), one imported again after its
    runtime changed reads the new one, and one in a folder without a runtime reads none."""
    modules = []
    for n in range(2):
        folder = tmp_path / f"f{n}"
        folder.mkdir()
        (folder / "_symgrad_numpy.py").write_text(f"def _marker():\n    return {n}\n")
        (folder / "m_numpy.py").write_text("from _symgrad_numpy import _marker\n")
        modules.append(import_generated(folder / "m_numpy.py", f"_runtime_test_m{n}"))
    assert [m._marker() for m in modules] == [0, 1]
    (tmp_path / "f0" / "_symgrad_numpy.py").write_text("def _marker():\n    return 7\n")
    assert import_generated(tmp_path / "f0" / "m_numpy.py", "_runtime_test_m0_again")._marker() == 7
    # a module copied without its runtime does not borrow the one loaded from another folder
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "m_numpy.py").write_text("from _symgrad_numpy import _marker\n")
    with pytest.raises(ImportError):
        import_generated(tmp_path / "alone" / "m_numpy.py", "_runtime_test_alone")


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
