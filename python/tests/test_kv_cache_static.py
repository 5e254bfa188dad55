# kv_cache_max_len: a concat-form key/value cache export (scripts/
# make_dynamic_models.py's Decoder, at tiny sizes) rewritten to the static
# form by cge: its greedy tokens equal PyTorch's and the static-form export's,
# in plain runs and with the caches bound in place (replays); a graph the
# rewrite does not know is a [meta] error naming the construct; without the
# option the graph keeps its interface.
import os

import numpy as np
import pytest

import cge
# The tiny decoder's sizes, prompt and the model maker: the static export's
# tests (test_static_cache.py) use the same, so both forms compare alike.
from test_static_cache import MAX_LEN, PROMPT, STEPS, TINY, mdm


@pytest.fixture(scope="module")
def tiny():
    dec = mdm.decoder(**TINY)
    return dec, mdm.static_decoder(dec, MAX_LEN)


@pytest.fixture(scope="module")
def exported(tiny, tmp_path_factory):
    """{(form, opset): path}: the tiny decoder in the concat form at opsets
    13 and 17, and in the static form (opset 13)."""
    d = tmp_path_factory.mktemp("kv_static")
    paths = {}
    for opset in (13, 17):
        paths["concat", opset] = str(d / ("decoder_concat_%d.onnx" % opset))
        mdm.export_concat(tiny[0], paths["concat", opset], opset=opset)
    paths["static", 13] = str(d / "decoder_static_13.onnx")
    mdm.export_static(tiny[1], paths["static", 13])
    return paths


def test_option_absent_keeps_the_concat_interface(tiny, exported):
    dec, _ = tiny
    sess = cge.InferenceSession(exported["concat", 13])
    ins, outs = mdm.decoder_io_names(TINY["layers"])
    assert [i.name for i in sess.get_inputs()] == ins
    assert [o.name for o in sess.get_outputs()] == outs
    assert sess.get_inputs()[1].shape == ["batch", 2, "past_len", 16]
    # ... and runs the concat form: PyTorch's tokens with growing pasts.
    ref, logits = mdm.torch_greedy(dec, PROMPT, 3)
    past = [np.zeros((1, 2, 0, 16), np.float32) for _ in range(2 * TINY["layers"])]
    out = sess.run(None, dict(zip(ins, [PROMPT] + past)))
    np.testing.assert_allclose(out[0], logits, rtol=1e-4, atol=1e-4)
    assert out[1].shape == (1, 2, PROMPT.shape[1], 16)


def test_rewritten_interface(exported):
    sess = cge.InferenceSession(exported["concat", 13], kv_cache_max_len=MAX_LEN)
    ins, outs = mdm.decoder_io_names(TINY["layers"])
    assert [i.name for i in sess.get_inputs()] == ins + ["cache_position"]
    assert [o.name for o in sess.get_outputs()] == outs
    shapes = [i.shape for i in sess.get_inputs()]
    assert shapes[1:-1] == [["batch", 2, MAX_LEN, 16]] * (2 * TINY["layers"])
    assert shapes[-1] == [1]
    assert sess.get_inputs()[-1].type == "tensor(int64)"


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("mode", [None, "plan", "eager"])
def test_tokens_equal_pytorch_and_the_static_form(tiny, exported, opset, mode):
    dec, static = tiny
    ref, logits = mdm.torch_greedy(dec, PROMPT, STEPS)
    sess = cge.InferenceSession(exported["concat", opset], kv_cache_max_len=MAX_LEN,
                                run_mode=mode)
    got, first = mdm.static_greedy(mdm.rewritten_step(sess), static, PROMPT, STEPS)
    assert got == ref
    np.testing.assert_allclose(first, logits, rtol=1e-4, atol=1e-4)
    ssess = cge.InferenceSession(exported["static", 13], run_mode=mode)
    names = [i.name for i in ssess.get_inputs()]
    sgot, sfirst = mdm.static_greedy(
        lambda ids, pos, *c: ssess.run(None, dict(zip(names, (ids, pos) + c))),
        static, PROMPT, STEPS)
    assert sgot == got
    np.testing.assert_allclose(first, sfirst, rtol=1e-4, atol=1e-5)


def test_caches_hold_the_concat_presents(tiny, exported):
    """Slot t of the rewritten model's caches holds PyTorch's key/value of
    position t; the slots not written keep the caller's zeros."""
    import torch
    dec, static = tiny
    sess = cge.InferenceSession(exported["concat", 13], kv_cache_max_len=MAX_LEN)
    step = mdm.rewritten_step(sess)
    caches = mdm.static_cache(static)
    n = PROMPT.shape[1]
    _, *caches = step(PROMPT, np.array([0], np.int64), *caches)
    _, *caches = step(np.array([[5]], np.int64), np.array([n], np.int64), *caches)
    blk = dec.blocks[0]
    past = [torch.zeros(1, blk.heads, 0, blk.head_dim) for _ in range(2 * len(dec.blocks))]
    with torch.no_grad():
        out = dec(torch.from_numpy(PROMPT), *past)
        out = dec(torch.tensor([[5]]), *out[1:])
    for i, c in enumerate(caches):
        np.testing.assert_allclose(c[:, :, :n + 1], out[1 + i].numpy(), rtol=1e-4, atol=1e-5)
        assert not c[:, :, n + 1:].any()


def test_bound_caches_replay_in_place(tiny, exported):
    """bench/dynamic.py's bound mode: each cache one array bound as past and
    present; every step after the first replays, writes its slot into the
    caller's arrays, and the tokens are PyTorch's."""
    dec, static = tiny
    ref, _ = mdm.torch_greedy(dec, PROMPT, STEPS)
    sess = cge.InferenceSession(exported["concat", 13], kv_cache_max_len=MAX_LEN)
    ins = [i.name for i in sess.get_inputs()]
    outs = [o.name for o in sess.get_outputs()]
    caches = mdm.static_cache(static)
    out = sess.run(None, dict(zip(ins, [PROMPT] + caches + [np.array([0], np.int64)])))
    for c, x in zip(caches, out[1:]):
        c[...] = x
    ids, pos = np.empty((1, 1), np.int64), np.empty(1, np.int64)
    logits = np.empty((1, 1, TINY["vocab"]), np.float32)
    io = sess.io_binding()
    io.bind_cpu_input("input_ids", ids)
    io.bind_cpu_input("cache_position", pos)
    io.bind_ortvalue_output("logits", cge.OrtValue(logits))
    for past, present, c in zip(ins[1:-1], outs[1:], caches):
        io.bind_cpu_input(past, c)
        io.bind_ortvalue_output(present, cge.OrtValue(c))
    tokens = [int(out[0][0, -1].argmax())]
    n = PROMPT.shape[1]
    for i in range(STEPS):
        ids[0, 0], pos[0] = tokens[-1], n + i
        before = [c[:, :, n + i].copy() for c in caches]
        sess.run_with_iobinding(io)
        tokens.append(int(logits[0, -1].argmax()))
        assert sess.last_run_mode() == "replay" or i == 0
        assert all(not np.array_equal(b, c[:, :, n + i]) for b, c in zip(before, caches))
    assert tokens == ref


def test_a_step_past_the_end_is_an_error(tiny, exported):
    _, static = tiny
    sess = cge.InferenceSession(exported["concat", 13], kv_cache_max_len=MAX_LEN)
    step = mdm.rewritten_step(sess)
    with pytest.raises(cge.Error, match="ScatterElements"):
        step(np.array([[1]], np.int64), np.array([MAX_LEN], np.int64), *mdm.static_cache(static))


def test_the_static_form_itself_is_refused(exported):
    with pytest.raises(cge.Error, match=r"\[meta\] kv_cache_max_len: .*no concat-form cache"):
        cge.InferenceSession(exported["static", 13], kv_cache_max_len=MAX_LEN)


def test_an_unknown_use_of_the_length_names_the_construct(tmp_path):
    """A graph that reads the cache length as data (here a Mul of the
    activations by it) cannot be rewritten: the error names the node."""
    import torch

    class Odd(torch.nn.Module):
        def forward(self, x, past):
            k = torch.cat([past, x], 2)
            scale = k.size(2)
            return torch.softmax(torch.matmul(x, k.transpose(-1, -2)), -1) * scale, k

    path = str(tmp_path / "odd.onnx")
    torch.onnx.export(Odd(), (torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 5, 4)), path,
                      opset_version=13, input_names=["x", "past"], output_names=["y", "present"],
                      dynamic_axes={"x": {2: "seq"}, "past": {2: "past_len"},
                                    "y": {2: "seq"}, "present": {2: "total"}})
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession(path, kv_cache_max_len=8)
    msg = str(e.value)
    assert "[meta] kv_cache_max_len: the length of cache 'past' reaches" in msg
    assert "a length used as data or as a shape" in msg
    # The same graph without the option runs as exported.
    sess = cge.InferenceSession(path)
    y, present = sess.run(None, {"x": np.ones((1, 2, 3, 4), np.float32),
                                 "past": np.ones((1, 2, 5, 4), np.float32)})
    assert present.shape == (1, 2, 8, 4)


def test_compile_option_runs_the_pass(exported):
    """cge_compile with kv_cache_max_len (the pass manager's prepare pass):
    the plan's graph has the static interface."""
    import ctypes
    from cge import _lib
    lib = _lib.lib
    lib.cge_plan_graph.restype, lib.cge_plan_graph.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    lib.cge_graph_num_inputs.restype = ctypes.c_int32
    lib.cge_graph_num_inputs.argtypes = [ctypes.c_void_p]
    lib.cge_graph_input.restype = ctypes.c_char_p
    lib.cge_graph_input.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    graph = ctypes.c_void_p()
    assert lib.cge_onnx_import_file(os.fsencode(exported["concat", 13]), None,
                                    ctypes.byref(graph)) == 0
    try:
        for max_len, want in ((0, None), (MAX_LEN, "cache_position")):
            co = _lib.CompileOptions()
            co.allow_incomplete = True
            co.kv_cache_max_len = max_len
            plan = ctypes.c_void_p()
            assert lib.cge_compile(graph, None, 0, ctypes.byref(co), ctypes.byref(plan)) == 0
            pg = lib.cge_plan_graph(plan)
            n = lib.cge_graph_num_inputs(pg)
            last = lib.cge_graph_input(pg, n - 1).decode()
            lib.cge_plan_destroy(plan)
            assert (last == "cache_position") == (want is not None)
            assert n == 1 + 2 * TINY["layers"] + (want is not None)
        # Static shapes of the concat interface (any past length): a
        # complete plan of the static form.
        shapes = (_lib.Shape * (1 + 2 * TINY["layers"]))()
        for k, dims in enumerate([[1, 1]] + [[1, 2, 7, 16]] * (2 * TINY["layers"])):
            shapes[k].rank = len(dims)
            for j, d in enumerate(dims):
                shapes[k].dims[j] = d
        co = _lib.CompileOptions()
        co.kv_cache_max_len = MAX_LEN
        plan = ctypes.c_void_p()
        assert lib.cge_compile(graph, shapes, len(shapes), ctypes.byref(co),
                               ctypes.byref(plan)) == 0
        lib.cge_plan_is_complete.restype = ctypes.c_bool
        lib.cge_plan_is_complete.argtypes = [ctypes.c_void_p]
        try:
            assert lib.cge_plan_is_complete(plan)
            assert lib.cge_graph_num_inputs(lib.cge_plan_graph(plan)) == len(shapes) + 1
        finally:
            lib.cge_plan_destroy(plan)
    finally:
        lib.cge_graph_destroy(graph)


def _rewritten_ops(path, max_len):
    """{op: count} of the graph at `path` after cge_graph_kv_cache_static."""
    import collections
    import ctypes
    from cge import _lib
    lib = _lib.lib
    lib.cge_graph_kv_cache_static.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.cge_graph_num_nodes.restype = ctypes.c_int32
    lib.cge_graph_num_nodes.argtypes = [ctypes.c_void_p]
    lib.cge_graph_node.restype, lib.cge_graph_node.argtypes = ctypes.c_void_p, [ctypes.c_void_p,
                                                                                ctypes.c_int32]
    lib.cge_node_op_type.restype, lib.cge_node_op_type.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    graph = ctypes.c_void_p()
    assert lib.cge_onnx_import_file(os.fsencode(path), None, ctypes.byref(graph)) == 0
    try:
        assert lib.cge_graph_kv_cache_static(graph, max_len) == 0
        return collections.Counter(
            lib.cge_node_op_type(lib.cge_graph_node(graph, i)).decode()
            for i in range(lib.cge_graph_num_nodes(graph)))
    finally:
        lib.cge_graph_destroy(graph)


def test_caches_share_one_index_and_mask(exported):
    """The export's view(b, s, h, d) leaves the new keys' and values'
    length an anonymous -1 (the positions' Range has no symbolic length):
    the caches still share one scatter index (Shape, Gather, Range, Add,
    Reshape, Expand) and the key caches one mask (Less), not one per cache
    (bench/dynamic.py's (e) ran 45 steps more per token than the static
    export for it). ScatterElements checks each cache's new values against
    the shared index at run time; the tokens tests cover the result."""
    for opset in (13, 17):
        ops = _rewritten_ops(exported["concat", opset], MAX_LEN)
        assert ops["ScatterElements"] == 2 * TINY["layers"], ops
        assert ops["Expand"] == 1, ops
        assert ops["Less"] == 1, ops
        assert ops["And"] == TINY["layers"], ops   # each layer's causal Where, and-ed


def test_a_shared_index_checks_each_cache(tmp_path):
    """Keys and values whose new lengths are anonymous (view(.., -1, ..))
    share one index; a run whose values are longer than the keys (the
    concat form fails at its MatMul) is an error, not a write of the wrong
    slots; equal lengths give the concat form's attention."""
    import torch

    class Attn(torch.nn.Module):
        def forward(self, x, y, past_k, past_v):
            k = torch.cat([past_k, x.view(1, 2, -1, 4)], 2)
            v = torch.cat([past_v, y.view(1, 2, -1, 4)], 2)
            w = torch.softmax(torch.matmul(x.view(1, 2, -1, 4), k.transpose(-1, -2)), -1)
            return torch.matmul(w, v), k, v

    path = str(tmp_path / "attn.onnx")
    torch.onnx.export(Attn(), (torch.zeros(1, 3, 8), torch.zeros(1, 3, 8), torch.zeros(1, 2, 5, 4),
                               torch.zeros(1, 2, 5, 4)), path, opset_version=13,
                      input_names=["x", "y", "past_k", "past_v"],
                      output_names=["out", "present_k", "present_v"],
                      dynamic_axes={"x": {1: "sx"}, "y": {1: "sy"}, "past_k": {2: "past_len"},
                                    "past_v": {2: "past_len"}})
    ops = _rewritten_ops(path, 8)
    assert ops["ScatterElements"] == 2 and ops["Expand"] == 1, ops
    sess = cge.InferenceSession(path, kv_cache_max_len=8)
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((1, n, 8)).astype(np.float32) for n in (2, 2))
    past = rng.standard_normal((1, 2, 8, 4)).astype(np.float32)
    out, pk, pv = sess.run(None, {"x": x, "y": y, "past_k": past, "past_v": past.copy(),
                                  "cache_position": np.array([3], np.int64)})
    want = Attn()(*(torch.from_numpy(a) for a in (x, y, past[:, :, :3], past[:, :, :3])))
    np.testing.assert_allclose(out, want[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pv[:, :, :5], want[2].numpy(), rtol=0, atol=0)
    with pytest.raises(cge.Error):
        sess.run(None, {"x": x, "y": np.zeros((1, 3, 8), np.float32), "past_k": past,
                        "past_v": past.copy(), "cache_position": np.array([3], np.int64)})


def _arange_mask_decoder(masked=True):
    """A second export style: no causal buffer; the mask is built from
    positions (key slots arange(total) <= query positions arange(past, past
    + seq)) and added to the scores, Llama-like, one fused qkv projection.
    masked=False: no mask at all (every token sees every key, the prompt's
    included), so only the rewrite's own mask hides the unwritten slots."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.masked = masked
            self.heads, self.head_dim = heads, d // heads
            self.ln, self.qkv, self.o = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x, past_k, past_v, q_pos):
            b, s, d = x.shape
            q, k, v = (t.view(b, s, self.heads, self.head_dim).transpose(1, 2)
                       for t in self.qkv(self.ln(x)).split(d, -1))
            k, v = torch.cat([past_k, k], 2), torch.cat([past_v, v], 2)
            allowed = torch.arange(k.size(2)).unsqueeze(0) <= q_pos.unsqueeze(1)
            bias = torch.where(allowed, torch.tensor(0.0), torch.tensor(-1e9))
            w = torch.matmul(q, k.transpose(-1, -2)) * self.head_dim ** -0.5
            if self.masked:
                w = w + bias
            a = torch.matmul(torch.softmax(w, -1), v).transpose(1, 2).reshape(b, s, d)
            return x + self.o(a), k, v

    class Decoder(nn.Module):
        def __init__(self, layers=2, d=32, heads=2, vocab=50, max_pos=64):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_pos, d)
            self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
            self.head = nn.Linear(d, vocab)

        def forward(self, ids, *past):
            p = past[0].size(2)
            q_pos = torch.arange(p, p + ids.size(1))
            x = self.tok(ids) + self.pos(q_pos).unsqueeze(0)
            presents = []
            for i, blk in enumerate(self.blocks):
                x, k, v = blk(x, past[2 * i], past[2 * i + 1], q_pos)
                presents += [k, v]
            return (self.head(x), *presents)

    torch.manual_seed(5)
    return Decoder().eval()


@pytest.mark.parametrize("opset,masked", [(13, True), (17, True), (13, False)])
def test_a_position_mask_export_is_rewritten(tmp_path, opset, masked):
    """The second style: Range over the key slots (all max_len of them), the
    query positions pos + arange(seq), an additive mask or none (the rewrite
    adds a Where before the Softmax: without it the unwritten slots' zero
    keys would take weight and change the tokens). Tokens equal PyTorch's."""
    import types
    dec = _arange_mask_decoder(masked)
    path = str(tmp_path / "arange.onnx")
    mdm.export_concat(dec, path, opset=opset)
    shapes = types.SimpleNamespace(dec=dec, max_len=MAX_LEN)
    ref, logits = mdm.torch_greedy(dec, PROMPT, STEPS)
    sess = cge.InferenceSession(path, kv_cache_max_len=MAX_LEN)
    got, first = mdm.static_greedy(mdm.rewritten_step(sess), shapes, PROMPT, STEPS)
    assert got == ref
    np.testing.assert_allclose(first, logits, rtol=1e-4, atol=1e-4)


def _gpt2_like_decoder():
    """A third style, GPT-2-shaped: an attention_mask input [batch, past +
    seq] added to the scores ((1 - mask) * -10000), a causal buffer made
    with tril inside forward, a fused qkv projection."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d=32, heads=2):
            super().__init__()
            self.heads, self.head_dim = heads, d // heads
            self.ln, self.qkv, self.o = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)

        def forward(self, x, pk, pv, amask):
            b, n, d = x.shape
            q, k, v = (t.view(b, n, self.heads, self.head_dim).transpose(1, 2)
                       for t in self.qkv(self.ln(x)).split(d, -1))
            k, v = torch.cat([pk, k], 2), torch.cat([pv, v], 2)
            total = k.size(2)
            causal = torch.tril(torch.ones(64, 64, dtype=torch.bool))[total - n:total, :total]
            w = torch.where(causal, torch.matmul(q, k.transpose(-1, -2)) / 4.0,
                            torch.tensor(-1e4))
            w = w + (1.0 - amask[:, None, None, :]) * -10000.0
            a = torch.matmul(torch.softmax(w, -1), v).transpose(1, 2).reshape(b, n, d)
            return x + self.o(a), k, v

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(50, 32), nn.Embedding(64, 32)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(32, 50)

        def forward(self, ids, amask, *past):
            p = past[0].size(2)
            x = self.tok(ids) + self.pos(torch.arange(p, p + ids.size(1))).unsqueeze(0)
            presents = []
            for i, blk in enumerate(self.blocks):
                x, k, v = blk(x, past[2 * i], past[2 * i + 1], amask)
                presents += [k, v]
            return (self.head(x), *presents)

    torch.manual_seed(0)
    return Decoder().eval()


def test_an_attention_mask_input_becomes_max_len(tmp_path):
    """An input sized by the presents' length symbol (attention_mask [batch,
    total_len]) is declared [batch, max_len] after the rewrite: a shorter
    mask is a [session] error naming it, and with a mask of ones over the
    max_len slots the tokens are PyTorch's (the rewrite's mask hides the
    slots not written)."""
    import torch
    dec = _gpt2_like_decoder()
    ins, outs = mdm.decoder_io_names(2)
    ins = [ins[0], "attention_mask"] + ins[1:]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"},
            "attention_mask": {0: "batch", 1: "total_len"}}
    axes.update({n: {0: "batch", 2: "past_len"} for n in ins[2:]})
    axes.update({n: {0: "batch", 2: "total_len"} for n in outs[1:]})
    path = str(tmp_path / "gpt2_like.onnx")
    past = tuple(torch.zeros(1, 2, 3, 16) for _ in range(4))
    torch.onnx.export(dec, (torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 7)) + past, path,
                      opset_version=13, input_names=ins, output_names=outs, dynamic_axes=axes)
    sess = cge.InferenceSession(path, kv_cache_max_len=MAX_LEN)
    assert sess.get_inputs()[1].shape == ["batch", MAX_LEN]
    names = [i.name for i in sess.get_inputs()]
    caches = [np.zeros((1, 2, MAX_LEN, 16), np.float32) for _ in range(4)]
    with pytest.raises(cge.Error, match="attention_mask"):
        sess.run(None, dict(zip(names, [PROMPT, np.ones((1, 5), np.float32)] + caches
                                + [np.array([0], np.int64)])))
    ones = np.ones((1, MAX_LEN), np.float32)
    # PyTorch: the concat form with a growing mask of ones.
    with torch.no_grad():
        out = dec(torch.from_numpy(PROMPT), torch.ones(1, PROMPT.shape[1]),
                  *[torch.zeros(1, 2, 0, 16)] * 4)
        ref = [int(out[0][0, -1].argmax())]
        for i in range(STEPS):
            out = dec(torch.tensor([[ref[-1]]]), torch.ones(1, PROMPT.shape[1] + i + 1), *out[1:])
            ref.append(int(out[0][0, -1].argmax()))
    logits, *caches = sess.run(None, dict(zip(names, [PROMPT, ones] + caches +
                                              [np.array([0], np.int64)])))
    got = [int(logits[0, -1].argmax())]
    for i in range(STEPS):
        logits, *caches = sess.run(None, dict(zip(names, [np.array([[got[-1]]]), ones] + caches +
                                                  [np.array([PROMPT.shape[1] + i], np.int64)])))
        got.append(int(logits[0, -1].argmax()))
    assert got == ref


def test_cli_kv_cache_max_len(exported, tmp_path):
    """cge compile / run with --kv-cache-max-len: the .cgm has the static
    interface and its prefill logits are the session's; misuse is refused."""
    import subprocess
    cli = os.path.join(os.path.dirname(cge.library_path), "cge")
    assert os.path.isfile(cli), cli

    def run(*args, rc=0):
        p = subprocess.run([cli] + [str(a) for a in args], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == rc, (args, p.stdout, p.stderr)
        return p.stderr
    cgm = tmp_path / "rw.cgm"
    run("compile", exported["concat", 13], "--kv-cache-max-len", MAX_LEN, "-o", cgm)
    inputs = {"input_ids": PROMPT, "cache_position": np.array([0], np.int64)}
    ins, _ = mdm.decoder_io_names(TINY["layers"])
    for name in ins[1:]:
        inputs[name] = np.zeros((1, 2, MAX_LEN, 16), np.float32)
    args = []
    for name, a in inputs.items():
        np.save(tmp_path / (name + ".npy"), a)
        args += ["--input", "%s=%s" % (name, tmp_path / (name + ".npy"))]
    out = tmp_path / "out"
    run("run", cgm, *args, "--output-dir", out)
    sess = cge.InferenceSession(exported["concat", 13], kv_cache_max_len=MAX_LEN)
    want = sess.run(None, inputs)
    np.testing.assert_allclose(np.load(out / "logits.npy"), want[0], rtol=1e-5, atol=1e-6)
    assert "no concat-form cache" in run("run", exported["static", 13], "--kv-cache-max-len",
                                         MAX_LEN, rc=1)
    assert "applies to .onnx" in run("run", cgm, "--kv-cache-max-len", MAX_LEN, rc=2)
    assert "want a positive length" in run("run", exported["concat", 13], "--kv-cache-max-len",
                                           0, rc=2)
