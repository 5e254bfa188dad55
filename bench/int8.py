"""make bench-int8: quantized (QDQ, PyTorch FX fbgemm) resnet18, mobilenet_v2,
resnet50 and a transformer encoder (batch 1, 2 threads): median latency of
cge's int8 run, ONNX Runtime's on the same file, and cge's on the float32
model, in one run, with the ratios; then the median CPU time per run (every
thread, user + system) and the fastest run of the same runs, which a shared
machine disturbs far less than the median wall time. Models come from scripts/make_quant_models.py
(cached in $CGE_QUANT_MODELS or /tmp/cge-quant-models). Not a test."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
RUNS = int(os.environ.get("BENCH_RUNS", "60"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "10"))
MODELS = os.environ.get("BENCH_INT8_MODELS", "resnet18 mobilenet_v2 resnet50 encoder").split()
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_quant_models  # noqa: E402

CGE_CHILD = r'''
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import cge
model, npz, runs, warmup = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
x = np.load(npz)["input"]
s = cge.InferenceSession(model)
name = s.get_inputs()[0].name
for _ in range(warmup):
    s.run(None, {name: x})
times, cpu = [], []
for _ in range(runs):
    c0, t0 = time.process_time(), time.perf_counter()
    s.run(None, {name: x})
    times.append((time.perf_counter() - t0) * 1e3)
    cpu.append((time.process_time() - c0) * 1e3)
times.sort()
cpu.sort()
print(json.dumps({"median_ms": times[len(times) // 2], "min_ms": times[0],
                  "cpu_ms": cpu[len(cpu) // 2]}))
'''


def cge_latency(model, npz):
    env = dict(os.environ, CGE_NUM_THREADS=str(THREADS), OMP_NUM_THREADS=str(THREADS),
               CGE_LIBRARY=os.path.join(BUILD, "libcge.so"))
    out = subprocess.run([sys.executable, "-c", CGE_CHILD, os.path.join(ROOT, "python"), model,
                          npz, str(RUNS), str(WARMUP)], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def ort_latency(model):
    if not os.path.isfile(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")):
        return None
    out = subprocess.run(["node", os.path.join(HERE, "ort_cpu.js"), model, str(THREADS),
                          str(WARMUP), str(RUNS)], check=True, capture_output=True, text=True,
                         cwd=HERE).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    out = make_quant_models.default_dir()
    print(f"int8 (QDQ from PyTorch FX, fbgemm): batch 1, {THREADS} threads, median of {RUNS} "
          f"runs after {WARMUP} warm-up runs\n")
    print(f"{'model':14} {'cge int8':>9} {'ORT int8':>9} {'cge fp32':>9} {'int8/ORT':>9} "
          f"{'fp32/int8':>10}   (wall ms)")
    rows = []
    for name in MODELS:
        q = make_quant_models.make(name, out, with_float=True)
        f = os.path.join(out, name + "_fp32.onnx")
        npz = os.path.join(out, name + ".npz")
        ci = cge_latency(q, npz)
        o = ort_latency(q)
        cf = cge_latency(f, npz)
        rows.append({"model": name, "cge_int8_ms": ci["median_ms"],
                     "ort_int8_ms": o["median_ms"] if o else None, "cge_fp32_ms": cf["median_ms"],
                     "cge_int8_cpu_ms": ci["cpu_ms"], "ort_int8_cpu_ms": o["cpu_ms"] if o else None,
                     "cge_fp32_cpu_ms": cf["cpu_ms"], "cge_int8_min_ms": ci["min_ms"],
                     "ort_int8_min_ms": o["min_ms"] if o else None, "cge_fp32_min_ms": cf["min_ms"]})
    for key, unit in (("ms", "wall ms, median"), ("cpu_ms", "CPU ms per run, median"),
                      ("min_ms", "wall ms, fastest run")):
        if key != "ms":
            print(f"\n{'':14} {'cge int8':>9} {'ORT int8':>9} {'cge fp32':>9} {'int8/ORT':>9} "
                  f"{'fp32/int8':>10}   ({unit})")
        for r in rows:
            ci, o, cf = (r["cge_int8_" + key], r["ort_int8_" + key], r["cge_fp32_" + key])
            ratio = f"{ci / o:9.2f}" if o else f"{'-':>9}"
            print(f"{r['model']:14} {ci:9.2f} {(o or float('nan')):9.2f} {cf:9.2f} {ratio} "
                  f"{cf / ci:10.2f}")
    print("\ntargets: int8/ORT <= 0.9; fp32/int8 >= 2.5 on the CNNs")
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
