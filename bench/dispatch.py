"""make bench-dispatch: runs bench_dispatch (cge) and, when installed, the same
Add chains through ONNX Runtime, and prints them side by side with ratios."""
import json
import os
import subprocess
import sys
import tempfile

BUILD = os.environ.get("BUILD", "build")
HERE = os.path.dirname(os.path.abspath(__file__))
THREADS = os.environ.get("BENCH_THREADS", "2")


def ort_available():
    return os.path.isfile(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json"))


def ort_chain_us_per_node(nodes, rows, cols):
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "chain.onnx")
        subprocess.run([sys.executable, os.path.join(HERE, "make_add_chain.py"), model,
                        str(nodes), str(rows), str(cols)], check=True)
        out = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model, THREADS, "20", "100"],
                             check=True, capture_output=True, text=True, cwd=HERE).stdout
        r = json.loads(out.strip().splitlines()[-1])
        return r["median_ms"] * 1e3 / nodes


def main():
    lines = subprocess.run([os.path.join(BUILD, "bench_dispatch"), THREADS], check=True,
                           capture_output=True, text=True).stdout.strip().splitlines()
    rows = [json.loads(l) for l in lines]
    print(f"cge dispatch benchmark ({THREADS} threads)\n")
    for r in rows:
        if r["bench"] == "runtime":
            print(f"runtime: {r['tasks']} one-block trivial kernels")
            print(f"  eager submission   {r['eager_ns_per_task']:9.1f} ns/task")
            print(f"  captured replay    {r['replay_ns_per_task']:9.1f} ns/task")
            print(f"  replay / eager     {r['replay_over_eager']:9.3f}   (target <= 0.100)\n")
    have_ort = ort_available()
    if not have_ort:
        print("(ONNX Runtime not installed: run scripts/install-bench-deps.sh for the peer column)\n")
    print(f"{'graph: 1000 x Add':30} {'eager':>9} {'plan':>9} {'replay':>9} {'ORT':>9} "
          f"{'replay/ORT':>11}   (us per node)")
    ort_cache = {}
    for r in rows:
        if r["bench"] != "graph":
            continue
        rows_, cols = r["shape"]
        if have_ort and (rows_, cols) not in ort_cache:
            ort_cache[(rows_, cols)] = ort_chain_us_per_node(r["nodes"], rows_, cols)
        ort = ort_cache.get((rows_, cols))
        ratio = f"{r['replay_us_per_node'] / ort:11.3f}" if ort else f"{'-':>11}"
        ort_s = f"{ort:9.4f}" if ort else f"{'-':>9}"
        label = "[%d,%d] %s" % (rows_, cols, "no fusion" if r["opt"] == "none" else "default opt")
        print(f"{label:30} {r['eager_us_per_node']:9.4f} "
              f"{r['plan_us_per_node']:9.4f} {r['replay_us_per_node']:9.4f} {ort_s} {ratio}")
    print("\n'no fusion' (opt level 0) keeps 1,000 kernels: it measures dispatch; 'default opt'")
    print("lets the compiler fuse the chain. target: replay/ORT <= 0.100 on [1,16]")


if __name__ == "__main__":
    main()
