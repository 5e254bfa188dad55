# String tensors through the Python package (issue 13): numpy arrays of
# str, bytes or object in, object arrays of str out (as ONNX Runtime gives
# them); string initializers from ONNX's string_data; Cast to and from
# strings with the ONNX reference's text; StringNormalizer's value-dependent
# output length over repeated runs; and the errors, each naming its layer.
import re

import numpy as np
import pytest

import cge

import onnx
from onnx import TensorProto, helper

F, S, I64 = TensorProto.FLOAT, TensorProto.STRING, TensorProto.INT64


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def session(*args, **kwargs):
    return cge.InferenceSession(model(*args, **kwargs).SerializeToString())


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def test_cast_text_matches_numpy():
    # numpy's astype(str) is the reference's Cast: shortest round-trip digits.
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(200).astype(np.float32) * 10.0 ** rng.integers(
        -8, 20, 200), np.array([0, -0.0, 1e16, 9.9e15, 1e-4, 1.5e-45, np.inf, -np.inf, np.nan],
                               np.float32)]).astype(np.float32)
    s = session([helper.make_node("Cast", ["x"], ["y"], to=S)], [vi("x", F, [len(x)])],
                [vi("y", S, [len(x)])])
    (y,) = s.run(None, {"x": x})
    assert y.dtype == object and y.shape == x.shape
    assert list(y) == list(x.astype(np.str_))
    # float64 and float16 too, each with its own shortest digits
    for dt, code in ((np.float64, TensorProto.DOUBLE), (np.float16, TensorProto.FLOAT16)):
        with np.errstate(over="ignore"):  # float16 overflows to inf, as the kernel does
            xd = x.astype(dt)
        s = session([helper.make_node("Cast", ["x"], ["y"], to=S)], [vi("x", code, [len(x)])],
                    [vi("y", S, [len(x)])])
        assert list(s.run(None, {"x": xd})[0]) == list(xd.astype(np.str_))


def test_string_inputs_any_numpy_kind_and_round_trip():
    s = session([helper.make_node("Cast", ["t"], ["f"], to=F),
                 helper.make_node("Identity", ["t"], ["u"])],
                [vi("t", S, [2, 3])], [vi("f", F, [2, 3]), vi("u", S, [2, 3])])
    want = np.array([[0.5, np.nan, np.inf], [-np.inf, 1e-3, -2.0]], np.float32)
    texts = [["0.5", "NaN", "INF"], ["-INF", "0.001", "-2"]]
    for arr in (np.array(texts), np.array(texts, dtype=object),
                np.array([[t.encode() for t in r] for r in texts], dtype="S")):
        f, u = s.run(None, {"t": arr})
        np.testing.assert_array_equal(f, want)
        assert u.dtype == object and u.tolist() == texts
    # non-ASCII text (and a NUL) passes through untouched
    s = session([helper.make_node("Identity", ["t"], ["u"])], [vi("t", S, [2, 3])],
                [vi("u", S, [2, 3])])
    uni = np.array([["é", "日本", ""], ["ß", "a\u0000b", "x"]], dtype=object)
    assert s.run(None, {"t": uni})[0].tolist() == uni.tolist()


def test_string_initializer_gather_concat():
    words = np.array(["zero", "one", "two", "three"], dtype=object)
    init = helper.make_tensor("w", S, [4], [w.encode() for w in words])
    idx = helper.make_tensor("i", I64, [3], [3, 0, 3])
    s = session([helper.make_node("Gather", ["w", "i"], ["g"]),
                 helper.make_node("Concat", ["g", "x"], ["y"], axis=0)],
                [vi("x", S, [None])], [vi("y", S, [None])], inits=[init, idx])
    for extra in (["a"], ["b", "c", "d"], []):
        (y,) = s.run(None, {"x": np.array(extra, dtype=object)})
        assert y.tolist() == ["three", "zero", "three"] + extra


def test_string_normalizer_lengths_vary():
    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER",
                            stopwords=["the", "a"])
    s = session([node], [vi("x", S, [1, None])], [vi("y", S, [1, None])], opset=10)
    cases = [(["The", "Cat"], ["cat"]), (["A", "the", "THE"], [""]),
             (["Big", "Red", "Dog", "a"], ["big", "red", "dog"])]
    for _ in range(2):
        for x, want in cases:
            (y,) = s.run(None, {"x": np.array([x], dtype=object)})
            assert y.shape == (1, len(want)) and y.tolist() == [want]


def test_errors_name_their_layer():
    # arithmetic on strings: [meta], naming the node
    with pytest.raises(cge.Error, match=r"\[meta\] Add 'plus'.*string"):
        session([helper.make_node("Add", ["a", "a"], ["y"], name="plus")], [vi("a", S, [2])],
                [vi("y", S, [2])]).run(None, {"a": np.array(["1", "2"])})
    # text that is not a number: [kernel], naming the element
    s = session([helper.make_node("Cast", ["t"], ["f"], to=F)], [vi("t", S, [2])],
                [vi("f", F, [2])])
    with pytest.raises(cge.Error, match=r"\[kernel\].*element 1 \(\"one\"\) is not a float32"):
        s.run(None, {"t": np.array(["1", "one"])})
    assert s.run(None, {"t": np.array(["1", "2"])})[0].tolist() == [1.0, 2.0]
    # floats where strings are declared
    with pytest.raises(cge.Error, match=r"\[session\].*'t' is float32; the graph declares string"):
        s.run(None, {"t": np.array([1.0, 2.0], np.float32)})
    # malformed string_data: fewer strings than the shape needs, or raw_data
    bad = helper.make_tensor("w", S, [3], [b"a", b"b", b"c"])
    del bad.string_data[2]
    m = model([helper.make_node("Identity", ["w"], ["y"])], [], [vi("y", S, [3])], inits=[bad])
    with pytest.raises(cge.Error, match=r"\[io\].*string_data holds 2 strings; the shape needs 3"):
        cge.InferenceSession(m.SerializeToString())
    raw = TensorProto(name="w", data_type=S, dims=[1], raw_data=b"abc")
    m = model([helper.make_node("Identity", ["w"], ["y"])], [], [vi("y", S, [1])], inits=[raw])
    with pytest.raises(cge.Error, match=r"\[io\].*string_data"):
        cge.InferenceSession(m.SerializeToString())
    # an unknown locale
    node = helper.make_node("StringNormalizer", ["x"], ["y"], locale="tr_TR")
    with pytest.raises(cge.Error, match=r"\[meta\].*locale"):
        session([node], [vi("x", S, [2])], [vi("y", S, [None])], opset=10)


def test_node_arg_type_and_sequences_refused():
    s = session([helper.make_node("Identity", ["t"], ["u"])], [vi("t", S, [2])],
                [vi("u", S, [2])])
    assert s.get_inputs()[0].type == "tensor(string)"
    assert s.get_outputs()[0].type == "tensor(string)"


def test_model_file_refuses_string_constants(tmp_path):
    # The .cgm format has no place for string bytes: an [io] error naming the
    # constant, not a file of addresses. A plan whose strings are all inputs
    # or intermediates saves and loads.
    init = helper.make_tensor("w", S, [2], [b"a", b"b"])
    m = model([helper.make_node("Concat", ["w", "x"], ["y"], axis=0)], [vi("x", S, [1])],
              [vi("y", S, [3])], inits=[init])
    so = cge.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "strings.cgm")
    with pytest.raises(cge.Error, match=r"\[io\].*constant 'w' is a string tensor"):
        cge.InferenceSession(m.SerializeToString(), sess_options=so)
    m = model([helper.make_node("Cast", ["x"], ["s"], to=S),
               helper.make_node("Cast", ["s"], ["y"], to=F)],
              [vi("x", F, [3])], [vi("y", F, [3])])
    so.optimized_model_filepath = str(tmp_path / "through.cgm")
    cge.InferenceSession(m.SerializeToString(), sess_options=so)
    s = cge.InferenceSession(so.optimized_model_filepath)
    x = np.array([1.0, -2.0, 7.0], np.float32)
    assert s.run(None, {"x": x})[0].tolist() == x.tolist()


def test_constant_node_strings():
    # Constant's value_strings / value_string / a STRING value tensor
    nodes = [helper.make_node("Constant", [], ["a"], value_strings=["x", "yz"]),
             helper.make_node("Constant", [], ["b"], value_string="w"),
             helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
             helper.make_node("Constant", [], ["c"],
                              value=helper.make_tensor("c", S, [1], [b"\xc3\xa9"])),
             helper.make_node("Concat", ["a", "b1", "c", "x"], ["y"], axis=0)]
    ax = helper.make_tensor("ax", I64, [1], [0])
    s = session(nodes, [vi("x", S, [1])], [vi("y", S, [5])], inits=[ax])
    assert s.run(None, {"x": np.array(["end"])})[0].tolist() == ["x", "yz", "w", "é", "end"]


def test_sequences_of_strings_refused():
    seq = helper.make_value_info(
        "s", helper.make_sequence_type_proto(helper.make_tensor_type_proto(S, [2])))
    m = model([helper.make_node("SequenceLength", ["s"], ["n"])], [seq], [vi("n", I64, [])])
    with pytest.raises(cge.Error, match=r"\[converter\].*sequences and optionals of strings"):
        cge.InferenceSession(m.SerializeToString())


def test_cli_runs_string_models(tmp_path):
    # `cge run` makes random string inputs (small integers' text) and prints
    # string outputs; writing one to .npy is an [io] error, not a crash.
    from test_cli import cge as cli
    m = model([helper.make_node("Cast", ["t"], ["f"], to=F),
               helper.make_node("Cast", ["f"], ["s"], to=S)],
              [vi("t", S, [3])], [vi("f", F, [3]), vi("s", S, [3])])
    path = tmp_path / "strings.onnx"
    onnx.save(m, str(path))
    out, _ = cli("run", path)
    assert "output 's': string [3]" in out
    assert re.search(r'values: "[0-3]\.0" "[0-3]\.0" "[0-3]\.0"', out), out
    _, err = cli("run", path, "--output-dir", tmp_path / "out", rc=1)
    assert "[io]" in err and "string has no .npy form" in err


def test_equal_on_strings_broadcasts():
    s = session([helper.make_node("Equal", ["a", "b"], ["y"])], [vi("a", S, [2, 3]),
                vi("b", S, [3])], [vi("y", TensorProto.BOOL, [2, 3])])
    a = np.array([["x", "yy", ""], ["x", "y", "é"]], dtype=object)
    b = np.array(["x", "yy", "é"], dtype=object)
    (y,) = s.run(None, {"a": a, "b": b})
    np.testing.assert_array_equal(y, a == b)


def test_strings_made_in_a_body_are_refused():
    # A body's nodes are prepared and released around each launch: a string
    # a body node writes would outlive its store, so it is a [kernel] error.
    # Strings that only pass through a body are fine.
    def branch(op_to):
        nodes = [helper.make_node("Cast", ["x"], ["t"], to=op_to)] if op_to else \
            [helper.make_node("Identity", ["x"], ["t"])]
        return helper.make_graph(nodes, "b", [], [vi("t", S, [2])])
    for make, x, ok in ((S, np.array([1.0, 2.0], np.float32), False),
                        (None, np.array(["p", "q"], dtype=object), True)):
        g = [helper.make_node("If", ["c"], ["y"], then_branch=branch(make),
                              else_branch=branch(make))]
        s = session(g, [vi("c", TensorProto.BOOL, []), vi("x", F if make else S, [2])],
                    [vi("y", S, [2])])
        feed = {"c": np.array(True), "x": x}
        if ok:
            assert s.run(None, feed)[0].tolist() == ["p", "q"]
        else:
            with pytest.raises(cge.Error, match="strings made inside a control-flow body"):
                s.run(None, feed)
