"""Peak memory and session creation from .onnx, cge against ONNX Runtime in
the same minute (make bench-memory): each model of the zoo's cache
(scripts/zoo.py exports them into /tmp/cge-zoo/<name>/) runs in a process of
its own, one at a time: cge's InferenceSession (import + compile + prepare),
then ONNX Runtime's (scripts/zoo_ort.js), and, with --before LIB, cge again
from another libcge.so (a build of the base branch) for before/after.

Peak RSS is each process's VmHWM / maxRSS (the cge process holds Python and
numpy, about 40 MB; the ORT one Node, about 100 MB). Creation is
InferenceSession(path) for cge and InferenceSession.create for ORT. The
--json rows also give cge's peak after creation and after the first run,
its resident memory at the end (VmRSS: what stays once the first run's
packing is over) and memory_stats() in MiB.

  python3 bench/memory.py [--cache DIR] [--before LIB] [--runs N] MODEL...
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT = ["alexnet", "vgg11", "vit_b_16", "convnext_tiny", "resnet50", "regnet_y_32gf"]


def _status_mb(key="VmHWM"):
    """A /proc/self/status figure in MB: VmHWM (the peak) or VmRSS (now)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _hwm_mb():
    return _status_mb("VmHWM")


def child(d, runs, model_file="model.onnx"):
    """One cge measurement (run in a process of its own); prints a JSON line."""
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import cge
    io = np.load(os.path.join(d, "io.npz"))
    so = cge.SessionOptions()
    so.intra_op_num_threads = 2
    import resource
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    sess = cge.InferenceSession(os.path.join(d, model_file), so)
    create_ms = (time.perf_counter() - t0) * 1e3
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    create_cpu_ms = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1e3
    create_rss = _hwm_mb()
    feeds = {inp.name: io["in%d" % i] for i, inp in enumerate(sess.get_inputs())}
    times = []
    first_rss = None
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        outs = sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
        if first_rss is None:
            first_rss = _hwm_mb()
    times = sorted(times[1:])
    refs = [io[k] for k in sorted(io.files) if k.startswith("ref")]
    err = max(float(np.max(np.abs(o.astype(np.float64) - r))) for o, r in zip(outs, refs)) \
        if refs else float("nan")
    stats = sess.memory_stats() if hasattr(sess, "memory_stats") else {}
    print(json.dumps({"create_ms": create_ms, "create_cpu_ms": create_cpu_ms,
                      "rss_mb": _hwm_mb(), "create_rss_mb": create_rss,
                      "first_run_rss_mb": first_rss, "rss_now_mb": _status_mb("VmRSS"),
                      "median_ms": times[len(times) // 2], "max_abs_err": err,
                      "stats": {k: v / 2.0 ** 20 for k, v in stats.items()}}))


def run_cge(d, lib, runs):
    env = dict(os.environ, CGE_LIBRARY=lib)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", d, "--runs",
                        str(runs)], capture_output=True, text=True, env=env, timeout=900)
    if p.returncode:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_ort(d, runs):
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run(["node", os.path.join(ROOT, "scripts", "zoo_ort.js"),
                            os.path.join(d, "manifest.json"), out, "2", str(runs), "0"],
                           capture_output=True, text=True, timeout=900)
    if p.returncode:
        return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=DEFAULT)
    ap.add_argument("--cache", default=os.environ.get("ZOO_CACHE", "/tmp/cge-zoo"))
    ap.add_argument("--lib", default=os.environ.get("CGE_LIBRARY",
                                                    os.path.join(ROOT, "build", "libcge.so")))
    ap.add_argument("--before", default=None, help="another libcge.so, measured too")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the raw rows here")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.runs)
    rows = []
    hdr = ("| model | cge peak RSS MB | ORT peak RSS MB | RSS cge/ORT | cge create ms | "
           "ORT create ms | create cge/ORT | cge run ms | ORT run ms |")
    hdr += " cge create CPU ms |"
    if a.before:
        hdr += " before: RSS MB | before: create ms | before: create CPU ms |"
    print(hdr)
    print("|" + " --- |" * (hdr.count("|") - 1))
    for m in a.models:
        d = os.path.join(a.cache, m)
        if not os.path.exists(os.path.join(d, "manifest.json")):
            print("| %s | not in %s (make zoo ZOO_FILTER=%s exports it) |" % (m, a.cache, m))
            continue
        row = {"model": m, "cge": run_cge(d, a.lib, a.runs), "ort": run_ort(d, a.runs)}
        if a.before:
            row["before"] = run_cge(d, a.before, a.runs)
        rows.append(row)
        c, o, b = row["cge"], row["ort"], row.get("before", {})

        def f(x, key, fmt="%.0f"):
            return fmt % x[key] if key in x else x.get("error", "-")[:60]

        def r(key):
            return "%.2f" % (c[key] / o[key]) if key in c and key in o else "-"
        line = "| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            m, f(c, "rss_mb"), f(o, "rss_mb"), r("rss_mb"), f(c, "create_ms"),
            f(o, "create_ms"), r("create_ms"), f(c, "median_ms", "%.1f"),
            f(o, "median_ms", "%.1f"))
        line += " %s |" % f(c, "create_cpu_ms")
        if a.before:
            line += " %s | %s | %s |" % (f(b, "rss_mb"), f(b, "create_ms"), f(b, "create_cpu_ms"))
        print(line, flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
