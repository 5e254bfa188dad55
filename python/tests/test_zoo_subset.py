# A fast subset of the model zoo (scripts/zoo.py; `make zoo` runs all of it):
# small models at several opsets, dynamic axes at a size other than the
# exported one, through torch.onnx.export -> cge.InferenceSession, compared
# with PyTorch under the zoo's tolerance.
import io
import os
import sys

import pytest

import torch
import cge

import onnx  # noqa: F401  (required: conftest.REQUIRED)

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import zoo  # noqa: E402

SUBSET = ["squeezenet1_1@op9", "squeezenet1_1@op13", "squeezenet1_1@op17",
          "mobilenet_v3_small@op11", "transformer_encoder@op9", "lstm_2l_bi@op9",
          "gpt_tiny", "audio_conv1d", "transformer_decoder"]
_SPECS = {}


def spec(name):
    if not _SPECS:
        _SPECS.update({s.name: s for s in zoo.all_specs()})
    return _SPECS[name]


@pytest.mark.parametrize("name", SUBSET)
def test_zoo_model_through_onnx(name):
    s = spec(name)
    model = s.make()
    args = s.inputs(False)
    f = io.BytesIO()
    torch.onnx.export(model, args, f, opset_version=s.opset,
                      input_names=["input_%d" % i for i in range(len(args))],
                      dynamic_axes=s.dynamic)
    run = s.run_inputs(True)
    with torch.no_grad():
        ref = [t.numpy() for t in zoo._flatten(model(*run))]
    sess = cge.InferenceSession(f.getvalue())
    outs = sess.run(None, {i.name: t.numpy() for i, t in zip(sess.get_inputs(), run)})
    r = zoo.compare(outs, ref)
    assert r["ok"], r["why"]
