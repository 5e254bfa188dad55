# The exactness rule of oneDNN's int8 path (dnnl_qconv.c, docs/quantization.md
# "Exact int8 products without VNNI"): fused QDQ convolutions and matmuls of
# full-range 8-bit weights with u8 and s8 activations against a NumPy int64
# reference, bit for bit. Scales are powers of two, so the requantisation
# multiplier is exact however it is formed; outputs sit a few steps apart, so
# a saturated int16 pair (vpmaddubsw) or a halved weight shows. And, in a
# child with CGE_CPU_ISA=avx2 (the non-VNNI decision on any x86 machine),
# CGE_QCONV_TRACE's lines: 7-bit weights (fbgemm's reduce_range models) keep
# oneDNN's one product, full-range ones are split, s8 sources flipped.
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

import cge
from test_quant_int8 import const, conv_int, model, requant, run

HERE = os.path.dirname(os.path.abspath(__file__))
XS, WS = np.float32(2.0 ** -4), np.float32(2.0 ** -5)


def weights(rng, shape, full):
    if not full:  # 7 bits
        return rng.integers(-64, 65, size=shape).astype(np.int8)
    w = rng.integers(-128, 128, size=shape).astype(np.int8)
    w.reshape(-1)[:32] = [127, 127, -128, -128, 127, -127, 1, -1] * 4
    return w


def acts(rng, shape, dt):
    info = np.iinfo(dt)
    x = rng.integers(info.min, info.max + 1, size=shape).astype(dt)
    x.reshape(-1)[:16] = info.max
    return x


def conv_model(x, w, xz, group, pads, ys, yz):
    inits = [const("xs", XS), const("xz", np.array(xz, x.dtype)), const("w", w),
             const("ws", WS), const("wz", np.array(0, np.int8)),
             const("ys", np.float32(ys)), const("yz", np.array(yz, x.dtype))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["c"], pads=list(pads), group=group),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    return model(nodes, {"x": x}, ["y"], inits)


def matmul_model(x, w, xz, ys, yz):
    inits = [const("xs", XS), const("xz", np.array(xz, x.dtype)), const("w", w),
             const("ws", WS), const("wz", np.array(0, np.int8)),
             const("ys", np.float32(ys)), const("yz", np.array(yz, x.dtype))]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
             helper.make_node("MatMul", ["xd", "wd"], ["c"]),
             helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    return model(nodes, {"x": x}, ["y"], inits)


@pytest.mark.parametrize("dt,xz", [(np.uint8, 0), (np.uint8, 37), (np.int8, 0), (np.int8, -5)])
@pytest.mark.parametrize("group", [1, 16])
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_exact(dt, xz, group, full, threads):
    rng = np.random.default_rng(11 + group)
    C, M = 16, 16
    x = acts(rng, (1, C, 9, 8), dt)
    w = weights(rng, (M, C // group, 3, 3), full)
    pads = (1, 1, 1, 1)
    shift = 12 if group == 1 else 10  # outputs about 40 steps wide
    ys = float(2.0 ** shift) * XS * WS
    yz = 3 if dt == np.uint8 else -2
    acc = conv_int(x.astype(np.int64) - xz, w, 1, pads, group)
    want = requant(acc, np.float32(2.0 ** -shift), yz, dt)
    (y,) = run(conv_model(x, w, xz, group, pads, ys, yz), {"x": x}, threads=threads)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_depthwise_extremes_exact(dt):
    """every product at its largest: 255 (or -128) times 127 / -128"""
    info = np.iinfo(dt)
    x = np.full((1, 16, 5, 5), info.max if dt == np.uint8 else info.min, dt)
    w = np.full((16, 1, 3, 3), 127, np.int8)
    w[1::2] = -128
    w[2::4, 0, 1] = -127
    shift = 12  # unsaturated: |acc| <= 9 * 255 * 128 < 2^22
    ys = float(2.0 ** shift) * XS * WS
    acc = conv_int(x.astype(np.int64), w, 1, (1, 1, 1, 1), 16)
    want = requant(acc, np.float32(2.0 ** -shift), 0, dt)
    (y,) = run(conv_model(x, w, 0, 16, (1, 1, 1, 1), ys, 0), {"x": x})
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dt,xz", [(np.uint8, 0), (np.uint8, 200), (np.int8, 0), (np.int8, 9)])
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("rows,threads", [(4, 1), (32, 2)])
def test_matmul_exact(dt, xz, full, rows, threads):
    rng = np.random.default_rng(5)
    K, N = 64, 24
    x = acts(rng, (rows, K), dt)
    w = weights(rng, (K, N), full)
    shift = 10
    ys = float(2.0 ** shift) * XS * WS
    yz = 1 if dt == np.uint8 else -1
    acc = (x.astype(np.int64) - xz) @ w.astype(np.int64)
    want = requant(acc, np.float32(2.0 ** -shift), yz, dt)
    (y,) = run(matmul_model(x, w, xz, ys, yz), {"x": x}, threads=threads)
    np.testing.assert_array_equal(y, want)


CHILD = r"""
import sys
sys.path.insert(0, %r)
import numpy as np
from test_int8_exact import acts, conv_model, matmul_model, weights
from test_quant_int8 import run
rng = np.random.default_rng(1)
for dt in (np.uint8, np.int8):
    for full in (False, True):
        x = acts(rng, (1, 16, 6, 6), dt)
        print("case conv", dt.__name__, "full" if full else "7bit", file=sys.stderr, flush=True)
        run(conv_model(x, weights(rng, (8, 16, 3, 3), full), 0, 1, (1, 1, 1, 1), 1.0, 0), {"x": x})
        x = acts(rng, (1, 16, 6, 6), dt)
        print("case dw", dt.__name__, "full" if full else "7bit", file=sys.stderr, flush=True)
        run(conv_model(x, weights(rng, (16, 1, 3, 3), full), 0, 16, (1, 1, 1, 1), 1.0, 0),
            {"x": x})
        x = acts(rng, (4, 32), dt)
        print("case matmul", dt.__name__, "full" if full else "7bit", file=sys.stderr, flush=True)
        run(matmul_model(x, weights(rng, (32, 8), full), 0, 1.0, 0), {"x": x})
"""


def test_trace_names_the_path():
    if os.environ.get("CGE_CPU_ISA") == "generic":
        pytest.skip("capped below AVX2")
    env = dict(os.environ, CGE_CPU_ISA="avx2", CGE_QCONV_TRACE="1")
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cge.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([pkg, HERE, env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", CHILD % HERE], env=env, capture_output=True,
                       text=True, timeout=600, cwd=HERE)
    assert r.returncode == 0, r.stderr[-3000:]
    cases, case = {}, None
    for line in r.stderr.splitlines():
        if line.startswith("case "):
            case = line[5:]
            cases[case] = []
        elif line.startswith("cge qconv: ") and case:
            cases[case].append(line[len("cge qconv: "):])
    if not any(cases.values()):
        pytest.skip("no oneDNN int8 primitive in this build")
    want = {"uint8 7bit": "plain", "uint8 full": "split",
            "int8 7bit": "plain u8-flip", "int8 full": "split u8-flip"}
    for k, v in want.items():  # depthwise: no pairs, so no split
        v = v.replace("split", "plain")
        assert cases["dw %s" % k] == ["conv %s" % v], (k, cases)
    for kind in ("conv", "matmul"):
        for k, v in want.items():
            assert cases["%s %s" % (kind, k)] == ["%s %s" % (kind, v)], (kind, k, cases)
