# ONNX's own QLinearConv / QLinearMatMul (models in the QOperator form) on
# fuse_qdq's fast path: with W a constant tensor they become cge.fused
# QConv / QMatMul (oneDNN int8, NHWC at level 3) and give the reference
# loops' bits (opt_level 1 runs the QLinear* ops as written).
import numpy as np
import pytest

import onnx
from onnx import TensorProto, helper

from test_quant_int8 import const, fused_ops as last_optimized_graph, run as run_inputs


def run(m, x, level=None, dump=None):
    return run_inputs(m, {"x": x}, level=level, dump=dump)


def qoperator_model(rng, w_dtype=np.int8, b_rank3=False):
    """x (float) -> Q (u8, zp 131) -> QLinearConv stride 2, s8 per-channel W,
    int32 bias -> QLinearConv 3x3 per-tensor W, u8 out zp 7 -> Flatten ->
    QLinearMatMul (s8 B per column) -> DQ."""
    C, M1, M2, H, W = 3, 5, 7, 13, 11
    inits = [
        const("xs", np.float32(0.037)), const("xz", np.uint8(131)),
        const("w1", rng.integers(-127, 128, (M1, C, 3, 3)).astype(w_dtype)
              if w_dtype == np.int8 else rng.integers(0, 256, (M1, C, 3, 3)).astype(w_dtype)),
        const("w1s", rng.uniform(0.004, 0.02, M1).astype(np.float32)),
        const("w1z", np.zeros(M1, w_dtype)),
        const("y1s", np.float32(0.11)), const("y1z", np.uint8(119)),
        const("b1", rng.integers(-3000, 3000, M1).astype(np.int32)),
        const("w2", rng.integers(-127, 128, (M2, M1, 3, 3)).astype(np.int8)),
        const("w2s", np.float32(0.013)), const("w2z", np.int8(0)),
        const("y2s", np.float32(0.09)), const("y2z", np.uint8(7)),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("QLinearConv", ["xq", "xs", "xz", "w1", "w1s", "w1z", "y1s", "y1z", "b1"],
                         ["c1"], strides=[2, 2], pads=[1, 0, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("QLinearConv", ["c1", "y1s", "y1z", "w2", "w2s", "w2z", "y2s", "y2z"],
                         ["c2"], pads=[1, 1, 1, 1]),
    ]
    # c1: [1, 5, 7, 5]; c2: [1, 7, 7, 5]
    if b_rank3:
        nodes.append(helper.make_node("Reshape", ["c2", "shape"], ["f"]))
        inits.append(const("shape", np.array([1, 7, 35], np.int64)))
        K = 35
    else:
        nodes.append(helper.make_node("Flatten", ["c2"], ["f"]))
        K = 7 * 7 * 5
    N = 9
    inits += [
        const("B", rng.integers(-127, 128, (K, N)).astype(np.int8)),
        const("Bs", rng.uniform(0.001, 0.004, N).astype(np.float32)),
        const("Bz", np.zeros(N, np.int8)),
        const("ys", np.float32(0.21)), const("yz", np.uint8(128)),
        const("os", np.float32(0.21)),
    ]
    nodes += [
        helper.make_node("QLinearMatMul", ["f", "y2s", "y2z", "B", "Bs", "Bz", "ys", "yz"], ["mq"]),
        helper.make_node("DequantizeLinear", ["mq", "ys", "yz"], ["y"]),
        helper.make_node("Identity", ["c2"], ["c2_out"]),
    ]
    g = helper.make_graph(nodes, "qop",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N] if not b_rank3 else [1, 7, N]),
                           helper.make_tensor_value_info("c2_out", TensorProto.UINT8, [1, 7, 7, 5])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    x = rng.uniform(-4, 5, (1, C, H, W)).astype(np.float32)
    return m.SerializeToString(), x


@pytest.mark.parametrize("level", [2, 3])
@pytest.mark.parametrize("b_rank3", [False, True])
def test_qlinear_ops_fused_bit_equal_to_reference_loops(level, b_rank3, tmp_path):
    rng = np.random.default_rng(161 + b_rank3)
    m, x = qoperator_model(rng, b_rank3=b_rank3)
    ref = run(m, x, level=1)
    got = run(m, x, level=level, dump=tmp_path)
    graph = last_optimized_graph(tmp_path)
    assert "QConv" in graph and "QMatMul" in graph
    assert "QLinearConv" not in graph and "QLinearMatMul" not in graph
    # the data must not be trivially saturated for the comparison to mean much
    assert len(np.unique(ref[1])) > 20 and len(np.unique(ref[0])) > 5
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype and r.shape == g.shape
        np.testing.assert_array_equal(g, r)


def test_qlinearconv_with_u8_weights_fuses(tmp_path):
    """u8 weights (zero point 0, so w - 128 leaves int8) take the fast path
    too, shifted by 128 with a compensation channel (test_qweights_zero_point.py
    has the other forms): same results as the loops."""
    rng = np.random.default_rng(5)
    m, x = qoperator_model(rng, w_dtype=np.uint8)
    ref = run(m, x, level=1)
    got = run(m, x, dump=tmp_path)
    graph = last_optimized_graph(tmp_path)
    assert "QLinearConv" not in graph and "QConv" in graph
    for r, g in zip(ref, got):
        np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("op", ["conv", "matmul"])
def test_rounding_ties_with_odd_output_zero_point(op, tmp_path):
    """x_scale * w_scale / y_scale = 0.5 makes every odd sum a tie: rounding
    half to even before adding an odd zero point (the reference loops, ONNX
    Runtime) and after it (oneDNN's default) differ by one on each."""
    rng = np.random.default_rng(7)
    xz, yz = 3, 101
    if op == "conv":
        w = rng.integers(-5, 6, (4, 3, 3, 3)).astype(np.int8)
        node = helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                                ["q"], strides=[2, 2], pads=[1, 1, 1, 1])
        shape = [1, 3, 9, 7]
        ws, wz = np.full(4, 0.25, np.float32), np.zeros(4, np.int8)
    else:
        w = rng.integers(-5, 6, (21, 6)).astype(np.int8)
        node = helper.make_node("QLinearMatMul", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                                ["q"])
        shape = [5, 21]
        ws, wz = np.float32(0.25), np.int8(0)
    inits = [const("xs", np.float32(1.0)), const("xz", np.uint8(xz)), const("w", w),
             const("ws", ws), const("wz", wz), const("ys", np.float32(0.5)),
             const("yz", np.uint8(yz))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]), node,
             helper.make_node("Identity", ["q"], ["y"])]
    g = helper.make_graph(nodes, "ties", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    x = rng.integers(-3, 12, shape).astype(np.float32)
    if op == "conv":
        xq = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        acc = np.zeros((1, 4, 5, 4), np.int64)
        for i in range(3):
            for j in range(3):
                patch = xq[:, :, i:i + 9:2, j:j + 7:2]
                acc += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j].astype(np.int64))
    else:
        acc = x.astype(np.int64) @ w.astype(np.int64)
    assert (acc % 2 == 1).sum() > 10   # ties present
    ref = np.clip(np.rint(acc.astype(np.float32) * np.float32(0.5)) + yz, 0, 255).astype(np.uint8)
    (loops,) = run(m, x, level=1)
    (fused,) = run(m, x, level=3, dump=tmp_path)
    assert ("QConv" if op == "conv" else "QMatMul") in last_optimized_graph(tmp_path)
    np.testing.assert_array_equal(loops, ref)
    np.testing.assert_array_equal(fused, ref)
