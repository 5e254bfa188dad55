# The residual + LayerNorm fusion (compiler pass fuse_skip_layernorm ->
# cge.fused SkipLayerNorm): Add(a, b) -> LayerNormalization over the last axis
# runs as one node. Each graph runs with the pass on and off
# (CGE_DISABLE_PASSES=fuse_skip_layernorm); the results must be bit-equal, and
# the compiled graph's dump says whether the pass fired.
import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from test_attention import _last_dump
from test_attention import _session as _pass_session

PASS = "fuse_skip_layernorm"


def _session(path, fused, dump=None):
    return _pass_session(path, fused, dump, pass_name=PASS)


def _ops(d):
    """Op type -> count in the last optimize-stage dump (the graph the plan is made of)."""
    out = {}
    for op in re.findall(r"= (?:[\w.]+::)?(\w+)\(", _last_dump(d)):
        out[op] = out.get(op, 0) + 1
    return out


def _model(path, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _ab(path, feeds_list, tmp_path):
    """Run fused and unfused; assert bit-equality; return the fused graph's op counts."""
    dump = tmp_path / "dump"
    dump.mkdir(exist_ok=True)
    fused = _session(path, True, dump)
    plain = _session(path, False)
    for feeds in feeds_list:
        got, ref = fused.run(None, feeds), plain.run(None, feeds)
        assert len(got) == len(ref)
        for g_, r_ in zip(got, ref):
            assert g_.shape == r_.shape
            assert np.array_equal(g_.view(np.uint32), r_.view(np.uint32)), feeds.keys()
    return _ops(dump)


def _ln_graph(path, a_shape, b_shape, d, bias=True, extra_reader=False, sum_out=False, eps=1e-5):
    rng = np.random.default_rng(d)
    inits = [numpy_helper.from_array(rng.standard_normal(d).astype(np.float32), "scale")]
    ln_in = ["s", "scale"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(d).astype(np.float32), "bias"))
        ln_in.append("bias")
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]),
             helper.make_node("LayerNormalization", ln_in, ["y"], axis=-1, epsilon=eps)]
    outputs = [_vi("y", None)]
    if extra_reader:   # pre-norm's next residual: s + y
        nodes.append(helper.make_node("Add", ["s", "y"], ["z"]))
        outputs.append(_vi("z", None))
    if sum_out:
        outputs.append(_vi("s", None))
    _model(path, nodes, [_vi("a", a_shape), _vi("b", b_shape)], outputs, inits)


def _feeds(rng, a_shape, b_shape, offset=0.0):
    return {"a": (rng.standard_normal(a_shape) * 3 + offset).astype(np.float32),
            "b": rng.standard_normal(b_shape).astype(np.float32)}


def test_odd_sizes_bit_equal(tmp_path):
    """1 row, width 1, prime widths, widths off multiples of 16, wide rows; with
    and without B; a mean far from 0."""
    rng = np.random.default_rng(0)
    for i, shape in enumerate([(1, 1), (1, 7), (3, 13), (5, 31), (2, 3, 97), (4, 256), (2, 1000),
                               (1, 4099)]):
        for bias in (True, False):
            path = str(tmp_path / ("m%d%d.onnx" % (i, bias)))
            _ln_graph(path, list(shape), list(shape), shape[-1], bias=bias, eps=1e-3 if bias else 1e-6)
            sub = tmp_path / ("d%d%d" % (i, bias))
            sub.mkdir()
            ops = _ab(path, [_feeds(rng, shape, shape), _feeds(rng, shape, shape, offset=50.0)], sub)
            assert ops.get("SkipLayerNorm") == 1 and "Add" not in ops, (shape, ops)
            assert "LayerNormalization" not in ops


def test_sum_kept_for_other_readers(tmp_path):
    """The Add's result read again (the next residual) and as a graph output:
    the fused node writes it too, with the Add's bits."""
    rng = np.random.default_rng(1)
    path = str(tmp_path / "pre.onnx")
    _ln_graph(path, [3, 37], [3, 37], 37, extra_reader=True, sum_out=True)
    ops = _ab(path, [_feeds(rng, (3, 37), (3, 37))], tmp_path)
    assert ops.get("SkipLayerNorm") == 1 and ops.get("Add") == 1, ops
    s = _session(path, True)
    f = _feeds(rng, (3, 37), (3, 37))
    y, z, sm = s.run(None, f)
    assert np.array_equal(sm, f["a"] + f["b"])
    assert np.array_equal(z, sm + y)


def test_broadcast_add_not_fused(tmp_path):
    """a [3, 13] + b [13]: a broadcast Add keeps its own kernel."""
    rng = np.random.default_rng(2)
    path = str(tmp_path / "bc.onnx")
    _ln_graph(path, [3, 13], [13], 13)
    ops = _ab(path, [_feeds(rng, (3, 13), (13,))], tmp_path)
    assert "SkipLayerNorm" not in ops and ops.get("Add") == 1 and ops.get("LayerNormalization") == 1


def test_symbolic_rows(tmp_path):
    """[batch, seq, 29] with symbolic batch and seq: one plan, several sizes."""
    rng = np.random.default_rng(3)
    path = str(tmp_path / "sym.onnx")
    _ln_graph(path, ["n", "t", 29], ["n", "t", 29], 29, extra_reader=True)
    feeds = [_feeds(rng, s, s) for s in [(1, 1, 29), (2, 5, 29), (3, 17, 29)]]
    ops = _ab(path, feeds, tmp_path)
    assert ops.get("SkipLayerNorm") == 1, ops


def _residual_mm(path, rows):
    """y = LN(x + x @ W + c): the residual a FusedMatMul may take."""
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.standard_normal((24, 24)).astype(np.float32) * 0.2, "W"),
             numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "c"),
             numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "bias")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["p"]),
             helper.make_node("Add", ["p", "c"], ["q"]),
             helper.make_node("Add", ["x", "q"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "scale", "bias"], ["y"], axis=-1)]
    _model(path, nodes, [_vi("x", [rows, 24])], [_vi("y", None)], inits)


def test_matmul_residual_left_to_fused_matmul(tmp_path):
    """A residual a FusedMatMul takes in its epilogue (no pass of its own), with
    static or symbolic rows, stays there: the LayerNormalization stays alone."""
    rng = np.random.default_rng(5)
    for rows in (6, "n"):
        path = str(tmp_path / ("mm%s.onnx" % rows))
        _residual_mm(path, rows)
        d = tmp_path / ("d%s" % rows)
        d.mkdir()
        sizes = (1, 6) if rows == "n" else (6,)
        ops = _ab(path, [{"x": rng.standard_normal((r, 24)).astype(np.float32)} for r in sizes], d)
        assert ops.get("FusedMatMul") == 1 and ops.get("LayerNormalization") == 1, ops
        assert "SkipLayerNorm" not in ops and "Add" not in ops


def test_residual_behind_reshape(tmp_path):
    """The product reshaped before the residual (an encoder's attention output):
    FusedMatMul keeps its bias, this pass takes the Add."""
    rng = np.random.default_rng(6)
    inits = [numpy_helper.from_array(rng.standard_normal((24, 24)).astype(np.float32) * 0.2, "W"),
             numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "c"),
             numpy_helper.from_array(np.array([6, 2, 12], np.int64), "shape"),
             numpy_helper.from_array(rng.standard_normal(12).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal(12).astype(np.float32), "bias")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["p"]),
             helper.make_node("Add", ["p", "c"], ["q"]),
             helper.make_node("Reshape", ["q", "shape"], ["q3"]),
             helper.make_node("Add", ["r", "q3"], ["s"]),
             helper.make_node("LayerNormalization", ["s", "scale", "bias"], ["y"], axis=-1)]
    path = str(tmp_path / "rs.onnx")
    _model(path, nodes, [_vi("x", [6, 24]), _vi("r", [6, 2, 12])], [_vi("y", None)], inits)
    ops = _ab(path, [{"x": rng.standard_normal((6, 24)).astype(np.float32),
                      "r": rng.standard_normal((6, 2, 12)).astype(np.float32)}], tmp_path)
    assert ops.get("FusedMatMul") == 1 and ops.get("SkipLayerNorm") == 1, ops
    assert "Add" not in ops and "LayerNormalization" not in ops
