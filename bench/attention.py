"""The attention fusion, A/B in one process (make bench-attention).

Sessions of bench/dynamic.py's models with the fuse_attention pass on and off
(CGE_DISABLE_PASSES=fuse_attention while the session compiles) live in one
process and run alternately, so that the load of a shared machine falls on
both alike: (c) the concat-cache decoder (default mode), (d) the
static-cache decoder bound through I/O binding, both a 16-token prompt and
64 greedy steps per generation, and (b) the TransformerEncoder's steady run
at lengths 16, 64 and 128. It prints ms per token (median and p10, the
fastest tenth of the steps), the plan steps (kernel launches) per decode step
counted by the profiler, whether both sides' tokens agree, and ONNX Runtime
on the same models in the same run (bench/dynamic.py's ORT child) for the
ratios. Knobs: BENCH_ROUNDS (alternations, 3), BENCH_STEPS (64),
BENCH_RUNS (encoder runs per length, 30), BENCH_THREADS (2),
BENCH_WORKLOADS ("decode,encoder": either or both), BENCH_ENCODER_SEQS (the
lengths, bench/dynamic.py's 16..20, 64, 128 by default).

The encoder rows also give CPU time per run (process time of the
alternating runs, median): on a shared machine another process's load
stretches wall time much more than CPU time, so on/off in CPU time is the
steadier A/B."""
import collections
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
THREADS = os.environ.get("BENCH_THREADS", "2")
os.environ.setdefault("CGE_LIBRARY", os.path.join(BUILD, "libcge.so"))
os.environ["CGE_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = THREADS
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
import dynamic as dyn  # noqa: E402
import numpy as np  # noqa: E402

import cge  # noqa: E402

SIDES = ("on", "off")
WORKLOADS = os.environ.get("BENCH_WORKLOADS", "decode,encoder").split(",")
ENCODER_SEQS = [int(x) for x in os.environ.get("BENCH_ENCODER_SEQS", "16,17,18,19,20,64,128").split(",")]


def session(model, side, profile=False):
    os.environ["CGE_DISABLE_PASSES"] = "" if side == "on" else "fuse_attention"
    try:
        so = cge.SessionOptions()
        so.enable_profiling = profile
        return cge.InferenceSession(model, so)
    finally:
        os.environ.pop("CGE_DISABLE_PASSES", None)


def concat_step(s, ins):
    def step(ids, past):
        outs = s.run(None, dict(zip(ins, [np.asarray(ids, np.int64)] + list(past))))
        return outs[0], outs[1:]
    return step


def static_spec(out_dir):
    static = dyn.mdm.build("decoder_static")[0]
    model, npz = dyn.mdm.make("decoder_static", out_dir)
    ins, outs = dyn.mdm.static_io_names(static)
    return {"kind": "static_decode", "model": model, "npz": npz, "steps": dyn.STEPS, "runs": 3,
            "generations": 2, "threads": int(THREADS), "prompt": dyn.mdm.prompt().tolist(),
            "ids": "ids", "pos": "pos",
            "cache": [[i, o, list(sh)] for i, o, sh in zip(ins[2:], outs[1:],
                                                          dyn.mdm.static_cache_shapes(static))]}


def launches(s, feeds, runs=3):
    """Profiled plan steps per run (the last `runs` runs), by op type."""
    for _ in range(runs):
        s.run(None, feeds)
    with open(s.end_profiling()) as f:
        ev = [e for e in json.load(f) if e.get("cat") == "Node"]
    per = len(ev) // runs
    ops = collections.Counter(e.get("args", {}).get("op_name", e.get("name")) for e in ev[-per:])
    return per, ops


def stats(ts):
    ts = sorted(ts)
    return {"median": ts[len(ts) // 2], "p10": ts[len(ts) // 10], "mean": statistics.fmean(ts)}


def fmt_ops(ops):
    keep = ("Transpose", "MatMul", "Softmax", "Where", "Div", "Attention")
    return ", ".join("%s %d" % (k, ops.get(k, 0)) for k in keep if ops.get(k, 0))


def main():
    out_dir = os.environ.get("BENCH_MODEL_DIR") or os.path.join(tempfile.gettempdir(),
                                                                 "cge-bench-dynamic-models")
    print("attention fusion A/B: %s threads, %d alternating rounds, %d steps per generation; "
          "load average at start %.2f" % (THREADS, ROUNDS, dyn.STEPS, os.getloadavg()[0]))
    cspec = dyn.concat_spec(out_dir)
    sspec = static_spec(out_dir)
    enc_model, _ = dyn.mdm.make("encoder_dyn", out_dir)
    report = {}
    # (c) and (d): alternate generations of the two sides
    decodes = (("concat decoder (default mode)", cspec), ("static decoder (bound)", sspec))
    for label, spec in (decodes if "decode" in WORKLOADS else ()):
        sess = {sd: session(spec["model"], sd) for sd in SIDES}
        if spec["kind"] == "decode":
            steps = {sd: concat_step(sess[sd], spec["inputs"]) for sd in SIDES}
            empty = dyn.mdm.empty_past
        else:
            steps = {sd: dyn.static_bound_step(sess[sd], spec) for sd in SIDES}
            empty = dyn.static_empty(spec)
        times = {sd: [] for sd in SIDES}
        tokens = {}
        for r in range(ROUNDS + 1):  # round 0 warms both (first compiles), not counted
            for sd in (SIDES if r % 2 else SIDES[::-1]):
                g = dyn.greedy(steps[sd], spec["prompt"], empty(), dyn.STEPS, 0)
                tokens[sd] = g["tokens"]
                if r:
                    times[sd] += g["token_ms"]
        # launches at one decode step (a seq-1 run after a prefill)
        counts = {}
        for sd in SIDES:
            ps = session(spec["model"], sd, profile=True)
            if spec["kind"] == "decode":
                h, dh = spec["past_shape"]
                feeds = {spec["inputs"][0]: np.array([[5]], np.int64)}
                feeds.update({n: np.zeros((1, h, 17, dh), np.float32) for n in spec["inputs"][1:]})
            else:
                feeds = {"ids": np.array([[5]], np.int64), "pos": np.array([17], np.int64)}
                feeds.update({c[0]: np.zeros(c[2], np.float32) for c in spec["cache"]})
            counts[sd] = launches(ps, feeds)
        report[label] = {sd: dict(stats(times[sd]), launches=counts[sd][0],
                                  ops=dict(counts[sd][1])) for sd in SIDES}
        report[label]["tokens_equal"] = tokens["on"] == tokens["off"]
        del sess
    # (b) encoder steady runs, alternating
    enc_rows = {}
    seqs = ENCODER_SEQS if "encoder" in WORKLOADS else []
    enc = {sd: session(enc_model, sd) for sd in SIDES} if seqs else {}
    name = enc["on"].get_inputs()[0].name if seqs else None
    for seq in seqs:
        x = dyn.pattern([1, seq, 256])
        t = {sd: [] for sd in SIDES}
        cpu = {sd: [] for sd in SIDES}
        for sd in SIDES:
            for _ in range(3):
                enc[sd].run(None, {name: x})
        diff = float(np.abs(enc["on"].run(None, {name: x})[0] - enc["off"].run(None, {name: x})[0]).max())
        for i in range(int(os.environ.get("BENCH_RUNS", "30"))):
            for sd in (SIDES if i % 2 else SIDES[::-1]):
                c0, t0 = time.process_time(), time.perf_counter()
                enc[sd].run(None, {name: x})
                t[sd].append((time.perf_counter() - t0) * 1e3)
                cpu[sd].append((time.process_time() - c0) * 1e3)
        enc_rows[seq] = {sd: dict(stats(t[sd]), cpu_median=stats(cpu[sd])["median"]) for sd in SIDES}
        enc_rows[seq]["max_abs_diff"] = diff
    # ONNX Runtime in the same run
    with tempfile.TemporaryDirectory() as tmp:
        no = {"error": "not run (BENCH_WORKLOADS)"}
        ort_c = dyn.run_ort(dict(cspec, runs=3), tmp)[0] if report else no
        ort_s = dyn.run_ort(dict(sspec, runs=3), tmp)[0] if report else no
        ort_e = dyn.run_ort({"kind": "shapes", "model": enc_model, "input": "input",
                             "shapes": [[1, s, 256] for s in seqs], "runs": 30,
                             "warmup": 3, "threads": int(THREADS)}, tmp)[0] if seqs else no

    def ort_tok(r):
        if "error" in r:
            return None
        ts = [t for g in r["generations"] if "token_ms" in g for t in g["token_ms"]]
        return stats(ts) if ts else None
    oc, os_ = ort_tok(ort_c), ort_tok(ort_s)
    if report:
        print("\nms per token (all steps of %d generations per side); ratios against ONNX Runtime's concat "
              "form (c) in this run" % ROUNDS)
        print("%-30s %4s | %8s %8s | %8s %8s | %9s | %s" % ("workload", "pass", "median", "p10", "/ORT(c)",
                                                           "p10/ORT", "launches", "of which"))
    for label, rep in report.items():
        for sd in SIDES:
            r = rep[sd]
            rm = r["median"] / oc["median"] if oc else float("nan")
            rp = r["p10"] / oc["p10"] if oc else float("nan")
            print("%-30s %4s | %8.3f %8.3f | %8.2f %8.2f | %9d | %s" % (label, sd, r["median"], r["p10"], rm, rp,
                                                                    r["launches"], fmt_ops(r["ops"])))
        print("%-30s      on/off median %.2f, p10 %.2f; tokens equal on and off: %s" % (
            "", rep["on"]["median"] / rep["off"]["median"], rep["on"]["p10"] / rep["off"]["p10"],
            rep["tokens_equal"]))
    for lb, o in (("ORT concat (c)", oc), ("ORT static (d)", os_)) if report else ():
        if o:
            print("%-30s      | %8.3f %8.3f |" % (lb, o["median"], o["p10"]))
        else:
            print("%-30s      | error: %s" % (lb, (ort_c if lb.endswith("(c)") else ort_s).get("error")))
    print("\nencoder steady ms (median of alternating runs; cpu: process CPU ms per run, median)")
    orows = {tuple(r["shape"]): r for r in ort_e.get("rows", [])} if "error" not in ort_e else {}
    for seq, row in enc_rows.items():
        o = orows.get((1, seq, 256), {}).get("median_ms")
        print("  seq %3d: on %7.3f  off %7.3f  on/off %.2f  cpu on/off %.2f  ORT %s  on/ORT %s  "
              "max|on-off| %.1e" % (
                  seq, row["on"]["median"], row["off"]["median"], row["on"]["median"] / row["off"]["median"],
                  row["on"]["cpu_median"] / row["off"]["cpu_median"],
                  "%.3f" % o if o else "-", "%.2f" % (row["on"]["median"] / o) if o else "-",
                  row["max_abs_diff"]))
    print("load average at the end: %.2f" % os.getloadavg()[0])
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump({"decode": report, "encoder": enc_rows, "ort_concat": oc, "ort_static": os_}, f,
                      indent=1, default=str)


if __name__ == "__main__":
    main()
