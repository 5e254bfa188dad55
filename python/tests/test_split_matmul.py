# The packed-projection split (compiler pass split_matmul_columns): a product
# with a constant B whose result is read only through Slices/Splits of its
# last axis (nn.MultiheadAttention's in_proj, a GPT's c_attn + split) becomes
# one product per piece. Each model runs with the pass on and off
# (CGE_DISABLE_PASSES=split_matmul_columns): the results must be bit-equal,
# and the compiled graph must hold no Slice/Split of a product.
import numpy as np
import pytest

from test_attention import _export, _last_dump, _op_count
from test_attention import _session as _pass_session

torch = pytest.importorskip("torch")
nn = torch.nn

PASS = "split_matmul_columns"


def _ab(path, feeds_list, tmp_path):
    """Run with the pass and without; assert bit-equality; return the dump text."""
    dump = tmp_path / "dump"
    dump.mkdir(parents=True, exist_ok=True)
    on = _pass_session(path, True, dump, pass_name=PASS)
    off = _pass_session(path, False, pass_name=PASS)
    for feeds in feeds_list:
        got, ref = on.run(None, feeds), off.run(None, feeds)
        for g_, r_ in zip(got, ref):
            assert g_.shape == r_.shape
            assert np.array_equal(g_.view(np.uint32), r_.view(np.uint32)), \
                {k: v.shape for k, v in feeds.items()}
    return _last_dump(dump)


@pytest.mark.parametrize("d_model,nhead", [(32, 4), (36, 3)])
def test_transformer_encoder_dynamic_seq(tmp_path, d_model, nhead):
    """nn.TransformerEncoder with a dynamic sequence (batch 1: rows of 1, odd
    lengths, 64): its packed q/k/v come out of three products, no Slice."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=40, dropout=0.0,
                                       batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=2)
    path = str(tmp_path / "enc.onnx")
    _export(model, (torch.randn(1, 5, d_model),), path, ["src"], {"src": {1: "seq"}})
    rng = np.random.default_rng(0)
    feeds = [{"src": rng.standard_normal((1, s, d_model)).astype(np.float32)}
             for s in (5, 1, 7, 13, 64)]
    text = _ab(path, feeds, tmp_path)
    assert _op_count(text, "Slice") == 0, text[:3000]
    # two layers: 3 projections each, the out projection and the two MLP products
    assert _op_count(text, "FusedMatMul") == 2 * 6, text[:3000]


def test_gpt_qkv_split(tmp_path):
    """A GPT block's c_attn (one Linear to 3d) and torch.split: an ONNX Split
    on the last axis; a static shape with one row and with 9 rows."""
    torch.manual_seed(1)

    class Block(nn.Module):
        def __init__(self, d=24, heads=3):
            super().__init__()
            self.qkv, self.o, self.h = nn.Linear(d, 3 * d), nn.Linear(d, d), heads

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(x).split(d, dim=2)
            q, k, v = (t.view(b, s, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
            a = torch.softmax(q @ k.transpose(-1, -2) / 8.0, dim=-1) @ v
            return self.o(a.transpose(1, 2).reshape(b, s, d))

    for rows in (1, 9):
        path = str(tmp_path / ("gpt%d.onnx" % rows))
        _export(Block(), (torch.randn(1, rows, 24),), path, ["x"], None)
        feeds = [{"x": np.random.default_rng(rows).standard_normal((1, rows, 24))
                  .astype(np.float32)}]
        text = _ab(path, feeds, tmp_path / str(rows))
        assert _op_count(text, "Split") == 0 and _op_count(text, "Slice") == 0, text[:3000]
        assert _op_count(text, "FusedMatMul") == 4, text[:3000]


def test_symbolic_shape_values_fold(tmp_path):
    """Slice bounds computed from Shape(h) of a product with a symbolic row
    count (Gather of the known last dim, halved): the inference knows them,
    and normalize (which rewrites the Softmax's axis -1) must not make
    folding forget that, so the Slices' bounds are constants, the shape
    computation is gone and the split applies (regression: the encoder kept
    80 shape nodes and its Slices)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = rng.standard_normal((12, 24)).astype(np.float32)
    c = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Shape", ["h"], ["s"]),
        helper.make_node("Gather", ["s", "last"], ["d"], axis=0),
        helper.make_node("Div", ["d", "two"], ["half"]),
        helper.make_node("Unsqueeze", ["half", "ax0"], ["half1"]),
        helper.make_node("Slice", ["h", "zero", "half1", "neg1"], ["q"]),
        helper.make_node("Slice", ["h", "half1", "big", "neg1"], ["k"]),
        helper.make_node("Softmax", ["q"], ["y"], axis=-1),
    ]
    inits = [numpy_helper.from_array(w, "w"), c("last", -1), c("two", 2), c("ax0", [0]),
             c("zero", [0]), c("neg1", [-1]), c("big", [1 << 40])]
    vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
    g = helper.make_graph(nodes, "g", [vi("x", [1, "seq", 12])], [vi("y", None), vi("k", None)],
                          inits)
    path = str(tmp_path / "sym.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    feeds = [{"x": rng.standard_normal((1, s, 12)).astype(np.float32)} for s in (1, 5, 17)]
    text = _ab(path, feeds, tmp_path)
    for op in ("Slice", "Shape", "Gather", "Div"):
        assert _op_count(text, op) == 0, (op, text)
    assert _op_count(text, "FusedMatMul") == 2, text
