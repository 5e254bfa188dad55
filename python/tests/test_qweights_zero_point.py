# Weights oneDNN cannot take as they are — uint8, or int8 with zero points
# other than 0 — on QConv / QMatMul's oneDNN path (dnnl_qconv.c): shifted into
# int8 where every w - w_zero_point fits, else shifted by 128 (uint8) with an
# all-ones output channel per group for the compensation and cge's own
# requantisation. Each against a NumPy reference of the ONNX formulas and the
# reference loops (opt_level 1), bit for bit, at odd sizes, groups, strides
# and pads, NCHW (level 2) and NHWC (level 3).
import numpy as np
import pytest

from onnx import helper

from test_quant_int8 import const, conv_int, fused_ops, model, quantize, requant, run

# w dtype, zero points ("zero", "128", "small": fits s8 after the shift,
# "wide": does not), per channel, x dtype, x zp, C, M, group, stride, pads, H, W
CONV_CASES = [
    (np.uint8, "zero", True, np.uint8, 131, 3, 5, 1, 2, (1, 0, 1, 1), 13, 11),
    (np.uint8, "128", False, np.uint8, 7, 4, 6, 1, 1, (1, 1, 1, 1), 7, 9),
    (np.uint8, "wide", True, np.uint8, 131, 4, 6, 2, 1, (0, 1, 1, 0), 9, 7),
    (np.int8, "small", True, np.uint8, 0, 5, 7, 1, 2, (1, 1, 1, 1), 11, 10),
    (np.int8, "wide", True, np.int8, -3, 8, 8, 8, 1, (1, 1, 1, 1), 6, 5),
    (np.uint8, "wide", False, np.uint8, 128, 16, 24, 1, 1, (0, 0, 0, 0), 3, 4),
    # depthwise at channel counts past one vector and with tails, strides,
    # uneven pads, s8 activations
    (np.int8, "zero", True, np.uint8, 131, 48, 48, 48, 2, (1, 1, 1, 1), 15, 13),
    (np.int8, "small", False, np.int8, -3, 37, 37, 37, 1, (1, 1, 1, 1), 9, 8),
    (np.uint8, "128", True, np.uint8, 0, 21, 21, 21, 2, (0, 1, 1, 0), 6, 7),
]


def weights(rng, wt, kind, per_ch, shape, channels, axis):
    """Quantized weights and their zero points (one, or one per channel along axis)."""
    n = channels if per_ch else 1
    if kind == "zero":
        z = np.zeros(n, np.int64)
    elif kind == "128":
        z = np.full(n, 128, np.int64)
    elif wt == np.uint8:
        z = rng.integers(90, 170, n)
    else:
        z = rng.integers(-3, 4, n)
        z[0] = 2  # at least one nonzero
    zb = z.reshape([-1 if i == axis else 1 for i in range(len(shape))])
    if kind in ("zero", "wide"):
        info = np.iinfo(wt)
        w = rng.integers(info.min, info.max + 1, shape)
        # the extremes, where a shift by the zero point leaves int8
        w.flat[0], w.flat[-1] = info.min, info.max
    else:  # within 100 of the zero point: w - z fits int8
        w = zb + rng.integers(-100, 101, shape)
    w = w.astype(wt)
    return w, (z.astype(wt) if per_ch else z.astype(wt).reshape(())), zb


def qlinearconv_model(case, rng):
    wt, kind, per_ch, xt, xz, C, M, G, S, P, H, W = case
    k = 3 if any(P) else 1
    w, wz, zb = weights(rng, wt, kind, per_ch, (M, C // G, k, k), M, 0)
    xs, ys, yz = np.float32(0.04), np.float32(0.3), np.uint8(119)
    ws = rng.uniform(0.004, 0.02, M if per_ch else 1).astype(np.float32)
    b = rng.integers(-3000, 3000, M).astype(np.int32)
    inits = [const("xs", xs), const("xz", np.array(xz, xt)), const("w", w),
             const("ws", ws if per_ch else ws.reshape(())), const("wz", wz), const("ys", ys),
             const("yz", yz), const("b", b)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                              ["y"], group=G, strides=[S, S], pads=list(P), kernel_shape=[k, k])]
    x = rng.normal(0, 3, size=(2, C, H, W)).astype(np.float32)
    m = model(nodes, {"x": x}, ["y"], inits)
    xq = quantize(x, xs, xz, xt).astype(np.int64) - xz
    acc = conv_int(xq, w.astype(np.int64) - zb, S, P, G) + b.reshape(1, M, 1, 1)
    ref = requant(acc, (xs * ws / ys).astype(np.float32).reshape(1, -1, 1, 1), yz, np.uint8)
    return m, x, ref


@pytest.mark.parametrize("level", [2, 3])
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_qlinearconv_weight_zero_points_on_fast_path(case, level, tmp_path):
    rng = np.random.default_rng(40 + case)
    m, x, ref = qlinearconv_model(CONV_CASES[case], rng)
    assert len(np.unique(ref)) > 20  # not saturated into meaninglessness
    (y,) = run(m, {"x": x}, level=level, dump=tmp_path)
    graph = fused_ops(tmp_path)
    assert "QConv" in graph and "QLinearConv" not in graph
    np.testing.assert_array_equal(y, ref)
    (loops,) = run(m, {"x": x}, level=1)
    np.testing.assert_array_equal(loops, ref)


def qlinearmatmul_model(rng, wt, kind, R, K, N):
    """x (float) -> Q (u8, zp 131) -> QLinearMatMul with B [K, N] of dtype wt and
    per-column zero points of `kind`; the NumPy reference of the result."""
    b, bz, zb = weights(rng, wt, kind, True, (K, N), N, 1)
    xs, xz, ys, yz = np.float32(0.03), np.uint8(131), np.float32(0.2), np.uint8(101)
    bs = rng.uniform(0.002, 0.01, N).astype(np.float32)
    inits = [const("xs", xs), const("xz", xz), const("b", b), const("bs", bs), const("bz", bz),
             const("ys", ys), const("yz", yz)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("QLinearMatMul", ["xq", "xs", "xz", "b", "bs", "bz", "ys", "yz"],
                              ["y"])]
    x = rng.normal(0, 2, size=(R, K)).astype(np.float32)
    m = model(nodes, {"x": x}, ["y"], inits)
    acc = (quantize(x, xs, xz, np.uint8).astype(np.int64) - xz) @ (b.astype(np.int64) - zb)
    return m, x, requant(acc, (xs * bs / ys).astype(np.float32), yz, np.uint8)


@pytest.mark.parametrize("wt,kind", [(np.uint8, "wide"), (np.uint8, "128"), (np.int8, "small"),
                                     (np.int8, "wide")])
def test_qlinearmatmul_weight_zero_points_on_fast_path(wt, kind, tmp_path):
    m, x, ref = qlinearmatmul_model(np.random.default_rng(7), wt, kind, 5, 37, 11)
    assert len(np.unique(ref)) > 20
    (y,) = run(m, {"x": x}, dump=tmp_path)
    graph = fused_ops(tmp_path)
    assert "QMatMul" in graph and "QLinearMatMul" not in graph
    np.testing.assert_array_equal(y, ref)
    (loops,) = run(m, {"x": x}, level=1)
    np.testing.assert_array_equal(loops, ref)


def test_qdq_conv_with_uint8_weights(tmp_path):
    """The QDQ form: DequantizeLinear of uint8 weights with a zero point
    (ONNX Runtime's quantizer with weight_type QUInt8) feeding a Conv."""
    rng = np.random.default_rng(11)
    C, M, H, W = 6, 10, 9, 8
    w, wz, zb = weights(rng, np.uint8, "wide", True, (M, C, 3, 3), M, 0)
    xs, xz, ys, yz = np.float32(0.05), np.uint8(128), np.float32(0.25), np.uint8(3)
    ws = rng.uniform(0.003, 0.01, M).astype(np.float32)
    inits = [const("xs", xs), const("xz", xz), const("w", w), const("ws", ws), const("wz", wz),
             const("ys", ys), const("yz", yz)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["y"])]
    x = rng.normal(0, 2, size=(1, C, H, W)).astype(np.float32)
    m = model(nodes, {"x": x}, ["y"], inits)
    xq = quantize(x, xs, xz, np.uint8).astype(np.int64) - xz
    acc = conv_int(xq, w.astype(np.int64) - zb, 1, (1, 1, 1, 1), 1)
    ref = requant(acc, (xs * ws / ys).astype(np.float32).reshape(1, -1, 1, 1), yz, np.uint8, lo=yz)
    for level in (2, 3):
        (y,) = run(m, {"x": x}, level=level, dump=tmp_path)
        assert "QConv" in fused_ops(tmp_path)
        np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("wt,kind", [(np.int8, "zero"), (np.uint8, "wide")])
@pytest.mark.parametrize("threads", [1, 3])
def test_qlinearmatmul_row_slices(wt, kind, threads):
    """Enough rows (48 = 3 x 16) to cut the product into one slice per
    thread, each a one-thread oneDNN run: the same bits as one run, with
    and without the compensation channel."""
    import cge

    m, x, ref = qlinearmatmul_model(np.random.default_rng(9), wt, kind, 48, 53, 19)
    (y,) = cge.InferenceSession(m, num_threads=threads).run(None, {"x": x})
    np.testing.assert_array_equal(y, ref)
