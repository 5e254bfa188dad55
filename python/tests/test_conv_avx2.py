# Convolutions on AVX2 machines (src/ops/conv.c dnnl_blocked8, dnnl_conv.c
# blocked8): channels-last convolutions with a spatial window run oneDNN's
# direct kernel on nChw8c copies of their activations where the machine has
# AVX2 and no AVX-512. CGE_CPU_ISA=avx2 forces that choice on an AVX-512
# machine; each setting runs in its own process (the cap is read once per
# process). Checked against a numpy float64 reference at the zoo's shapes and
# odd ones (batch 1 and 3, prime channels, stride 2, padding, 1-D, 3-D), with the
# counter cge__dnnl_conv_blocked8_made saying whether the path was taken.
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import cge
from cge import _lib

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

AVX512F = 1 << 11

CHILD = r"""
import ctypes, json, sys
import numpy as np
from cge import _lib
import cge
made = getattr(_lib.lib, "cge__dnnl_conv_blocked8_made", None)
feat = _lib.lib.cge_cpu_features
feat.restype = ctypes.c_uint64
if made is not None:
    made.restype = ctypes.c_int64
out = {"features": feat(), "taken": []}
for model, npz, dst in zip(*[iter(sys.argv[1:])] * 3):
    before = made() if made else 0
    data = np.load(npz)
    s = cge.InferenceSession(model)
    np.save(dst, s.run(None, {k: data[k] for k in data.files})[0])
    out["taken"].append((made() if made else 0) - before)
print(json.dumps(out))
"""


def _child(env_extra, jobs):
    env = dict(os.environ)
    env.pop("CGE_CPU_ISA", None)
    env.pop("CGE_DNNL_CONV_BLOCKED8", None)
    env.update(env_extra)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cge.__file__)))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    args = [a for j in jobs for a in j]
    r = subprocess.run([sys.executable, "-c", CHILD] + args, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def conv_ref(x, w, b, stride, pad):
    """Conv (one group, 1-D to 3-D) in float64."""
    nsp = x.ndim - 2
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + ((pad, pad),) * nsp)
    w = w.astype(np.float64)
    k = w.shape[2:]
    o = [(x.shape[2 + i] - k[i]) // stride + 1 for i in range(nsp)]
    y = np.zeros((x.shape[0], w.shape[0]) + tuple(o))
    for tap in np.ndindex(*k):
        sl = tuple(slice(tap[i], tap[i] + (o[i] - 1) * stride + 1, stride) for i in range(nsp))
        y += np.einsum("nc...,mc->nm...", x[(slice(None), slice(None)) + sl], w[(slice(None),
                       slice(None)) + tap])
    return y + b.astype(np.float64).reshape((1, -1) + (1,) * nsp)


def _model(path, x, w, b, stride, pad, residual):
    """x -> Conv (constant W, B) -> Relu -> Conv (the same shape class, so
    that the pair runs channels-last) [-> Add x-shaped z] -> Relu."""
    nsp = x.ndim - 2
    attrs = dict(strides=[stride] * nsp, pads=[pad] * (2 * nsp))
    w2 = np.ascontiguousarray(w[:, :1].repeat(w.shape[0], axis=1)) * 0.5
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c1"], **attrs),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b"], ["c2"],
                              strides=[1] * nsp, pads=[w.shape[2] // 2] * (2 * nsp))]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    cur = "c2"
    if residual:
        nodes.append(helper.make_node("Add", [cur, "z"], ["a"]))
        k = w.shape[2]
        out = [x.shape[0], w.shape[0]] + [(d + 2 * pad - k) // stride + 1 for d in x.shape[2:]]
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, out))
        cur = "a"
    nodes.append(helper.make_node("Relu", [cur], ["y"]))
    g = helper.make_graph(nodes, "t", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(w2, "w2"),
                           numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return w2


# (N, C, M, spatial sizes, kernel, stride, pad, residual, taken on AVX2)
CASES = [
    (1, 64, 64, (56, 56), 3, 1, 1, True, True),     # resnet18 layer1, residual sum post-op
    (3, 64, 128, (28, 28), 3, 2, 1, False, True),   # stride 2, batch 3
    (1, 128, 128, (28, 28), 3, 1, 1, True, True),   # resnet18 layer2
    (3, 32, 48, (19, 17), 5, 1, 2, False, True),    # 5x5, odd map
    (3, 13, 17, (11, 11), 3, 1, 1, True, True),     # prime channels (padded to 16)
    (1, 3, 16, (37, 37), 7, 2, 3, False, None),     # a stem (3 inputs: NHWC) + 16-16
    (3, 16, 24, (29,), 3, 1, 1, False, False),      # 1-D stays NHWC
    (1, 16, 24, (6, 9, 7), 3, 1, 1, True, True),    # 3-D: nCdhw8c
    (1, 64, 128, (14, 14), 1, 1, 0, False, False),  # 1x1 stays NHWC
]


def _prepare(tmp_path):
    rng = np.random.default_rng(14)
    jobs, refs = [], []
    for i, (n, c, m, sp, k, s, p, res, _) in enumerate(CASES):
        x = rng.standard_normal((n, c) + sp).astype(np.float32)
        w = (rng.standard_normal((m, c) + (k,) * len(sp)) / np.sqrt(c * k ** len(sp))).astype(
            np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        path = str(tmp_path / ("c%d.onnx" % i))
        w2 = _model(path, x, w, b, s, p, res)
        y1 = np.maximum(conv_ref(x, w, b, s, p), 0)
        y2 = conv_ref(y1, w2, b, 1, k // 2)
        feeds = {"x": x}
        if res:
            z = rng.standard_normal(y2.shape).astype(np.float32)
            feeds["z"] = z
            y2 = y2 + z
        np.savez(str(tmp_path / ("c%d.npz" % i)), **feeds)
        jobs.append((path, str(tmp_path / ("c%d.npz" % i)), str(tmp_path / ("y%d.npy" % i))))
        refs.append(np.maximum(y2, 0))
    return jobs, refs


def _check(jobs, refs, label):
    for i, (job, ref) in enumerate(zip(jobs, refs)):
        y = np.load(job[2])
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(y / scale, ref / scale, rtol=1e-5, atol=2e-6,
                                   err_msg="%s, case %d %s" % (label, i, CASES[i][:7]))


def _has_dnnl():
    return getattr(_lib.lib, "cge__dnnl_conv_blocked8_made", None) is not None and \
        bool(_lib.lib.cge_fused_conv_channels_last_available())


def test_avx2_takes_blocked_activations(tmp_path):
    """CGE_CPU_ISA=avx2: every spatial-window case the rule names runs on
    nChw8c copies (the counter moves), 1x1 does not; all within float32
    rounding of the float64 reference."""
    jobs, refs = _prepare(tmp_path)
    got = _child({"CGE_CPU_ISA": "avx2"}, jobs)
    _check(jobs, refs, "CGE_CPU_ISA=avx2")
    if not _has_dnnl() or not got["features"] & (1 << 7):
        pytest.skip("oneDNN or AVX2 absent: only the numerics were checked")
    for case, taken in zip(CASES, got["taken"]):
        if case[-1] is not None:
            assert (taken > 0) == case[-1], (case, taken)


def test_blocked8_off_and_avx512_keep_nhwc(tmp_path):
    """CGE_DNNL_CONV_BLOCKED8=0 keeps the NHWC kernels (the counter stays),
    and so does an uncapped AVX-512 machine; the outputs are the same within
    rounding."""
    jobs, refs = _prepare(tmp_path)
    got = _child({"CGE_CPU_ISA": "avx2", "CGE_DNNL_CONV_BLOCKED8": "0"}, jobs)
    assert sum(got["taken"]) == 0
    _check(jobs, refs, "CGE_DNNL_CONV_BLOCKED8=0")
    got = _child({}, jobs)
    _check(jobs, refs, "no cap")
    if got["features"] & AVX512F:
        assert sum(got["taken"]) == 0, "an AVX-512 machine took the AVX2 path"
