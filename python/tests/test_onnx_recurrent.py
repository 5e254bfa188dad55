# Recurrent layers exported by torch.onnx at the opsets exporters still emit
# (LSTM/GRU/RNN version 7 up to opset 13, version 14 after), run through
# cge.InferenceSession and compared with PyTorch's own outputs.
import io

import numpy as np
import pytest

import cge

import onnx  # noqa: F401  (required: conftest.REQUIRED)
import torch

HIDDEN, INPUT, SEQ, BATCH = 7, 5, 4, 3


def export(module, args, opset, **kwargs):
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, args, f, opset_version=opset, **kwargs)
    return f.getvalue()


def make(kind, bidirectional, batch_first=False, seed=0):
    torch.manual_seed(seed)
    m = getattr(torch.nn, kind)(INPUT, HIDDEN, num_layers=2, bidirectional=bidirectional,
                                batch_first=batch_first).eval()
    dirs = 2 * (2 if bidirectional else 1)
    x = torch.randn((BATCH, SEQ, INPUT) if batch_first else (SEQ, BATCH, INPUT))
    h0 = torch.randn(dirs, BATCH, HIDDEN)
    states = (h0, torch.randn(dirs, BATCH, HIDDEN)) if kind == "LSTM" else (h0,)
    return m, x, states


def reference(m, x, states):
    with torch.no_grad():
        y, last = m(x, states if len(states) == 2 else states[0])
    return [y] + (list(last) if isinstance(last, tuple) else [last])


def run_cge(model_bytes, tensors):
    s = cge.InferenceSession(model_bytes)
    names = [i.name for i in s.get_inputs()]
    assert len(names) == len(tensors)
    return s.run(None, {n: t.numpy() for n, t in zip(names, tensors)})


@pytest.mark.parametrize("opset", [9, 11, 13, 14])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_export_matches_pytorch(kind, bidirectional, opset):
    m, x, states = make(kind, bidirectional)
    args = (x, states if kind == "LSTM" else states[0])
    model = export(m, args, opset)
    ops = {n.op_type for n in onnx.load_from_string(model).graph.node}
    assert kind in ops  # the layer itself, not an unrolled loop
    outs = run_cge(model, [x, *states])
    refs = reference(m, x, states)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == tuple(r.shape)
        np.testing.assert_allclose(o, r.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent_batch_first_dynamic_axes_opset11(kind):
    # batch_first becomes Transposes around the layer; dynamic batch and
    # sequence axes keep the layer's dims symbolic through compilation.
    m, x, states = make(kind, True, batch_first=True, seed=1)
    args = (x, states if kind == "LSTM" else states[0])
    names = ["x", "h0"] + (["c0"] if kind == "LSTM" else [])
    axes = {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}
    for n in names[1:]:
        axes[n] = {1: "batch"}
    model = export(m, args, 11, input_names=names, output_names=["y"], dynamic_axes=axes)
    s = cge.InferenceSession(model)
    for batch, seq in ((BATCH, SEQ), (2, 6)):
        torch.manual_seed(batch * 10 + seq)
        xb = torch.randn(batch, seq, INPUT)
        sb = tuple(torch.randn(t.shape[0], batch, HIDDEN) for t in states)
        outs = s.run(None, {n: t.numpy() for n, t in zip(names, [xb, *sb])})
        refs = reference(m, xb, sb)
        for o, r in zip(outs, refs):
            np.testing.assert_allclose(o, r.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_version_7_node_at_opset_7_equals_opset_14(kind):
    # The same node under opset 7 (its first version) and 14 (layout added,
    # default 0): importing it at 7 was "[converter] unsupported operator".
    from onnx import TensorProto, helper
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((SEQ, BATCH, INPUT), dtype=np.float32)
    w = rng.standard_normal((2, gates * HIDDEN, INPUT), dtype=np.float32) * 0.3
    r = rng.standard_normal((2, gates * HIDDEN, HIDDEN), dtype=np.float32) * 0.3
    b = rng.standard_normal((2, 2 * gates * HIDDEN), dtype=np.float32) * 0.3
    inits = [helper.make_tensor(n, TensorProto.FLOAT, a.shape, a.ravel())
             for n, a in (("w", w), ("r", r), ("b", b))]
    n_out = 3 if kind == "LSTM" else 2
    outs = ["y", "yh", "yc"][:n_out]
    node = helper.make_node(kind, ["x", "w", "r", "b"], outs, hidden_size=HIDDEN,
                            direction="bidirectional")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      list(x.shape))],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                           for o in outs], inits)
    got = {}
    for opset in (7, 14):
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        got[opset] = cge.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    assert got[7][0].shape == (SEQ, 2, BATCH, HIDDEN)
    for a, b14 in zip(got[7], got[14]):
        np.testing.assert_array_equal(a, b14)


# Odd sizes around the kernel's tiles: hidden 1 and 3 (one partial 16-column
# panel), 17 (a full panel and one column), one time step, a batch of 1, 5
# (four rows and one in the small-batch product) and 13 (the GEMM's 12-row
# tile and one); one layer, both directions.
@pytest.mark.parametrize("hidden,seq,batch", [(1, 3, 2), (3, 1, 5), (17, 2, 1), (3, 4, 13),
                                              (33, 3, 4)])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_odd_sizes_match_pytorch(kind, bidirectional, hidden, seq, batch):
    torch.manual_seed(hidden * 100 + seq * 10 + batch)
    m = getattr(torch.nn, kind)(INPUT, hidden, bidirectional=bidirectional).eval()
    dirs = 2 if bidirectional else 1
    x = torch.randn(seq, batch, INPUT)
    h0 = torch.randn(dirs, batch, hidden)
    states = (h0, torch.randn(dirs, batch, hidden)) if kind == "LSTM" else (h0,)
    model = export(m, (x, states if kind == "LSTM" else states[0]), 14)
    outs = run_cge(model, [x, *states])
    refs = reference(m, x, states)
    for o, r in zip(outs, refs):
        assert o.shape == tuple(r.shape)
        np.testing.assert_allclose(o, r.numpy(), rtol=1e-5, atol=1e-5)
