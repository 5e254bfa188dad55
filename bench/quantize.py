"""make bench-quantize: models from scripts/make_test_models.py (torchvision,
random weights) quantized by `cge quantize` (QDQ, per-channel, minmax on
random calibration images), then the float and the int8 files timed in ONNX
Runtime (bench/ort_run.js, all optimizations, 2 threads) and in cge (`cge
bench`), with latency ratios and the int8 model's error against the float one
(in ONNX Runtime, on inputs that were not calibrated on). Shows that the files
are QDQ models a runtime accelerates. Then the same int8 model in ONNX
Runtime's QOperator form (scripts/qdq_to_qoperator.py --contrib: QLinearConv,
com.microsoft QLinearAdd, QLinearGlobalAveragePool, QGemm, ...) in both
runtimes, alternately, with the cge / ONNX Runtime ratio. Not a test."""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "cge")
THREADS = os.environ.get("BENCH_THREADS", "2")
RUNS = os.environ.get("BENCH_RUNS", "100")
MODELS = os.environ.get("BENCH_QUANT_MODELS", "resnet18,mobilenet_v2").split(",")
CALIB = int(os.environ.get("BENCH_QUANT_CALIB", "8"))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))


def ort_ms(model):
    p = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model, THREADS, "20", RUNS],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])["median_ms"]


def cge_ms(model):
    p = subprocess.run([CLI, "bench", model, "--threads", THREADS, "--iterations", RUNS,
                        "--warmup", "20", "--json"], capture_output=True, text=True)
    if p.returncode:
        return None
    return json.loads(p.stdout)["p50_ms"]


def main():
    from test_quantize import run_ort   # ONNX Runtime on given inputs (node)
    models_dir = os.environ.get("CGE_MODEL_DIR", os.path.join(BUILD, "test_models"))
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            src = os.path.join(models_dir, name + ".onnx")
            if not os.path.isfile(src):
                subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_test_models.py"),
                                models_dir, name], check=True)
            calib = os.path.join(tmp, "calib_" + name)
            os.makedirs(calib)
            for k in range(CALIB):
                np.save(os.path.join(calib, "input_%d.npy" % k),
                        rng.normal(0, 1, (1, 3, 224, 224)).astype(np.float32))
            out = os.path.join(tmp, name + "_int8.onnx")
            t0 = time.perf_counter()
            subprocess.run([CLI, "quantize", src, "-o", out, "--calibrate", calib, "--per-channel",
                            "--threads", THREADS], check=True)
            q_s = time.perf_counter() - t0
            errs, agree = [], 0
            for _ in range(4):
                x = {"input": rng.normal(0, 1, (1, 3, 224, 224)).astype(np.float32)}
                yf, yq = run_ort(src, x, tmp), run_ort(out, x, tmp)
                errs.append(float(np.abs(yq - yf).max() / np.abs(yf).max()))
                agree += int(yf.argmax() == yq.argmax())
            # alternate float and int8 runs: noise hits both alike
            of, oq = [], []
            for _ in range(3):
                of.append(ort_ms(src))
                oq.append(ort_ms(out))
            cf, cq = cge_ms(src), cge_ms(out)
            qop = os.path.join(tmp, name + "_qop.onnx")
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "qdq_to_qoperator.py"),
                            out, qop, "--contrib"], check=True)
            xq = {"input": rng.normal(0, 1, (1, 3, 224, 224)).astype(np.float32)}
            same = float(np.abs(run_ort(qop, xq, tmp) - run_ort(out, xq, tmp)).max())
            co, oo = [], []
            for _ in range(3):
                co.append(cge_ms(qop))
                oo.append(ort_ms(qop))
            r = {"model": name, "quantize_s": q_s, "ort_float_ms": float(np.median(of)),
                 "ort_int8_ms": float(np.median(oq)), "cge_float_ms": cf, "cge_int8_ms": cq,
                 "max_rel_err": max(errs), "top1_agree": "%d/4" % agree,
                 "cge_qop_ms": float(np.median(co)) if None not in co else float("nan"),
                 "ort_qop_ms": float(np.median(oo)),
                 "ort_qop_vs_qdq_max_diff": same}
            rows.append(r)
            print(json.dumps(r))
    print("\nmodel          quantize  ORT float  ORT int8  ORT int8/float  cge float  cge int8  "
          "max err/|y|max  top-1")
    for r in rows:
        f = lambda v: "%7.2f ms" % v if v is not None else "      n/a"   # noqa: E731
        print("%-14s %6.1f s %s %s %10.2fx    %s %s %10.4f     %s" % (
            r["model"], r["quantize_s"], f(r["ort_float_ms"]), f(r["ort_int8_ms"]),
            r["ort_int8_ms"] / r["ort_float_ms"], f(r["cge_float_ms"]), f(r["cge_int8_ms"]),
            r["max_rel_err"], r["top1_agree"]))
    print("\nQOperator form (com.microsoft QLinear* ops), medians of 3 alternating runs")
    print("model          cge qop    ORT qop    cge/ORT  |ORT qop - ORT qdq| max")
    for r in rows:
        print("%-14s %7.2f ms %7.2f ms %7.2f   %.4g" % (r["model"], r["cge_qop_ms"],
                                                    r["ort_qop_ms"],
                                                    r["cge_qop_ms"] / r["ort_qop_ms"],
                                                    r["ort_qop_vs_qdq_max_diff"]))


if __name__ == "__main__":
    main()
