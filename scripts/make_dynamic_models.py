#!/usr/bin/env python3
# Generates the ONNX models of `make bench-dynamic` (bench/dynamic.py), with
# symbolic dimensions (torch.onnx.export's dynamic_axes, opset 13), random
# weights from fixed seeds, each with a reference input and PyTorch's output
# (<name>.npz beside <name>.onnx):
#   resnet18_dyn     torchvision resnet18 (weights=None); input [batch,3,224,224]
#   encoder_dyn      TransformerEncoder (4 layers, d_model 256, 4 heads, ff 1024,
#                    batch_first); input [batch,seq,256]
#   decoder_dyn      a GPT-like decoder (DECODER below): input_ids [batch,seq]
#                    int64 and past_key_i / past_value_i [batch,4,past_len,64]
#                    for i < 4; outputs logits [batch,seq,1000] and
#                    present_key_i / present_value_i (past and new, concatenated).
#   decoder_static   the same decoder (same weights) with a static cache
#                    (StaticDecoder below): ids [1,seq] int64, pos [1] int64
#                    (the position of ids[0,0]), past_key_i / past_value_i
#                    [1,heads 4,MAX_LEN,64] for i < 4; outputs logits
#                    [1,seq,1000] and present_key_i / present_value_i, the
#                    caches with slots pos..pos+seq-1 overwritten. Only seq is symbolic:
#                    the prefill runs once at seq = prompt length, every
#                    decoding step at seq 1 with the same shapes.
# The concat decoder is exported with a past of length 3 and run with past_len
# 0 for the prefill (an empty past: ONNX Runtime and cge both take 0-length
# tensors), so one file serves the prefill and every decoding step.
"""Usage: make_dynamic_models.py OUT_DIR [resnet18_dyn encoder_dyn decoder_dyn decoder_static]"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_test_models  # noqa: E402  (the static models these generalise)

MODELS = ("resnet18_dyn", "encoder_dyn", "decoder_dyn", "decoder_static")
OPSET = 13
# The decoder's hyper-parameters (bench/dynamic.py reads them).
DECODER = dict(layers=4, d_model=256, heads=4, vocab=1000, max_pos=256, ff=1024)
PROMPT_LEN = 16
# The static cache's length: the prompt, 64 steps and slack.
MAX_LEN = 128


def _decoder_class():
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d, heads, ff, max_pos):
            super().__init__()
            self.heads, self.head_dim = heads, d // heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
            self.act = nn.GELU()
            # Causal mask as GPT-2 keeps it: a [max, max] lower triangle, sliced
            # to [past + seq - seq : past + seq, : past + seq] per call.
            self.register_buffer("causal", torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool))
                                 .view(1, 1, max_pos, max_pos), persistent=False)
            self.register_buffer("masked", torch.tensor(-1e9), persistent=False)

        def split(self, t):
            b, s = t.size(0), t.size(1)
            return t.view(b, s, self.heads, self.head_dim).transpose(1, 2)

        def forward(self, x, past_k, past_v):
            b, s = x.size(0), x.size(1)
            h = self.ln1(x)
            q, k, v = self.split(self.q(h)), self.split(self.k(h)), self.split(self.v(h))
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
            total = k.size(2)
            w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            mask = self.causal[:, :, total - s:total, :total]
            w = torch.where(mask, w, self.masked)
            a = torch.matmul(torch.softmax(w, dim=-1), v)
            a = a.transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
            x = x + self.o(a)
            x = x + self.fc2(self.act(self.fc1(self.ln2(x))))
            return x, k, v

    class Decoder(nn.Module):
        """GPT-like: token and learned position embeddings, pre-LN blocks with a
        causal mask and a key/value cache, final LayerNorm, untied LM head."""

        def __init__(self, layers, d_model, heads, vocab, max_pos, ff):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Embedding(max_pos, d_model)
            self.blocks = nn.ModuleList(Block(d_model, heads, ff, max_pos) for _ in range(layers))
            self.ln = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab)

        def forward(self, input_ids, *past):
            s = input_ids.size(1)
            past_len = past[0].size(2)
            positions = torch.arange(past_len, past_len + s, dtype=torch.long).unsqueeze(0)
            x = self.tok(input_ids) + self.pos(positions)
            presents = []
            for i, blk in enumerate(self.blocks):
                x, k, v = blk(x, past[2 * i], past[2 * i + 1])
                presents += [k, v]
            return (self.head(self.ln(x)), *presents)

    return Decoder


def _static_decoder_class():
    import torch
    from torch import nn

    class StaticDecoder(nn.Module):
        """A Decoder (above) run with a static key/value cache: a call writes
        the keys and values of its seq tokens at slots pos..pos+seq-1 of
        caches with max_len slots (pos a [1] int64 input) instead of
        concatenating them, then attends to the slots <= each token's own
        position. Every input shape but ids' seq is fixed, so all decoding
        steps (seq 1) have the same shapes; pos changes values only.

        Caches: one per layer and kind, as the concat form's (past_key_i,
        past_value_i in, present_key_i, present_value_i out), each [1, heads,
        max_len, head_dim]. Each present is its past's ScatterElements and
        nothing else, so a caller that binds one buffer as past and present
        (I/O binding) has cge write the seq slots in place, with no copy of
        the cache (docs/guide.md, "Static-cache decoding"). (One stacked
        [layers, ...] tensor per kind, the earlier form, copied each cache
        three times a step: the layer's Gather, the scatter, the stack.) The
        write is torch.scatter (ONNX ScatterElements, opset 11+; indices pos +
        arange(seq)), with no shape that depends on pos's value. (A one-hot
        MatMul and Where in its place ran 1.2-1.6x slower per token.) Slots
        past the last written one hold what the caller's initial cache held
        (zeros) and are masked with the concat form's -1e9, so softmax gives
        them weight 0 and the tokens equal the concat decoder's. The caller
        keeps pos + seq <= max_len."""

        def __init__(self, dec, max_len):
            super().__init__()
            self.dec, self.max_len = dec, max_len  # shares dec's parameters
            self.register_buffer("slots", torch.arange(max_len), persistent=False)

        def forward(self, ids, pos, *past):
            dec = self.dec
            s = ids.size(1)
            at = pos + torch.arange(s)                         # [s] the slots written
            x = dec.tok(ids) + dec.pos(at).unsqueeze(0)
            visible = self.slots.unsqueeze(0) <= at.unsqueeze(1)   # [s, max_len]
            presents = []
            for i, blk in enumerate(dec.blocks):
                h = blk.ln1(x)
                q, k, v = blk.split(blk.q(h)), blk.split(blk.k(h)), blk.split(blk.v(h))
                index = at.view(1, 1, s, 1).expand(1, blk.heads, s, blk.head_dim)
                k = torch.scatter(past[2 * i], 2, index, k)       # [1, heads, max_len, head_dim]
                v = torch.scatter(past[2 * i + 1], 2, index, v)
                w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(blk.head_dim)
                w = torch.where(visible, w, blk.masked)
                a = torch.matmul(torch.softmax(w, dim=-1), v)
                a = a.transpose(1, 2).reshape(1, s, blk.heads * blk.head_dim)
                x = x + blk.o(a)
                x = x + blk.fc2(blk.act(blk.fc1(blk.ln2(x))))
                presents += [k, v]
            return (dec.head(dec.ln(x)), *presents)

    return StaticDecoder


def decoder(**dims):
    """A Decoder in eval mode, DECODER's hyper-parameters but those given
    (the tests make small ones), random weights from seed 0."""
    import torch
    torch.manual_seed(0)
    return _decoder_class()(**dict(DECODER, **dims)).eval()


def static_io_names(model):
    """A StaticDecoder's (input names, output names): ids, pos and
    past_key_i / past_value_i per layer in; logits and present_key_i /
    present_value_i out (the concat form's cache names)."""
    n = len(model.dec.blocks)
    past = [f"past_{kv}_{i}" for i in range(n) for kv in ("key", "value")]
    present = [f"present_{kv}_{i}" for i in range(n) for kv in ("key", "value")]
    return ["ids", "pos"] + past, ["logits"] + present


def static_decoder(dec, max_len=MAX_LEN):
    """The static-cache form of a Decoder module (its weights shared)."""
    return _static_decoder_class()(dec, max_len).eval()


def static_cache_shapes(model):
    """The shapes of a StaticDecoder's caches, in input order (past_key_0,
    past_value_0, past_key_1, ...): [1, heads, max_len, head_dim] each."""
    blk = model.dec.blocks[0]
    return [(1, blk.heads, model.max_len, blk.head_dim)] * (2 * len(model.dec.blocks))


def static_cache(model):
    """Zeroed caches for a StaticDecoder, as a list of numpy arrays."""
    return [np.zeros(s, np.float32) for s in static_cache_shapes(model)]


def export_static(model, path, opset=OPSET):
    """torch.onnx.export of a StaticDecoder: ids [1, seq], only seq symbolic."""
    import torch
    ids = torch.zeros((1, 4), dtype=torch.long)
    pos = torch.tensor([3], dtype=torch.long)
    past = tuple(torch.from_numpy(a) for a in static_cache(model))
    axes = {"ids": {1: "seq"}, "logits": {1: "seq"}}
    ins, outs = static_io_names(model)
    torch.onnx.export(model, (ids, pos) + past, path, opset_version=opset,
                      input_names=ins, output_names=outs,
                      dynamic_axes=axes, do_constant_folding=True)


def static_greedy(step, model, ids, steps):
    """Greedy decoding with a static-cache model: step(ids, pos, *caches) ->
    (logits, *presents), numpy in and out. Prefills ids ([1, n]) in one call
    at pos 0, then `steps` calls of one token at pos n, n+1, ... Returns (the
    steps + 1 tokens, prefill logits)."""
    caches = static_cache(model)
    n = ids.shape[1]
    logits, *caches = step(ids, np.array([0], np.int64), *caches)
    first = logits
    tokens = [int(logits[0, -1].argmax())]
    for i in range(steps):
        logits, *caches = step(np.array([[tokens[-1]]], np.int64), np.array([n + i], np.int64),
                               *caches)
        tokens.append(int(logits[0, -1].argmax()))
    return tokens, first


def torch_static_step(model):
    """A static_greedy step function running `model` in PyTorch."""
    import torch

    def step(ids, pos, *caches):
        with torch.no_grad():
            out = model(*(torch.from_numpy(np.asarray(a)) for a in (ids, pos) + caches))
        return tuple(o.numpy() for o in out)
    return step


def export_concat(model, path, opset=OPSET):
    """torch.onnx.export of a Decoder in the concat form (decoder_dyn's
    interface: input_ids, past_key_i / past_value_i in, logits and
    present_key_i / present_value_i out; batch, seq, past_len dynamic),
    traced with a past of length 3."""
    import torch
    blk = model.blocks[0]
    n = len(model.blocks)
    ins, outs = decoder_io_names(n)
    axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    for name in ins[1:]:
        axes[name] = {0: "batch", 2: "past_len"}
    for name in outs[1:]:
        axes[name] = {0: "batch", 2: "total_len"}
    ids = torch.zeros((1, 4), dtype=torch.long)
    past = tuple(torch.zeros(1, blk.heads, 3, blk.head_dim) for _ in range(2 * n))
    torch.onnx.export(model, (ids,) + past, path, opset_version=opset, input_names=ins,
                      output_names=outs, dynamic_axes=axes, do_constant_folding=True)


def rewritten_step(sess):
    """A static_greedy step function for a concat-form export run with
    kv_cache_max_len: its inputs are input_ids, the caches, then
    cache_position (the static form's pos)."""
    names = [i.name for i in sess.get_inputs()]

    def step(ids, pos, *caches):
        return sess.run(None, dict(zip(names, (ids,) + tuple(caches) + (pos,))))
    return step


def decoder_io_names(n=None):
    n = DECODER["layers"] if n is None else n
    past = [f"past_{kv}_{i}" for i in range(n) for kv in ("key", "value")]
    present = [f"present_{kv}_{i}" for i in range(n) for kv in ("key", "value")]
    return ["input_ids"] + past, ["logits"] + present


def empty_past(batch=1, length=0):
    """The decoder's past inputs as numpy arrays of past_len `length`."""
    hd = DECODER["d_model"] // DECODER["heads"]
    return [np.zeros((batch, DECODER["heads"], length, hd), np.float32)
            for _ in range(2 * DECODER["layers"])]


def build(name):
    """(torch module in eval mode, example inputs tuple) for a model name, seeded."""
    import torch
    if name == "resnet18_dyn":   # the same module (and seed) as the static test model
        model, x = make_test_models.build("resnet18")
        return model, (x,)
    if name == "encoder_dyn":
        model, _ = make_test_models.build("transformer_encoder")
        return model, (torch.randn(1, 16, 256),)
    if name == "decoder_dyn":
        model = decoder()
        ids = torch.randint(0, DECODER["vocab"], (1, 4), generator=torch.Generator().manual_seed(1))
        past = tuple(torch.from_numpy(a) for a in empty_past(1, 3))
        for p in past:
            p.normal_(generator=torch.Generator().manual_seed(2))
        return model, (ids,) + past
    if name == "decoder_static":  # decoder_dyn's module (same seed, same weights)
        model = static_decoder(build("decoder_dyn")[0])
        ids = torch.zeros((1, 4), dtype=torch.long)
        past = tuple(torch.from_numpy(a) for a in static_cache(model))
        return model, (ids, torch.tensor([3])) + past
    raise ValueError("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))


def prompt():
    """The decoder's prompt: PROMPT_LEN token ids, [1, PROMPT_LEN] int64."""
    rng = np.random.default_rng(3)
    return rng.integers(0, DECODER["vocab"], size=(1, PROMPT_LEN), dtype=np.int64)


def torch_greedy(model, ids, steps):
    """PyTorch's greedy continuation of ids ([1, n] int64): prefill with an
    empty past (its argmax is the first token), then `steps` steps, each
    feeding the last token with the presents as the past. Returns (the
    steps + 1 tokens, prefill logits [1, n, vocab] numpy)."""
    import torch
    blk = model.blocks[0]
    past = [torch.zeros(ids.shape[0], blk.heads, 0, blk.head_dim)
            for _ in range(2 * len(model.blocks))]
    with torch.no_grad():
        out = model(torch.from_numpy(ids), *past)
        first = out[0].numpy()
        tokens = [int(out[0][0, -1].argmax())]
        for _ in range(steps):
            out = model(torch.tensor([[tokens[-1]]], dtype=torch.long), *out[1:])
            tokens.append(int(out[0][0, -1].argmax()))
    return tokens, first


def _export(name, model, args, path):
    import torch
    if name == "decoder_static":
        export_static(model, path)
        return
    if name == "decoder_dyn":
        ins, outs = decoder_io_names()
        axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
        for n in ins[1:]:
            axes[n] = {0: "batch", 2: "past_len"}
        for n in outs[1:]:
            axes[n] = {0: "batch", 2: "total_len"}
    else:
        ins, outs = ["input"], ["output"]
        dyn = {0: "batch"} if name == "resnet18_dyn" else {0: "batch", 1: "seq"}
        axes = {"input": dyn, "output": dyn}
    # Exported with autograd enabled: under no_grad, PyTorch's fused inference
    # path for TransformerEncoder replaces the ops the exporter knows.
    torch.onnx.export(model, args, path, opset_version=OPSET, input_names=ins,
                      output_names=outs, dynamic_axes=axes, do_constant_folding=True)


# A model whose graph changes gets a new version here, so that a cached
# export of the old graph (its inputs, its outputs) is made again instead of
# being run with the new inputs. decoder_static 2: one cache per layer.
VERSIONS = {"decoder_static": 2}


def _cached_version(out_dir, name):
    try:
        with open(os.path.join(out_dir, name + ".version")) as f:
            return int(f.read().strip() or 1)
    except (OSError, ValueError):
        return 1


def make(name, out_dir):
    """Export `name` into out_dir (once per version); returns (onnx path, npz path)."""
    import torch
    onnx_path = os.path.join(out_dir, name + ".onnx")
    npz_path = os.path.join(out_dir, name + ".npz")
    version = VERSIONS.get(name, 1)
    if (os.path.exists(onnx_path) and os.path.exists(npz_path)
            and _cached_version(out_dir, name) == version):
        return onnx_path, npz_path
    os.makedirs(out_dir, exist_ok=True)
    model, args = build(name)
    tmp = onnx_path + ".tmp"
    _export(name, model, args, tmp)
    if name == "decoder_dyn":
        ids = prompt()
        tokens, logits = torch_greedy(model, ids, 8)
        ref = dict(input_ids=ids, logits=logits, greedy_tokens=np.array(tokens, np.int64))
    elif name == "decoder_static":
        # The tokens are the concat decoder's (PyTorch), the logits the static module's prefill.
        ids = prompt()
        tokens, _ = torch_greedy(model.dec, ids, 8)
        _, logits = static_greedy(torch_static_step(model), model, ids, 0)
        ref = dict(ids=ids, logits=logits, greedy_tokens=np.array(tokens, np.int64))
    else:
        x = args[0]
        if name == "encoder_dyn":
            x = torch.randn(1, 16, 256, generator=torch.Generator().manual_seed(4))
        with torch.no_grad():
            ref = dict(input=x.numpy(), output=model(x).numpy())
    np.savez(npz_path + ".tmp.npz", **ref)
    os.replace(npz_path + ".tmp.npz", npz_path)
    os.replace(tmp, onnx_path)
    with open(os.path.join(out_dir, name + ".version"), "w") as f:
        f.write("%d\n" % version)
    return onnx_path, npz_path


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    for name in argv[2:] or MODELS:
        onnx_path, _ = make(name, argv[1])
        print("%s (%d bytes)" % (onnx_path, os.path.getsize(onnx_path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
