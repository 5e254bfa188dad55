# A new input signature whose inputs have the names, dtypes and ranks of an
# earlier run's (a decode step's: each cache a row longer) reuses that run's
# C tensors with the new shapes (InferenceSession._run_resized): every output
# equal to a fresh session's at each length, one C call per step, and the
# general path taken only for the first signature of a feed.
import numpy as np

import cge
from cge import _session

import onnx  # noqa: F401  (required: conftest.REQUIRED)
from onnx import TensorProto, helper


def cache_model():
    """past [1, 2, n] ++ new [1, 2, 1] -> present [1, 2, n + 1], and
    s = ReduceSum(present * 0.5, axis 2) [1, 2]."""
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    nodes = [helper.make_node("Concat", ["past", "new"], ["present"], axis=2),
             helper.make_node("Mul", ["present", "half"], ["scaled"]),
             helper.make_node("ReduceSum", ["scaled"], ["s"], axes=[2], keepdims=0)]
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, 2, "n"]),
         helper.make_tensor_value_info("new", TensorProto.FLOAT, [1, 2, 1])],
        [helper.make_tensor_value_info("present", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, None)], [half])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    return m.SerializeToString()


def test_decode_loop_reuses_tensors_and_matches_fresh_sessions(monkeypatch):
    model = cache_model()
    steps = 24
    news = [(np.arange(2, dtype=np.float32).reshape(1, 2, 1) + t) * 0.25 for t in range(steps)]
    # The references first: a fresh session per length (its first run).
    refs, past = [], np.zeros((1, 2, 0), np.float32)
    for t in range(steps):
        refs.append(cge.InferenceSession(model).run(None, {"past": past, "new": news[t]}))
        past = refs[-1][0]
    s = cge.InferenceSession(model)
    calls = {"resized": 0, "c": 0}
    real_resized = _session.InferenceSession._run_resized
    real_run = _session.lib.cge_session_run_graph

    def resized(self, *a):
        r = real_resized(self, *a)
        calls["resized"] += r is not None
        return r

    def run_graph(*a):
        calls["c"] += 1
        return real_run(*a)
    monkeypatch.setattr(_session.InferenceSession, "_run_resized", resized)
    monkeypatch.setattr(_session.lib, "cge_session_run_graph", run_graph)
    past = np.zeros((1, 2, 0), np.float32)
    for t in range(steps):
        present, sm = s.run(None, {"past": past, "new": news[t]})
        assert present.shape == (1, 2, t + 1)
        np.testing.assert_array_equal(present, refs[t][0])
        np.testing.assert_array_equal(sm, refs[t][1])
        past = present
    # The first step takes the general path; the rest copy its tensors.
    assert calls["resized"] == steps - 1
    # One C call per step but the first (its outputs' shapes unknown:
    # refused once, then run): no refused first try at a new length.
    assert calls["c"] == steps + 1


def test_output_subsets_keep_their_own_tensors():
    """Runs asking for other outputs (a subset, another order) at new lengths
    reuse only tensors made for the same request: each result is right."""
    model = cache_model()
    s = cge.InferenceSession(model)
    past = np.zeros((1, 2, 0), np.float32)
    for t in range(12):
        new = np.full((1, 2, 1), t + 1, np.float32)
        names = [None, ["s"], ["s", "present"]][t % 3]
        got = s.run(names, {"past": past, "new": new})
        present = np.concatenate([past, new], axis=2)
        want = {"present": present, "s": (present * 0.5).sum(axis=2)}
        order = names or ["present", "s"]
        assert len(got) == len(order)
        for n, g in zip(order, got):
            np.testing.assert_allclose(g, want[n], rtol=1e-6)
        past = present
