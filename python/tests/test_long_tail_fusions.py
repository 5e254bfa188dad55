# The long-tail kernels and fusions (issue 14): small PyTorch modules exported
# to ONNX and run through cge.InferenceSession at level 1 (nothing fused), 2
# (fused, plain layouts) and 3 (channels-last convolutions): ConvTranspose on
# oneDNN's deconvolution (strides, output_padding, dilations, groups, 1-D to
# 3-D), a Conv taking SiLU / HardSwish / HardSigmoid / exact GELU / Sigmoid /
# Tanh as its epilogue, the vectorised erf, and GroupNorm between channels-last
# convolutions. Each level must match PyTorch,
# and the fused levels the unfused one, within float32 rounding.
import os

import numpy as np
import pytest

import cge

torch = pytest.importorskip("torch")
nn = torch.nn


def _export(module, x, path):
    module.eval()
    torch.onnx.export(module, (x,), path, opset_version=13, input_names=["input"],
                      output_names=["output"], do_constant_folding=True)
    with torch.no_grad():
        return module(x).numpy()


def _run(path, x, level):
    s = cge.InferenceSession(path, opt_level=level)
    return s.run(None, {"input": x})[0]


def _check(module, x, tmp_path, name, rtol=1e-4, atol=1e-5):
    torch.manual_seed(0)
    path = str(tmp_path / (name + ".onnx"))
    ref = _export(module, x, path)
    xn = x.numpy()
    outs = {lv: _run(path, xn, lv) for lv in (1, 2, 3)}
    scale = max(float(np.abs(ref).max()), 1e-6)
    for lv, y in outs.items():
        assert y.shape == ref.shape, (lv, y.shape, ref.shape)
        np.testing.assert_allclose(y / scale, ref / scale, rtol=rtol, atol=atol,
                                   err_msg="level %d vs PyTorch" % lv)
    for lv in (2, 3):
        np.testing.assert_allclose(outs[lv] / scale, outs[1] / scale, rtol=rtol, atol=atol,
                                   err_msg="level %d vs level 1" % lv)
    return outs


CONVT_CASES = [
    # (name, dims, in_ch, out_ch, kernel, stride, padding, output_padding, dilation, groups, size)
    ("unet_2x2_s2", 2, 8, 4, 2, 2, 0, 0, 1, 1, (7, 5)),
    ("s2_outpad1", 2, 6, 5, 3, 2, 1, 1, 1, 1, (6, 7)),
    ("s3_dil2_outpad", 2, 4, 6, 3, (2, 3), (1, 0), (1, 2), (2, 1), 2, (5, 6)),
    ("depthwise", 2, 4, 4, 3, 2, 1, 1, 1, 4, (6, 6)),
    ("conv1d", 1, 3, 5, 4, 3, 1, 0, 1, 1, (9,)),
    ("conv3d", 3, 2, 3, (2, 3, 2), (2, 1, 2), 0, 0, 1, 1, (3, 4, 3)),
    ("one_pixel", 2, 5, 3, 3, 1, 0, 0, 1, 1, (1, 1)),
    ("prime", 2, 7, 11, 5, 3, 2, 2, 1, 1, (13, 11)),
]


@pytest.mark.parametrize("case", CONVT_CASES, ids=[c[0] for c in CONVT_CASES])
@pytest.mark.parametrize("act", ["none", "relu"])
def test_conv_transpose(case, act, tmp_path):
    name, dims, ci, co, k, s, p, op, d, g, size = case
    torch.manual_seed(1)
    ct = [nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d][dims - 1]
    layers = [ct(ci, co, k, stride=s, padding=p, output_padding=op, dilation=d, groups=g)]
    if act == "relu":
        layers.append(nn.ReLU())
    m = nn.Sequential(*layers)
    x = torch.randn((2, ci) + size)
    _check(m, x, tmp_path, name + "_" + act)


class _Gated(nn.Module):
    """conv -> (bn) -> activation, with a second conv after, as the models
    have it (so that channels-last values pass from one conv to the next)."""

    def __init__(self, act, groups=1):
        super().__init__()
        self.c1 = nn.Conv2d(6, 12, 3, padding=1, groups=groups)
        self.bn = nn.BatchNorm2d(12)
        self.act = act
        self.c2 = nn.Conv2d(12, 5, 1)

    def forward(self, x):
        return self.c2(self.act(self.bn(self.c1(x))))


ACTS = {
    "silu": nn.SiLU(), "hardswish": nn.Hardswish(), "hardsigmoid": nn.Hardsigmoid(),
    "gelu": nn.GELU(), "sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(), "relu6": nn.ReLU6(),
    "leaky": nn.LeakyReLU(0.1),
}


@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("act", sorted(ACTS))
def test_conv_activation_epilogue(act, groups, tmp_path):
    torch.manual_seed(2)
    m = _Gated(ACTS[act], groups)
    with torch.no_grad():
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    x = torch.randn(1, 6, 9, 11) * 3
    _check(m, x, tmp_path, "%s_g%d" % (act, groups))


def test_conv_activation_fused(tmp_path):
    """The gated pairs really fold into the convolution at level 2."""
    torch.manual_seed(3)
    path = str(tmp_path / "silu.onnx")
    _export(_Gated(nn.SiLU()), torch.randn(1, 6, 8, 8), path)
    import subprocess
    cli = os.path.join(os.path.dirname(os.environ.get("CGE_LIBRARY", "")), "cge")
    if not os.path.isfile(cli):
        pytest.skip("cge CLI not beside CGE_LIBRARY")
    out = subprocess.run([cli, "profile", path, "--iterations", "1", "--opt-level", "2",
                          "-o", str(tmp_path / "t.json")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Sigmoid" not in out.stdout and "ElementwiseChain" not in out.stdout, out.stdout


def test_gelu_encoder_conv1d(tmp_path):
    """wav2vec-like: Conv1d + GroupNorm (InstanceNormalization) + exact GELU."""
    torch.manual_seed(4)
    m = nn.Sequential(nn.Conv1d(1, 16, 10, stride=5, bias=False), nn.GroupNorm(16, 16), nn.GELU(),
                      nn.Conv1d(16, 16, 3, stride=2, bias=False), nn.GELU())
    _check(m, torch.randn(1, 1, 400), tmp_path, "wav2vec_small")


def test_conv1d_rows_dynamic_length(tmp_path):
    """Channels-last Conv1d (one GEMM over the windows, src/ops/conv_rows.c):
    pads at both ends, a stride longer than the window, a residual Add and
    GELU folded in; one session, a symbolic length served at several sizes
    (one shorter than the widest window) in an order that shrinks and grows,
    each equal to PyTorch's."""
    torch.manual_seed(6)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv1d(3, 24, 5, stride=1, padding=2)
            self.b = nn.Conv1d(24, 24, 3, stride=1, padding=1)
            self.c = nn.Conv1d(24, 40, 2, stride=3, padding=1)

        def forward(self, x):
            y = torch.relu(self.a(x))
            return self.c(nn.functional.gelu(self.b(y) + y))

    m = Net().eval()
    path = str(tmp_path / "conv1d_dyn.onnx")
    torch.onnx.export(m, (torch.randn(1, 3, 50),), path, opset_version=13,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {2: "length"}, "output": {2: "olength"}})
    s = cge.InferenceSession(path)
    for length in (50, 17, 3, 129, 17, 64):
        x = torch.randn(1, 3, length)
        with torch.no_grad():
            ref = m(x).numpy()
        y = s.run(None, {"input": x.numpy()})[0]
        assert y.shape == ref.shape
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5, err_msg="length %d" % length)


GROUP_NORM_CASES = [
    # (name, dims, channels, groups, size): wav2vec's first block, odd sizes
    ("wav2vec_block", 1, 64, 8, (3199,)),
    ("one_group", 1, 12, 1, (13,)),
    ("group_per_channel", 1, 6, 6, (17,)),
    # wav2vec's first GroupNorm (one group per channel), in column blocks of
    # 32 channels and one of 8, over two chunks of positions and a tail
    ("wav2vec_per_channel", 1, 72, 72, (533,)),
    ("one_position", 1, 8, 2, (1,)),
    ("image", 2, 12, 3, (7, 5)),
]


@pytest.mark.parametrize("case", GROUP_NORM_CASES, ids=[c[0] for c in GROUP_NORM_CASES])
def test_group_norm_channels_last(case, tmp_path):
    """Conv -> GroupNorm (random affine) -> GELU -> Conv: at level 3 the
    GroupNorm runs channels-last with its affine and GELU (ChannelsLastGroupNorm);
    every level matches PyTorch, and a model that ends in the GroupNorm matches
    the numpy formula."""
    name, dims, ch, groups, size = case
    torch.manual_seed(5)
    conv = nn.Conv1d if dims == 1 else nn.Conv2d
    gn = nn.GroupNorm(groups, ch)
    with torch.no_grad():
        gn.weight.uniform_(0.5, 1.5)
        gn.bias.uniform_(-0.3, 0.3)
    m = nn.Sequential(conv(3, ch, 1), gn, nn.GELU(), conv(ch, 4, 1))
    _check(m, torch.randn(1, 3, *size), tmp_path, name)
    head = nn.Sequential(conv(3, ch, 1), gn)
    x = torch.randn(2, 3, *size)
    path = str(tmp_path / (name + "_head.onnx"))
    _export(head, x, path)
    with torch.no_grad():
        c = head[0](x).numpy().astype(np.float64)
    g = c.reshape(2, groups, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + gn.eps)).reshape(c.shape)
    bshape = (1, ch) + (1,) * dims
    ref = ref * gn.weight.detach().numpy().reshape(bshape) + gn.bias.detach().numpy().reshape(bshape)
    y = _run(path, x.numpy(), 3)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_erf_accuracy(tmp_path):
    """Erf and exact GELU over their whole range against float64 (a few ulp)."""
    import math
    x = np.concatenate([np.linspace(-10, 10, 20001), [0.0, -0.0, 1e-30, -1e-20, 1e-8, 0.5,
                                                      -0.5, 9.39, 9.41, 30.0, -30.0]])
    x = x.astype(np.float32)

    class M(nn.Module):
        def forward(self, t):
            return torch.cat([torch.erf(t), nn.functional.gelu(t)])

    path = str(tmp_path / "erf.onnx")
    _export(M(), torch.from_numpy(x), path)
    # level 1 computes erf alone; level 2 makes the exported pattern one Gelu
    # (at level 1 it is 1 + erf(x / sqrt 2), which cancels for x < 0)
    n = len(x)
    y = np.concatenate([_run(path, x, 1)[:n], _run(path, x, 2)[n:]])
    ref_erf = np.array([math.erf(float(v)) for v in x])
    ref_gelu = np.array([0.5 * float(v) * math.erfc(-float(v) / math.sqrt(2)) for v in x])
    ulp = lambda r: np.spacing(np.abs(r).astype(np.float32)).astype(np.float64)  # noqa: E731
    e_erf = np.abs(y[:n] - ref_erf) / np.maximum(ulp(ref_erf), 1e-45)
    assert e_erf.max() <= 8, (e_erf.max(), x[e_erf.argmax()])
    big = np.abs(ref_gelu) > 1e-30
    e_gelu = np.abs(y[n:] - ref_gelu)[big] / ulp(ref_gelu[big])
    assert e_gelu.max() <= 8, (e_gelu.max(), x[big][e_gelu.argmax()])


def test_matmul_silu_epilogue(tmp_path):
    """Linear + SiLU (a SwiGLU-style MLP): FusedMatMul takes y * Sigmoid(y) as
    its activation, the same bits as the unfused Sigmoid and Mul."""
    import subprocess
    torch.manual_seed(5)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(24, 40)
            self.w3 = nn.Linear(24, 40)
            self.w2 = nn.Linear(40, 24)

        def forward(self, x):
            return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))

    x = torch.randn(3, 7, 24)
    outs = _check(M(), x, tmp_path, "swiglu")
    np.testing.assert_array_equal(outs[2], outs[1])
    cli = os.path.join(os.path.dirname(os.environ.get("CGE_LIBRARY", "")), "cge")
    if not os.path.isfile(cli):
        pytest.skip("cge CLI not beside CGE_LIBRARY")
    out = subprocess.run([cli, "profile", str(tmp_path / "swiglu.onnx"), "--iterations", "1",
                          "--opt-level", "2", "-o", str(tmp_path / "t.json")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Sigmoid" not in out.stdout and "FusedMatMul" in out.stdout, out.stdout
