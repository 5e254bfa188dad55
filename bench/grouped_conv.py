"""make bench-grouped [GROUPED_MODELS="a.onnx b.onnx"]: the grouped
convolutions (1 < group < channels) of whole models, node by node: cge as it
chooses (the grouped kernel of src/ops/conv_grouped.c for its preferred
class, oneDNN for the rest), cge with every grouped node on the kernel
($CGE_GROUPED_CONV=all), every one on oneDNN's primitive ($CGE_GROUPED_CONV=0)
and ONNX Runtime; each a node's median kernel time over the kept runs (ORT's: minimum) (`cge
profile`; ORT's enableProfiling through bench/ops.py), summed by group width
and stride, with ratios. Not a test.

Usage: bench/grouped_conv.py [MODEL.onnx ...] [--threads N] [--runs N] [--warmup N] [--json]
Default models: the zoo's ResNeXt and RegNet exports in $ZOO_CACHE (/tmp/cge-zoo).
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ops  # noqa: E402  (bench/ops.py: the two profilers)

DEFAULT = ["resnext50_32x4d", "resnext101_32x8d", "regnet_x_400mf", "regnet_x_3_2gf",
           "regnet_y_3_2gf", "regnet_x_16gf", "regnet_y_16gf"]


def grouped_nodes(model):
    """ONNX grouped Conv nodes (1 < group < input channels): name -> label."""
    import onnx
    m = onnx.load(model, load_external_data=False)
    try:
        m = onnx.shape_inference.infer_shapes(m)
    except Exception:  # noqa: BLE001 - shapes are labels only
        pass
    shape = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
             for v in list(m.graph.value_info) + list(m.graph.input)}
    shape.update({i.name: list(i.dims) for i in m.graph.initializer})
    out = {}
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        a = {x.name: x for x in n.attribute}
        g = a["group"].i if "group" in a else 1
        w = shape.get(n.input[1])
        x = shape.get(n.input[0])
        if g <= 1 or not w or w[1] <= 1:
            continue
        s = list(a["strides"].ints) if "strides" in a else [1]
        out[n.name] = {"cpg": w[1], "mpg": w[0] // g, "k": w[2:], "stride": max(s),
                       "x": x, "groups": g}
    return out


def profile(model, threads, warmup, runs, mode):
    """cge's kernel time per ONNX node: the minimum over the kept runs
    ($CGE_GROUPED_CONV=mode; "" the default choice)."""
    env = dict(os.environ, CGE_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               CGE_GROUPED_CONV=mode)
    tmp = tempfile.mkdtemp(prefix="cge-bench-grouped-")
    try:
        trace = os.path.join(tmp, "trace.json")
        subprocess.run([os.path.join(ops.BUILD, "cge"), "profile", model, "-o", trace,
                        "--iterations", str(warmup + runs), "--threads", str(threads)],
                       env=env, check=True, capture_output=True, text=True)
        with open(trace) as f:
            ev = json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    durs = collections.defaultdict(list)
    for e in ev:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            durs[re.sub(r"__cc\d+$", "", e["args"].get("node", ""))].append(e["dur"])
    # the median: a few kernel events of a run come out near 0 us (seen on
    # both paths), which a minimum would take
    return {k: sorted(v[warmup:] or v)[len(v[warmup:] or v) // 2] for k, v in durs.items()}


def ort_mins(model, threads, warmup, runs):
    """ORT's minimum per ONNX node (its fused nodes mapped back as ops.py does)."""
    tmp = tempfile.mkdtemp(prefix="cge-bench-grouped-ort-")
    try:
        if ops.ort_profile(model, threads, warmup, runs, tmp) is None:
            return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ops.LAST_MINS["cge"] = {}
    nodes = ops.onnx_nodes(model)
    ops.NODES[0] = 1 << 30
    rows = ops.worst_nodes(model, nodes, 1 << 30)
    return {r["node"]: r["ort_us"] for r in rows}


def measure(model, threads, warmup, runs):
    gn = grouped_nodes(model)
    chosen = profile(model, threads, warmup, runs, "")
    mine = profile(model, threads, warmup, runs, "all")
    dnnl = profile(model, threads, warmup, runs, "0")
    ort = ort_mins(model, threads, warmup, runs) or {}
    classes = collections.OrderedDict()
    for name, info in gn.items():
        key = "gw%d->%d k%s s%d" % (info["cpg"], info["mpg"], "x".join(map(str, info["k"])),
                                     info["stride"])
        c = classes.setdefault(key, {"nodes": 0, "chosen_us": 0.0, "cge_us": 0.0, "onednn_us": 0.0,
                                     "ort_us": 0.0})
        c["nodes"] += 1
        c["chosen_us"] += chosen.get(name, 0.0)
        c["cge_us"] += mine.get(name, 0.0)
        c["onednn_us"] += dnnl.get(name, 0.0)
        c["ort_us"] += ort.get(name, 0.0)
    tot = {k: sum(c[k] for c in classes.values())
           for k in ("chosen_us", "cge_us", "onednn_us", "ort_us")}
    return {"model": model, "classes": classes, "total": tot}


def ratio(a, b):
    return "%.2f" % (a / b) if a and b else "-"


def main(argv):
    threads, runs, warmup, as_json, models = 2, 10, 3, False, []
    it = iter(argv)
    for a in it:
        if a == "--threads":
            threads = int(next(it))
        elif a == "--runs":
            runs = int(next(it))
        elif a == "--warmup":
            warmup = int(next(it))
        elif a == "--json":
            as_json = True
        else:
            models.append(a)
    if not models:
        cache = os.environ.get("ZOO_CACHE", "/tmp/cge-zoo")
        models = [os.path.join(cache, m, "model.onnx") for m in DEFAULT
                  if os.path.isfile(os.path.join(cache, m, "model.onnx"))]
    if not models:
        print("no models: pass .onnx paths or run `make zoo` first (ZOO_CACHE)")
        return 1
    res = [measure(m, threads, warmup, runs) for m in models]
    if as_json:
        print(json.dumps(res, indent=1))
        return 0
    print("grouped convolutions, per node median over %d runs, %d threads (us, summed per class)"
          % (runs, threads))
    print("| model | class | nodes | cge chosen | kernel | oneDNN | ORT | kernel/oneDNN | chosen/ORT "
          "| oneDNN/ORT |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in res:
        name = os.path.basename(os.path.dirname(r["model"])) or r["model"]
        for key, c in list(r["classes"].items()) + [("all", dict(r["total"], nodes=sum(
                x["nodes"] for x in r["classes"].values())))]:
            print("| %s | %s | %d | %.0f | %.0f | %.0f | %.0f | %s | %s | %s |" % (
                name, key, c["nodes"], c["chosen_us"], c["cge_us"], c["onednn_us"], c["ort_us"],
                ratio(c["cge_us"], c["onednn_us"]), ratio(c["chosen_us"], c["ort_us"]),
                ratio(c["onednn_us"], c["ort_us"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
