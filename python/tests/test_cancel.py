# Runs that can be stopped: a Loop whose trip count is 10^12 (days of work)
# stops at run(..., timeout=) with the [runtime] "deadline exceeded" error,
# at RunOptions.terminate = True from another thread with "run cancelled",
# and at Ctrl-C with KeyboardInterrupt; each time the session stays usable.
import importlib.util
import os
import signal
import threading
import time

import numpy as np
import pytest

import cge

import onnx  # noqa: F401  (required: conftest.REQUIRED)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_soak():
    spec = importlib.util.spec_from_file_location("soak", os.path.join(ROOT, "scripts", "soak.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _loop_model():
    """y = x + M (a Loop of M iterations adding 1; M is a graph input): the
    soak test's model."""
    return _load_soak().loop_model(None)[0]


def _feed(m):
    return {"M": np.array(m, np.int64), "cond": np.array(True),
            "x": np.arange(4, dtype=np.float32)}


def _still_usable(sess):
    (y,) = sess.run(None, _feed(5))
    np.testing.assert_array_equal(y, np.arange(4, dtype=np.float32) + 5)


def test_timeout_stops_a_loop_of_days():
    sess = cge.InferenceSession(_loop_model())
    _still_usable(sess)
    t0 = time.monotonic()
    with pytest.raises(cge.Error) as e:
        sess.run(None, _feed(10 ** 12), timeout=0.2)
    assert time.monotonic() - t0 < 10
    msg = str(e.value)
    assert e.value.layer == "runtime" and e.value.status == "CGE_ERR_TIMEOUT", msg
    assert "deadline of 200 ms exceeded" in msg and "Loop" in msg and "iteration" in msg, msg
    _still_usable(sess)
    # a deadline that is not reached changes nothing
    (y,) = sess.run(None, _feed(3), timeout=60)
    np.testing.assert_array_equal(y, np.arange(4, dtype=np.float32) + 3)
    with pytest.raises(cge.Error, match="timeout"):
        sess.run(None, _feed(3), timeout=-1)


def test_terminate_from_another_thread():
    sess = cge.InferenceSession(_loop_model())
    ro = cge.RunOptions()
    timer = threading.Timer(0.2, lambda: setattr(ro, "terminate", True))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(cge.Error) as e:
        sess.run(None, _feed(10 ** 12), ro)
    timer.join()
    assert time.monotonic() - t0 < 10
    assert e.value.layer == "runtime" and "run cancelled" in str(e.value), str(e.value)
    # set, it refuses runs; cleared, they run
    with pytest.raises(cge.Error, match="terminate"):
        sess.run(None, _feed(3), ro)
    ro.terminate = False
    (y,) = sess.run(None, _feed(3), ro)
    np.testing.assert_array_equal(y, np.arange(4, dtype=np.float32) + 3)
    assert not ro._runs


def test_ctrl_c_interrupts_a_run():
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("needs Python's own SIGINT handler on the main thread")
    sess = cge.InferenceSession(_loop_model())
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sess.run(None, _feed(10 ** 12))
    timer.join()
    assert time.monotonic() - t0 < 10
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    _still_usable(sess)
