# The int8 elementwise kernels' AVX2 paths (src/ops/q8.h, quant.c,
# qlinear_elementwise.c): QuantizeLinear, QuantizeNHWC (with its RGB byte
# interleave), QAdd / QMul (and the QConvAdd add that shares them),
# QLookup's byte table and QPool's channels-last loops. Each against a NumPy
# version of the ONNX formulas or the unfused graph, bit for bit, at sizes
# that leave tails past the 16 / 32 lanes; and the whole module, with
# test_int8_fast_paths.py's every-code-pair and near-tie tests, once more in
# a process per CGE_CPU_ISA cap (avx2, generic), so that an AVX-512 machine
# runs the AVX2 paths and this one the portable ones.
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

import cge
from test_int8_fast_paths import partitioned
from test_quant_int8 import const, fused_ops, model, run, saturate

HERE = os.path.dirname(os.path.abspath(__file__))


def quantize_ref(x, s, z, dt):
    q = np.rint(x / np.float32(s)) + np.float32(z)
    return saturate(np.where(np.isnan(q), np.float32(0), q), dt)


def edge_values(s, n, rng):
    """n normal values around the range, ties k + 1/2 (times s), NaN, infinities, huge values."""
    x = rng.normal(0, 200 * s, size=n).astype(np.float32)
    k = rng.integers(-300, 300, size=n // 4).astype(np.float32)
    x[: n // 4] = ((k + np.float32(0.5)) * np.float32(s)).astype(np.float32)
    x[n // 4: n // 4 + 6] = [np.nan, np.inf, -np.inf, 1e30, -1e30, -0.0]
    return x


@pytest.mark.parametrize("n", [1, 15, 16, 17, 47, 1000, 4099])
@pytest.mark.parametrize("dt,zp,s", [(np.uint8, 0, 0.05), (np.uint8, 255, 0.0123),
                                     (np.int8, 0, 0.5), (np.int8, -128, 3.7), (np.int8, 127, 1e-3)])
def test_quantize_linear(n, dt, zp, s):
    rng = np.random.default_rng(n + abs(zp))
    x = edge_values(s, n, rng) if n >= 16 else rng.normal(0, 100 * s, size=n).astype(np.float32)
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], {"x": x}, ["y"],
              [const("s", np.float32(s)), const("z", np.array(zp, dt))])
    (y,) = run(m, {"x": x})
    np.testing.assert_array_equal(y, quantize_ref(x, s, zp, dt))


@pytest.mark.parametrize("channels,width", [(3, 16), (3, 48), (3, 53), (3, 7), (1, 33), (4, 35),
                                            (16, 17)])
@pytest.mark.parametrize("dt,zp", [(np.uint8, 114), (np.uint8, 0), (np.uint8, 255)])
def test_quantize_nhwc_against_numpy(channels, width, dt, zp, tmp_path):
    """QuantizeNHWC (the input QuantizeLinear and its Reorder to channels-last)
    against quantize-then-transpose: the conv after it reads its bytes, so
    the output is checked through a 1x1 identity QConv whose output is its input
    (uint8: int8 sources meet the limitation tested at the end of this file;
    test_int8_fast_paths.py checks int8 QuantizeNHWC against the unfused pass)."""
    rng = np.random.default_rng(channels * width + abs(zp))
    s = np.float32(0.037)
    x = edge_values(s, channels * 5 * width, rng).reshape(1, channels, 5, width)
    # a 1x1 conv with identity weights and the input's quantisation: y == xq
    w = np.eye(channels, dtype=np.int8).reshape(channels, channels, 1, 1)
    inits = [const("xs", s), const("xz", np.array(zp, dt)), const("w", w),
             const("ws", np.float32(1.0)), const("wz", np.array(0, np.int8)),
             const("ys", s), const("yz", np.array(zp, dt))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits)
    (y,) = run(m, {"x": x}, level=3, dump=tmp_path)
    assert "QuantizeNHWC" in partitioned(tmp_path)
    np.testing.assert_array_equal(y, quantize_ref(x, s, zp, dt))


def lookup_model(kind, xt, xz, yt, yz, n):
    rng = np.random.default_rng(n)
    info = np.iinfo(xt)
    x = rng.integers(info.min, info.max + 1, size=(1, n)).astype(xt)
    x[0, : min(n, 256)] = np.arange(info.min, info.max + 1, dtype=np.int32)[: min(n, 256)]
    inits = [const("xs", np.float32(0.05)), const("xz", np.array(xz, xt)),
             const("ys", np.float32(1 / 256)), const("yz", np.array(yz, yt))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node(kind, ["xd"], ["f"]),
             helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["y"])]
    return model(nodes, {"x": x}, ["y"], inits), x


@pytest.mark.parametrize("n", [31, 32, 256, 777, 40000])
@pytest.mark.parametrize("kind,xt,xz,yt,yz", [("Sigmoid", np.uint8, 128, np.uint8, 0),
                                              ("Sigmoid", np.int8, 3, np.int8, -128),
                                              ("HardSigmoid", np.int8, -20, np.uint8, 0)])
def test_qlookup_every_code(kind, xt, xz, yt, yz, n, tmp_path):
    """QLookup's byte table (32 codes a step on AVX2): each code's output is
    the unfused graph's, whatever its position."""
    m, x = lookup_model(kind, xt, xz, yt, yz, n)
    (y,) = run(m, {"x": x}, level=3, dump=tmp_path)
    assert "QLookup" in fused_ops(tmp_path)
    (u,) = run(m, {"x": x}, level=1)
    np.testing.assert_array_equal(y, u)


@pytest.mark.parametrize("shape_b", [None, (1, 1, 1, 1)])
@pytest.mark.parametrize("op", ["Add", "Mul"])
@pytest.mark.parametrize("n", [5, 16, 33, 1031])
def test_qadd_qmul_odd_sizes(op, n, shape_b, tmp_path):
    rng = np.random.default_rng(n)
    a = rng.integers(0, 256, size=(1, 1, 1, n)).astype(np.uint8)
    b = rng.integers(-128, 128, size=shape_b or (1, 1, 1, n)).astype(np.int8)
    sa, za, sb, zb, sc, zc = 0.0213, 7, 0.0371, -3, 0.0452, -1
    inits = [const("as", np.float32(sa)), const("az", np.array(za, np.uint8)),
             const("bs", np.float32(sb)), const("bz", np.array(zb, np.int8)),
             const("ys", np.float32(sc)), const("yz", np.array(zc, np.int8))]
    nodes = [helper.make_node("DequantizeLinear", ["a", "as", "az"], ["ad"]),
             helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"]),
             helper.make_node(op, ["ad", "bd"], ["s"]),
             helper.make_node("QuantizeLinear", ["s", "ys", "yz"], ["y"])]
    m = model(nodes, {"a": a, "b": b}, ["y"], inits)
    (y,) = run(m, {"a": a, "b": b}, dump=tmp_path)
    assert ("QAdd" if op == "Add" else "QMul") in fused_ops(tmp_path)
    va = (a.astype(np.int32) - za).astype(np.float32) * np.float32(sa)
    vb = (b.astype(np.int32) - zb).astype(np.float32) * np.float32(sb)
    v = va + vb if op == "Add" else va * vb
    np.testing.assert_array_equal(y, saturate(np.rint(v / np.float32(sc)) + np.float32(zc),
                                              np.int8))


@pytest.mark.parametrize("mode", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("channels", [7, 32, 70, 300])
@pytest.mark.parametrize("dt,zp", [(np.uint8, 110), (np.int8, -9)])
def test_qpool_nhwc_against_unfused(mode, channels, dt, zp, tmp_path):
    rng = np.random.default_rng(channels + abs(zp))
    x = rng.normal(0, 3, size=(1, channels, 10, 9)).astype(np.float32)
    xs, ys, yz = np.float32(0.05), np.float32(0.031), np.array(zp // 2, dt)
    inits = [const("xs", xs), const("xz", np.array(zp, dt)), const("ys", ys), const("yz", yz)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node(mode, ["xd"], ["f"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits)
    (y,) = run(m, {"x": x}, level=3, dump=tmp_path)
    assert "QPool" in fused_ops(tmp_path)
    (u,) = run(m, {"x": x}, level=1)
    if mode == "MaxPool":
        np.testing.assert_array_equal(y, u)
    else:  # the unfused average rounds its float sum differently: one step
        assert np.abs(y.astype(np.int32) - u.astype(np.int32)).max() <= 1


# MatMulNBits (matmul_nbits.c): the AVX2 + FMA decode (1 x 2), few-row (2 x 1)
# and panel-dequantisation loops against NumPy; blocks of 16 keep the
# portable loop, M >= 16 takes the panel path.
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("zp", ["packed", "none", "float"])
@pytest.mark.parametrize("K,N,block,M", [(100, 37, 32, 1), (256, 49, 64, 3), (96, 33, 32, 2),
                                         (64, 19, 16, 5), (160, 50, 32, 17)])
def test_matmul_nbits_against_numpy(bits, zp, K, N, block, M):
    from test_lowprec import nbits, nbits_model
    rng = np.random.default_rng(K * N + bits + M)
    w = rng.standard_normal((K, N)).astype(np.float32)
    a = rng.standard_normal((M, K)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    kw = dict(bits=bits, block_size=block, zero_points=zp != "none", zp_float=zp == "float")
    y = cge.InferenceSession(nbits_model([M, K], w, bias=bias, **kw)).run(None, {"a": a})[0]
    packed, scales, zps = nbits.quantize(w, bits, block, zp != "none", zp == "float")
    ref = a.astype(np.float64) @ nbits.dequantize(packed, scales, zps, K, bits, block) + bias
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.skipif(os.environ.get("CGE_INT8_AVX2_CHILD") == "1", reason="in a capped child")
@pytest.mark.parametrize("cap", ["avx2", "generic"])
def test_every_isa_path(cap):
    """This module and the every-code tests of test_int8_fast_paths.py in a
    process whose kernels are capped at `cap`."""
    env = dict(os.environ, CGE_CPU_ISA=cap, CGE_INT8_AVX2_CHILD="1")
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cge.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg, HERE, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        os.path.join(HERE, "test_int8_avx2.py"),
                        os.path.join(HERE, "test_int8_fast_paths.py")],
                       env=env, capture_output=True, text=True, timeout=900, cwd=HERE)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


# Without VNNI, oneDNN's int8
# convolutions multiply u8 activations by s8 weights with vpmaddubsw, whose
# pairwise int16 sum saturates once two products pass 32767 (codes >= 128
# against weights near +-128). PyTorch's fbgemm models keep activations to 7
# bits (reduce_range) and stay exact; full-range uint8 activations with full
# 8-bit weights do not. ONNX fixes the arithmetic (int32 accumulation), so
# the fused convolution must equal the unfused graph: dnnl_qconv.c splits
# weights past |64| in halves there (test_int8_exact.py has the rule).
def test_qconv_full_range_activations_do_not_saturate():
    C, K = 16, 8
    x = np.full((1, C, 6, 6), 255, np.uint8)
    w = np.full((K, C, 3, 3), 127, np.int8)
    w[1::2] = -128
    inits = [const("xs", np.float32(0.01)), const("xz", np.array(0, np.uint8)), const("w", w),
             const("ws", np.float32(0.001)), const("wz", np.array(0, np.int8)),
             const("ys", np.float32(2.0)), const("yz", np.array(0, np.int8))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits)
    (y,) = run(m, {"x": x}, level=3)
    (u,) = run(m, {"x": x}, level=1)
    # the centre: 144 products of 255 * 127 (or -128) times 0.01 * 0.001 / 2
    assert u[0, 0, 2, 2] == 23 and u[0, 1, 2, 2] == -24
    np.testing.assert_array_equal(y, u)


# With int8 activations and no VNNI, oneDNN halves the weights to 7 bits
# (its "scale adjust" 0.5) to stay clear of the saturation above, and weights
# of 1 would round to 0: dnnl_qconv.c flips such activations to u8.
def test_qconv_int8_activations_exact():
    rng = np.random.default_rng(3)
    x = rng.normal(0, 3, size=(1, 3, 5, 7)).astype(np.float32)
    w = np.eye(3, dtype=np.int8).reshape(3, 3, 1, 1) * np.int8(5)
    s = np.float32(0.037)
    inits = [const("xs", s), const("xz", np.array(-7, np.int8)), const("w", w),
             const("ws", np.float32(1.0)), const("wz", np.array(0, np.int8)),
             const("ys", s), const("yz", np.array(10, np.int8))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits)
    (y,) = run(m, {"x": x}, level=3)
    (u,) = run(m, {"x": x}, level=1)
    np.testing.assert_array_equal(y, u)


# The same saturation in oneDNN's u8 x s8 matmul (QMatMul, the encoder's).
def test_qmatmul_full_range_activations_do_not_saturate():
    K, N = 64, 16
    x = np.full((4, K), 255, np.uint8)
    w = np.full((K, N), 127, np.int8)
    w[:, 1::2] = -128
    inits = [const("xs", np.float32(0.01)), const("xz", np.array(0, np.uint8)), const("w", w),
             const("ws", np.float32(0.001)), const("wz", np.array(0, np.int8)),
             const("ys", np.float32(0.5)), const("yz", np.array(0, np.int8))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("MatMul", ["xd", "wd"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits)
    (y,) = run(m, {"x": x}, level=3)
    (u,) = run(m, {"x": x}, level=1)
    assert u[0, 0] == 41 and u[0, 1] == -42  # 64 * 255 * 127 * 2e-5, rounded
    np.testing.assert_array_equal(y, u)
