# The channels-last depthwise and grouped convolution kernels (src/ops/
# depthwise_nhwc*.c, conv_grouped.c) through whole sessions, each
# CGE_CPU_ISA cap in its own process (the cap is read once per process, as
# in test_cpu_isa.py): forced on (CGE_DW_NHWC=1, CGE_GROUPED_CONV=all), the
# result matches a numpy float64 reference at zoo and odd shapes, and the
# kernel's counters say which path ran (the AVX2 one under CGE_CPU_ISA=avx2).
import json
import os
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import cge  # noqa: E402

CHILD = r"""
import ctypes, json, sys
import numpy as np
from cge import _lib
import cge
lib = _lib.lib
def counter(name):
    f = getattr(lib, name)
    f.restype = ctypes.c_int64
    return f()
isa = lib.cge__dw_nhwc_isa
isa.restype = ctypes.c_int
model, npz, out = sys.argv[1:4]
data = np.load(npz)
before = {k: counter(k) for k in ("cge__dw_nhwc_runs", "cge__dw_nhwc_runs_avx2",
                                  "cge__gconv_pack_count")}
s = cge.InferenceSession(model)
res = s.run(None, {"x": data["x"]})
np.save(out, res[0])
print(json.dumps({"isa": isa(), **{k: counter(k) - v for k, v in before.items()}}))
"""

# (N, C, M, G, H, W, k, stride, pad, act): depthwise where C = M = G
CASES = [
    (1, 32, 32, 32, 28, 28, 3, 1, 1, "Relu"),      # mnasnet / mobilenet 3x3
    (1, 72, 72, 72, 28, 28, 5, 2, 2, "Relu"),      # 5x5 stride 2
    (1, 96, 96, 96, 14, 14, 3, 2, 1, "HardSwish"),  # mobilenet_v3
    (3, 37, 37, 37, 9, 11, 3, 1, 1, "none"),       # batch 3, prime channels and sizes
    (1, 19, 19, 19, 1, 1, 3, 1, 1, "Relu"),        # 1x1 input
    (1, 13, 13, 13, 7, 5, 7, 2, 3, "Sigmoid"),     # window wider than the input
    (1, 64, 64, 4, 28, 28, 3, 2, 1, "Relu"),       # regnet: 16 a group, stride 2
    (1, 160, 160, 10, 14, 14, 3, 1, 1, "none"),    # regnet_x_400mf
    (3, 34, 34, 2, 5, 7, 3, 1, 1, "Relu"),         # 17 a group (masked lanes), batch 3
    (1, 24, 48, 3, 9, 9, 3, 2, 1, "none"),         # 8 in, 16 out a group
]


def _model(path, n, c, m, g, h, w, k, s, p, act):
    rng = np.random.default_rng(c * 1000 + m + g)
    wt = rng.standard_normal((m, c // g, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=g, kernel_shape=[k, k],
                              strides=[s, s], pads=[p, p, p, p])]
    nodes.append(helper.make_node("Identity" if act == "none" else act, ["c"], ["y"]))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, m, oh, ow])],
        [helper.make_tensor("w", TensorProto.FLOAT, wt.shape, wt.ravel()),
         helper.make_tensor("b", TensorProto.FLOAT, b.shape, b)])
    mo = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    mo.ir_version = 7
    onnx.save(mo, path)
    return wt, b


def _reference(x, wt, b, g, s, p, act):
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    n, c, h, w = x.shape
    m, cpg, k, _ = wt.shape
    mpg = m // g
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    y = np.zeros((n, m, oh, ow))
    for o in range(m):
        gi = o // mpg
        for ky in range(k):
            for kx in range(k):
                patch = x[:, gi * cpg:(gi + 1) * cpg, ky:ky + s * oh:s, kx:kx + s * ow:s]
                y[:, o] += np.einsum("nchw,c->nhw", patch, wt[o, :, ky, kx].astype(np.float64))
    y += b.astype(np.float64)[None, :, None, None]
    if act == "Relu":
        y = np.maximum(y, 0)
    elif act == "HardSwish":
        y = y * np.clip(y / 6 + 0.5, 0, 1)
    elif act == "Sigmoid":
        y = 1 / (1 + np.exp(-y))
    return y


def _child(cap, model, npz, out, knob):
    env = dict(os.environ)
    env.pop("CGE_CPU_ISA", None)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cge.__file__)))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    env.update(knob)
    if cap is not None:
        env["CGE_CPU_ISA"] = cap
    r = subprocess.run([sys.executable, "-c", CHILD, model, npz, out], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("cap", [None, "avx2", "generic"])
def test_kernels_match_reference_per_cap(tmp_path, cap):
    for i, (n, c, m, g, h, w, k, s, p, act) in enumerate(CASES):
        path = str(tmp_path / f"m{i}.onnx")
        wt, b = _model(path, n, c, m, g, h, w, k, s, p, act)
        x = np.random.default_rng(i).standard_normal((n, c, h, w)).astype(np.float32)
        npz, out = str(tmp_path / f"in{i}.npz"), str(tmp_path / f"out{i}.npy")
        np.savez(npz, x=x)
        depthwise = c == m == g
        knob = {"CGE_DW_NHWC": "1"} if depthwise else {"CGE_GROUPED_CONV": "all"}
        got = _child(cap, path, npz, out, knob)
        y = np.load(out)
        want = _reference(x, wt, b, g, s, p, act)
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * (c // g) * k * k,
                                   err_msg=f"case {i} cap {cap}")
        if depthwise:
            ran = got["cge__dw_nhwc_runs"]
            if got["isa"] == 0:
                assert ran == 0
            else:
                assert ran >= 1, f"case {i}: the depthwise kernel did not run"
            assert got["cge__dw_nhwc_runs_avx2"] == (ran if got["isa"] == 256 else 0)
            if cap == "avx2":
                assert got["isa"] in (0, 256)
            if cap == "generic":
                assert got["isa"] == 0
        else:
            packs = got["cge__gconv_pack_count"]
            assert packs == (0 if got["isa"] == 0 else 1), f"case {i}: packs {packs}"
