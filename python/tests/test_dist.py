# cge.SessionOptions' distributed fields under mpirun: a tensor-parallel
# InferenceSession (dist="env", dist_tp=2) gives the single-process output
# of the test encoder. Skipped, saying why, where cge or this machine has no
# MPI (the C tests under tests/dist cover the collectives themselves).
import os
import shutil
import subprocess
import sys

import pytest

import cge
from cge._lib import lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_DIR = os.environ.get("CGE_MODEL_DIR", os.path.join(ROOT, "build", "test_models"))

SCRIPT = r'''
import os, sys
import numpy as np
import cge
path, out = sys.argv[1], sys.argv[2]
rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
x = np.random.default_rng(0).standard_normal((1, 128, 256)).astype(np.float32)
ref = cge.InferenceSession(path, num_threads=1).run(None, {"input": x})[0]
so = cge.SessionOptions()
so.dist, so.dist_tp, so.dist_timeout_ms = "env", world, 20000
so.intra_op_num_threads = 1
sess = cge.InferenceSession(path, so)
for _ in range(2):
    y = sess.run(None, {"input": x})[0]
err = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
with open("%s.%d" % (out, rank), "w") as f:
    f.write("%.3g" % err)
'''


def _skip_reason():
    lib.cge_dist_available.restype = __import__("ctypes").c_bool
    if not lib.cge_dist_available():
        return "cge was built without MPI (install libopenmpi-dev and rebuild)"
    if not shutil.which("mpirun"):
        return "no mpirun on PATH (openmpi-bin)"
    return None


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_tensor_parallel_session_matches_one_process(tmp_path):
    model = os.path.join(MODEL_DIR, "transformer_encoder.onnx")
    assert os.path.exists(model), "missing %s (make test-models)" % model
    script = tmp_path / "tp.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(ROOT, "python"), CGE_NUM_THREADS="1")
    out = str(tmp_path / "err")
    r = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", sys.executable, str(script),
                        model, out], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(2):
        err = float(open("%s.%d" % (out, rank)).read())
        assert err <= 1e-5, "rank %d differs by %g" % (rank, err)


def test_session_options_dist_fields_are_checked():
    so = cge.SessionOptions()
    so.dist = "sockets"
    with pytest.raises(cge.Error, match="dist"):
        cge.InferenceSession(os.path.join(MODEL_DIR, "transformer_encoder.onnx"), so)
    # tp without a communicator is refused by the session, naming the fix.
    so = cge.SessionOptions()
    so.dist_tp = 2
    with pytest.raises(cge.Error, match="communicator"):
        cge.InferenceSession(os.path.join(MODEL_DIR, "transformer_encoder.onnx"), so)
