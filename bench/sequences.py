"""make bench-sequences: sequence models next to ONNX Runtime, 2 threads, median
latency, one run side by side, with the ratio cge/ORT. Not a test.

  split_concat   x[64,256] -> SplitToSequence (64 rows) -> ConcatFromSequence
                 (new_axis along 1): cge folds the sequence into Split + Concat
                 at compile time and replays a plan
  loop_insert    a Loop of 32 iterations appending a slice of x[32,256] to a
                 sequence, then ConcatFromSequence: the sequence is a run-time
                 object (node by node, cge_sequence)

BENCH_JSON=FILE keeps the numbers.
"""
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models as bench_models  # noqa: E402  (cge_latency, ort_latency)


def split_concat():
    from onnx import TensorProto as T, helper
    g = helper.make_graph(
        [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
         helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=1, new_axis=1)],
        "split_concat", [helper.make_tensor_value_info("x", T.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", T.FLOAT, [256, 64])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), (64, 256)


def loop_insert():
    from onnx import TensorProto as T, helper
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(T.FLOAT, None))
    one = helper.make_tensor("one", T.INT64, [1], [1])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Unsqueeze", ["i", "zero"], ["start"]),
         helper.make_node("Add", ["start", "one"], ["end"]),
         helper.make_node("Slice", ["x", "start", "end"], ["row"]),
         helper.make_node("SequenceInsert", ["s_in", "row"], ["s_out"])],
        "body", [helper.make_tensor_value_info("i", T.INT64, []),
                 helper.make_tensor_value_info("c", T.BOOL, []),
                 helper.make_value_info("s_in", seq)],
        [helper.make_tensor_value_info("c_out", T.BOOL, []), helper.make_value_info("s_out", seq)],
        [one, helper.make_tensor("zero", T.INT64, [1], [0])])
    g = helper.make_graph(
        [helper.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
         helper.make_node("Loop", ["m", "", "e"], ["r"], body=body),
         helper.make_node("ConcatFromSequence", ["r"], ["y"], axis=0)],
        "loop_insert", [helper.make_tensor_value_info("x", T.FLOAT, [32, 256])],
        [helper.make_tensor_value_info("y", T.FLOAT, [32, 256])],
        [helper.make_tensor("m", T.INT64, [], [32])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), (32, 256)


def main():
    import onnx
    d = os.environ.get("BENCH_MODEL_DIR", os.path.join(tempfile.gettempdir(), "cge-bench-models"))
    os.makedirs(d, exist_ok=True)
    rows = []
    for name, make in (("split_concat", split_concat), ("loop_insert", loop_insert)):
        m, shape = make()
        path, npz = os.path.join(d, name + ".onnx"), os.path.join(d, name + ".npz")
        onnx.save(m, path)
        np.savez(npz, input=np.random.default_rng(0).standard_normal(shape).astype(np.float32))
        c = bench_models.cge_latency(path, npz, "default")
        o = bench_models.ort_latency(path)
        cm = c["median_ms"]
        om = o["median_ms"] if o else None
        rows.append({"model": name, "cge_ms": cm, "ort_ms": om,
                     "cge_over_ort": cm / om if om else None})
        print("%-14s cge %8.4f ms   ORT %s   cge/ORT %s" % (
            name, cm, "%8.4f ms" % om if om else "n/a",
            "%.2f" % (cm / om) if om else "n/a"), flush=True)
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
