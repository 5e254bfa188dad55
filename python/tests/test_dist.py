# cge.SessionOptions' distributed fields under mpirun: a tensor-parallel
# InferenceSession (dist="env", dist_tp=2) gives the single-process output
# of the test encoder. Skipped, saying why, where cge or this machine has no
# MPI (the C tests under tests/dist cover the collectives themselves).
import os
import re
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
path, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
one = cge.InferenceSession(path, num_threads=1)
name, shape = one.get_inputs()[0].name, one.get_inputs()[0].shape
x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
ref = one.run(None, {name: x})[0]
so = cge.SessionOptions()
so.dist, so.dist_timeout_ms = "env", 20000
if mode == "tp":
    so.dist_tp = world
else:
    so.dist_pp = world
so.intra_op_num_threads = 1
sess = cge.InferenceSession(path, so)
for _ in range(2):
    y = sess.run(None, {name: x})[0]
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


def _mpirun(tmp_path, model, mode, np_=2, sharded=()):
    """Run SCRIPT under mpirun; with `sharded`, each name must start a region
    the tp rewrite took (CGE_TP_VERBOSE says which)."""
    script = tmp_path / "dist_run.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(ROOT, "python"), CGE_NUM_THREADS="1", CGE_TP_VERBOSE="1")
    out = str(tmp_path / ("err_" + mode))
    r = subprocess.run(["mpirun", "-np", str(np_), "--oversubscribe", sys.executable, str(script),
                        model, out, mode], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    for name in sharded:
        # a packed q/k/v projection's pieces (split_matmul_columns) are named <name>__ccN
        assert re.search(r"sharded the region from %s(__cc\d+)? " % re.escape(name), r.stderr), \
            r.stderr[-3000:]
    for rank in range(np_):
        err = float(open("%s.%d" % (out, rank)).read())
        assert err <= 1e-5, "%s: rank %d differs from one process by %g" % (mode, rank, err)


SKIP = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


@SKIP
@pytest.mark.parametrize("mode", ["tp", "pp"])
def test_encoder_matches_one_process(tmp_path, mode):
    model = os.path.join(MODEL_DIR, "transformer_encoder.onnx")
    assert os.path.exists(model), "missing %s (make test-models)" % model
    _mpirun(tmp_path, model, mode, sharded=("/layers.0/self_attn/MatMul", "/layers.3/linear1/MatMul")
            if mode == "tp" else ())


@SKIP
@pytest.mark.parametrize("mode", ["tp", "pp"])
def test_decoder_matches_one_process(tmp_path, mode):
    """The GPT-like decoder's blocks (scripts/make_dynamic_models.py: separate
    q, k, v projections, a causal mask through Where, GELU MLP) with an empty
    cache, small: tp shards attention and MLP of each block, pp cuts it."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import make_dynamic_models as mdm
    dec = mdm.decoder(layers=2, d_model=64, heads=4, ff=128, vocab=50, max_pos=32)

    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks, self.ln, self.head = dec.blocks, dec.ln, dec.head

        def forward(self, x):
            empty = torch.zeros(1, 4, 0, 16)
            for b in self.blocks:
                x, _, _ = b(x, empty, empty)
            return self.head(self.ln(x))

    model = str(tmp_path / "decoder.onnx")
    torch.onnx.export(Stack().eval(), (torch.randn(1, 16, 64),), model, opset_version=13,
                      input_names=["x"], output_names=["y"])
    _mpirun(tmp_path, model, mode, sharded=("/blocks.0/q/MatMul", "/blocks.1/fc1/MatMul")
            if mode == "tp" else ())


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
