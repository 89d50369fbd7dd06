"""`pip install .` (not editable) into a fresh virtual environment, then `symgrad derive` works.

The fresh environment sees this interpreter's packages (sympy & co., no download) through a
`.pth` file, after its own: `venv --system-site-packages` would give it the base interpreter's
instead, which lack them when the tests run inside a virtualenv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_wheel_install_ships_templates_and_derives(tmp_path):
    # a PYTHONPATH naming the source tree (running the tests from a checkout) would shadow the wheel
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    _see_this_interpreters_packages(python)
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    assert install.returncode == 0, install.stderr
    work = tmp_path / "work"
    shutil.copytree(ROOT / "ops", work / "ops")
    where = subprocess.run(
        [str(python), "-c", "import symgrad, symgrad.render as r; print(symgrad.__file__); print(r.templates_dir())"],
        capture_output=True, text=True, cwd=work, check=True, env=env,
    ).stdout.splitlines()
    assert all(str(venv) in line for line in where), where
    derive = subprocess.run(
        [str(venv / "bin" / "symgrad"), "derive", "ops/matmul.py", "-o", "generated"],
        capture_output=True, text=True, cwd=work, timeout=600, env=env,
    )
    assert derive.returncode == 0, derive.stderr
    for name in ("matmul_numpy.py", "matmul_tf.py"):
        assert (work / "generated" / name).read_text() == (ROOT / "generated" / name).read_text()


def _see_this_interpreters_packages(python) -> None:
    """Append this interpreter's site-packages folders to the environment's `sys.path`."""
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    folders = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    (Path(own) / "this_interpreters_packages.pth").write_text("\n".join(folders) + "\n")
