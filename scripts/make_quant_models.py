#!/usr/bin/env python3
# Quantized (QDQ) ONNX models for the int8 benchmark and tests: torchvision
# resnet18, mobilenet_v2, resnet50, a small transformer encoder and a tiny CNN,
# random weights from a fixed seed, PyTorch FX static quantization (fbgemm),
# exported by torch.onnx (QuantizeLinear/DequantizeLinear around Conv, Gemm, Add).
"""Usage: make_quant_models.py [--out DIR] [--float] [NAME ...]

NAME is one of tiny_cnn resnet18 mobilenet_v2 resnet50 encoder (default: all).
Writes DIR/NAME_int8.onnx (and DIR/NAME_fp32.onnx with --float) plus
DIR/NAME.npz holding one input ("input"); files already there are kept.
DIR defaults to $CGE_QUANT_MODELS or /tmp/cge-quant-models."""
import os
import sys
import warnings

OPSET = 13
SEED = 20240616
NAMES = ["tiny_cnn", "resnet18", "mobilenet_v2", "resnet50", "encoder"]


def default_dir():
    return os.environ.get("CGE_QUANT_MODELS", "/tmp/cge-quant-models")


def _torch():
    import torch
    torch.manual_seed(SEED)
    return torch


def build(name):
    """(float model in eval mode, example input) for `name`."""
    torch = _torch()
    from torch import nn
    if name == "tiny_cnn":
        class Tiny(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = nn.Conv2d(3, 8, 3, padding=1)
                self.r1 = nn.ReLU()
                self.c2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
                self.r2 = nn.ReLU()
                self.c3 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
                self.pool = nn.MaxPool2d(2)
                self.gap = nn.AdaptiveAvgPool2d(1)
                self.fc = nn.Linear(16, 5)

            def forward(self, x):
                y = self.r1(self.c1(x))
                y = self.r2(self.c2(y)) + y
                y = self.pool(self.c3(y))
                return self.fc(torch.flatten(self.gap(y), 1))
        return Tiny().eval(), torch.randn(1, 3, 17, 17)
    if name == "encoder":
        # Written out (nn.TransformerEncoder does not trace in FX): the Linear
        # layers are quantized, attention's matmuls, softmax and LayerNorm stay
        # float (see quantize()).
        class Layer(nn.Module):
            def __init__(self, d=256, heads=4, ff=1024, t=64):
                super().__init__()
                self.t, self.d, self.h, self.dh = t, d, heads, d // heads
                self.qkv = nn.Linear(d, 3 * d)
                self.proj = nn.Linear(d, d)
                self.ff1 = nn.Linear(d, ff)
                self.act = nn.GELU()
                self.ff2 = nn.Linear(ff, d)
                self.n1 = nn.LayerNorm(d)
                self.n2 = nn.LayerNorm(d)

            def forward(self, x):
                b, t, d = 1, self.t, self.d  # static: FX cannot unpack a traced shape
                qkv = self.qkv(x).reshape(b, t, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
                att = torch.softmax(torch.matmul(qkv[0], qkv[1].transpose(-1, -2)) *
                                    (self.dh ** -0.5), dim=-1)
                y = torch.matmul(att, qkv[2]).permute(0, 2, 1, 3).reshape(b, t, d)
                x = self.n1(x + self.proj(y))
                return self.n2(x + self.ff2(self.act(self.ff1(x))))
        return nn.Sequential(Layer(), Layer()).eval(), torch.randn(1, 64, 256)
    import torchvision
    ctor = {"resnet18": torchvision.models.resnet18,
            "mobilenet_v2": torchvision.models.mobilenet_v2,
            "resnet50": torchvision.models.resnet50}[name]
    model = ctor(weights=None).eval()
    # Batch norm statistics like a trained model's, so activations stay in range.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.3, 0.8)
            m.bias.data.uniform_(-0.1, 0.1)
    return model, torch.randn(1, 3, 224, 224)


def quantize(model, x):
    """FX static quantization with the fbgemm qconfig, calibrated on a few batches."""
    torch = _torch()
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    from torch import nn
    qmap = get_default_qconfig_mapping("fbgemm")
    # Only Linear / Conv layers and the ops around them: LayerNorm, softmax
    # and the attention matmuls stay float, as deployments of encoders do.
    qmap.set_object_type(nn.LayerNorm, None)
    qmap.set_object_type(torch.matmul, None)
    qmap.set_object_type(torch.softmax, None)
    import operator
    qmap.set_object_type(operator.mul, None)
    qmap.set_object_type(nn.GELU, None)
    for method in ("reshape", "permute", "transpose"):  # torch.onnx exports no quantized form
        qmap.set_object_type(method, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_fx(model, qmap, (x,))
        with torch.no_grad():
            for _ in range(4):
                prepared(torch.randn_like(x))
            prepared(x)
        return convert_fx(prepared)


def export(model, x, path):
    torch = _torch()
    tmp = path + ".tmp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), tmp, opset_version=OPSET, input_names=["input"],
                          output_names=["output"], do_constant_folding=True)
    os.replace(tmp, path)


def make(name, out, with_float=False):
    """Write name's files into `out` unless there; returns the int8 model's path."""
    import numpy as np
    os.makedirs(out, exist_ok=True)
    q_path = os.path.join(out, name + "_int8.onnx")
    f_path = os.path.join(out, name + "_fp32.onnx")
    npz = os.path.join(out, name + ".npz")
    if os.path.isfile(q_path) and os.path.isfile(npz) and (not with_float or os.path.isfile(f_path)):
        return q_path
    torch = _torch()
    torch.set_num_threads(2)
    model, x = build(name)
    if with_float and not os.path.isfile(f_path):
        export(model, x, f_path)
    if not os.path.isfile(q_path):
        export(quantize(model, x), x, q_path)
    np.savez(npz, input=x.numpy())
    return q_path


def main(argv):
    out, with_float, names = default_dir(), False, []
    i = 1
    while i < len(argv):
        if argv[i] == "--out":
            out = argv[i + 1]
            i += 1
        elif argv[i] == "--float":
            with_float = True
        elif argv[i] in NAMES:
            names.append(argv[i])
        else:
            print(__doc__)
            return 2
        i += 1
    for n in names or NAMES:
        print(make(n, out, with_float))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
