# Session 8's int8 fast paths, each bit for bit against a NumPy version of
# the ONNX formulas and against the unfused graph (opt_level 1):
# - QAdd / QMul and QuantizeLinear divide by the output scale as a multiply
#   by its reciprocal except near ties (cge__q8_div_rint16, src/ops/q8.h):
#   every pair of uint8 / int8 codes, scales that make half the quotients
#   exact ties, values one ulp either side of half-integers;
# - QPool's channels-last max runs on bytes then a table (qlinear_elementwise.c):
#   identity and rescaling tables, int8 and uint8, more channels than a chunk;
# - QuantizeNHWC (fuse_quantize_reorder): a quantized model's input
#   QuantizeLinear and the Reorder to NHWC as one op, 1 / 3 / 5 channels,
#   widths that are not multiples of 16, NaN and infinities.
import glob
import os

import numpy as np
import pytest
from onnx import helper

from test_quant_int8 import const, fused_ops, model, run, saturate


def all_pairs(dt):
    """Every (a, b) pair of codes of dt, plus 5 more (a tail past 16 lanes)."""
    info = np.iinfo(dt)
    codes = np.arange(info.min, info.max + 1)
    a = np.concatenate([np.repeat(codes, 256), codes[:5]]).astype(dt)
    b = np.concatenate([np.tile(codes, 256), codes[-5:]]).astype(dt)
    return a.reshape(1, 1, 1, -1), b.reshape(1, 1, 1, -1)


def binary_ref(op, a, sa, za, b, sb, zb, sc, zc, yt, relu):
    va = (a.astype(np.int32) - za).astype(np.float32) * np.float32(sa)
    vb = (b.astype(np.int32) - zb).astype(np.float32) * np.float32(sb)
    v = va + vb if op == "Add" else va * vb
    if relu:
        v = np.maximum(v, np.float32(0))
    q = np.rint(v / np.float32(sc)) + np.float32(zc)
    return saturate(q, yt)


# op, a dtype / scale / zp, b dtype / scale / zp, y scale, y dtype / zp, relu
BINARY = [
    # quotients k / 2: every other one an exact tie
    ("Add", np.uint8, 0.5, 3, np.uint8, 0.5, 0, 1.0, np.uint8, 128, False),
    ("Add", np.int8, 0.25, 0, np.uint8, 0.75, 128, 0.5, np.int8, -1, False),
    ("Add", np.uint8, 0.0213, 7, np.uint8, 0.0371, 0, 0.0452, np.uint8, 3, True),
    ("Add", np.int8, 0.013, -4, np.int8, 0.017, 5, 0.003, np.int8, 0, False),
    ("Mul", np.uint8, 0.5, 128, np.uint8, 0.25, 0, 2.0, np.uint8, 17, False),
    ("Mul", np.int8, 0.041, 2, np.uint8, 0.0093, 99, 0.0021, np.int8, 9, False),
]


@pytest.mark.parametrize("op,at,sa,za,bt,sb,zb,sc,yt,zc,relu", BINARY)
def test_qadd_qmul_every_code_pair(op, at, sa, za, bt, sb, zb, sc, yt, zc, relu, tmp_path):
    a, _ = all_pairs(at)
    _, b = all_pairs(bt)
    inits = [const("as", np.float32(sa)), const("az", np.array(za, at)),
             const("bs", np.float32(sb)), const("bz", np.array(zb, bt)),
             const("ys", np.float32(sc)), const("yz", np.array(zc, yt))]
    nodes = [helper.make_node("DequantizeLinear", ["a", "as", "az"], ["ad"]),
             helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"]),
             helper.make_node(op, ["ad", "bd"], ["s"])]
    last = "s"
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["r"]))
        last = "r"
    nodes.append(helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["y"]))
    m = model(nodes, {"a": a, "b": b}, ["y"], inits)
    (y,) = run(m, {"a": a, "b": b}, dump=tmp_path)
    assert ("QAdd" if op == "Add" else "QMul") in fused_ops(tmp_path)
    ref = binary_ref(op, a, sa, za, b, sb, zb, sc, zc, yt, relu)
    np.testing.assert_array_equal(y, ref)
    (u,) = run(m, {"a": a, "b": b}, level=1)
    np.testing.assert_array_equal(y, u)


@pytest.mark.parametrize("s", [0.05, 0.0123, 3.7, 1e-3])
@pytest.mark.parametrize("dt,zp", [(np.uint8, 128), (np.int8, -3)])
def test_quantize_linear_near_ties(s, dt, zp):
    """x at (k + 1/2) * s and one and two ulps either side, k across the
    range and past it: the reciprocal's estimate is off by up to 3 ulps."""
    s = np.float32(s)
    k = np.arange(-300, 300, dtype=np.float32)
    t = ((k + np.float32(0.5)) * s).astype(np.float32)
    xs = [t]
    for d in (1, 2):
        up, down = t, t
        for _ in range(d):
            up = np.nextafter(up, np.float32(np.inf))
            down = np.nextafter(down, np.float32(-np.inf))
        xs += [up, down]
    x = np.concatenate(xs + [np.array([np.nan, np.inf, -np.inf, 0.0], np.float32)])
    x = np.concatenate([x, x[:7]]).astype(np.float32)  # a tail past 16 lanes
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], {"x": x}, ["y"],
              [const("s", np.array(s)), const("z", np.array(zp, dt))])
    (y,) = run(m, {"x": x})
    q = np.rint(x / s) + np.float32(zp)
    q = np.where(np.isnan(q), np.float32(0), q)
    np.testing.assert_array_equal(y, saturate(q, dt))


@pytest.mark.parametrize("dt,xz,ys,yz,yt", [(np.uint8, 110, None, None, np.uint8),  # identity
                                            (np.uint8, 110, 0.031, 7, np.uint8),
                                            (np.int8, -9, None, None, np.int8),
                                            (np.int8, -9, 0.2, 100, np.int8),
                                            (np.int8, -9, 0.07, 30, np.uint8)])
@pytest.mark.parametrize("channels", [5, 64, 300])
def test_qpool_max_nhwc_bytes(dt, xz, ys, yz, yt, channels, tmp_path):
    rng = np.random.default_rng(channels + abs(xz))
    xs = np.float32(0.05)
    info = np.iinfo(dt)
    xq = rng.integers(info.min, info.max + 1, size=(1, channels, 11, 9)).astype(dt)
    ys = xs if ys is None else np.float32(ys)
    yz = xz if yz is None else yz
    inits = [const("xs", xs), const("xz", np.array(xz, dt)), const("ys", ys),
             const("yz", np.array(yz, yt))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("MaxPool", ["xd"], ["f"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["y"])]
    m = model(nodes, {"x": xq}, ["y"], inits)
    (y,) = run(m, {"x": xq}, level=3, dump=tmp_path)
    assert "QPool" in fused_ops(tmp_path)
    (u,) = run(m, {"x": xq}, level=1)
    np.testing.assert_array_equal(y, u)
    # NumPy: the max of the codes (padding reads nothing), then its requantisation
    xp = np.pad(xq.astype(np.int32), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-1000)
    mx = np.full((1, channels, 6, 5), -1000, np.int32)
    for i in range(3):
        for j in range(3):
            mx = np.maximum(mx, xp[:, :, i:i + 11:2, j:j + 9:2])
    v = (mx - xz).astype(np.float32) * xs
    np.testing.assert_array_equal(y, saturate(np.rint(v / ys) + np.float32(yz), yt))


def partitioned(dump):
    files = sorted(glob.glob(os.path.join(str(dump), "*_partition_*.txt")))
    return open(files[-1]).read()


@pytest.mark.parametrize("channels,width,dt,zp", [(3, 224, np.uint8, 114), (3, 13, np.int8, -7),
                                                  (1, 40, np.uint8, 0), (5, 17, np.uint8, 255)])
def test_quantize_nhwc_input(channels, width, dt, zp, tmp_path, monkeypatch):
    """A quantized CNN's input: QuantizeLinear -> DQ -> Conv -> Q at level 3
    runs QuantizeNHWC then an NHWC QConv; the same bits as with the pass off."""
    rng = np.random.default_rng(channels * width)
    x = rng.normal(0, 3, size=(1, channels, 7, width)).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, 1e30]
    xs = np.float32(0.037)
    x[0, -1, 1, :6] = (np.arange(6) + 0.5).astype(np.float32) * xs  # ties
    wq = rng.integers(-127, 128, size=(4, channels, 3, 3)).astype(np.int8)
    inits = [const("xs", xs), const("xz", np.array(zp, dt)), const("w", wq),
             const("ws", np.float32(0.01)), const("wz", np.array(0, np.int8)),
             const("ys", np.float32(0.3)), const("yz", np.array(10, np.uint8))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits)
    (y,) = run(m, {"x": x}, level=3, dump=tmp_path)
    text = partitioned(tmp_path)
    assert "QuantizeNHWC" in text and "QuantizeLinear(" not in text
    monkeypatch.setenv("CGE_DISABLE_PASSES", "fuse_quantize_reorder")
    (u,) = run(m, {"x": x}, level=3)
    np.testing.assert_array_equal(y, u)


# QPool's channels-last averages of fewer output rows than threads (a global
# average: one row) cut each row's channels into ranges of 64 across the
# threads: the same bytes at every thread count, odd channel counts.
@pytest.mark.parametrize("kind", ["GlobalAveragePool", "AveragePoolOneRow"])
@pytest.mark.parametrize("channels", [1000, 333])
def test_qpool_average_channels_cut_across_threads(kind, channels, tmp_path):
    rng = np.random.default_rng(channels)
    x = rng.normal(0, 3, size=(1, channels, 9, 11)).astype(np.float32)
    xs, xz, ys, yz = np.float32(0.05), np.uint8(110), np.float32(0.03), np.uint8(20)
    inits = [const("xs", xs), const("xz", xz), const("ys", ys), const("yz", yz)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    if kind == "GlobalAveragePool":
        nodes.append(helper.make_node("GlobalAveragePool", ["xd"], ["f"]))
    else:
        nodes.append(helper.make_node("AveragePool", ["xd"], ["f"], kernel_shape=[9, 3],
                                      strides=[1, 2], pads=[0, 1, 0, 1]))
    nodes.append(helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["y"]))
    m = model(nodes, {"x": x}, ["y"], inits)
    (one,) = run(m, {"x": x}, level=3, dump=tmp_path, threads=1)
    assert "QPool" in fused_ops(tmp_path)
    for threads in (2, 3, 5):
        (y,) = run(m, {"x": x}, level=3, threads=threads)
        np.testing.assert_array_equal(y, one)
    (u,) = run(m, {"x": x}, level=1)
    assert np.abs(one.astype(np.int32) - u.astype(np.int32)).max() <= 1
