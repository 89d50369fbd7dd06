"""What every generated module may call: vectorised numpy/scipy.special, public TensorFlow."""

from __future__ import annotations

import ast

import pytest

from conftest import OPS

STEMS = sorted(p.stem for p in OPS.glob("*.py") if not p.name.startswith("_"))


def _modules_called(text: str) -> set[str]:
    """The module prefixes of every dotted call target, e.g. {"np", "tf.math"}."""
    prefixes = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            prefix = ast.unparse(node.func.value)
            if "(" not in prefix:  # a method of a call's result (`np.asarray(x).reshape`): not a module
                prefixes.add(prefix)
    return prefixes


def _imports(text: str) -> set[str]:
    tree = ast.parse(text)
    return {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


@pytest.mark.parametrize("stem", STEMS)
def test_numpy_modules_are_vectorised(derived, stem):
    text = derived[1][f"{stem}_numpy.py"]
    # scipy.sparse: the scatter-add's one-hot matrix (never dense), in the `_scatter_add` helper
    assert _imports(text) <= {"numpy", "scipy.special", "scipy.sparse"}
    called = {p for p in _modules_called(text) if not p.isidentifier() or p in {"np", "math", "scipy"}}
    assert called <= {"np", "scipy.special", "scipy.sparse"}, called
    assert "math." not in text.replace("np.", "")


@pytest.mark.parametrize("stem", STEMS)
def test_tensorflow_modules_use_the_public_api(derived, stem):
    text = derived[1][f"{stem}_tf.py"]
    assert _imports(text) == {"tensorflow"}
    tf_calls = {p for p in _modules_called(text) if p == "tf" or p.startswith("tf.")}
    assert tf_calls <= {"tf", "tf.math", "tf.math.special", "tf.linalg", "tf.raw_ops"}, tf_calls
    for private in ("tensorflow.python", "gen_", "_gradient_registry", "math_ops"):
        assert private not in text
