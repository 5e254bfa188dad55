# oneDNN's libgomp gets a short spin by default (issue 14): the CLI
# re-executes itself with GOMP_SPINCOUNT=30000, `import cge` sets it while
# libcge loads; a user's own setting always wins. libgomp's
# OMP_DISPLAY_ENV=verbose report (on stderr, at its load) shows the spin count
# it took: 300000 by default, 0 when passive.
import os
import re
import subprocess
import sys

import pytest

from test_cli import CLI

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["OMP_DISPLAY_ENV"] = "verbose"
    env.update(extra)
    return env


def _spincounts(stderr):
    return re.findall(r"GOMP_SPINCOUNT = '(\d+)'", stderr)


def _cli(env):
    assert os.path.isfile(CLI), "the cge tool is not built at %s" % CLI
    p = subprocess.run([CLI, "--version"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("cge ") == 1, p.stdout
    counts = _spincounts(p.stderr)
    if not counts:
        pytest.skip("this cge is built without oneDNN: no libgomp to configure")
    return counts


def test_cli_bounds_libgomps_spin_by_default():
    counts = _cli(_env())
    # the first process's libgomp (default policy), then the re-executed one's
    assert counts == ["300000", "30000"], counts


def test_cli_keeps_a_users_wait_policy():
    assert _cli(_env(OMP_WAIT_POLICY="passive")) == ["0"]
    assert len(_cli(_env(OMP_WAIT_POLICY="active"))) == 1  # no re-exec
    assert _cli(_env(GOMP_SPINCOUNT="1234")) == ["1234"]


def _python(env, code):
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip(), _spincounts(p.stderr)


def test_import_bounds_libgomps_spin_and_leaves_environ_alone():
    out, counts = _python(_env(), "import os, cge; print(os.environ.get('GOMP_SPINCOUNT'))")
    if not counts:
        pytest.skip("this libcge is built without oneDNN: no libgomp to configure")
    assert counts == ["30000"], counts
    assert out == "None"  # set only while libcge loaded


def test_import_keeps_a_users_spincount():
    out, counts = _python(_env(GOMP_SPINCOUNT="777"), "import cge; print('ok')")
    if not counts:
        pytest.skip("this libcge is built without oneDNN: no libgomp to configure")
    assert counts == ["777"] and out == "ok"
