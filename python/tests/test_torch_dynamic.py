# cge.torch.compile(dynamic=...): one compiled module serves every size of the
# symbolic dims (an MLP, a conv net, transformer blocks, an attention block with
# a class token, positions and a causal mask); results equal PyTorch's at >= 5
# sizes with no recompile; dims that cannot vary stay static (with notes);
# calls that break the generalisation recompile; sizes baked by a converter or
# replayed by a graph break are caught.
import os
import sys
import warnings

import numpy as np
import pytest

import torch
import cge  # noqa: E402
import cge.torch  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import make_test_models  # noqa: E402

aten = torch.ops.aten


def check(c, model, *args, rtol=1e-4, atol=1e-5):
    with torch.no_grad():
        ref = model(*args)
    got = c(*args)
    refs, gots = (ref, got) if isinstance(ref, tuple) else ((ref,), (got,))
    assert len(refs) == len(gots)
    for r, g in zip(refs, gots):
        assert tuple(g.shape) == tuple(r.shape) and g.dtype == r.dtype
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=rtol, atol=atol)


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 8)).eval()


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        h = torch.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        h = torch.relu(self.c2(h))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(h, 1).flatten(1))


class Attention(torch.nn.Module):
    """A class token (expand to the batch), learned positions (sliced to the
    length), a causal mask made from the length, heads split by reshape."""

    def __init__(self, e=32, heads=4, max_len=64):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(e, 3 * e)
        self.out = torch.nn.Linear(e, e)
        self.pos = torch.nn.Parameter(torch.randn(1, max_len, e))
        self.cls = torch.nn.Parameter(torch.randn(1, 1, e))

    def forward(self, x):
        b, s, e = x.shape
        x = torch.cat([self.cls.expand(b, -1, -1), x + self.pos[:, :s]], 1)
        s += 1
        q, k, v = self.qkv(x.reshape(b * s, e)).chunk(3, -1)
        q, k, v = (t.reshape(b, s, self.heads, e // self.heads).transpose(1, 2)
                   for t in (q, k, v))
        mask = torch.triu(torch.full((s, s), float("-inf")), 1)
        a = (q @ k.transpose(-1, -2) / (e // self.heads) ** 0.5 + mask).softmax(-1)
        y = (a @ v).transpose(1, 2).reshape(b, s, e)
        pos = torch.arange(1, s + 1, dtype=x.dtype)
        return self.out(y)[:, 0], y.mean(1) + pos[-1]


def test_mlp_dynamic_batch():
    m = mlp()
    c = cge.torch.compile(m, (torch.randn(4, 16),), fullgraph=True, dynamic=True)
    assert c.dynamic_dims == {0: {0: "s0"}}
    # The feature dim cannot vary (the trace at another size fails): static, noted.
    assert len(c.dynamic_notes) == 1
    assert "input 0 ('input') dim 1, size 16) stays static: tracing at size" in \
        c.dynamic_notes[0]
    for b in (1, 2, 3, 7, 16, 33, 4):
        check(c, m, torch.randn(b, 16))
    assert c.recompiles == 0
    assert c.last_run_modes() == ["replay"]
    # The cge graph itself has the symbolic dim.
    g = c.graphs()[0]
    s = cge.Session(g)
    assert s.get_inputs()[0].shape == ["s0", 16]
    # A rank the trace did not see recompiles (and is right).
    check(c, m, torch.randn(2, 3, 16))
    assert c.recompiles == 1


@pytest.mark.parametrize("mode", ["plan", "eager"])
def test_mlp_dynamic_other_modes(mode):
    m = mlp()
    c = cge.torch.compile(m, (torch.randn(4, 16),), fullgraph=True, dynamic={0: [0]},
                          mode=mode)
    for b in (1, 5, 9, 2, 4):
        check(c, m, torch.randn(b, 16))
    assert c.recompiles == 0 and c.last_run_modes() == [mode]


def test_conv_net_dynamic_batch_and_size():
    torch.manual_seed(0)
    m = ConvNet().eval()
    c = cge.torch.compile(m, (torch.randn(2, 3, 16, 16),), fullgraph=True, dynamic=True)
    # Height and width have one example size: one symbol (duck sizing).
    assert c.dynamic_dims == {0: {0: "s0", 2: "s2", 3: "s2"}}
    assert any("dim 1, size 3) stays static" in n for n in c.dynamic_notes)
    for b, hw in ((1, 16), (3, 16), (2, 20), (5, 33), (4, 9), (2, 16)):
        check(c, m, torch.randn(b, 3, hw, hw))
    assert c.recompiles == 0
    # Height and width apart break the tie: a new specialisation, with both free.
    check(c, m, torch.randn(2, 3, 16, 24))
    assert c.recompiles == 1
    check(c, m, torch.randn(3, 3, 12, 20))
    assert c.recompiles == 1
    # A channel count the module cannot take is PyTorch's own error.
    with pytest.raises(RuntimeError, match="channels"):
        c(torch.randn(2, 4, 16, 16))


def test_transformer_layer_dynamic_batch_and_sequence():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             batch_first=True).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # both dims generalise: no warning
        c = cge.torch.compile(layer, (torch.randn(1, 5, 32),), fullgraph=True,
                              dynamic={"src": {0: "batch", 1: "seq"}})
    # Batch 1 traces another graph than 2 (PyTorch views instead of copying):
    # the dims generalise from batch 2, and batch 1 has its own specialisation.
    assert c.dynamic_dims == {0: {0: "batch", 1: "seq"}}
    for b, s in ((1, 5), (2, 7), (3, 16), (4, 1), (2, 5), (1, 40), (5, 9)):
        check(c, layer, torch.randn(b, s, 32))
    assert c.recompiles == 0
    ops = {op for _, op, _ in c.graph_nodes()}
    assert {"Shape", "Gather", "Concat", "Reshape", "LayerNormalization"} <= ops
    # d_model is static: another one is PyTorch's error (the layer cannot take it).
    with pytest.raises(Exception, match="embedding dimension"):
        c(torch.randn(2, 5, 33))


def test_transformer_encoder_only_batch_marked():
    model, x = make_test_models.build("transformer_encoder")
    x = x[:, :16]
    c = cge.torch.compile(model, (x,), fullgraph=True, dynamic={0: [0]})
    assert c.dynamic_dims == {0: {0: "s0"}}
    for b in (1, 2, 3, 1, 2):
        check(c, model, torch.randn(b, 16, 256), rtol=1e-3, atol=1e-4)
    assert c.recompiles == 0
    # The sequence length was not marked: a new one recompiles.
    check(c, model, torch.randn(2, 20, 256), rtol=1e-3, atol=1e-4)
    assert c.recompiles == 1


def test_attention_with_class_token_positions_and_mask():
    torch.manual_seed(0)
    m = Attention().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = cge.torch.compile(m, (torch.randn(3, 7, 32),), fullgraph=True,
                              dynamic={"x": {0: "batch", 1: "seq"}})
    assert c.dynamic_dims == {0: {0: "batch", 1: "seq"}} and c.dynamic_notes == []
    for b, s in ((1, 7), (3, 9), (2, 30), (5, 63), (4, 1), (3, 7)):
        check(c, m, torch.randn(b, s, 32))
    assert c.recompiles == 0
    ops = {op for _, op, _ in c.graph_nodes()}
    assert {"ConstantOfShape", "Trilu", "Range", "Expand", "Slice", "Shape"} <= ops


def test_resnet18_dynamic_batch():
    model, x = make_test_models.build("resnet18")
    x = x[:, :, :64, :64].contiguous()
    c = cge.torch.compile(model, (x,), fullgraph=True, dynamic={0: [0]})
    assert c.dynamic_dims == {0: {0: "s0"}}
    for b in (1, 2, 3, 2, 1):
        check(c, model, torch.randn(b, 3, 64, 64), rtol=1e-3, atol=1e-4)
    assert c.recompiles == 0


def test_graph_break_keeps_dims_dynamic():
    def f(x):
        return torch.special.erfinv(torch.tanh(x) * 0.5).exp() + 1
    c = cge.torch.compile(f, (torch.randn(4, 5),), dynamic=True)
    assert c.num_segments == 2 and c.dynamic_dims == {0: {0: "s0", 1: "s1"}}
    for shape in ((4, 5), (2, 3), (7, 9), (1, 1), (3, 8)):
        check(c, f, torch.randn(*shape))
    assert c.recompiles == 0


def test_graph_break_with_a_size_argument_stays_static():
    def f(x):
        return x * torch.hann_window(x.shape[1]) + 1   # runs in PyTorch, with a size
    x = torch.randn(4, 5)
    with pytest.warns(RuntimeWarning, match=r"s1 \(input 0 \('x'\) dim 1, size 5\) stays "
                      r"static: hann_window \(aten::hann_window\) runs in PyTorch with a size"):
        c = cge.torch.compile(f, (x,), dynamic={"x": [0, 1]})
    assert c.dynamic_dims == {0: {0: "s0"}}
    for b in (4, 1, 6, 2, 9):
        check(c, f, torch.randn(b, 5))
    assert c.recompiles == 0
    check(c, f, torch.randn(3, 6))           # the static dim: a new specialisation
    assert c.recompiles == 1


def test_eye_of_an_input_size_stays_dynamic():
    def f(x):
        return x @ torch.eye(x.shape[1]) + torch.eye(x.shape[0], x.shape[1])
    c = cge.torch.compile(f, (torch.randn(4, 5),), dynamic={"x": [0, 1]}, fullgraph=True)
    assert c.dynamic_dims == {0: {0: "s0", 1: "s1"}}
    for shape in ((4, 5), (2, 7), (6, 3)):
        check(c, f, torch.randn(*shape))
    assert c.recompiles == 0


def test_converter_that_bakes_a_size_is_caught():
    orig = cge.torch.find_converter(aten.view.default)

    def f(x):
        return (x * 2).view(x.shape[0] * x.shape[1]) + 1

    try:
        @cge.torch.register_converter(aten.view.default, override=True)
        def baking_view(ctx, node, x, size):
            return ctx.op("Reshape", data=x, shape=ctx.ints(ctx.out_shape()))
        x = torch.randn(3, 4)
        with pytest.warns(RuntimeWarning, match="stays static: view .aten::view.: its "
                          "conversion builds a different constant at another size"):
            c = cge.torch.compile(f, (x,), fullgraph=True, dynamic={0: [0, 1]})
        assert c.dynamic_dims == {}
        check(c, f, x)
        check(c, f, torch.randn(2, 4))       # static: recompiles, still right
        assert c.recompiles == 1
    finally:
        cge.torch.register_converter(aten.view.default, override=True)(orig)
    # With the builtin converter the same function generalises.
    c = cge.torch.compile(f, (torch.randn(3, 4),), fullgraph=True, dynamic={0: [0, 1]})
    assert c.dynamic_dims == {0: {0: "s0", 1: "s1"}}
    for shape in ((3, 4), (2, 4), (5, 7), (1, 1), (6, 2)):
        check(c, f, torch.randn(*shape))
    assert c.recompiles == 0


def test_duck_sizing_and_names():
    def f(x, mask):
        return (x * mask.unsqueeze(-1)).sum(1)
    x, mask = torch.randn(4, 4, 8), torch.ones(4, 4)
    c = cge.torch.compile(f, (x, mask), fullgraph=True, dynamic={"x": [0, 1], "mask": [0, 1]})
    # Equal example sizes share one symbol: batch and length are tied here...
    assert c.dynamic_dims == {0: {0: "s0", 1: "s0"}, 1: {0: "s0", 1: "s0"}}
    check(c, f, torch.randn(6, 6, 8), torch.ones(6, 6))
    assert c.recompiles == 0
    check(c, f, torch.randn(2, 5, 8), torch.rand(2, 5))    # ...so apart they recompile
    assert c.recompiles == 1
    # Named dims share by name, whatever their example sizes.
    c = cge.torch.compile(f, (x, mask), fullgraph=True,
                          dynamic={0: {0: "batch", 1: "len"}, 1: {0: "batch", 1: "len"}})
    assert c.dynamic_dims == {0: {0: "batch", 1: "len"}, 1: {0: "batch", 1: "len"}}
    for b, s in ((2, 5), (4, 4), (1, 9), (7, 3), (3, 3)):
        check(c, f, torch.randn(b, s, 8), torch.rand(b, s))
    assert c.recompiles == 0
    # Dims named alike must be given one size.
    with pytest.raises(ValueError, match=r"the dims named 'batch' have different sizes "
                       r"\(\[2, 3\]\)"):
        c(torch.randn(2, 5, 8), torch.rand(3, 5))


def test_dtype_change_recompiles():
    m = mlp()
    c = cge.torch.compile(m, (torch.randn(4, 16),), fullgraph=True, dynamic=True)
    c(torch.randn(3, 16))
    assert c.recompiles == 0
    with pytest.raises(RuntimeError):    # the module itself refuses float64 with float32 weights
        c(torch.randn(3, 16, dtype=torch.float64))
    assert c.recompiles == 1


def test_bad_dynamic_arguments():
    m = mlp()
    x = torch.randn(4, 16)
    with pytest.raises(ValueError, match="not a parameter of the module"):
        cge.torch.compile(m, (x,), dynamic={"nosuch": [0]})
    with pytest.raises(ValueError, match="has rank 2"):
        cge.torch.compile(m, (x,), dynamic={0: [2]})
    with pytest.raises(ValueError, match="not a tensor"):
        cge.torch.compile(lambda t, k: t * k, (x, 3), dynamic={1: [0]})
    with pytest.raises(TypeError, match="dynamic is False, True or a dict"):
        cge.torch.compile(m, (x,), dynamic=[0])
    with pytest.raises(ValueError, match="different sizes"):
        cge.torch.compile(lambda a, b: a + b.sum(), (x, torch.randn(3)),
                          dynamic={0: {0: "n"}, 1: {0: "n"}})


def test_select_keeps_rank():
    # A rank-0 constant (select's index) stays rank 0: the output has the
    # traced rank at every size (the builder once made it [1]).
    b = cge.GraphBuilder("scalar")
    assert b.constant(np.float32(3)).shape == ()
    f = lambda x: x[:, 0] * 2  # noqa: E731
    c = cge.torch.compile(f, (torch.randn(3, 7, 4),), fullgraph=True, dynamic=True)
    for shape in ((3, 7, 4), (1, 2, 4), (5, 9, 2), (2, 1, 1), (4, 3, 8)):
        check(c, f, torch.randn(*shape))
    assert c.recompiles == 0
