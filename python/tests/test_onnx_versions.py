# Older opsets through the importer's version converters: attributes that
# later became inputs (axes, split, starts/ends), Softmax's 2-D coercion
# before opset 13, and elementwise ops below their current definition.
import numpy as np
import pytest

import cge

import onnx  # noqa: F401  (required: conftest.REQUIRED)
from onnx import TensorProto, helper

F = TensorProto.FLOAT


def run(node, inputs, out_shape, opset, n_out=1):
    ins = [helper.make_tensor_value_info(n, F, list(a.shape)) for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(o, F, None) for o in node.output[:n_out]]
    g = helper.make_graph([node], "g", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    s = cge.InferenceSession(m.SerializeToString())
    return s.run(None, inputs)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7.0


@pytest.mark.parametrize("opset", [11, 12])
def test_reduce_axes_attribute(opset):
    for op, fn in (("ReduceSum", np.sum), ("ReduceMean", np.mean), ("ReduceMax", np.max)):
        node = helper.make_node(op, ["x"], ["y"], axes=[0, 2], keepdims=1)
        (y,) = run(node, {"x": X}, None, opset)
        np.testing.assert_allclose(y, fn(X, axis=(0, 2), keepdims=True), rtol=1e-6)


def test_reduce_mean_opset13_axes_attribute():
    # ReduceMean 13..17 still has the attribute; cge's current definition takes an input.
    (y,) = run(helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0), {"x": X}, None, 13)
    np.testing.assert_allclose(y, X.mean(axis=1), rtol=1e-6)


def test_squeeze_unsqueeze_axes_attribute():
    (y,) = run(helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 3]), {"x": X}, None, 11)
    assert y.shape == (1, 2, 3, 1, 4)
    x1 = X.reshape(2, 1, 3, 4)
    (y,) = run(helper.make_node("Squeeze", ["x"], ["y"], axes=[1]), {"x": x1}, None, 11)
    np.testing.assert_array_equal(y, X)


def test_split_attribute():
    node = helper.make_node("Split", ["x"], ["a", "b"], axis=2, split=[1, 3])
    a, b = run(node, {"x": X}, None, 11, n_out=2)
    np.testing.assert_array_equal(a, X[:, :, :1])
    np.testing.assert_array_equal(b, X[:, :, 1:])


def test_slice_attributes_opset9():
    node = helper.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, 2], axes=[1, 2])
    (y,) = run(node, {"x": X}, None, 9)
    np.testing.assert_array_equal(y, X[:, 1:3, 0:2])


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_before_13_is_2d(op):
    (y,) = run(helper.make_node(op, ["x"], ["y"], axis=1), {"x": X}, None, 11)
    flat = X.reshape(2, 12)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    ref = (e / e.sum(axis=1, keepdims=True)).reshape(X.shape)
    np.testing.assert_allclose(y, np.log(ref) if op == "LogSoftmax" else ref, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("opset", [7, 13])
def test_binary_ops_below_current_version(opset):
    b = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                   ("Div", np.divide)):
        (y,) = run(helper.make_node(op, ["x", "b"], ["y"]), {"x": X, "b": b}, None, opset)
        np.testing.assert_allclose(y, fn(X, b), rtol=1e-6)


def test_reshape_opset5():
    shape = helper.make_tensor("s", TensorProto.INT64, [2], [6, 4])
    ins = [helper.make_tensor_value_info("x", F, [2, 3, 4])]
    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"])], "g", ins,
                          [helper.make_tensor_value_info("y", F, None)], [shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 5)])
    (y,) = cge.InferenceSession(m.SerializeToString()).run(None, {"x": X})
    np.testing.assert_array_equal(y, X.reshape(6, 4))


def test_quantize_dequantize_opset10():
    # QuantizeLinear / DequantizeLinear 10 are 13's per-tensor case.
    x = np.array([-1.0, 0.0, 0.26, 1.0, 300.0], dtype=np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["y"])]
    inits = [helper.make_tensor("scale", F, [], [0.5]),
             helper.make_tensor("zp", TensorProto.UINT8, [], [10])]
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", F, [5])],
                          [helper.make_tensor_value_info("q", TensorProto.UINT8, [5]),
                           helper.make_tensor_value_info("y", F, [5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    q, y = cge.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    want_q = np.clip(np.rint(x / 0.5) + 10, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_allclose(y, (want_q.astype(np.float32) - 10) * 0.5)


def test_opset_newer_than_supported_is_refused():
    # Opset 18 is the newest the importer knows; 19 could change what an
    # operator means, so it is a [converter] error naming the opset.
    (y,) = run(helper.make_node("Relu", ["x"], ["y"]), {"x": X}, None, 18)
    np.testing.assert_allclose(y, np.maximum(X, 0))
    with pytest.raises(cge.Error) as e:
        run(helper.make_node("Relu", ["x"], ["y"]), {"x": X}, None, 19)
    assert e.value.layer == "converter"
    assert "opset 19" in str(e.value) and "up to 18" in str(e.value)
