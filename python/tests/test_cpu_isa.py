# CGE_CPU_ISA (src/base/cpu_features.c): the cap on the instruction sets the
# kernels may use. Each cap is checked in its own process (the answer is read
# once per process): the features it leaves, and that the zoo's test models
# give the same outputs on every path this machine can run (the AVX2 and
# portable kernels are tested on an AVX-512 machine this way).
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import cge
from cge import _lib

AVX512 = (1 << 11) | (1 << 12) | (1 << 13) | (1 << 14) | (1 << 15)
AVX_ANY = (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10)

CHILD = r"""
import ctypes, json, os, sys
import numpy as np
from cge import _lib
import cge
fn = _lib.lib.cge_cpu_features
fn.restype = ctypes.c_uint64
out = {"features": fn()}
model = sys.argv[1]
if model:
    data = np.load(sys.argv[2])
    s = cge.InferenceSession(model)
    feeds = {i.name: data[i.name] for i in s.get_inputs()}
    res = s.run(None, feeds)
    np.save(sys.argv[3], res[0])
print(json.dumps(out))
"""


def _child(cap, model="", npz="", out=""):
    env = dict(os.environ)
    env.pop("CGE_CPU_ISA", None)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cge.__file__)))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    if cap is not None:
        env["CGE_CPU_ISA"] = cap
    r = subprocess.run([sys.executable, "-c", CHILD, model, npz, out], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])["features"]


def test_caps_mask_features():
    full = _child(None)
    assert _child("avx2") == full & ~AVX512
    assert _child("generic") == full & ~(AVX512 | AVX_ANY)
    assert _child("avx512") == full          # no cap above what the CPU has
    assert _child("bogus") == full           # an unknown value is ignored
    fn = _lib.lib.cge_cpu_features
    fn.restype = __import__("ctypes").c_uint64
    assert fn() & ~(1 << 63) == fn()         # the internal "known" bit never leaks


def _model_dir():
    d = os.environ.get("CGE_MODEL_DIR")
    if not d or not os.path.isdir(d):
        pytest.skip("CGE_MODEL_DIR with the generated test models is not set")
    return d


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "transformer_encoder"])
def test_every_path_gives_the_same_outputs(name, tmp_path):
    d = _model_dir()
    model, npz = os.path.join(d, name + ".onnx"), os.path.join(d, name + ".npz")
    if not os.path.exists(model) or not os.path.exists(npz):
        pytest.skip("%s is not generated" % name)
    outs = {}
    for cap in (None, "avx2", "generic"):
        path = str(tmp_path / ("%s.npy" % cap))
        _child(cap, model, npz, path)
        outs[cap] = np.load(path)
    ref = outs[None]
    scale = max(1.0, float(np.abs(ref).max()))
    for cap in ("avx2", "generic"):
        np.testing.assert_allclose(outs[cap], ref, rtol=1e-4, atol=1e-4 * scale,
                                   err_msg="CGE_CPU_ISA=%s" % cap)
