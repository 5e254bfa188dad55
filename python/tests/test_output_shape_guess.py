# InferenceSession.run at a new input signature: output buffers sized from
# the last run's input -> output dim relation, so a decode loop whose outputs
# grow with its inputs (a concat-form cache) needs no refused first try per
# step; a wrong guess still gives the right outputs.
import numpy as np

import cge
from cge import _session

import onnx  # noqa: F401  (required: conftest.REQUIRED)
from onnx import TensorProto, helper


def concat_model():
    """past [1, 2, n] ++ new [1, 2, s] -> present [1, 2, n + s] (anonymous
    length) and out = new * 2 [1, 2, s]."""
    nodes = [helper.make_node("Concat", ["past", "new"], ["present"], axis=2),
             helper.make_node("Add", ["new", "new"], ["out"])]
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, 2, "n"]),
         helper.make_tensor_value_info("new", TensorProto.FLOAT, [1, 2, "s"])],
        [helper.make_tensor_value_info("present", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return m.SerializeToString()


def counted(monkeypatch):
    calls = {"runs": 0, "refused": 0}
    real = _session.lib.cge_session_run_graph

    def run_graph(*a):
        st = real(*a)
        calls["runs"] += 1
        calls["refused"] += st != 0
        return st
    monkeypatch.setattr(_session.lib, "cge_session_run_graph", run_graph)
    return calls


def test_growing_outputs_need_no_refused_runs(monkeypatch):
    s = cge.InferenceSession(concat_model())
    assert s.get_outputs()[0].shape[2] is None   # the length is not known ahead
    calls = counted(monkeypatch)
    past = np.zeros((1, 2, 0), np.float32)
    steps = [4] + [1] * 8   # a prompt, then one position per step
    for k, seq in enumerate(steps):
        if k == 2:
            early = calls["refused"]
        new = np.arange(2 * seq, dtype=np.float32).reshape(1, 2, seq) + k
        present, out = s.run(None, {"past": past, "new": new})
        np.testing.assert_array_equal(present, np.concatenate([past, new], axis=2))
        np.testing.assert_array_equal(out, new * 2)
        past = present
    assert calls["runs"] - calls["refused"] == len(steps)
    # The first signature has little to go by, and at the prompt -> step
    # change the closest input (new, 4 -> 1) guesses too small; every later
    # step is guessed exactly (without guesses, every step is refused once).
    assert early <= 2 and calls["refused"] == early, (early, calls)


def test_a_guess_too_small_is_retried(monkeypatch):
    s = cge.InferenceSession(concat_model())
    calls = counted(monkeypatch)
    a = np.ones((1, 2, 3), np.float32)
    s.run(None, {"past": a, "new": a})
    calls.update(runs=0, refused=0)
    # Both lengths grow (n 3 -> 5, s 3 -> 9): present is 14, and each
    # changed input alone explains at most 5 + 3 or 9 + 3 of it, so the
    # guess is too small; the refused try reports the shapes, the retry runs.
    b = np.full((1, 2, 5), 2, np.float32)
    c = np.full((1, 2, 9), 3, np.float32)
    present, out = s.run(None, {"past": b, "new": c})
    np.testing.assert_array_equal(present, np.concatenate([b, c], axis=2))
    np.testing.assert_array_equal(out, c * 2)
    assert calls == {"runs": 2, "refused": 1}
