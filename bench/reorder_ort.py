"""cge's Reorder (bench_reorder, before and after) beside ONNX Runtime's
Transpose of the same NCHW <-> NHWC permutation, shape by shape, the two run
back to back in the same minute. ORT times a whole one-node session run (its
dispatch included); bench_reorder times the kernel's launch + synchronize.
Usage: BUILD=build python3 bench/reorder_ort.py"""
import json
import os
import re
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("BUILD", os.path.join(HERE, "..", "build"))
SHAPES = [(1, 3, 224, 224), (1, 24, 56, 56), (1, 64, 112, 112), (2, 64, 56, 56),
          (1, 96, 28, 28), (1, 256, 14, 14), (1, 1280, 7, 7), (2, 1280, 7, 7)]


def ort_ms(shape, to_nhwc, tmp):
    n, c, h, w = shape
    ishape = [n, c, h, w] if to_nhwc else [n, h, w, c]
    perm = [0, 2, 3, 1] if to_nhwc else [0, 3, 1, 2]
    oshape = [ishape[p] for p in perm]
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=perm)], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ishape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, oshape)])
    path = os.path.join(tmp, "t.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    out = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), path, "2", "20", "200"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["min_ms"]


def cge_ms(shape, to_nhwc):
    out = subprocess.run([os.path.join(BUILD, "bench_reorder"), "4", *map(str, shape)],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, CGE_NUM_THREADS="2")).stdout
    want = "nhwc" if to_nhwc else "nchw"
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[1] == want and re.match(r"\d+x", f[0]):
            nbytes = 2 * 4 * shape[0] * shape[1] * shape[2] * shape[3]
            return nbytes / float(f[2]) * 1e-6, nbytes / float(f[3]) * 1e-6  # ms from GB/s
    sys.exit("bench_reorder printed no row for %s" % (shape,))


def main():
    print("%-18s %-5s %9s %9s %9s %9s %9s" % ("shape (NCHW)", "to", "old ms", "new ms", "ORT ms",
                                             "old/ORT", "new/ORT"))
    with tempfile.TemporaryDirectory() as tmp:
        for shape in SHAPES:
            for to_nhwc in (True, False):
                old, new = cge_ms(shape, to_nhwc)
                ort = ort_ms(shape, to_nhwc, tmp)
                print("%-18s %-5s %9.3f %9.3f %9.3f %9.2f %9.2f" % (
                    "x".join(map(str, shape)), "nhwc" if to_nhwc else "nchw", old, new, ort,
                    old / ort, new / ort))


if __name__ == "__main__":
    main()
