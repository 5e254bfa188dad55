# The int8 path of quantized (QDQ) models (compiler pass fuse_qdq and its
# integer kernels): each fused form against a NumPy reference of the ONNX
# formulas (u8/s8, zero points, per-tensor and per-channel scales, saturation,
# odd sizes), against the same model with the pass off (opt_level 1: no
# fusion), and a tiny QDQ CNN exported by PyTorch FX end to end.
import glob
import os
import subprocess
import sys

import numpy as np
import pytest

import cge

import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NP2ONNX = onnx.mapping.NP_TYPE_TO_TENSOR_TYPE


def const(name, a):
    a = np.asarray(a)
    return helper.make_tensor(name, NP2ONNX[a.dtype], a.shape, a.ravel())


def model(nodes, inputs, outputs, inits):
    ins = [helper.make_tensor_value_info(n, NP2ONNX[a.dtype], list(a.shape))
           for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs]
    g = helper.make_graph(nodes, "g", ins, outs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def run(m, inputs, level=None, dump=None, threads=0):
    old = os.environ.get("CGE_DUMP_DIR")
    if dump:
        os.environ["CGE_DUMP_DIR"] = str(dump)
    try:
        s = cge.InferenceSession(m, opt_level=level, num_threads=threads)
    finally:
        if dump:
            if old is None:
                del os.environ["CGE_DUMP_DIR"]
            else:
                os.environ["CGE_DUMP_DIR"] = old
    return s.run(None, inputs)


def fused_ops(dump):
    """op types in the graph the compiler partitioned (the last optimize dump)."""
    files = sorted(glob.glob(os.path.join(str(dump), "*_optimize_*.txt")))
    return open(files[-1]).read()


def saturate(v, dt):
    info = np.iinfo(dt)
    return np.clip(v, info.min, info.max).astype(dt)


def quantize(x, s, z, dt):
    return saturate(np.rint(x.astype(np.float32) / np.float32(s)) + z, dt)


def conv_int(x, w, stride, pads, group, dil=1):
    """exact int64 convolution of zero-point-free values; pads = (t, l, b, r)."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), np.int64)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    oh = (xp.shape[2] - (kh - 1) * dil - 1) // stride + 1
    ow = (xp.shape[3] - (kw - 1) * dil - 1) // stride + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    mg = m // group
    for o in range(m):
        g = o // mg
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dil:i * dil + stride * oh:stride,
                           j * dil:j * dil + stride * ow:stride]
                y[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, i, j].astype(np.int64))
    return y


def requant(acc, mult, zp, dt, lo=None):
    """QLinearConv's requantisation as cge computes it: float32(acc) * float32
    multiplier, rounded half to even, plus the zero point, saturated."""
    v = np.rint(acc.astype(np.float32) * mult) + np.float32(zp)
    if lo is not None:
        v = np.maximum(v, lo)
    return saturate(v, dt)


CONV_CASES = [
    # x dtype, x zp, per-channel w, bias, act, y dtype, y zp, C, M, group, stride, pads, H, W
    (np.uint8, 128, True, True, "relu", np.uint8, 0, 3, 5, 1, 1, (1, 1, 1, 1), 7, 9),
    (np.int8, -3, False, False, None, np.int8, 5, 4, 6, 2, 2, (0, 1, 1, 0), 6, 5),
    (np.uint8, 7, True, True, "clip", np.uint8, 3, 8, 8, 8, 1, (1, 1, 1, 1), 5, 5),
    (np.uint8, 0, True, True, None, np.int8, -2, 16, 24, 1, 1, (0, 0, 0, 0), 3, 4),
]


def qdq_conv_graph(xs, xz, wq, ws, wz, ys, yz, bias, act, **conv_attrs):
    """x -> Q -> DQ, DQ(wq) (per channel along axis 0), DQ(int32 bias) when
    bias = (bq, bs), Conv, Relu / Clip(0, 6) for act "relu" / "clip", Q -> y."""
    inits = [const("xs", xs), const("xz", xz), const("wq", wq), const("ws", ws),
             const("wz", wz), const("ys", ys), const("yz", yz)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0)]
    conv_in = ["xd", "wd"]
    if bias is not None:
        bq, bs = bias
        inits += [const("bq", bq), const("bs", bs), const("bz", np.zeros(bs.shape, np.int32))]
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], axis=0))
        conv_in.append("bd")
    nodes.append(helper.make_node("Conv", conv_in, ["c"], **conv_attrs))
    last = "c"
    if act == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["a"]))
        last = "a"
    elif act in ("clip", "relu6"):
        inits += [const("lo", np.float32(0)), const("hi", np.float32(6))]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["a"]))
        last = "a"
    nodes.append(helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    return inits, nodes


def conv_model(case, rng, y_scale=None):
    xt, xz, per_ch, with_b, act, yt, yz, C, M, G, S, P, H, W = case
    xs = np.float32(0.05)
    wq = rng.integers(-127, 128, size=(M, C // G, 3 if P[0] or P[1] else 1,
                                       3 if P[0] or P[1] else 1)).astype(np.int8)
    ws = (rng.uniform(0.002, 0.02, M) if per_ch else rng.uniform(0.002, 0.02, 1)).astype(np.float32)
    bq = rng.integers(-5000, 5000, M).astype(np.int32)
    ys = np.float32(y_scale if y_scale else 0.2)
    wsd = ws if per_ch else ws.reshape(())
    bs = (xs * ws).astype(np.float32)
    inits, nodes = qdq_conv_graph(xs, np.array(xz, xt), wq, wsd,
                                  np.zeros(M if per_ch else (), np.int8), ys, np.array(yz, yt),
                                  (bq, bs if per_ch else bs.reshape(())) if with_b else None, act,
                                  group=G, strides=[S, S], pads=list(P),
                                  kernel_shape=list(wq.shape[2:]))
    x = rng.normal(0, 2.5, size=(2, C, H, W)).astype(np.float32)
    m = model(nodes, {"x": x}, ["y"], inits)
    # reference: ONNX's formulas with an exact integer accumulation
    xq = quantize(x, xs, xz, xt).astype(np.int64) - xz
    pads = (P[0], P[1], P[2], P[3])
    acc = conv_int(xq, wq, S, pads, G)
    if with_b:
        acc = acc + bq.reshape(1, M, 1, 1)
    mult = (xs * ws / ys).astype(np.float32).reshape(1, -1, 1, 1)
    lo = yz if act in ("relu", "clip") else None
    ref = requant(acc, mult, yz, yt, lo)
    if act == "clip":
        ref = np.minimum(ref, quantize(np.float32(6), ys, yz, yt))
    return m, x, ref


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_qconv_matches_integer_reference(case, tmp_path):
    rng = np.random.default_rng(16 + case)
    m, x, ref = conv_model(CONV_CASES[case], rng)
    (y,) = run(m, {"x": x}, dump=tmp_path)
    assert "QConv" in fused_ops(tmp_path)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    np.testing.assert_array_equal(y, ref)
    # the unfused float path rounds its sums differently: within one step
    (u,) = run(m, {"x": x}, level=1)
    assert np.abs(u.astype(np.int32) - y.astype(np.int32)).max() <= 1


def test_qconv_saturates():
    rng = np.random.default_rng(3)
    m, x, ref = conv_model(CONV_CASES[1], rng, y_scale=0.002)
    (y,) = run(m, {"x": x})
    np.testing.assert_array_equal(y, ref)
    assert (y == 127).any() and (y == -128).any()


def gemm_model(rng, xt, xz, trans, rows=3, K=37, N=11):
    x = rng.normal(0, 1, size=(rows, K)).astype(np.float32)
    xs, ys, yz = np.float32(0.03), np.float32(0.05), np.uint8(100)
    wq = rng.integers(-127, 128, size=(N, K) if trans else (K, N)).astype(np.int8)
    ws = rng.uniform(0.005, 0.02, N).astype(np.float32)
    bq = rng.integers(-3000, 3000, N).astype(np.int32)
    inits = [const("xs", xs), const("xz", np.array(xz, xt)), const("wq", wq), const("ws", ws),
             const("wz", np.zeros(N, np.int8)), const("ys", ys), const("yz", yz),
             const("bq", bq), const("bs", (xs * ws).astype(np.float32)),
             const("bz", np.zeros(N, np.int32))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0 if trans else 1),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], axis=0)]
    if trans:
        nodes.append(helper.make_node("Gemm", ["xd", "wd", "bd"], ["g"], transB=1))
    else:
        nodes += [helper.make_node("MatMul", ["xd", "wd"], ["g0"]),
                  helper.make_node("Add", ["g0", "bd"], ["g"])]
    nodes.append(helper.make_node("QuantizeLinear", ["g", "ys", "yz"], ["y"]))
    m = model(nodes, {"x": x}, ["y"], inits)
    xq = quantize(x, xs, xz, xt).astype(np.int64) - xz
    w = (wq.T if trans else wq).astype(np.int64)
    acc = xq @ w + bq
    ref = requant(acc, (xs * ws / ys).astype(np.float32), yz, np.uint8)
    return m, x, ref


@pytest.mark.parametrize("xt,xz", [(np.uint8, 131), (np.int8, 0)])
def test_qgemm_matches_integer_reference(xt, xz, tmp_path):
    m, x, ref = gemm_model(np.random.default_rng(5), xt, xz, True)
    (y,) = run(m, {"x": x}, dump=tmp_path)
    assert "QMatMul" in fused_ops(tmp_path)
    np.testing.assert_array_equal(y, ref)


def test_qmatmul_with_bias_add(tmp_path):
    # torch's Linear: MatMul, then an Add of the dequantized int32 bias
    m, x, ref = gemm_model(np.random.default_rng(6), np.uint8, 128, False)
    (y,) = run(m, {"x": x}, dump=tmp_path)
    assert "QMatMul" in fused_ops(tmp_path)
    np.testing.assert_array_equal(y, ref)


def binary_model(op, at, az, bt, bz, yt, yz, relu, shape_b=None):
    rng = np.random.default_rng(7)
    a = rng.normal(0, 2, size=(2, 3, 5, 7)).astype(np.float32)
    b = rng.normal(0, 2, size=shape_b or a.shape).astype(np.float32)
    inits = [const("as", np.float32(0.04)), const("az", np.array(az, at)),
             const("bs", np.float32(0.03)), const("bz", np.array(bz, bt)),
             const("ys", np.float32(0.06 if op == "Add" else 0.1)), const("yz", np.array(yz, yt))]
    nodes = [helper.make_node("QuantizeLinear", ["a", "as", "az"], ["aq"]),
             helper.make_node("DequantizeLinear", ["aq", "as", "az"], ["ad"]),
             helper.make_node("QuantizeLinear", ["b", "bs", "bz"], ["bq"]),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"]),
             helper.make_node(op, ["ad", "bd"], ["s"])]
    last = "s"
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["r"]))
        last = "r"
    nodes.append(helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    return model(nodes, {"a": a, "b": b}, ["y"], inits), {"a": a, "b": b}


@pytest.mark.parametrize("op,at,az,bt,bz,yt,yz,relu", [
    ("Add", np.uint8, 120, np.uint8, 3, np.uint8, 128, True),
    ("Add", np.int8, -5, np.uint8, 200, np.int8, 0, False),
    ("Mul", np.int8, 0, np.int8, 9, np.uint8, 17, False),
])
def test_qadd_qmul_bit_equal_to_unfused(op, at, az, bt, bz, yt, yz, relu, tmp_path):
    m, inputs = binary_model(op, at, az, bt, bz, yt, yz, relu)
    (y,) = run(m, inputs, dump=tmp_path)
    assert ("QAdd" if op == "Add" else "QMul") in fused_ops(tmp_path)
    (u,) = run(m, inputs, level=1)
    np.testing.assert_array_equal(y, u)


def unary_pool_model(kind, channels=6):
    rng = np.random.default_rng(11)
    x = rng.normal(0, 3, size=(1, channels, 9, 11)).astype(np.float32)
    xs, xz, ys, yz = np.float32(0.05), np.uint8(110), np.float32(0.03), np.uint8(20)
    inits = [const("xs", xs), const("xz", xz), const("ys", ys if kind != "MaxPool" else xs),
             const("yz", yz if kind != "MaxPool" else xz)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    if kind == "MaxPool":
        nodes.append(helper.make_node("MaxPool", ["xd"], ["f"], kernel_shape=[3, 3],
                                      strides=[2, 2], pads=[1, 1, 1, 1]))
    elif kind == "AveragePool":
        nodes.append(helper.make_node("AveragePool", ["xd"], ["f"], kernel_shape=[2, 3],
                                      strides=[2, 2], pads=[0, 1, 0, 1]))
    elif kind == "AveragePoolCountPad":
        # padded taps count as real zeros: the zero point must be taken off
        # the real taps only (x's zero point is 110)
        nodes.append(helper.make_node("AveragePool", ["xd"], ["f"], kernel_shape=[3, 3],
                                      strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1))
    else:
        nodes.append(helper.make_node(kind, ["xd"], ["f"]))
    nodes.append(helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["y"]))
    return model(nodes, {"x": x}, ["y"], inits), {"x": x}


@pytest.mark.parametrize("kind,exact", [("MaxPool", True), ("Sigmoid", True),
                                        ("HardSigmoid", True), ("GlobalAveragePool", False),
                                        ("AveragePool", False), ("AveragePoolCountPad", False)])
@pytest.mark.parametrize("level", [2, 3])
@pytest.mark.parametrize("channels", [6, 37])
def test_pool_and_unary_against_unfused(kind, exact, level, channels, tmp_path):
    # level 2 keeps NCHW: QPool's NCHW loop once took GlobalAveragePool's max;
    # 37 channels run the NHWC loops' 16-lane bodies and their tails
    m, inputs = unary_pool_model(kind, channels)
    (y,) = run(m, inputs, level=level, dump=tmp_path)
    assert ("QLookup" if kind in ("Sigmoid", "HardSigmoid") else "QPool") in fused_ops(tmp_path)
    (u,) = run(m, inputs, level=1)
    if exact:
        np.testing.assert_array_equal(y, u)
    else:
        assert np.abs(y.astype(np.int32) - u.astype(np.int32)).max() <= 1


def test_tiny_qdq_cnn_end_to_end(tmp_path):
    """PyTorch FX's QDQ export of a small CNN (conv, grouped conv, residual add,
    max pool, global pool, linear): fused at the default level, int8 kernels
    throughout, and the same classes as the unfused model within a few steps."""
    out = str(tmp_path)
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_quant_models.py"),
                    "--out", out, "tiny_cnn"], check=True, capture_output=True)
    path = os.path.join(out, "tiny_cnn_int8.onnx")
    x = np.load(os.path.join(out, "tiny_cnn.npz"))["input"]
    dump = tmp_path / "dump"
    dump.mkdir()
    (y,) = run(path, {"input": x}, dump=dump)
    text = fused_ops(dump)
    assert text.count("QConv") >= 3 and "QAdd" in text and "QPool" in text
    assert "QMatMul" in text
    (u,) = run(path, {"input": x}, level=1)
    step = float(np.abs(np.diff(np.unique(u))).min())
    assert np.abs(y - u).max() <= 4 * step + 1e-6


def chain_model(kind, rng):
    """DQ -> an elementwise float graph as torch exports it -> Q -> DQ."""
    x = rng.normal(0, 2, size=(2, 5, 7, 3)).astype(np.float32)
    xs, xz, ys, yz = np.float32(0.04), np.uint8(120), np.float32(0.02), np.uint8(30)
    inits = [const("xs", xs), const("xz", xz), const("ys", ys), const("yz", yz),
             const("c_sqrt2", np.float32(1.4142135)), const("c_one", np.float32(1.0)),
             const("c_half", np.float32(0.5)), const("c_vec", np.arange(3, dtype=np.float32))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    if kind == "gelu":  # x * (erf(x / sqrt 2) + 1) * 0.5: the DQ read twice
        nodes += [helper.make_node("Div", ["xd", "c_sqrt2"], ["a"]),
                  helper.make_node("Erf", ["a"], ["b"]),
                  helper.make_node("Add", ["b", "c_one"], ["c"]),
                  helper.make_node("Mul", ["xd", "c"], ["d"]),
                  helper.make_node("Mul", ["d", "c_half"], ["f"])]
    elif kind == "silu":
        nodes += [helper.make_node("Sigmoid", ["xd"], ["a"]),
                  helper.make_node("Mul", ["xd", "a"], ["f"])]
    else:  # a per-channel operand: not a function of x's 256 values alone
        nodes += [helper.make_node("Add", ["xd", "c_vec"], ["a"]),
                  helper.make_node("Mul", ["a", "c_half"], ["f"])]
    nodes += [helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["q"]),
              helper.make_node("DequantizeLinear", ["q", "ys", "yz"], ["y"])]
    return model(nodes, {"x": x}, ["y"], inits), {"x": x}


@pytest.mark.parametrize("kind", ["gelu", "silu", "vector"])
@pytest.mark.parametrize("level", [2, 3])
def test_elementwise_chain_tabulated(kind, level, tmp_path):
    """A chain of float ops between DQ and Q becomes one QLookup (each op's own
    kernel run on the 256 values), the last DQ a float32 QLookup table: the
    same bits as the unfused run."""
    m, inputs = chain_model(kind, np.random.default_rng(21))
    (y,) = run(m, inputs, level=level, dump=tmp_path)
    graph = fused_ops(tmp_path)
    assert "DequantizeLinear" not in graph
    if kind == "vector":
        assert graph.count("QLookup(") == 2 and "QuantizeLinear(" in graph
    else:
        assert graph.count("QLookup(") == 2 and "Erf" not in graph and "Sigmoid" not in graph
    (u,) = run(m, inputs, level=1)
    assert len(np.unique(u)) > 20
    np.testing.assert_array_equal(y, u)


@pytest.mark.parametrize("dt,zp", [(np.uint8, 128), (np.uint8, 0), (np.int8, -3), (np.int8, 0)])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 33, 1000])
def test_quantize_linear_per_tensor_edges_match_reference(dt, zp, n):
    """QuantizeLinear per tensor (its AVX-512 loop and the scalar tail): ties
    round half to even, NaN becomes 0 (as cge's scalar loop has it), infinities
    and large values saturate, at lengths around the 16-lane width."""
    rng = np.random.default_rng(1000 * n + zp + 200)
    s = np.float32(0.05)
    x = (rng.standard_normal(n) * 8).astype(np.float32)
    edges = np.array([0.025, -0.025, 0.075, -0.125, 0.0, -0.0, np.nan, np.inf, -np.inf,
                      1e30, -1e30, 6.4, -6.4, 12.775], np.float32)
    x[:min(n, len(edges))] = edges[:min(n, len(edges))]
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], {"x": x}, ["y"],
              [const("s", np.array(s)), const("z", np.array(zp, dt))])
    (y,) = run(m, {"x": x})
    q = np.rint(x / s) + np.float32(zp)
    q = np.where(np.isnan(q), np.float32(0), q)
    np.testing.assert_array_equal(y, saturate(q, dt))
