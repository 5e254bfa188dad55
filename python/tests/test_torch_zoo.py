# cge.torch on what the model zoo (scripts/zoo.py) found: small modules for
# each converter it needed (recurrent layers, swin's index/roll/pad/masks,
# group norm, resampling, batched addmm), writes through views (swin's
# attention mask: was a silently wrong result), and fullgraph=False without
# breaks where every node converts (batch norm's tuple result broke it).
import numpy as np
import pytest

import torch
import cge.torch  # noqa: E402

nn = torch.nn


def _check(m, args, fullgraph=True, breaks=0, rtol=1e-3, atol=1e-4):
    m = m.eval()
    c = cge.torch.compile(m, args, fullgraph=fullgraph)
    with torch.no_grad():
        ref = m(*args)
    out = c(*args)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    out = out if isinstance(out, (tuple, list)) else (out,)
    assert len(out) == len(ref)
    for o, r in zip(out, ref):
        assert o.shape == r.shape
        np.testing.assert_allclose(o.detach().numpy(), r.numpy(), rtol=rtol, atol=atol)
    assert len(c.graph_breaks) == breaks, c.graph_breaks
    return c


class _Rnn(nn.Module):
    def __init__(self, kind, layers, bi):
        super().__init__()
        self.r = getattr(nn, kind)(8, 12, num_layers=layers, bidirectional=bi)

    def forward(self, x):
        out, h = self.r(x)
        return (out,) + (tuple(h) if isinstance(h, tuple) else (h,))


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("layers,bi", [(1, False), (2, True)])
def test_recurrent_layers(kind, layers, bi):
    # make_fx unrolls them: unbind over time, unsafe_split of the gates.
    torch.manual_seed(0)
    _check(_Rnn(kind, layers, bi), (torch.randn(5, 2, 8),))


class _MaskWrite(nn.Module):
    """swin_t's shifted-window mask: a zeros tensor written through slices."""

    def forward(self, x):
        m = x.new_zeros((4, 6))
        cnt = 0
        for h in (slice(0, 2), slice(2, None)):
            for w in (slice(0, 3), slice(3, 5), slice(5, None)):
                m[h, w] = cnt
                cnt += 1
        m[0] += 10.0
        return x + m


@pytest.mark.parametrize("fullgraph", [True, False])
def test_writes_through_views(fullgraph):
    # The writes used to be dropped as dead code: x + 0 came back, no error.
    _check(_MaskWrite(), (torch.randn(4, 6),), fullgraph=fullgraph)


class _SwinOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(9, 2))
        self.register_buffer("idx", torch.tensor([[0, 4, 8], [2, 3, 1]]))
        self.register_buffer("rows", torch.tensor([0, 2, 1]))
        self.register_buffer("cols", torch.tensor([[3], [0]]))

    def forward(self, x):
        bias = self.table[self.idx]                          # index.Tensor -> Gather
        y = torch.roll(nn.functional.pad(x, (1, 1, 0, 2)), shifts=(-1, 2), dims=(1, 2))
        y = y.masked_fill(y > 0.5, -100.0).masked_fill(y != y, 0.0)
        return y, bias, x[self.rows, self.cols]          # two index tensors: GatherND


def test_index_roll_pad_masked_fill():
    torch.manual_seed(0)
    _check(_SwinOps(), (torch.randn(3, 4, 5),))


def test_group_norm_conv1d():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv1d(2, 8, 5, 2), nn.GroupNorm(4, 8), nn.GELU(),
                      nn.Conv1d(8, 8, 3), nn.GroupNorm(8, 8, affine=False))
    _check(m, (torch.randn(1, 2, 64),))


class _Resample(nn.Module):
    def forward(self, x):
        f = nn.functional
        return (f.interpolate(x, size=(7, 10), mode="bilinear", align_corners=False),
                f.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
                f.interpolate(x, scale_factor=2, mode="nearest"))


def test_upsample():
    _check(_Resample(), (torch.randn(1, 2, 5, 4),))


def test_batched_addmm():
    # torch.addmm broadcasts a [N, M] bias; a batched operand must not become Gemm.
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(6, 3))
            self.b = nn.Parameter(torch.randn(3))

        def forward(self, x):
            return torch.baddbmm(self.b, x, self.w.expand(2, 6, 3), beta=0.5, alpha=2.0)
    torch.manual_seed(0)
    _check(M(), (torch.randn(2, 4, 6),))


def test_addmm_converter_on_rank3():
    # The converter itself: a rank-3 A (as a preceding converter may hand it)
    # maps onto MatMul + Add, with alpha and beta.
    from cge import builder
    from cge.torch import aten as conv_aten
    b = builder.GraphBuilder("addmm3")
    a = b.input("a", builder.FLOAT if hasattr(builder, "FLOAT") else np.float32, [1, 2, 4])
    ctx = cge.torch.ConversionContext(b)
    bias = ctx.const(np.ones(3, np.float32))
    w = ctx.const(np.arange(12, dtype=np.float32).reshape(4, 3))
    y = conv_aten._addmm(ctx, None, bias, a, w, beta=2.0, alpha=0.5)
    b.output(y, "y")
    g = b.build()
    x = np.random.RandomState(0).randn(1, 2, 4).astype(np.float32)
    (got,) = builder.Session(g).run(None, {"a": x})
    np.testing.assert_allclose(got, 0.5 * x @ np.arange(12, dtype=np.float32).reshape(4, 3) + 2,
                               rtol=1e-5, atol=1e-5)


def test_partial_graph_batch_norm_does_not_break():
    # mobilenet_v3_small/regnet under fullgraph=False used to break at every
    # batch norm (its tuple result had no meta): 68-106 breaks, 3-5x slower.
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.Hardswish(),
                      nn.Conv2d(8, 8, 3, groups=8), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
    c = _check(m, (torch.randn(1, 3, 12, 12),), fullgraph=False)
    assert c.num_segments == 1


def test_partial_graph_with_a_real_break_is_correct():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 3)

        def forward(self, x):
            h = torch.relu(self.a(x))
            h = torch.special.erfinv(torch.tanh(h) * 0.5)   # no converter: one graph break
            return self.b(h)
    torch.manual_seed(0)
    _check(M(), (torch.randn(2, 6),), fullgraph=False, breaks=1)


def test_instance_norm_and_batch_statistics():
    # raft_small's encoders: instance norm traces as batch norm in training
    # mode without running statistics (was "batch normalisation in training mode").
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True), nn.ReLU(),
                      nn.InstanceNorm2d(4), nn.BatchNorm2d(4, track_running_stats=False))
    _check(m, (torch.randn(2, 3, 9, 9),))


def test_repeat():
    class M(nn.Module):
        def forward(self, x):
            return x.repeat(2, 1, 3), x.repeat(1, 2)
    _check(M(), (torch.randn(3, 2),))


def test_int_operands_take_the_result_dtype():
    # raft_small: sqrt of an int64 tensor (float in PyTorch); ssdlite: cat of
    # int64 and float32 pieces (promoted to float32).
    class M(nn.Module):
        def forward(self, x):
            n = torch.arange(1, 5)
            return torch.sqrt(n) + x, torch.cat([n.view(1, 4), x], 0)
    _check(M(), (torch.randn(1, 4),))


def test_linspace():
    # raft_small's coordinate grids.
    class M(nn.Module):
        def forward(self, x):
            return x * torch.linspace(-1.0, 1.0, 7) + torch.linspace(0, 3, 7)
    _check(M(), (torch.randn(2, 7),), rtol=0, atol=0)


@pytest.mark.parametrize("mode,pad,ac", [("bilinear", "zeros", False), ("nearest", "border", True),
                                         ("bilinear", "reflection", True)])
def test_grid_sample(mode, pad, ac):
    # raft_small's correlation lookups.
    class M(nn.Module):
        def forward(self, x, g):
            return nn.functional.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=ac)
    torch.manual_seed(0)
    _check(M(), (torch.randn(1, 2, 5, 6), torch.rand(1, 3, 4, 2) * 2.4 - 1.2))


def test_norm_and_normalize():
    # swin_v2's cosine attention: F.normalize (a 2-norm over the last dim).
    class M(nn.Module):
        def forward(self, x):
            return nn.functional.normalize(x, dim=-1), x.norm(p=1, dim=(0, 2), keepdim=True)
    torch.manual_seed(0)
    _check(M(), (torch.randn(3, 4, 5),))


def test_pool3d():
    # s3d's pooling.
    m = nn.Sequential(nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1)),
                      nn.AvgPool3d((2, 2, 2), 1), nn.MaxPool3d(2, ceil_mode=True))
    _check(m, (torch.randn(1, 2, 5, 9, 9),))
