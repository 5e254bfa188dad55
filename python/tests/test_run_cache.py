# The run path's per-signature cache of C tensors (_session._RunEntry): runs
# that reuse it read the arrays given now (never a previous run's), write fresh
# outputs, follow shape changes, and still raise the general path's errors.
import threading

import numpy as np
import pytest

import cge
from onnx import TensorProto, helper


def model(nodes, inputs, outputs, opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


@pytest.fixture(scope="module")
def add():
    """y = a + b, z = a * b over [N, 4] float tensors."""
    return cge.InferenceSession(model(
        [helper.make_node("Add", ["a", "b"], ["y"]), helper.make_node("Mul", ["a", "b"], ["z"])],
        [vi("a", TensorProto.FLOAT, ["N", 4]), vi("b", TensorProto.FLOAT, ["N", 4])],
        [vi("y", TensorProto.FLOAT, ["N", 4]), vi("z", TensorProto.FLOAT, ["N", 4])]))


def rand(rng, n):
    return rng.standard_normal((n, 4)).astype(np.float32)


def test_shapes_a_b_a_and_new_arrays(add):
    rng = np.random.default_rng(0)
    kept = []
    for n in (2, 5, 2, 2, 5, 0, 2):
        a, b = rand(rng, n), rand(rng, n)   # new arrays of a shape seen before
        y, z = add.run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(y, a + b)
        np.testing.assert_array_equal(z, a * b)
        (only_z,) = add.run(["z"], {"a": a, "b": b})
        np.testing.assert_array_equal(only_z, a * b)
        kept.append((a, b, y, z))
    # Earlier results are the caller's: later runs never wrote into them.
    for a, b, y, z in kept:
        np.testing.assert_array_equal(y, a + b)
        np.testing.assert_array_equal(z, a * b)


def test_same_array_changed_in_place(add):
    a, b = np.ones((3, 4), np.float32), np.full((3, 4), 2, np.float32)
    for k in range(4):
        a[...] = k
        y, _ = add.run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(y, np.full((3, 4), k + 2, np.float32))
    # the same arrays under swapped names
    y, z = add.run(None, {"a": b, "b": a})
    np.testing.assert_array_equal(y, a + b)


def test_views_and_non_contiguous_inputs(add):
    rng = np.random.default_rng(1)
    big = rng.standard_normal((6, 8)).astype(np.float32)
    b = rand(rng, 3)
    for a in (big[:3, :4], big[3:, 4:], big[::2, ::2], np.asfortranarray(big[:3, 2:6])):
        y, _ = add.run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(y, a + b)
    # OrtValues go through the same signature check
    y, _ = add.run(None, {"a": cge.OrtValue(big[:3, :4].copy()), "b": b})
    np.testing.assert_array_equal(y, big[:3, :4] + b)


def test_errors_after_cached_runs(add):
    a = np.ones((2, 4), np.float32)
    add.run(None, {"a": a, "b": a})
    add.run(None, {"a": a, "b": a})
    with pytest.raises(cge.Error) as e:
        add.run(None, {"a": a.astype(np.float64), "b": a})
    assert e.value.message.startswith("[")
    with pytest.raises(cge.Error) as e:
        add.run(None, {"a": a})
    assert e.value.layer == "session" and "inputs" in e.value.message
    with pytest.raises(cge.Error) as e:
        add.run(["nope"], {"a": a, "b": a})
    assert "nope" in e.value.message and e.value.layer == "session"
    y, _ = add.run(None, {"a": a, "b": a})   # still fine afterwards
    np.testing.assert_array_equal(y, a + a)


def test_value_dependent_shape_on_a_seen_signature():
    # NonZero: the same input signature gives outputs of other shapes.
    s = cge.InferenceSession(model([helper.make_node("NonZero", ["x"], ["y"])],
                                   [vi("x", TensorProto.FLOAT, [6])],
                                   [vi("y", TensorProto.INT64, None)]))
    for x in ([0, 1, 0, 2, 0, 3], [0, 1, 0, 2, 0, 3], [1, 1, 1, 1, 1, 1], [0] * 6,
              [0, 1, 0, 2, 0, 3], [0, 0, 0, 0, 0, 5]):
        x = np.array(x, np.float32)
        (y,) = s.run(None, {"x": x})
        np.testing.assert_array_equal(y, np.array(np.nonzero(x)))


def test_concurrent_runs_of_one_signature(add):
    rng = np.random.default_rng(2)
    data = [(rand(rng, 4), rand(rng, 4)) for _ in range(4)]
    bad = []

    def worker(a, b):
        for _ in range(200):
            y, z = add.run(None, {"a": a, "b": b})
            if not (np.array_equal(y, a + b) and np.array_equal(z, a * b)):
                bad.append(1)
    ts = [threading.Thread(target=worker, args=d) for d in data]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad


def test_io_binding_rebound_arrays(add):
    rng = np.random.default_rng(3)
    a, b = rand(rng, 2), rand(rng, 2)
    y1, z1 = np.empty((2, 4), np.float32), np.empty((2, 4), np.float32)
    io = add.io_binding()
    io.bind_cpu_input("a", a)
    io.bind_cpu_input("b", b)
    io.bind_ortvalue_output("y", cge.OrtValue(y1))
    io.bind_ortvalue_output("z", cge.OrtValue(z1))
    add.run_with_iobinding(io)
    np.testing.assert_array_equal(y1, a + b)
    a[...] = 7                                  # same buffer, new values
    add.run_with_iobinding(io)
    np.testing.assert_array_equal(y1, a + b)
    a2 = rand(rng, 2)                           # another array of the same shape
    io.bind_cpu_input("a", a2)
    add.run_with_iobinding(io)
    np.testing.assert_array_equal(y1, a2 + b)
    np.testing.assert_array_equal(z1, a2 * b)
    y2 = np.zeros((2, 4), np.float32)           # another output buffer
    before = y1.copy()
    io.bind_ortvalue_output("y", cge.OrtValue(y2))
    io.bind_cpu_input("a", a)
    add.run_with_iobinding(io)
    np.testing.assert_array_equal(y2, a + b)
    np.testing.assert_array_equal(y1, before)
    # a buffer of the wrong shape is still the [session] error
    io.bind_ortvalue_output("y", cge.OrtValue(np.empty((3, 4), np.float32)))
    with pytest.raises(cge.Error) as e:
        add.run_with_iobinding(io)
    assert "output 'y'" in e.value.message and e.value.layer == "session"
    # and a read-only one
    ro = np.empty((2, 4), np.float32)
    ro.flags.writeable = False
    io.bind_ortvalue_output("y", cge.OrtValue(y1))
    add.run_with_iobinding(io)
    io.bind_ortvalue_output("y", cge.OrtValue(ro))
    with pytest.raises(cge.Error) as e:
        add.run_with_iobinding(io)
    assert "writable" in e.value.message


def test_inputs_of_other_signatures_are_not_held(add):
    import gc
    import weakref
    rng = np.random.default_rng(4)
    refs = []
    for n in (1, 2, 3, 4, 5):
        for _ in range(3):   # the second run keeps the signature's tensors
            a, b = rand(rng, n), rand(rng, n)
            add.run(None, {"a": a, "b": b})
            refs.append((n, weakref.ref(a)))
            del a, b
    gc.collect()
    alive = [n for n, r in refs if r() is not None]
    assert alive in ([], [5]), alive   # at most the last run's


def test_output_shapes_remembered_for_a_bounded_number_of_signatures(monkeypatch):
    """A loop that meets a new signature at every run (a decode step: every
    cache a row longer) keeps the output shapes of the last _MAX_SHAPES
    signatures only, and its runs stay right past the bound (the shapes
    forgotten are guessed again from the last run)."""
    from cge import _session
    monkeypatch.setattr(_session, "_MAX_SHAPES", 8)
    s = cge.InferenceSession(model(
        [helper.make_node("Concat", ["past", "new"], ["present"], axis=0)],
        [vi("past", TensorProto.FLOAT, ["P", 4]), vi("new", TensorProto.FLOAT, [1, 4])],
        [vi("present", TensorProto.FLOAT, ["Q", 4])]))
    rng = np.random.default_rng(5)
    past = np.zeros((0, 4), np.float32)
    rows = []
    for _ in range(30):
        row = rand(rng, 1)
        rows.append(row)
        (past,) = s.run(None, {"past": past, "new": row})
        assert len(s._shape_cache) <= 8
    np.testing.assert_array_equal(past, np.concatenate(rows))
    # a forgotten signature runs again right
    (again,) = s.run(None, {"past": np.zeros((3, 4), np.float32), "new": rows[0]})
    np.testing.assert_array_equal(again, np.concatenate([np.zeros((3, 4), np.float32), rows[0]]))
