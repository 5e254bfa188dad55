#!/usr/bin/env python3
"""Soak test (`make soak`): several cge.InferenceSession objects run from
several threads for a bounded time on small ONNX models made here, with
random shapes on their dynamic dims and random run options; every result is
checked and the process's memory is compared at the end.

Models (onnx.helper, in memory):
  mlp      x [batch, 32] -> MatMul/Add/Relu/MatMul/Add -> y [batch, 16]
  encoder  x [batch, seq, 32] -> LayerNorm, single-head attention, residual,
           FFN (Relu), residual -> y [batch, seq, 32]
  nonzero  x [n, 8] -> y = Relu(x @ w); z = NonZero(y > 0) (value-dependent)
  loop     y = x + M (a Loop of M iterations; M = 10^12 for cancellations)

Sessions per model: cge's default mode, run_mode="plan", and for mlp and
encoder capture_sizes={"batch": [1, 2, 4, 8]}; a separate run_mode="eager"
session per model computes the references, single-threaded, once per
(model, shape, input) before the soak starts (checked against numpy too).

Run kinds: plain run; run with a timeout that is not reached; zero-copy
I/O binding (every output bound to an OrtValue); I/O binding with outputs
allocated per run (nonzero); Loop runs stopped by timeout= (expect
[runtime] CGE_ERR_TIMEOUT) and by RunOptions.terminate from a canceller
thread (expect [runtime] CGE_ERR_CANCELLED), each followed on the same
session by a run that must be correct.

Memory: RSS (/proc/self/status VmRSS) after warm-up vs at the end; fails if
it grew by more than --rss-limit-mib (64 MiB default; see RSS_NOTE).

Exit status 0 only with no unexpected error, no mismatch, no hang and no
growth past the limit. Usage: soak.py [--seconds 120] [--threads 6] [--seed 1]
"""
import argparse
import collections
import faulthandler
import gc
import heapq
import os
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import cge  # noqa: E402

RSS_NOTE = """\
The bound: every (session, shape) signature is compiled, and every kind of
run (cancellations included) has run, from all threads, before the baseline
is taken, so nothing the engine caches legitimately should grow after it.
What may still grow without a leak is the C allocator's per-thread arenas
and fragmentation from numpy arrays of changing sizes (a few MiB per thread
at these sizes) and Python's own pools: 64 MiB covers that with margin; a
leak of even one small tensor per run (~100k runs) exceeds it."""

TOL = 1e-5
BUCKETS = [1, 2, 4, 8]


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# ---------------------------------------------------------------- models

def _init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def mlp_model(rng):
    w1 = rng.standard_normal((32, 64)).astype(np.float32) * 0.2
    b1 = rng.standard_normal((64,)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((64, 16)).astype(np.float32) * 0.2
    b2 = rng.standard_normal((16,)).astype(np.float32) * 0.1
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "w2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["y"])]
    g = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
        [_init("w1", w1), _init("b1", b1), _init("w2", w2), _init("b2", b2)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])

    def ref(feed):
        x = feed["x"]
        return [(np.maximum(x @ w1 + b1, 0) @ w2 + b2).astype(np.float32)]
    return m.SerializeToString(), ref


def encoder_model(rng):
    d = 32
    p = {k: (rng.standard_normal(s).astype(np.float32) * 0.2)
         for k, s in [("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)), ("wo", (d, d)),
                      ("w1", (d, 64)), ("w2", (64, d))]}
    p["gamma"] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    p["beta"] = (0.1 * rng.standard_normal(d)).astype(np.float32)
    p["scale"] = np.array([1 / np.sqrt(d)], np.float32)
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1,
                         epsilon=1e-5),
        helper.make_node("MatMul", ["ln", "wq"], ["q"]),
        helper.make_node("MatMul", ["ln", "wk"], ["k"]),
        helper.make_node("MatMul", ["ln", "wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"]),
        helper.make_node("Mul", ["s0", "scale"], ["s"]),
        helper.make_node("Softmax", ["s"], ["att"], axis=-1),
        helper.make_node("MatMul", ["att", "v"], ["ctx"]),
        helper.make_node("MatMul", ["ctx", "wo"], ["o"]),
        helper.make_node("Add", ["x", "o"], ["h"]),
        helper.make_node("MatMul", ["h", "w1"], ["f1"]),
        helper.make_node("Relu", ["f1"], ["f1r"]),
        helper.make_node("MatMul", ["f1r", "w2"], ["f2"]),
        helper.make_node("Add", ["h", "f2"], ["y"]),
    ]
    g = helper.make_graph(
        nodes, "encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", d])],
        [_init(k, v) for k, v in p.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    def ref(feed):
        x = feed["x"].astype(np.float64)
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        ln = (x - mu) / np.sqrt(var + 1e-5) * p["gamma"] + p["beta"]
        q, k, v = ln @ p["wq"], ln @ p["wk"], ln @ p["wv"]
        s = q @ k.transpose(0, 2, 1) * p["scale"][0]
        s = np.exp(s - s.max(-1, keepdims=True))
        att = s / s.sum(-1, keepdims=True)
        h = x + (att @ v) @ p["wo"]
        return [(h + np.maximum(h @ p["w1"], 0) @ p["w2"]).astype(np.float32)]
    return m.SerializeToString(), ref


def nonzero_model(rng):
    w = rng.standard_normal((8, 8)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Relu", ["m"], ["y"]),
             helper.make_node("Greater", ["y", "zero"], ["pos"]),
             helper.make_node("NonZero", ["pos"], ["z"])]
    g = helper.make_graph(
        nodes, "nonzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8]),
         helper.make_tensor_value_info("z", TensorProto.INT64, [2, None])],
        [_init("w", w), _init("zero", np.zeros((1,), np.float32))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])

    def ref(feed):
        y = np.maximum(feed["x"] @ w, 0).astype(np.float32)
        return [y, np.array(np.nonzero(y > 0), dtype=np.int64)]
    return m.SerializeToString(), ref


def loop_model(_rng):
    """y = x + M (a Loop of M iterations adding 1; M is a graph input)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["x_in", "one"], ["x_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [4])],
        [helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body)], "loop",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])

    def ref(feed):
        return [(feed["x"] + np.float32(feed["M"])).astype(np.float32)]
    return m.SerializeToString(), ref


def loop_feed(m, x):
    return {"M": np.array(m, np.int64), "cond": np.array(True), "x": x}


# ---------------------------------------------------------------- cases

class Case:
    """One input of one model at one shape, with its reference outputs."""

    def __init__(self, model, shape_key, feed):
        self.model, self.shape_key, self.feed = model, shape_key, feed
        self.ref = None


def make_cases(rng):
    cases = collections.defaultdict(list)
    for b in range(1, 13):                      # mlp: batch 1..12 (9..12 past the buckets)
        for _ in range(3):
            cases["mlp"].append(Case("mlp", (b,), {
                "x": rng.standard_normal((b, 32)).astype(np.float32)}))
    for b in (1, 2, 3, 4):                      # encoder: batch x seq
        for s in (1, 3, 5, 8, 16):
            for _ in range(2):
                cases["encoder"].append(Case("encoder", (b, s), {
                    "x": rng.standard_normal((b, s, 32)).astype(np.float32)}))
    for n in range(1, 13):                      # nonzero: n rows, 3 inputs each
        for _ in range(3):
            cases["nonzero"].append(Case("nonzero", (n,), {
                "x": rng.standard_normal((n, 8)).astype(np.float32)}))
    for m in (0, 1, 7, 50):                     # loop: short trip counts
        cases["loop"].append(Case("loop", (m,), loop_feed(
            m, rng.standard_normal(4).astype(np.float32))))
    return cases


# ---------------------------------------------------------------- the soak

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.runs = collections.Counter()         # kind -> successful runs checked
        self.expected = collections.Counter()     # kind/status -> expected errors
        self.unexpected = collections.Counter()   # kind/layer/status -> unexpected errors
        self.samples = []                         # first unexpected errors / mismatches
        self.mismatches = collections.Counter()

    def ok(self, kind):
        with self.lock:
            self.runs[kind] += 1

    def exp(self, kind, status):
        with self.lock:
            self.expected["%s %s" % (kind, status)] += 1

    def bad(self, kind, what, detail):
        with self.lock:
            if what == "mismatch":
                self.mismatches[kind] += 1
            else:
                self.unexpected["%s %s" % (kind, what)] += 1
            if len(self.samples) < 20:
                self.samples.append("%s: %s: %s" % (kind, what, detail))


def compare(got, ref):
    if len(got) != len(ref):
        return "%d outputs, want %d" % (len(got), len(ref))
    for i, (a, b) in enumerate(zip(got, ref)):
        a = np.asarray(a)
        if a.shape != b.shape or a.dtype != b.dtype:
            return "output %d is %s %s, want %s %s" % (i, a.dtype, a.shape, b.dtype, b.shape)
        if b.dtype.kind in "iub":
            if not np.array_equal(a, b):
                return "output %d differs (integers)" % i
        elif not np.allclose(a, b, rtol=TOL, atol=TOL):
            return "output %d differs by %.3g" % (i, float(np.max(np.abs(a - b))))
    return None


class Canceller(threading.Thread):
    """Sets RunOptions.terminate at the times asked (one thread for all)."""

    def __init__(self):
        super().__init__(daemon=True, name="canceller")
        self.cv = threading.Condition()
        self.heap, self.seq, self.stop = [], 0, False

    def schedule(self, delay, ro):
        with self.cv:
            self.seq += 1
            heapq.heappush(self.heap, (time.monotonic() + delay, self.seq, ro))
            self.cv.notify()

    def run(self):
        with self.cv:
            while not self.stop:
                now = time.monotonic()
                while self.heap and self.heap[0][0] <= now:
                    heapq.heappop(self.heap)[2].terminate = True
                wait = self.heap[0][0] - now if self.heap else 1.0
                self.cv.wait(max(wait, 0.0))


class Soak:
    def __init__(self, args):
        self.args = args
        rng = np.random.default_rng(args.seed)
        makers = {"mlp": mlp_model, "encoder": encoder_model, "nonzero": nonzero_model,
                  "loop": loop_model}
        self.models = {name: f(rng) for name, f in makers.items()}
        self.cases = make_cases(rng)
        nt = args.num_threads
        self.sessions = {}   # model -> [(label, session)]
        for name, (onnx_bytes, _) in self.models.items():
            sl = [("default", cge.InferenceSession(onnx_bytes, num_threads=nt)),
                  ("plan", cge.InferenceSession(onnx_bytes, run_mode="plan", num_threads=nt))]
            if name in ("mlp", "encoder"):
                sl.append(("buckets", cge.InferenceSession(
                    onnx_bytes, capture_sizes={"batch": BUCKETS}, num_threads=nt)))
            self.sessions[name] = sl
        self.stats = Stats()
        self.canceller = Canceller()
        self.deadline = 0.0

    # ---- references, single-threaded, once per (model, shape, input)
    def references(self):
        for name, (onnx_bytes, np_ref) in self.models.items():
            ref_sess = cge.InferenceSession(onnx_bytes, run_mode="eager",
                                            num_threads=self.args.num_threads)
            for c in self.cases[name]:
                c.ref = [np.array(a, copy=True) for a in ref_sess.run(None, c.feed)]
                # the engine's own reference against numpy (float64 for the encoder)
                why = compare(c.ref, np_ref(c.feed)) if name != "encoder" else None
                if name == "encoder":
                    npr = np_ref(c.feed)[0]
                    if not np.allclose(c.ref[0], npr, rtol=1e-4, atol=1e-4):
                        why = "differs from numpy by %.3g" % np.max(np.abs(c.ref[0] - npr))
                if why:
                    self.stats.bad("%s/eager/reference" % name, "mismatch",
                                   "shape %s: %s" % (c.shape_key, why))
            ref_sess.close()

    # ---- one run of one kind; returns nothing, records in stats
    def one(self, rng, model, label, sess, kind, case):
        key = "%s/%s/%s" % (model, label, kind)
        st = self.stats
        try:
            if kind in ("run", "after_cancel"):
                got = sess.run(None, case.feed)
            elif kind == "timeout_ok":
                got = sess.run(None, case.feed, timeout=60.0)
            elif kind == "bind":          # zero-copy: every output bound to an OrtValue
                b = sess.io_binding()
                b.bind_cpu_input("x", case.feed["x"])
                outs = [cge.OrtValue.ortvalue_from_shape_and_type(r.shape, r.dtype)
                        for r in case.ref]
                for o, r in zip(sess.get_outputs(), outs):
                    b.bind_ortvalue_output(o.name, r)
                sess.run_with_iobinding(b)
                got = [v.numpy() for v in b.get_outputs()]
                if any(g.ctypes.data != o.data_ptr() for g, o in zip(got, outs)):
                    st.bad(key, "not-in-place", "outputs are not the bound buffers")
            elif kind == "bind_alloc":    # outputs allocated by the run
                b = sess.io_binding()
                b.bind_cpu_input("x", case.feed["x"])
                for o in sess.get_outputs():
                    b.bind_output(o.name, "cpu")
                sess.run_with_iobinding(b)
                got = b.copy_outputs_to_cpu()
            elif kind in ("cancel_timeout", "cancel_terminate"):
                self.cancel(rng, key, sess, kind, case)
                return
            else:
                raise AssertionError(kind)
        except cge.Error as e:
            st.bad(key, "%s/%s" % (e.layer, e.status), str(e)[:300])
            return
        except Exception as e:  # noqa: BLE001 - anything else is a failure too
            st.bad(key, type(e).__name__, "".join(traceback.format_exception_only(e))[:300])
            return
        why = compare(got, case.ref)
        if why:
            st.bad(key, "mismatch", "shape %s: %s" % (case.shape_key, why))
        else:
            st.ok(key)

    def cancel(self, rng, key, sess, kind, case):
        """A Loop of 10^12 iterations stopped by timeout= or by terminate from
        the canceller thread; then the same session must give a right answer."""
        st = self.stats
        x = case.feed["x"]
        t0 = time.monotonic()
        try:
            if kind == "cancel_timeout":
                want = "CGE_ERR_TIMEOUT"
                sess.run(None, loop_feed(10 ** 12, x), timeout=float(rng.uniform(0.005, 0.08)))
            else:
                want = "CGE_ERR_CANCELLED"
                ro = cge.RunOptions()
                self.canceller.schedule(float(rng.uniform(0.005, 0.08)), ro)
                sess.run(None, loop_feed(10 ** 12, x), ro)
            st.bad(key, "not-stopped", "a Loop of 10^12 iterations returned")
            return
        except cge.Error as e:
            if e.layer == "runtime" and e.status == want:
                st.exp(key, want)
            elif (kind == "cancel_terminate" and e.layer == "session" and
                  e.status == "CGE_ERR_STATE" and "terminate" in str(e)):
                st.exp(key, "refused(terminate set before the run)")
            else:
                st.bad(key, "%s/%s" % (e.layer, e.status), str(e)[:300])
        took = time.monotonic() - t0
        if took > 5:
            st.bad(key, "slow-stop", "stopped after %.1f s" % took)
        self.one(rng, "loop", key.split("/")[1], sess, "after_cancel", case)  # usable after

    def kinds_for(self, model, label):
        if model == "loop":
            return ["run", "timeout_ok", "cancel_timeout", "cancel_terminate"]
        if model == "nonzero":
            return ["run", "timeout_ok", "bind_alloc"]
        return ["run", "timeout_ok", "bind"]

    def pick(self, rng):
        model = rng.choice(["mlp", "mlp", "encoder", "encoder", "nonzero", "loop"])
        label, sess = self.sessions[model][rng.integers(len(self.sessions[model]))]
        kinds = self.kinds_for(model, label)
        if model == "loop":
            kind = kinds[rng.choice(4, p=[0.4, 0.2, 0.2, 0.2])]
        else:
            kind = kinds[rng.choice(3, p=[0.5, 0.15, 0.35])]
        cases = self.cases[model]
        return model, label, sess, kind, cases[rng.integers(len(cases))]

    def warm_up(self):
        """Every (session, kind, case) once, single-threaded."""
        rng = np.random.default_rng(self.args.seed + 1000)
        for model, sl in self.sessions.items():
            for label, sess in sl:
                for kind in self.kinds_for(model, label):
                    for c in self.cases[model]:
                        self.one(rng, model, label, sess, kind, c)

    def worker(self, t, until):
        rng = np.random.default_rng(self.args.seed * 100 + t)
        try:
            while time.monotonic() < until:
                self.one(rng, *self.pick(rng))
        except BaseException as e:  # noqa: BLE001
            self.stats.bad("worker-%d" % t, "crash", repr(e))

    def threaded(self, seconds):
        until = time.monotonic() + seconds
        ts = [threading.Thread(target=self.worker, args=(t, until), name="soak-%d" % t)
              for t in range(self.args.threads)]
        for t in ts:
            t.start()
        return ts, until


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 120)))
    ap.add_argument("--threads", type=int, default=int(os.environ.get("SOAK_THREADS", 6)))
    ap.add_argument("--num-threads", type=int, default=1,
                    help="each session's CPU device threads (0: every core)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-limit-mib", type=float, default=64.0)
    args = ap.parse_args()
    faulthandler.enable()

    t_start = time.monotonic()
    soak = Soak(args)
    soak.canceller.start()
    soak.references()
    soak.warm_up()
    # a threaded warm-up too (each thread's allocator arenas, Python's pools)
    warm_s = min(10.0, max(2.0, args.seconds * 0.1))
    ts, _ = soak.threaded(warm_s)
    for t in ts:
        t.join()
    gc.collect()
    rss_warm = rss_kib()
    warm_runs = sum(soak.stats.runs.values())
    print("soak: warm-up done in %.1f s (%d checked runs), RSS %.1f MiB; soaking %d threads "
          "over %d sessions for %.0f s" % (time.monotonic() - t_start, warm_runs,
                                            rss_warm / 1024, args.threads,
                                            sum(len(s) for s in soak.sessions.values()),
                                            args.seconds), flush=True)

    # a hang (a run that never returns) dumps every thread's stack and fails
    faulthandler.dump_traceback_later(args.seconds + 120, exit=True)
    ts, until = soak.threaded(args.seconds)
    rss_series = []
    while any(t.is_alive() for t in ts):
        time.sleep(min(10.0, max(0.1, until - time.monotonic())) if time.monotonic() < until
                   else 0.2)
        if time.monotonic() < until + 0.5:
            rss_series.append(rss_kib() // 1024)
    for t in ts:
        t.join()
    faulthandler.cancel_dump_traceback_later()
    soak.canceller.stop = True
    with soak.canceller.cv:
        soak.canceller.cv.notify()
    gc.collect()
    rss_end = rss_kib()

    # close(): every session releases now; a run afterwards is refused
    close_err = []
    for sl in soak.sessions.values():
        for label, sess in sl:
            try:
                sess.close(timeout=30)
            except cge.Error as e:
                close_err.append("%s: %s" % (label, e))

    st = soak.stats
    print("\n== runs checked (warm-up included: %d of them) ==" % warm_runs)
    for k in sorted(st.runs):
        print("  %-36s %8d" % (k, st.runs[k]))
    print("  %-36s %8d" % ("total", sum(st.runs.values())))
    print("== expected errors ==")
    for k in sorted(st.expected):
        print("  %-60s %6d" % (k, st.expected[k]))
    print("== unexpected errors ==")
    for k in sorted(st.unexpected):
        print("  %-60s %6d" % (k, st.unexpected[k]))
    if not st.unexpected:
        print("  none")
    print("== mismatches ==")
    for k in sorted(st.mismatches):
        print("  %-36s %8d" % (k, st.mismatches[k]))
    if not st.mismatches:
        print("  none")
    if st.samples:
        print("== first failures ==")
        for s in st.samples:
            print("  " + s)
    grew = (rss_end - rss_warm) / 1024
    print("== memory ==\n  RSS after warm-up %.1f MiB, at the end %.1f MiB (%+.1f MiB; limit "
          "%.0f MiB)\n  RSS every 10 s (MiB): %s"
          % (rss_warm / 1024, rss_end / 1024, grew, args.rss_limit_mib,
             " ".join(str(r) for r in rss_series)))
    for e in close_err:
        print("  close failed: " + e)

    failed = []
    if st.unexpected:
        failed.append("%d unexpected errors" % sum(st.unexpected.values()))
    if st.mismatches:
        failed.append("%d mismatches" % sum(st.mismatches.values()))
    if grew > args.rss_limit_mib:
        failed.append("RSS grew by %.1f MiB (> %.0f)" % (grew, args.rss_limit_mib))
    if close_err:
        failed.append("%d close() failures" % len(close_err))
    if not st.runs:
        failed.append("no run completed")
    print("soak: %s in %.0f s" % ("FAIL: " + "; ".join(failed) if failed else "PASS",
                                  time.monotonic() - t_start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
