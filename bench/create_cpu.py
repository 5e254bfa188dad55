"""Session creation from .onnx: the CPU time (user + system, every thread) of
cge.InferenceSession(model.onnx) against ONNX Runtime's
InferenceSession.create, each in a fresh process as scripts/zoo.py creates
them, alternating runners round by round; also the first run's CPU time (work
moved out of creation into the first run shows there). Not a test.

Usage: bench/create_cpu.py [--lib A.so] [--lib B.so] [--rounds N] [--threads N]
                           [--cache DIR] MODEL_NAME ...

A library may carry environment settings: --lib "build/libcge.so?VAR=value".
The figure per runner is the median over rounds. Models come from the zoo's
cache (scripts/zoo.py: DIR/NAME/model.onnx, io.npz, manifest.json).
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cpu_ab import run_child  # noqa: E402  (one child runner for both benches)
ROOT = os.path.dirname(HERE)

CGE_CHILD = r"""
import json, os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import cge
d, threads = sys.argv[2], int(sys.argv[3])
io = np.load(os.path.join(d, "io.npz"))
so = cge.SessionOptions()
so.intra_op_num_threads = threads
c0, w0 = time.process_time(), time.perf_counter()
sess = cge.InferenceSession(os.path.join(d, "model.onnx"), so)
c1, w1 = time.process_time(), time.perf_counter()
feeds = {inp.name: io["in%d" % i] for i, inp in enumerate(sess.get_inputs())}
sess.run(None, feeds)
c2 = time.process_time()
print(json.dumps({"create_cpu": (c1 - c0) * 1e3, "create_wall": (w1 - w0) * 1e3,
                  "first_cpu": (c2 - c1) * 1e3}))
"""

ORT_CHILD = r"""
const fs = require('fs');
const path = require('path');
const ort = require(path.join(process.argv[1], 'bench', 'node_modules', 'onnxruntime-node'));
const ARRAYS = { float32: Float32Array, int64: BigInt64Array, int32: Int32Array, bool: Uint8Array,
  float64: Float64Array, uint8: Uint8Array, int8: Int8Array };
(async () => {
  const manifest = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const threads = Number(process.argv[3]);
  const c0 = process.cpuUsage(), w0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(manifest.model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
    executionMode: 'sequential' });
  const c = process.cpuUsage(c0), w = Number(process.hrtime.bigint() - w0) / 1e6;
  const feeds = {};
  manifest.inputs.forEach((inp, i) => {
    const buf = fs.readFileSync(inp.file);
    const A = ARRAYS[inp.dtype];
    feeds[session.inputNames[i]] = new ort.Tensor(inp.dtype,
      new A(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)), inp.shape);
  });
  const c1 = process.cpuUsage();
  await session.run(feeds);
  const f = process.cpuUsage(c1);
  console.log(JSON.stringify({ create_cpu: (c.user + c.system) / 1e3, create_wall: w,
                               first_cpu: (f.user + f.system) / 1e3 }));
})().catch((e) => { console.error(String(e)); process.exit(1); });
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache", default="/tmp/cge-zoo")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    libs = a.lib or [os.path.join(ROOT, "build", "libcge.so")]
    env = dict(os.environ, OMP_WAIT_POLICY="passive", OMP_NUM_THREADS=str(a.threads))
    names = ["cge%s" % ("" if len(libs) == 1 else chr(ord("A") + i)) for i in range(len(libs))]
    with open("/proc/loadavg") as f:
        print("load average at start: %s; %d thread(s)" % (" ".join(f.read().split()[:3]),
                                                          a.threads))
    cols = names + ["ORT"]
    header = "| model | " + " | ".join("%s create CPU ms" % n for n in cols) + " | " + \
        " | ".join("%s/ORT" % n for n in names) + " | " + \
        " | ".join("%s first run CPU ms" % n for n in cols) + " | " + \
        " | ".join("%s create wall ms" % n for n in cols) + " |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for m in a.models:
        d = os.path.join(a.cache, m)
        res = {n: [] for n in cols}
        try:
            for _ in range(a.rounds):
                for n, lib in zip(names, libs):
                    path, _, extra = lib.partition("?")
                    e = dict(env, CGE_LIBRARY=path,
                             **dict(kv.split("=", 1) for kv in extra.split(",") if kv))
                    res[n].append(run_child([sys.executable, "-c", CGE_CHILD, ROOT, d,
                                             str(a.threads)], e))
                res["ORT"].append(run_child(["node", "-e", ORT_CHILD, ROOT,
                                             os.path.join(d, "manifest.json"), str(a.threads)],
                                            env))
        except Exception as ex:  # a model one runtime cannot run: say so, go on
            print("| %s | failed: %s |" % (m, ex))
            continue
        med = {n: {k: statistics.median(r[k] for r in v) for k in v[0]} for n, v in res.items()}
        row = "| %s | " % m + " | ".join("%.1f" % med[n]["create_cpu"] for n in cols) + " | " + \
            " | ".join("%.2f" % (med[n]["create_cpu"] / med["ORT"]["create_cpu"]) for n in names) + \
            " | " + " | ".join("%.1f" % med[n]["first_cpu"] for n in cols) + \
            " | " + " | ".join("%.1f" % med[n]["create_wall"] for n in cols)
        print(row + " |", flush=True)
    with open("/proc/loadavg") as f:
        print("load average at end: %s" % " ".join(f.read().split()[:3]))


if __name__ == "__main__":
    main()
