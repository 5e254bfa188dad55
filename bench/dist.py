"""make bench-dist: cge across processes (Open MPI on this host), beside one
process and ONNX Runtime, in one run. Not a test.

Models (static shapes, exported once into BENCH_MODEL_DIR by torch.onnx):
  encoder   nn.TransformerEncoder, d_model 512, 8 heads, ff 2048, 8 layers,
            batch_first, input [1, SEQ, 512]
  decoder   the GPT-like decoder's blocks (scripts/make_dynamic_models.py's
            Block: pre-LN, causal mask, GELU MLP; 4 layers, d 256, 4 heads,
            ff 1024) with an empty key/value cache, then the final LayerNorm and
            the LM head: input the token embeddings [1, SEQ, 256]
  encoder_b4  the encoder with a batch of 4, [4, SEQ, 512] (exported with a
            dynamic batch axis, so that micro-batches re-infer; ONNX Runtime
            gets a static export of the same weights)

Configurations, each `cge bench` (BENCH_RUNS runs after BENCH_WARMUP), taking
turns BENCH_ROUNDS times (the machine is shared); a row is the median round:
  1p x 2t   one process, 2 threads
  tp2       mpirun -np 2, 1 thread each, --tp 2 (Megatron-style shards)
  pp2       mpirun -np 2, 1 thread each, --pp 2 (two pipeline stages)
  pp2 mbM   (encoder_b4) --pp 2 --micro-batches M: the batch split into M
            parts in flight through the two stages (GPipe)
  ort 2t    ONNX Runtime, 2 intra-op threads (bench/ort_run.js)
Per row: p50 latency (rank 0's: every run of tp/pp ends in communication
with the other rank, so it is the end-to-end latency; the other rank's p50
is printed beside it), tokens/s (SEQ / p50), the bytes each rank's
collectives hand MPI per run, and the analytical minimum per run:
  tp: 2 AllReduces per layer of the [SEQ, d] float32 activation; a ring
      AllReduce sends 2 (P-1)/P of it per rank;
  pp: the activations crossing the cut, once ([SEQ, d] float32), plus (cge's
      choice, not in the minimum) the outputs sent back to the other ranks.
On this 2-core machine the point is correctness and overhead, not speed-up:
the two ranks share the cores one process would use.

Usage: dist.py [--json OUT] [--models encoder,decoder,encoder_b4]"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
MODEL_DIR = os.environ.get("BENCH_MODEL_DIR", os.path.join(BUILD, "bench_models"))
RUNS = int(os.environ.get("BENCH_RUNS", "30"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "3"))
SEQ = int(os.environ.get("BENCH_SEQ", "128"))
TIMEOUT = float(os.environ.get("BENCH_TIMEOUT", "600"))
# The machine is shared: configurations take turns, ROUNDS times, and each
# row reports the median of its rounds' p50s.
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}

DIMS = {"encoder": dict(d=512, layers=8, heads=8, ff=2048),
        "decoder": dict(d=256, layers=4, heads=4, ff=1024),
        "encoder_b4": dict(d=512, layers=8, heads=8, ff=2048)}
BATCH = {"encoder_b4": 4}


def export(name, static=False):
    """The model's ONNX file; encoder_b4 with a dynamic batch axis unless
    `static` (for ONNX Runtime's fixed feeds)."""
    path = os.path.join(MODEL_DIR, "dist_%s_s%d%s.onnx" % (name, SEQ, "_static" if static else ""))
    if os.path.exists(path):
        return path
    import torch
    os.makedirs(MODEL_DIR, exist_ok=True)
    torch.manual_seed(0)
    dm = DIMS[name]
    if name.startswith("encoder"):
        layer = torch.nn.TransformerEncoderLayer(d_model=dm["d"], nhead=dm["heads"],
                                                 dim_feedforward=dm["ff"], batch_first=True)
        model = torch.nn.TransformerEncoder(layer, num_layers=dm["layers"]).eval()
        # Distinct weights per layer (torch clones one layer's), as a trained model has.
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0, 0.05)
    else:
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        import make_dynamic_models as mdm
        dec = mdm.decoder(layers=dm["layers"], d_model=dm["d"], heads=dm["heads"], ff=dm["ff"])

        class Stack(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks, self.ln, self.head = dec.blocks, dec.ln, dec.head

            def forward(self, x):
                hd = dm["d"] // dm["heads"]
                empty = torch.zeros(x.shape[0], dm["heads"], 0, hd)
                for b in self.blocks:
                    x, _, _ = b(x, empty, empty)
                return self.head(self.ln(x))
        model = Stack().eval()
    x = torch.randn(BATCH.get(name, 1), SEQ, dm["d"])
    dyn = {"x": {0: "batch"}, "y": {0: "batch"}} if name in BATCH and not static else None
    torch.onnx.export(model, (x,), path, opset_version=13, input_names=["x"],
                      output_names=["y"], do_constant_folding=True, dynamic_axes=dyn)
    return path


def run(cmd, env=None):
    e = dict(os.environ, **(env or {}))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=e)
    if r.returncode:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd[:6]), r.returncode,
                                                   (r.stderr or r.stdout)[-800:]))
    return r


def cge_bench(model, np_=1, extra=()):
    cli = os.path.join(BUILD, "cge")
    args = [cli, "bench", model, "--iterations", str(RUNS), "--warmup", str(WARMUP), "--json"]
    if np_ == 1:
        r = run(args + ["--threads", "2"] + list(extra))
    else:
        r = run(["mpirun", "-np", str(np_), "--oversubscribe"] + args + ["--threads", "1"] +
                list(extra), MPI_ENV)
    res = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])
    ranks = {}
    for m in re.finditer(r"\[rank (\d+) of \d+\] latency p50 ([\d.]+) .*?sent ([\d.]+) KiB per run",
                         r.stderr):
        ranks[int(m.group(1))] = (float(m.group(2)), float(m.group(3)) * 1024)
    res["ranks"] = ranks
    return res


def ort_bench(model):
    node = shutil.which("node")
    if not node or not os.path.isdir(os.path.join(HERE, "node_modules")):
        return None
    r = run([node, os.path.join(HERE, "ort_run.js"), model, "2", str(WARMUP), str(RUNS)])
    return json.loads(r.stdout.strip().splitlines()[-1])


def minimum_bytes(name, kind, P=2):
    dm = DIMS[name]
    act = BATCH.get(name, 1) * SEQ * dm["d"] * 4
    if kind == "tp":
        return dm["layers"] * 2 * act * 2 * (P - 1) / P
    return act  # pp: one cut


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--models", default="encoder,decoder,encoder_b4")
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        print("bench-dist: no mpirun (install openmpi-bin: make deps)")
        return 1
    out = {}
    print("bench-dist: seq %d, %d runs after %d warm-up, %d alternating rounds (median of the "
          "rounds' p50s); latency in ms" % (SEQ, RUNS, WARMUP, ROUNDS))
    for name in [m for m in a.models.split(",") if m]:
        try:
            model = export(name)
            ort_model = export(name, static=True) if name in BATCH else model
        except Exception as e:  # noqa: BLE001 - report and go on
            print("%s: export failed: %s" % (name, e))
            continue
        configs = (("1p x 2t", 1, ()), ("tp2", 2, ("--tp", "2")), ("pp2", 2, ("--pp", "2")))
        if name in BATCH:
            shape = ("--input-shape", "x:%d,%d,%d" % (BATCH[name], SEQ, DIMS[name]["d"]))
            configs = (("1p x 2t", 1, shape), ("pp2", 2, ("--pp", "2") + shape),
                       ("pp2 mb2", 2, ("--pp", "2", "--micro-batches", "2") + shape),
                       ("pp2 mb4", 2, ("--pp", "2", "--micro-batches", "4") + shape))
        rounds = {label: [] for label, _, _ in configs}
        ort_rounds = []
        ort = None
        for _ in range(ROUNDS):
            for label, np_, extra in configs:
                try:
                    rounds[label].append(cge_bench(model, np_, extra))
                except Exception as e:  # noqa: BLE001
                    rounds[label].append({"error": str(e)})
            try:
                o = ort_bench(ort_model)
                if o:
                    ort_rounds.append(o)
            except Exception as e:  # noqa: BLE001
                ort = {"error": str(e)}
        rows = {}
        for label, rs in rounds.items():
            ok = sorted((r for r in rs if "p50_ms" in r), key=lambda r: r["p50_ms"])
            rows[label] = dict(ok[len(ok) // 2], rounds=[r["p50_ms"] for r in ok]) if ok else rs[0]
        if ort_rounds:
            ort_rounds.sort(key=lambda r: r["median_ms"])
            ort = ort_rounds[len(ort_rounds) // 2]
        ort_ms = ort.get("median_ms") if ort else None
        print("\n%s (%s)" % (name, ", ".join("%s %s" % (k, v) for k, v in DIMS[name].items())))
        print("  %-9s %9s %9s %10s %12s %12s %9s" % ("config", "p50 ms", "rank1 ms", "tokens/s",
                                                  "sent/run", "minimum", "vs ORT"))
        one = rows["1p x 2t"].get("p50_ms")
        for label, res in rows.items():
            if "error" in res:
                print("  %-9s error: %s" % (label, res["error"].splitlines()[0][:150]))
                continue
            p50 = res["p50_ms"]
            r1 = res["ranks"].get(1, (None, None))
            sent = res["ranks"].get(0, (None, 0))[1]
            kind = label[:2]
            mn = minimum_bytes(name, kind) if kind in ("tp", "pp") else 0
            print("  %-9s %9.2f %9s %10.0f %12s %12s %9s" % (
                label, p50, "%.2f" % r1[0] if r1[0] else "-", BATCH.get(name, 1) * SEQ / p50 * 1e3,
                "%.0f KiB" % (sent / 1024) if kind in ("tp", "pp") else "-",
                "%.0f KiB" % (mn / 1024) if mn else "-",
                "%.2fx" % (p50 / ort_ms) if ort_ms else "-"))
            res["tokens_per_s"] = BATCH.get(name, 1) * SEQ / p50 * 1e3
            res["min_bytes"] = mn
        if ort_ms:
            print("  %-9s %9.2f %9s %10.0f" % ("ort 2t", ort_ms, "-",
                                               BATCH.get(name, 1) * SEQ / ort_ms * 1e3))
        elif ort and "error" in ort:
            print("  ort 2t    error: %s" % ort["error"][:150])
        if one:
            for label in ("tp2", "pp2", "pp2 mb2", "pp2 mb4"):
                if label in rows and "p50_ms" in rows[label]:
                    print("  %s / 1p x 2t: %.2fx" % (label, rows[label]["p50_ms"] / one))
        out[name] = {"rows": rows, "ort": ort}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
