"""The Python mirror of cge_session_graph_stats has the C struct's size: the
library writes no byte past it (a shorter mirror lets it write over the heap)."""
import ctypes

import numpy as np
from onnx import TensorProto, helper

import cge
from cge import _lib


def test_graph_stats_mirror_has_the_c_size(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    path = str(tmp_path / "relu.onnx")
    import onnx
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    sess = cge.InferenceSession(path)
    for n in (1, 2, 3):
        sess.run(None, {"x": np.ones((n, 4), np.float32)})
    size = ctypes.sizeof(_lib.GraphStats)
    buf = (ctypes.c_uint8 * (size + 64))(*([0xA5] * (size + 64)))
    fn = _lib.lib.cge_session_get_graph_stats
    st = fn(sess._session, 1, ctypes.cast(buf, ctypes.POINTER(_lib.GraphStats)))
    assert st == 0
    assert bytes(buf[size:]) == b"\xa5" * 64
    stats = ctypes.cast(buf, ctypes.POINTER(_lib.GraphStats)).contents
    assert stats.specializations == 3 and stats.shape_program
