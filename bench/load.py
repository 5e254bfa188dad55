"""make bench-load: how long a model takes to become runnable. For each model
(the bundled small CNN, resnet18, mobilenet_v2, a TransformerEncoder): cge
loading its .cgm (mapped; median of 20 in-process loads, and "ready": session,
load and kernel preparation), ONNX Runtime creating a session from the .onnx
(median of 5 processes; all optimizations, 2 threads) and cge importing and
compiling the .onnx (median of 3), with the ratios. Target: a .cgm load takes
at most 1/10 of ONNX Runtime's session creation. Not a test."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
THREADS = os.environ.get("BENCH_THREADS", "2")
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def run_json(cmd, **kw):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout
    return json.loads(out.strip().splitlines()[-1])


def ort_create_ms(model, reps=5):
    if not os.path.isfile(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")):
        return None
    times = sorted(run_json(["node", os.path.join(HERE, "ort_run.js"), model, THREADS, "0", "1"],
                            cwd=HERE)["create_ms"] for _ in range(reps))
    return times[len(times) // 2]


def models(out_dir):
    yield "small_cnn", os.path.join(ROOT, "models", "small_cnn.onnx")
    try:
        import make_test_models
        import torch  # noqa: F401
    except ImportError:
        print("(PyTorch missing: only the bundled small CNN is measured)")
        return
    for name in make_test_models.MODELS:
        yield name, make_test_models.make(name, out_dir)[0]


def main():
    out_dir = os.environ.get("BENCH_MODEL_DIR") or os.path.join(tempfile.gettempdir(), "cge-bench-models")
    os.makedirs(out_dir, exist_ok=True)
    cli, bench = os.path.join(BUILD, "cge"), os.path.join(BUILD, "bench_load")
    env = dict(os.environ, CGE_NUM_THREADS=THREADS, OMP_NUM_THREADS=THREADS)
    print(f"load time (ms), {THREADS} threads; ratios to ONNX Runtime's session creation\n")
    print(f"{'model':20} {'weights':>9} {'cgm load':>9} {'cgm ready':>10} {'1st run':>8} "
          f"{'ORT create':>11} {'cge compile':>12} {'load/ORT':>9} {'ready/ORT':>10} "
          f"{'compile/ORT':>12}")
    rows = []
    for name, onnx in models(out_dir):
        cgm = os.path.join(out_dir, name + ".cgm")
        subprocess.run([cli, "compile", onnx, "-o", cgm], check=True, capture_output=True, env=env)
        c = run_json([bench, cgm, "20"], env=env)
        comp = run_json([bench, onnx, "3"], env=env)
        ort = ort_create_ms(onnx)

        def ratio(x):
            return f"{x / ort:.3f}" if ort else "-"
        print(f"{name:20} {c['weight_bytes'] / 2**20:8.1f}M {c['load_ms']:9.3f} {c['ready_ms']:10.3f} "
              f"{c['first_run_ms']:8.2f} {(ort if ort else float('nan')):11.2f} {comp['ready_ms']:12.2f} "
              f"{ratio(c['load_ms']):>9} {ratio(c['ready_ms']):>10} {ratio(comp['ready_ms']):>12}")
        rows.append({"model": name, "cgm": c, "cge_compile": comp, "ort_create_ms": ort})
    print("\nready: session + load + kernel preparation; 1st run: the run after that (lazy kernel\n"
          "set-up such as oneDNN primitives, the weights' first read)")
    print("target: cgm load <= 0.1 x ONNX Runtime session creation")
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
