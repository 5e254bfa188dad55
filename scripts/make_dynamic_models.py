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
# The decoder is exported with a past of length 3 and run with past_len 0 for
# the prefill (an empty past: ONNX Runtime and cge both take 0-length tensors),
# so one file serves the prefill and every decoding step.
"""Usage: make_dynamic_models.py OUT_DIR [resnet18_dyn encoder_dyn decoder_dyn]"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_test_models  # noqa: E402  (the static models these generalise)

MODELS = ("resnet18_dyn", "encoder_dyn", "decoder_dyn")
OPSET = 13
# The decoder's hyper-parameters (bench/dynamic.py reads them).
DECODER = dict(layers=4, d_model=256, heads=4, vocab=1000, max_pos=256, ff=1024)
PROMPT_LEN = 16


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


def decoder_io_names():
    n = DECODER["layers"]
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
    torch.manual_seed(0)
    if name == "decoder_dyn":
        model = _decoder_class()(**DECODER).eval()
        ids = torch.randint(0, DECODER["vocab"], (1, 4), generator=torch.Generator().manual_seed(1))
        past = tuple(torch.from_numpy(a) for a in empty_past(1, 3))
        for p in past:
            p.normal_(generator=torch.Generator().manual_seed(2))
        return model, (ids,) + past
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
    with torch.no_grad():
        past = [torch.from_numpy(a) for a in empty_past(ids.shape[0], 0)]
        out = model(torch.from_numpy(ids), *past)
        first = out[0].numpy()
        tokens = [int(out[0][0, -1].argmax())]
        for _ in range(steps):
            out = model(torch.tensor([[tokens[-1]]], dtype=torch.long), *out[1:])
            tokens.append(int(out[0][0, -1].argmax()))
    return tokens, first


def _export(name, model, args, path):
    import torch
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


def make(name, out_dir):
    """Export `name` into out_dir (once); returns (onnx path, npz path)."""
    import torch
    onnx_path = os.path.join(out_dir, name + ".onnx")
    npz_path = os.path.join(out_dir, name + ".npz")
    if os.path.exists(onnx_path) and os.path.exists(npz_path):
        return onnx_path, npz_path
    os.makedirs(out_dir, exist_ok=True)
    model, args = build(name)
    tmp = onnx_path + ".tmp"
    _export(name, model, args, tmp)
    if name == "decoder_dyn":
        ids = prompt()
        tokens, logits = torch_greedy(model, ids, 8)
        ref = dict(input_ids=ids, logits=logits, greedy_tokens=np.array(tokens, np.int64))
    else:
        x = args[0]
        if name == "encoder_dyn":
            x = torch.randn(1, 16, 256, generator=torch.Generator().manual_seed(4))
        with torch.no_grad():
            ref = dict(input=x.numpy(), output=model(x).numpy())
    np.savez(npz_path + ".tmp.npz", **ref)
    os.replace(npz_path + ".tmp.npz", npz_path)
    os.replace(tmp, onnx_path)
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
