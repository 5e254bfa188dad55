# cge.torch: resnet18, mobilenet_v2 and a TransformerEncoder compiled with
# fullgraph=True match eager PyTorch; converters are checked against schemas
# at conversion time; unsupported ops are errors (fullgraph) or graph breaks
# (listed by explain); guards recompile on new shapes/dtypes/strides and fall
# back to eager PyTorch past the limit with one warning.
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


@pytest.mark.parametrize("name", make_test_models.MODELS)
def test_models_match_eager(name):
    model, x = make_test_models.build(name)
    c = cge.torch.compile(model, (x,), fullgraph=True)
    with torch.no_grad():
        ref = model(x)
    y = c(x)
    assert y.shape == ref.shape and y.dtype == ref.dtype
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-3, atol=1e-4)
    assert c.graph_breaks == [] and c.num_segments == 1
    assert c.last_run_modes() == ["replay"]
    ops = {op for _, op, _ in c.graph_nodes()}
    assert ({"Conv", "BatchNormalization"} <= ops) if name != "transformer_encoder" else \
        ({"LayerNormalization", "Softmax", "MatMul"} <= ops)
    # A second call with new values replays the same capture.
    x2 = torch.randn(x.shape)
    with torch.no_grad():
        np.testing.assert_allclose(c(x2).numpy(), model(x2).numpy(), rtol=1e-3, atol=1e-4)
    assert c.recompiles == 0


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 4)

    def forward(self, x):
        h = torch.relu(self.lin(x)) * 2 + 1
        return h.softmax(-1), h.sum(-1)


def test_multiple_outputs_and_modes():
    torch.manual_seed(0)
    m = Small().eval()
    x = torch.randn(3, 6)
    for mode in ("replay", "plan", "eager"):
        c = cge.torch.compile(m, (x,), fullgraph=True, mode=mode)
        a, b = c(x)
        with torch.no_grad():
            ra, rb = m(x)
        np.testing.assert_allclose(a.numpy(), ra.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.numpy(), rb.numpy(), rtol=1e-5, atol=1e-5)
        assert c.last_run_modes() == [mode]
    with pytest.raises(ValueError, match="mode"):
        cge.torch.compile(m, (x,), mode="fast")
    with pytest.raises(TypeError, match="dynamic is False, True or a dict"):
        cge.torch.compile(m, (x,), dynamic="batch")


def erfinv_model(x):
    return torch.special.erfinv(torch.tanh(x) * 0.5).exp() + 1


def test_unsupported_op_fullgraph_is_converter_error():
    x = torch.randn(4, 5)
    with pytest.raises(cge.ConverterError) as e:
        cge.torch.compile(erfinv_model, (x,), fullgraph=True)
    assert str(e.value) == "[converter] no converter for aten::erfinv (node 'erfinv')"
    assert e.value.layer == "converter"


def test_graph_breaks_and_explain():
    x = torch.randn(4, 5)
    ex = cge.torch.explain(erfinv_model, (x,))
    assert [(n, op) for n, op, _ in ex.graph_breaks] == [("erfinv", "aten::erfinv")]
    assert "no converter for aten::erfinv" in ex.graph_breaks[0][2]
    assert ex.num_segments == 2 and ex.ops_in_torch == 1 and ex.ops_in_cge >= 4
    assert "break at erfinv (aten::erfinv)" in str(ex)
    c = cge.torch.compile(erfinv_model, (x,))
    np.testing.assert_allclose(c(x).numpy(), erfinv_model(x).numpy(), rtol=1e-5, atol=1e-6)
    assert c.num_segments == 2 and len(c.graph_breaks) == 1
    # explain on a model that converts whole: no breaks.
    ex = cge.torch.explain(Small().eval(), (torch.randn(2, 6),))
    assert ex.graph_breaks == [] and ex.num_segments == 1


def test_converter_names_are_checked_against_the_schema():
    orig = cge.torch.find_converter(aten.relu.default)
    x = torch.randn(2, 3)

    def relu_model(t):
        return torch.relu(t) + 1

    try:
        @cge.torch.register_converter(aten.relu.default, override=True)
        def wrong_name(ctx, node, t):
            return ctx.op("Relu", x=t)  # the schema calls it X
        with pytest.raises(cge.ConverterError) as e:
            cge.torch.compile(relu_model, (x,), fullgraph=True)
        msg = str(e.value)
        assert "operator Relu has no input or attribute 'x' (inputs: X" in msg
        assert "converter for aten::relu, node 'relu'" in msg

        @cge.torch.register_converter(aten.relu.default, override=True)
        def wrong_arity(ctx, node, t):
            return ctx.op("Add", A=t)
        with pytest.raises(cge.ConverterError, match="operator Add needs input 'B'"):
            cge.torch.compile(relu_model, (x,), fullgraph=True)

        @cge.torch.register_converter(aten.relu.default, override=True)
        def wrong_output(ctx, node, t):
            return ctx.op("Relu", X=t, outputs=["Z"])
        with pytest.raises(cge.ConverterError, match="has no output 'Z'"):
            cge.torch.compile(relu_model, (x,), fullgraph=True)
        # Without fullgraph the failing node becomes a graph break, with why.
        ex = cge.torch.explain(relu_model, (x,))
        assert ex.graph_breaks[0][0] == "relu" and "no output 'Z'" in ex.graph_breaks[0][2]
    finally:
        cge.torch.register_converter(aten.relu.default, override=True)(orig)
    with pytest.raises(cge.ConverterError, match="already has a converter"):
        cge.torch.register_converter(aten.relu.default)(orig)


def test_guards_recompile_then_fall_back():
    def f(t):
        return torch.relu(t) * 2

    x = torch.randn(2, 3)
    c = cge.torch.compile(f, (x,), recompile_limit=2)
    np.testing.assert_array_equal(c(x).numpy(), f(x).numpy())
    assert c.recompiles == 0
    y = torch.randn(4, 3)                           # new shape
    np.testing.assert_array_equal(c(y).numpy(), f(y).numpy())
    assert c.recompiles == 1
    z = torch.randn(3, 2).t()                       # same shape as x, other strides
    assert z.shape == x.shape and z.stride() != x.stride()
    np.testing.assert_array_equal(c(z).numpy(), f(z).numpy())
    assert c.recompiles == 2
    c(x), c(y), c(z)                                # all cached
    assert c.recompiles == 2 and c.eager_calls == 0
    d = torch.randn(2, 3, dtype=torch.float64)      # new dtype, past the limit
    with pytest.warns(RuntimeWarning, match="recompile_limit=2"):
        out = c(d)
    assert out.dtype == torch.float64
    np.testing.assert_array_equal(out.numpy(), f(d).numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # warned once only
        np.testing.assert_array_equal(c(torch.ones(5, 5)).numpy(), f(torch.ones(5, 5)).numpy())
    assert c.eager_calls == 2 and c.recompiles == 2


def test_inplace_on_input_is_refused():
    def f(t):
        t.relu_()
        return t * 2
    with pytest.raises(cge.ConverterError, match="writes into graph input"):
        cge.torch.compile(f, (torch.randn(3),), fullgraph=True)


def test_inplace_inside_graph_keeps_values():
    def f(t):
        h = t * 3
        g = h + 1          # reads h before the in-place op
        h.relu_()
        return g + h
    x = torch.randn(8)
    c = cge.torch.compile(f, (x,), fullgraph=True)
    np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-6)


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile needs PyTorch >= 2")
def test_torch_compile_backend():  # pragma: no cover - PyTorch >= 2 only
    m = Small().eval()
    x = torch.randn(3, 6)
    fast = torch.compile(m, backend="cge")
    with torch.no_grad():
        a, b = fast(x)
        ra, rb = m(x)
    np.testing.assert_allclose(a.numpy(), ra.numpy(), rtol=1e-5, atol=1e-6)


def test_backend_registration_is_skipped_here():
    from cge.torch import _backend
    assert _backend.register_backend() == _backend.has_torch_compile()


def test_factory_ops_and_mixed_dtypes_convert():
    def f(x):
        s = x.shape[1]
        mask = torch.triu(torch.full((s, s), float("-inf")), 1)
        pos = torch.arange(1, s + 1) * 2                 # int64, promoted by the add
        return ((x @ x.t()).softmax(-1) + torch.zeros_like(x[:, :1]) +
                torch.ones(x.shape[0], 1), (x + pos).tril(), mask)
    x = torch.randn(5, 5)
    c = cge.torch.compile(f, (x,), fullgraph=True)
    for got, ref in zip(c(x), f(x)):
        assert got.dtype == ref.dtype
        np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    ops = {op for _, op, _ in c.graph_nodes()}
    assert {"Trilu", "Range", "ConstantOfShape", "Cast"} <= ops
