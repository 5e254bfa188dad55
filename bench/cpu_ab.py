"""make bench-cpu-ab: one-thread CPU time per run of zoo models, cge (one or
two libraries, A/B) next to ONNX Runtime, alternating in the same minutes.
Not a test.

Usage: bench/cpu_ab.py [--lib A.so] [--lib B.so] [--rounds N] [--runs N]
                       [--cache DIR] MODEL_NAME ...

A library may carry environment settings for its runner: --lib
"build/libcge.so?CGE_DW_NHWC=0" (comma-separated VAR=value pairs after "?").

On a machine shared by many processes, wall time at two threads measures the
scheduler more than the kernels (a descheduled thread stalls its team). CPU
time of one thread, taken over a batch of runs, counts only the work done:
cge through cge.InferenceSession (intra_op_num_threads 1,
OMP_WAIT_POLICY=passive, so a parked OpenMP thread does not spin), ONNX
Runtime through onnxruntime-node (intraOpNumThreads 1, process.cpuUsage()).
Each round runs every runner once per model, alternating; a runner's figure
is the median over rounds of its CPU ms per run. Models come from the zoo's
cache (scripts/zoo.py: DIR/NAME/manifest.json).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CGE_CHILD = r"""
import json, os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import cge
d, runs = sys.argv[2], int(sys.argv[3])
io = np.load(os.path.join(d, "io.npz"))
so = cge.SessionOptions()
so.intra_op_num_threads = 1
sess = cge.InferenceSession(os.path.join(d, "model.onnx"), so)
feeds = {inp.name: io["in%d" % i] for i, inp in enumerate(sess.get_inputs())}
sess.run(None, feeds)
sess.run(None, feeds)
c0, w0 = time.process_time(), time.perf_counter()
for _ in range(runs):
    sess.run(None, feeds)
c1, w1 = time.process_time(), time.perf_counter()
print(json.dumps({"cpu_ms": (c1 - c0) * 1e3 / runs, "wall_ms": (w1 - w0) * 1e3 / runs}))
"""

ORT_CHILD = r"""
const fs = require('fs');
const path = require('path');
const ort = require(path.join(process.argv[1], 'bench', 'node_modules', 'onnxruntime-node'));
const ARRAYS = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array, bool: Uint8Array,
  float64: Float64Array, uint8: Uint8Array, int8: Int8Array };
(async () => {
  const manifest = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const runs = Number(process.argv[3]);
  const session = await ort.InferenceSession.create(manifest.model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all',
    executionMode: 'sequential' });
  const feeds = {};
  manifest.inputs.forEach((inp, i) => {
    const buf = fs.readFileSync(inp.file);
    const A = ARRAYS[inp.dtype];
    feeds[session.inputNames[i]] = new ort.Tensor(inp.dtype,
      new A(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)), inp.shape);
  });
  await session.run(feeds);
  await session.run(feeds);
  const c0 = process.cpuUsage(), w0 = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) await session.run(feeds);
  const c = process.cpuUsage(c0), w = Number(process.hrtime.bigint() - w0) / 1e6;
  console.log(JSON.stringify({ cpu_ms: (c.user + c.system) / 1e3 / runs, wall_ms: w / runs }));
})().catch((e) => { console.error(String(e)); process.exit(1); });
"""


def run_child(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if p.returncode:
        raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=0, help="runs per batch (0: by model size)")
    ap.add_argument("--cache", default="/tmp/cge-zoo")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    libs = a.lib or [os.path.join(ROOT, "build", "libcge.so")]
    env = dict(os.environ, OMP_WAIT_POLICY="passive", OMP_NUM_THREADS="1")
    names = ["cge%s" % ("" if len(libs) == 1 else chr(ord("A") + i)) for i in range(len(libs))]
    with open("/proc/loadavg") as f:
        print("load average at start: %s" % " ".join(f.read().split()[:3]))
    header = "| model | " + " | ".join("%s ms" % n for n in names) + " | ORT ms | " + \
        " | ".join("%s/ORT" % n for n in names) + \
        ("" if len(libs) == 1 else " | B/A") + " |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for m in a.models:
        d = os.path.join(a.cache, m)
        runs = a.runs
        if not runs:
            size = os.path.getsize(os.path.join(d, "model.onnx"))
            runs = 30 if size < 8e6 else 10 if size < 40e6 else 3
        res = {n: [] for n in names + ["ORT"]}
        try:
            for _ in range(a.rounds):
                for n, lib in zip(names, libs):
                    # "lib.so?VAR=value,...": that runner's environment too (an A/B of
                    # one library with a kernel switched off, e.g. CGE_DW_NHWC=0)
                    path, _, extra = lib.partition("?")
                    e = dict(env, CGE_LIBRARY=path,
                             **dict(kv.split("=", 1) for kv in extra.split(",") if kv))
                    res[n].append(run_child([sys.executable, "-c", CGE_CHILD, ROOT, d, str(runs)], e)["cpu_ms"])
                res["ORT"].append(run_child(["node", "-e", ORT_CHILD, ROOT,
                                             os.path.join(d, "manifest.json"), str(runs)], env)["cpu_ms"])
        except Exception as ex:  # a model one runtime cannot run: say so, go on
            print("| %s | failed: %s |" % (m, ex))
            continue
        med = {n: statistics.median(v) for n, v in res.items()}
        row = "| %s | " % m + " | ".join("%.2f" % med[n] for n in names) + " | %.2f | " % med["ORT"] + \
            " | ".join("%.2f" % (med[n] / med["ORT"]) for n in names)
        if len(libs) > 1:
            row += " | %.2f" % (med[names[1]] / med[names[0]])
        print(row + " |", flush=True)
    with open("/proc/loadavg") as f:
        print("load average at end: %s" % " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
