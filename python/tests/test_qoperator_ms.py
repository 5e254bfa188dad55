# ONNX Runtime's com.microsoft QOperator ops (src/onnx/onnx_qoperator.c):
# each against a NumPy reference of its ContribOperators.md formula (u8 and s8,
# zero points present and absent, saturation), at opt levels 1 (the
# DequantizeLinear -> op -> QuantizeLinear the importer writes) and 3 (fused
# into cge's int8 kernels), and a small QOperator model against ONNX Runtime.
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import cge

import onnx
from onnx import TensorProto, helper

from test_quant_int8 import const as t, model as qdq_model

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
ORT_MODULES = os.path.join(ROOT, "bench", "node_modules")
HAVE_ORT = (shutil.which("node") is not None and
            os.path.isfile(os.path.join(ORT_MODULES, "onnxruntime-node", "package.json")))
F = np.float32


def model(nodes, inputs, outputs, inits):
    """test_quant_int8's model, importing com.microsoft too."""
    m = onnx.load_from_string(qdq_model(nodes, inputs, outputs, inits))
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m.SerializeToString()


def ms(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, domain="com.microsoft", **attrs)


def run_both(m, feeds):
    """cge at level 1 (unfused) and level 3 (int8 kernels)."""
    return [cge.InferenceSession(m, opt_level=lv).run(None, feeds)[0] for lv in (1, 3)]


def sat(v, dt):
    i = np.iinfo(dt)
    return np.clip(v, i.min, i.max)


def dq(q, s, z):
    return (q.astype(np.int32) - np.int32(z)).astype(F) * F(s)


def quant(v, s, z, dt):
    return sat(np.rint(v.astype(F) / F(s)) + F(z), dt)


def rand_q(rng, shape, dt):
    i = np.iinfo(dt)
    return rng.integers(i.min, i.max + 1, shape).astype(dt)


def params(dt, z_present):
    """(scale, zero point or None) pairs for A, B, C."""
    if dt == np.uint8:
        z = (np.uint8(131), np.uint8(119), np.uint8(7))
    else:
        z = (np.int8(-3), np.int8(5), np.int8(-100))
    s = (F(0.031), F(0.047), F(0.02))
    return s, (z if z_present else (None, None, None))


def inputs_for(names, s, z):
    """initializers and the node's input list (absent zero points as "")."""
    inits, ins = [], []
    for n, sv, zv in zip(names, s, z):
        inits.append(t(n + "_s", np.array(sv, F)))
        ins.append(n + "_s")
        if zv is not None:
            inits.append(t(n + "_z", np.array(zv)))
            ins.append(n + "_z")
        else:
            ins.append("")
    return inits, ins


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("z_present", [True, False])
def test_qlinear_add_mul(op, dt, z_present):
    rng = np.random.default_rng(1)
    s, z = params(dt, z_present)
    a, b = rand_q(rng, (2, 3, 5), dt), rand_q(rng, (3, 1), dt)  # broadcasting
    a.ravel()[:2] = [np.iinfo(dt).min, np.iinfo(dt).max]
    inits, p = inputs_for(["a", "b", "c"], s, z)
    ins = ["a"] + p[0:2] + ["b"] + p[2:4] + p[4:6]
    while ins[-1] == "":
        ins.pop()
    m = model([ms(op, ins, ["y"])], {"a": a, "b": b}, ["y"], inits)
    za, zb, zc = (0 if v is None else v for v in z)
    da, db = dq(a, s[0], za), dq(b, s[1], zb)
    want = quant(da + db if op == "QLinearAdd" else da * db, s[2], zc, dt)
    for y in run_both(m, {"a": a, "b": b}):
        assert y.dtype == dt
        np.testing.assert_array_equal(y, want)


UNARY = {
    "QLinearSigmoid": ({}, lambda x: 1 / (1 + np.exp(-x)), 1),
    "QLinearLeakyRelu": ({"alpha": 0.13}, lambda x: np.where(x >= 0, x, F(0.13) * x), 0),
    "QLinearGlobalAveragePool": ({}, lambda x: x.mean(axis=(2, 3), keepdims=True), 1),
    "QLinearAveragePool": ({"kernel_shape": [2, 3], "strides": [1, 2], "pads": [1, 0, 0, 1]},
                           None, 1),
    "QLinearReduceMean": ({"axes": [1], "keepdims": 0}, lambda x: x.mean(axis=1), 1),
    "QLinearSoftmax": ({"axis": -1, "opset": 13},
                       lambda x: np.exp(x - x.max(-1, keepdims=True)) /
                       np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True), 1),
}


def avg_pool_ref(x):
    # kernel 2x3, strides 1x2, pads (top 1, left 0, bottom 0, right 1), pads not counted
    n, c, h, w = x.shape
    xp = np.full((n, c, h + 1, w + 1), np.nan, F)
    xp[:, :, 1:, :w] = x
    oh, ow = (h + 1 - 2) // 1 + 1, (w + 1 - 3) // 2 + 1
    y = np.empty((n, c, oh, ow), F)
    for i in range(oh):
        for j in range(ow):
            y[:, :, i, j] = np.nanmean(xp[:, :, i:i + 2, 2 * j:2 * j + 3], axis=(2, 3))
    return y


@pytest.mark.parametrize("op", list(UNARY))
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("z_present", [True, False])
def test_qlinear_unary_and_pooling(op, dt, z_present):
    rng = np.random.default_rng(2)
    attrs, f, tol = UNARY[op]
    s, z = params(dt, z_present)
    x = rand_q(rng, (2, 3, 5, 6), dt)
    inits, p = inputs_for(["x", "y"], (s[0], F(0.011) if op != "QLinearLeakyRelu" else s[2]),
                          (z[0], z[2]))
    ins = ["x"] + p
    while ins[-1] == "":
        ins.pop()
    m = model([ms(op, ins, ["y"], **attrs)], {"x": x}, ["y"], inits)
    zx, zy = (0 if v is None else v for v in (z[0], z[2]))
    ys = F(0.011) if op != "QLinearLeakyRelu" else s[2]
    fx = dq(x, s[0], zx)
    want = quant((avg_pool_ref if f is None else f)(fx), ys, zy, dt)
    for y in run_both(m, {"x": x}):
        assert y.dtype == dt and y.shape == want.shape
        diff = np.abs(y.astype(np.int32) - want.astype(np.int32))
        assert diff.max() <= tol, (op, diff.max())
        if tol:
            assert (diff == 0).mean() > 0.9


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_qlinear_concat(dt):
    rng = np.random.default_rng(3)
    s, z = params(dt, True)
    a, b = rand_q(rng, (2, 3, 4), dt), rand_q(rng, (2, 2, 4), dt)
    inits = [t("ys", np.array(s[2], F)), t("yz", np.array(z[2])), t("as", np.array(s[0], F)),
             t("az", np.array(z[0])), t("bs", np.array(s[1], F)), t("bz", np.array(z[1]))]
    n = ms("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], ["y"], axis=1)
    m = model([n], {"a": a, "b": b}, ["y"], inits)
    want = quant(np.concatenate([dq(a, s[0], z[0]), dq(b, s[1], z[1])], axis=1), s[2], z[2], dt)
    for y in run_both(m, {"a": a, "b": b}):
        np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("trans_b,per_col,bias,qout,alpha",
                         [(0, False, True, True, 1.0), (1, True, True, True, 1.0),
                          (1, True, False, False, 1.0), (0, True, True, False, 0.5)])
def test_qgemm(dt, trans_b, per_col, bias, qout, alpha):
    rng = np.random.default_rng(4)
    M, K, N = 3, 16, 5
    a = rand_q(rng, (M, K), dt)
    w = rng.integers(-127, 128, (K, N)).astype(np.int8)
    sa, za = F(0.02), (np.uint8(128) if dt == np.uint8 else np.int8(3))
    sb = rng.uniform(0.01, 0.03, N).astype(F) if per_col else F(0.02)
    c = rng.integers(-2000, 2000, N).astype(np.int32)
    sy, zy = F(0.05), (np.uint8(120) if dt == np.uint8 else np.int8(-4))
    inits = [t("sa", np.array(sa)), t("za", np.array(za)), t("w", w.T.copy() if trans_b else w),
             t("sb", np.array(sb)), t("zb", np.zeros(np.shape(sb), np.int8)), t("c", c),
             t("sy", np.array(sy)), t("zy", np.array(zy))]
    ins = ["a", "sa", "za", "w", "sb", "zb", "c" if bias else ""] + (["sy", "zy"] if qout else [])
    while ins[-1] == "":
        ins.pop()
    m = model([ms("QGemm", ins, ["y"], transB=trans_b, alpha=alpha)], {"a": a}, ["y"], inits)
    acc = alpha * (dq(a, sa, za).astype(np.float64) @ (w.astype(np.float64) * sb))
    if bias:
        acc = acc + c * (alpha * sa * sb)
    for y in run_both(m, {"a": a}):
        if qout:
            want = quant(acc.astype(F), sy, zy, dt)
            assert y.dtype == dt
            assert np.abs(y.astype(np.int32) - want.astype(np.int32)).max() <= 1
        else:
            assert y.dtype == F
            np.testing.assert_allclose(y, acc, rtol=1e-5, atol=1e-5 * np.abs(acc).max())


def dynamic_quantize(x):
    lo, hi = min(F(0), x.min()), max(F(0), x.max())
    s = F((hi - lo) / F(255))
    zp = np.clip(np.rint(-lo / s), 0, 255)
    return np.clip(np.rint(x / s) + zp, 0, 255), s, zp


@pytest.mark.parametrize("bias", [True, False])
def test_dynamic_quantize_matmul_and_matmul_integer_to_float(bias):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 32)).astype(F)
    b = rng.integers(-127, 128, (32, 6)).astype(np.int8)
    bs = rng.uniform(0.01, 0.02, 6).astype(F)
    bz = rng.integers(-3, 4, 6).astype(np.int8)
    bias_v = rng.standard_normal(6).astype(F)
    inits = [t("b", b), t("bs", bs), t("bz", bz), t("bias", bias_v)]
    wf = (b.astype(np.float64) - bz) * bs
    ins = ["a", "b", "bs", "bz"] + (["bias"] if bias else [])
    m = model([ms("DynamicQuantizeMatMul", ins, ["y"])], {"a": a}, ["y"], inits)
    q, s, zp = dynamic_quantize(a)
    want = ((q - zp) * s) @ wf + (bias_v if bias else 0)
    for y in run_both(m, {"a": a}):
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-4)
    # MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp, b_zp, bias) on uint8 A
    aq = rng.integers(0, 256, (4, 32)).astype(np.uint8)
    inits2 = inits + [t("as", np.array(F(0.03))), t("az", np.array(np.uint8(100)))]
    ins2 = ["aq", "b", "as", "bs", "az", "bz"] + (["bias"] if bias else [])
    m2 = model([ms("MatMulIntegerToFloat", ins2, ["y"])], {"aq": aq}, ["y"], inits2)
    want2 = ((aq.astype(np.float64) - 100) * F(0.03)) @ wf + (bias_v if bias else 0)
    for y in run_both(m2, {"aq": aq}):
        np.testing.assert_allclose(y, want2, rtol=1e-5, atol=1e-4)


def test_unsupported_forms_are_converter_errors():
    x = np.zeros((1, 2, 3, 3), np.uint8)
    inits = [t("s", np.array(F(0.1))), t("z", np.array(np.uint8(1)))]
    for n, what in [(ms("QLinearGlobalAveragePool", ["x", "s", "z", "s", "z"], ["y"],
                        channels_last=1), "channels_last=1"),
                    (ms("QLinearSoftmax", ["x", "s", "z", "s", "z"], ["y"], opset=11),
                     "before opset 13"),
                    (ms("QLinearAdd", ["x", "s"], ["y"]), "wants 7 or 8 inputs")]:
        with pytest.raises(cge.Error) as e:
            cge.InferenceSession(model([n], {"x": x}, ["y"], inits))
        assert e.value.layer == "converter" and what in str(e.value), str(e.value)


# ---- a small QOperator model, cge against ONNX Runtime ----------------------------------

def qoperator_model():
    """x -> Q -> QLinearConv -> QLinearLeakyRelu -+-> QLinearAdd -> QLinearAveragePool
    -> QLinearGlobalAveragePool -> Flatten -> QGemm -> QLinearSigmoid -> QLinearConcat (with
    QLinearMul of the pool) -> DQ; and a second QLinearConv branch into the add."""
    rng = np.random.default_rng(11)
    u8 = lambda v: np.array(v, np.uint8)  # noqa: E731
    inits = [t("xs", np.array(F(0.02))), t("xz", u8(128)),
             t("w1", rng.integers(-60, 61, (6, 3, 3, 3)).astype(np.int8)),
             t("w1s", rng.uniform(0.004, 0.008, 6).astype(F)), t("w1z", np.zeros(6, np.int8)),
             t("w2", rng.integers(-60, 61, (6, 3, 1, 1)).astype(np.int8)),
             t("w2s", np.array(F(0.01))), t("w2z", np.array(np.int8(0))),
             t("b1", rng.integers(-500, 500, 6).astype(np.int32)),
             t("c1s", np.array(F(0.03))), t("c1z", u8(110)), t("l1s", np.array(F(0.025))),
             t("l1z", u8(100)), t("c2s", np.array(F(0.02))), t("c2z", u8(130)),
             t("as", np.array(F(0.04))), t("az", u8(90)), t("ps", np.array(F(0.035))),
             t("pz", u8(95)), t("gs", np.array(F(0.02))), t("gz", u8(100)),
             t("fw", rng.integers(-100, 101, (5, 6)).astype(np.int8)),
             t("fws", rng.uniform(0.005, 0.01, 5).astype(F)), t("fwz", np.zeros(5, np.int8)),
             t("fb", rng.integers(-300, 300, 5).astype(np.int32)),
             t("fs", np.array(F(0.02))), t("fz", u8(128)), t("ss", np.array(F(1 / 256))),
             t("sz", u8(0)), t("ms", np.array(F(0.01))), t("mz", u8(10)),
             t("ys", np.array(F(0.01))), t("yz", u8(20))]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("QLinearConv", ["xq", "xs", "xz", "w1", "w1s", "w1z", "c1s", "c1z", "b1"],
                         ["c1"], pads=[1, 1, 1, 1]),
        ms("QLinearLeakyRelu", ["c1", "c1s", "c1z", "l1s", "l1z"], ["l1"], alpha=0.1),
        helper.make_node("QLinearConv", ["xq", "xs", "xz", "w2", "w2s", "w2z", "c2s", "c2z"],
                         ["c2"]),
        ms("QLinearAdd", ["l1", "l1s", "l1z", "c2", "c2s", "c2z", "as", "az"], ["a"]),
        ms("QLinearAveragePool", ["a", "as", "az", "ps", "pz"], ["p"], kernel_shape=[2, 2],
           strides=[2, 2]),
        ms("QLinearGlobalAveragePool", ["p", "ps", "pz", "gs", "gz"], ["g"]),
        helper.make_node("Flatten", ["g"], ["gf"]),
        ms("QGemm", ["gf", "gs", "gz", "fw", "fws", "fwz", "fb", "fs", "fz"], ["f"], transB=1),
        ms("QLinearSigmoid", ["f", "fs", "fz", "ss", "sz"], ["sg"]),
        ms("QLinearMul", ["gf", "gs", "gz", "gf", "gs", "gz", "ms", "mz"], ["mu"]),
        ms("QLinearConcat", ["ys", "yz", "sg", "ss", "sz", "mu", "ms", "mz"], ["cc"], axis=1),
        helper.make_node("DequantizeLinear", ["cc", "ys", "yz"], ["y"]),
    ]
    x = rng.standard_normal((2, 3, 8, 8)).astype(F)
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    g = helper.make_graph(nodes, "qop", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m, x


def run_ort(path, x, tmp):
    f = os.path.join(str(tmp), "x.bin")
    x.astype(F).tofile(f)
    sp = os.path.join(str(tmp), "spec.json")
    with open(sp, "w") as fh:
        json.dump({"x": {"dims": list(x.shape), "file": f}}, fh)
    p = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "ort_eval.js"), path, sp],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, ORT_NODE_MODULES=ORT_MODULES))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)["y"]
    return np.array(out["data"], F).reshape(out["dims"])


@pytest.mark.skipif(not HAVE_ORT, reason="ONNX Runtime (bench/node_modules) not installed")
def test_qoperator_model_matches_onnx_runtime(tmp_path):
    m, x = qoperator_model()
    path = str(tmp_path / "qop.onnx")
    onnx.save(m, path)
    want = run_ort(path, x, tmp_path)
    for lv in (1, 3):
        (y,) = cge.InferenceSession(path, opt_level=lv).run(None, {"x": x})
        assert y.shape == want.shape
        steps = np.abs(y - want) / 0.01
        # ONNX Runtime folds each op's scales into one ratio and rounds its
        # integer averages its own way: a step or two apart at most
        assert steps.max() <= 2.01, (lv, steps.max())
        assert (steps < 0.5).mean() > 0.8, (lv, (steps < 0.5).mean())
