# Under mpirun: pipeline stages with micro-batches from Python
# (SessionOptions.dist_micro_batches) equal one process on the batch-4
# encoder, and cge.torch.compile with dist_tp / dist_pp reaches the sessions
# it makes: a small TransformerEncoder compiled with tp=2 (sharded, as
# CGE_TP_VERBOSE says) or pp=2 with micro-batches equals the eager model.
import os
import subprocess
import sys

import pytest

import cge

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_dist import MODEL_DIR, ROOT, SKIP  # noqa: E402  (no MPI: skipped, saying why)

ONNX_SCRIPT = r'''
import os, sys
import numpy as np
import cge
path, out, micro = sys.argv[1], sys.argv[2], int(sys.argv[3])
rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
shapes = {"input": [4, 128, 256]}
one = cge.InferenceSession(path, num_threads=1, input_shapes=shapes)
x = np.random.default_rng(0).standard_normal((4, 128, 256)).astype(np.float32)
ref = one.run(None, {"input": x})[0]
so = cge.SessionOptions()
so.dist, so.dist_timeout_ms, so.dist_pp, so.dist_micro_batches = "env", 20000, world, micro
so.intra_op_num_threads = 1
sess = cge.InferenceSession(path, so, input_shapes=shapes)
for _ in range(2):
    y = sess.run(None, {"input": x})[0]
err = float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))
with open("%s.%d" % (out, rank), "w") as f:
    f.write("%.3g" % err)
'''

TORCH_SCRIPT = r'''
import os, sys
import torch
import cge, cge.torch
out, mode = sys.argv[1], sys.argv[2]
rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
torch.manual_seed(0)
if mode.startswith("mlp"):
    # one cge graph (no graph breaks): two Linear pairs, a column- and a
    # row-parallel MatMul each
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64),
                                torch.nn.Linear(64, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 64)).eval()
else:
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2).eval()
# The MLP takes [tokens, 64]: on 3-D inputs torch's Linear flattens through
# a reshape whose target make_fx bakes in, which micro-batches cannot split.
x = torch.randn(32, 64) if mode.startswith("mlp") else torch.randn(4, 16, 64)
with torch.no_grad():
    ref = model(x)
so = cge.SessionOptions()
so.intra_op_num_threads, so.dist_timeout_ms = 1, 20000
if mode.endswith("tp"):
    c = cge.torch.compile(model, (x,), sess_options=so, dist_tp=world)
elif mode == "mlp_pp_mb":
    c = cge.torch.compile(model, (x,), sess_options=so, dist_pp=world, dist_micro_batches=2)
else:
    c = cge.torch.compile(model, (x,), sess_options=so, dist_pp=world)
assert so.dist == "none" and so.dist_tp == 0, "compile changed the caller's SessionOptions"
for _ in range(2):
    y = c(x)
err = float((y - ref).abs().max() / ref.abs().max())
with open("%s.%d" % (out, rank), "w") as f:
    f.write("%.3g" % err)
'''




def _mpirun(tmp_path, script_text, args, np_, out):
    script = tmp_path / "dist_run.py"
    script.write_text(script_text)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(ROOT, "python"), CGE_NUM_THREADS="1", CGE_TP_VERBOSE="1")
    r = subprocess.run(["mpirun", "-np", str(np_), "--oversubscribe", sys.executable, str(script)]
                       + [str(a) for a in args], env=env, capture_output=True, text=True,
                       timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(np_):
        err = float(open("%s.%d" % (out, rank)).read())
        assert err <= 1e-5, "rank %d differs by %g\n%s" % (rank, err, r.stderr[-3000:])
    return r


@SKIP
@pytest.mark.parametrize("np_,micro", [(2, 2), (2, 4), (3, 4)])
def test_micro_batches_match_one_process(tmp_path, np_, micro):
    model = os.path.join(MODEL_DIR, "transformer_encoder_batch4.onnx")
    assert os.path.exists(model), "missing %s (make test-models)" % model
    out = str(tmp_path / "err")
    _mpirun(tmp_path, ONNX_SCRIPT, [model, out, micro], np_, out)


def test_micro_batches_need_pp():
    so = cge.SessionOptions()
    so.dist, so.dist_micro_batches = "env", 2
    with pytest.raises(cge.Error, match="dist_pp"):
        cge.InferenceSession(os.path.join(MODEL_DIR, "transformer_encoder.onnx"), so)


@SKIP
@pytest.mark.parametrize("mode", ["tp", "pp", "mlp_tp", "mlp_pp_mb"])
def test_torch_compile_distributed_matches_eager(tmp_path, mode):
    """The encoder (tp, pp) must equal eager whether or not tp finds a region
    to shard (it depends on which aten ops convert, so it is not asserted
    here). The MLP is one
    cge graph: both pairs are sharded (mlp_tp: Gemm starts a region) or cut
    into stages with micro-batches (mlp_pp_mb)."""
    out = str(tmp_path / "err")
    r = _mpirun(tmp_path, TORCH_SCRIPT, [out, mode], 2, out)
    if mode == "mlp_tp":
        assert r.stderr.count("sharded the region from") == 2 * 2, r.stderr[-3000:]


def test_torch_compile_micro_batches_refuse_graph_breaks():
    """Micro-batches split axis 0 of each cge graph's inputs: after a graph
    break those are intermediate values, so compile refuses rather than
    guess (checked before any communicator is made). erfinv has no
    converter, so the module breaks around it."""
    import torch
    import cge.torch
    torch.manual_seed(0)

    class Broken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 8)
            self.b = torch.nn.Linear(8, 8)

        def forward(self, x):
            return self.b(torch.special.erfinv(torch.tanh(self.a(x)) * 0.5))

    with pytest.raises(cge.Error, match="graph breaks"):
        cge.torch.compile(Broken().eval(), (torch.randn(4, 8),), dist_pp=2, dist_micro_batches=2)


@SKIP
def test_torch_compile_micro_batches_baked_reshape_is_a_clear_error(tmp_path):
    """A 3-D input to Linear goes through a reshape to [64, 64] that the
    tracer bakes: half the batch does not infer, and the error says so."""
    script = TORCH_SCRIPT.replace('x = torch.randn(32, 64) if mode.startswith("mlp") else ',
                                  'x = ')
    sc = tmp_path / "baked.py"
    sc.write_text(script)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=os.path.join(ROOT, "python"), CGE_NUM_THREADS="1")
    r = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", sys.executable, str(sc),
                        str(tmp_path / "err"), "mlp_pp_mb"], env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode != 0
    assert "does not infer with 1/2 of the batch" in r.stderr, r.stderr[-2000:]
