"""make bench-dynamic: what a user of a model with symbolic dimensions sees,
cge beside ONNX Runtime (and PyTorch eager), in one run. Not a test.

  (a) resnet18 with a dynamic batch, batches 1,2,4,3,1 in that order, and
  (b) a TransformerEncoder with a dynamic sequence (batch 1), lengths
      16,17,18,19,20,64,128,16: per shape, first ms (the first run at that
      shape in the session: a new shape, except where a shape comes again)
      and steady ms (median of BENCH_RUNS runs after BENCH_WARMUP runs).
  (c) a GPT-like decoder with a key/value cache: a 16-token prompt (prefill,
      past_len 0), then BENCH_STEPS greedy steps feeding the presents back as
      the past, BENCH_GENERATIONS times in one session: prefill ms, ms per
      token (median, mean), tokens/s, and whether the tokens equal PyTorch's.
      The prefill's argmax is the first token, each step adds one (steps + 1
      tokens); each timing includes the argmax. tokens/s = 1000 / mean.
  (d) decoder_static: the same decoder (same weights) with a static cache of
      MAX_LEN slots (make_dynamic_models.StaticDecoder): the prompt in one run
      at pos 0 (seq 16), then the same greedy steps, each one token at the
      next pos with the presents fed back: every step has the same shapes,
      so cge compiles one plan and replays one capture. Reported as (c), the
      tokens against PyTorch's concat decoder (c's reference), and the ratio
      to ONNX Runtime on this form and on the concat form (c) (ORT's (c) run
      when (c) ran in this invocation, else ORT on the concat model here).
  (e) decoder_rewritten: the concat-form model (c) itself, opened with
      InferenceSession(..., kv_cache_max_len=MAX_LEN): cge rewrites it to
      the static form (caches of MAX_LEN slots, input cache_position) and
      runs it as (d), in each mode. Beside ONNX Runtime's concat form (c)
      (the model as the user has it); tokens against PyTorch's.

Targets (printed beside the ratios; '*' marks a miss): cge's first run at a
new shape <= 1.5x its steady run at that shape; cge's steady run <= 0.9x ONNX
Runtime's; cge's decode ms/token <= 0.8x ONNX Runtime's, on the mean (every
step counts: a step that recompiles is what a user waits for); cge's
static-cache ms/token <= 0.5x ONNX Runtime's concat form's (d against c).

cge runs through python/cge (CGE_LIBRARY=$BUILD/libcge.so, CGE_NUM_THREADS)
in each mode of BENCH_CGE_MODES ("default": cge's own choice; "bound": the
default with I/O binding where the workload has a bound form (the static
decoder: each per-layer cache one buffer bound as its past and its present,
so ScatterElements writes the new slots in place and no cache is copied;
io_binding); "plan": as
CGE_RUN_MODE=plan), ONNX Runtime through bench/ort_dynamic.js (all
optimizations, BENCH_THREADS intra-op threads), PyTorch eager in this process
(BENCH_TORCH_RUNS runs per shape: it is slow here). Every engine and workload runs
in a process of its own, with a fresh session; an error (or a crash) is
reported in the table, as its first line. Models: scripts/make_dynamic_models.py
(into BENCH_MODEL_DIR, once). The CGE_* environment reaches cge's children:
CGE_SHAPE_PROGRAM=0 measures the compile-per-signature path that symbolic
graphs took before their shape program (docs/compiler.md), and CGE_COPY_IO=1
the copies of inputs and outputs that unrecorded runs (a concat step's new
length) made before they used the caller's buffers (docs/guide.md, "Where a
decode step goes"), for A/B runs.

Usage: dynamic.py [--json OUT] [--workloads resnet18,encoder,decoder,decoder_static,decoder_rewritten]"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
RUNS = int(os.environ.get("BENCH_RUNS", "30"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "3"))
STEPS = int(os.environ.get("BENCH_STEPS", "64"))
GENERATIONS = int(os.environ.get("BENCH_GENERATIONS", "2"))
TORCH_RUNS = int(os.environ.get("BENCH_TORCH_RUNS", "10"))  # PyTorch eager (Debian's, no MKL) is slow
TIMEOUT = float(os.environ.get("BENCH_TIMEOUT", "300"))  # seconds per engine and workload
CGE_MODES = [m for m in os.environ.get("BENCH_CGE_MODES", "default,plan,bound").split(",") if m]
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_dynamic_models as mdm  # noqa: E402

RESNET_BATCHES = (1, 2, 4, 3, 1)
ENCODER_SEQS = (16, 17, 18, 19, 20, 64, 128, 16)
WORKLOADS = {
    "resnet18": ("resnet18_dyn", "batch", [[b, 3, 224, 224] for b in RESNET_BATCHES]),
    "encoder": ("encoder_dyn", "seq", [[1, s, 256] for s in ENCODER_SEQS]),
    "decoder": ("decoder_dyn", None, None),
    "decoder_static": ("decoder_static", None, None),
    "decoder_rewritten": ("decoder_dyn", None, None),
}
# The targets.
FIRST_OVER_STEADY = 1.5  # first run at a new shape <= 1.5x that shape's steady run
STEADY_OVER_ORT = 0.9    # steady <= 0.9x ONNX Runtime
TOKEN_OVER_ORT = 0.8     # decode ms/token <= 0.8x ONNX Runtime
STATIC_OVER_CONCAT = 0.5  # static-cache ms/token <= 0.5x ONNX Runtime's concat form's


def first_line(e):
    s = str(e).strip()
    return (s.splitlines() or [type(e).__name__])[0]


def pattern(dims):
    """The input the peers get too ((i % 7) * 0.5, as bench/ort_dynamic.js)."""
    import numpy as np
    n = int(np.prod(dims))
    return ((np.arange(n) % 7) * 0.5).astype(np.float32).reshape(dims)


def time_shapes(run, shapes, runs, warmup):
    """Per shape: the first run's ms, then warm-up runs, then median/min of runs."""
    rows = []
    for dims in shapes:
        x = pattern(dims)
        try:
            t0 = time.perf_counter()
            run(x)
            first = (time.perf_counter() - t0) * 1e3
            for _ in range(warmup):
                run(x)
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                run(x)
                times.append((time.perf_counter() - t0) * 1e3)
            times.sort()
            rows.append({"shape": dims, "first_ms": first, "median_ms": times[len(times) // 2],
                         "min_ms": times[0]})
        except Exception as e:  # noqa: BLE001 - reported in the table
            rows.append({"shape": dims, "error": first_line(e)})
    return rows


def greedy(step, prompt, past, steps, repeat):
    """One generation: step(ids, past) -> (logits, presents). Timings include the
    argmax. Then the last step again, `repeat` times, at its (now seen) shape.
    For the static cache, past is (pos, *caches) (static_step)."""
    t0 = time.perf_counter()
    logits, past = step(prompt, past)
    tokens = [int(logits[0, -1].argmax())]
    prefill = (time.perf_counter() - t0) * 1e3
    times = []
    last = None
    for _ in range(steps):
        t0 = time.perf_counter()
        last = ([[tokens[-1]]], past)
        logits, past = step(*last)
        tokens.append(int(logits[0, -1].argmax()))
        times.append((time.perf_counter() - t0) * 1e3)
    seen = []
    for _ in range(repeat if last else 0):
        t0 = time.perf_counter()
        int(step(*last)[0][0, -1].argmax())
        seen.append((time.perf_counter() - t0) * 1e3)
    seen.sort()
    return {"prefill_ms": prefill, "token_ms": times, "tokens": tokens,
            "seen_step_ms": seen[len(seen) // 2] if seen else None}


def generations(step, empty_past, spec, repeat):
    out = []
    for _ in range(spec["generations"]):
        try:
            out.append(greedy(step, spec["prompt"], empty_past(), spec["steps"], repeat))
        except Exception as e:  # noqa: BLE001
            out.append({"error": first_line(e)})
    return out


def static_step(run):
    """A greedy() step for the static-cache decoder: run(ids, pos [1] int64,
    *pasts) -> (logits, *presents); the state carried is (the next pos,
    *presents)."""
    import numpy as np

    def step(ids, state):
        pos, caches = state[0], state[1:]
        ids = np.asarray(ids, np.int64)
        logits, *caches = run(ids, np.array([pos], np.int64), *caches)
        return logits, (pos + ids.shape[1],) + tuple(caches)
    return step


def static_empty(spec):
    """The static decoder's initial state: pos 0 and zeroed caches."""
    import numpy as np
    return lambda: (0,) + tuple(np.zeros(c[2], np.float32) for c in spec["cache"])


def static_bound_step(s, spec):
    """A greedy() step for the static-cache decoder through I/O binding
    (cge's mode "bound"): per sequence length, fixed ids/pos/logits buffers
    are bound once, and each cache's one buffer is bound as both its past
    (input) and its present (output): the kernels write the new slots in
    place (cge keeps the cache where it is when the plan says the present may
    share its past's memory, docs/guide.md), with no copy of any cache. The
    same buffers each step keep the replay's recording."""
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import cge
    vocab = s.get_outputs()[0].shape[-1]
    pasts, presents = [c[0] for c in spec["cache"]], [c[1] for c in spec["cache"]]
    bound = {}

    def step(ids, state):
        pos, caches = state[0], list(state[1:])
        ids = np.asarray(ids, np.int64)
        key = (ids.shape[1],) + tuple(id(c) for c in caches)
        b = bound.get(key)
        if b is None:
            b = {"ids": np.empty(ids.shape, np.int64), "pos": np.empty(1, np.int64),
                 "logits": np.empty((1, ids.shape[1], vocab), np.float32)}
            io = s.io_binding()
            io.bind_cpu_input(spec["ids"], b["ids"])
            io.bind_cpu_input(spec["pos"], b["pos"])
            for name, c in zip(pasts, caches):
                io.bind_cpu_input(name, c)
            io.bind_ortvalue_output(s.get_outputs()[0].name, cge.OrtValue(b["logits"]))
            for name, c in zip(presents, caches):
                io.bind_ortvalue_output(name, cge.OrtValue(c))
            b["io"] = io
            bound[key] = b
        b["ids"][...] = ids
        b["pos"][0] = pos
        s.run_with_iobinding(b["io"])
        return b["logits"], (pos + ids.shape[1],) + tuple(caches)
    return step


def cge_child(spec_path):
    """Runs in its own process (the CGE_* environment set by the parent)."""
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import cge
    with open(spec_path) as f:
        spec = json.load(f)
    t0 = time.perf_counter()
    try:
        s = cge.InferenceSession(spec["model"], kv_cache_max_len=spec.get("kv_cache_max_len"))
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"error": first_line(e)}))
        return
    result = {"create_ms": (time.perf_counter() - t0) * 1e3}
    if spec["kind"] == "shapes":
        name = s.get_inputs()[0].name
        result["rows"] = time_shapes(lambda x: s.run(None, {name: x}), spec["shapes"],
                                     spec["runs"], spec["warmup"])
        # Against PyTorch's output on the reference input (a shape already seen).
        try:
            ref = np.load(spec["npz"])
            y = s.run(None, {name: ref["input"]})[0]
            result["max_abs_diff"] = float(np.abs(y - ref["output"]).max())
        except Exception as e:  # noqa: BLE001
            result["check_error"] = first_line(e)
    elif spec["kind"] == "static_decode":
        names = [spec["ids"], spec["pos"]] + [c[0] for c in spec["cache"]]
        if os.environ.get("BENCH_CGE_BIND"):
            step = static_bound_step(s, spec)
        else:
            step = static_step(lambda *a: s.run(None, dict(zip(names, a))))
        result["generations"] = generations(step, static_empty(spec), spec, spec["runs"])
        try:  # the prefill's logits against the PyTorch module's (static, or concat for (e))
            ref = np.load(spec["npz"])
            logits, _ = step(ref["ids"] if "ids" in ref else ref["input_ids"], static_empty(spec)())
            result["max_abs_diff"] = float(np.abs(logits - ref["logits"]).max())
        except Exception as e:  # noqa: BLE001
            result["check_error"] = first_line(e)
    else:
        ins = spec["inputs"]

        def step(ids, past):
            outs = s.run(None, dict(zip(ins, [np.asarray(ids, np.int64)] + list(past))))
            return outs[0], outs[1:]
        result["generations"] = generations(step, mdm.empty_past, spec, spec["runs"])
        try:  # the prefill's logits against PyTorch's (make_dynamic_models.py's reference)
            ref = np.load(spec["npz"])
            logits, _ = step(ref["input_ids"], mdm.empty_past())
            result["max_abs_diff"] = float(np.abs(logits - ref["logits"]).max())
        except Exception as e:  # noqa: BLE001
            result["check_error"] = first_line(e)
    print(json.dumps(result))


def run_child(cmd, env, cwd):
    """A child's JSON line, or {"error": ...} when it failed or crashed; and its other stderr lines."""
    try:
        p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %g s (BENCH_TIMEOUT)" % TIMEOUT}, []
    notes = [ln for ln in p.stderr.splitlines() if ln.strip()]
    for ln in reversed(p.stdout.strip().splitlines()):
        if ln.startswith("{"):
            return json.loads(ln), notes
    why = "exit status %d" % p.returncode if p.returncode >= 0 else "killed by signal %d" % -p.returncode
    return {"error": "crashed (%s): %s" % (why, notes[-1] if notes else "no message")}, notes


def run_cge(mode, spec, tmp):
    env = dict(os.environ, CGE_NUM_THREADS=str(THREADS), OMP_NUM_THREADS=str(THREADS),
               CGE_LIBRARY=os.path.join(BUILD, "libcge.so"))
    env.pop("CGE_RUN_MODE", None)
    if mode == "bound":
        env["BENCH_CGE_BIND"] = "1"   # default mode, I/O binding where the workload has it
    elif mode != "default":
        env["CGE_RUN_MODE"] = mode
    path = os.path.join(tmp, "spec-cge.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return run_child([sys.executable, os.path.abspath(__file__), "--cge-child", path], env, ROOT)


def run_ort(spec, tmp):
    if not os.path.isfile(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")):
        return {"error": "onnxruntime-node is not installed (make bench-deps)"}, []
    path = os.path.join(tmp, "spec-ort.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return run_child(["node", os.path.join(HERE, "ort_dynamic.js"), path], dict(os.environ), HERE)


def run_torch(name, spec):
    import torch
    torch.set_num_threads(THREADS)
    model, _ = mdm.build(name)
    try:
        with torch.no_grad():
            if spec["kind"] == "shapes":
                rows = time_shapes(lambda x: model(torch.from_numpy(x)), spec["shapes"],
                                   min(TORCH_RUNS, spec["runs"]), min(1, spec["warmup"]))
                return {"rows": rows}
            if spec["kind"] == "static_decode":
                return {"generations": generations(static_step(mdm.torch_static_step(model)),
                                                   static_empty(spec), spec,
                                                   min(TORCH_RUNS, spec["runs"]))}

            def step(ids, past):
                out = model(torch.tensor(ids, dtype=torch.long), *past)
                return out[0].numpy(), out[1:]
            empty = lambda: [torch.from_numpy(a) for a in mdm.empty_past()]  # noqa: E731
            return {"generations": generations(step, empty, spec, min(TORCH_RUNS, spec["runs"]))}
    except Exception as e:  # noqa: BLE001
        return {"error": first_line(e)}


# ---- the table -----------------------------------------------------------------------------

def fmt(v, w, prec=2):
    return f"{v:{w}.{prec}f}" if isinstance(v, (int, float)) else f"{v if v is not None else '-':>{w}}"


def ratio(a, b, target, w):
    """a/b, marked '*' when above target."""
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or b <= 0:
        return f"{'-':>{w}}"
    r = a / b
    return f"{r:{w - 1}.2f}{'*' if target is not None and r > target else ' '}"


def shapes_table(title, dim_name, dim_index, shapes, engines):
    """engines: [(label, result, is_cge)]; cge's first/steady and each cge's steady/ORT."""
    cges = [(lb, r) for lb, r, c in engines if c]
    print(f"\n{title}")
    head = f"{dim_name:>9} |"
    sub = f"{'':>9} |"
    for lb, _, c in engines:
        if lb == "PyTorch":
            head += f" {'PyTorch':>8} |"
            sub += f" {'steady':>8} |"
            continue
        head += f" {lb:^26} |"
        sub += f" {'first':>8} {'steady':>8} {'f/s':>7}  |"
    for lb, _ in cges:
        head += f" {lb + '/ORT':>13}"
        sub += f" {'steady':>13}"
    print(head)
    print(sub)
    print(f"{'target':>9} |" + "".join(
        f" {'':>8} |" if lb == "PyTorch" else
        f" {'':>8} {'':>8} {('<=%.1f' % FIRST_OVER_STEADY) if c else '':>7}  |"
        for lb, _, c in engines) + "".join(f" {'<=%.1f' % STEADY_OVER_ORT:>13}" for _ in cges))
    errors = []
    seen = set()
    for i, dims in enumerate(shapes):
        key = dims[dim_index]
        again = key in seen  # not a new shape: no first-run target
        label = f"{key}{' again' if again else ''}"
        seen.add(key)
        line = f"{label:>9} |"
        rows = {}
        for lb, r, c in engines:
            row = (r.get("rows") or [{}] * len(shapes))[i] if "error" not in r else {"error": None}
            rows[lb] = row
            if "error" in row:
                if row["error"]:
                    errors.append(f"{'':>9}   {lb} at {dim_name} {key}: {row['error']}")
                line += f" {'error':>8} |" if lb == "PyTorch" else f" {'error':>26} |"
                continue
            if lb == "PyTorch":
                line += f" {fmt(row.get('median_ms'), 8)} |"
                continue
            f_, s_ = row.get("first_ms"), row.get("median_ms")
            target = FIRST_OVER_STEADY if c and not again else None
            line += f" {fmt(f_, 8)} {fmt(s_, 8)} {ratio(f_, s_, target, 8)} |"
        for lb, _ in cges:
            line += f" {ratio(rows[lb].get('median_ms'), rows['ORT'].get('median_ms'), STEADY_OVER_ORT, 13)}"
        print(line)
        for e in errors:
            print(e)
        errors = []
    extra = []
    for lb, r, c in engines:
        if "error" in r:
            print(f"{'':>9}   {lb}: {r['error']}")
        if "create_ms" in r:
            extra.append(f"{lb} session {r['create_ms']:.0f} ms")
        if "max_abs_diff" in r:
            extra.append(f"{lb} max |out - PyTorch| {r['max_abs_diff']:.2g}")
        if "check_error" in r:
            extra.append(f"{lb} reference check failed: {r['check_error']}")
    if extra:
        print(f"{'':>9}   " + "; ".join(extra))


def decode_stats(g):
    ts = sorted(g["token_ms"])
    mean = sum(ts) / len(ts) if ts else None
    return {"prefill_ms": g["prefill_ms"], "median": ts[len(ts) // 2] if ts else None,
            "p10": ts[len(ts) // 10] if ts else None,
            "mean": mean, "tps": 1e3 / mean if mean else None, "seen": g.get("seen_step_ms")}


def same_tokens(a, b):
    if a == b:
        return f"yes ({len(a)}/{len(b)})"
    n = sum(x == y for x, y in zip(a, b))
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"no: from token {first} ({n}/{len(b)} equal)"


def decode_table(title, engines, reference, peers):
    """peers: [(engine label, mean ms/token target or None)], each a block of
    cge/peer ratios."""
    print("\n" + title)
    print(f"{'engine':>10} {'gen':>3} | {'prefill':>8} {'ms/token':>9} {'ms/token':>9} {'ms/token':>9} "
          f"{'tokens/s':>9} {'seen-shape':>10} | {'tokens == PyTorch':<28}")
    print(f"{'':>10} {'':>3} | {'ms':>8} {'median':>9} {'mean':>9} {'p10':>9} {'':>9} {'step ms':>10} |")
    stats = {}
    for lb, r, _ in engines:
        gens = r.get("generations") or [{"error": r.get("error", "no result")}]
        for gi, g in enumerate(gens, 1):
            if "error" in g:
                print(f"{lb:>10} {gi:>3} | error: {g['error']}")
                continue
            s = decode_stats(g)
            stats[(lb, gi)] = s
            print(f"{lb:>10} {gi:>3} | {fmt(s['prefill_ms'], 8)} {fmt(s['median'], 9)} {fmt(s['mean'], 9)} "
                  f"{fmt(s['p10'], 9)} {fmt(s['tps'], 9, 1)} {fmt(s['seen'], 10)} | "
                  f"{same_tokens(g['tokens'], reference) if reference else '-'}")
    for peer, target in peers:
        goal = "<=%.1f" % target if target else ""
        print(f"{'cge/' + peer:>14} | {'prefill':>8} {'median':>9} {'mean':>9} {'p10':>9} {'':>9} "
              f"{'seen':>10} |")
        print(f"{'target':>14} | {'':>8} {'':>9} {goal:>9} {'':>9} {'':>9} {'':>10} |")
        for lb, r, c in engines:
            if not c:
                continue
            for gi in range(1, GENERATIONS + 1):
                a, o = stats.get((lb, gi)), stats.get((peer, gi))
                if not a or not o:
                    continue
                print(f"{lb:>10} {gi:>3} | {ratio(a['prefill_ms'], o['prefill_ms'], None, 8)} "
                      f"{ratio(a['median'], o['median'], None, 9)} "
                      f"{ratio(a['mean'], o['mean'], target, 9)} "
                      f"{ratio(a['p10'], o['p10'], None, 9)} "
                      f"{'':>9} {ratio(a['seen'], o['seen'], None, 10)} |")
    print(f"{'':>10}       p10: the fastest tenth of the steps (the nearest to a quiet machine; under "
          f"load the median and mean\n{'':>10}       measure the load too, ONNX Runtime's most)")
    print(f"{'':>10}       seen-shape step: the last step run again at its shape ({RUNS} runs, median; "
          f"PyTorch {min(TORCH_RUNS, RUNS)}),\n{'':>10}       what each step would cost with no "
          f"per-shape work")
    for lb, r, _ in engines:
        if "max_abs_diff" in r:
            print(f"{'':>10}       {lb}: prefill max |logits - PyTorch| {r['max_abs_diff']:.2g}")
        if "check_error" in r:
            print(f"{'':>10}       {lb}: the prefill's reference check failed: {r['check_error']}")


def concat_spec(out_dir):
    """The spec of workload (c), the concat-cache decoder."""
    model, npz = mdm.make("decoder_dyn", out_dir)
    ins, _ = mdm.decoder_io_names()
    return {"kind": "decode", "model": model, "npz": npz, "inputs": ins, "steps": STEPS,
            "runs": RUNS, "generations": GENERATIONS, "threads": THREADS,
            "prompt": mdm.prompt().tolist(),
            "past_shape": [mdm.DECODER["heads"], mdm.DECODER["d_model"] // mdm.DECODER["heads"]]}


def torch_version():
    import torch
    return torch.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="write every measurement to this file")
    ap.add_argument("--workloads",
                    default="resnet18,encoder,decoder,decoder_static,decoder_rewritten")
    ap.add_argument("--cge-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.cge_child:
        return cge_child(args.cge_child)
    out_dir = os.environ.get("BENCH_MODEL_DIR") or os.path.join(tempfile.gettempdir(),
                                                                 "cge-bench-dynamic-models")
    print(f"dynamic shapes: {THREADS} threads; steady = median of {RUNS} runs after {WARMUP} warm-up "
          f"runs; ms. f/s = first/steady. '*' marks a ratio that misses its target.")
    print("load average at start: %.2f (another process on these cores disturbs every number)"
          % os.getloadavg()[0])
    report = {"date": time.strftime("%Y-%m-%d %H:%M"), "load_at_start": os.getloadavg()[0],
              "threads": THREADS, "runs": RUNS, "warmup": WARMUP, "steps": STEPS,
              "generations": GENERATIONS, "cge_modes": CGE_MODES, "workloads": {}}
    notes = []
    labels = [("cge" if m == "default" else "cge " + m, m) for m in CGE_MODES]
    with tempfile.TemporaryDirectory() as tmp:
        for wl in [w for w in args.workloads.split(",") if w]:
            name, dim_name, shapes = WORKLOADS[wl]
            model, npz = mdm.make(name, out_dir)
            if shapes:
                spec = {"kind": "shapes", "model": model, "npz": npz, "input": "input",
                        "shapes": shapes, "runs": RUNS, "warmup": WARMUP, "threads": THREADS}
            elif wl == "decoder_static":
                static = mdm.build(name)[0]  # seeded, ~0.1 s
                ins, outs = mdm.static_io_names(static)
                spec = {"kind": "static_decode", "model": model, "npz": npz, "steps": STEPS,
                        "runs": RUNS, "generations": GENERATIONS, "threads": THREADS,
                        "prompt": mdm.prompt().tolist(), "ids": "ids", "pos": "pos",
                        "cache": [[i, o, list(sh)] for i, o, sh in
                                  zip(ins[2:], outs[1:], mdm.static_cache_shapes(static))]}
            elif wl == "decoder_rewritten":
                ins, outs = mdm.decoder_io_names()
                hd = mdm.DECODER["d_model"] // mdm.DECODER["heads"]
                spec = {"kind": "static_decode", "model": model, "npz": npz, "steps": STEPS,
                        "runs": RUNS, "generations": GENERATIONS, "threads": THREADS,
                        "prompt": mdm.prompt().tolist(), "ids": "input_ids",
                        "pos": "cache_position", "kv_cache_max_len": mdm.MAX_LEN,
                        "cache": [[i, o, [1, mdm.DECODER["heads"], mdm.MAX_LEN, hd]]
                                  for i, o in zip(ins[1:], outs[1:])]}
            else:
                spec = concat_spec(out_dir)
            engines = []
            for lb, mode in labels:
                if mode == "bound" and spec["kind"] != "static_decode":
                    continue   # no bound form: it would be the default mode again
                r, n = run_cge(mode, spec, tmp)
                if "error" not in r:  # a crash's last line is its error
                    notes.extend(f"[{lb}, {wl}] {x}" for x in n if f"[{lb}, {wl}] {x}" not in notes)
                engines.append((lb, r, True))
            if wl != "decoder_rewritten":   # ORT has no rewrite: its concat form is (e)'s peer
                r, n = run_ort(spec, tmp)
                engines.append(("ORT", r, False))
                if "version" in r:
                    report["ort_version"] = r["version"]
                engines.append(("PyTorch", run_torch(name, spec), False))
            report["workloads"][wl] = {lb: r for lb, r, _ in engines}
            if shapes:
                title = ("(a) resnet18, dynamic batch" if wl == "resnet18" else
                         "(b) TransformerEncoder (4 layers, d_model 256), dynamic sequence, batch 1")
                shapes_table(title, dim_name, 0 if wl == "resnet18" else 1, shapes, engines)
            elif wl == "decoder":
                pt = dict((lb, r) for lb, r, _ in engines)["PyTorch"]
                ref = (pt.get("generations") or [{}])[0].get("tokens")
                report["workloads"][wl]["reference_tokens"] = ref
                decode_table(f"(c) GPT-like decoder (4 layers, d 256, 4 heads, vocabulary "
                             f"1000), batch 1: prompt {mdm.PROMPT_LEN} tokens (prefill, empty "
                             f"past), then {STEPS} greedy steps; {GENERATIONS} generation(s) in "
                             f"one session", engines, ref, [("ORT", TOKEN_OVER_ORT)])
            else:
                # The reference is PyTorch's concat decoder (c's), and the peer
                # to beat ONNX Runtime's concat form: c's run, or one here.
                concat = report["workloads"].get("decoder", {})
                ref = concat.get("reference_tokens")
                if ref is None:
                    ref, _ = mdm.torch_greedy(mdm.build("decoder_dyn")[0], mdm.prompt(), STEPS)
                ort_concat = concat.get("ORT")
                where = "(c)'s run above"
                if ort_concat is None:
                    ort_concat, _ = run_ort(concat_spec(out_dir), tmp)
                    where = "run here on decoder_dyn"
                    if "version" in ort_concat:
                        report["ort_version"] = ort_concat["version"]
                engines.append(("ORT concat", ort_concat, False))
                report["workloads"][wl]["reference_tokens"] = ref
                report["workloads"][wl]["ORT concat"] = ort_concat
                if wl == "decoder_rewritten":
                    decode_table(f"(e) the concat-form decoder (c) opened with kv_cache_max_len="
                                 f"{mdm.MAX_LEN}: cge rewrites it to the static form and runs it "
                                 f"as (d);\n    tokens against PyTorch's concat decoder; ORT "
                                 f"concat: ONNX Runtime on the model as exported, {where}",
                                 engines, ref, [("ORT concat", STATIC_OVER_CONCAT)])
                    continue
                decode_table(f"(d) the same decoder with a static cache ({mdm.MAX_LEN} "
                             f"slots; {len(spec['cache'])} caches {spec['cache'][0][2]}): the prompt in one "
                             f"run (seq {mdm.PROMPT_LEN}, pos 0), then {STEPS} steps of seq 1 "
                             f"(one shape);\n    tokens against PyTorch's concat decoder; ORT "
                             f"concat: ONNX Runtime on the concat form (c), {where}",
                             engines, ref, [("ORT", None), ("ORT concat", STATIC_OVER_CONCAT)])
    print(f"\nONNX Runtime {report.get('ort_version', '?')}; PyTorch eager {torch_version()} for reference "
          f"(no target; steady = median of {min(TORCH_RUNS, RUNS)} runs).")
    print(f"targets: first run at a new shape <= {FIRST_OVER_STEADY}x that shape's steady run; steady "
          f"<= {STEADY_OVER_ORT}x ORT; decode ms/token <= {TOKEN_OVER_ORT}x ORT; static-cache "
          f"ms/token <= {STATIC_OVER_CONCAT}x ORT's concat form")
    report["load_at_end"] = os.getloadavg()[0]
    print("load average at the end: %.2f" % report["load_at_end"])
    if notes:
        print("\nwhat cge printed:")
        for n in notes:
            print("  " + n)
    path = args.json or os.environ.get("BENCH_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
