# ONNX import fixes the model zoo (scripts/zoo.py) found: a Concat wider than
# the runtime's 64-input node tables (ssdlite's anchors) is imported as a
# tree of Concats; in every run mode, also where shapes depend on values
# (eager).
import numpy as np
import pytest

import cge

import onnx  # noqa: F401  (required: conftest.REQUIRED)
from onnx import TensorProto, helper

F = TensorProto.FLOAT


@pytest.mark.parametrize("n,axis", [(65, 0), (150, -1), (4100, 1)])
def test_wide_concat(n, axis):
    xs = [np.full((2, 1 + i % 3), i, np.float32) for i in range(n)]
    if axis == 0:
        xs = [np.full((1 + i % 3, 2), i, np.float32) for i in range(n)]
    names = ["x%d" % i for i in range(n)]
    node = helper.make_node("Concat", names, ["y"], axis=axis)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(nm, F, list(x.shape))
                                        for nm, x in zip(names, xs)],
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    (y,) = cge.InferenceSession(m.SerializeToString()).run(None, dict(zip(names, xs)))
    np.testing.assert_array_equal(y, np.concatenate(xs, axis=axis))


def test_wide_concat_of_value_dependent_shapes():
    # Shapes known only at run time (NonZero) run eagerly: the tree holds there too.
    n = 70
    x = helper.make_tensor_value_info("x", F, [5])
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),
             helper.make_node("Cast", ["nz"], ["nzf"], to=F)]
    names = []
    for i in range(n):
        nodes.append(helper.make_node("Identity", ["nzf"], ["c%d" % i]))
        names.append("c%d" % i)
    nodes.append(helper.make_node("Concat", names, ["y"], axis=1))
    g = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    xv = np.array([0, 1, 0, 2, 3], np.float32)
    (y,) = cge.InferenceSession(m.SerializeToString()).run(None, {"x": xv})
    ref = np.concatenate([np.nonzero(xv)[0][None].astype(np.float32)] * n, axis=1)
    np.testing.assert_array_equal(y, ref)
