# If whose output shape is known only from the values the taken branch
# computes (NonZero, NonMaxSuppression), and If whose branches differ in rank
# (torchvision's detectors: a squeezed [N] against an [N,1]): hand-built
# models against NumPy.
import numpy as np
import pytest

import cge

import onnx
from onnx import TensorProto, helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def const(name, a):
    a = np.asarray(a)
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name + "_v", onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape, a.ravel()))


def model(nodes, outputs, opset=14):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [6]),
                                       helper.make_tensor_value_info("t", F, [])],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def branch(name, nodes, out, elem):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, elem, None)])


def cond_nodes():
    # sum(x) > 0: known only at run time
    return [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), const("zero", np.float32(0)),
            helper.make_node("Greater", ["s", "zero"], ["c"])]


def test_branch_output_shape_from_values():
    # then: x[x > t] (a NonZero inside the branch); else: an empty [0]
    then = branch("then", [helper.make_node("Greater", ["x", "t"], ["m"]),
                           helper.make_node("NonZero", ["m"], ["nz"]),
                           const("ax", np.array([0], np.int64)),
                           helper.make_node("Squeeze", ["nz", "ax"], ["idx"]),
                           helper.make_node("Gather", ["x", "idx"], ["sel"])], "sel", F)
    other = branch("else", [const("empty", np.zeros([0], np.float32))], "empty", F)
    m = model(cond_nodes() + [helper.make_node("If", ["c"], ["y"], then_branch=then,
                                               else_branch=other)], [("y", F)])
    s = cge.InferenceSession(m.SerializeToString())
    for x, t in [([1, -2, 3, 0.5, 4, -1], 0.7), ([1, 2, 3, 4, 5, 6], 9.0), ([-1] * 6, 0.0)]:
        x, t = np.array(x, np.float32), np.float32(t)
        want = x[x > t] if x.sum() > 0 else np.zeros([0], np.float32)
        (y,) = s.run(None, {"x": x, "t": t})
        np.testing.assert_array_equal(y, want)


def nested_rank_model():
    # torchvision's batched NMS keep: an inner If on Equal(Shape(k)[1], 1)
    # squeezes [K,1] to [K] or passes it on; the outer If returns an empty [0]
    # otherwise. The inner condition is known from shapes alone (K is not).
    inner = helper.make_node(
        "If", ["one"], ["keep"],
        then_branch=branch("sq", [const("a1", np.array([1], np.int64)),
                                  helper.make_node("Squeeze", ["k", "a1"], ["ks"])], "ks", I64),
        else_branch=branch("id", [helper.make_node("Identity", ["k"], ["ki"])], "ki", I64))
    then = branch("then", [helper.make_node("Greater", ["x", "t"], ["m"]),
                           helper.make_node("NonZero", ["m"], ["nz"]),
                           helper.make_node("Transpose", ["nz"], ["k"], perm=[1, 0]),
                           helper.make_node("Shape", ["k"], ["ksh"]),
                           const("i1", np.int64(1)),
                           helper.make_node("Gather", ["ksh", "i1"], ["d1"]),
                           const("n1", np.int64(1)),
                           helper.make_node("Equal", ["d1", "n1"], ["one"]), inner], "keep", I64)
    other = branch("else", [const("none", np.zeros([0], np.int64))], "none", I64)
    return model(cond_nodes() + [helper.make_node("If", ["c"], ["y"], then_branch=then,
                                                  else_branch=other)], [("y", I64)])


def test_nested_if_with_branches_of_different_rank_folds():
    s = cge.InferenceSession(nested_rank_model().SerializeToString())
    for x, t in [([1, -2, 3, 0.5, 4, -1], 0.7), ([-1] * 6, 0.0), ([1] * 6, 5.0)]:
        x, t = np.array(x, np.float32), np.float32(t)
        want = np.nonzero(x > t)[0] if x.sum() > 0 else np.zeros([0], np.int64)
        (y,) = s.run(None, {"x": x, "t": t})
        assert y.shape == want.shape
        np.testing.assert_array_equal(y, want)


def test_branches_of_different_rank_on_a_run_time_condition_is_a_clear_error():
    # [6] against [1,6] on sum(x) > 0: no one rank serves both
    then = branch("then", [helper.make_node("Identity", ["x"], ["xi"])], "xi", F)
    other = branch("else", [const("a0", np.array([0], np.int64)),
                            helper.make_node("Unsqueeze", ["x", "a0"], ["xu"])], "xu", F)
    m = model(cond_nodes() + [helper.make_node("If", ["c"], ["y"], name="pick", then_branch=then,
                                               else_branch=other)], [("y", F)])
    with pytest.raises(Exception) as e:
        s = cge.InferenceSession(m.SerializeToString())
        s.run(None, {"x": np.ones(6, np.float32), "t": np.float32(0)})
    msg = str(e.value)
    assert "[meta]" in msg and "'pick'" in msg and "rank" in msg, msg


def test_branches_of_different_rank_on_a_constant_condition_fold():
    then = branch("then", [helper.make_node("Identity", ["x"], ["xi"])], "xi", F)
    other = branch("else", [const("a0", np.array([0], np.int64)),
                            helper.make_node("Unsqueeze", ["x", "a0"], ["xu"])], "xu", F)
    for flag in (True, False):
        m = model([const("c", np.array(flag)),
                   helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                  [("y", F)])
        x = np.arange(6, dtype=np.float32)
        (y,) = cge.InferenceSession(m.SerializeToString()).run(None, {"x": x, "t": np.float32(0)})
        np.testing.assert_array_equal(y, x if flag else x[None])


def test_channels_last_pool_in_a_value_dependent_graph():
    # A graph with a value-dependent shape runs node by node and never goes
    # through partition, so its convolutions stay NCHW: a MaxPool after them
    # must not become the NHWC pool (it read NCHW bytes as NHWC: RetinaNet's
    # and Faster R-CNN's backbones were wrong in eager runs).
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    w = (rng.standard_normal((16, 3, 7, 7)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[7, 7], pads=[3] * 4,
                              strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[3, 3], pads=[1] * 4,
                              strides=[2, 2]),
             helper.make_node("NonZero", ["x"], ["nz"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [1, 3, 32, 32])],
                          [helper.make_tensor_value_info("y", F, None),
                           helper.make_tensor_value_info("nz", I64, None)],
                          [helper.make_tensor("w", F, w.shape, w.ravel())])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    y, nz = cge.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    c = np.zeros((1, 16, 16, 16), np.float64)
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (3, 3), (3, 3)))
    for i in range(16):
        for j in range(16):
            c[0, :, i, j] = np.tensordot(w, xp[:, 2 * i:2 * i + 7, 2 * j:2 * j + 7], 3)
    r = np.pad(np.maximum(c, 0), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want = np.array([[[[r[0, k, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max() for j in range(8)]
                       for i in range(8)] for k in range(16)]])
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(nz, np.array(np.nonzero(x)))
