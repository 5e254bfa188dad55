# Scan at opset 8: a batch axis first and sequence_lens (opset 9 replaced both
# with scan axes), against a NumPy loop: a running sum state and a scan
# output per step, rows of different lengths, a reversed scan input.
import numpy as np
import pytest

import cge

from onnx import TensorProto, helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def scan8_model(with_lens, directions):
    # body: (sum [2], a [2], b [2]) -> (sum + a * b, sum + a * b, a - b)
    body = helper.make_graph(
        [helper.make_node("Mul", ["a", "b"], ["ab"]),
         helper.make_node("Add", ["s_in", "ab"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y"]),
         helper.make_node("Sub", ["a", "b"], ["z"])], "body",
        [helper.make_tensor_value_info(n, F, [2]) for n in ("s_in", "a", "b")],
        [helper.make_tensor_value_info(n, F, [2]) for n in ("s_out", "y", "z")])
    attrs = {"body": body, "num_scan_inputs": 2}
    if directions is not None:
        attrs["directions"] = directions
    ins = ["lens" if with_lens else "", "s0", "xa", "xb"]
    g = helper.make_graph(
        [helper.make_node("Scan", ins, ["s", "ys", "zs"], **attrs)], "g",
        ([helper.make_tensor_value_info("lens", I64, [3])] if with_lens else []) +
        [helper.make_tensor_value_info("s0", F, [3, 2]),
         helper.make_tensor_value_info("xa", F, [3, 4, 2]),
         helper.make_tensor_value_info("xb", F, [3, 4, 2])],
        [helper.make_tensor_value_info(n, F, None) for n in ("s", "ys", "zs")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)])


def reference(lens, s0, xa, xb, directions):
    s, ys, zs = s0.copy(), np.zeros_like(xa), np.zeros_like(xa)
    for b in range(s0.shape[0]):
        n = lens[b]
        for t in range(n):
            ia = n - 1 - t if directions[0] else t
            ib = n - 1 - t if directions[1] else t
            s[b] = s[b] + xa[b, ia] * xb[b, ib]
            ys[b, t] = s[b]
            zs[b, t] = xa[b, ia] - xb[b, ib]
    return s, ys, zs


@pytest.mark.parametrize("with_lens", [False, True])
@pytest.mark.parametrize("directions", [None, [0, 1], [1, 1]])
def test_scan8_matches_numpy(with_lens, directions):
    rng = np.random.default_rng(8)
    s0 = rng.standard_normal((3, 2)).astype(np.float32)
    xa = rng.standard_normal((3, 4, 2)).astype(np.float32)
    xb = rng.standard_normal((3, 4, 2)).astype(np.float32)
    lens = np.array([4, 1, 3] if with_lens else [4, 4, 4], np.int64)
    feeds = {"s0": s0, "xa": xa, "xb": xb}
    if with_lens:
        feeds["lens"] = lens
    got = cge.InferenceSession(scan8_model(with_lens, directions).SerializeToString()).run(
        None, feeds)
    want = reference(lens, s0, xa, xb, directions or [0, 0])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_scan8_sequence_lens_longer_than_the_inputs_is_an_error():
    rng = np.random.default_rng(1)
    feeds = {"lens": np.array([4, 5, 1], np.int64),
             "s0": np.zeros((3, 2), np.float32),
             "xa": rng.standard_normal((3, 4, 2)).astype(np.float32),
             "xb": rng.standard_normal((3, 4, 2)).astype(np.float32)}
    s = cge.InferenceSession(scan8_model(True, None).SerializeToString())
    with pytest.raises(Exception, match="sequence_lens"):
        s.run(None, feeds)
