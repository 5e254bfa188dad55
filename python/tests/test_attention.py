# The attention fusion (compiler pass fuse_attention -> cge.fused Attention):
# PyTorch attention modules exported by torch.onnx.export run through
# cge.InferenceSession with the pass on (the default) and off
# (CGE_DISABLE_PASSES=fuse_attention). Each must match PyTorch, the two must
# match each other within float32 rounding, and the pass must have fired
# (the compiled graph's dump holds Attention nodes and no Softmax).
import glob
import math
import os
import re

import numpy as np
import pytest

import cge

torch = pytest.importorskip("torch")
nn = torch.nn


def _session(path, fused, dump=None):
    old = {k: os.environ.get(k) for k in ("CGE_DISABLE_PASSES", "CGE_DUMP_DIR")}
    os.environ["CGE_DISABLE_PASSES"] = "" if fused else "fuse_attention"
    if dump:
        os.environ["CGE_DUMP_DIR"] = str(dump)
    try:
        return cge.InferenceSession(path)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _last_dump(d):
    """The text of the last optimize-stage dump (the graph the plan is made of)."""
    files = sorted(glob.glob(os.path.join(str(d), "*_optimize_*.txt")))
    assert files, "no pass dumps in %s" % d
    with open(files[-1]) as f:
        return f.read()


def _op_count(text, op):
    """Nodes of op type `op` (any domain) in a graph dump."""
    return len(re.findall(r"= (?:[\w.]+::)?%s\(" % op, text))


def _export(module, args, path, names, dynamic, opset=13):
    module.eval()
    torch.onnx.export(module, args, path, opset_version=opset, input_names=names,
                      output_names=["out"], dynamic_axes=dynamic, do_constant_folding=True)


def _check(path, feeds_list, refs, tmp_path, expect_fused, rtol=2e-4, atol=2e-5):
    dump = tmp_path / "dump"
    dump.mkdir()
    fused = _session(path, True, dump)
    plain = _session(path, False)
    text = _last_dump(dump)
    assert _op_count(text, "Attention") == expect_fused, text[:3000]
    assert _op_count(text, "Softmax") == 0, "a Softmax was left unfused"
    for feeds, ref in zip(feeds_list, refs):
        a = fused.run(None, feeds)[0]
        b = plain.run(None, feeds)[0]
        scale = max(float(np.abs(ref).max()), 1e-6)
        assert a.shape == ref.shape
        np.testing.assert_allclose(b / scale, ref / scale, rtol=rtol, atol=atol, err_msg="unfused vs torch")
        np.testing.assert_allclose(a / scale, ref / scale, rtol=rtol, atol=atol, err_msg="fused vs torch")
        np.testing.assert_allclose(a / scale, b / scale, rtol=rtol, atol=atol, err_msg="fused vs unfused")


@pytest.mark.parametrize("d_model,nhead", [(32, 4), (36, 3), (20, 1)])
def test_transformer_encoder_dynamic(tmp_path, d_model, nhead):
    """nn.TransformerEncoder (scale on Q before the product, no mask), one
    session over batch and sequence sizes 1, primes, 64 and 70 (two key
    chunks, a partial one)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=48, dropout=0.0)
    model = nn.TransformerEncoder(layer, num_layers=2)
    path = str(tmp_path / "enc.onnx")
    _export(model, (torch.randn(5, 2, d_model),), path, ["src"], {"src": {0: "seq", 1: "batch"}})
    feeds, refs = [], []
    for seq, batch in [(5, 2), (1, 1), (7, 3), (13, 1), (64, 2), (70, 1)]:
        x = torch.randn(seq, batch, d_model)
        with torch.no_grad():
            refs.append(model(x).numpy())
        feeds.append({"src": x.numpy()})
    _check(path, feeds, refs, tmp_path, expect_fused=2)


def test_transformer_encoder_float_mask(tmp_path):
    """An additive causal mask given as an input (nn.Transformer's
    generate_square_subsequent_mask, -inf above the diagonal)."""
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(24, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=1)

    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, x, mask):
            return self.m(x, mask=mask)

    m = Masked()
    s = 11
    mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
    path = str(tmp_path / "enc_mask.onnx")
    _export(m, (torch.randn(2, s, 24), mask), path, ["x", "mask"], None)
    x = torch.randn(2, s, 24)
    with torch.no_grad():
        ref = m(x, mask).numpy()
    _check(path, [{"x": x.numpy(), "mask": mask.numpy()}], [ref], tmp_path, expect_fused=1)


class _Causal(nn.Module):
    """GPT-style causal self-attention over a past (the concat form's key and
    value cache), masked by Where on a bool buffer, scale by Div after the
    product; head size 12 (not a multiple of 16)."""

    def __init__(self, d=36, heads=3, max_len=96, where=True):
        super().__init__()
        self.h, self.dh, self.where = heads, d // heads, where
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x, past_k, past_v):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.reshape(b, s, self.h, self.dh).transpose(1, 2)
        k = torch.cat([past_k, k.reshape(b, s, self.h, self.dh).transpose(1, 2)], dim=2)
        v = torch.cat([past_v, v.reshape(b, s, self.h, self.dh).transpose(1, 2)], dim=2)
        t = k.shape[2]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)
        if self.where:
            att = att.masked_fill(~self.causal[t - s:t, :t], float("-inf"))
        else:
            att = att + torch.triu(torch.full((s, t), -1e4), diagonal=t - s + 1)
        y = torch.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


@pytest.mark.parametrize("where", [True, False])
def test_causal_attention_with_past(tmp_path, where):
    """Prefill (empty past), one-row decode steps (M = 1) at growing past
    lengths and a prime-sized chunk, in one session of symbolic dims."""
    torch.manual_seed(2)
    m = _Causal(where=where)
    path = str(tmp_path / "causal.onnx")
    _export(m, (torch.randn(1, 4, 36), torch.randn(1, 3, 2, 12), torch.randn(1, 3, 2, 12)), path,
            ["x", "past_k", "past_v"],
            {"x": {0: "b", 1: "s"}, "past_k": {0: "b", 2: "p"}, "past_v": {0: "b", 2: "p"}},
            opset=13 if where else 14)  # Trilu (the additive mask) needs opset 14
    feeds, refs = [], []
    for b, s, p in [(1, 16, 0), (1, 1, 16), (2, 1, 63), (1, 1, 64), (1, 7, 67), (2, 3, 1)]:
        x, pk, pv = torch.randn(b, s, 36), torch.randn(b, 3, p, 12), torch.randn(b, 3, p, 12)
        with torch.no_grad():
            refs.append(m(x, pk, pv).numpy())
        feeds.append({"x": x.numpy(), "past_k": pk.numpy(), "past_v": pv.numpy()})
    _check(path, feeds, refs, tmp_path, expect_fused=1)


def test_multihead_attention_cross(tmp_path):
    """nn.MultiheadAttention with separate query and key/value lengths (a
    decoder's cross-attention), batch_first."""
    torch.manual_seed(3)
    mha = nn.MultiheadAttention(40, 5, batch_first=True)

    class Cross(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, q, kv):
            return self.mha(q, kv, kv, need_weights=False)[0]

    m = Cross()
    path = str(tmp_path / "mha.onnx")
    _export(m, (torch.randn(2, 3, 40), torch.randn(2, 9, 40)), path, ["q", "kv"],
            {"q": {0: "b", 1: "m"}, "kv": {0: "b", 1: "n"}})
    feeds, refs = [], []
    for b, mq, n in [(2, 3, 9), (1, 1, 5), (3, 17, 131)]:
        q, kv = torch.randn(b, mq, 40), torch.randn(b, n, 40)
        with torch.no_grad():
            refs.append(m(q, kv).numpy())
        feeds.append({"q": q.numpy(), "kv": kv.numpy()})
    _check(path, feeds, refs, tmp_path, expect_fused=1)


def test_disabled_pass_leaves_softmax(tmp_path):
    """With the pass off, nothing is fused (the A/B above compares something)."""
    torch.manual_seed(4)
    m = _Causal()
    path = str(tmp_path / "causal.onnx")
    _export(m, (torch.randn(1, 4, 36), torch.randn(1, 3, 2, 12), torch.randn(1, 3, 2, 12)), path,
            ["x", "past_k", "past_v"], None)
    dump = tmp_path / "dump"
    dump.mkdir()
    s = _session(path, False, dump)
    s.run(None, {"x": np.zeros((1, 4, 36), np.float32), "past_k": np.zeros((1, 3, 2, 12), np.float32),
                 "past_v": np.zeros((1, 3, 2, 12), np.float32)})
    text = _last_dump(dump)
    assert _op_count(text, "Softmax") == 1 and _op_count(text, "Attention") == 0


def _np_attention(q, k, v, scale, mask=None, kind=0, fill=0.0):
    s = np.einsum("...md,...nd->...mn", q.astype(np.float64), k.astype(np.float64)) * scale
    if kind == 1:
        s = s + mask
    elif kind in (2, 3):
        keep = mask if kind == 2 else ~mask
        s = np.where(keep, s, fill)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("...mn,...nd->...md", p, v.astype(np.float64))


def _attention_model(path, shapes, attrs, mask_shape=None, mask_type=None):
    import onnx
    from onnx import TensorProto, helper
    ins = ["q", "k", "v"] + (["mask"] if mask_shape else [])
    node = helper.make_node("Attention", ins, ["y"], domain="cge.fused", **attrs)
    vis = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(ins[:3], shapes)]
    if mask_shape:
        vis.append(helper.make_tensor_value_info("mask", mask_type, mask_shape))
    graph = helper.make_graph([node], "attention", vis,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("cge.fused", 1)])
    onnx.save_model(model, path)


@pytest.mark.parametrize("m,n,d", [(1, 1, 5), (1, 131, 12), (7, 64, 16), (67, 70, 20), (3, 200, 72)])
def test_attention_op_permuted_and_masked(tmp_path, m, n, d):
    """The operator itself against numpy: Q as [B, M, H, D] (q_perm), K stored
    transposed [B, H, D, N] (k_perm), a keep-where-false bool mask broadcast
    over the batch, the output written as [B, M, H, Dv] (out_perm)."""
    from onnx import TensorProto
    rng = np.random.RandomState(m * 1000 + n)
    b, h, dv = 2, 3, d + 3
    q = rng.randn(b, m, h, d).astype(np.float32)           # logical [b, h, m, d]
    kt = rng.randn(b, h, d, n).astype(np.float32)          # logical [b, h, n, d]
    v = rng.randn(b, h, n, dv).astype(np.float32)
    mask = rng.rand(1, h, m, n) < 0.3                      # True: dropped (kind 3)
    mask[..., 0] = False                                   # every row keeps a key
    path = str(tmp_path / "att.onnx")
    _attention_model(path, [q.shape, kt.shape, v.shape],
                     {"scale": 0.3, "mask_kind": 3, "fill": -1e9, "q_perm": [0, 2, 1, 3],
                      "k_perm": [0, 1, 3, 2], "out_perm": [0, 2, 1, 3]}, list(mask.shape), TensorProto.BOOL)
    y = cge.InferenceSession(path).run(None, {"q": q, "k": kt, "v": v, "mask": mask})[0]
    ref = _np_attention(q.transpose(0, 2, 1, 3), kt.transpose(0, 1, 3, 2), v, 0.3, mask, 3, -1e9)
    assert y.shape == (b, m, h, dv)
    np.testing.assert_allclose(y, ref.transpose(0, 2, 1, 3), rtol=1e-4, atol=1e-5)


def test_attention_op_additive_mask_rank2(tmp_path):
    """An additive [M, N] mask broadcast over batch and heads; rank-3 inputs."""
    from onnx import TensorProto
    rng = np.random.RandomState(7)
    q, k, v = (rng.randn(4, 9, 8).astype(np.float32), rng.randn(4, 11, 8).astype(np.float32),
               rng.randn(4, 11, 5).astype(np.float32))
    mask = np.triu(np.full((9, 11), -np.inf, np.float32), 3)
    path = str(tmp_path / "att.onnx")
    _attention_model(path, [q.shape, k.shape, v.shape], {"scale": 0.5, "mask_kind": 1},
                     [9, 11], TensorProto.FLOAT)
    y = cge.InferenceSession(path).run(None, {"q": q, "k": k, "v": v, "mask": mask})[0]
    np.testing.assert_allclose(y, _np_attention(q, k, v, 0.5, mask, 1), rtol=1e-4, atol=1e-5)


def test_attention_op_meta_errors(tmp_path):
    """Q's and K's head sizes differ: a [meta] error naming them, no crash."""
    path = str(tmp_path / "bad.onnx")
    _attention_model(path, [[2, 3, 8], [2, 5, 7], [2, 5, 4]], {"scale": 1.0})
    with pytest.raises(Exception) as e:
        s = cge.InferenceSession(path)
        s.run(None, {"q": np.zeros((2, 3, 8), np.float32), "k": np.zeros((2, 5, 7), np.float32),
                     "v": np.zeros((2, 5, 4), np.float32)})
    assert "[meta]" in str(e.value) and "head size" in str(e.value)


@pytest.mark.parametrize("seq,fused", [(16, 1), (95, 1), (96, 0), (197, 0)])
def test_long_static_scores_stay_unfused(tmp_path, seq, fused):
    """Scores whose rows and keys are both known and >= 96 keep the unfused
    GEMMs (faster there); shorter or symbolic ones fuse. Same results."""
    torch.manual_seed(5)
    mha = nn.MultiheadAttention(32, 4, batch_first=True)

    class Self(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x):
            return self.mha(x, x, x, need_weights=False)[0]

    m = Self()
    x = torch.randn(1, seq, 32)
    path = str(tmp_path / "self.onnx")
    _export(m, (x,), path, ["x"], None)
    with torch.no_grad():
        ref = m(x).numpy()
    dump = tmp_path / "dump"
    dump.mkdir()
    s = _session(path, True, dump)
    got = s.run(None, {"x": x.numpy()})[0]
    text = _last_dump(dump)
    assert _op_count(text, "Attention") == fused
    assert _op_count(text, "Softmax") == 1 - fused
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-5)
