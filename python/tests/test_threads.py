# One InferenceSession run from 8 threads with changing shapes: every run's
# output shapes travel with that run (a retry for a too-small output buffer
# uses its own call's answer, not another thread's "last run"), and results
# equal a single-threaded run.
import threading

import numpy as np

import cge

import onnx  # noqa: F401  (required: conftest.REQUIRED)
from onnx import TensorProto, helper, numpy_helper


def _model(dynamic_dim, value_dependent):
    """y = Relu(x @ w) with x [N, 16] (N symbolic); with value_dependent, also
    z = NonZero(y > 0) [2, ?], whose size only the data gives."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [dynamic_dim, 8])]
    inits = [numpy_helper.from_array(w, "w")]
    if value_dependent:
        nodes += [helper.make_node("Greater", ["y", "zero"], ["pos"]),
                  helper.make_node("NonZero", ["pos"], ["z"])]
        inits.append(numpy_helper.from_array(np.zeros((1,), np.float32), "zero"))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.INT64, [2, None]))
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [dynamic_dim, 16])],
                          outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return m.SerializeToString(), w


def _reference(x, w, value_dependent):
    y = np.maximum(x @ w, 0)
    return [y, np.array(np.nonzero(y > 0), dtype=np.int64)] if value_dependent else [y]


def _hammer(sess, w, value_dependent, runs_per_thread, threads=8):
    rng = np.random.default_rng(11)
    inputs = [rng.standard_normal((1 + k % 7, 16)).astype(np.float32) for k in range(23)]
    errors, mismatches = [], []

    def worker(t):
        for r in range(runs_per_thread):
            x = inputs[(t * 5 + r) % len(inputs)]
            try:
                got = sess.run(None, {"x": x})
            except cge.Error as e:  # a false error is what this test is about
                errors.append(str(e))
                continue
            for a, b in zip(got, _reference(x, w, value_dependent)):
                if a.shape != b.shape or not np.allclose(a, b, rtol=1e-5, atol=1e-5):
                    mismatches.append((x.shape, a.shape, b.shape))

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == [], errors[:3]
    assert mismatches == [], mismatches[:3]


def test_dynamic_batch_from_threads():
    m, w = _model("N", False)
    _hammer(cge.InferenceSession(m), w, False, runs_per_thread=300)


def test_value_dependent_outputs_from_threads():
    m, w = _model("N", True)
    _hammer(cge.InferenceSession(m), w, True, runs_per_thread=150)
