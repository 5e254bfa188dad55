"""float16 (or, with --bf16, bfloat16) copies of the zoo's exported models
through cge: each model of the zoo's cache (scripts/zoo.py --cache, default
/tmp/cge-zoo; $ZOO_CACHE) named on the command line is made half
(scripts/half_model.py), run on the zoo's inputs, and its outputs compared
with the float32 model's: max |half - fp32| over the output's largest value
(integer outputs: equal or not). A model that fails says which layer refused
it. Not a test: a check across models.

    CGE_LIBRARY=build/libcge.so /usr/bin/python3 bench/half_zoo.py [--bf16] resnet18@op13 ...
"""
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import cge  # noqa: E402
import half_model  # noqa: E402

CACHE = os.environ.get("ZOO_CACHE", "/tmp/cge-zoo")


def check(name, out_dir, bf16):
    d = os.path.join(CACHE, name)
    io = np.load(os.path.join(d, "io.npz"))
    path16 = os.path.join(out_dir, name + ("_bf16.onnx" if bf16 else "_f16.onnx"))
    half = TensorProto.BFLOAT16 if bf16 else TensorProto.FLOAT16
    onnx.save(half_model.halved(os.path.join(d, "model.onnx"), half), path16)
    narrow = half_model.bf16_bits if bf16 else (lambda a: a.astype(np.float16))
    widen = half_model.bf16_value if bf16 else (lambda a: a.astype(np.float32))
    s32 = cge.InferenceSession(os.path.join(d, "model.onnx"))
    s16 = cge.InferenceSession(path16)
    names = [i.name for i in s32.get_inputs()]
    f32 = {names[k]: io["in%d" % k] for k in range(len(names))}
    f16 = {k: narrow(v) if v.dtype == np.float32 else v for k, v in f32.items()}
    y32 = s32.run(None, f32)
    t0 = time.perf_counter()
    y16 = s16.run(None, f16)
    ms = (time.perf_counter() - t0) * 1e3
    errs = []
    for a, b in zip(y32, y16):
        if a.shape != b.shape:
            errs.append("shape %s vs %s" % (a.shape, b.shape))
        elif a.dtype.kind == "f":
            scale = float(np.abs(a).max()) or 1.0
            errs.append("%.1e" % (np.abs(a - widen(b)).max() / scale))
        else:
            errs.append("equal" if np.array_equal(a, b) else "integers differ")
    return ms, errs


def main(args):
    bf16 = "--bf16" in args
    names = [a for a in args if a != "--bf16"]
    if not names:
        sys.exit(__doc__)
    out_dir = os.environ.get("HALF_DIR", "/tmp/cge-half-zoo")
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        try:
            ms, errs = check(name, out_dir, bf16)
            print("%-40s ok   first run %8.1f ms  rel. error %s" % (name, ms, ", ".join(errs)))
        except Exception as e:  # a model cge refuses: its layer and message
            print("%-40s FAIL %s: %s" % (name, type(e).__name__, str(e)[:300]))


if __name__ == "__main__":
    main(sys.argv[1:])
