"""make bench-long-tail: the models where cge's kernels were not tuned (issue 14's
long tail) next to ONNX Runtime, batch 1, 2 threads, median latency, one run
side by side, with the ratio cge/ORT. Not a test.

Models (random weights, fixed seeds, torch.onnx.export at opset 13, written
once under BENCH_MODEL_DIR, default $TMPDIR/cge-bench-models):
  unet            a small U-Net, 3x128x128, ConvTranspose 2x2 stride 2 up-sampling
  wav2vec         a wav2vec2-like Conv1d feature encoder over 1 s of 16 kHz audio:
                  GroupNorm (exported as InstanceNormalization) + exact GELU
  convnext_tiny, lraspp_mobilenet_v3_large, efficientnet_b0, resnet18,
  mobilenet_v3_small   torchvision 0.14 (weights=None), 3x224x224

Usage: bench/long_tail.py [MODEL ...] [--make-only]
`--make-only` writes the .onnx/.npz files and prints their paths (for
`make bench-ops MODEL=...`). BENCH_JSON=FILE keeps the numbers.
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models as bench_models  # noqa: E402  (cge_latency, ort_latency)

OPSET = 13
MODELS = ("unet", "wav2vec", "convnext_tiny", "lraspp_mobilenet_v3_large", "efficientnet_b0",
          "resnet18", "mobilenet_v3_small")


def _unet():
    import torch
    from torch import nn

    def block(ci, co):
        return nn.Sequential(nn.Conv2d(ci, co, 3, padding=1), nn.BatchNorm2d(co), nn.ReLU(),
                             nn.Conv2d(co, co, 3, padding=1), nn.BatchNorm2d(co), nn.ReLU())

    class UNet(nn.Module):
        def __init__(self, ch=(16, 32, 64, 128)):
            super().__init__()
            self.down = nn.ModuleList()
            ci = 3
            for c in ch:
                self.down.append(block(ci, c))
                ci = c
            self.pool = nn.MaxPool2d(2)
            self.up = nn.ModuleList()
            self.dec = nn.ModuleList()
            for c in reversed(ch[:-1]):
                self.up.append(nn.ConvTranspose2d(ci, c, 2, stride=2))
                self.dec.append(block(2 * c, c))
                ci = c
            self.head = nn.Conv2d(ci, 2, 1)

        def forward(self, x):
            skips = []
            for i, d in enumerate(self.down):
                x = d(x)
                if i + 1 < len(self.down):
                    skips.append(x)
                    x = self.pool(x)
            for up, dec in zip(self.up, self.dec):
                x = dec(torch.cat([up(x), skips.pop()], 1))
            return self.head(x)

    return UNet(), torch.randn(1, 3, 128, 128)


def _wav2vec():
    import torch
    from torch import nn

    class Encoder(nn.Module):
        """wav2vec2's feature extractor ("group" norm mode): conv 10/5, then
        conv 3/2 x4 and 2/2 x2, GroupNorm(C, C) after the first, exact GELU,
        then LayerNorm + a projection as its feature projection does."""

        def __init__(self, c=256, d=384):
            super().__init__()
            layers = [nn.Conv1d(1, c, 10, stride=5, bias=False), nn.GroupNorm(c, c), nn.GELU()]
            for k in (3, 3, 3, 3, 2, 2):
                layers += [nn.Conv1d(c, c, k, stride=2, bias=False), nn.GELU()]
            self.conv = nn.Sequential(*layers)
            self.norm = nn.LayerNorm(c)
            self.proj = nn.Linear(c, d)

        def forward(self, x):
            return self.proj(self.norm(self.conv(x).transpose(1, 2)))

    return Encoder(), torch.randn(1, 1, 16000)


def build(name):
    """(torch module in eval mode, example input) for a model name, seeded."""
    import torch
    torch.manual_seed(0)
    if name == "unet":
        m, x = _unet()
    elif name == "wav2vec":
        m, x = _wav2vec()
    elif name == "lraspp_mobilenet_v3_large":
        import torchvision
        m = torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None,
                                                                      weights_backbone=None)
        x = torch.randn(1, 3, 224, 224)
    elif name in MODELS:
        import torchvision
        m = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(1, 3, 224, 224)
    else:
        raise ValueError("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))
    return m.eval(), x


def make(name, out_dir):
    """Export `name` into out_dir (once); returns (onnx path, npz path)."""
    import numpy as np
    import torch
    onnx_path = os.path.join(out_dir, name + ".onnx")
    npz_path = os.path.join(out_dir, name + ".npz")
    if os.path.exists(onnx_path) and os.path.exists(npz_path):
        return onnx_path, npz_path
    os.makedirs(out_dir, exist_ok=True)
    model, x = build(name)
    if name.startswith("lraspp"):  # a dict of outputs: export its "out" alone
        inner = model

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = inner

            def forward(self, t):
                return self.m(t)["out"]

        model = Wrap().eval()
    tmp = onnx_path + ".tmp"
    torch.onnx.export(model, (x,), tmp, opset_version=OPSET, input_names=["input"],
                      output_names=["output"], do_constant_folding=True)
    with torch.no_grad():
        y = model(x)
    np.savez(npz_path + ".tmp.npz", input=x.numpy(), output=y.numpy())
    os.replace(npz_path + ".tmp.npz", npz_path)
    os.replace(tmp, onnx_path)
    return onnx_path, npz_path


def main(argv):
    make_only = "--make-only" in argv
    names = [a for a in argv if not a.startswith("--")] or list(MODELS)
    out_dir = os.environ.get("BENCH_MODEL_DIR") or os.path.join(tempfile.gettempdir(),
                                                                "cge-bench-models")
    if make_only:
        for n in names:
            print(make(n, out_dir)[0])
        return 0
    print(f"long-tail models: batch 1, {bench_models.THREADS} threads, median of "
          f"{bench_models.RUNS} runs after {bench_models.WARMUP} warm-up runs\n")
    print(f"{'model':28} {'cge ms':>9} {'ORT ms':>9} {'cge/ORT':>8}")
    rows = []
    for n in names:
        model, npz = make(n, out_dir)
        c = bench_models.cge_latency(model, npz, os.environ.get("CGE_RUN_MODE", "plan"))
        o = bench_models.ort_latency(model)
        om = o["median_ms"] if o else None
        ratio = f"{c['median_ms'] / om:8.2f}" if om else f"{'-':>8}"
        print(f"{n:28} {c['median_ms']:9.2f} {(om or float('nan')):9.2f} {ratio}", flush=True)
        rows.append({"model": n, "cge": c, "ort": o})
    if os.environ.get("BENCH_JSON"):
        with open(os.environ["BENCH_JSON"], "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
