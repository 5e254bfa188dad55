#!/usr/bin/env python3
# The model zoo (make zoo): torchvision 0.14's models and hand-built ones with
# random weights (fixed seed), exported by torch.onnx.export, each run through
# PyTorch (reference), cge (ONNX), ONNX Runtime and cge.torch.compile; writes
# a markdown table (match, errors, times, ratios, peak RSS) and a summary.
"""Usage: zoo.py [--tier default|large|all] [--filter REGEX] [--cache DIR]
                 [--report FILE] [--no-torch] [--list]

Every model is exported once into the cache (default /tmp/cge-zoo) with its
inputs and PyTorch's outputs; later runs reuse them. Each measurement runs in
its own process (peak RSS is that process's): cge through
cge.InferenceSession, ONNX Runtime through onnxruntime-node
(scripts/zoo_ort.js), cge.torch.compile on the PyTorch module. 2 threads each.

Match: |out - ref| <= atol + rtol * |ref| elementwise with rtol 1e-3 and
atol 1e-4 * max(1, max|ref|) (random weights drive some models' outputs to
1e6 and beyond: there the absolute tolerance follows the output's scale).
Integer and bool outputs must be equal.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
THREADS = int(os.environ.get("ZOO_THREADS", "2"))
MIN_RUNS = int(os.environ.get("ZOO_MIN_RUNS", "3"))
BUDGET_MS = int(os.environ.get("ZOO_BUDGET_MS", "1500"))
CHILD_TIMEOUT = int(os.environ.get("ZOO_TIMEOUT", "900"))
RTOL, ATOL = 1e-3, 1e-4
NATURAL_OPSET = 14       # torch 1.13's default export opset
VARIANT_OPSETS = (9, 11, 13, 15, 17)
CHUNK = 8               # models per PyTorch process


# ---- the models ----------------------------------------------------------------------

class Spec:
    """One zoo entry. make() -> nn.Module (eval, seeded); inputs(run) -> tuple
    of tensors (run=True: the run shapes, which differ from the export's
    where dynamic axes are declared)."""

    def __init__(self, name, make, inputs, opset=NATURAL_OPSET, dynamic=None, tier="default",
                 torch_compile=True, partial=False, group="classification", run_inputs=None,
                 version=1):
        self.name, self.make, self.inputs = name, make, inputs
        # A cached export whose manifest names another version is exported again.
        self.version = version
        self.opset, self.dynamic, self.tier = opset, dynamic, tier
        self.torch_compile, self.partial, self.group = torch_compile, partial, group
        self.run_inputs = run_inputs or inputs


def _randn(*shape, seed=1):
    import torch
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def _seeded(fn):
    """A module built under a fixed seed, with random BatchNorm statistics
    (PyTorch's init leaves them 0/1: BN would be an identity)."""
    def make():
        import torch
        torch.manual_seed(0)
        m = fn()
        g = torch.Generator().manual_seed(2)
        for mod in m.modules():
            if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) and \
                    mod.running_mean is not None:
                n = mod.running_mean.numel()
                mod.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(n, generator=g) + 0.5)
        # Weights PyTorch initialises to zeros (ViT's head, some zero-init
        # residual norms) would make an output constant: random instead.
        for pname, p in m.named_parameters():
            if pname.endswith("weight") and p.numel() > 1 and bool((p == 0).all()):
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02 if p.dim() > 1 else
                            1 + 0.1 * torch.randn(p.shape, generator=g))
        return m.eval()
    return make


class _Flat:
    """Wraps a module whose output is a dict or nested: returns a tuple of tensors."""

    @staticmethod
    def wrap(m, select=None):
        import torch

        class Flat(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, *args):
                out = self.m(*args)
                return select(out) if select else tuple(_flatten(out))
        return Flat()


def _flatten(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _flatten(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _flatten(v)]
    return []


def _tv(module_name, name, **kw):
    def fn():
        import torchvision.models as tvm
        mod = getattr(tvm, module_name) if module_name else tvm
        return getattr(mod, name)(weights=None, **kw)
    return fn


def _image(n=1, size=224):
    return lambda run=False: (_randn(n, 3, size, size),)


LARGE = {"vit_h_14", "vit_l_16", "vit_l_32", "regnet_y_32gf", "regnet_y_128gf"}
HEAVY = set("""alexnet convnext_base convnext_large convnext_small densenet161 densenet201
    efficientnet_b5 efficientnet_b6 efficientnet_b7 efficientnet_v2_l efficientnet_v2_m regnet_x_8gf
    regnet_x_16gf regnet_x_32gf regnet_y_8gf regnet_y_16gf resnet101 resnet152 resnext101_32x8d
    resnext101_64x4d swin_b swin_s swin_v2_b swin_v2_s vgg11 vgg11_bn vgg13 vgg13_bn vgg16
    vgg16_bn vgg19 vgg19_bn wide_resnet101_2 wide_resnet50_2 deeplabv3_resnet101 fcn_resnet101
    vit_b_16 s3d""".split())
PARTIAL = {"mobilenet_v3_small", "regnet_y_400mf", "swin_t", "vit_b_16", "efficientnet_b0",
           "resnet18"}


def _custom():
    import torch
    nn = torch.nn
    specs = []

    def enc():
        layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, 4)
    specs.append(Spec("transformer_encoder", _seeded(enc),
                      lambda run=False: (_randn(1, 48 if run else 64, 256),),
                      dynamic={"input_0": {1: "seq"}}, group="sequence"))

    def dec():
        class Dec(nn.Module):
            def __init__(self):
                super().__init__()
                layer = nn.TransformerDecoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
                self.d = nn.TransformerDecoder(layer, 2)
                self.register_buffer("mask", torch.triu(torch.full((32, 32), float("-inf")), 1))

            def forward(self, tgt, memory):
                return self.d(tgt, memory, tgt_mask=self.mask)
        return Dec()
    specs.append(Spec("transformer_decoder", _seeded(dec),
                      lambda run=False: (_randn(1, 32, 256), _randn(1, 64, 256, seed=3)),
                      group="sequence"))

    def gpt():
        class Block(nn.Module):
            def __init__(self, d=128, h=4):
                super().__init__()
                self.h = h
                self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
                self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
                self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

            def forward(self, x):
                b, s, d = x.shape
                q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
                q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
                mask = torch.triu(torch.full((s, s), float("-inf")), 1)
                att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.h) + mask
                y = att.softmax(-1) @ v
                x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
                return x + self.mlp(self.ln2(x))

        class GPT(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok, self.pos = nn.Embedding(512, 128), nn.Embedding(64, 128)
                self.blocks = nn.Sequential(Block(), Block())
                self.ln, self.head = nn.LayerNorm(128), nn.Linear(128, 512, bias=False)

            def forward(self, ids):
                pos = torch.arange(ids.shape[1])
                return self.head(self.ln(self.blocks(self.tok(ids) + self.pos(pos))))
        return GPT()

    def ids(run=False):
        g = torch.Generator().manual_seed(4)
        return (torch.randint(0, 512, (1, 24 if run else 32), generator=g),)
    specs.append(Spec("gpt_tiny", _seeded(gpt), ids, dynamic={"input_0": {1: "seq"}},
                      group="sequence", run_inputs=ids))

    for kind in ("LSTM", "GRU", "RNN"):
        for layers, bi in ((1, False), (2, True), (2, False)):
            def rnn(kind=kind, layers=layers, bi=bi):
                class R(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.r = getattr(nn, kind)(64, 96, num_layers=layers, bidirectional=bi)

                    def forward(self, x):
                        return tuple(_flatten(self.r(x)))
                return R()
            name = "%s_%dl%s" % (kind.lower(), layers, "_bi" if bi else "")
            dyn = {"input_0": {0: "seq"}} if (layers, bi) == (2, True) else None
            specs.append(Spec(name, _seeded(rnn),
                              (lambda run=False, dyn=dyn: (_randn(30 if run and dyn else 20, 2,
                                                                  64),)),
                              dynamic=dyn, group="recurrent"))

    def audio():
        class Audio(nn.Module):
            def __init__(self):
                super().__init__()
                chans = [1, 64, 128, 128, 256]
                layers = []
                for i, (k, s) in enumerate(((10, 5), (3, 2), (3, 2), (2, 2))):
                    layers += [nn.Conv1d(chans[i], chans[i + 1], k, s, bias=False),
                               nn.GroupNorm(8, chans[i + 1]), nn.GELU()]
                self.f = nn.Sequential(*layers)
                self.out = nn.Linear(256, 32)

            def forward(self, x):
                return self.out(self.f(x).transpose(1, 2))
        return Audio()
    specs.append(Spec("audio_conv1d", _seeded(audio), lambda run=False: (_randn(1, 1, 16000),),
                      group="audio"))

    def unet():
        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

        class UNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.d1, self.d2, self.d3 = block(3, 16), block(16, 32), block(32, 64)
                self.u2 = nn.ConvTranspose2d(64, 32, 2, stride=2)
                self.c2 = block(64, 32)
                self.u1 = nn.ConvTranspose2d(32, 16, 2, stride=2)
                self.c1 = block(32, 16)
                self.out = nn.Conv2d(16, 2, 1)
                self.pool = nn.MaxPool2d(2)

            def forward(self, x):
                a = self.d1(x)
                b = self.d2(self.pool(a))
                c = self.d3(self.pool(b))
                b = self.c2(torch.cat([self.u2(c), b], 1))
                return self.out(self.c1(torch.cat([self.u1(b), a], 1)))
        return UNet()
    specs.append(Spec("unet", _seeded(unet), lambda run=False: (_randn(1, 3, 128, 128),),
                      group="segmentation"))
    return specs


def all_specs():
    import torchvision.models as tvm
    specs = []
    for name in tvm.list_models(module=tvm):
        size = 299 if name == "inception_v3" else 224
        kw = {"aux_logits": False, "init_weights": True} if name in ("inception_v3",
                                                                      "googlenet") else {}
        specs.append(Spec(name, _seeded(_tv(None, name, **kw)), _image(1, size),
                          tier="large" if name in LARGE else "default",
                          partial=name in PARTIAL))
    specs.append(Spec("resnet18_dynbatch", _seeded(_tv(None, "resnet18")),
                      lambda run=False: (_randn(3 if run else 1, 3, 224, 224),),
                      dynamic={"input_0": {0: "batch"}}, torch_compile=False))
    for name in tvm.list_models(module=tvm.segmentation):
        def seg(name=name):
            return _Flat.wrap(_tv("segmentation", name, weights_backbone=None)())
        specs.append(Spec(name, _seeded(seg), _image(1, 224), group="segmentation"))
    for name in ("r3d_18", "mc3_18", "r2plus1d_18"):
        specs.append(Spec(name, _seeded(_tv("video", name)),
                          lambda run=False: (_randn(1, 3, 8, 112, 112),), group="video"))
    # s3d's last pooling needs 16 frames of 224x224.
    specs.append(Spec("s3d", _seeded(_tv("video", "s3d")),
                      lambda run=False: (_randn(1, 3, 16, 224, 224),), group="video"))

    def detector(name, **kw):
        def make():
            m = _tv("detection", name, weights_backbone=None, **kw)()

            class Det(__import__("torch").nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = m

                def forward(self, x):
                    return tuple(_flatten(self.m([x[0]])))
            return Det()
        return make
    det_input = lambda run=False: (_randn(1, 3, 320, 320),)  # noqa: E731

    def calibrated(make):
        """torchvision's initialisation with random BatchNorm statistics leaves
        every class score at its prior (1/91) or saturated (RetinaNet's 1.0),
        and the boxes clipped to the image: the kept detections are ties that
        PyTorch, ORT and cge break differently (and Faster R-CNN keeps none).
        The last classification and box-regression layers get random weights
        scaled to their input (measured on the zoo's input), so that logits
        spread with a standard deviation of about 3 and box deltas of 0.3:
        distinct scores, boxes of many sizes, a reference that means something."""
        def wrapped():
            import re as _re
            import torch
            m = make().eval()
            pat = _re.compile(r"(cls_logits|cls_score|classification_head\.module_list\.\d+\.1)$")
            reg = _re.compile(r"(bbox_reg|bbox_pred|regression_head\.module_list\.\d+\.1)$")
            layers = {qn: mod for qn, mod in m.named_modules()
                      if (pat.search(qn) or reg.search(qn)) and
                      isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear))}
            rms, hooks = {}, []
            for qn, mod in layers.items():
                def hook(mod, args, qn=qn):
                    r = float(args[0].detach().double().pow(2).mean().sqrt())
                    rms[qn] = max(rms.get(qn, 0.0), r)
                hooks.append(mod.register_forward_pre_hook(hook))
            with torch.no_grad():
                m(*det_input())
            for h in hooks:
                h.remove()
            g = torch.Generator().manual_seed(3)
            with torch.no_grad():
                for qn, mod in layers.items():
                    fan_in = mod.weight[0].numel()
                    target = 3.0 if pat.search(qn) else 0.3
                    scale = target / (fan_in ** 0.5 * max(rms.get(qn, 1.0), 1e-6))
                    mod.weight.copy_(torch.randn(mod.weight.shape, generator=g) * scale)
                    if mod.bias is not None and reg.search(qn):
                        mod.bias.zero_()
            return m
        return wrapped
    def bn_calibrated(make):
        """ssdlite's random BatchNorm statistics leave its deep feature maps
        constant over positions (spatial spread 1e-4 of their size): every
        anchor of one size scores the same, 75 of its 300 detections tie, and
        which of them NonMaxSuppression keeps depends on the order ties are
        taken in (PyTorch, ORT and cge each keep others). Each BatchNorm's
        statistics are instead measured on its input (the zoo's, fixed seed)
        as it runs, so that it normalises: the input's variation over positions
        reaches the heads and the scores differ."""
        def wrapped():
            import torch
            m = make().eval()
            hooks = []
            for mod in m.modules():
                if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                    def hook(mod, args):
                        x = args[0].detach().transpose(0, 1).flatten(1).double()
                        if x.shape[1] > 1:   # a 1x1 map has no spread: random as before
                            mod.running_mean.copy_(x.mean(1).float())
                            mod.running_var.copy_(x.var(1, unbiased=False).float())
                    hooks.append(mod.register_forward_pre_hook(hook))
            with torch.no_grad():
                m(*det_input())
            for h in hooks:
                h.remove()
            return m
        return wrapped
    specs.append(Spec("ssdlite320_mobilenet_v3_large",
                      calibrated(bn_calibrated(_seeded(detector("ssdlite320_mobilenet_v3_large")))),
                      det_input, opset=14, group="detection", version=3))
    specs.append(Spec("retinanet_resnet50_fpn",
                      calibrated(_seeded(detector("retinanet_resnet50_fpn", min_size=320,
                                                  max_size=320))),
                      det_input, opset=14, group="detection", version=2))
    specs.append(Spec("fasterrcnn_mobilenet_v3_large_320_fpn",
                      calibrated(_seeded(detector("fasterrcnn_mobilenet_v3_large_320_fpn"))), det_input,
                      opset=14, group="detection", version=2))

    def raft():
        m = _tv("optical_flow", "raft_small")()

        class Raft(__import__("torch").nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, a, b):
                return self.m(a, b, num_flow_updates=4)[-1]
        return Raft()
    specs.append(Spec("raft_small", _seeded(raft),
                      lambda run=False: (_randn(1, 3, 128, 128), _randn(1, 3, 128, 128, seed=5)),
                      opset=16, group="optical flow"))
    specs += _custom()

    # The heavy ones (>= ~8 GFLOPs or >= 80M parameters) run last, so that a
    # long run reports the rest first.
    by_name = {s.name: s for s in specs}
    for base in ("resnet18", "mobilenet_v3_small", "squeezenet1_1", "deeplabv3_mobilenet_v3_large",
                 "transformer_encoder", "lstm_2l_bi", "gru_2l_bi", "rnn_2l", "unet"):
        b = by_name[base]
        for op in VARIANT_OPSETS:
            specs.append(Spec("%s@op%d" % (base, op), b.make, b.inputs, opset=op,
                              dynamic=b.dynamic, torch_compile=False, group=b.group,
                              run_inputs=b.run_inputs))
    # Small hand-built models first, then torchvision's; the heavy ones last,
    # so that a long run reports the rest first.
    specs.sort(key=lambda s: (s.name.split("@")[0] in HEAVY, s.group == "classification"))
    return specs


# ---- children (each measurement in its own process) ------------------------------------

def _rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _timed(fn):
    fn()                                   # first run (compiles / warms up)
    times, start = [], time.perf_counter()
    while len(times) < MIN_RUNS or ((time.perf_counter() - start) * 1e3 < BUDGET_MS and
                                    len(times) < 50):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def child_export(spec, d):
    """Exports the model, writes the run inputs and PyTorch's outputs."""
    import numpy as np
    import torch
    torch.set_num_threads(THREADS)
    model = spec.make()
    args = spec.inputs(False)
    path = os.path.join(d, "model.onnx")
    names = ["input_%d" % i for i in range(len(args))]
    # Exported with autograd on: under no_grad PyTorch 1.13 swaps
    # TransformerEncoder for a fused kernel the exporter does not know.
    torch.onnx.export(model, args, path, opset_version=spec.opset, input_names=names,
                      dynamic_axes=spec.dynamic, do_constant_folding=True)
    with torch.no_grad():
        run = spec.run_inputs(True)
        ref = [t.numpy() for t in _flatten(model(*run))]
    if spec.tier == "large":
        import onnx
        m = onnx.load(path)
        for f in os.listdir(d):
            if f != "model.onnx":
                os.remove(os.path.join(d, f))
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data")
    np.savez(os.path.join(d, "io.npz"), **{"in%d" % i: t.numpy() for i, t in enumerate(run)},
             **{"ref%d" % i: r for i, r in enumerate(ref)})
    manifest = {"model": path, "inputs": [], "version": spec.version}
    for i, t in enumerate(run):
        a = np.ascontiguousarray(t.numpy())
        f = os.path.join(d, "in%d.bin" % i)
        a.tofile(f)
        manifest["inputs"].append({"file": f, "dtype": str(a.dtype), "shape": list(a.shape)})
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    return {"outputs": len(ref)}


def child_cge(d):
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import cge
    io = np.load(os.path.join(d, "io.npz"))
    so = cge.SessionOptions()
    so.intra_op_num_threads = THREADS
    t0 = time.perf_counter()
    sess = cge.InferenceSession(os.path.join(d, "model.onnx"), so)
    create_ms = (time.perf_counter() - t0) * 1e3
    feeds = {inp.name: io["in%d" % i] for i, inp in enumerate(sess.get_inputs())}
    outs = []

    def run():
        outs[:] = sess.run(None, feeds)
    ms = _timed(run)
    np.savez(os.path.join(d, "cge_out.npz"), *outs)
    return {"create_ms": create_ms, "median_ms": ms, "rss_mb": _rss_mb()}


def child_torch(spec, d, fullgraph=True):
    """Eager PyTorch's time and RSS, then cge.torch.compile's result."""
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python"))
    torch.set_num_threads(THREADS)
    model = spec.make()
    if os.path.isfile(os.path.join(d, "io.npz")):
        io = np.load(os.path.join(d, "io.npz"))
        args = tuple(torch.from_numpy(io["in%d" % i]) for i in range(len(spec.inputs(True))))
    else:       # the ONNX export failed: the front end is checked all the same
        args = spec.run_inputs(True)
        with torch.no_grad():
            io = {"ref%d" % i: t.numpy() for i, t in enumerate(_flatten(model(*args)))}
    res = {}
    if fullgraph:
        with torch.no_grad():
            res["eager_ms"] = _timed(lambda: model(*args))
        res["eager_rss_mb"] = _rss_mb()
    import cge.torch
    t0 = time.perf_counter()
    fn = cge.torch.compile(model, args, fullgraph=fullgraph)
    res["compile_ms"] = (time.perf_counter() - t0) * 1e3
    outs = []

    def run():
        with torch.no_grad():
            outs[:] = _flatten(fn(*args))
    res["median_ms"] = _timed(run)
    res["breaks"] = len(fn.graph_breaks) if hasattr(fn, "graph_breaks") else None
    refs = [io["ref%d" % i] for i in range(len([k for k in io if k.startswith("ref")]))]
    res["err"] = compare([o.numpy() for o in outs], refs, spec.group == "detection")
    return res


def child_ort(d):
    out_dir = d
    p = subprocess.run(["node", os.path.join(HERE, "zoo_ort.js"), os.path.join(d, "manifest.json"),
                        out_dir, str(THREADS), str(MIN_RUNS), str(BUDGET_MS)],
                       capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    if p.returncode:
        raise RuntimeError((p.stderr or p.stdout).strip().splitlines()[-1][:300]
                           if (p.stderr or p.stdout).strip() else "node exited %d" % p.returncode)
    return json.loads(p.stdout.strip().splitlines()[-1])


def _ort_outputs(res):
    import numpy as np
    dt = {"float32": np.float32, "int64": np.int64, "int32": np.int32, "bool": np.bool_,
          "float64": np.float64, "uint8": np.uint8, "int8": np.int8}
    return [np.fromfile(o["file"], dtype=dt[o["dtype"]]).reshape(o["shape"])
            for o in res["outputs"]]


# ---- comparison ----------------------------------------------------------------------

def _detections(outs):
    """(boxes [N,4], scores [N], labels [N], order of the three in outs) or None."""
    import numpy as np
    if len(outs) != 3 or np.asarray(outs[0]).ndim != 2:
        return None
    b = np.asarray(outs[0])
    rest = [np.asarray(o) for o in outs[1:]]
    if any(r.shape != (len(b),) for r in rest):
        return None
    si = 1 if rest[0].dtype.kind == "f" else 2   # Faster R-CNN: boxes, labels, scores
    return b, np.asarray(outs[si]), np.asarray(outs[3 - si]), si


def canonical_detections(outs, above=None):
    """Detections (boxes [N,4], scores [N], labels [N]) in one order, those
    scoring above `above` only: tied detections may come in any order (ORT's
    differ from PyTorch's too), and which of several near-equal detections
    at the cutoff are kept is not a fault either."""
    import numpy as np
    d = _detections(outs)
    if d is None:
        return outs
    b, sc, lab, si = d
    if above is not None:
        m = sc > above
        b, sc, lab = b[m], sc[m], lab[m]
    order = np.lexsort((lab, np.round(b[:, 3], 2), np.round(b[:, 2], 2), np.round(b[:, 1], 2),
                        np.round(b[:, 0], 2), -np.round(sc.astype(np.float64), 5)))
    out = [b[order], None, None]
    out[si], out[3 - si] = sc[order], lab[order]
    return out


def compare(outs, refs, canonical=False):
    if canonical:
        do, dr = _detections(outs), _detections(refs)
        above = None
        if do is not None and dr is not None and len(do[1]) and len(dr[1]):
            # Detections compared: those clearly above the lower of the two
            # cutoffs (the last kept score); 1e-4 exceeds float noise in scores.
            lo = max(float(do[1].min()), float(dr[1].min()))
            above = lo + 1e-4 * max(1.0, abs(lo))
            if not (dr[1] > above).any():
                above = None   # every score tied (saturated): the whole set, as it is
        outs, refs = canonical_detections(outs, above), canonical_detections(refs, above)
        outs = _paired(outs, refs)
    return _compare(outs, refs)


def _paired(outs, refs):
    """outs' detections reordered to pair with refs' (each ref, best score
    first, takes the unpaired detection of its label nearest in box and
    score): a canonical sort alone puts near-equal scores in an order that
    rounding decides."""
    import numpy as np
    do, dr = _detections(outs), _detections(refs)
    if do is None or dr is None or len(do[1]) != len(dr[1]):
        return outs
    b, sc, lab, si = do
    free = np.ones(len(sc), bool)
    order = []
    for i in range(len(dr[1])):
        dist = np.abs(b - dr[0][i]).max(1) + 320.0 * np.abs(sc.astype(np.float64) - dr[1][i])
        dist[~free | (lab != dr[2][i])] = np.inf
        j = int(np.argmin(dist))
        if not np.isfinite(dist[j]):
            return outs   # a label with no counterpart: compared as it is, and fails
        free[j] = False
        order.append(j)
    out = [b[order], None, None]
    out[si], out[3 - si] = sc[order], lab[order]
    return out


def _compare(outs, refs):
    """{'ok', 'abs', 'rel', 'why'}: the worst output's max abs error and its
    error relative to the output's scale (max|d| / max|ref|)."""
    import numpy as np
    if len(outs) != len(refs):
        return {"ok": False, "abs": float("nan"), "rel": float("nan"),
                "why": "%d outputs, expected %d" % (len(outs), len(refs))}
    ok, worst_abs, worst_rel, why = True, 0.0, 0.0, ""
    for i, (o, r) in enumerate(zip(outs, refs)):
        o, r = np.asarray(o), np.asarray(r)
        if o.shape != r.shape:
            return {"ok": False, "abs": float("nan"), "rel": float("nan"),
                    "why": "output %d: shape %s, expected %s" % (i, list(o.shape), list(r.shape))}
        if r.size == 0:
            continue
        if r.dtype.kind in "biu":
            bad = int((o.astype(np.int64) != r.astype(np.int64)).sum())
            if bad:
                ok, why = False, why or "output %d: %d of %d integers differ" % (i, bad, r.size)
            continue
        o64, r64 = o.astype(np.float64), r.astype(np.float64)
        if not np.isfinite(o64).all() and not (np.isfinite(o64) == np.isfinite(r64)).all():
            ok, why = False, why or "output %d: non-finite values" % i
        d = np.abs(np.nan_to_num(o64 - r64))
        scale = max(1.0, float(np.abs(np.nan_to_num(r64)).max()))
        a = float(d.max())
        worst_abs = max(worst_abs, a)
        worst_rel = max(worst_rel, a / scale)
        if (d > ATOL * scale + RTOL * np.abs(np.nan_to_num(r64))).any():
            ok, why = False, why or "output %d: max abs error %.3g (scale %.3g)" % (i, a, scale)
    return {"ok": ok, "abs": worst_abs, "rel": worst_rel, "why": why}


# ---- driver ----------------------------------------------------------------------------

def _cached(spec, d):
    try:
        with open(os.path.join(d, "manifest.json")) as f:
            return json.load(f).get("version", 1) == spec.version
    except (OSError, ValueError):
        return False


def _torch_worker(names, cache, with_torch, partial_only=False):
    """One process for every PyTorch step (importing torch costs seconds):
    per model, the export if not cached, then eager PyTorch's time and
    cge.torch.compile (fullgraph=True; fullgraph=False too for some). One
    line per result: ZOO-START name, ZOO-RESULT {...}."""
    specs = {s.name: s for s in all_specs()}
    for name in names:
        spec = specs[name]
        d = os.path.join(cache, name)
        os.makedirs(d, exist_ok=True)
        print("ZOO-START " + name, flush=True)
        res = {"name": name}
        steps = []
        if not _cached(spec, d):
            steps.append(("export", lambda: child_export(spec, d)))
        if with_torch and spec.torch_compile:
            steps.append(("torch", lambda: child_torch(spec, d, fullgraph=True)))
            if spec.partial:
                steps.append(("partial", lambda: child_torch(spec, d, fullgraph=False)))
        for kind, fn in steps:
            t0 = time.perf_counter()
            try:
                res[kind] = fn()
            except Exception as e:   # reported in the table, not a crash of the zoo
                msg = str(e).strip().splitlines()
                res[kind] = {"error": "%s: %s" % (type(e).__name__, msg[0] if msg else "")}
                traceback.print_exc()
            res[kind]["seconds"] = time.perf_counter() - t0
        print("ZOO-RESULT " + json.dumps(res), flush=True)


def torch_phase(names, cache, env, with_torch):
    """Runs the torch worker over `names`, restarting it past a model that
    kills it; {name: result}."""
    results, todo = {}, list(names)
    while todo:
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--torch-worker", cache,
                              "1" if with_torch else "0"] + todo, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env, cwd=cache)
        current = None
        for line in p.stdout:
            if line.startswith("ZOO-START "):
                current = line[10:].strip()
                print("  torch: %s" % current, flush=True)
            elif line.startswith("ZOO-RESULT "):
                r = json.loads(line[11:])
                results[r["name"]] = r
                current = None
        rc = p.wait()
        done = [n for n in todo if n in results]
        if current is not None:
            results[current] = {"name": current, "export": {
                "error": "the PyTorch process died (exit %d) on this model" % rc}}
            done.append(current)
        todo = [n for n in todo if n not in done]
        if rc == 0 and current is None:
            break
    return results


def run_cge(d, env):
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--cge-child", d],
                           capture_output=True, text=True, timeout=CHILD_TIMEOUT, env=env, cwd=d)
    except subprocess.TimeoutExpired:
        return {"error": "timed out after %d s" % CHILD_TIMEOUT}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("ZOO-RESULT "):
            return json.loads(line[11:])
    tail = (p.stderr or "").strip().splitlines()
    return {"error": "exit %d: %s" % (p.returncode, tail[-1][:300] if tail else "")}


def _cge_child(d):
    try:
        res = child_cge(d)
    except Exception as e:
        msg = str(e).strip().splitlines()
        res = {"error": "%s: %s" % (type(e).__name__, msg[0] if msg else "")}
    print("ZOO-RESULT " + json.dumps(res))


def measure(spec, cache, env, tres):
    d = os.path.join(cache, spec.name)
    row = {"name": spec.name, "opset": spec.opset, "group": spec.group,
           "dynamic": bool(spec.dynamic)}
    for k in ("torch", "partial"):
        if k in tres:
            row[k] = tres[k]
    if "export" in tres and "error" in tres["export"]:
        row["export_error"] = tres["export"]["error"]
        return row
    if not os.path.isfile(os.path.join(d, "manifest.json")):
        row["export_error"] = "not exported"
        return row
    import numpy as np
    io = np.load(os.path.join(d, "io.npz"))
    refs = [io["ref%d" % i] for i in range(len([k for k in io.files if k.startswith("ref")]))]
    canon = spec.group == "detection"
    row["cge"] = run_cge(d, env)
    if "error" not in row["cge"]:
        cge_out = np.load(os.path.join(d, "cge_out.npz"))
        cge_out = [cge_out["arr_%d" % i] for i in range(len(cge_out.files))]
        row["cge"]["err"] = compare(cge_out, refs, canon)
    try:
        row["ort"] = child_ort(d)
        ort_out = _ort_outputs(row["ort"])
        row["ort"]["err"] = compare(ort_out, refs, canon)
        if "error" not in row["cge"]:
            row["cge"]["err_ort"] = compare(cge_out, ort_out, canon)
    except Exception as e:  # noqa: BLE001
        row["ort"] = {"error": str(e)}
    return row


def _f(v, fmt="%.1f"):
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt % v


def _status(r):
    if r is None:
        return ""
    if "error" in r:
        return "error"
    return "pass" if r["err"]["ok"] else "**FAIL**"


def report(rows, path, elapsed, quiet=False):
    lines = ["| model | opset | cge | max abs / rel err vs PyTorch | vs ORT | cge ms | ORT ms | "
             "cge/ORT | cge RSS MB | ORT RSS MB | RSS cge/ORT | cge create ms | ORT create ms "
             "| PyTorch ms | torch.compile fullgraph | compile ms / run ms | fullgraph=False |",
             "|" + "---|" * 17]
    failures, ratios, rss_ratios, exporter_notes = [], [], [], []
    for row in rows:
        c, o, t, p = row.get("cge"), row.get("ort"), row.get("torch"), row.get("partial")
        name = row["name"] + (" (dyn)" if row.get("dynamic") else "")
        if "export_error" in row:
            ts = _status(t) if t else "n/a"
            if t and ts != "pass":
                failures.append((row["name"], "torch.compile", t.get("error") or t["err"]["why"]))
            lines.append("| %s | %d | export fails | | | | | | | | | | | | %s | %s | |"
                         % (name, row["opset"], ts, "%.0f / %.1f" % (
                             t["compile_ms"], t["median_ms"]) if t and "error" not in t else ""))
            failures.append((row["name"], "export (torch.onnx)", row["export_error"]))
            continue
        cs = _status(c)
        if cs != "pass" and c and "err_ort" in c and c["err_ort"]["ok"] and o and \
                not o["err"]["ok"]:
            # ORT differs from PyTorch as much: the exported graph itself
            # approximates the module (opset 9's Upsample, for one).
            cs = "pass (as ORT)"
            exporter_notes.append((row["name"], o["err"]["why"]))
        if not cs.startswith("pass"):
            failures.append((row["name"], "cge", c.get("error") or c["err"]["why"]))
        if o and "error" in o:
            failures.append((row["name"], "ORT", o["error"]))
        elif o and not o["err"]["ok"] and not cs.startswith("pass"):
            failures.append((row["name"], "ORT vs PyTorch", o["err"]["why"]))
        ratio = rss = None
        if cs.startswith("pass") and o and "error" not in o:
            ratio = c["median_ms"] / o["median_ms"]
            rss = c["rss_mb"] / o["rss_mb"]
            ratios.append((ratio, row["name"]))
            rss_ratios.append((rss, row["name"]))
        err = c.get("err") if c else None
        ts = _status(t) if t else "n/a"
        if t and ts != "pass":
            failures.append((row["name"], "torch.compile", t.get("error") or t["err"]["why"]))
        ps = ""
        if p:
            ps = _status(p) + ("" if "error" in p else ", %s breaks, %.1f ms" % (p["breaks"],
                                                                                 p["median_ms"]))
            if _status(p) != "pass":
                failures.append((row["name"], "torch.compile fullgraph=False",
                                 p.get("error") or p["err"]["why"]))
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                     "| %s | %s |" % (
                         name, row["opset"], cs,
                         "%.2g / %.2g" % (err["abs"], err["rel"]) if err else "",
                         "%.2g" % c["err_ort"]["abs"] if c and "err_ort" in c else "",
                         _f(c and c.get("median_ms")), _f(o and o.get("median_ms")),
                         _f(ratio, "%.2f"), _f(c and c.get("rss_mb"), "%.0f"),
                         _f(o and o.get("rss_mb"), "%.0f"), _f(rss, "%.2f"),
                         _f(c and c.get("create_ms"), "%.0f"), _f(o and o.get("create_ms"), "%.0f"),
                         _f(t and t.get("eager_ms")), ts,
                         "%.0f / %.1f" % (t["compile_ms"], t["median_ms"])
                         if t and "error" not in t else "", ps))
    n_cge = sum(1 for r in rows if _status(r.get("cge")) == "pass") + len(exporter_notes)
    n_t = sum(1 for r in rows if r.get("torch") and _status(r["torch"]) == "pass")
    n_tt = sum(1 for r in rows if r.get("torch"))
    geo = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios)) if ratios else float("nan")
    geo_rss = math.exp(sum(math.log(r) for r, _ in rss_ratios) / len(rss_ratios)) \
        if rss_ratios else float("nan")
    summary = [
        "%d models; cge (ONNX) matches PyTorch on %d of %d; cge.torch.compile(fullgraph=True) "
        "on %d of %d; %.0f s." % (len(rows), n_cge, len(rows), n_t, n_tt, elapsed),
        "Geometric mean cge/ORT time ratio over %d matching models: %.2f (below 1: cge faster); "
        "peak RSS cge/ORT: %.2f." % (len(ratios), geo, geo_rss),
        "Worst 10 time ratios: " + ", ".join("%s %.2f" % (n, r) for r, n in
                                             sorted(ratios, reverse=True)[:10]) + ".",
        "Worst 10 RSS ratios: " + ", ".join("%s %.2f" % (n, r) for r, n in
                                            sorted(rss_ratios, reverse=True)[:10]) + ".",
    ]
    fail_lines = ["| model | where | message |", "|---|---|---|"] + [
        "| %s | %s | %s |" % (n, w, (m or "").replace("|", "\\|")[:400]) for n, w, m in failures]
    if exporter_notes:
        summary.append("pass (as ORT): cge matches ONNX Runtime but both differ from PyTorch "
                       "(the exported graph approximates the module): " + ", ".join(
                           "%s (%s)" % (n, w) for n, w in exporter_notes) + ".")
    text = ("# cge model zoo results\n\n" + "\n\n".join(summary) + "\n\n" + "\n".join(lines) +
            "\n\n## Failures\n\n" + ("\n".join(fail_lines) if failures else "none") + "\n")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    if quiet:
        return
    print("\n".join(summary))
    for n, w, m in failures:
        print("FAIL %s [%s]: %s" % (n, w, m))
    print("table: %s" % path)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        return _torch_worker(sys.argv[4:], sys.argv[2], sys.argv[3] == "1")
    if len(sys.argv) > 1 and sys.argv[1] == "--cge-child":
        return _cge_child(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tier", default=os.environ.get("ZOO_TIER", "default"),
                    choices=("default", "large", "all"))
    ap.add_argument("--filter", default=os.environ.get("ZOO_FILTER", ""))
    ap.add_argument("--cache", default=os.environ.get("ZOO_CACHE", "/tmp/cge-zoo"))
    ap.add_argument("--report", default=os.environ.get("ZOO_REPORT",
                                                       os.path.join(ROOT, "build", "zoo",
                                                                    "report.md")))
    ap.add_argument("--json", default=None, help="also write the raw rows here")
    ap.add_argument("--no-torch", action="store_true", help="skip cge.torch.compile")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("ZOO_JOBS", "1")),
                    help="PyTorch processes (exports, cge.torch.compile) at a time; cge and "
                         "ORT are measured one model at a time")
    ap.add_argument("--overlap", action="store_true",
                    help="run the next chunk's PyTorch process while this chunk is measured "
                         "(faster; the timings then share the cores with it)")
    ap.add_argument("--no-torch-heavy", action="store_true",
                    help="skip cge.torch.compile on the heavy models (>= ~8 GFLOPs)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="no runs: the report of these --json files' rows (a later file's row "
                         "replaces an earlier one of the same model)")
    a = ap.parse_args()
    if a.merge:
        merged = {}
        for path in a.merge:
            with open(path) as f:
                for row in json.load(f):
                    merged[row["name"]] = row
        order = {s.name: i for i, s in enumerate(all_specs())}
        rows = sorted(merged.values(), key=lambda r: order.get(r["name"], len(order)))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
        report(rows, a.report, sum(r.get("seconds", 0) for r in rows))
        return 0
    specs = [s for s in all_specs() if (a.tier == "all" or s.tier == a.tier) and
             (not a.filter or re.search(a.filter, s.name))]
    if a.list:
        for s in specs:
            print("%-40s opset %d %s%s" % (s.name, s.opset, s.group, " dyn" if s.dynamic else ""))
        return 0
    # OpenMP's wait policy is left as a user has it: `import cge` gives libgomp
    # a short spin (docs/runtime.md). A forced passive policy cost cge a futex
    # wake-up per oneDNN call and per launch: 2-2.8x on the small CNNs on a
    # VM whose idle vCPUs halt, where ONNX Runtime (its own spinning pool)
    # paid nothing.
    env = dict(os.environ, CGE_NUM_THREADS=str(THREADS), OMP_NUM_THREADS=str(THREADS),
               PYTHONPATH=os.path.join(ROOT, "python"))
    env.setdefault("CGE_LIBRARY", os.path.join(ROOT, "build", "libcge.so"))
    t0 = time.perf_counter()
    os.makedirs(a.cache, exist_ok=True)
    rows = []
    # In chunks: PyTorch's steps (exports, cge.torch.compile) in one process
    # per chunk, then cge and ORT per model, one at a time; the report is
    # rewritten after each chunk, so a long run shows results as it goes.
    # A chunk's PyTorch process runs only while nothing is measured, unless
    # --overlap (ZOO_JOBS chunks at a time, beside the measurements: on a
    # 2-core machine an export beside a measured model moved its time by up
    # to 14x).
    import concurrent.futures
    import queue
    chunks = [specs[c0:c0 + CHUNK] for c0 in range(0, len(specs), CHUNK)]
    done = queue.Queue()
    pool = concurrent.futures.ThreadPoolExecutor(max(1, a.jobs))

    def torch_chunk(chunk):
        with_torch = not a.no_torch
        names = [s.name for s in chunk]
        if with_torch and a.no_torch_heavy:
            heavy = [n for n in names if n.split("@")[0] in HEAVY]
            res = torch_phase([n for n in names if n not in heavy], a.cache, env, True)
            res.update(torch_phase(heavy, a.cache, env, False) if heavy else {})
        else:
            res = torch_phase(names, a.cache, env, with_torch)
        done.put((chunk, res))
    if a.overlap:
        for chunk in chunks:
            pool.submit(torch_chunk, chunk)
    for k in range(len(chunks)):
        if not a.overlap:
            torch_chunk(chunks[k])
        chunk, tres = done.get()
        for s in chunk:
            t1 = time.perf_counter()
            row = measure(s, a.cache, env, tres.get(s.name, {}))
            row["seconds"] = time.perf_counter() - t1 + sum(
                v.get("seconds", 0) for v in tres.get(s.name, {}).values() if isinstance(v, dict))
            rows.append(row)
            c = row.get("cge") or {}
            print("[%d/%d] %-40s cge %s  torch %s  (%.0f s)" % (
                len(rows), len(specs), s.name,
                "export fails" if "export_error" in row else _status(c),
                _status(row.get("torch")) or "-", time.perf_counter() - t1), flush=True)
        order = {s.name: i for i, s in enumerate(specs)}
        rows.sort(key=lambda r: order[r["name"]])
        report(rows, a.report, time.perf_counter() - t0, quiet=k + 1 < len(chunks))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
    pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
