"""Graphs whose shapes depend on values run node by node (eager): an
intermediate's buffer is reused once its last reader has run, and weights
are read in place, so that a run holds about its largest live set (the
detectors of the zoo held every intermediate at once: RetinaNet 2.4x ONNX
Runtime's peak memory). Peak RSS is measured in a child process."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import cge

N = 2 * 1024 * 1024          # 8 MB per float32 intermediate
STEPS = 24                   # about 190 MB if every intermediate were kept
W = N                        # an 8 MB weight


def _model(path):
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),   # value-dependent: eager
             helper.make_node("Shape", ["nz"], ["nzs"]),
             helper.make_node("Slice", ["w", "zero", "n"], ["wv"]),
             helper.make_node("Add", ["x", "wv"], ["a0"])]
    # Softmax: no fusion merges the chain into one node
    for i in range(1, STEPS):
        nodes.append(helper.make_node("Softmax", ["a%d" % (i - 1)], ["a%d" % i], axis=0))
    graph = helper.make_graph(
        nodes, "eager_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N])],
        [helper.make_tensor_value_info("a%d" % (STEPS - 1), TensorProto.FLOAT, [N]),
         helper.make_tensor_value_info("nzs", TensorProto.INT64, [2])],
        [numpy_helper.from_array(np.full(W, 0.5, np.float32), "w"),
         numpy_helper.from_array(np.array([0], np.int64), "zero"),
         numpy_helper.from_array(np.array([N], np.int64), "n")])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
                    path)


# VmHWM, not ru_maxrss: the latter survives fork and exec (the parent's peak)
HWM = r"""
def hwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
"""

CHILD = HWM + r"""
import json, sys
import numpy as np
import cge
s = cge.InferenceSession(sys.argv[1])
x = np.zeros(%d, np.float32)
x[::7] = 1.0
s.run(None, {"x": x})
before = hwm_kb()
outs = [s.run(None, {"x": x}) for _ in range(2)][-1]
after = hwm_kb()
print(json.dumps({"mode": s.last_run_mode(), "hwm_kb": after, "before_kb": before,
                  "out": outs[0][:16].tolist(), "nz": outs[1].tolist()}))
""" % N


def _env():
    # the child imports the same cge package (the source tree's python/)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cge.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg, env.get("PYTHONPATH")) if p)
    return env


def test_eager_run_holds_its_live_set_not_every_value(tmp_path):
    path = str(tmp_path / "chain.onnx")
    _model(path)
    out = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True,
                         env=_env(), check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    assert r["mode"] == "eager"
    x = np.zeros(N, np.float32)
    x[::7] = 1.0
    a = (x + 0.5).astype(np.float64)
    for _ in range(1, STEPS):
        e = np.exp(a - a.max())
        a = e / e.sum()
    np.testing.assert_allclose(r["out"], a[:16], rtol=1e-4)
    assert r["nz"] == [1, (N + 6) // 7]
    baseline = subprocess.run([sys.executable, "-c", HWM + "import numpy, cge\nprint(hwm_kb())"],
                              capture_output=True, text=True, env=_env(), check=True).stdout
    held = (r["hwm_kb"] - int(baseline.strip().splitlines()[-1])) / 1024.0
    # The model (an 8 MB weight, read in place), the input and its copy, and
    # a few live 8 MB values: well under the 24 intermediates (190 MB) that
    # a run kept before.
    assert held < 100, "the eager run held %.0f MB over the baseline" % held
