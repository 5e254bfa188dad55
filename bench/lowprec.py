"""make bench-lowprec: cge's low-precision paths against float32 and ONNX
Runtime, in one run. Not a test.

1. bf16 (precision="bf16") vs float32 on GEMM-heavy models: the
   TransformerEncoder and resnet18 of scripts/make_test_models.py and a
   ViT-like stack of MatMuls (197 tokens, width 768, MLP 3072) built here.
   Median latency of cge fp32, cge bf16 (alternating runs in one process) and
   ONNX Runtime fp32, the speed-up, and the max / mean relative error of the
   bf16 outputs against fp32's (|bf16 - fp32| / max |fp32|).
   Targets: bf16 >= 1.5x faster than fp32, relative error <= 1e-2.
2. Weight-only quantization: the GPT-like decoder of
   scripts/make_dynamic_models.py (widened to d_model 1024, ff 4096, vocab
   8192 so that its weights, not its overheads, set a token's time), its
   MatMul weights rewritten into com.microsoft MatMulNBits (int4 and int8,
   block 32; scripts/nbits.py, ONNX Runtime's layout), and the int4 codes as
   standard opset-21 DequantizeLinear(block_size) -> MatMul (int4-dq21, from
   cge quantize --format qdq). Per variant: bytes of
   weights the products read per token, ms per token of greedy decoding
   (prompt of 16, then 16 steps with the key/value cache fed back; median)
   for cge and ONNX Runtime (bench/ort_dynamic.js), and the ratio.
   Target: int4 >= 2x fewer bytes per token than float32.
3. float16 and bfloat16 models (scripts/half_model.py's copies of the
   TransformerEncoder, resnet18 and mobilenet_v2): cge's half model (its
   nodes on float32's kernels: compiler pass widen_half) against cge's
   float32 model (alternating runs in one process) and ONNX Runtime's
   float16 model, and the half outputs' max relative error against the
   float32 model's.

Environment: BENCH_THREADS (2), BENCH_RUNS (30), BENCH_MODEL_DIR, BENCH_PARTS
("bf16,decoder,half": any of the parts).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
RUNS = int(os.environ.get("BENCH_RUNS", "30"))
os.environ.setdefault("CGE_LIBRARY", os.path.join(BUILD, "libcge.so"))
os.environ.setdefault("CGE_NUM_THREADS", str(THREADS))
os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import cge  # noqa: E402
import nbits  # noqa: E402

DEC = dict(layers=4, d_model=1024, heads=16, vocab=8192, max_pos=256, ff=4096)


def have_ort():
    return os.path.isfile(os.path.join(HERE, "node_modules", "onnxruntime-node", "package.json"))


def ort_latency(model):
    if not have_ort():
        return None
    out = subprocess.run(["node", os.path.join(HERE, "ort_run.js"), model, str(THREADS), "5",
                          str(RUNS)], check=True, capture_output=True, text=True, cwd=HERE).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def vit_mlp(path, layers=2, tokens=197, d=768, ff=3072):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "input"
    for i in range(layers):
        def w(name, k, n):
            inits.append(numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), name))
            return name
        nodes += [helper.make_node("MatMul", [x, w(f"qkv{i}", d, 3 * d)], [f"qkv_{i}"]),
                  helper.make_node("Slice", [f"qkv_{i}", "s0", "s1", "ax"], [f"v_{i}"]),
                  helper.make_node("MatMul", [f"v_{i}", w(f"proj{i}", d, d)], [f"p_{i}"]),
                  helper.make_node("Add", [x, f"p_{i}"], [f"r_{i}"]),
                  helper.make_node("MatMul", [f"r_{i}", w(f"fc1{i}", d, ff)], [f"h_{i}"]),
                  helper.make_node("Relu", [f"h_{i}"], [f"g_{i}"]),
                  helper.make_node("MatMul", [f"g_{i}", w(f"fc2{i}", ff, d)], [f"m_{i}"]),
                  helper.make_node("Add", [f"r_{i}", f"m_{i}"], [f"x_{i}"])]
        x = f"x_{i}"
    inits += [numpy_helper.from_array(np.array([2 * d], np.int64), "s0"),
              numpy_helper.from_array(np.array([3 * d], np.int64), "s1"),
              numpy_helper.from_array(np.array([1], np.int64), "ax")]
    nodes.append(helper.make_node("Identity", [x], ["output"]))
    g = helper.make_graph(nodes, "vit_mlp", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [tokens, d])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [tokens, d])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def fixed_input(sess):
    i = sess.get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    n = int(np.prod(shape))
    return {i.name: ((np.arange(n) % 7) * 0.5).astype(np.float32).reshape(shape)}


def bf16_row(name, path):
    s32 = cge.InferenceSession(path, num_threads=THREADS)
    s16 = cge.InferenceSession(path, num_threads=THREADS, precision="bf16")
    feed = fixed_input(s32)
    y32, y16 = s32.run(None, feed), s16.run(None, feed)
    for _ in range(3):
        s32.run(None, feed), s16.run(None, feed)
    t32, t16 = [], []
    for _ in range(RUNS):
        for s, t in ((s32, t32), (s16, t16)):
            t0 = time.perf_counter()
            s.run(None, feed)
            t.append((time.perf_counter() - t0) * 1e3)
    mx = mean = 0.0
    for a, b in zip(y32, y16):
        scale = float(np.abs(a).max()) or 1.0
        e = np.abs(a.astype(np.float64) - b) / scale
        mx, mean = max(mx, float(e.max())), max(mean, float(e.mean()))
    return dict(model=name, fp32_ms=float(np.median(t32)), bf16_ms=float(np.median(t16)),
                ort_fp32_ms=ort_latency(path), max_rel_error=mx, mean_rel_error=mean)


# ---- float16 / bfloat16 models ---------------------------------------------------------------

def half_row(name, path32, path16, half):
    import half_model
    s32 = cge.InferenceSession(path32, num_threads=THREADS)
    s16 = cge.InferenceSession(path16, num_threads=THREADS)
    feed = fixed_input(s32)
    k = next(iter(feed))
    f16 = {k: feed[k].astype(np.float16) if half == "float16" else half_model.bf16_bits(feed[k])}
    y32, y16 = s32.run(None, feed), s16.run(None, f16)
    for _ in range(3):
        s32.run(None, feed), s16.run(None, f16)
    t32, t16 = [], []
    for _ in range(RUNS):
        for s, f, t in ((s32, feed, t32), (s16, f16, t16)):
            t0 = time.perf_counter()
            s.run(None, f)
            t.append((time.perf_counter() - t0) * 1e3)
    widen = (lambda a: a.astype(np.float32)) if half == "float16" else half_model.bf16_value
    mx = 0.0
    for a, b in zip(y32, y16):
        scale = float(np.abs(a).max()) or 1.0
        mx = max(mx, float((np.abs(a.astype(np.float64) - widen(b)) / scale).max()))
    # ONNX Runtime's CPU kernels take float16 (casting where it has none), not bfloat16
    return dict(model=name, half=half, fp32_ms=float(np.median(t32)), half_ms=float(np.median(t16)),
                ort_half_ms=ort_latency(path16) if half == "float16" else None, max_rel_error=mx)


def half_part(make_test_models, out_dir):
    import onnx
    from onnx import TensorProto
    import half_model
    print(f"{'model':28} {'cge fp32':>9} {'cge half':>9} {'ORT half':>9} {'half/fp32':>10} "
          f"{'half/ORT':>9} {'max rel err':>12}   (ms)")
    rows = []
    for name in ("transformer_encoder", "resnet18", "mobilenet_v2"):
        path32 = make_test_models.make(name, out_dir)[0]
        for half in ("float16", "bfloat16"):
            if name != "transformer_encoder" and half == "bfloat16":
                continue
            path16 = os.path.join(out_dir, f"{name}_{half}.onnx")
            onnx.save(half_model.halved(path32, TensorProto.FLOAT16 if half == "float16"
                                        else TensorProto.BFLOAT16), path16)
            r = half_row(f"{name} {half}", path32, path16, half)
            rows.append(r)
            o = r["ort_half_ms"]
            print(f"{r['model']:28} {r['fp32_ms']:9.2f} {r['half_ms']:9.2f} "
                  f"{(o if o else float('nan')):9.2f} {r['half_ms'] / r['fp32_ms']:10.2f} "
                  f"{(r['half_ms'] / o if o else float('nan')):9.2f} {r['max_rel_error']:12.2e}")
    print("(mobilenet_v2's random weights drive its outputs to ~1e-9, below float16's "
          "smallest value: its half outputs are 0, the error 1)\n")
    return rows


# ---- the decoder -------------------------------------------------------------------------

CGE_DECODE = r'''
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import cge
path, steps = sys.argv[2], int(sys.argv[3])
prompt = np.array(json.loads(sys.argv[4]), np.int64)
heads, hd = int(sys.argv[5]), int(sys.argv[6])
s = cge.InferenceSession(path)
names = [i.name for i in s.get_inputs()]
outs = [o.name for o in s.get_outputs()]
feeds = {names[0]: prompt}
for n in names[1:]:
    feeds[n] = np.zeros((1, heads, 0, hd), np.float32)
r = s.run(None, feeds)
tok, times, tokens = int(r[0][0, -1].argmax()), [], []
for _ in range(steps):
    f = {names[0]: np.array([[tok]], np.int64)}
    for n in names[1:]:
        f[n] = r[outs.index(n.replace("past_", "present_"))]
    t0 = time.perf_counter()
    r = s.run(None, f)
    tok = int(r[0][0, -1].argmax())
    times.append((time.perf_counter() - t0) * 1e3)
    tokens.append(tok)
print(json.dumps({"token_ms": float(np.median(times)), "tokens": tokens}))
'''


def cge_decode(path, steps, prompt):
    env = dict(os.environ, CGE_RUN_MODE="plan")
    out = subprocess.run([sys.executable, "-c", CGE_DECODE, os.path.join(ROOT, "python"), path,
                          str(steps), json.dumps(prompt), str(DEC["heads"]),
                          str(DEC["d_model"] // DEC["heads"])], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def ort_decode(path, steps, prompt, tmp):
    if not have_ort():
        return None
    import make_dynamic_models as mdm
    ins, _ = mdm.decoder_io_names()
    spec = dict(kind="decode", model=path, threads=THREADS, prompt=prompt, steps=steps, runs=0,
                generations=1, inputs=ins, past_shape=[DEC["heads"], DEC["d_model"] // DEC["heads"]])
    sp = os.path.join(tmp, "spec.json")
    with open(sp, "w") as f:
        json.dump(spec, f)
    r = subprocess.run(["node", os.path.join(HERE, "ort_dynamic.js"), sp], capture_output=True,
                       text=True, cwd=HERE)
    if r.returncode:
        return {"error": (r.stderr or r.stdout).strip().splitlines()[-1]}
    g = json.loads(r.stdout.strip().splitlines()[-1])["generations"][0]
    if "error" in g:
        return g
    return {"token_ms": float(np.median(g["token_ms"])), "tokens": g["tokens"][1:]}


def decoder_models(out_dir):
    import onnx
    import make_dynamic_models as mdm
    mdm.DECODER.update(DEC)
    path = os.path.join(out_dir, "decoder_wide.onnx")
    if not os.path.exists(path):
        import torch
        torch.manual_seed(0)
        model = mdm.decoder(**DEC)
        ids = torch.randint(0, DEC["vocab"], (1, 4), generator=torch.Generator().manual_seed(1))
        past = tuple(torch.from_numpy(a) for a in mdm.empty_past(1, 3))
        mdm._export("decoder_dyn", model, (ids,) + past, path)
    paths = {"fp32": path}
    for bits in (4, 8):
        q = os.path.join(out_dir, f"decoder_wide_int{bits}.onnx")
        if not os.path.exists(q):
            m = onnx.load(path)
            nbits.to_matmul_nbits(m, bits=bits, block_size=32)
            onnx.save(m, q)
        paths[f"int{bits}"] = q
    # the same int4 codes in standard ONNX: DequantizeLinear(block_size) -> MatMul, opset 21
    # (cge quantize --format qdq), which cge's fuse_dq_matmul turns into MatMulNBits
    q = os.path.join(out_dir, "decoder_wide_int4_dq21.onnx")
    if not os.path.exists(q):
        cge.quantize(path, q, weights_only="int4", block_size=32, weights_format="qdq")
    paths["int4-dq21"] = q
    return paths


def main():
    import onnx
    import make_test_models
    out_dir = os.environ.get("BENCH_MODEL_DIR") or os.path.join(tempfile.gettempdir(), "cge-bench-lowprec")
    os.makedirs(out_dir, exist_ok=True)
    print(f"low precision: {THREADS} threads, median of {RUNS} runs; bf16 kernels available: "
          f"{cge.precision_bf16_available()}\n")
    parts = os.environ.get("BENCH_PARTS", "bf16,decoder,half").split(",")
    models = [] if "bf16" not in parts else [("transformer_encoder", make_test_models.make("transformer_encoder", out_dir)[0]),
              ("vit_mlp", vit_mlp(os.path.join(out_dir, "vit_mlp.onnx"))),
              ("resnet18", make_test_models.make("resnet18", out_dir)[0])]
    if models:
        print(f"{'model':20} {'cge fp32':>9} {'cge bf16':>9} {'ORT fp32':>9} {'bf16 speed-up':>14} "
              f"{'bf16/ORT':>9} {'max rel err':>12} {'mean rel err':>13}   (ms)")
    rows = []
    for name, path in models:
        r = bf16_row(name, path)
        rows.append(r)
        o = r["ort_fp32_ms"]
        print(f"{name:20} {r['fp32_ms']:9.2f} {r['bf16_ms']:9.2f} "
              f"{(o if o else float('nan')):9.2f} {r['fp32_ms'] / r['bf16_ms']:13.2f}x "
              f"{(r['bf16_ms'] / o if o else float('nan')):9.2f} {r['max_rel_error']:12.2e} "
              f"{r['mean_rel_error']:13.2e}")
    if models:
        print("target: bf16 >= 1.5x faster than fp32 on GEMM-heavy models, max rel error <= 1e-2\n")
    if "half" in parts:
        rows += half_part(make_test_models, out_dir)
    if "decoder" not in parts:
        return

    paths = decoder_models(out_dir)
    import make_dynamic_models as mdm
    prompt = [[int(t) % DEC["vocab"] for t in mdm.prompt()[0]]]
    steps = 16
    print(f"decoder (layers {DEC['layers']}, d_model {DEC['d_model']}, ff {DEC['ff']}, vocab "
          f"{DEC['vocab']}): greedy decoding, prompt {len(prompt[0])}, {steps} steps")
    print(f"{'weights':10} {'MB/token':>9} {'vs fp32':>8} {'cge ms/tok':>11} {'ORT ms/tok':>11} "
          f"{'cge/ORT':>8}  same tokens as ORT")
    fp32_bytes = None
    tmp = tempfile.mkdtemp()
    for kind, path in paths.items():
        wb = nbits.weight_bytes(onnx.load(path, load_external_data=False))
        fp32_bytes = fp32_bytes or wb
        c = cge_decode(path, steps, prompt)
        o = ort_decode(path, steps, prompt, tmp)
        ok = o is not None and "error" not in o
        same = (o["tokens"] == c["tokens"]) if ok else None
        print(f"{kind:10} {wb / 1e6:9.1f} {fp32_bytes / wb:7.2f}x {c['token_ms']:11.3f} "
              f"{(o['token_ms'] if ok else float('nan')):11.3f} "
              f"{(c['token_ms'] / o['token_ms'] if ok else float('nan')):8.2f}  "
              f"{same if ok else (o or {}).get('error', 'no ORT')}")
        rows.append(dict(model="decoder_wide", weights=kind, weight_bytes=wb, cge=c, ort=o))
    print("target: int4 >= 2x fewer bytes of weights read per token than fp32")
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
