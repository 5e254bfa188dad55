# Real models (resnet18, mobilenet_v2, a TransformerEncoder) exported from
# PyTorch by scripts/make_test_models.py, run through cge.InferenceSession and
# compared with PyTorch's outputs (rtol 1e-3, atol 1e-4). The project makes
# these models itself, so each must run: an unsupported operator fails.
import importlib.util
import os

import numpy as np
import pytest

import cge

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL_DIR = os.environ.get("CGE_MODEL_DIR", os.path.join(ROOT, "build", "test_models"))


def _load_maker():
    spec = importlib.util.spec_from_file_location(
        "make_test_models", os.path.join(ROOT, "scripts", "make_test_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("level", [None, 2])
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "transformer_encoder"])
def test_model_matches_pytorch(name, level, monkeypatch):
    """At the default level (3: channels-last convolutions) and at level 2."""
    monkeypatch.delenv("CGE_OPT_LEVEL", raising=False)
    onnx_path, npz_path = _load_maker().make(name, MODEL_DIR)
    ref = np.load(npz_path)
    sess = cge.InferenceSession(onnx_path, opt_level=level)
    (inp,) = sess.get_inputs()
    assert inp.name == "input" and inp.type == "tensor(float)"
    assert inp.shape == list(ref["input"].shape)
    (out,) = sess.run(None, {"input": ref["input"]})
    assert out.dtype == np.float32
    assert out.shape == ref["output"].shape
    np.testing.assert_allclose(out, ref["output"], rtol=1e-3, atol=1e-4)
    # Random weights leave mobilenet_v2's logits near 1e-9, where atol alone
    # would accept anything: compare relative to the output's scale too.
    scale = float(np.abs(ref["output"]).max())
    assert scale > 0
    np.testing.assert_allclose(out / scale, ref["output"] / scale, rtol=1e-3, atol=1e-4)


def test_opt_level_checked(tmp_path):
    onnx_path, _ = _load_maker().make("transformer_encoder", MODEL_DIR)
    with pytest.raises(cge.Error, match="opt_level 4"):
        cge.InferenceSession(onnx_path, opt_level=4)


def test_openmp_setting_of_the_caller(monkeypatch):
    """oneDNN's convolutions run an OpenMP team on the calling thread: a
    caller that set OpenMP to 1 thread (PyTorch does, through
    torch.set_num_threads) still gets a 2-thread plan that runs and matches,
    and keeps its own setting afterwards."""
    import torch
    monkeypatch.delenv("CGE_OPT_LEVEL", raising=False)
    onnx_path, npz_path = _load_maker().make("mobilenet_v2", MODEL_DIR)
    ref = np.load(npz_path)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        sess = cge.InferenceSession(onnx_path, num_threads=2)
        for _ in range(2):
            (out,) = sess.run(None, {"input": ref["input"]})
        scale = float(np.abs(ref["output"]).max())
        np.testing.assert_allclose(out / scale, ref["output"] / scale, rtol=1e-3, atol=1e-4)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
