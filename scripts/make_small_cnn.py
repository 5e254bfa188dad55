#!/usr/bin/env python3
# Generates the small CNN that `make run` compiles and runs (models/small_cnn.onnx,
# committed, so running needs no PyTorch): three conv blocks with batch norm,
# max pooling, global average pooling and a linear classifier over a 3x64x64
# image, random weights from a fixed seed, exported by torch.onnx at opset 13.
"""Usage: make_small_cnn.py [OUT.onnx]   (default: models/small_cnn.onnx)"""
import os
import sys

OPSET = 13


def build():
    import torch
    from torch import nn
    torch.manual_seed(20240601)

    def block(cin, cout, stride):
        return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU()]

    model = nn.Sequential(*block(3, 16, 1), nn.MaxPool2d(2), *block(16, 32, 1),
                          *block(32, 64, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(64, 10), nn.Softmax(dim=1))
    # Batch norm with non-trivial running statistics, as a trained model has.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)
    return model.eval(), torch.randn(1, 3, 64, 64)


def main(argv):
    import torch
    out = argv[1] if len(argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "models", "small_cnn.onnx")
    model, x = build()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    torch.onnx.export(model, (x,), tmp, opset_version=OPSET, input_names=["image"],
                      output_names=["probabilities"], do_constant_folding=True)
    os.replace(tmp, out)
    print("%s (%d bytes)" % (out, os.path.getsize(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
