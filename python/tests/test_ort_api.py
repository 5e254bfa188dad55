import cge as ort

# ONNX Runtime's Python API over cge: this file reads like onnxruntime code
# (sess_options, providers, io_binding, end_profiling, get_modelmeta,
# NodeArg.type); only the import differs. docs/python.md has the table.
import json
import os
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper


def make_model(batch="N"):
    """y = Relu(x) + x, z = MatMul(x, w): a graph with a symbolic batch."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 2], [1, 0, 0, 1, 1, 1])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Add", ["r", "x"], ["y"], name="add"),
         helper.make_node("MatMul", ["x", "w"], ["z"], name="matmul")],
        "ort_style_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 2])],
        [w], doc_string="graph doc")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="cge-tests", producer_version="1.0",
                              domain="ai.cge.test", model_version=7, doc_string="a test model")
    helper.set_model_props(model, {"author": "cge", "purpose": "ort api"})
    return model


def expected(x):
    w = np.array([[1, 0], [0, 1], [1, 1]], np.float32)
    return np.maximum(x, 0) + x, x @ w


X = np.array([[1, -2, 3], [-4, 5, 6]], np.float32)


@pytest.fixture
def model_path(tmp_path):
    path = str(tmp_path / "model.onnx")
    with open(path, "wb") as f:
        f.write(make_model().SerializeToString())
    return path


def test_session_with_options_and_providers(model_path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_path, sess_options=so, providers=["CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert "CPUExecutionProvider" in ort.get_available_providers()
    assert ort.get_device() == "CPU"
    assert sess.get_session_options() is so
    y, z = sess.run(None, {"x": X})
    ey, ez = expected(X)
    np.testing.assert_allclose(y, ey)
    np.testing.assert_allclose(z, ez)
    (z2,) = sess.run(["z"], {sess.get_inputs()[0].name: X})
    np.testing.assert_allclose(z2, ez)


@pytest.mark.parametrize("level", [ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                                   ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                                   ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                                   ort.GraphOptimizationLevel.ORT_ENABLE_ALL])
def test_every_graph_optimization_level(model_path, level):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    sess = ort.InferenceSession(model_path, so, providers=[("CPUExecutionProvider", {})])
    y, z = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, expected(X)[0])
    np.testing.assert_allclose(z, expected(X)[1])


def test_unavailable_provider_warns_and_falls_back(model_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sess = ort.InferenceSession(model_path, providers=["CUDAExecutionProvider",
                                                           "CPUExecutionProvider"])
    assert any("CUDAExecutionProvider" in str(w.message) for w in caught)
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_node_args(model_path):
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    inputs, outputs = sess.get_inputs(), sess.get_outputs()
    assert [(i.name, i.shape, i.type) for i in inputs] == [("x", ["N", 3], "tensor(float)")]
    assert [(o.name, o.type) for o in outputs] == [("y", "tensor(float)"),
                                                   ("z", "tensor(float)")]
    assert outputs[1].shape[1] == 2


def test_free_dimension_override(model_path):
    so = ort.SessionOptions()
    so.add_free_dimension_override_by_name("N", 2)
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    assert sess.get_inputs()[0].shape == [2, 3]
    np.testing.assert_allclose(sess.run(["y"], {"x": X})[0], expected(X)[0])


def test_modelmeta(model_path):
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    meta = sess.get_modelmeta()
    assert meta.producer_name == "cge-tests"
    assert meta.graph_name == "ort_style_graph"
    assert meta.domain == "ai.cge.test"
    assert meta.description == "a test model"
    assert meta.graph_description == "graph doc"
    assert meta.version == 7
    assert meta.custom_metadata_map == {"author": "cge", "purpose": "ort api"}
    # From bytes too.
    with open(model_path, "rb") as f:
        sess2 = ort.InferenceSession(f.read())
    assert sess2.get_modelmeta().custom_metadata_map["author"] == "cge"


def test_run_options(model_path):
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    ro = ort.RunOptions()
    ro.log_severity_level = 3
    ro.logid = "test"
    ro.add_run_config_entry("key", "value")
    assert ro.get_run_config_entry("key") == "value"
    np.testing.assert_allclose(sess.run(["y"], {"x": X}, ro)[0], expected(X)[0])
    ro.terminate = True
    with pytest.raises(ort.Error):
        sess.run(["y"], {"x": X}, run_options=ro)


def test_profiling(model_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = "prof"
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    assert sess.get_profiling_start_time_ns() > 0
    for _ in range(2):
        sess.run(None, {"x": X})
    prof_file = sess.end_profiling()
    assert os.path.basename(prof_file).startswith("prof") and prof_file.endswith(".json")
    with open(prof_file) as f:
        trace = json.load(f)
    kernels = [e for e in trace if e["cat"] == "Node"]
    assert kernels and all(e["args"]["op_name"] for e in kernels)  # fused names, maybe
    assert any("MatMul" in e["args"]["op_name"] for e in kernels)
    assert {e["args"]["run"] for e in trace} == {1, 2}
    for e in trace:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0
    # Profiling stopped: later runs record nothing, a second end_profiling says so.
    sess.run(None, {"x": X})
    assert sess.end_profiling() == ""
    # Without enable_profiling there is no file.
    assert ort.InferenceSession(model_path).end_profiling() == ""


def test_optimized_model_filepath(model_path, tmp_path):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.add_free_dimension_override_by_name("N", 2)
    so.optimized_model_filepath = str(tmp_path / "model.cgm")
    sess = ort.InferenceSession(model_path, so)
    ref = sess.run(None, {"x": X})
    assert os.path.getsize(so.optimized_model_filepath) > 0
    compiled = ort.InferenceSession(so.optimized_model_filepath,
                                    providers=["CPUExecutionProvider"])
    for a, b in zip(ref, compiled.run(None, {"x": X})):
        np.testing.assert_array_equal(a, b)
    assert compiled.get_modelmeta().producer_name == "cge"
    # A symbolic batch cannot be compiled ahead: a clear error, no file.
    so2 = ort.SessionOptions()
    so2.optimized_model_filepath = str(tmp_path / "dynamic.cgm")
    with pytest.raises(ort.Error, match="optimized_model_filepath"):
        ort.InferenceSession(model_path, so2)
    assert not os.path.exists(so2.optimized_model_filepath)


def test_io_binding(model_path):
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    io_binding = sess.io_binding()
    io_binding.bind_cpu_input("x", X)
    io_binding.bind_output("y")
    io_binding.bind_output("z", "cpu")
    sess.run_with_iobinding(io_binding)
    y, z = io_binding.copy_outputs_to_cpu()
    np.testing.assert_allclose(y, expected(X)[0])
    np.testing.assert_allclose(z, expected(X)[1])
    values = io_binding.get_outputs()
    assert values[1].shape() == [2, 2] and values[1].data_type() == "tensor(float)"
    np.testing.assert_allclose(values[0].numpy(), expected(X)[0])


def test_io_binding_with_buffer_pointers(model_path):
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    x = X.copy()
    z = np.zeros((2, 2), np.float32)
    io_binding = sess.io_binding()
    io_binding.bind_input(name="x", device_type="cpu", device_id=0, element_type=np.float32,
                          shape=x.shape, buffer_ptr=x.ctypes.data)
    io_binding.bind_output(name="z", device_type="cpu", device_id=0, element_type=np.float32,
                           shape=z.shape, buffer_ptr=z.ctypes.data)
    x[0, 0] = 10.0  # read when the run starts
    sess.run_with_iobinding(io_binding)
    np.testing.assert_allclose(z, expected(x)[1])
    # OrtValues both ways.
    x_ortvalue = ort.OrtValue.ortvalue_from_numpy(X, "cpu", 0)
    y_ortvalue = ort.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32, "cpu", 0)
    io_binding = sess.io_binding()
    io_binding.bind_ortvalue_input("x", x_ortvalue)
    io_binding.bind_ortvalue_output("y", y_ortvalue)
    sess.run_with_iobinding(io_binding)
    np.testing.assert_allclose(y_ortvalue.numpy(), expected(X)[0])
    with pytest.raises(ort.Error, match="cuda"):
        io_binding.bind_output("y", "cuda", 0)


def test_io_binding_zero_copy_loop(model_path, monkeypatch):
    """Every output bound to a buffer: the kernels read the bound input array
    and write the bound output arrays in place (runs go through the zero-copy
    path), and a loop that changes the input in place sees each new value."""
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    bound = []
    real = sess._run_bound
    monkeypatch.setattr(sess, "_run_bound", lambda *a: bound.append(1) or real(*a))
    x = X.copy()
    y = ort.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32, "cpu", 0)
    z = ort.OrtValue.ortvalue_from_shape_and_type([2, 2], np.float32, "cpu", 0)
    io_binding = sess.io_binding()
    io_binding.bind_cpu_input("x", x)
    io_binding.bind_ortvalue_output("y", y)
    io_binding.bind_ortvalue_output("z", z)
    y_array = y.numpy()
    for step in range(4):
        x[...] = X + step  # in place: the bound buffer itself
        sess.run_with_iobinding(io_binding)
        want = expected(x)
        np.testing.assert_allclose(y.numpy(), want[0], rtol=1e-6)
        np.testing.assert_allclose(z.numpy(), want[1], rtol=1e-6)
    assert y.numpy() is y_array and len(bound) == 4
    # A wrong buffer is refused with the output's real shape.
    bad = ort.OrtValue.ortvalue_from_shape_and_type([3, 2], np.float32, "cpu", 0)
    io_binding.bind_ortvalue_output("y", bad)
    with pytest.raises(ort.Error, match="output 'y'"):
        sess.run_with_iobinding(io_binding)


def test_run_with_ort_values(model_path):
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    outs = sess.run_with_ort_values(["z"], {"x": ort.OrtValue.ortvalue_from_numpy(X)})
    np.testing.assert_allclose(outs[0].numpy(), expected(X)[1])


def test_session_options_config_entries():
    so = ort.SessionOptions()
    so.add_session_config_entry("session.load_model_format", "ONNX")
    assert so.get_session_config_entry("session.load_model_format") == "ONNX"
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert so.intra_op_num_threads == 0 and not so.enable_profiling


def test_capture_sizes_pad_and_cut(model_path):
    """Declared buckets for the symbolic batch: every size gives the exact
    rows of a plain session (padded rows never show), and a bad declaration
    is refused."""
    plain = ort.InferenceSession(model_path)
    sess = ort.InferenceSession(model_path, capture_sizes={"N": [2, 4, 8]})
    rng = np.random.default_rng(3)
    for n in (1, 3, 2, 5, 8, 11, 1):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        got = sess.run(None, {"x": x})
        want = plain.run(None, {"x": x})
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.shape[0] == n
            np.testing.assert_allclose(g, w, rtol=1e-6)
    with pytest.raises(ort.Error, match="not positive"):
        ort.InferenceSession(model_path, capture_sizes={"N": [0]})


def test_last_run_mode_and_shared_arena(model_path):
    """The default mode runs a new signature as a plan first (the binding's
    first try at a new shape, refused for its output buffers, is no run) and
    replays once it comes back; every batch size runs in one arena, as large
    as the largest plan's."""
    sess = ort.InferenceSession(model_path)
    # A batch graph's batch-1 signature is planned at creation (its arena
    # with it); the larger batches below grow that one arena.
    created = sess.arena_bytes()
    sizes = []
    for n in (4, 1, 16, 2):
        sess.run(None, {"x": np.ones((n, 3), np.float32)})
        assert sess.last_run_mode() == "plan"
        sess.run(None, {"x": np.ones((n, 3), np.float32)})
        assert sess.last_run_mode() == "replay"
        sizes.append(sess.arena_bytes())
    assert sizes[0] > 0 and sizes[0] >= created
    assert sizes[1] == sizes[0] and sizes[2] > sizes[0] and sizes[3] == sizes[2]
