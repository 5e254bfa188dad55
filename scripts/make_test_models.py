#!/usr/bin/env python3
# Generates real-model ONNX files for cge's tests: resnet18, mobilenet_v2 and a
# TransformerEncoder (4 layers, d_model 256, 4 heads, ff 1024, batch_first),
# random weights with fixed seeds, exported by torch.onnx at opset 13, each
# with a reference input and PyTorch's output (<name>.npz beside <name>.onnx).
"""Usage: make_test_models.py OUT_DIR [resnet18 mobilenet_v2 transformer_encoder]"""
import os
import sys

import numpy as np

MODELS = ("resnet18", "mobilenet_v2", "transformer_encoder")
# Made by default too, but not in the model sweeps of test_torch and bench:
# the same encoder with batch 4 on a dynamic batch axis (torch.onnx computes
# its reshape targets from Shape), which the pipeline micro-batch tests
# split (docs/distributed.md).
EXTRA = ("transformer_encoder_batch4",)
OPSET = 13


def build(name):
    """(torch module in eval mode, example input) for a model name, seeded."""
    import torch
    torch.manual_seed(0)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(weights=None).eval(), torch.randn(1, 3, 224, 224)
    if name == "mobilenet_v2":
        import torchvision
        return torchvision.models.mobilenet_v2(weights=None).eval(), torch.randn(1, 3, 224, 224)
    if name == "transformer_encoder":
        layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                                 batch_first=True)
        model = torch.nn.TransformerEncoder(layer, num_layers=4).eval()
        return model, torch.randn(1, 128, 256)
    if name == "transformer_encoder_batch4":
        model, _ = build("transformer_encoder")
        return model, torch.randn(4, 128, 256)
    raise ValueError("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))


def make(name, out_dir):
    """Export `name` into out_dir (once); returns (onnx path, npz path)."""
    import torch
    onnx_path = os.path.join(out_dir, name + ".onnx")
    npz_path = os.path.join(out_dir, name + ".npz")
    if os.path.exists(onnx_path) and os.path.exists(npz_path):
        return onnx_path, npz_path
    os.makedirs(out_dir, exist_ok=True)
    model, x = build(name)
    # Exported with autograd enabled: under no_grad, PyTorch's fused inference
    # path for TransformerEncoder replaces the ops the exporter knows.
    tmp = onnx_path + ".tmp"
    torch.onnx.export(model, (x,), tmp, opset_version=OPSET, input_names=["input"],
                      output_names=["output"], do_constant_folding=True,
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}
                      if name in EXTRA else None)
    with torch.no_grad():
        y = model(x)
    np.savez(npz_path + ".tmp.npz", input=x.numpy(), output=y.numpy())
    os.replace(npz_path + ".tmp.npz", npz_path)
    os.replace(tmp, onnx_path)
    return onnx_path, npz_path


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    for name in argv[2:] or MODELS + EXTRA:
        onnx_path, _ = make(name, argv[1])
        print("%s (%d bytes)" % (onnx_path, os.path.getsize(onnx_path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
