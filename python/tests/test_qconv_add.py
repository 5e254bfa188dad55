# The residual add fused into the int8 convolution before it (partition
# pass fuse_qconv_add, cge.fused QConvAdd in src/ops/quant.c): each block of
# the convolution's rows is added on the thread that wrote them. Against a
# NumPy implementation of the QDQ graph's formulas (QLinearConv's rounding,
# then DequantizeLinear, the float Add, QuantizeLinear), bit for bit, at 1 to
# 5 threads, levels 2 and 3, and against the same model with the pass off.
import numpy as np
import pytest
from onnx import helper

from test_int8_fast_paths import binary_ref, partitioned
from test_qconv_bands import requant
from test_quant_int8 import const, conv_int, model, qdq_conv_graph, quantize, run

# x dtype, x zp, per-channel w, bias, C, M, kernel, stride, pads, H, W, conv act,
# t dtype, t zp, skip ("input": a second input; "x": the conv's own input),
# skip dtype, skip zp, conv is the Add's B, add Relu, y dtype, y zp, y scale
CASES = {
    "3x3_odd_u8": (np.uint8, 131, True, True, 5, 7, 3, 1, (1, 1, 1, 1), 13, 11, None,
                   np.uint8, 7, "input", np.uint8, 100, False, False, np.uint8, 9, 0.3),
    "1x1_per_tensor_s8_b_operand_relu": (np.int8, -3, False, False, 24, 40, 1, 1, (0, 0, 0, 0),
                                         7, 9, None, np.int8, -5, "input", np.int8, 4, True,
                                         True, np.uint8, 0, 0.25),
    "skip_is_conv_input": (np.uint8, 60, True, True, 16, 16, 3, 1, (1, 1, 1, 1), 9, 10, "relu",
                           np.uint8, 0, "x", np.uint8, 60, False, True, np.uint8, 0, 0.2),
    "saturating_s8_out": (np.uint8, 0, True, True, 6, 8, 3, 1, (1, 1, 1, 1), 12, 5, None,
                          np.uint8, 128, "input", np.int8, -20, False, False, np.int8, 3, 0.02),
    "stride2_mixed_types": (np.int8, 9, True, False, 4, 6, 3, 2, (0, 1, 1, 0), 15, 9, "relu6",
                            np.uint8, 60, "input", np.int8, 0, True, False, np.uint8, 128, 0.1),
    # cut by output channels (CGE_QCONV_CHANNEL_SLICES=1): the blocks are
    # not rows, so the add runs after the whole convolution
    "chan_1x1_512_to_256": (np.uint8, 3, True, True, 512, 256, 1, 1, (0, 0, 0, 0), 3, 5, None,
                            np.uint8, 10, "input", np.uint8, 90, False, True, np.uint8, 0, 0.2),
}


def skip_branch(rng, inputs, nodes, inits, M, H, W, ss, sz, st):
    """The addend: input s [1, 5, H, W] through a 1x1 QConv to M channels
    (so that at level 3 it is channels-last, as a residual is), dequantized:
    its DQ's name and its quantized reference."""
    s = rng.normal(0, 3, size=(1, 5, H, W)).astype(np.float32)
    inputs["s"] = s
    qs, qz = np.float32(0.03), np.uint8(128)
    w = rng.integers(-127, 128, size=(M, 5, 1, 1)).astype(np.int8)
    ws = rng.uniform(0.01, 0.05, M).astype(np.float32)
    b = rng.integers(-3000, 3000, M).astype(np.int32)
    inits += [const("qs", qs), const("qz", qz)]
    nodes += [helper.make_node("QuantizeLinear", ["s", "qs", "qz"], ["sq0"]),
              helper.make_node("DequantizeLinear", ["sq0", "qs", "qz"], ["sd0"])]
    n, i, sq = qconv_nodes("s_", "sd0", qs, qz, w, ws, np.zeros(M, np.int8), b, np.float32(ss),
                           np.array(sz, st), None, kernel_shape=[1, 1])
    nodes += n + [helper.make_node("DequantizeLinear", [sq, "s_ys", "s_yz"], ["sd"])]
    inits += i
    ref = conv_requant(quantize(s, qs, qz, np.uint8), qz, w, ws, b, qs, np.float32(ss), sz, st,
                       None, 1, 0, 1)
    return "sd", ref


def case_model(case, rng):
    (xt, xz, per_ch, with_b, C, M, K, S, P, H, W, act, tt, tz, skip, st, sz, conv_b, relu, yt,
     yz, ys) = case
    xs, ts, ss = np.float32(0.05), np.float32(0.2), np.float32(0.17)
    wq = rng.integers(-127, 128, size=(M, C, K, K)).astype(np.int8)
    ws = (rng.uniform(0.002, 0.02, M) if per_ch else rng.uniform(0.002, 0.02, 1)).astype(np.float32)
    wsd = ws if per_ch else ws.reshape(())
    bq = rng.integers(-5000, 5000, M).astype(np.int32)
    bs = (xs * ws).astype(np.float32)
    inits, nodes = qdq_conv_graph(xs, np.array(xz, xt), wq, wsd,
                                  np.zeros(M if per_ch else (), np.int8), ts, np.array(tz, tt),
                                  (bq, bs if per_ch else bs.reshape(())) if with_b else None, act,
                                  strides=[S, S], pads=list(P), kernel_shape=[K, K])
    x = rng.normal(0, 2.5, size=(1, C, H, W)).astype(np.float32)
    inputs = {"x": x}
    nodes.append(helper.make_node("DequantizeLinear", ["y", "ys", "yz"], ["td"]))
    if skip == "x":
        assert S == 1 and C == M, "the conv's own input as the addend needs its shape"
        sd, s_q = "xd", quantize(x, xs, xz, xt)
        ss, sz, st = xs, xz, xt
    else:
        oh = (H + P[0] + P[2] - K) // S + 1
        ow = (W + P[1] + P[3] - K) // S + 1
        sd, s_q = skip_branch(rng, inputs, nodes, inits, M, oh, ow, ss, sz, st)
    nodes.append(helper.make_node("Add", [sd, "td"] if conv_b else ["td", sd], ["sum"]))
    last = "sum"
    if relu:
        nodes.append(helper.make_node("Relu", ["sum"], ["r"]))
        last = "r"
    inits += [const("os", np.float32(ys)), const("oz", np.array(yz, yt))]
    nodes.append(helper.make_node("QuantizeLinear", [last, "os", "oz"], ["out"]))
    m = model(nodes, inputs, ["out"], inits)
    # the reference: QLinearConv's integers, then the Add's float formula
    xq = quantize(x, xs, xz, xt).astype(np.int64) - xz
    acc = conv_int(xq, wq.astype(np.int64), S, P, 1)
    if with_b:
        acc = acc + bq.reshape(1, M, 1, 1)
    mult = (xs * ws / ts).astype(np.float32).reshape(1, -1, 1, 1)
    lo = tz if act in ("relu", "relu6") else None
    hi = quantize(np.float32(6), ts, tz, tt) if act == "relu6" else None
    t = requant(acc, mult, tz, tt, lo, hi)
    if conv_b:
        ref = binary_ref("Add", s_q, ss, sz, t, ts, tz, ys, yz, yt, relu)
    else:
        ref = binary_ref("Add", t, ts, tz, s_q, ss, sz, ys, yz, yt, relu)
    return m, inputs, ref


@pytest.mark.parametrize("level", [2, 3])
@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("name", sorted(CASES))
def test_qconv_add_bit_equal_to_reference(name, threads, level, tmp_path, monkeypatch):
    if name.startswith("chan_"):
        monkeypatch.setenv("CGE_QCONV_CHANNEL_SLICES", "1")
    rng = np.random.default_rng(sum(map(ord, name)))
    m, inputs, ref = case_model(CASES[name], rng)
    (y,) = run(m, inputs, level=level, dump=tmp_path, threads=threads)
    text = partitioned(tmp_path)
    # at level 3 the model's input stays plain for the add (only the
    # convolution reads it channels-last): the layouts differ, no fusion
    plain_skip = CASES[name][14] == "x" and level == 3
    assert ("QConvAdd" in text and "QAdd(" not in text) != plain_skip
    assert y.dtype == ref.dtype and y.shape == ref.shape
    np.testing.assert_array_equal(y, ref)
    monkeypatch.setenv("CGE_DISABLE_PASSES", "fuse_qconv_add")
    (u,) = run(m, inputs, level=level, threads=threads)
    np.testing.assert_array_equal(y, u)


def test_qconv_output_read_twice_keeps_its_node(tmp_path, monkeypatch):
    """The convolution's output also a graph output: that QConv stays, the
    add joins the other addend's convolution instead; both outputs right."""
    import onnx
    rng = np.random.default_rng(7)
    m, inputs, ref = case_model(CASES["3x3_odd_u8"], rng)
    mp = onnx.load_from_string(m)
    mp.graph.output.append(helper.make_tensor_value_info("y", onnx.TensorProto.UINT8, None))
    m = mp.SerializeToString()
    out, y = run(m, inputs, level=2, dump=tmp_path, threads=2)
    text = partitioned(tmp_path)
    assert "QConvAdd" in text and "QAdd(" not in text
    assert any("cge.fused::QConv(" in ln and "-> y " in ln + " " for ln in text.splitlines())
    np.testing.assert_array_equal(out, ref)
    monkeypatch.setenv("CGE_DISABLE_PASSES", "fuse_qconv_add")
    out2, y2 = run(m, inputs, level=2, threads=2)
    np.testing.assert_array_equal(out, out2)
    np.testing.assert_array_equal(y, y2)


# A convolution and the 1x1 one that alone reads it (cge.fused QConvPair),
# with or without the residual add after it.
# A: C, M, kernel, stride, group, act; B: M2, act, per-channel; t / u zero
# points (u8); add: None or (skip dtype, skip zp, y dtype, y zp, relu); H, W
PAIRS = {
    "depthwise_then_project_add": (24, 24, 3, 1, 24, "relu6", 16, None, True, 60, 3,
                                   (np.uint8, 100, np.uint8, 5, False), 11, 9),
    "dw_stride2_then_project": (16, 16, 3, 2, 16, "relu6", 24, None, True, 60, 131, None, 13, 15),
    "3x3_then_1x1_relu_add_relu": (8, 12, 3, 1, 1, "relu", 20, "relu", False, 0, 0,
                                   (np.uint8, 7, np.uint8, 0, True), 7, 7),
    "5_rows_s8_skip": (6, 10, 3, 1, 2, None, 9, None, True, 128, 77,
                       (np.int8, -3, np.int8, 4, False), 5, 17),
    # B cut by output channels: A, B and the add run one after the other
    "chan_b_sliced": (8, 512, 3, 1, 1, "relu", 256, None, True, 0, 9,
                      (np.uint8, 100, np.uint8, 5, False), 3, 5),
}


def qconv_nodes(prefix, x_name, xs, xz, wq, ws, wz, bq, ys, yz, act, **attrs):
    """DQ(w) -> Conv(x_name) [-> act] -> Q(ys, yz): nodes, initializers, output name."""
    p = prefix
    inits = [const(p + "w", wq), const(p + "ws", ws), const(p + "wz", wz), const(p + "ys", ys),
             const(p + "yz", yz), const(p + "bq", bq), const(p + "bs", (xs * ws).astype(np.float32)),
             const(p + "bz", np.zeros(ws.shape, np.int32))]
    nodes = [helper.make_node("DequantizeLinear", [p + "w", p + "ws", p + "wz"], [p + "wd"], axis=0),
             helper.make_node("DequantizeLinear", [p + "bq", p + "bs", p + "bz"], [p + "bd"], axis=0),
             helper.make_node("Conv", [x_name, p + "wd", p + "bd"], [p + "c"], **attrs)]
    last = p + "c"
    if act == "relu":
        nodes.append(helper.make_node("Relu", [last], [p + "a"]))
        last = p + "a"
    elif act == "relu6":
        inits += [const(p + "lo", np.float32(0)), const(p + "hi", np.float32(6))]
        nodes.append(helper.make_node("Clip", [last, p + "lo", p + "hi"], [p + "a"]))
        last = p + "a"
    nodes.append(helper.make_node("QuantizeLinear", [last, p + "ys", p + "yz"], [p + "q"]))
    return nodes, inits, p + "q"


def conv_requant(xq, xz, wq, ws, bq, xs, ys, yz, dt, act, stride, pad, group):
    acc = conv_int(xq.astype(np.int64) - xz, wq.astype(np.int64), stride, (pad,) * 4, group)
    acc = acc + bq.reshape(1, -1, 1, 1)
    mult = (xs * ws / ys).astype(np.float32).reshape(1, -1, 1, 1)
    lo = yz if act in ("relu", "relu6") else None
    hi = quantize(np.float32(6), ys, yz, dt) if act == "relu6" else None
    return requant(acc, mult, yz, dt, lo, hi)


def pair_model(case, rng):
    C, M, K, S, G, act, M2, act2, per_ch, tz, uz, add, H, W = case
    xs, xz, ts, us = np.float32(0.04), np.uint8(120), np.float32(0.05), np.float32(0.09)
    x = rng.normal(0, 2.5, size=(1, C, H, W)).astype(np.float32)
    inputs = {"x": x}
    w1 = rng.integers(-127, 128, size=(M, C // G, K, K)).astype(np.int8)
    ws1 = rng.uniform(0.002, 0.03, M).astype(np.float32)
    b1 = rng.integers(-3000, 3000, M).astype(np.int32)
    w2 = rng.integers(-127, 128, size=(M2, M, 1, 1)).astype(np.int8)
    ws2 = (rng.uniform(0.002, 0.02, M2) if per_ch else rng.uniform(0.002, 0.02, 1)).astype(np.float32)
    b2 = rng.integers(-3000, 3000, M2).astype(np.int32)
    inits = [const("xs", xs), const("xz", xz)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    n1, i1, t = qconv_nodes("a_", "xd", xs, xz, w1, ws1, np.zeros(M, np.int8), b1, ts,
                            np.uint8(tz), act, kernel_shape=[K, K], strides=[S, S],
                            pads=[K // 2] * 4, group=G)
    nodes += n1 + [helper.make_node("DequantizeLinear", [t, "a_ys", "a_yz"], ["td"])]
    ws2d = ws2 if per_ch else ws2.reshape(())
    n2, i2, u = qconv_nodes("b_", "td", ts, tz, w2, ws2d, np.zeros(ws2d.shape, np.int8), b2, us,
                            np.uint8(uz), act2, kernel_shape=[1, 1])
    nodes += n2
    inits += i1 + i2
    out = u
    tq = conv_requant(quantize(x, xs, xz, np.uint8), xz, w1, ws1, b1, xs, ts, tz, np.uint8, act,
                      S, K // 2, G)
    ref = conv_requant(tq, tz, w2, ws2, b2, ts, us, uz, np.uint8, act2, 1, 0, 1)
    if add is not None:
        st, sz, yt, yz, relu = add
        ss, ys = np.float32(0.13), np.float32(0.11)
        sd, s_q = skip_branch(rng, inputs, nodes, inits, M2, ref.shape[2], ref.shape[3], ss, sz,
                              st)
        inits += [const("os", ys), const("oz", np.array(yz, yt))]
        nodes += [helper.make_node("DequantizeLinear", [u, "b_ys", "b_yz"], ["ud"]),
                  helper.make_node("Add", ["ud", "sd"], ["sum"])]
        last = "sum"
        if relu:
            nodes.append(helper.make_node("Relu", ["sum"], ["r"]))
            last = "r"
        nodes.append(helper.make_node("QuantizeLinear", [last, "os", "oz"], ["out"]))
        out = "out"
        ref = binary_ref("Add", ref, us, uz, s_q, ss, sz, ys, yz, yt, relu)
    m = model(nodes, inputs, [out], inits)
    return m, inputs, ref


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_qconv_pair_bit_equal_to_reference(name, threads, tmp_path, monkeypatch):
    if name.startswith("chan_"):
        monkeypatch.setenv("CGE_QCONV_CHANNEL_SLICES", "1")
    rng = np.random.default_rng(sum(map(ord, name)))
    m, inputs, ref = pair_model(PAIRS[name], rng)
    (y,) = run(m, inputs, level=3, dump=tmp_path, threads=threads)
    text = partitioned(tmp_path)
    # the addend's own 1x1 convolution stays a QConv
    assert "QConvPair" in text and "QAdd(" not in text
    assert text.count("QConv(") == (PAIRS[name][11] is not None)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    np.testing.assert_array_equal(y, ref)
    monkeypatch.setenv("CGE_DISABLE_PASSES", "fuse_qconv_add")
    (u,) = run(m, inputs, level=3, threads=threads)
    np.testing.assert_array_equal(y, u)
