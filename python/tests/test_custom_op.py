# The example custom operator (examples/custom_op: AddCustom in domain
# "custom", float32 [8,2048] only) from every Python-side front end: loading
# (and a wrong API version refused), GraphBuilder, an ONNX model with a
# custom-domain node, the `cge` command line, PyTorch (torch.library op +
# converter), and a captured replay; op-check catching the broken variant.
import os
import subprocess

import numpy as np
import pytest

import cge

BUILD = os.path.dirname(os.path.abspath(cge.library_path))
LIB = os.path.join(BUILD, "libadd_custom.so")
BROKEN = os.path.join(BUILD, "libadd_custom_broken.so")
BADVERSION = os.path.join(BUILD, "libadd_custom_badversion.so")


def need(path):
    # `make build` builds them beside libcge.so (examples/custom_op/CMakeLists.txt).
    if not os.path.exists(path):
        pytest.fail("%s is not built (ninja -C %s add_custom add_custom_broken "
                    "add_custom_badversion cge_cli)" % (path, BUILD), pytrace=False)
    return path


@pytest.fixture(scope="module")
def loaded():
    return cge.load_op_library(need(LIB))


def inputs(seed=0):
    r = np.random.RandomState(seed)
    return (r.rand(8, 2048).astype(np.float32), r.rand(8, 2048).astype(np.float32))


def test_load_op_library(loaded):
    assert loaded == [("custom", "AddCustom")]
    # Loading the same file again is a no-op that returns the same ops.
    assert cge.load_op_library(LIB) == loaded
    s = cge.schema("AddCustom", "custom")
    assert (s.inputs, s.outputs, s.origin) == ([("x", False, False), ("y", False, False)],
                                              ["z"], "add_custom")
    assert "add_custom" in dir(cge.GraphBuilder())


def test_wrong_api_version_refused():
    with pytest.raises(cge.SchemaError) as e:
        cge.load_op_library(need(BADVERSION))
    assert "built for operator API version 99" in str(e.value)
    assert e.value.layer == "schema"
    with pytest.raises(cge.IOError) as e:
        cge.load_op_library("/nonexistent/libnothing.so")
    assert "cannot load operator library" in str(e.value)


def test_builder_and_replay(loaded):
    b = cge.GraphBuilder("custom")
    x = b.input("x", np.float32, [8, 2048])
    y = b.input("y", np.float32, [8, 2048])
    b.output(b.add_custom(x, y) * 2.0, "z")
    g = b.build()
    assert ("AddCustom", "custom") in [(op, d) for _, op, d in g.nodes()]
    s = cge.Session(g, run_mode="replay")
    for seed in range(3):  # new values into the captured buffers each time
        xa, ya = inputs(seed)
        (z,) = s.run(None, {"x": xa, "y": ya})
        np.testing.assert_array_equal(z, (xa + ya) * 2)
        assert s.last_run_mode() == "replay"
    # The generic call reaches it too.
    b = cge.GraphBuilder("generic")
    x = b.input("x", "float32", [8, 2048])
    b.output(b.op("AddCustom", x, x, domain="custom"), "z")
    (z,) = cge.Session(b.build(), run_mode="plan").run(None, {"x": xa})
    np.testing.assert_array_equal(z, xa + xa)


def test_meta_limit_in_builder(loaded):
    b = cge.GraphBuilder("bad")
    x = b.input("x", "float32", [4, 2048])
    with pytest.raises(cge.MetaError) as e:
        b.add_custom(x, x, name="add0")
    assert str(e.value) == ("[meta] AddCustom 'add0': input 0 is [4,2048]; this kernel supports "
                            "only [8,2048]")
    b = cge.GraphBuilder("f64")
    x = b.input("x", "float64", [8, 2048])
    with pytest.raises(cge.MetaError, match="float64"):
        b.add_custom(x, x)


def custom_onnx(shape=(8, 2048)):
    import onnx
    from onnx import TensorProto, helper
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape)) for n in "xyz"]
    node = helper.make_node("AddCustom", ["x", "y"], ["z"], domain="custom", name="add0")
    g = helper.make_graph([node], "custom", vi[:2], vi[2:])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("custom", 1)])
    return onnx, m.SerializeToString()


def test_onnx_custom_domain(loaded):
    _, m = custom_onnx()
    s = cge.InferenceSession(m, run_mode="replay")
    xa, ya = inputs(1)
    (z,) = s.run(None, {"x": xa, "y": ya})
    np.testing.assert_array_equal(z, xa + ya)
    _, bad = custom_onnx((4, 2048))
    with pytest.raises(cge.MetaError, match=r"AddCustom 'add0': input 0 is \[4,2048\]"):
        cge.InferenceSession(bad)


def cli():
    return need(os.path.join(BUILD, "cge"))


def test_cli_compile_and_run(loaded, tmp_path):
    exe = cli()
    _, m = custom_onnx()
    model = tmp_path / "custom.onnx"
    model.write_bytes(m)
    xa, ya = inputs(2)
    np.save(tmp_path / "x.npy", xa)
    np.save(tmp_path / "y.npy", ya)
    feeds = ["--input", "x=%s" % (tmp_path / "x.npy"), "--input", "y=%s" % (tmp_path / "y.npy")]
    # Without the library the node has no converter; with it the run works.
    r = subprocess.run([exe, "run", str(model)] + feeds, capture_output=True, text=True)
    assert r.returncode != 0 and "AddCustom" in r.stderr
    subprocess.run([exe, "run", str(model), "--custom-op-lib", LIB, "--output-dir",
                    str(tmp_path / "out")] + feeds, check=True, capture_output=True)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "z.npy"), xa + ya)
    # Compiled to an offline model, then run from it (replay).
    subprocess.run([exe, "compile", str(model), "-o", str(tmp_path / "m.cgm"), "--custom-op-lib",
                    LIB], check=True, capture_output=True)
    subprocess.run([exe, "run", str(tmp_path / "m.cgm"), "--custom-op-lib", LIB, "--mode",
                    "replay", "--output-dir", str(tmp_path / "out2")] + feeds, check=True,
                   capture_output=True)
    np.testing.assert_array_equal(np.load(tmp_path / "out2" / "z.npy"), xa + ya)


def test_op_check_catches_broken_variant():
    exe = need(os.path.join(BUILD, "cge"))
    good = subprocess.run([exe, "op-check", "--lib", need(LIB)], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "0 findings" in good.stdout
    bad = subprocess.run([exe, "op-check", "--lib", need(BROKEN)], capture_output=True, text=True)
    usage = subprocess.run([exe, "op-check", "--bogus"], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: cge op-check" in usage.stderr
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FINDING [out-of-bounds] AddCustom (custom_broken)" in bad.stdout
    assert "FINDING [unwritten] AddCustom (custom_broken)" in bad.stdout


def test_pytorch_custom_op(loaded):
    import torch
    import cge.torch
    op = cge.torch.custom_op.register(LIB)

    class M(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(op(x, y)) * 3

    xa, ya = (torch.from_numpy(a) - 0.5 for a in inputs(3))
    m = M()
    c = cge.torch.compile(m, (xa, ya), fullgraph=True)
    np.testing.assert_allclose(c(xa, ya).numpy(), m(xa, ya).numpy(), rtol=1e-6)
    assert ("AddCustom", "custom") in [(o, d) for _, o, d in c.graph_nodes()]
    assert c.graph_breaks == []
    # The Meta implementation enforces the kernel's limit (shape and dtype).
    with pytest.raises(RuntimeError, match=r"float32 \[8, 2048\]"):
        op(torch.empty(4, 2048, device="meta"), torch.empty(4, 2048, device="meta"))
    with pytest.raises(RuntimeError, match="float32"):
        op(torch.empty(8, 2048, dtype=torch.float64, device="meta"),
           torch.empty(8, 2048, dtype=torch.float64, device="meta"))
    out = op(torch.empty(8, 2048, device="meta"), torch.empty(8, 2048, device="meta"))
    assert out.device.type == "meta" and tuple(out.shape) == (8, 2048)
