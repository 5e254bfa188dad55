# One InferenceSession run from 8 threads with changing shapes: every run's
# output shapes travel with that run (a retry for a too-small output buffer
# uses its own call's answer, not another thread's "last run"), and results
# equal a single-threaded run. close() against runs in flight.
import threading

import numpy as np
import pytest

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


def _slow_model():
    """y = x @ w @ w @ ... (24 MatMuls of [512, 512]): a run of tens of ms, so
    that other threads' runs are in flight when close() is called."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((512, 512)) / 23).astype(np.float32)
    nodes, prev = [], "x"
    for k in range(24):
        nodes.append(helper.make_node("MatMul", [prev, "w"], ["h%d" % k]))
        prev = "h%d" % k
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    g = helper.make_graph(nodes, "slow",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512, 512])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512, 512])],
                          [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def test_close_waits_for_runs_in_flight():
    """close() while 4 threads run: it returns once their runs in flight have
    ended (each of which gives the right result), every later call raises
    SessionError "closed" (destroying the session under them corrupted the
    heap: there was no close()), and closing again is a no-op."""
    sess = cge.InferenceSession(_slow_model())
    x = np.random.default_rng(5).standard_normal((512, 512)).astype(np.float32)
    (want,) = sess.run(None, {"x": x})
    done, refused, other = [], [], []
    started = threading.Barrier(5)

    def worker():
        started.wait()
        while True:
            try:
                (y,) = sess.run(None, {"x": x})
            except cge.SessionError as e:
                refused.append(str(e))
                return
            except Exception as e:  # noqa: BLE001 - anything else is the failure
                other.append(repr(e))
                return
            done.append(np.array_equal(y, want))

    ts = [threading.Thread(target=worker) for _ in range(4)]
    for t in ts:
        t.start()
    started.wait()
    while not sess._active:  # a run is in flight
        pass
    sess.close()
    assert sess.closed and not sess._active  # nothing in flight once close returns
    for t in ts:
        t.join()
    assert other == []
    assert len(refused) == 4 and all("the session is closed" in m for m in refused), refused
    assert done and all(done)
    with pytest.raises(cge.SessionError, match=r"\[session\] run: the session is closed"):
        sess.run(None, {"x": x})
    sess.close()
    assert [i.name for i in sess.get_inputs()] == ["x"]  # descriptions stay readable


def test_close_timeout_and_context_manager():
    """close(timeout) with a run still in flight raises, refuses new runs at
    once, and the session is released when that run ends; `with` closes."""
    sess = cge.InferenceSession(_slow_model())
    x = np.ones((512, 512), np.float32)
    result = []
    t = threading.Thread(target=lambda: result.append(sess.run(None, {"x": x})[0].shape))
    t.start()
    while not sess._active:
        pass
    with pytest.raises(cge.SessionError, match="1 run still in flight"):
        sess.close(timeout=0)
    with pytest.raises(cge.SessionError, match="closed"):
        sess.run(None, {"x": x})
    t.join()
    assert result == [(512, 512)]
    assert not sess._session  # released by the run that ended last
    with cge.InferenceSession(_slow_model()) as s2:
        assert s2.run(None, {"x": x})[0].shape == (512, 512)
    assert s2.closed
    with pytest.raises(cge.SessionError, match="closed"):
        s2.run(None, {"x": x})


def test_close_from_inside_a_run_is_refused():
    """A profiling callback (inside the run) calling close() gets an error
    instead of waiting for its own run forever; the run completes."""
    so = cge.SessionOptions()
    so.enable_profiling = True
    sess = cge.InferenceSession(_model("N", False)[0], so)
    seen = []
    orig = sess._profile_callback

    def cb(run_index):
        inner = orig(run_index)

        def on_event(ev_p, user):
            if not seen:
                try:
                    sess.close()
                except cge.SessionError as e:
                    seen.append(str(e))
            return inner(ev_p, user)
        return cge._lib.PROFILE_FN(on_event)

    sess._profile_callback = cb
    y = sess.run(None, {"x": np.ones((2, 16), np.float32)})
    assert y[0].shape == (2, 8)
    assert seen and "from inside a run" in seen[0]
    assert not sess.closed
    sess.close()
