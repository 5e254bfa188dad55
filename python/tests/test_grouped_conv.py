# Grouped convolutions (1 < groups < channels) in whole blocks as the zoo's
# ResNeXt and RegNet models have them, exported from PyTorch and run through
# cge.InferenceSession at level 1 (nothing fused), 2 (fused, plain layouts)
# and 3 (channels-last: the grouped kernel of src/ops/conv_grouped.c where it
# is preferred), and at level 3 again with $CGE_GROUPED_CONV=all (every
# grouped node on that kernel) and =0 (every one on oneDNN's primitive).
# Every run must match PyTorch within float32 rounding.
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from test_long_tail_fusions import _export, _run  # noqa: E402  (export at opset 13; a session at a level)


class _Bottleneck(nn.Module):
    """1x1 -> grouped kxk (stride) -> 1x1 with BatchNorm, ReLU and a residual,
    optionally squeeze-excitation (RegNetY) or SiLU after the grouped conv."""

    def __init__(self, cin, width, groups, stride, k=3, dilation=1, se=False, act="relu"):
        super().__init__()
        pad = dilation * (k // 2)
        self.a = nn.Sequential(nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width),
                               nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(width, width, k, stride=stride, padding=pad,
                                         dilation=dilation, groups=groups, bias=False),
                               nn.BatchNorm2d(width), nn.SiLU() if act == "silu" else nn.ReLU())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(width, 8, 1), nn.ReLU(),
                                nn.Conv2d(8, width, 1), nn.Sigmoid()) if se else None
        self.c = nn.Sequential(nn.Conv2d(width, cin, 1, bias=False), nn.BatchNorm2d(cin))
        self.down = nn.Sequential(nn.Conv2d(cin, cin, 1, stride=stride, bias=False),
                                  nn.BatchNorm2d(cin)) if stride != 1 else None

    def forward(self, x):
        y = self.b(self.a(x))
        if self.se is not None:
            y = y * self.se(y)
        y = self.c(y)
        return torch.relu(y + (self.down(x) if self.down is not None else x))


CASES = [
    # (name, cin, width, groups, stride, size, batch, extra)
    ("resnext_gw4", 64, 128, 32, 1, (28, 28), 1, {}),
    ("resnext_gw8_stride2", 64, 256, 32, 2, (28, 28), 1, {}),
    ("regnet_gw16_se", 32, 160, 10, 1, (14, 14), 1, {"se": True}),
    ("regnet_gw24_stride2", 48, 72, 3, 2, (15, 17), 3, {}),
    ("gw48", 48, 96, 2, 1, (7, 7), 1, {}),
    ("gw17_prime_batch3", 16, 34, 2, 1, (13, 11), 3, {"act": "silu"}),
    ("gw6_dilation2", 24, 36, 6, 1, (9, 9), 1, {"dilation": 2}),
    ("gw5_k5_stride2", 20, 40, 8, 2, (11, 13), 1, {"k": 5}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_grouped_block(case, tmp_path, monkeypatch):
    name, cin, width, groups, stride, size, batch, extra = case
    torch.manual_seed(3)
    m = _Bottleneck(cin, width, groups, stride, **extra)
    for mod in m.modules():  # BatchNorm statistics that are not the identity
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 1.5)
    x = torch.randn((batch, cin) + size)
    path = str(tmp_path / (name + ".onnx"))
    ref = _export(m, x, path)
    xn = x.numpy()
    scale = max(float(np.abs(ref).max()), 1e-6)
    outs = {lv: _run(path, xn, lv) for lv in (1, 2, 3)}
    monkeypatch.setenv("CGE_GROUPED_CONV", "all")
    outs["3/kernel"] = _run(path, xn, 3)
    monkeypatch.setenv("CGE_GROUPED_CONV", "0")
    outs["3/oneDNN"] = _run(path, xn, 3)
    for key, y in outs.items():
        assert y.shape == ref.shape, (key, y.shape, ref.shape)
        np.testing.assert_allclose(y / scale, ref / scale, rtol=1e-4, atol=2e-5,
                                   err_msg="level %s vs PyTorch" % key)
