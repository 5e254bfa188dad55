"""make bench-models: resnet18, mobilenet_v2 and a TransformerEncoder (batch 1,
2 threads): median latency over >= 50 runs after warm-up for cge (plan and
replay modes), ONNX Runtime (all optimizations, 2 intra-op threads) and
PyTorch eager, in one run, with the ratios cge/ORT. Not a test."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
RUNS = int(os.environ.get("BENCH_RUNS", "60"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "10"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_test_models  # noqa: E402

CGE_CHILD = r'''
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import cge
model, npz, runs, warmup = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
x = np.load(npz)["input"]
t0 = time.perf_counter()
s = cge.InferenceSession(model)
create_ms = (time.perf_counter() - t0) * 1e3
name = s.get_inputs()[0].name
t0 = time.perf_counter()
s.run(None, {name: x})
first_ms = (time.perf_counter() - t0) * 1e3
for _ in range(warmup):
    s.run(None, {name: x})
times = []
for _ in range(runs):
    t0 = time.perf_counter()
    s.run(None, {name: x})
    times.append((time.perf_counter() - t0) * 1e3)
times.sort()
print(json.dumps({"create_ms": create_ms, "first_ms": first_ms,
                  "median_ms": times[len(times) // 2], "min_ms": times[0]}))
'''


def cge_latency(model, npz, mode):
    env = dict(os.environ, CGE_RUN_MODE=mode, CGE_NUM_THREADS=str(THREADS),
               CGE_LIBRARY=os.path.join(BUILD, "libcge.so"), OMP_NUM_THREADS=str(THREADS))
    out = subprocess.run([sys.executable, "-c", CGE_CHILD, os.path.join(ROOT, "python"), model, npz,
                          str(RUNS), str(WARMUP)], env=env, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def ort_latency(model):
    if not os.path.isfile(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")):
        return None
    out = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model, str(THREADS), str(WARMUP),
                          str(RUNS)], check=True, capture_output=True, text=True, cwd=HERE).stdout
    return json.loads(out.strip().splitlines()[-1])


def torch_latency(name, npz):
    import time

    import numpy as np
    import torch
    torch.set_num_threads(THREADS)
    model, _ = make_test_models.build(name)
    x = torch.from_numpy(np.load(npz)["input"])
    with torch.no_grad():
        for _ in range(WARMUP):
            model(x)
        times = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    out_dir = os.environ.get("BENCH_MODEL_DIR") or os.path.join(tempfile.gettempdir(), "cge-bench-models")
    print(f"models: batch 1, {THREADS} threads, median of {RUNS} runs after {WARMUP} warm-up runs\n")
    header = (f"{'model':22} {'cge plan':>10} {'cge replay':>11} {'ORT':>8} {'PyTorch':>8} "
              f"{'plan/ORT':>9} {'replay/ORT':>11}   (ms)")
    print(header)
    rows = []
    for name in make_test_models.MODELS:
        model, npz = make_test_models.make(name, out_dir)
        plan = cge_latency(model, npz, "plan")
        replay = cge_latency(model, npz, "replay")
        ort = ort_latency(model)
        pt = torch_latency(name, npz)
        o = ort["median_ms"] if ort else None
        r1 = f"{plan['median_ms'] / o:9.2f}" if o else f"{'-':>9}"
        r2 = f"{replay['median_ms'] / o:11.2f}" if o else f"{'-':>11}"
        print(f"{name:22} {plan['median_ms']:10.2f} {replay['median_ms']:11.2f} "
              f"{(o if o else float('nan')):8.2f} {pt:8.2f} {r1} {r2}")
        rows.append({"model": name, "cge_plan": plan, "cge_replay": replay, "ort": ort,
                     "pytorch_median_ms": pt})
    print("\ntarget: cge within 1.5x of ONNX Runtime on each model")
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
