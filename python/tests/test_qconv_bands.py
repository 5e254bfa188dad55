# The int8 convolution's one-thread bands and the zero-point rewrites
# (src/ops/dnnl_qconv.c, src/compiler/pass_fuse_qdq.c): a channels-last QConv
# of one image is cut into bands of output rows, one oneDNN primitive per
# thread of cge's pool; x's zero point is folded into the bias where no
# padding reads it; the output zero point is a round-then-add post-op; a
# ReLU-clamped output is rewritten to zero point 0. Each against a NumPy
# implementation of the ONNX formulas, bit for bit, at 1 to 5 threads.
import numpy as np
import pytest

import cge
from onnx import helper

from test_quant_int8 import const, conv_int, fused_ops, gemm_model, model, qdq_conv_graph, quantize
from test_quant_int8 import saturate
from test_quant_int8 import run as run_inputs


def conv_ref(xq, w, stride, dil, pads, group):
    return conv_int(xq, w, stride, pads, group, dil)


def requant(acc, mult, zp, dt, lo=None, hi=None):
    """rint(float32(acc) * multiplier), then the zero point, clamped, saturated."""
    v = np.rint(acc.astype(np.float32) * mult) + np.float32(zp)
    if lo is not None:
        v = np.maximum(v, lo)
    if hi is not None:
        v = np.minimum(v, hi)
    return saturate(v, dt)


# x dtype, x zp, w dtype, w zp ("zero", "128", "wide"), per-channel, bias, C, M, group,
# kernel, stride, dilation, pads (t, l, b, r), H, W, act, y dtype, y zp
CASES = {
    "3x3_pad1_odd_zp": (np.uint8, 131, np.int8, "zero", True, True, 5, 7, 1, 3, 1, 1,
                        (1, 1, 1, 1), 13, 11, None, np.uint8, 7),
    "stride2_uneven_pads": (np.uint8, 0, np.int8, "zero", True, False, 3, 6, 1, 3, 2, 1,
                            (0, 1, 1, 0), 9, 7, "relu", np.int8, -5),
    "dilation2": (np.int8, -3, np.int8, "zero", False, True, 4, 5, 1, 3, 1, 2,
                  (2, 2, 2, 2), 10, 6, None, np.uint8, 99),
    "rows_of_padding_only": (np.uint8, 40, np.int8, "zero", True, True, 3, 4, 1, 1, 1, 1,
                             (2, 0, 2, 1), 4, 5, None, np.uint8, 11),
    "1x1_folded_x_zp_no_bias": (np.uint8, 77, np.int8, "zero", False, False, 24, 40, 1, 1, 1, 1,
                                (0, 0, 0, 0), 7, 7, None, np.uint8, 100),
    "1x1_folded_u8_weights_zp128": (np.uint8, 77, np.uint8, "128", True, True, 16, 9, 1, 1, 1,
                                    1, (0, 0, 0, 0), 6, 5, None, np.uint8, 3),
    "3x3_valid_folded": (np.int8, 9, np.int8, "zero", True, True, 6, 8, 1, 3, 1, 1,
                         (0, 0, 0, 0), 9, 8, "relu", np.uint8, 0),
    "u8_weights_wide_zp_compensated": (np.uint8, 131, np.uint8, "wide", True, True, 4, 6, 1, 3,
                                       1, 1, (1, 1, 1, 1), 11, 7, None, np.uint8, 128),
    "depthwise_21": (np.uint8, 0, np.int8, "zero", True, True, 21, 21, 21, 3, 1, 1,
                     (1, 1, 1, 1), 12, 9, "relu6", np.uint8, 60),
    # weights (>= 64 KB) outweigh x: cut by output channels from multiples of
    # 64, odd channel counts in the last slice (dnnl_qconv.c plan_channels)
    "chan_3x3_pad1_odd_zp": (np.uint8, 131, np.int8, "zero", True, True, 40, 260, 1, 3, 1, 1,
                             (1, 1, 1, 1), 7, 5, None, np.uint8, 7),
    "chan_1x1_folded_x_zp_per_tensor": (np.uint8, 77, np.int8, "zero", False, False, 300, 230, 1,
                                        1, 1, 1, (0, 0, 0, 0), 3, 5, "relu", np.uint8, 100),
    "chan_u8_weights_zp128_stride2": (np.uint8, 5, np.uint8, "128", True, True, 72, 131, 1, 3,
                                      2, 1, (1, 0, 1, 1), 9, 7, None, np.int8, -3),
    "chan_3x3_valid_folded_relu6": (np.int8, 9, np.int8, "zero", True, True, 64, 261, 1, 3, 1,
                                    1, (0, 0, 0, 0), 4, 6, "relu6", np.uint8, 0),
}


def conv_case(case, rng, N=1):
    (xt, xz, wt, wzk, per_ch, with_b, C, M, G, K, S, D, P, H, W, act, yt, yz) = case
    xs = np.float32(0.05)
    if wt == np.int8:
        wq = rng.integers(-127, 128, size=(M, C // G, K, K)).astype(np.int8)
        wz = np.zeros(M if per_ch else (), np.int8)
    else:
        wq = rng.integers(0, 256, size=(M, C // G, K, K)).astype(np.uint8)
        if wzk == "128":
            wq = rng.integers(1, 256, size=(M, C // G, K, K)).astype(np.uint8)
            wz = np.full(M if per_ch else (), 128, np.uint8)
        else:
            wz = (rng.integers(0, 256, M) if per_ch else np.array(201)).astype(np.uint8)
    ws = (rng.uniform(0.002, 0.02, M) if per_ch else rng.uniform(0.002, 0.02, 1)).astype(np.float32)
    wsd = ws if per_ch else ws.reshape(())
    ys = np.float32(0.2)
    bq = rng.integers(-5000, 5000, M).astype(np.int32)
    bs = (xs * ws).astype(np.float32)
    inits, nodes = qdq_conv_graph(xs, np.array(xz, xt), wq, wsd, wz, ys, np.array(yz, yt),
                                  (bq, bs if per_ch else bs.reshape(())) if with_b else None, act,
                                  group=G, strides=[S, S], dilations=[D, D], pads=list(P),
                                  kernel_shape=[K, K])
    x = rng.normal(0, 2.5, size=(N, C, H, W)).astype(np.float32)
    m = model(nodes, {"x": x}, ["y"], inits)
    xq = quantize(x, xs, xz, xt).astype(np.int64) - xz
    wzb = wz.astype(np.int64).reshape(-1, 1, 1, 1) if per_ch else np.int64(wz)
    acc = conv_ref(xq, wq.astype(np.int64) - wzb, S, D, P, G)
    if with_b:
        acc = acc + bq.reshape(1, M, 1, 1)
    mult = (xs * ws / ys).astype(np.float32).reshape(1, -1, 1, 1)
    lo = hi = None
    if act in ("relu", "relu6"):
        lo = yz
    if act == "relu6":
        hi = quantize(np.float32(6), ys, yz, yt)
    return m, x, requant(acc, mult, yz, yt, lo, hi)


def run(m, x, level, threads, dump=None):
    return run_inputs(m, {"x": x}, level=level, dump=dump, threads=threads)


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("name", sorted(CASES))
def test_banded_qconv_bit_equal_to_reference(name, threads, tmp_path, monkeypatch):
    if name.startswith("chan_"):   # channel slices are opt-in for convolutions
        monkeypatch.setenv("CGE_QCONV_CHANNEL_SLICES", "1")
    rng = np.random.default_rng(sum(map(ord, name)))
    m, x, ref = conv_case(CASES[name], rng)
    (y,) = run(m, x, 3, threads, dump=tmp_path)
    assert "QConv" in fused_ops(tmp_path)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("name", ["3x3_pad1_odd_zp", "1x1_folded_x_zp_no_bias", "depthwise_21"])
def test_batch_and_nchw_unchanged(name):
    """two images (not cut into bands) and NCHW (level 2) give the same bits."""
    rng = np.random.default_rng(5)
    m, x, ref = conv_case(CASES[name], rng, N=2)
    for level in (2, 3):
        (y,) = run(m, x, level, 2)
        np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("level", [2, 3])
@pytest.mark.parametrize("yz", [7, 8, 255])
def test_ties_round_before_the_zero_point(level, yz):
    """multiplier 0.5 and odd sums: every other output a tie, where rint(a) + z
    (the formula) and rint(a + z) differ for odd z."""
    rng = np.random.default_rng(yz)
    C, M, H, W = 8, 6, 5, 7
    xq = rng.integers(0, 256, (1, C, H, W)).astype(np.uint8)
    wq = rng.integers(-20, 21, (M, C, 1, 1)).astype(np.int8)
    inits = [const("xs", np.float32(0.25)), const("xz", np.uint8(128)), const("wq", wq),
             const("ws", np.float32(0.5)), const("wz", np.int8(0)), const("ys", np.float32(0.25)),
             const("yz", np.uint8(yz))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["c"], kernel_shape=[1, 1]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    m = model(nodes, {"x": xq}, ["y"], inits)
    acc = conv_ref(xq.astype(np.int64) - 128, wq, 1, 1, (0, 0, 0, 0), 1)
    assert (acc % 2 == 1).any()
    ref = saturate(np.rint(acc * 0.5) + yz, np.uint8)
    s = cge.InferenceSession(m, opt_level=level, num_threads=2)
    (y,) = s.run(None, {"x": xq})
    np.testing.assert_array_equal(y, ref)


def mobilenet_block(rng, out_dtype=np.uint8, z1=60, pool=False):
    """x -> Q (zp 100) -> 1x1 conv -> Q (zp z1) -> DQ -> Clip(0, 6) -> Q (zp z1)
    -> depthwise 3x3 -> Q (zp 50) -> [DQ -> Clip(0, 6) -> Q ->] 1x1 conv -> Q
    (zp 90): torch FX's mobilenet_v2, quantized before each ReLU6."""
    C, E, M, H, W = 6, 18, 5, 9, 8
    s1, s2, s3 = np.float32(0.031), np.float32(0.027), np.float32(0.05)
    w1 = rng.integers(-127, 128, (E, C, 1, 1)).astype(np.int8)
    w2 = rng.integers(-127, 128, (E, 1, 3, 3)).astype(np.int8)
    w3 = rng.integers(-127, 128, (M, E, 1, 1)).astype(np.int8)
    k1, k2, k3 = (rng.uniform(0.002, 0.01, n).astype(np.float32) for n in (E, E, M))
    xs, xz = np.float32(0.04), 100
    inits = [const("xs", xs), const("xz", np.uint8(xz)), const("s1", s1),
             const("z1", np.array(z1, out_dtype)), const("s2", s2), const("z2", np.uint8(50)),
             const("s3", s3), const("z3", np.uint8(90)), const("lo", np.float32(0)),
             const("hi", np.float32(6))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    for i, (w, k) in enumerate(((w1, k1), (w2, k2), (w3, k3))):
        inits += [const(f"w{i}", w), const(f"k{i}", k), const(f"wz{i}", np.zeros(len(k), np.int8))]
        nodes.append(helper.make_node("DequantizeLinear", [f"w{i}", f"k{i}", f"wz{i}"], [f"wd{i}"],
                                      axis=0))
    nodes += [
        helper.make_node("Conv", ["xd", "wd0"], ["c1"], kernel_shape=[1, 1]),
        helper.make_node("QuantizeLinear", ["c1", "s1", "z1"], ["q1"]),
        helper.make_node("DequantizeLinear", ["q1", "s1", "z1"], ["d1"]),
        helper.make_node("Clip", ["d1", "lo", "hi"], ["r1"]),
        helper.make_node("QuantizeLinear", ["r1", "s1", "z1"], ["q1r"]),
        helper.make_node("DequantizeLinear", ["q1r", "s1", "z1"], ["d1r"]),
        helper.make_node("Conv", ["d1r", "wd1"], ["c2"], kernel_shape=[3, 3], group=E,
                         pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["c2", "s2", "z2"], ["q2"]),
        helper.make_node("DequantizeLinear", ["q2", "s2", "z2"], ["d2"]),
    ]
    if pool:
        nodes += [helper.make_node("MaxPool", ["d2"], ["p2"], kernel_shape=[1, 1]),
                  helper.make_node("QuantizeLinear", ["p2", "s2", "z2"], ["q2p"]),
                  helper.make_node("DequantizeLinear", ["q2p", "s2", "z2"], ["d2p"])]
    nodes += [
        helper.make_node("Conv", ["d2p" if pool else "d2", "wd2"], ["c3"], kernel_shape=[1, 1]),
        helper.make_node("QuantizeLinear", ["c3", "s3", "z3"], ["y"]),
    ]
    x = rng.normal(0, 2.0, (1, C, H, W)).astype(np.float32)
    m = model(nodes, {"x": x}, ["y"], inits)
    # reference
    xq = quantize(x, xs, xz, np.uint8).astype(np.int64) - xz
    a1 = conv_ref(xq, w1, 1, 1, (0, 0, 0, 0), 1)
    q1 = requant(a1, (xs * k1 / s1).reshape(1, -1, 1, 1), z1, out_dtype)
    q1 = np.clip(q1.astype(np.int64), z1, quantize(np.float32(6), s1, z1, out_dtype))
    a2 = conv_ref(q1 - z1, w2, 1, 1, (1, 1, 1, 1), E)
    q2 = requant(a2, (s1 * k2 / s2).reshape(1, -1, 1, 1), 50, np.uint8).astype(np.int64)
    a3 = conv_ref(q2 - 50, w3, 1, 1, (0, 0, 0, 0), 1)
    ref = requant(a3, (s2 * k3 / s3).reshape(1, -1, 1, 1), 90, np.uint8)
    return m, x, ref


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("level", [2, 3])
@pytest.mark.parametrize("variant", ["u8", "s8_out", "pool_reader", "zp0"])
def test_relu_clamped_outputs_rezeroed_bit_equal(variant, level, threads, tmp_path):
    rng = np.random.default_rng(len(variant) + 10 * level)
    kw = {"u8": {}, "s8_out": {"out_dtype": np.int8, "z1": -20},
          "pool_reader": {"pool": True}, "zp0": {"z1": 0}}[variant]
    m, x, ref = mobilenet_block(rng, **kw)
    (y,) = run(m, x, level, threads, dump=tmp_path)
    g = fused_ops(tmp_path)
    assert g.count("QConv") >= 3
    np.testing.assert_array_equal(y, ref)


def test_rezero_rewrites_only_what_it_may(tmp_path):
    """the expand conv's clamped output gets zero point 0 (a new constant);
    the depthwise conv's unclamped one keeps 50."""
    import glob
    import os
    rng = np.random.default_rng(1)
    m, x, ref = mobilenet_block(rng)
    (y,) = run(m, x, 3, 2, dump=tmp_path)
    np.testing.assert_array_equal(y, ref)
    before = sorted(glob.glob(os.path.join(str(tmp_path), "*_optimize_*.txt")))
    text = open(before[-1]).read()
    assert text.count("zero_point__cc") >= 2, text  # the expand conv's y and the dw's x


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("rows,K,N,xz,trans", [(1, 300, 1001, 131, True), (1, 2048, 1000, 0, False),
                                             (3, 513, 777, 128, True)])
def test_qmatmul_few_rows_cut_by_columns(rows, K, N, xz, trans, threads, tmp_path):
    rng = np.random.default_rng(K + N)
    # [rows, K] x [K, N]: a classifier's one row is cut by output columns
    m, x, ref = gemm_model(rng, np.uint8, xz, trans, rows, K, N)
    (y,) = run(m, x, 3, threads, dump=tmp_path)
    assert "QMatMul" in fused_ops(tmp_path)
    np.testing.assert_array_equal(y, ref)
