"""make bench-depthwise: the channels-last depthwise convolutions of the zoo,
one shape at a time, on cge's AVX-512 kernel (src/ops/depthwise_nhwc.c,
opt-in: CGE_DW_NHWC=1), on oneDNN's depthwise primitive inside cge (the
default; CGE_DW_NHWC=0) and on ONNX Runtime, in the same minute. Not a test.

Usage: bench/depthwise.py [--threads N] [--runs N] [--rounds N] [--filter RE]
                          [--scan [ZOO_DIR]] [--json FILE]

Each shape is a one-node model: x [1, C, H, W] -> Conv(group = C, bias) ->
its activation as the zoo has it (Relu, Clip 0..6, HardSwish, SiLU as
Sigmoid*Mul, none). The time per run is the op's time from each side's
profiler (bench/ops.py: `cge profile` steps, ORT's *_kernel_time events),
each node's minimum over the runs (a preempted run does not count), the
layout conversions at the model's borders left out; so cge's time is its
FusedConv step (activation included) and ORT's its Conv node and any
activation it did not fuse (its SiLU is a QuickGelu node of its own). --rounds alternates the three sides that many
times and keeps each side's minimum of the per-round means (the shared
machine's noise only ever adds time).

--scan lists every depthwise convolution (one input channel per group, as
many outputs as inputs) of the ONNX models under ZOO_DIR (default
/tmp/cge-zoo/*/model.onnx) with its shape and activation, instead of timing
the built-in list below, which was made by it.
"""
import collections
import glob
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ops  # noqa: E402  (bench/ops.py: the profilers)

# (C, H, W, k, stride, activation, pads, models) from --scan over the default
# zoo tier: every depthwise convolution of mnasnet1_0, mobilenet_v2,
# mobilenet_v3_small / _large, efficientnet_b0, convnext_tiny and
# shufflenet_v2_x1_0 (regnet's grouped convolutions have 8 or more channels a
# group: not depthwise), the models named being those of that list.
SHAPES = [
    (96, 56, 56, 7, 1, 'none', (3, 3, 3, 3), 'convnext_tiny'),
    (192, 28, 28, 7, 1, 'none', (3, 3, 3, 3), 'convnext_tiny'),
    (384, 14, 14, 7, 1, 'none', (3, 3, 3, 3), 'convnext_tiny'),
    (768, 7, 7, 7, 1, 'none', (3, 3, 3, 3), 'convnext_tiny'),
    (16, 112, 112, 3, 1, 'Relu', (1, 1, 1, 1), 'mobilenet_v3_large'),
    (64, 112, 112, 3, 2, 'Relu', (1, 1, 1, 1), 'mobilenet_v3_large'),
    (72, 56, 56, 3, 1, 'Relu', (1, 1, 1, 1), 'mnasnet1_0 mobilenet_v3_large'),
    (72, 56, 56, 5, 2, 'Relu', (2, 2, 2, 2), 'mnasnet1_0 mobilenet_v3_large'),
    (120, 28, 28, 5, 1, 'Relu', (2, 2, 2, 2), 'mnasnet1_0 mobilenet_v3_large'),
    (240, 28, 28, 3, 2, 'HardSwish', (1, 1, 1, 1), 'mobilenet_v3_large'),
    (200, 14, 14, 3, 1, 'HardSwish', (1, 1, 1, 1), 'mobilenet_v3_large'),
    (184, 14, 14, 3, 1, 'HardSwish', (1, 1, 1, 1), 'mobilenet_v3_large'),
    (480, 14, 14, 3, 1, 'HardSwish', (1, 1, 1, 1), 'mobilenet_v3_large'),
    (672, 14, 14, 3, 1, 'HardSwish', (1, 1, 1, 1), 'mobilenet_v3_large'),
    (32, 112, 112, 3, 1, 'SiLU', (1, 1, 1, 1), 'efficientnet_b0'),
    (96, 112, 112, 3, 2, 'SiLU', (1, 1, 1, 1), 'efficientnet_b0'),
    (144, 56, 56, 3, 1, 'SiLU', (1, 1, 1, 1), 'efficientnet_b0'),
    (144, 56, 56, 5, 2, 'SiLU', (2, 2, 2, 2), 'efficientnet_b0'),
    (240, 28, 28, 5, 1, 'SiLU', (2, 2, 2, 2), 'efficientnet_b0'),
    (240, 28, 28, 3, 2, 'SiLU', (1, 1, 1, 1), 'efficientnet_b0'),
    (480, 14, 14, 3, 1, 'SiLU', (1, 1, 1, 1), 'efficientnet_b0'),
    (480, 14, 14, 5, 1, 'SiLU', (2, 2, 2, 2), 'efficientnet_b0'),
    (672, 14, 14, 5, 1, 'SiLU', (2, 2, 2, 2), 'efficientnet_b0'),
    (672, 14, 14, 5, 2, 'SiLU', (2, 2, 2, 2), 'efficientnet_b0'),
    (1152, 7, 7, 5, 1, 'SiLU', (2, 2, 2, 2), 'efficientnet_b0'),
    (1152, 7, 7, 3, 1, 'SiLU', (1, 1, 1, 1), 'efficientnet_b0'),
    (48, 112, 112, 3, 2, 'Relu', (1, 1, 1, 1), 'mnasnet1_0'),
    (32, 112, 112, 3, 1, 'Relu', (1, 1, 1, 1), 'mnasnet1_0'),
    (240, 28, 28, 5, 2, 'Relu', (2, 2, 2, 2), 'mnasnet1_0'),
    (480, 14, 14, 5, 1, 'Relu', (2, 2, 2, 2), 'mnasnet1_0'),
    (480, 14, 14, 3, 1, 'Relu', (1, 1, 1, 1), 'mnasnet1_0'),
    (576, 14, 14, 3, 1, 'Relu', (1, 1, 1, 1), 'mnasnet1_0'),
    (576, 14, 14, 5, 2, 'Relu', (2, 2, 2, 2), 'mnasnet1_0'),
    (1152, 7, 7, 5, 1, 'Relu', (2, 2, 2, 2), 'mnasnet1_0'),
    (1152, 7, 7, 3, 1, 'Relu', (1, 1, 1, 1), 'mnasnet1_0'),
    (32, 112, 112, 3, 1, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (96, 112, 112, 3, 2, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (144, 56, 56, 3, 1, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (144, 56, 56, 3, 2, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (192, 28, 28, 3, 1, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (192, 28, 28, 3, 2, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (384, 14, 14, 3, 1, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (576, 14, 14, 3, 1, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (576, 14, 14, 3, 2, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (960, 7, 7, 3, 1, 'Relu6', (1, 1, 1, 1), 'mobilenet_v2'),
    (672, 14, 14, 5, 2, 'HardSwish', (2, 2, 2, 2), 'mobilenet_v3_large'),
    (960, 7, 7, 5, 1, 'HardSwish', (2, 2, 2, 2), 'mobilenet_v3_large'),
    (16, 112, 112, 3, 2, 'Relu', (1, 1, 1, 1), 'mobilenet_v3_small'),
    (72, 56, 56, 3, 2, 'Relu', (1, 1, 1, 1), 'mobilenet_v3_small'),
    (88, 28, 28, 3, 1, 'Relu', (1, 1, 1, 1), 'mobilenet_v3_small'),
    (96, 28, 28, 5, 2, 'HardSwish', (2, 2, 2, 2), 'mobilenet_v3_small'),
    (240, 14, 14, 5, 1, 'HardSwish', (2, 2, 2, 2), 'mobilenet_v3_small'),
    (120, 14, 14, 5, 1, 'HardSwish', (2, 2, 2, 2), 'mobilenet_v3_small'),
    (144, 14, 14, 5, 1, 'HardSwish', (2, 2, 2, 2), 'mobilenet_v3_small'),
    (288, 14, 14, 5, 2, 'HardSwish', (2, 2, 2, 2), 'mobilenet_v3_small'),
    (576, 7, 7, 5, 1, 'HardSwish', (2, 2, 2, 2), 'mobilenet_v3_small'),
    (24, 56, 56, 3, 2, 'none', (1, 1, 1, 1), 'shufflenet_v2_x1_0'),
    (58, 56, 56, 3, 2, 'none', (1, 1, 1, 1), 'shufflenet_v2_x1_0'),
    (116, 28, 28, 3, 2, 'none', (1, 1, 1, 1), 'shufflenet_v2_x1_0'),
    (232, 14, 14, 3, 2, 'none', (1, 1, 1, 1), 'shufflenet_v2_x1_0'),
]


def act_of(node, consumers):
    """The activation the fuse pass would take after a Conv node."""
    outs = consumers.get(node.output[0], [])
    if len(outs) == 2 and {o.op_type for o in outs} == {"Sigmoid", "Mul"}:
        return "SiLU"
    if len(outs) == 2 and {o.op_type for o in outs} == {"HardSigmoid", "Mul"}:
        return "HardSwish"
    if len(outs) != 1:
        return "none"
    t = outs[0].op_type
    if t == "Clip":
        return "Relu6"
    if t in ("Relu", "HardSwish", "HardSigmoid", "Sigmoid"):
        return t
    return "none"


def scan(pattern, max_mb=150):
    import onnx
    found = collections.OrderedDict()
    skipped = []
    for path in sorted(glob.glob(pattern)):
        model = os.path.basename(os.path.dirname(path))
        if "@op" in model:
            continue
        if os.path.getsize(path) > max_mb * 2 ** 20:
            skipped.append(model)
            continue
        m = onnx.load(path, load_external_data=False)
        try:
            m = onnx.shape_inference.infer_shapes(m)
        except Exception:   # noqa: BLE001
            continue
        shape = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
                 for v in list(m.graph.value_info) + list(m.graph.input)}
        inits = {i.name: list(i.dims) for i in m.graph.initializer}
        consumers = collections.defaultdict(list)
        for n in m.graph.node:
            for i in n.input:
                consumers[i].append(n)
        for n in m.graph.node:
            if n.op_type != "Conv" or n.input[1] not in inits:
                continue
            at = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            w = inits[n.input[1]]
            xs = shape.get(n.input[0])
            g = at.get("group", 1)
            if not xs or len(xs) != 4 or g == 1 or w[1] != 1 or w[0] != xs[1] or g != xs[1]:
                continue
            k, s = w[2], at.get("strides", [1, 1])[0]
            pads = at.get("pads", [0, 0, 0, 0])
            key = (xs[1], xs[2], xs[3], k, s, tuple(pads), act_of(n, consumers))
            found.setdefault(key, []).append(model)
    return found, skipped


def build(shape, path):
    """A one-node model for shape (C, H, W, k, s, act[, pads])."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    C, H, W, k, s, act = shape[:6]
    pads = list(shape[6]) if len(shape) > 6 else [k // 2] * 4
    rng = np.random.default_rng(C * 1000 + H * 10 + k)
    w = numpy_helper.from_array((rng.standard_normal((C, 1, k, k)) * 0.2).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.standard_normal(C) * 0.1).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="dw", group=C,
                              kernel_shape=[k, k], strides=[s, s], pads=pads)]
    inits = [w, b]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="act"))
    elif act == "Relu6":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="act"))
    elif act in ("HardSwish", "HardSigmoid", "Sigmoid"):
        nodes.append(helper.make_node(act, ["c"], ["y"], name="act"))
    elif act == "SiLU":
        nodes += [helper.make_node("Sigmoid", ["c"], ["sg"], name="sig"),
                  helper.make_node("Mul", ["c", "sg"], ["y"], name="act")]
    else:
        nodes.append(helper.make_node("Identity", ["c"], ["y"], name="act"))
    oh = (H + pads[0] + pads[2] - k) // s + 1
    ow = (W + pads[1] + pads[3] - k) // s + 1
    g = helper.make_graph(nodes, "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, W])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, oh, ow])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 7
    onnx.save(m, path)


def cge_node_mins(model, threads, warmup, runs, tmp):
    """{node: microseconds}: per run, a step's dispatch plus its kernel events
    (a step runs inside its dispatch or after it, by the pool's timing), the
    minimum over the kept runs."""
    import subprocess
    trace = os.path.join(tmp, "cge_trace.json")
    env = dict(os.environ, CGE_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    subprocess.run([os.path.join(ops.BUILD, "cge"), "profile", model, "-o", trace,
                    "--iterations", str(warmup + runs), "--threads", str(threads)],
                   env=env, check=True, capture_output=True, text=True)
    with open(trace) as f:
        ev = json.load(f)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                     if e.get("cat") == "run" and e.get("ph") == "X")[warmup:]
    per_run = [collections.defaultdict(float) for _ in windows]
    for e in ev:
        if e.get("cat") not in ("dispatch", "kernel"):
            continue
        for i, (t0, t1) in enumerate(windows):
            if t0 <= e["ts"] <= t1:
                per_run[i][re.sub(r"__cc\d+$", "", e["args"].get("node", ""))] += e["dur"]
                break
    nodes = set(k for r in per_run for k in r)
    return {n: min(r.get(n, 0.0) for r in per_run) for n in nodes}


def op_us(mins, layout):
    """The op's microseconds in a run: the nodes' minimums over the runs (a
    run the scheduler preempted does not count) but the layout conversions'."""
    return sum(us for node, us in mins.items() if not layout.match(node))


CGE_LAYOUT = re.compile(r"^Reorder")
ORT_LAYOUT = re.compile(r"^(ReorderInput|ReorderOutput|Transpose)")


def time_cge(model, threads, runs, tmp, dnnl):
    old = os.environ.get("CGE_DW_NHWC")
    os.environ["CGE_DW_NHWC"] = "0" if dnnl else "1"
    try:
        return op_us(cge_node_mins(model, threads, 5, runs, tmp), CGE_LAYOUT)
    finally:
        if old is None:
            os.environ.pop("CGE_DW_NHWC", None)
        else:
            os.environ["CGE_DW_NHWC"] = old


def time_ort(model, threads, runs, tmp):
    if ops.ort_profile(model, threads, 5, runs, tmp) is None:
        return None
    return op_us(ops.LAST_MINS.get("ort", {}), ORT_LAYOUT)


def main(argv):
    opts = {"--threads": 1, "--runs": 40, "--rounds": 2}
    flt, js, scan_dir = None, None, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in opts:
            opts[a] = int(args.pop(0))
        elif a == "--filter":
            flt = re.compile(args.pop(0))
        elif a == "--json":
            js = args.pop(0)
        elif a == "--scan":
            scan_dir = args.pop(0) if args and not args[0].startswith("-") else "/tmp/cge-zoo"
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            print(f"bench/depthwise.py: unknown argument {a}", file=sys.stderr)
            return 2
    if scan_dir:
        found, skipped = scan(os.path.join(scan_dir, "*", "model.onnx"))
        for (C, H, W, k, s, pads, act), models in found.items():
            print(f"    ({C}, {H}, {W}, {k}, {s}, {act!r}, {tuple(pads)!r}, "
                  f"{' '.join(sorted(set(models)))!r}),")
        if skipped:
            print(f"# not scanned (over 150 MB): {' '.join(skipped)}")
        return 0
    shapes = [s for s in SHAPES if not flt or flt.search(f"{s} {s[-1]}")]
    threads, runs, rounds = opts["--threads"], opts["--runs"], opts["--rounds"]
    print(f"channels-last depthwise Conv, op time per run (us), {threads} thread(s), "
          f"each node's minimum over {runs} runs, the minimum over {rounds} alternating rounds")
    print(f"{'C':>5} {'HxW':>9} {'k':>2} {'s':>2} {'act':>11} {'cge':>8} {'oneDNN':>8} {'ORT':>8} "
          f"{'cge/dnn':>8} {'cge/ORT':>8} {'dnn/ORT':>8}  models")
    rows = []
    tmp = tempfile.mkdtemp(prefix="cge-bench-dw-")
    try:
        for sh in shapes:
            C, H, W, k, s, act, pads, models = sh
            path = os.path.join(tmp, "dw.onnx")
            build((C, H, W, k, s, act, pads), path)
            best = {"cge": float("inf"), "dnnl": float("inf"), "ort": float("inf")}
            for _ in range(rounds):
                best["cge"] = min(best["cge"], time_cge(path, threads, runs, tmp, False))
                best["dnnl"] = min(best["dnnl"], time_cge(path, threads, runs, tmp, True))
                o = time_ort(path, threads, runs, tmp)
                if o is not None:
                    best["ort"] = min(best["ort"], o)
            c, d, o = best["cge"], best["dnnl"], best["ort"] if best["ort"] < float("inf") else None
            r = {"C": C, "H": H, "W": W, "k": k, "s": s, "act": act, "pads": list(pads),
                 "models": models, "cge_us": c, "dnnl_us": d, "ort_us": o}
            rows.append(r)
            f = lambda v: f"{v:8.1f}" if v is not None else f"{'-':>8}"  # noqa: E731
            q = lambda a, b: f"{a / b:8.2f}" if a and b else f"{'-':>8}"  # noqa: E731
            print(f"{C:5d} {f'{H}x{W}':>9} {k:2d} {s:2d} {act:>11} {f(c)} {f(d)} {f(o)} {q(c, d)} "
                  f"{q(c, o)} {q(d, o)}  {models}", flush=True)
    finally:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    if rows:
        import math
        gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None  # noqa: E731
        cd = gm([r["cge_us"] / r["dnnl_us"] for r in rows if r["dnnl_us"]])
        co = gm([r["cge_us"] / r["ort_us"] for r in rows if r["ort_us"]])
        do = gm([r["dnnl_us"] / r["ort_us"] for r in rows if r["ort_us"]])
        print(f"geometric means: cge/oneDNN {cd:.2f}" + (f", cge/ORT {co:.2f}, oneDNN/ORT {do:.2f}"
                                                          if co else ""))
    if js:
        with open(js, "w") as fh:
            json.dump({"threads": threads, "runs": runs, "rounds": rounds, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
