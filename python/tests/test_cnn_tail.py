# The CNN long tail (issue 14): small PyTorch modules exported to ONNX and run
# through cge.InferenceSession at level 1 (nothing fused), 2 and 3
# (channels-last), each against PyTorch: squeeze-excitation's 1x1
# convolutions of one position (their own matrix-vector kernel), an
# avg_pool2d(count_include_pad=True) after convolutions (a zero Pad folded
# into the channels-last pool), ShuffleNet's channel shuffle and chunk, and a
# segmentation head's final Resize (written plain by the channels-last
# kernel).
import numpy as np
import pytest

import cge

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional


def _check(module, x, tmp_path, name, rtol=1e-4, atol=1e-5, opset=13):
    torch.manual_seed(0)
    path = str(tmp_path / (name + ".onnx"))
    module.eval()
    torch.onnx.export(module, (x,), path, opset_version=opset, input_names=["input"],
                      output_names=["output"], do_constant_folding=True)
    with torch.no_grad():
        ref = module(x).numpy()
    scale = max(float(np.abs(ref).max()), 1e-6)
    for lv in (1, 2, 3):
        y = cge.InferenceSession(path, opt_level=lv).run(None, {"input": x.numpy()})[0]
        assert y.shape == ref.shape, (name, lv)
        err = float(np.abs(y - ref).max())
        assert err <= atol * scale + rtol * scale, (name, lv, err, scale)


class SE(nn.Module):
    def __init__(self, c, squeeze, act, bias):
        super().__init__()
        self.stem = nn.Conv2d(4, c, 3, padding=1)
        self.fc1 = nn.Conv2d(c, squeeze, 1, bias=bias)
        self.fc2 = nn.Conv2d(squeeze, c, 1, bias=bias)
        self.act = act
        self.out = nn.Conv2d(c, 3, 1)

    def forward(self, x):
        a = self.stem(x)
        s = F.adaptive_avg_pool2d(a, 1)
        s = self.act(self.fc1(s))
        s = torch.sigmoid(self.fc2(s))
        return self.out(a * s)


@pytest.mark.parametrize("c,squeeze,n,act,bias", [
    (1, 1, 1, nn.ReLU(), True),          # 1x1, one channel
    (7, 5, 3, nn.SiLU(), True),          # primes, batch 3 (efficientnet's SiLU)
    (17, 4, 1, nn.Hardswish(), False),   # a ragged lane block, no bias
    (96, 4, 2, nn.ReLU(), True),         # efficientnet / mobilenet_v3 sizes
    (1152, 48, 1, nn.SiLU(), True),      # efficientnet_b0's widest
])
def test_squeeze_excitation_gemv(tmp_path, c, squeeze, n, act, bias):
    x = torch.randn(n, 4, 5, 6)
    _check(SE(c, squeeze, act, bias), x, tmp_path, "se_%d_%d" % (c, n))


def test_gemv_of_a_graph_input(tmp_path):
    """A 1x1 convolution of a [N, C, 1, 1] graph input (plain at every level)."""
    m = nn.Sequential(nn.Conv2d(33, 10, 1), nn.Sigmoid())
    _check(m, torch.randn(2, 33, 1, 1), tmp_path, "fc_input")


class InceptionPool(nn.Module):
    def __init__(self, stride, pad):
        super().__init__()
        self.a = nn.Conv2d(3, 12, 3, padding=1)
        self.stride, self.pad = stride, pad
        self.b = nn.Conv2d(12, 5, 1)

    def forward(self, x):
        y = F.avg_pool2d(self.a(x), kernel_size=3, stride=self.stride, padding=self.pad,
                         count_include_pad=True)
        return self.b(y)


@pytest.mark.parametrize("hw,stride,pad", [((17, 17), 1, 1), ((7, 11), 2, 1), ((1, 1), 1, 1),
                                           ((6, 5), 1, 0)])
def test_padded_average_pool(tmp_path, hw, stride, pad):
    x = torch.randn(1, 3, *hw)
    # opset 13: avg_pool2d(count_include_pad=True) exports as Pad + AveragePool
    _check(InceptionPool(stride, pad), x, tmp_path, "avgpool_%d_%d_%d" % (hw[0], stride, pad))


class Shuffle(nn.Module):
    def __init__(self, c, groups):
        super().__init__()
        self.a = nn.Conv2d(3, c, 3, padding=1)
        self.groups = groups
        self.b = nn.Conv2d(c // 2, 4, 1)
        self.c = nn.Conv2d(c - c // 2, 4, 1)

    def forward(self, x):
        y = self.a(x)
        n, c, h, w = y.shape
        y = y.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(n, c, h, w)
        p, q = y.chunk(2, dim=1)
        return torch.cat([self.b(p), self.c(q)], 1)


@pytest.mark.parametrize("c,groups,hw", [(16, 2, (9, 9)), (12, 3, (5, 7)), (6, 2, (1, 1))])
def test_channel_shuffle_and_chunk(tmp_path, c, groups, hw):
    _check(Shuffle(c, groups), torch.randn(2, 3, *hw), tmp_path, "shuffle_%d_%d" % (c, groups))


class Head(nn.Module):
    def __init__(self, c, mode):
        super().__init__()
        self.a = nn.Conv2d(3, c, 3, padding=1)
        self.mode = mode

    def forward(self, x):
        y = self.a(x)
        kw = {} if self.mode == "nearest" else {"align_corners": False}
        return F.interpolate(y, size=(x.shape[2] * 8, x.shape[3] * 4 + 3), mode=self.mode, **kw)


@pytest.mark.parametrize("c,mode,hw", [(21, "bilinear", (7, 7)), (5, "nearest", (3, 5)),
                                       (70, "bilinear", (2, 3)), (2, "bicubic", (4, 4))])
def test_segmentation_head_resize(tmp_path, c, mode, hw):
    _check(Head(c, mode), torch.randn(1, 3, *hw), tmp_path, "head_%d_%s" % (c, mode))
