"""The derivation cache: unchanged op files are not re-derived, and any change invalidates."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from symgrad import cache as cache_module
from symgrad.cache import Cache, cache_key
from symgrad.generate import generate

OP_FILE = """
import sympy as sp
from pathlib import Path
from symgrad import elementwise

Path(__file__).with_suffix(".imported").write_text("yes")  # marks that the file was executed


@elementwise("Cube")
def cube(x):
    return x**{power}
"""


def write(tmp_path, power=3):
    path = tmp_path / "cube.py"
    path.write_text(textwrap.dedent(OP_FILE.format(power=power)))
    return path


def imported(path) -> bool:
    marker = path.with_suffix(".imported")
    result = marker.exists()
    marker.unlink(missing_ok=True)
    return result


def test_warm_run_does_not_import_the_op_file(tmp_path):
    cache = Cache(tmp_path / "cache")
    path = write(tmp_path)
    cold = generate([path], ("numpy",), cache=cache)
    assert imported(path)
    warm = generate([path], ("numpy",), cache=cache)
    assert not imported(path)
    assert warm == cold


def test_editing_the_op_file_invalidates(tmp_path):
    cache = Cache(tmp_path / "cache")
    path = write(tmp_path, power=3)
    first = generate([path], ("numpy",), cache=cache)
    write(tmp_path, power=4)
    second = generate([path], ("numpy",), cache=cache)
    assert imported(path)
    assert "x**4" in second["cube_numpy.py"] and second != first


def test_key_depends_on_targets_path_and_symgrad_itself(tmp_path, monkeypatch):
    path = write(tmp_path)
    key = cache_key(path, "cube.py", ("numpy",))
    assert key == cache_key(path, "cube.py", ("numpy",))
    assert key != cache_key(path, "cube.py", ("numpy", "tensorflow"))
    assert key != cache_key(path, "ops/cube.py", ("numpy",))
    monkeypatch.setattr(cache_module, "symgrad_fingerprint", lambda: "another symgrad version")
    assert key != cache_key(path, "cube.py", ("numpy",))


def test_locations_as_given_are_not_served_from_another_path(tmp_path, monkeypatch):
    """The modules name `cube.py` either way; the declaration's location is the path as given."""
    cache = Cache(tmp_path / "cache")
    path = write(tmp_path)
    monkeypatch.chdir(tmp_path)
    absolute = generate([path], ("numpy",), cache=cache)["cube_numpy.py"]
    relative = generate([Path("cube.py")], ("numpy",), cache=cache)["cube_numpy.py"]
    assert f"declared at {path}:" in absolute and "declared at cube.py:" in relative


def test_fingerprint_covers_symgrad_sources_and_templates():
    cache_module.symgrad_fingerprint.cache_clear()
    assert len(cache_module.symgrad_fingerprint()) == 64


@pytest.mark.parametrize("garbage", ["", "{not json", '{"ops": 3}'])
def test_unreadable_entry_is_a_miss(tmp_path, garbage):
    cache = Cache(tmp_path / "cache")
    path = write(tmp_path)
    expected = generate([path], ("numpy",), cache=cache)
    for entry in (tmp_path / "cache").glob("*.json"):
        entry.write_text(garbage)
    imported(path)
    assert generate([path], ("numpy",), cache=cache) == expected
    assert imported(path)


def test_parallel_and_serial_derivations_are_identical(tmp_path):
    from conftest import OPS

    serial = generate([OPS / "matmul.py", OPS / "tf_gaps.py"], ("numpy", "tensorflow"), jobs=1)
    parallel = generate([OPS / "matmul.py", OPS / "tf_gaps.py"], ("numpy", "tensorflow"), jobs=2)
    assert serial == parallel
