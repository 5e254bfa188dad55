# The quantizer (`cge quantize`, cge.quantize): the QDQ models it writes pass
# onnx's checker, have the structure ONNX Runtime's QDQ fusions expect, run in
# cge and in ONNX Runtime close to the float model on the calibration data;
# each calibration method gives the expected range on known distributions;
# MatMulNBits packing decodes back to the weights; bad input is a clear error.
import ctypes
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import cge
import onnx  # noqa: F401  (required: conftest.REQUIRED)
from onnx import TensorProto, helper, numpy_helper

from test_cli import CLI, cge as run_cli

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
ORT_MODULES = os.path.join(ROOT, "bench", "node_modules")
HAVE_ORT = (shutil.which("node") is not None and
            os.path.isfile(os.path.join(ORT_MODULES, "onnxruntime-node", "package.json")))



def _cpu_has_vnni():
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return True
    return any(f in flags for f in ("avx512_vnni", "avx_vnni", "amx_int8"))


# ONNX Runtime's x86 u8s8 kernels (MLAS) without VNNI use vpmaddubsw, whose
# pairwise int16 sums saturate (ORT's quantization docs advise reduce_range
# there): its numbers for full-range 8-bit weights are then not the exact
# int32 QDQ result, and only run, not compared. cge's stay exact
# (test_int8_exact.py).
ORT_INT8_EXACT = _cpu_has_vnni()

rng = np.random.default_rng(7)


def _t(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def _save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def make_cnn(path):
    """Conv-Relu-MaxPool-Conv-Relu, a residual Add, GlobalAveragePool, Flatten, Gemm."""
    c = 8
    inits = [_t("w1", rng.normal(0, 0.3, (c, 3, 3, 3))), _t("b1", rng.normal(0, 0.1, c)),
             _t("w2", rng.normal(0, 0.2, (c, c, 3, 3))), _t("b2", rng.normal(0, 0.1, c)),
             _t("wf", rng.normal(0, 0.3, (10, c))), _t("bf", rng.normal(0, 0.1, 10))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], "conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], "relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], "pool1", kernel_shape=[2, 2], strides=[2, 2]),
        # torch routes shared constants through Identity: still a constant bias
        helper.make_node("Identity", ["b2"], ["b2_copy"], "b2_identity"),
        helper.make_node("Conv", ["p1", "w2", "b2_copy"], ["c2"], "conv2", pads=[1, 1, 1, 1]),
        # ReLU6 as torch exports it: Clip with bounds from Constant nodes
        helper.make_node("Constant", [], ["lo"], "lo", value=_t("lo_v", np.array(0.0))),
        helper.make_node("Constant", [], ["hi"], "hi", value=_t("hi_v", np.array(6.0))),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"], "relu2"),
        helper.make_node("Add", ["r2", "p1"], ["a"], "add"),
        helper.make_node("GlobalAveragePool", ["a"], ["g"], "gap"),
        helper.make_node("Flatten", ["g"], ["f"], "flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], "fc", transB=1),
    ]
    g = helper.make_graph(nodes, "small_cnn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def make_mlp(path, k=64):
    """x @ W1 + b1 -> Relu -> @ W2 + b2."""
    inits = [_t("W1", rng.normal(0, 0.2, (k, 48))), _t("b1", rng.normal(0, 0.1, 48)),
             _t("W2", rng.normal(0, 0.2, (48, 8))), _t("b2", rng.normal(0, 0.1, 8))]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], "mm1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], "add1"),
             helper.make_node("Relu", ["hb"], ["r"], "relu"),
             helper.make_node("MatMul", ["r", "W2"], ["o"], "mm2"),
             helper.make_node("Add", ["o", "b2"], ["y"], "add2")]
    g = helper.make_graph(nodes, "small_mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], inits)
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def write_calib(d, name, shape, n=8, scale=1.0):
    os.makedirs(d, exist_ok=True)
    samples = []
    for k in range(n):
        a = (rng.normal(0, scale, shape)).astype(np.float32)
        np.save(os.path.join(d, "%s_%d.npy" % (name, k)), a)
        samples.append({name: a})
    return samples


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("quant")
    cnn = make_cnn(d / "cnn.onnx")
    mlp = make_mlp(d / "mlp.onnx")
    cnn_samples = write_calib(str(d / "calib_cnn"), "x", (1, 3, 16, 16))
    mlp_samples = write_calib(str(d / "calib_mlp"), "x", (4, 64))
    return {"dir": d, "cnn": cnn, "mlp": mlp, "cnn_calib": str(d / "calib_cnn"),
            "mlp_calib": str(d / "calib_mlp"), "cnn_samples": cnn_samples,
            "mlp_samples": mlp_samples}


def run_cge(path, feeds):
    s = cge.InferenceSession(path)
    return s.run(None, feeds)[0]


def run_ort(path, feeds, tmp):
    spec = {}
    for name, a in feeds.items():
        f = os.path.join(str(tmp), "in_%s.bin" % name)
        np.ascontiguousarray(a, np.float32).tofile(f)
        spec[name] = {"dims": list(a.shape), "file": f}
    sp = os.path.join(str(tmp), "spec.json")
    with open(sp, "w") as fh:
        json.dump(spec, fh)
    p = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "ort_eval.js"), path, sp],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, ORT_NODE_MODULES=ORT_MODULES))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    first = next(iter(out.values()))
    return np.array(first["data"], np.float32).reshape(first["dims"])


def ops(model):
    return [n.op_type for n in model.graph.node]


def init(model, name):
    for t in model.graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    raise KeyError(name)


def consumers(model, name):
    return [n for n in model.graph.node if name in n.input]


def producer(model, name):
    return next((n for n in model.graph.node if name in n.output), None)


def dq_input_init(model, value):
    """The integer initializer behind the DequantizeLinear producing `value`."""
    p = producer(model, value)
    assert p is not None and p.op_type == "DequantizeLinear", (value, p)
    return p, init(model, p.input[0]), init(model, p.input[1]), init(model, p.input[2])


# ---- the QDQ form ---------------------------------------------------------------------


@pytest.mark.parametrize("per_channel", [False, True])
def test_cnn_qdq_structure_checker_and_accuracy(work, per_channel, tmp_path):
    out = str(tmp_path / "cnn_int8.onnx")
    args = [work["cnn"], "-o", out, "--calibrate", work["cnn_calib"]]
    if per_channel:
        args.append("--per-channel")
    stdout, _ = run_cli("quantize", *args)
    assert "nodes quantized" in stdout
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    # Relu and Clip(0, 6) are folded into the range of the Conv output before them (as
    # ORT's quantizer does).
    assert "Relu" not in ops(m) and "Clip" not in ops(m)
    # Every Conv/Gemm reads DequantizeLinear outputs only and feeds a QuantizeLinear.
    for n in m.graph.node:
        if n.op_type not in ("Conv", "Gemm"):
            continue
        assert [producer(m, i).op_type for i in n.input] == ["DequantizeLinear"] * 3, n.name
        assert [c.op_type for c in consumers(m, n.output[0])] == ["QuantizeLinear"], n.name
        _, wq, ws, wz = dq_input_init(m, n.input[1])
        assert wq.dtype == np.int8 and wz.dtype == np.int8 and not wz.any()
        assert ws.shape == ((wq.shape[0],) if per_channel else ())
        # bias: int32 with scale x_scale * w_scale, zero point 0
        bdq, bq, bs, bz = dq_input_init(m, n.input[2])
        assert bq.dtype == np.int32 and bz.dtype == np.int32 and not bz.any()
        xdq = producer(m, n.input[0])
        x_scale = init(m, xdq.input[1])
        np.testing.assert_allclose(bs, x_scale * ws, rtol=1e-6)
    # Activations: u8 with a zero point.
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear":
            assert init(m, n.input[2]).dtype == np.uint8
    # MaxPool's output keeps its input's scale and zero point (ORT drops that pair).
    pool = next(n for n in m.graph.node if n.op_type == "MaxPool")
    qin = producer(m, producer(m, pool.input[0]).input[0])
    qout = consumers(m, pool.output[0])[0]
    assert init(m, qin.input[1]) == init(m, qout.input[1])
    assert init(m, qin.input[2]) == init(m, qout.input[2])
    # The float weights are gone (replaced, not kept beside).
    names = {t.name for t in m.graph.initializer}
    assert not names & {"w1", "w2", "wf", "b1", "bf"}
    # Accuracy on the calibration data: within 3% of the output range, in cge and in ORT.
    worst = 0.0
    for s in work["cnn_samples"]:
        ref = run_cge(work["cnn"], s)
        got = run_cge(out, s)
        err = np.abs(got - ref).max() / np.abs(ref).max()
        worst = max(worst, err)
    assert worst < 0.03, worst
    if HAVE_ORT:
        for s in work["cnn_samples"][:2]:
            ref = run_cge(work["cnn"], s)
            ort_q = run_ort(out, s, tmp_path)
            if not ORT_INT8_EXACT:
                continue
            assert np.abs(ort_q - ref).max() / np.abs(ref).max() < 0.03
            # cge and ORT run the same QDQ model to (nearly) the same numbers.
            np.testing.assert_allclose(run_cge(out, s), ort_q, atol=2e-3 * np.abs(ref).max())
    else:
        print("ONNX Runtime (node + onnxruntime-node) not found: ORT part skipped")


@pytest.mark.parametrize("acts", ["int8", "int8-symmetric"])
def test_cnn_qdq_int8_activations(work, acts, tmp_path):
    out = str(tmp_path / "cnn_s8.onnx")
    stdout, _ = run_cli("quantize", work["cnn"], "-o", out, "--calibrate", work["cnn_calib"],
                        "--per-channel", "--activations", acts)
    assert acts in stdout
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    zps = [init(m, n.input[2]) for n in m.graph.node if n.op_type == "QuantizeLinear"]
    assert zps and all(z.dtype == np.int8 for z in zps)
    if acts == "int8-symmetric":
        assert not any(z.any() for z in zps)
        # a symmetric range keeps negatives: Relu / Clip are not folded away
        assert "Relu" in ops(m) and "Clip" in ops(m)
        x_s = [(init(m, n.input[1]), n.input[0]) for n in m.graph.node
               if n.op_type == "QuantizeLinear"]
        assert all(s > 0 for s, _ in x_s)
    else:
        assert any(z.any() for z in zps)
        assert "Relu" not in ops(m) and "Clip" not in ops(m)
    # the same accuracy bound as uint8, in cge (fused int8 kernels) and ORT
    for smp in work["cnn_samples"][:4]:
        ref = run_cge(work["cnn"], smp)
        got = run_cge(out, smp)
        assert np.abs(got - ref).max() / np.abs(ref).max() < 0.03
        if HAVE_ORT:
            ort_q = run_ort(out, smp, tmp_path)
            assert not ORT_INT8_EXACT or np.abs(ort_q - ref).max() / np.abs(ref).max() < 0.03
    with pytest.raises(ValueError):
        cge.quantize(work["cnn"], out, calibrate=work["cnn_calib"], activations="int16")


def test_mlp_qdq_python_api_matches_cli(work, tmp_path):
    cli_out = str(tmp_path / "mlp_cli.onnx")
    py_out = str(tmp_path / "mlp_py.onnx")
    run_cli("quantize", work["mlp"], "-o", cli_out, "--calibrate", work["mlp_calib"],
            "--per-channel")
    rep = cge.quantize(work["mlp"], py_out, calibrate=work["mlp_samples"], per_channel=True)
    assert rep["nodes_quantized"] >= 4 and rep["opset_out"] == 13
    # The same C code: byte-identical files from the same data.
    assert open(cli_out, "rb").read() == open(py_out, "rb").read()
    m = onnx.load(py_out)
    onnx.checker.check_model(m, full_check=True)
    mm = [n for n in m.graph.node if n.op_type == "MatMul"]
    assert len(mm) == 2
    for n in mm:
        dq, wq, ws, wz = dq_input_init(m, n.input[1])
        # MatMul [K, N]: per-channel along N (axis 1).
        assert wq.dtype == np.int8 and ws.shape == (wq.shape[1],)
        assert helper.get_attribute_value(next(a for a in dq.attribute if a.name == "axis")) == 1
    worst = max(np.abs(run_cge(py_out, s) - run_cge(work["mlp"], s)).max() /
                np.abs(run_cge(work["mlp"], s)).max() for s in work["mlp_samples"])
    assert worst < 0.03, worst
    if HAVE_ORT:
        s = work["mlp_samples"][0]
        ref = run_cge(work["mlp"], s)
        ort_q = run_ort(py_out, s, tmp_path)
        assert not ORT_INT8_EXACT or np.abs(ort_q - ref).max() / np.abs(ref).max() < 0.03


def test_exclude_keeps_node_float(work, tmp_path):
    out = str(tmp_path / "cnn_ex.onnx")
    stdout, _ = run_cli("quantize", work["cnn"], "-o", out, "--calibrate", work["cnn_calib"],
                        "--exclude", "fc")
    m = onnx.load(out)
    onnx.checker.check_model(m)
    fc = next(n for n in m.graph.node if n.name == "fc")
    assert fc.input[1] == "wf" and fc.input[2] == "bf"   # float weights, untouched
    assert "1 quantizable nodes left float" in stdout


def test_untouched_fields_copied_verbatim(work, tmp_path):
    src = onnx.load(work["cnn"])
    src.doc_string = "kept as is"
    src.producer_name = "quant-test"
    onnx.helper.set_model_props(src, {"author": "me"})
    p = str(tmp_path / "props.onnx")
    onnx.save(src, p)
    out = str(tmp_path / "props_q.onnx")
    cge.quantize(p, out, calibrate=work["cnn_samples"][:2])
    m = onnx.load(out)
    assert m.doc_string == "kept as is" and m.producer_name == "quant-test"
    assert {e.key: e.value for e in m.metadata_props} == {"author": "me"}
    assert m.graph.name == "small_cnn"
    assert [o.name for o in m.graph.output] == ["y"] and [i.name for i in m.graph.input] == ["x"]


# ---- calibration methods on known distributions ----------------------------------------


def _identity_model(path, shape):
    # x -> Add(x, 0) -> y: Add's input range is the calibration data's.
    g = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"], "add")], "id",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
                          [_t("z", np.zeros(shape[-1]))])
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


def _x_scale_zp(path):
    m = onnx.load(path)
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "x")
    return float(init(m, q.input[1])), int(init(m, q.input[2]))


def test_methods_give_expected_ranges(tmp_path):
    shape = (64, 1024)
    model = _identity_model(str(tmp_path / "id.onnx"), shape)
    r = np.random.default_rng(3)
    uni = [{"x": r.uniform(-1.0, 3.0, shape).astype(np.float32)} for _ in range(2)]
    out = str(tmp_path / "u.onnx")
    cge.quantize(model, out, calibrate=uni, method="minmax")
    lo = min(s["x"].min() for s in uni)
    hi = max(s["x"].max() for s in uni)
    scale, zp = _x_scale_zp(out)
    assert scale == pytest.approx((hi - lo) / 255, rel=1e-5)
    assert zp == round(-lo / scale)
    # Gaussian with a few far outliers: minmax follows the outliers, percentile
    # (99.999) and entropy cut them off.
    gauss = []
    for k in range(8):
        a = r.normal(0, 1, shape).astype(np.float32)
        if k < 2:
            a[0, 0] = 40.0 if k else -40.0   # 2 outliers in 524288 values: under 0.001%
        gauss.append({"x": a})
    res = {}
    for method in ("minmax", "percentile", "entropy"):
        o = str(tmp_path / ("g_%s.onnx" % method))
        cge.quantize(model, o, calibrate=gauss, method=method)
        scale, zp = _x_scale_zp(o)
        res[method] = (scale * zp, scale * (255 - zp))   # |rmin|, rmax
    # (the zero point is an integer: |rmin| moves by up to half a step)
    assert res["minmax"][0] == pytest.approx(40.0, abs=0.6 * 80 / 255)
    assert res["minmax"][1] == pytest.approx(40.0, abs=0.6 * 80 / 255)
    # the 99.999th percentile of |N(0,1)| is about 4.4 (histogram bins: ~1% of 40)
    assert 3.9 < res["percentile"][1] < 5.0, res
    assert 3.9 < res["percentile"][0] < 5.0, res
    # entropy keeps most of the bulk and drops the outliers
    assert 2.0 < res["entropy"][1] < 12.0, res
    o = str(tmp_path / "g_p99.onnx")
    cge.quantize(model, o, calibrate=gauss, method="percentile", percentile=99.0)
    scale, zp = _x_scale_zp(o)
    assert 2.3 < scale * (255 - zp) < 2.9   # |N(0,1)|'s 99th percentile is 2.58


def test_calibration_dir_layouts(work, tmp_path):
    # a folder per sample, and one file per sample for a one-input model
    d1, d2 = tmp_path / "per_sample", tmp_path / "flat_any"
    for k, s in enumerate(work["cnn_samples"][:3]):
        os.makedirs(d1 / ("s%d" % k))
        np.save(d1 / ("s%d" % k) / "x.npy", s["x"])
        os.makedirs(d2, exist_ok=True)
        np.save(d2 / ("img%02d.npy" % k), s["x"])
    outs = []
    for d in (d1, d2):
        o = str(tmp_path / ("l_%s.onnx" % d.name))
        stdout, _ = run_cli("quantize", work["cnn"], "-o", o, "--calibrate", d)
        assert "3 calibration samples" in stdout
        outs.append(open(o, "rb").read())
    o = str(tmp_path / "l_py.onnx")
    cge.quantize(work["cnn"], o, calibrate=str(d1))
    assert outs[0] == outs[1] == open(o, "rb").read()


# ---- weight-only MatMulNBits ----------------------------------------------------------


def _dequant_nbits(m, node):
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    K, N, bits, bs = attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]
    B, scales, zps = (init(m, node.input[i]) for i in (1, 2, 3))
    blocks = (K + bs - 1) // bs
    assert B.dtype == np.uint8 and B.shape == (N, blocks, bs * bits // 8)
    assert scales.shape == (N * blocks,)
    if bits == 4:
        codes = np.stack([B & 15, B >> 4], -1).reshape(N, blocks, bs)
        zcol = np.stack([zps & 15, zps >> 4], -1).reshape(N, -1)[:, :blocks]
    else:
        codes = B.reshape(N, blocks, bs)
        zcol = zps.reshape(N, blocks)
    w = (codes.astype(np.float32) - zcol[:, :, None]) * scales.reshape(N, blocks)[:, :, None]
    return w.reshape(N, blocks * bs)[:, :K].T, scales.reshape(N, blocks)


@pytest.mark.parametrize("bits,k", [(4, 64), (8, 64), (4, 40)])
def test_weights_only_matmulnbits_layout(tmp_path, bits, k):
    model = make_mlp(str(tmp_path / "mlp.onnx"), k=k)
    out = str(tmp_path / "mlp_nbits.onnx")
    stdout, _ = run_cli("quantize", model, "-o", out, "--weights-only", "int%d" % bits)
    assert "2 MatMuls -> MatMulNBits" in stdout
    m = onnx.load(out)
    # The checker does not know com.microsoft's operators: the structure is checked here.
    assert ops(m) == ["MatMulNBits", "Add", "Relu", "MatMulNBits", "Add"]
    assert {(o.domain, o.version) for o in m.opset_import} >= {("", 13), ("com.microsoft", 1)}
    src = onnx.load(model)
    for n in (x for x in m.graph.node if x.op_type == "MatMulNBits"):
        assert n.domain == "com.microsoft"
        w_name = {"mm1": "W1", "mm2": "W2"}[n.name]
        W = init(src, w_name)
        deq, scales = _dequant_nbits(m, n)
        # every weight within half a step of its block's scale
        step = np.repeat(scales.T, 32, axis=0)[:W.shape[0]]
        assert np.all(np.abs(deq - W) <= step * 0.5 + 1e-6)
    names = {t.name for t in m.graph.initializer}
    assert "W1" not in names and "b1" in names
    x = rng.normal(0, 1, (4, k)).astype(np.float32)
    deq = {n.name: _dequant_nbits(m, n)[0] for n in m.graph.node if n.op_type == "MatMulNBits"}
    b1, b2 = init(src, "b1"), init(src, "b2")
    ref = np.maximum(x @ deq["mm1"] + b1, 0) @ deq["mm2"] + b2
    yf = run_cge(model, {"x": x})
    # the quantization error itself (random weights, small K): int8 ~1%, int4 ~20% of the range
    assert np.abs(ref - yf).max() / np.abs(yf).max() < (0.3 if bits == 4 else 0.03)
    # cge's MatMulNBits kernel reads the same layout.
    sess = cge.InferenceSession(out)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref, atol=1e-4 * np.abs(ref).max())
    if HAVE_ORT:
        # ONNX Runtime reads the packing as written: its result is the dequantized weights'.
        got = run_ort(out, {"x": x}, tmp_path)
        np.testing.assert_allclose(got, ref, atol=1e-5 * np.abs(ref).max())
    else:
        print("ONNX Runtime (node + onnxruntime-node) not found: ORT part skipped")


def _unpack4(raw, n):
    b = np.frombuffer(raw, np.uint8)
    return np.stack([b & 15, b >> 4], -1).ravel()[:n]


def _dequant_blocked(m, dq):
    """(W [K, N] from a blocked DequantizeLinear's uint4/uint8 initializers, scales)."""
    attrs = {a.name: helper.get_attribute_value(a) for a in dq.attribute}
    assert attrs["axis"] == 0
    bs = attrs["block_size"]
    t = {x.name: x for x in m.graph.initializer}
    wt, st, zt = (t[n] for n in dq.input)
    K, N = wt.dims
    blocks = -(-K // bs)
    assert list(st.dims) == [blocks, N] and list(zt.dims) == [blocks, N]
    assert wt.data_type == zt.data_type and wt.data_type in (TensorProto.UINT8, 21)
    if wt.data_type == 21:  # UINT4, two a byte
        codes = _unpack4(wt.raw_data, K * N).reshape(K, N)
        zps = _unpack4(zt.raw_data, blocks * N).reshape(blocks, N)
    else:
        codes, zps = numpy_helper.to_array(wt), numpy_helper.to_array(zt)
    scales = numpy_helper.to_array(st)
    z = np.repeat(zps, bs, 0)[:K].astype(np.float32)
    return (codes.astype(np.float32) - z) * np.repeat(scales, bs, 0)[:K], scales


@pytest.mark.parametrize("bits,k,bs", [(4, 64, 32), (8, 64, 16), (4, 40, 16)])
def test_weights_only_dequantize_linear_21_form(tmp_path, bits, k, bs):
    # --format qdq: MatMul(x, DequantizeLinear(W uint4/uint8, block_size along K)), the
    # standard ONNX spelling (opset 21) of the same codes MatMulNBits would hold.
    model = make_mlp(str(tmp_path / "mlp.onnx"), k=k)
    out, nbits = str(tmp_path / "mlp_dq.onnx"), str(tmp_path / "mlp_nbits.onnx")
    stdout, _ = run_cli("quantize", model, "-o", out, "--weights-only", "int%d" % bits,
                        "--block-size", str(bs), "--format", "qdq")
    assert "2 MatMuls -> DequantizeLinear-21 blocks" in stdout
    run_cli("quantize", model, "-o", nbits, "--weights-only", "int%d" % bits, "--block-size",
            str(bs))
    m = onnx.load(out)
    # onnx 1.12's checker knows neither opset 21 nor uint4: structure here, ORT below
    assert ops(m) == ["DequantizeLinear", "DequantizeLinear", "MatMul", "Add", "Relu", "MatMul",
                      "Add"]
    assert {(o.domain, o.version) for o in m.opset_import} == {("", 21)}
    assert m.ir_version >= 10
    src = onnx.load(model)
    deq = {}
    mn = onnx.load(nbits)
    for dq in (n for n in m.graph.node if n.op_type == "DequantizeLinear"):
        W = init(src, "W1" if dq.output[0].startswith("W1") else "W2")
        w, scales = _dequant_blocked(m, dq)
        step = np.repeat(scales, bs, 0)[:W.shape[0]]
        assert np.all(np.abs(w - W) <= step * 0.5 + 1e-6)
        deq[dq.output[0]] = w
    # the same weights as the MatMulNBits form
    for n in (x for x in mn.graph.node if x.op_type == "MatMulNBits"):
        w_nb = _dequant_nbits(mn, n)[0]
        assert any(np.array_equal(w_nb, w) for w in deq.values())
    x = rng.normal(0, 1, (4, k)).astype(np.float32)
    mm = [n for n in m.graph.node if n.op_type == "MatMul"]
    ref = np.maximum(x @ deq[mm[0].input[1]] + init(src, "b1"), 0) @ deq[mm[1].input[1]] + \
        init(src, "b2")
    got = cge.InferenceSession(out).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref, atol=1e-4 * np.abs(ref).max())
    np.testing.assert_allclose(got, cge.InferenceSession(nbits).run(None, {"x": x})[0],
                               atol=1e-5 * np.abs(ref).max())
    if HAVE_ORT:
        # ONNX Runtime decodes the uint4 weights as cge does: with the DequantizeLinear
        # outputs made graph outputs (so that it cannot fuse them away), its result is
        # the reference's ...
        m.graph.output.insert(0, helper.make_tensor_value_info(mm[0].input[1], TensorProto.FLOAT,
                                                               None))
        exposed = str(tmp_path / "exposed.onnx")
        onnx.save(m, exposed)
        np.testing.assert_array_equal(run_ort(exposed, {"x": x}, tmp_path), deq[mm[0].input[1]])
        # ... while its own DQ -> MatMul fusion (MatMulNBits, accuracy level 4: int8
        # activations) is within about 1% of it
        got = run_ort(out, {"x": x}, tmp_path)
        assert np.abs(got - ref).max() < 0.03 * np.abs(ref).max()


def _matmul_then(tmp_path, name, tail_nodes, opset, extra_inputs=(), y_shape=(2,), inits=()):
    inits = [_t("W", rng.normal(0, 0.2, (16, 8)))] + list(inits)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], "mm")] + tail_nodes
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])] + list(extra_inputs)
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, list(y_shape))], inits)
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
                 str(tmp_path / name))


def test_weights_only_dq_form_rewrites_reductions_to_opset_18(tmp_path):
    # ReduceMean's axes moved to an input at 18: raising the opset to 21 rewrites it
    model = _matmul_then(tmp_path, "rm.onnx", [
        helper.make_node("ReduceMean", ["h"], ["y"], "rm", axes=[1], keepdims=0)], 13)
    out = str(tmp_path / "o.onnx")
    run_cli("quantize", model, "-o", out, "--weights-only", "int8", "--block-size", "16",
            "--format", "qdq")
    m = onnx.load(out)
    rm = [n for n in m.graph.node if n.op_type == "ReduceMean"][0]
    assert len(rm.input) == 2 and [a.name for a in rm.attribute] == ["keepdims"]
    assert list(init(m, rm.input[1])) == [1]
    x = rng.normal(0, 1, (2, 16)).astype(np.float32)
    want = run_cge(model, {"x": x})
    got = cge.InferenceSession(out).run(None, {"x": x})[0]
    assert got.shape == (2,) and np.abs(got - want).max() < 0.02 * np.abs(want).max() + 1e-3
    if HAVE_ORT:
        np.testing.assert_allclose(run_ort(out, {"x": x}, tmp_path), got, atol=0.02)


def test_weights_only_dq_form_refuses_opset_crossing_changes(tmp_path):
    # GridSample's modes were renamed at 20: a model using it is not raised to 21
    grid = helper.make_tensor_value_info("grid", TensorProto.FLOAT, [1, 2, 2, 2])
    model = _matmul_then(tmp_path, "gs.onnx", [
        helper.make_node("Reshape", ["h", "shape"], ["h4"], "r"),
        helper.make_node("GridSample", ["h4", "grid"], ["y"], "gs")], 16, [grid],
        (1, 1, 2, 2), [helper.make_tensor("shape", TensorProto.INT64, [4], [1, 1, 2, 8])])
    _, err = run_cli("quantize", model, "-o", str(tmp_path / "o.onnx"), "--weights-only", "int4",
                     "--format", "qdq", rc=1)
    assert "[converter]" in err and "GridSample" in err and "opset 21" in err
    with pytest.raises(ValueError):
        cge.quantize(model, str(tmp_path / "o.onnx"), weights_only="int4", weights_format="x")


# ---- bad input ------------------------------------------------------------------------


def test_errors_name_the_layer(work, tmp_path):
    out = str(tmp_path / "never.onnx")
    _, err = run_cli("quantize", work["cnn"], "-o", out, "--calibrate", tmp_path / "nope", rc=1)
    assert "[io]" in err and "nope" in err
    bad = tmp_path / "bad_shape"
    os.makedirs(bad)
    np.save(bad / "x_0.npy", np.zeros((1, 3, 8, 8), np.float32))
    _, err = run_cli("quantize", work["cnn"], "-o", out, "--calibrate", bad, rc=1)
    assert "[io]" in err and "[1,3,8,8]" in err and "[1,3,16,16]" in err
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"this is not a protobuf \xff\xff\xff")
    _, err = run_cli("quantize", junk, "-o", out, "--weights-only", "int4", rc=1)
    assert "[io]" in err and "junk.onnx" in err
    _, err = run_cli("quantize", work["cnn"], "-o", out, "--weights-only", "int4", rc=1)
    assert "[converter]" in err and "MatMul" in err
    _, err = run_cli("quantize", work["cnn"], "-o", out, "--calibrate", work["cnn_calib"],
                     "--exclude", "no_such_node", rc=1)
    assert "[converter]" in err and "no_such_node" in err
    _, err = run_cli("quantize", work["cnn"], "-o", out, "--method", "mse", "--calibrate",
                     work["cnn_calib"], rc=2)
    assert "minmax" in err
    assert not os.path.exists(out)
    with pytest.raises(cge.CgeIOError, match=r"\[io\].*sample 0 has no tensor for input 'x'"):
        cge.quantize(work["cnn"], out, calibrate=[{"y": np.zeros((1, 10), np.float32)}])
    with pytest.raises(cge.ConverterError, match="MatMul"):
        cge.quantize(work["cnn"], out, weights_only="int8")


# ---- the binding ----------------------------------------------------------------------

QUANT_LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "cge/cge.h"
#define S(T) printf(#T " size %zu\n", sizeof(T))
#define O(T, f) printf(#T "." #f " %zu\n", offsetof(T, f))
int main(void) {
    S(cge_quantize_options); O(cge_quantize_options, samples);
    O(cge_quantize_options, num_samples); O(cge_quantize_options, inputs_per_sample);
    O(cge_quantize_options, method); O(cge_quantize_options, per_channel);
    O(cge_quantize_options, percentile); O(cge_quantize_options, weights_only_bits);
    O(cge_quantize_options, block_size); O(cge_quantize_options, exclude);
    O(cge_quantize_options, num_exclude); O(cge_quantize_options, num_threads);
    S(cge_quantize_report); O(cge_quantize_report, nodes_quantized);
    O(cge_quantize_report, relu_folded); O(cge_quantize_report, nodes_left_float);
    O(cge_quantize_report, opset_in); O(cge_quantize_report, opset_out);
    O(cge_quantize_report, warning);
    return 0;
}
"""


def test_quantize_struct_layouts_match_the_header(tmp_path):
    from cge import _quantize
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "no C compiler to read the header's layouts"
    src = tmp_path / "layout.c"
    src.write_text(QUANT_LAYOUT_C)
    exe = tmp_path / "layout"
    gen = os.path.join(os.path.dirname(os.path.abspath(cge.library_path)), "generated", "include")
    subprocess.run([cc, "-I", os.path.join(ROOT, "include"), "-I", gen, str(src), "-o", str(exe)],
                   check=True)
    structs = {"cge_quantize_options": _quantize.QuantizeOptions,
               "cge_quantize_report": _quantize.QuantizeReport}
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    for line in lines.splitlines():
        key, value = line.rsplit(" ", 1)
        if key.endswith(" size"):
            assert ctypes.sizeof(structs[key[:-5]]) == int(value), key
        else:
            struct, field = key.split(".")
            assert getattr(structs[struct], field).offset == int(value), key
