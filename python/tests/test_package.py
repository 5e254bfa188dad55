# The Python package installs like a library: a venv (system site packages,
# for numpy and onnx), `pip install --no-build-isolation --no-index
# <tree>/python` (no network), then the venv's python, from another folder,
# imports the installed copy (not the tree's), prints its version and runs a
# model with libcge.so found through $CGE_LIBRARY or the loader's path.
import os
import shutil
import subprocess
import sys

import pytest

import cge

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PYDIR = os.path.join(ROOT, "python")
SYSTEM_PYTHON = "/usr/bin/python3"

RUN_MODEL = r"""
import numpy as np
from onnx import TensorProto, helper
import cge as ort
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
(y,) = s.run(None, {"x": np.array([-1.0, 2.0], np.float32)})
assert y.tolist() == [0.0, 2.0], y
import cge.torch  # the subpackage is installed too
print("FILE", ort.__file__)
print("TORCHFILE", cge.torch.__file__)
print("LIB", ort.library_path)
"""


def _tree_files():
    out = set()
    for d, dirs, files in os.walk(PYDIR):
        dirs[:] = [x for x in dirs if x not in ("__pycache__", ".pytest_cache")]
        out.update(os.path.join(d, f) for f in files if not f.endswith(".pyc"))
    return out


@pytest.fixture
def clean_tree():
    """pip builds in the tree (python/build, python/cge.egg-info): remove
    what it leaves, and check nothing else appeared."""
    made = [os.path.join(PYDIR, "build"), os.path.join(PYDIR, "dist"),
            os.path.join(PYDIR, "cge.egg-info")]
    existed = {p for p in made if os.path.exists(p)}
    before = _tree_files()
    yield
    for p in made:
        if p not in existed:
            shutil.rmtree(p, ignore_errors=True)
    assert _tree_files() - before == set()


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "CGE_LIBRARY", "LD_LIBRARY_PATH", "PYTHONHOME")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1")
    env.update(extra)
    return env


def test_pip_install_into_a_venv(tmp_path, clean_tree):
    if not os.path.exists(SYSTEM_PYTHON):
        pytest.fail("%s is needed to make the venv" % SYSTEM_PYTHON, pytrace=False)
    venv = tmp_path / "venv"
    subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, env=_env())
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", PYDIR],
                       env=_env(), capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    lib = os.path.abspath(cge.library_path)

    r = subprocess.run([py, "-m", "cge", "--version"], env=_env(CGE_LIBRARY=lib),
                       capture_output=True, text=True, cwd=str(elsewhere))
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("cge %s" % cge.__version__) in r.stdout
    assert "libcge" in r.stdout and lib in r.stdout
    v = cge.library_version()
    if v:
        assert v in r.stdout

    r = subprocess.run([py, "-c", RUN_MODEL], env=_env(CGE_LIBRARY=lib), capture_output=True,
                       text=True, cwd=str(elsewhere))
    assert r.returncode == 0, r.stdout + r.stderr
    info = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    site = os.path.realpath(str(venv))
    for key in ("FILE", "TORCHFILE"):
        f = os.path.realpath(info[key])
        assert f.startswith(site + os.sep), (key, f)
        assert not f.startswith(os.path.realpath(ROOT) + os.sep), (key, f)
    assert os.path.realpath(info["LIB"]) == os.path.realpath(lib)

    # No $CGE_LIBRARY: the installed package looks on the system's path.
    r = subprocess.run([py, "-c", RUN_MODEL], env=_env(LD_LIBRARY_PATH=os.path.dirname(lib)),
                       capture_output=True, text=True, cwd=str(elsewhere))
    assert r.returncode == 0, r.stdout + r.stderr
    # Nowhere to find it: a clear ImportError naming $CGE_LIBRARY.
    r = subprocess.run([py, "-c", "import cge"], env=_env(), capture_output=True, text=True,
                       cwd=str(elsewhere))
    if r.returncode != 0:  # unless a libcge is installed on this system
        assert "CGE_LIBRARY" in r.stderr, r.stderr


def test_library_of_another_major_version_is_refused(tmp_path):
    # A libcge whose major version differs has another ABI: import refuses it,
    # naming both versions, instead of misreading its structures.
    src = tmp_path / "fake.c"
    src.write_text("int cge_version_major(void) { return 99; }\n"
                   "const char *cge_version(void) { return \"99.0.0\"; }\n")
    lib = tmp_path / "libcge.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    env = dict(os.environ, CGE_LIBRARY=str(lib), PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, "-c", "import cge"], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path))
    assert p.returncode != 0
    assert "major version 99" in p.stderr and "needs major version 0" in p.stderr, p.stderr
