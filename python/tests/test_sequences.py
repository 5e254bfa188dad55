# Sequences and optionals (issue 13): lists of arrays in and out, None for an
# optional without a value, the compile-time folding of sequences whose
# elements are known into plain tensors (which then run as a plan or a
# replay, not node by node), and the errors of misuse, each naming its layer.
import os
import subprocess
import tempfile

import numpy as np
import pytest

import cge

import onnx
from onnx import TensorProto, helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def seq_info(name, elem=F, shape=None):
    return helper.make_value_info(
        name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, shape)))


def opt_info(name, inner):
    return helper.make_value_info(name, helper.make_optional_type_proto(inner))


def session(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return cge.InferenceSession(m.SerializeToString())


def const(name, a):
    a = np.asarray(a)
    return helper.make_tensor(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape,
                              a.ravel())


def tensor(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


# ---- lists in, lists out --------------------------------------------------------

def test_sequence_in_and_out():
    # insert at a run-time position, then erase the first element
    s = session([helper.make_node("SequenceInsert", ["s", "t", "p"], ["u"]),
                 helper.make_node("SequenceErase", ["u", "zero"], ["v"]),
                 helper.make_node("SequenceLength", ["v"], ["n"])],
                [seq_info("s"), tensor("t", F, [1, 2]), tensor("p", I64, [])],
                [seq_info("v"), tensor("n", I64, [])], [const("zero", np.int64(0))])
    assert s.get_inputs()[0].type == "seq(tensor(float))"
    assert s.get_outputs()[0].type == "seq(tensor(float))"
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(4, np.float32)
    t = np.full((1, 2), 7, np.float32)
    v, n = s.run(None, {"s": [a, b], "t": t, "p": np.int64(-1)})
    assert isinstance(v, list) and len(v) == 2 and int(n) == 2
    np.testing.assert_array_equal(v[0], t)      # [a, t, b] without a
    np.testing.assert_array_equal(v[1], b)
    # the same session, another length and other shapes (no recompile needed)
    v, n = s.run(None, {"s": [b, b, a], "t": t, "p": np.int64(0)})
    assert [x.shape for x in v] == [(4,), (4,), (2, 3)] and int(n) == 3
    assert s.last_run_mode() == "eager"


def test_empty_sequence_input_and_concat():
    s = session([helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1, new_axis=1)],
                [seq_info("s", F, [2, 3])], [tensor("y", F, None)])
    xs = [np.random.default_rng(i).standard_normal((2, 3)).astype(np.float32) for i in range(4)]
    (y,) = s.run(None, {"s": xs})
    np.testing.assert_array_equal(y, np.stack(xs, axis=1))
    with pytest.raises(cge.Error, match="empty") as e:
        s.run(None, {"s": []})
    assert e.value.layer == "meta"


def test_split_to_sequence_runtime_and_sequence_at_negative():
    # split sizes known only at run time: the sequence stays a run-time object
    s = session([helper.make_node("SplitToSequence", ["x", "k"], ["s"], axis=1),
                 helper.make_node("SequenceAt", ["s", "i"], ["y"])],
                [tensor("x", F, [2, 7]), tensor("k", I64, []), tensor("i", I64, [])],
                [tensor("y", F, None)])
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    (y,) = s.run(None, {"x": x, "k": np.int64(3), "i": np.int64(-1)})
    np.testing.assert_array_equal(y, x[:, 6:])  # pieces of 3, 3, 1: the last
    (y,) = s.run(None, {"x": x, "k": np.int64(2), "i": np.int64(1)})
    np.testing.assert_array_equal(y, x[:, 2:4])
    with pytest.raises(cge.Error, match=r"position 3 is out of range .*valid: -3\.\.2") as e:
        s.run(None, {"x": x, "k": np.int64(3), "i": np.int64(3)})
    assert e.value.layer == "meta"


# ---- optionals ------------------------------------------------------------------------

def test_optional_none_and_value():
    inner = helper.make_tensor_type_proto(F, [2])
    s = session([helper.make_node("OptionalHasElement", ["o"], ["h"]),
                 helper.make_node("Identity", ["o"], ["o2"])],
                [opt_info("o", inner)], [tensor("h", TensorProto.BOOL, []), opt_info("o2", inner)])
    assert s.get_inputs()[0].type == "optional(tensor(float))"
    h, o2 = s.run(None, {"o": None})
    assert not bool(h) and o2 is None
    h, o2 = s.run(None, {"o": np.float32([1, 2])})
    assert bool(h)
    np.testing.assert_array_equal(o2, [1, 2])


def test_optional_get_element_of_none_is_an_error():
    inner = helper.make_tensor_type_proto(F, [2])
    s = session([helper.make_node("OptionalGetElement", ["o"], ["y"])], [opt_info("o", inner)],
                [tensor("y", F, [2])])
    np.testing.assert_array_equal(s.run(None, {"o": np.float32([3, 4])})[0], [3, 4])
    with pytest.raises(cge.Error, match="holds no value") as e:
        s.run(None, {"o": None})
    assert e.value.layer == "meta"


def test_optional_sequence_output():
    # Optional(seq) without an input: the type attribute says what it would hold
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))
    s = session([helper.make_node("Optional", [], ["o"], type=seq_t),
                 helper.make_node("SequenceConstruct", ["x", "x"], ["q"]),
                 helper.make_node("Optional", ["q"], ["o2"])],
                [tensor("x", F, [3])], [opt_info("o", seq_t), opt_info("o2", seq_t)])
    o, o2 = s.run(None, {"x": np.float32([1, 2, 3])})
    assert o is None and len(o2) == 2
    np.testing.assert_array_equal(o2[1], [1, 2, 3])


# ---- folding: sequences of known elements become tensors ------------------------------------

def test_static_sequences_fold_to_tensors():
    # SplitToSequence -> SequenceAt / ConcatFromSequence / SequenceLength with
    # everything known at compile time: no sequence is left, the graph runs as
    # a plan (replayed from its second run), not node by node.
    s = session([helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
                 helper.make_node("SequenceAt", ["s", "m1"], ["last"]),
                 helper.make_node("SequenceInsert", ["s", "last", "zero"], ["s2"]),
                 helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=0, new_axis=1),
                 helper.make_node("SequenceLength", ["s2"], ["n"])],
                [tensor("x", F, [3, 2])], [tensor("y", F, None), tensor("n", I64, None)],
                [const("m1", np.int64(-1)), const("zero", np.int64(0))])
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for _ in range(2):
        y, n = s.run(None, {"x": x})
        np.testing.assert_array_equal(y, np.stack([x[2], x[0], x[1], x[2]]))
        assert int(n) == 4
    assert s.last_run_mode() == "replay"


def test_folding_is_visible_in_the_compiler_dump():
    # CGE_DUMP_DIR writes the graph after every pass: after fold_sequences
    # the SequenceConstruct/SequenceAt pair is gone.
    g = helper.make_graph([helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
                           helper.make_node("SequenceAt", ["s", "one"], ["y"])], "g",
                          [tensor("a", F, [2]), tensor("b", F, [2])], [tensor("y", F, [2])],
                          [const("one", np.int64(1))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx")
        onnx.save(m, path)
        script = ("import cge, numpy as np; s = cge.InferenceSession(%r); "
                  "print(s.run(None, {'a': np.float32([1, 2]), 'b': np.float32([3, 4])})[0])"
                  % path)
        pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        env = dict(os.environ, CGE_DUMP_DIR=os.path.join(d, "dump"),
                   PYTHONPATH=pkg + os.pathsep + os.environ.get("PYTHONPATH", ""))
        out = subprocess.run(["/usr/bin/python3", "-c", script], env=env, capture_output=True,
                             text=True, check=True).stdout
        assert "[3. 4.]" in out
        dumps = sorted(os.listdir(os.path.join(d, "dump")))
        after = [f for f in dumps if "fold_sequences" in f]
        assert after, dumps
        text = open(os.path.join(d, "dump", after[0])).read()
        # node boxes are labelled "<op>\n<name>": the SequenceAt became an
        # Identity of element 1, and no sequence op is left
        assert 'label="Identity\\nSequenceAt' in text, text
        assert 'label="SequenceAt' not in text and 'label="SequenceConstruct' not in text


# ---- control flow carrying sequences ------------------------------------------------------

def test_loop_builds_a_sequence():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Cast", ["i"], ["f"], to=F),
         helper.make_node("SequenceInsert", ["s_in", "f"], ["s_out"])],
        "body", [tensor("i", I64, []), tensor("c", TensorProto.BOOL, []), seq_info("s_in")],
        [tensor("c_out", TensorProto.BOOL, []), seq_info("s_out")])
    s = session([helper.make_node("SequenceEmpty", [], ["e"], dtype=F),
                 helper.make_node("Loop", ["m", "", "e"], ["r"], body=body)],
                [tensor("m", I64, [])], [seq_info("r")])
    (r,) = s.run(None, {"m": np.int64(4)})
    assert [float(v) for v in r] == [0.0, 1.0, 2.0, 3.0]
    (r,) = s.run(None, {"m": np.int64(0)})
    assert r == []


# ---- misuse -------------------------------------------------------------------------------

def test_errors_name_their_layer():
    s = session([helper.make_node("SequenceInsert", ["s", "t"], ["u"])],
                [seq_info("s"), tensor("t", F, [2])], [seq_info("u")])
    t = np.zeros(2, np.float32)
    # an element of another dtype than the sequence's
    with pytest.raises(cge.Error, match="sequence of int32; the graph declares a sequence of "
                                        "float32") as e:
        s.run(None, {"s": [np.zeros(2, np.int32)], "t": t})
    assert e.value.layer == "session"
    with pytest.raises(cge.Error, match="element 1 is int64; element 0 is float32") as e:
        s.run(None, {"s": [t, np.zeros(2, np.int64)], "t": t})
    assert e.value.layer == "session"
    with pytest.raises(cge.Error, match="give a list of arrays") as e:
        s.run(None, {"s": t, "t": t})
    assert e.value.layer == "session"
    # inserting a tensor of another dtype
    with pytest.raises(cge.Error, match="the tensor is float32; the sequence holds int64") as e:
        s2 = session([helper.make_node("SequenceInsert", ["s", "t"], ["u"])],
                     [seq_info("s", I64), tensor("t", F, [2])], [seq_info("u", I64)])
        s2.run(None, {"s": [np.zeros(1, np.int64)], "t": t})
    assert e.value.layer == "meta"
    # a sequence where an operator takes tensors
    s3 = session([helper.make_node("Relu", ["s"], ["y"])], [seq_info("s")], [tensor("y", F, None)])
    with pytest.raises(cge.Error, match="input 0 \\('X'\\) is a sequence of float32; Relu takes a "
                                        "tensor there") as e:
        s3.run(None, {"s": [t]})
    assert e.value.layer == "meta"


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axis", [0, 1])
def test_split_then_at_a_runtime_index_is_a_gather(keepdims, axis):
    """SequenceAt(SplitToSequence(x), i) with i an input: element i becomes
    Gather(x, i) at compile time (the sequence is never built), so the graph
    replays a plan; every index, negative ones included, matches, and one out
    of range is still an error."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    s = session([helper.make_node("SplitToSequence", ["x"], ["s"], axis=axis,
                                  keepdims=keepdims),
                 helper.make_node("SequenceAt", ["s", "i"], ["y"])],
                [tensor("x", F, [3, 4]), tensor("i", I64, [])], [tensor("y", F, None)])
    n = x.shape[axis]
    for i in list(range(-n, n)) * 2:
        (y,) = s.run(None, {"x": x, "i": np.array(i, dtype=np.int64)})
        ref = np.take(x, i, axis=axis)
        np.testing.assert_array_equal(y, np.expand_dims(ref, axis) if keepdims else ref)
    assert s.last_run_mode() == "replay"
    with pytest.raises(cge.Error):
        s.run(None, {"x": x, "i": np.array(n, dtype=np.int64)})
