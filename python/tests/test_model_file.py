# Compiled models (.cgm, from `cge compile`) in cge.InferenceSession: outputs
# bit-identical to the session compiling the .onnx itself, for the bundled
# small CNN and the real models of scripts/make_test_models.py; loading from
# bytes; corrupt files raise the [io] error.
import os
import subprocess

import numpy as np
import pytest

import cge
from test_cli import CLI, ROOT, SMALL_CNN
from test_models import MODEL_DIR, _load_maker


def compile_cgm(onnx_path, out):
    subprocess.run([CLI, "compile", onnx_path, "-o", str(out)], check=True, capture_output=True)
    return str(out)


def same_outputs(onnx_path, cgm_path, x):
    a = cge.InferenceSession(onnx_path)
    b = cge.InferenceSession(cgm_path)
    assert [(i.name, i.shape, i.type) for i in a.get_inputs()] == \
        [(i.name, i.shape, i.type) for i in b.get_inputs()]
    assert [o.name for o in a.get_outputs()] == [o.name for o in b.get_outputs()]
    name = a.get_inputs()[0].name
    ya = a.run(None, {name: x})
    # The same plan memory whether compiled here or loaded.
    assert b.arena_bytes() == a.arena_bytes() > 0
    for mode in ("plan", "replay", "eager"):
        s = cge.InferenceSession(cgm_path, run_mode=mode)
        yb = s.run(None, {name: x})
        for p, q in zip(ya, yb):
            assert p.dtype == q.dtype and p.shape == q.shape
            np.testing.assert_array_equal(p, q, err_msg=mode)
    return ya


def test_small_cnn(tmp_path):
    cgm = compile_cgm(SMALL_CNN, tmp_path / "cnn.cgm")
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    (p,) = same_outputs(SMALL_CNN, cgm, x)
    assert p.shape == (1, 10) and abs(float(p.sum()) - 1) < 1e-5
    # From bytes, too.
    data = open(cgm, "rb").read()
    (q,) = cge.InferenceSession(data).run(None, {"image": x})
    np.testing.assert_array_equal(p, q)


def test_corrupt_and_misused(tmp_path):
    cgm = compile_cgm(SMALL_CNN, tmp_path / "cnn.cgm")
    data = bytearray(open(cgm, "rb").read())
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession(bytes(data[: len(data) - 100]))
    assert e.value.layer == "io" and "truncated" in str(e.value)
    data[300] ^= 1
    (tmp_path / "bad.cgm").write_bytes(bytes(data))
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession(str(tmp_path / "bad.cgm"))
    assert e.value.layer == "io" and "checksum" in str(e.value)
    with pytest.raises(cge.Error):
        cge.InferenceSession(cgm, input_shapes={"image": [2, 3, 64, 64]})
    s = cge.InferenceSession(cgm)
    with pytest.raises(cge.Error) as e:
        s.run(None, {"image": np.zeros((2, 3, 64, 64), np.float32)})
    assert e.value.layer == "session"


def test_weights_checked_by_default(tmp_path, monkeypatch):
    """A .cgm whose weights hold other bytes of the same length (the header's
    metadata checksum still right) is refused by default with the [io] error
    naming the checksum; verify_weights=False or CGE_VERIFY_WEIGHTS=0 trust
    it, verify_weights=True checks whatever the environment says."""
    import struct
    cgm = compile_cgm(SMALL_CNN, tmp_path / "cnn.cgm")
    data = bytearray(open(cgm, "rb").read())
    # cgm_header: weights_offset at byte 56, weights_bytes at 64 (format.h)
    woff, wbytes = struct.unpack_from("<QQ", data, 56)
    # (packed weights, format 3, follow the weights to the end of the file)
    assert woff + wbytes <= len(data) and wbytes > 1024
    # the first float weights (a convolution's): reversed, same length
    lo, hi = woff, woff + 1024
    data[lo:hi] = bytes(reversed(data[lo:hi]))
    bad = tmp_path / "swapped.cgm"
    bad.write_bytes(bytes(data))
    x = np.zeros((1, 3, 64, 64), np.float32)
    for src in (str(bad), bytes(data)):
        with pytest.raises(cge.Error) as e:
            cge.InferenceSession(src)
        assert e.value.layer == "io" and "weights checksum mismatch" in str(e.value)
    s = cge.InferenceSession(str(bad), verify_weights=False)
    assert s.run(None, {"image": x})[0].shape == (1, 10)
    monkeypatch.setenv("CGE_VERIFY_WEIGHTS", "0")
    cge.InferenceSession(str(bad))
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession(str(bad), verify_weights=True)
    assert "weights checksum" in str(e.value)
    monkeypatch.delenv("CGE_VERIFY_WEIGHTS")
    cge.InferenceSession(cgm, verify_weights=True)
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession(cgm, verify_weights="yes")
    assert e.value.layer == "session"


def cli_outputs(model, x_path, out_dir, mode):
    subprocess.run([CLI, "run", model, "--input", "input=%s" % x_path, "--output-dir",
                    str(out_dir), "--mode", mode], check=True, capture_output=True)
    return np.load(os.path.join(str(out_dir), "output.npy"))


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "transformer_encoder"])
def test_real_model(name, tmp_path):
    onnx_path, npz_path = _load_maker().make(name, MODEL_DIR)
    ref = np.load(npz_path)
    cgm = compile_cgm(onnx_path, tmp_path / (name + ".cgm"))
    # Bit for bit in processes of their own: with PyTorch loaded in this one,
    # cge's compile-time arithmetic can round differently (seen on resnet18).
    np.save(tmp_path / "x.npy", ref["input"])
    want = cli_outputs(onnx_path, tmp_path / "x.npy", tmp_path / "onnx", "plan")
    for mode in ("plan", "replay", "eager"):
        got = cli_outputs(cgm, tmp_path / "x.npy", tmp_path / mode, mode)
        np.testing.assert_array_equal(got, want, err_msg=mode)
    (y,) = cge.InferenceSession(cgm).run(None, {"input": ref["input"]})
    np.testing.assert_allclose(y, ref["output"], rtol=1e-3, atol=1e-4)
    assert os.path.getsize(cgm) > 0 and ROOT


def test_control_flow_model(tmp_path):
    """A model with a Loop (a body constant, an outer weight, a scan output)
    and an If on a computed condition compiles to a .cgm (format 4 holds the
    bodies; before, `cge compile` refused graph attributes) whose outputs
    equal the .onnx session's in every run mode."""
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh
    rng = np.random.default_rng(2)
    f = T.FLOAT
    body = h.make_graph(
        [h.make_node("MatMul", ["a", "W"], ["mm"]),
         h.make_node("Add", ["mm", "b"], ["pre"]),
         h.make_node("Tanh", ["pre"], ["a2"]),
         h.make_node("Neg", ["mm"], ["s"]),
         h.make_node("Identity", ["c"], ["c2"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
         h.make_tensor_value_info("a", f, [4, 8])],
        [h.make_tensor_value_info("c2", T.BOOL, []), h.make_tensor_value_info("a2", f, [4, 8]),
         h.make_tensor_value_info("s", f, [4, 8])],
        initializer=[nh.from_array(rng.uniform(-0.2, 0.2, 8).astype(np.float32), "b")])
    then_g = h.make_graph([h.make_node("Relu", ["y"], ["o"])], "then", [],
                          [h.make_tensor_value_info("o", f, [4, 8])])
    else_g = h.make_graph([h.make_node("Sigmoid", ["y"], ["o"])], "else", [],
                          [h.make_tensor_value_info("o", f, [4, 8])])
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "input"], ["y", "scan"], body=body),
         h.make_node("ReduceSum", ["input"], ["total"], keepdims=0),
         h.make_node("Greater", ["total", "zero"], ["pos"]),
         h.make_node("If", ["pos"], ["z"], then_branch=then_g, else_branch=else_g)], "cf",
        [h.make_tensor_value_info("input", f, [4, 8])],
        [h.make_tensor_value_info("z", f, [4, 8]), h.make_tensor_value_info("scan", f, [3, 4, 8])],
        initializer=[nh.from_array(rng.uniform(-0.5, 0.5, (8, 8)).astype(np.float32), "W"),
                     nh.from_array(np.array(3, np.int64), "M"),
                     nh.from_array(np.array(0.0, np.float32), "zero")])
    path = str(tmp_path / "cf.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), path)
    cgm = compile_cgm(path, tmp_path / "cf.cgm")
    for sign in (1.0, -1.0):   # both branches of the If
        x = (np.abs(rng.standard_normal((4, 8))) * sign).astype(np.float32)
        same_outputs(path, cgm, x)
