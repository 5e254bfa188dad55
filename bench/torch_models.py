"""make bench-torch (not named torch.py: `import torch` beside it would find it): resnet18, mobilenet_v2 and the TransformerEncoder (batch 1,
2 threads) through cge.torch.compile (fullgraph, replay mode) against eager
PyTorch and ONNX Runtime (the same models exported to ONNX), in one run, with
ratios. Each measurement runs in its own process; median latency over >= 50
calls after warm-up, as the caller sees it (tensors in, tensors out). Not a test."""
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

CHILD = r'''
import json, sys, time
sys.path = [p for p in sys.path if p not in ("", ".")]
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import numpy as np, torch
import make_test_models
which, name, npz, runs, warmup, threads = sys.argv[3], sys.argv[4], sys.argv[5], \
    int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
torch.set_num_threads(threads)
model, _ = make_test_models.build(name)
x = torch.from_numpy(np.load(npz)["input"])
t0 = time.perf_counter()
if which == "cge":
    import cge.torch
    fn = cge.torch.compile(model, (x,), fullgraph=True, mode="replay")
    torch.set_num_threads(1)   # cge's own pool does the work; no idle OpenMP spinners
else:
    fn = model
compile_ms = (time.perf_counter() - t0) * 1e3
with torch.no_grad():
    ref = model(x) if which == "cge" else None
    y = fn(x)
    err = float((y - ref).abs().max()) if ref is not None else 0.0
    for _ in range(warmup):
        fn(x)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - t0) * 1e3)
times.sort()
print(json.dumps({"compile_ms": compile_ms, "median_ms": times[len(times) // 2],
                  "min_ms": times[0], "max_abs_err": err}))
'''


def child(which, name, npz):
    env = dict(os.environ, CGE_NUM_THREADS=str(THREADS), OMP_NUM_THREADS=str(THREADS),
               OMP_WAIT_POLICY="PASSIVE", CGE_LIBRARY=os.path.join(BUILD, "libcge.so"))
    out = subprocess.run([sys.executable, "-c", CHILD, os.path.join(ROOT, "python"),
                          os.path.join(ROOT, "scripts"), which, name, npz, str(RUNS), str(WARMUP),
                          str(THREADS)], env=env, check=True, capture_output=True, text=True,
                         cwd=tempfile.gettempdir()).stdout
    return json.loads(out.strip().splitlines()[-1])


def ort_latency(model):
    if not os.path.isfile(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")):
        return None
    out = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model, str(THREADS),
                          str(WARMUP), str(RUNS)], check=True, capture_output=True, text=True,
                         cwd=HERE).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    out_dir = os.environ.get("BENCH_MODEL_DIR") or os.path.join(tempfile.gettempdir(),
                                                                "cge-bench-models")
    print(f"cge.torch.compile (fullgraph, replay) vs eager PyTorch vs ONNX Runtime: batch 1, "
          f"{THREADS} threads, median of {RUNS} calls after {WARMUP} warm-up calls\n")
    print(f"{'model':22} {'cge.torch':>10} {'PyTorch':>9} {'ORT':>8} {'cge/PyTorch':>12} "
          f"{'cge/ORT':>8} {'compile':>9}   (ms)")
    rows = []
    for name in make_test_models.MODELS:
        onnx_model, npz = make_test_models.make(name, out_dir)
        c = child("cge", name, npz)
        pt = child("torch", name, npz)
        ort = ort_latency(onnx_model)
        o = ort["median_ms"] if ort else None
        r_ort = f"{c['median_ms'] / o:8.2f}" if o else f"{'-':>8}"
        print(f"{name:22} {c['median_ms']:10.2f} {pt['median_ms']:9.2f} "
              f"{(o if o else float('nan')):8.2f} {c['median_ms'] / pt['median_ms']:12.2f} "
              f"{r_ort} {c['compile_ms']:9.0f}")
        rows.append({"model": name, "cge_torch": c, "pytorch": pt, "ort": ort})
    print("\nratios below 1 mean cge is faster; max |cge - PyTorch| per model: " +
          ", ".join("%s %.1e" % (r["model"], r["cge_torch"]["max_abs_err"]) for r in rows))
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
