"""make bench-ops [MODEL=path.onnx]: time per operator type, cge next to ONNX
Runtime's own profiler, for one model (default: resnet18 from
scripts/make_test_models.py), so that the slow operator of a model shows in
one command. Not a test.

Usage: bench/ops.py [MODEL.onnx ...] [--json] [--runs N] [--warmup N] [--threads N] [--nodes N]
                    [--input-shape NAME:D0,D1,...]...

--input-shape gives a model with symbolic dims (a sequence length, a batch)
concrete input shapes, the same for both runtimes (without it ONNX Runtime
runs symbolic dims at 1 and cge refuses to plan them).

Below the mean table a second one sums, per op type, each node's minimum
over the runs: a preempted run raises a mean but not a minimum, so on a
loaded machine that table is the one to read.

--nodes N also lists the N ONNX nodes where cge's time exceeds ORT's the most,
each side's time the minimum over the kept runs (a node runs once a run; the
minimum drops runs the scheduler preempted, so the list holds on a shared
machine), with the convolution's input and weight shapes. ORT's NCHWc nodes
are named after their output value: that value's producer, walked back
through the activations and Adds it fused, is the ONNX node.

cge: `cge profile MODEL --iterations WARMUP+RUNS` (a Chrome trace, every step
synchronized before the next; docs/cli.md); a step's time is its host dispatch
plus its kernel execution, as in the CLI's own table. ONNX Runtime:
onnxruntime-node with enableProfiling (bench/ort_profile.js, all graph
optimizations, sequential, the same intra-op threads); a node's time is its
`*_kernel_time` event. On both sides the first WARMUP runs of the trace are
dropped and the rest averaged per run.

Both runtimes fuse, differently, so rows are keyed by the ONNX op type each
compiled node stands for: for cge the op type of the ONNX node whose name the
fused node carries (its head: a cge.fused.FusedConv named after a Conv is a
Conv row); for ORT the same from its node name ("<onnx node>/<Rule>Fusion/..."),
else its op_name with ORT's fused kernels mapped back (FusedConv -> Conv,
FusedGemm -> Gemm, ...); a kernel of either side that stands for no ONNX node
by name (ORT's SkipLayerNormalization) keeps its own type as the row. Layout conversions (cge.Reorder,
ORT's ReorderInput/ReorderOutput) are one row. The columns "cge as" and "ORT
as" say what actually ran, and "cge also covers" lists the ONNX nodes that no
cge step is named after, each attributed to the nearest named producer (so
BatchNormalization, Relu, Add folded into a convolution show in the Conv row);
that attribution follows names and edges, not the compiler's own record.
"""
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
LAYOUT = "(layout conversion)"
ORT_FUSED = {"FusedConv": "Conv", "FusedGemm": "Gemm", "FusedMatMul": "MatMul",
             "NhwcFusedConv": "Conv", "QLinearConv": "Conv", "NhwcMaxPool": "MaxPool",
             "ReorderInput": LAYOUT, "ReorderOutput": LAYOUT, "Transpose_nchwc": LAYOUT}


LAST_MINS = {}   # "cge" / "ort" -> {node: minimum us over the kept runs}
LAST_TYPES = {}  # "cge" / "ort" -> {node: the kernel type that ran it}
FUSED_INTO = ("Relu", "Add", "Clip", "HardSigmoid", "Sigmoid", "Mul", "HardSwish", "LeakyRelu")


def ort_node_of(nodes):
    """A function from an ORT profile node name to the ONNX node it stands for."""
    by_name = {n.name: n for n in nodes}
    producer = {o: n for n in nodes for o in n.output}

    def ort_node(name):
        base = re.split(r"/[A-Za-z]+Fusion", name, maxsplit=1)[0]
        if base in by_name:
            return base
        n = producer.get(re.sub(r"_nchwc$", "", base))
        for _ in range(4):   # back through what ORT fused into the producer
            if n is None or n.op_type not in FUSED_INTO:
                break
            nxt = next((producer[i] for i in n.input if i in producer and
                        producer[i].op_type == "Conv"), None)
            n = nxt or producer.get(n.input[0])
        return n.name if n is not None else base
    return ort_node


def min_rows(nodes):
    """Per op type, the sum over its nodes of each node's minimum time (us):
    a run the scheduler preempted raises a mean, not a minimum, so these rows
    hold on a loaded machine where the mean table does not. Keys as in the
    mean table: the ONNX op type a node is named after, layout conversions one
    row, other kernels their own type."""
    op_of = {n.name: n.op_type for n in nodes if n.name}
    ort_node = ort_node_of(nodes)
    rows = collections.defaultdict(lambda: [0.0, 0.0])
    for name, us in LAST_MINS.get("cge", {}).items():
        typ = LAST_TYPES.get("cge", {}).get(name, "?")
        key = LAYOUT if typ == "cge.Reorder" else op_of.get(name) or typ.rsplit(".", 1)[-1]
        rows[key][0] += us
    for name, us in LAST_MINS.get("ort", {}).items():
        op = LAST_TYPES.get("ort", {}).get(name, "?")
        key = LAYOUT if ORT_FUSED.get(op) == LAYOUT else op_of.get(ort_node(name)) or \
            ORT_FUSED.get(op, op)
        rows[key][1] += us
    out = [{"op": k, "cge_ms": c / 1e3, "ort_ms": o / 1e3, "ratio": c / o if c and o else None}
           for k, (c, o) in rows.items()]
    out.sort(key=lambda r: -(r["cge_ms"] - r["ort_ms"]))
    return out


def worst_nodes(model, nodes, count):
    """The count ONNX nodes with the largest cge - ORT minimum times."""
    import onnx
    m = onnx.load(model, load_external_data=False)
    try:
        m = onnx.shape_inference.infer_shapes(m)
    except Exception:   # noqa: BLE001 - shapes are a label only
        pass
    shape = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
             for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)}
    shape.update({i.name: list(i.dims) for i in m.graph.initializer})
    by_name = {n.name: n for n in nodes}
    ort_node = ort_node_of(nodes)
    ort = collections.defaultdict(float)
    for k, us in LAST_MINS.get("ort", {}).items():
        ort[ort_node(k)] += us
    cge = LAST_MINS.get("cge", {})
    rows = []
    for name in set(cge) | set(ort):
        n = by_name.get(name)
        if n is None:
            continue
        c, o = cge.get(name, 0.0), ort.get(name, 0.0)
        label = n.op_type
        if n.op_type == "Conv" and len(n.input) > 1:
            label += " x%s w%s" % (shape.get(n.input[0]), shape.get(n.input[1]))
        rows.append({"node": name, "op": label, "cge_us": c, "ort_us": o})
    rows.sort(key=lambda r: -(r["cge_us"] - r["ort_us"]))
    return rows[:count]


def onnx_nodes(model):
    """The model's nodes (no external data read)."""
    import onnx
    m = onnx.load(model, load_external_data=False)
    return list(m.graph.node)


def window_runs(events, run_starts, warmup):
    """Events at or after the start of run number warmup (0-based)."""
    if warmup <= 0 or not run_starts:
        return events
    starts = sorted(run_starts)
    if warmup >= len(starts):
        return []
    t = starts[warmup]
    return [e for e in events if e["ts"] >= t]


def cge_profile(model, threads, warmup, runs, tmp):
    trace = os.path.join(tmp, "cge_trace.json")
    env = dict(os.environ, CGE_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    shapes = [a for name, dims in INPUT_SHAPES.items()
              for a in ("--input-shape", name + ":" + ",".join(map(str, dims)))]
    subprocess.run([os.path.join(BUILD, "cge"), "profile", model, "-o", trace,
                    "--iterations", str(warmup + runs), "--threads", str(threads)] + shapes,
                   env=env, check=True, capture_output=True, text=True)
    with open(trace) as f:
        ev = json.load(f)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    run_ev = [e for e in ev if e.get("cat") == "run" and e.get("ph") == "X"]
    kept = window_runs([e for e in ev if e.get("cat") in ("dispatch", "kernel")],
                       [e["ts"] for e in run_ev], warmup)
    walls = sorted(e["dur"] / 1e3 for e in run_ev)[warmup:] if len(run_ev) > warmup else []
    per_node = collections.defaultdict(float)   # (node, type) -> us over kept runs
    mins = {}                                   # node -> its minimum us over the runs
    for e in kept:
        per_node[(e["args"].get("node", ""), e["name"])] += e["dur"]
    lists = collections.defaultdict(list)
    for e in kept:
        lists[(e["args"].get("node", ""), e["name"], e.get("cat"))].append(e["dur"])
    types = {}
    for (node, typ, _), durs in lists.items():
        base = re.sub(r"__cc\d+$", "", node)
        mins[base] = mins.get(base, 0.0) + min(durs)
        types[base] = typ
    LAST_MINS["cge"] = mins
    LAST_TYPES["cge"] = types
    n = len(run_ev) - warmup if len(run_ev) > warmup else runs
    return per_node, n, (walls[len(walls) // 2] if walls else None)


def ort_profile(model, threads, warmup, runs, tmp):
    if not os.path.isfile(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json")):
        return None
    prefix = os.path.join(tmp, "ort_profile")
    out = subprocess.run(["node", os.path.join(HERE, "ort_profile.js"), model, prefix, str(threads),
                          str(warmup), str(runs)] + ([json.dumps(INPUT_SHAPES)] if INPUT_SHAPES
                                                     else []),
                         check=True, capture_output=True, text=True, cwd=HERE).stdout
    info = json.loads(out.strip().splitlines()[-1])
    files = info.get("profile") and [info["profile"]] or sorted(glob.glob(prefix + "*.json"))
    with open(files[-1]) as f:
        ev = json.load(f)
    run_starts = [e["ts"] for e in ev if e.get("cat") == "Session" and e.get("name") == "model_run"]
    nodes = [e for e in ev if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
    kept = window_runs(nodes, run_starts, warmup)
    per_node = collections.defaultdict(float)
    for e in kept:
        per_node[(e["name"][:-len("_kernel_time")], e["args"].get("op_name", "?"))] += e["dur"]
    lists = collections.defaultdict(list)
    for e in kept:
        lists[e["name"][:-len("_kernel_time")]].append(e["dur"])
    LAST_MINS["ort"] = {k: min(v) for k, v in lists.items()}
    LAST_TYPES["ort"] = {e["name"][:-len("_kernel_time")]: e["args"].get("op_name", "?")
                         for e in kept}
    return per_node, max(len(run_starts) - warmup, 1), info["median_ms"], info.get("version")


def compare(model, threads, warmup, runs):
    nodes = onnx_nodes(model)
    op_of = {n.name: n.op_type for n in nodes if n.name}
    tmp = tempfile.mkdtemp(prefix="cge-bench-ops-")
    try:
        cge_nodes, cge_n, cge_wall = cge_profile(model, threads, warmup, runs, tmp)
        ort = ort_profile(model, threads, warmup, runs, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    rows = collections.defaultdict(lambda: {"cge_us": 0.0, "ort_us": 0.0, "cge_as": collections.Counter(),
                                            "ort_as": collections.Counter(), "covers": collections.Counter()})
    heads = {}   # ONNX node name -> row key
    for (node, typ), us in cge_nodes.items():
        base = re.sub(r"__cc\d+$", "", node)
        if typ == "cge.Reorder":
            key = LAYOUT
        elif base in op_of:
            key = op_of[base]
            heads[base] = key
        else:
            key = typ.rsplit(".", 1)[-1]
        r = rows[key]
        r["cge_us"] += us / cge_n
        r["cge_as"][typ.replace("cge.fused.", "").replace("cge.", "")] += 1
    # ONNX nodes no cge step is named after: attribute each to its nearest named producer.
    producer = {o: n for n in nodes for o in n.output}
    for n in nodes:
        if n.name in heads or n.op_type in ("Constant",):
            continue
        seen, stack, key = set(), list(n.input), None
        while stack and key is None:
            v = stack.pop(0)
            p = producer.get(v)
            if p is None or p.name in seen:
                continue
            seen.add(p.name)
            key = heads.get(p.name)
            stack.extend(p.input)
        rows[key or "(folded/elided)"]["covers"][n.op_type] += 1
    ort_wall = ort_ver = None
    if ort:
        ort_nodes, ort_n, ort_wall, ort_ver = ort
        for (node, op), us in ort_nodes.items():
            # ORT names a fused node after the ONNX node it grew from, plus "/<Rule>Fusion/...".
            base = re.split(r"/[A-Za-z]+Fusion", node, maxsplit=1)[0]
            key = LAYOUT if ORT_FUSED.get(op) == LAYOUT else op_of.get(base) or ORT_FUSED.get(op, op)
            rows[key]["ort_us"] += us / ort_n
            rows[key]["ort_as"][op] += 1
    out = []
    for key, r in rows.items():
        heads_here = sum(1 for k in heads.values() if k == key)
        cov = {k: v for k, v in r["covers"].items() if v}
        out.append({"op": key, "cge_ms": r["cge_us"] / 1e3, "ort_ms": r["ort_us"] / 1e3 if ort else None,
                    "cge_as": dict(r["cge_as"]), "ort_as": dict(r["ort_as"]),
                    "onnx_heads": heads_here, "cge_also_covers": cov})
    out.sort(key=lambda r: (-r["cge_ms"], -(r["ort_ms"] or 0)))
    tc = sum(r["cge_ms"] for r in out)
    to = sum(r["ort_ms"] for r in out) if ort else None
    for r in out:
        r["cge_share"] = r["cge_ms"] / tc if tc else 0.0
        r["ort_share"] = (r["ort_ms"] / to if to else 0.0) if ort else None
        r["ratio"] = r["cge_ms"] / r["ort_ms"] if ort and r["ort_ms"] and r["cge_ms"] else None
    return {"model": model, "threads": threads, "warmup": warmup, "runs": runs,
            "ort_version": ort_ver, "rows": out, "nodes": worst_nodes(model, nodes, NODES[0])
            if NODES[0] and ort else [], "min_rows": min_rows(nodes) if ort else [],
            "total": {"cge_ms": tc, "ort_ms": to, "ratio": tc / to if to else None,
                      "cge_profiled_run_ms": cge_wall, "ort_run_ms": ort_wall}}


NODES = [0]   # --nodes
INPUT_SHAPES = {}   # --input-shape NAME:D0,D1,...: both runtimes get this shape


def fmt_counts(c):
    return " ".join(f"{k}x{v}" if v != 1 else k for k, v in sorted(c.items(), key=lambda kv: -kv[1]))


def print_table(res):
    t = res["total"]
    print(f"{res['model']}: per op type, ms per run, batch as declared, {res['threads']} threads, "
          f"mean of {res['runs']} runs after {res['warmup']} warm-up"
          + (f", ONNX Runtime {res['ort_version']}" if res["ort_version"] else ", ONNX Runtime not installed"))
    print(f"{'op type':22} {'cge ms':>8} {'ORT ms':>8} {'cge/ORT':>8} {'cge %':>6} {'ORT %':>6}  "
          f"{'cge as':28} {'ORT as':22} cge also covers")
    nf = lambda v, w, p=3: f"{v:{w}.{p}f}" if v is not None else f"{'-':>{w}}"  # noqa: E731
    for r in res["rows"]:
        print(f"{r['op'][:22]:22} {nf(r['cge_ms'], 8)} {nf(r['ort_ms'], 8)} {nf(r['ratio'], 8, 2)} "
              f"{100 * r['cge_share']:5.1f}% "
              + (f"{100 * r['ort_share']:5.1f}%" if r["ort_share"] is not None else f"{'-':>6}")
              + f"  {fmt_counts(r['cge_as'])[:28]:28} {fmt_counts(r['ort_as'])[:22]:22} "
              f"{fmt_counts(r['cge_also_covers'])}")
    print(f"{'total (op time)':22} {nf(t['cge_ms'], 8)} {nf(t['ort_ms'], 8)} {nf(t['ratio'], 8, 2)}")
    print(f"{'run wall, median':22} {nf(t['cge_profiled_run_ms'], 8)} {nf(t['ort_run_ms'], 8)}"
          f"   (profiled runs: cge synchronizes every step; op time = cge dispatch+kernel, ORT kernel)")
    if res.get("min_rows"):
        mr = res["min_rows"]
        tc, to = sum(r["cge_ms"] for r in mr), sum(r["ort_ms"] for r in mr)
        print("per op type, sum of each node's minimum over the runs (holds under load), "
              "largest cge - ORT first:")
        print(f"  {'op type':22} {'cge ms':>8} {'ORT ms':>8} {'cge/ORT':>8}")
        for r in mr:
            if r["cge_ms"] >= 0.0005 or r["ort_ms"] >= 0.0005:
                print(f"  {r['op'][:22]:22} {nf(r['cge_ms'], 8)} {nf(r['ort_ms'], 8)} "
                      f"{nf(r['ratio'], 8, 2)}")
        print(f"  {'total':22} {nf(tc, 8)} {nf(to, 8)} {nf(tc / to if to else None, 8, 2)}")
    if res.get("nodes"):
        print(f"nodes where cge is furthest behind (us, minimum over the runs):")
        for r in res["nodes"]:
            print(f"  {r['cge_us'] - r['ort_us']:8.0f}  cge {r['cge_us']:8.0f}  ORT {r['ort_us']:8.0f}"
                  f"  {r['node'][-48:]:48} {r['op']}")


def main(argv):
    args, models, js = list(argv), [], False
    opts = {"--runs": int(os.environ.get("BENCH_RUNS", "30")),
            "--warmup": int(os.environ.get("BENCH_WARMUP", "5")),
            "--threads": int(os.environ.get("BENCH_THREADS", "2")), "--nodes": 0}
    while args:
        a = args.pop(0)
        if a == "--json":
            js = True
        elif a.split("=")[0] == "--input-shape":
            v = a.partition("=")[2] or args.pop(0)
            name, _, dims = v.rpartition(":")
            INPUT_SHAPES[name] = [int(d) for d in dims.split(",")]
        elif a.split("=")[0] in opts:
            k, _, v = a.partition("=")
            opts[k] = int(v or args.pop(0))
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("-"):
            print(f"bench/ops.py: unknown option {a}", file=sys.stderr)
            return 2
        else:
            models.append(a)
    if not models:
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import make_test_models
        out_dir = os.environ.get("BENCH_MODEL_DIR") or os.path.join(tempfile.gettempdir(), "cge-bench-models")
        models = [make_test_models.make("resnet18", out_dir)[0]]
    NODES[0] = opts["--nodes"]
    results = [compare(m, opts["--threads"], opts["--warmup"], opts["--runs"]) for m in models]
    if js:
        print(json.dumps(results if len(results) > 1 else results[0], indent=1))
    else:
        for i, r in enumerate(results):
            if i:
                print()
            print_table(r)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
