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


def _session(path, fused, dump=None, pass_name="fuse_attention"):
    """A session with `pass_name` on (fused) or disabled, its pass dumps in `dump`."""
    old = {k: os.environ.get(k) for k in ("CGE_DISABLE_PASSES", "CGE_DUMP_DIR")}
    os.environ["CGE_DISABLE_PASSES"] = "" if fused else pass_name
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
    if expect_fused:
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


def _has_avx512f():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


@pytest.mark.parametrize("seq,long", [(16, 0), (95, 0), (96, 1), (197, 1)])
def test_long_static_scores_stay_unfused(tmp_path, seq, long):
    """Without AVX-512 (no tiled kernel), scores whose rows and keys are both
    known and >= 96 keep the unfused GEMMs (faster there); shorter or
    symbolic ones fuse. With AVX-512 every length fuses. Same results."""
    fused = 0 if long and not _has_avx512f() else 1
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


def _mask_for(kind, rng, b, h, m, n):
    """(mask array or None, mask_kind, fill) for a named mask over [b, h, m, n]."""
    from onnx import TensorProto
    if kind == "none":
        return None, 0, 0.0, None
    if kind == "causal":  # additive -inf above the diagonal, aligned to the last key (a prefill over a past)
        mk = np.triu(np.full((m, n), -np.inf, np.float32), n - m + 1)
        return mk, 1, 0.0, TensorProto.FLOAT
    if kind == "padding":  # bool, kept where true: each batch entry keeps a prefix of the keys
        keep = np.zeros((b, 1, 1, n), bool)
        for i in range(b):
            keep[i, ..., : max(1, n - 17 * i)] = True
        return keep, 2, float("-inf"), TensorProto.BOOL
    if kind == "random":  # bool, dropped where true, a finite fill (masked_fill with finfo.min)
        drop = rng.rand(1, h, m, n) < 0.4
        drop[..., 0] = False
        return drop, 3, -3.4e38, TensorProto.BOOL
    raise ValueError(kind)


@pytest.mark.parametrize("m,n,d,dv,mask", [
    (1, 70, 64, 64, "causal"),       # one row: the dot-product path
    (4, 4, 32, 32, "none"),          # the fewest rows of the tiled path
    (6, 64, 64, 64, "padding"),      # one whole tile, one whole chunk
    (7, 65, 32, 32, "causal"),       # a row past a tile, a key past a chunk
    (13, 131, 12, 12, "random"),     # head size 12, prime lengths
    (64, 64, 64, 64, "causal"),      # the encoder's head at 64
    (131, 131, 80, 80, "causal"),    # prime rows, whole chunks dropped by the causal mask
    (97, 200, 100, 36, "padding"),   # Dv != D, neither a multiple of 16
    (128, 128, 64, 64, "none"),      # the encoder's head at 128
    (50, 49, 32, 32, "random"),      # swin's 7x7 windows, head size 32
])
def test_attention_op_sizes_and_masks(tmp_path, m, n, d, dv, mask):
    """The operator against numpy (float64) at the sizes where its paths and
    tiles change: 1 row, tile and chunk edges, prime lengths, head sizes 12,
    32, 64, 80, 100 (Dv 36), no mask, an additive causal mask, a padding mask
    (bool, -inf fill) and a random bool mask with a finite fill. Q, K and V
    are [B, S, H, D] as an export makes them (permutations)."""
    rng = np.random.RandomState(m * 7 + n * 3 + d)
    b, h = 2, 3
    q = rng.randn(b, m, h, d).astype(np.float32)
    k = rng.randn(b, n, h, d).astype(np.float32)
    v = rng.randn(b, n, h, dv).astype(np.float32)
    mk, kind, fill, mtype = _mask_for(mask, rng, b, h, m, n)
    attrs = {"scale": 1.0 / math.sqrt(d), "q_perm": [0, 2, 1, 3], "k_perm": [0, 2, 1, 3],
             "v_perm": [0, 2, 1, 3], "out_perm": [0, 2, 1, 3]}
    if kind:
        attrs.update(mask_kind=kind, fill=fill)
    path = str(tmp_path / "att.onnx")
    _attention_model(path, [q.shape, k.shape, v.shape], attrs, list(mk.shape) if kind else None, mtype)
    feeds = {"q": q, "k": k, "v": v}
    if kind:
        feeds["mask"] = mk
    y = cge.InferenceSession(path).run(None, feeds)[0]
    ref = _np_attention(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3),
                        attrs["scale"], mk, kind, fill).transpose(0, 2, 1, 3)
    assert y.shape == (b, m, h, dv)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_attention_op_fully_masked_row(tmp_path):
    """A row whose keys are all dropped (-inf) is NaN, as Softmax makes it,
    in the tiled path too (its tiles are skipped whole); the other rows are
    unaffected."""
    from onnx import TensorProto
    rng = np.random.RandomState(11)
    m, n, d = 20, 70, 64
    q, k, v = (rng.randn(1, m, d).astype(np.float32), rng.randn(1, n, d).astype(np.float32),
               rng.randn(1, n, d).astype(np.float32))
    mk = np.zeros((m, n), np.float32)
    mk[3] = -np.inf
    path = str(tmp_path / "att.onnx")
    _attention_model(path, [q.shape, k.shape, v.shape], {"scale": 0.125, "mask_kind": 1}, [m, n],
                     TensorProto.FLOAT)
    y = cge.InferenceSession(path).run(None, {"q": q, "k": k, "v": v, "mask": mk})[0]
    assert np.isnan(y[0, 3]).all()
    keep = np.arange(m) != 3
    ref = _np_attention(q, k, v, 0.125, np.where(keep[:, None], mk, 0), 1)
    np.testing.assert_allclose(y[0, keep], ref[0, keep], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask", ["causal", "padding"])
def test_encoder_long_masked(tmp_path, mask):
    """nn.TransformerEncoderLayer (4 heads of 16) at 131 tokens with a causal
    mask (whole key chunks dropped for the upper row tiles) or a key padding
    mask (batch entries of different lengths), fused against unfused and
    PyTorch: the tiled path with masks through an export."""
    torch.manual_seed(6)
    layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
    s = 131

    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x, m):
            if mask == "causal":
                return self.layer(x, src_mask=m)
            return self.layer(x, src_key_padding_mask=m)

    model = Masked().eval()
    x = torch.randn(2, s, 64)
    if mask == "causal":
        m = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
    else:
        m = torch.zeros(2, s, dtype=torch.bool)
        m[1, 90:] = True  # the second entry's last 41 keys are padding
    path = str(tmp_path / "enc.onnx")
    _export(model, (x, m), path, ["x", "m"], None)
    with torch.no_grad():
        ref = model(x, m).numpy()
    # Without AVX-512 the pass keeps long static scores unfused (the AVX2 tiled
    # path measured no faster than the GEMMs: 1.23 vs 1.09 ms at 128 tokens,
    # 1.99 vs 2.02 at 197, 5.98 vs 5.65 at 384, one thread); the results hold.
    _check(path, [{"x": x.numpy(), "m": m.numpy()}], [ref], tmp_path,
           expect_fused=1 if _has_avx512f() else 0)
