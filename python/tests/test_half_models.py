# float16 and bfloat16 ONNX models (every weight, input and output half, as
# `model.half()` exports or a float16 converter writes them) run on float32's
# kernels (compiler pass widen_half): the outputs keep their half dtype and
# agree with the float32 model run on the same half inputs and half weights
# within half's rounding; level 1 (the pass off) computes the same in half.
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto

import cge

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from half_model import bf16_bits, bf16_value, halved, rounded  # noqa: E402

torch = pytest.importorskip("torch")
nn = torch.nn

CLI = os.path.join(os.path.dirname(os.environ.get("CGE_LIBRARY", "")) or
                   os.path.join(os.path.dirname(__file__), "..", "..", "build"), "cge")


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.c3 = nn.Conv2d(16, 24, 1)
        self.fc = nn.Linear(24, 10)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = nn.functional.hardswish(self.c2(y)) + y
        y = nn.functional.max_pool2d(torch.sigmoid(self.c3(y)) * 2.0, 2)
        return torch.softmax(self.fc(y.mean(dim=(2, 3))), dim=-1)


class SmallEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.layer(x)


def _export(module, x, path):
    torch.manual_seed(0)
    module.eval()
    for p in module.parameters():
        p.data.uniform_(-0.5, 0.5)
    torch.onnx.export(module, (x,), path, opset_version=13, input_names=["input"],
                      output_names=["output"], do_constant_folding=True)


@pytest.mark.parametrize("half", [TensorProto.FLOAT16, TensorProto.BFLOAT16],
                         ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name,module,shape", [
    ("cnn", SmallCnn, (1, 3, 17, 13)),
    ("encoder", SmallEncoder, (2, 7, 32)),
])
def test_half_model_matches_float32(tmp_path, half, name, module, shape):
    path32 = str(tmp_path / (name + ".onnx"))
    x = torch.rand(*shape) * 2 - 1
    _export(module(), x, path32)
    m16 = halved(path32, half)
    onnx.checker.check_model(m16)
    path16 = str(tmp_path / (name + "_half.onnx"))
    onnx.save(m16, path16)
    ref_path = str(tmp_path / (name + "_rounded.onnx"))
    onnx.save(rounded(path32, half), ref_path)

    xn = x.numpy()
    if half == TensorProto.FLOAT16:
        feed = xn.astype(np.float16)
        x32 = feed.astype(np.float32)
        widen = lambda a: a.astype(np.float32)
        step = 2.0 ** -10
    else:
        feed = bf16_bits(xn)
        x32 = bf16_value(feed)
        widen = bf16_value
        step = 2.0 ** -7
    ref = cge.InferenceSession(ref_path).run(None, {"input": x32})[0]
    scale = max(float(np.abs(ref).max()), 1e-6)
    outs = {}
    for level in (1, 3):
        s = cge.InferenceSession(path16, opt_level=level)
        y = s.run(None, {"input": feed})[0]
        assert y.dtype == (np.float16 if half == TensorProto.FLOAT16 else np.uint16)
        assert y.shape == ref.shape
        outs[level] = widen(y)
    # widened: float32 between the nodes, one rounding at the output
    np.testing.assert_allclose(outs[3] / scale, ref / scale, rtol=0, atol=step)
    # level 1 rounds at every node (measured within 1.1 steps here)
    np.testing.assert_allclose(outs[1] / scale, ref / scale, rtol=0, atol=4 * step)


def test_half_model_profile_shows_float32_kernels(tmp_path):
    """The widened plan runs the convolutions as FusedConv, and the only
    half work left is a Cast in and a Cast out."""
    path32 = str(tmp_path / "cnn.onnx")
    _export(SmallCnn(), torch.rand(1, 3, 17, 13), path32)
    path16 = str(tmp_path / "cnn16.onnx")
    onnx.save(halved(path32, TensorProto.FLOAT16), path16)
    r = subprocess.run([CLI, "profile", path16, "-o", str(tmp_path / "t.json"),
                        "--iterations", "1"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: int(line.split()[1]) for line in r.stdout.splitlines()[2:]
            if len(line.split()) >= 5 and line.split()[1].isdigit()}
    assert rows.get("cge.fused.FusedConv", 0) >= 3, r.stdout
    assert rows.get("Cast") == 2, r.stdout


class SmallLstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(12, 16, num_layers=2, bidirectional=True)

    def forward(self, x):
        return self.rnn(x)[0]


@pytest.mark.parametrize("half", [TensorProto.FLOAT16, TensorProto.BFLOAT16],
                         ids=["float16", "bfloat16"])
def test_half_lstm(tmp_path, half):
    """ONNX's LSTM takes float16: widened from level 2, and at level 1 (as
    the model says) the kernel runs it on float32 copies, rounding its
    outputs to half."""
    path32 = str(tmp_path / "lstm.onnx")
    x = torch.rand(5, 2, 12) * 2 - 1
    _export(SmallLstm(), x, path32)
    path16 = str(tmp_path / "lstm_half.onnx")
    onnx.save(halved(path32, half), path16)
    ref_path = str(tmp_path / "lstm_rounded.onnx")
    onnx.save(rounded(path32, half), ref_path)
    f16 = half == TensorProto.FLOAT16
    feed = x.numpy().astype(np.float16) if f16 else bf16_bits(x.numpy())
    x32 = feed.astype(np.float32) if f16 else bf16_value(feed)
    ref = cge.InferenceSession(ref_path).run(None, {"input": x32})[0]
    step = 2.0 ** -10 if f16 else 2.0 ** -7
    for level, steps in ((3, 1), (1, 4)):   # level 1 rounds between the layers too
        y = cge.InferenceSession(path16, opt_level=level).run(None, {"input": feed})[0]
        assert y.dtype == (np.float16 if f16 else np.uint16)
        y = y.astype(np.float32) if f16 else bf16_value(y)
        np.testing.assert_allclose(y, ref, rtol=0,
                                   atol=steps * step * max(1.0, float(np.abs(ref).max())))


def _control_flow_model():
    """x [4,16] -> Loop (5 trips; body: MatMul by the outer W, Add of a
    Constant of its own, Tanh carried, Neg of the product scanned) -> If
    (cond: then MatMul by the outer V, else Mul by a Constant) -> y."""
    from onnx import helper as h, numpy_helper as nh
    rng = np.random.default_rng(3)
    f = TensorProto.FLOAT

    def const(name, a):
        return h.make_node("Constant", [], [name], value=nh.from_array(a.astype(np.float32)))

    body = h.make_graph([
        h.make_node("MatMul", ["x_in", "W"], ["mm"]),
        const("b", rng.uniform(-0.2, 0.2, 16)),
        h.make_node("Add", ["mm", "b"], ["pre"]),
        h.make_node("Tanh", ["pre"], ["x_out"]),
        h.make_node("Neg", ["mm"], ["s"]),
        h.make_node("Identity", ["c_in"], ["c_out"])], "body",
        [h.make_tensor_value_info("i", TensorProto.INT64, []),
         h.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         h.make_tensor_value_info("x_in", f, [4, 16])],
        [h.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         h.make_tensor_value_info("x_out", f, [4, 16]),
         h.make_tensor_value_info("s", f, [4, 16])])
    then_g = h.make_graph([h.make_node("MatMul", ["looped", "V"], ["o"])], "then", [],
                          [h.make_tensor_value_info("o", f, [4, 16])])
    else_g = h.make_graph([const("k", rng.uniform(0.5, 1.5, 16)),
                           h.make_node("Mul", ["looped", "k"], ["o"])], "else", [],
                          [h.make_tensor_value_info("o", f, [4, 16])])
    g = h.make_graph([
        h.make_node("Loop", ["M", "", "x"], ["looped", "scanned"], body=body),
        h.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)], "cf",
        [h.make_tensor_value_info("x", f, [4, 16]),
         h.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [h.make_tensor_value_info("y", f, [4, 16]),
         h.make_tensor_value_info("scanned", f, [5, 4, 16])],
        initializer=[nh.from_array(rng.uniform(-0.4, 0.4, (16, 16)).astype(np.float32), "W"),
                     nh.from_array(rng.uniform(-0.4, 0.4, (16, 16)).astype(np.float32), "V"),
                     nh.from_array(np.array(5, np.int64), "M")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("half", [TensorProto.FLOAT16, TensorProto.BFLOAT16],
                         ids=["float16", "bfloat16"])
def test_half_control_flow(tmp_path, half):
    """Loop and If bodies of a half model compute in float32 from level 2
    (their carried and output values rounded to half as the model rounds
    them); the outputs agree with the float32 model on the same rounded
    weights, and level 1 computes the same in half."""
    m32 = _control_flow_model()
    m16 = halved(m32, half)
    onnx.checker.check_model(m16)
    ref_model = rounded(m32, half)
    f16 = half == TensorProto.FLOAT16
    x = np.random.default_rng(4).uniform(-1, 1, (4, 16)).astype(np.float32)
    feed = x.astype(np.float16) if f16 else bf16_bits(x)
    x32 = feed.astype(np.float32) if f16 else bf16_value(feed)
    widen = (lambda a: a.astype(np.float32)) if f16 else bf16_value
    step = 2.0 ** -10 if f16 else 2.0 ** -7
    for cond in (True, False):
        c = np.array(cond)
        ref = cge.InferenceSession(ref_model.SerializeToString()).run(
            None, {"x": x32, "cond": c})
        for level in (1, 2, 3):
            outs = cge.InferenceSession(m16.SerializeToString(), opt_level=level).run(
                None, {"x": feed, "cond": c})
            for y, r in zip(outs, ref):
                assert y.dtype == (np.float16 if f16 else np.uint16)
                scale = max(1.0, float(np.abs(r).max()))
                # five trips, each rounding the carried value once (or at
                # every node, level 1)
                np.testing.assert_allclose(widen(y) / scale, r / scale, rtol=0,
                                           atol=(8 if level == 1 else 6) * step)
