"""Weights from .onnx: imported with one copy (from the file, from bytes, from
external data) and, with static shapes, kept only in their packed form;
InferenceSession.memory_stats() shows weights, packed weights, released
weights and arena apart."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cge

K, N = 96, 80


def _model(path, external=False):
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((K, N)).astype(np.float32)
    w2 = rng.standard_normal((N, 10)).astype(np.float32)
    b2 = rng.standard_normal(10).astype(np.float32)
    mask = np.array([True, False] * 5)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "w2", "b2"], ["g"]),
         helper.make_node("Where", ["mask", "g", "zero"], ["y"])],
        "mem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 10])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
         numpy_helper.from_array(b2, "b2"),
         helper.make_tensor("mask", TensorProto.BOOL, [10], mask.tolist()),
         helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    if external:
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data", size_threshold=0)
    else:
        onnx.save_model(m, path)

    def ref(x):
        return np.where(mask, np.maximum(x @ w1, 0) @ w2 + b2, 0).astype(np.float32)
    return ref, w1.nbytes + w2.nbytes


@pytest.mark.parametrize("source", ["file", "bytes", "external"])
def test_weights_once_and_packed_only(tmp_path, source):
    path = str(tmp_path / "model.onnx")
    ref, packed_weights = _model(path, external=source == "external")
    x = np.random.default_rng(5).standard_normal((3, K)).astype(np.float32)
    if source == "bytes":
        with open(path, "rb") as f:
            sess = cge.InferenceSession(f.read())
    else:
        sess = cge.InferenceSession(path)
    for _ in range(2):
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, ref(x), rtol=1e-5, atol=1e-5)
    st = sess.memory_stats()
    # Both products' B were packed at prepare; their float copies went.
    assert st["released_weights"] == packed_weights
    assert st["packed_weights"] >= packed_weights
    assert st["weights"] < packed_weights  # the bias, the mask: read as they are
    assert st["arena"] > 0


def test_keep_packed_weights_env(tmp_path, monkeypatch):
    path = str(tmp_path / "model.onnx")
    ref, packed_weights = _model(path)
    monkeypatch.setenv("CGE_KEEP_PACKED_WEIGHTS", "1")
    sess = cge.InferenceSession(path)
    x = np.ones((3, K), np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref(x), rtol=1e-5, atol=1e-5)
    st = sess.memory_stats()
    assert st["released_weights"] == 0
    assert st["weights"] >= packed_weights


def test_truncated_external_data_is_an_io_error(tmp_path):
    path = str(tmp_path / "model.onnx")
    _model(path, external=True)
    data = str(tmp_path / "model.onnx.data")
    size = os.path.getsize(data)
    with open(data, "r+b") as f:
        f.truncate(size - 4)
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession(path)
    assert "[io]" in str(e.value)


def _mapping_of(addr):
    """The file /proc/self/maps names for the mapping holding addr ('' if none)."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi:
                return parts[5] if len(parts) > 5 else ""
    return None


def test_aligned_external_weights_are_mapped_in_place(tmp_path):
    """A large external weight at a 64-byte aligned offset is the data file's
    pages (no copy); the first one (offset 0: no room for the block's header)
    is copied; both hold the file's values."""
    import ctypes
    from cge import _lib
    a = np.arange(256 * 512, dtype=np.float32).reshape(256, 512) / 7
    b = -np.arange(512 * 128, dtype=np.float32).reshape(512, 128) / 3
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "ext", [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [256, 128])],
        [numpy_helper.from_array(a, "a"), numpy_helper.from_array(b, "b")])
    path = str(tmp_path / "model.onnx")
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
                    path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="w.data", size_threshold=0)
    lib = _lib.lib
    lib.cge_graph_constant.restype = ctypes.POINTER(_lib.Tensor)
    lib.cge_graph_constant.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    g = ctypes.c_void_p()
    assert lib.cge_onnx_import_file(path.encode(), None, ctypes.byref(g)) == 0
    try:
        where = {}
        for name, want in (("a", a), ("b", b)):
            t = lib.cge_graph_constant(g, name.encode()).contents
            got = np.ctypeslib.as_array((ctypes.c_float * want.size).from_address(t.data))
            np.testing.assert_array_equal(got.reshape(want.shape), want)
            where[name] = _mapping_of(t.data)
        assert not where["a"].endswith("w.data")
        assert where["b"].endswith("w.data")
    finally:
        lib.cge_graph_destroy(g)
    (y,) = cge.InferenceSession(path).run(None, {})
    np.testing.assert_allclose(y, a @ b, rtol=1e-4)


def _external(tensors, data_path):
    """Initializers whose bytes go into data_path at the given offsets
    (name -> (array, offset)), as onnx's writer lays them out but with
    offsets of our choosing."""
    inits = []
    with open(data_path, "wb") as f:
        for name, (arr, off) in tensors.items():
            f.seek(off)
            f.write(arr.tobytes())
            t = numpy_helper.from_array(arr, name)
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", os.path.basename(data_path)), ("offset", str(off)),
                         ("length", str(arr.nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
    return inits


def test_external_weights_at_8_byte_offsets_are_mapped_in_place(tmp_path):
    """onnx's external-data writer puts most large tensors at 32-byte offsets:
    one at an offset of 8 mod 64 is the file's pages too (not a copy), read
    by a packing kernel (MatMul's B) and by one that reads it as it is
    (Add); one at 4 mod 8 (no room for an aligned block header) is copied.
    All give numpy's results."""
    import ctypes
    from cge import _lib
    rng = np.random.default_rng(11)
    w = rng.standard_normal((256, 384)).astype(np.float32)
    add = rng.standard_normal((192, 384)).astype(np.float32)
    odd = rng.standard_normal((192, 384)).astype(np.float32)
    inits = _external({"w": (w, 4096 + 8), "add": (add, 4096 * 200 + 72),
                       "odd": (odd, 4096 * 400 + 4)}, str(tmp_path / "w.data"))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Add", ["h", "add"], ["a"]),
         helper.make_node("Mul", ["a", "odd"], ["y"])], "ext8",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [192, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [192, 384])], inits)
    path = str(tmp_path / "model.onnx")
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    lib = _lib.lib
    lib.cge_graph_constant.restype = ctypes.POINTER(_lib.Tensor)
    lib.cge_graph_constant.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    g = ctypes.c_void_p()
    assert lib.cge_onnx_import_file(path.encode(), None, ctypes.byref(g)) == 0
    try:
        where = {}
        for name, want in (("w", w), ("add", add), ("odd", odd)):
            t = lib.cge_graph_constant(g, name.encode()).contents
            got = np.ctypeslib.as_array((ctypes.c_float * want.size).from_address(t.data))
            np.testing.assert_array_equal(got.reshape(want.shape), want)
            where[name] = (_mapping_of(t.data), t.data % 64)
        assert where["w"][0].endswith("w.data") and where["w"][1] == 8
        assert where["add"][0].endswith("w.data") and where["add"][1] == 8
        assert not where["odd"][0].endswith("w.data")
    finally:
        lib.cge_graph_destroy(g)
    x = rng.standard_normal((192, 256)).astype(np.float32)
    for level in (0, 2):
        so = cge.SessionOptions()
        so.graph_optimization_level = level
        (y,) = cge.InferenceSession(path, so).run(None, {"x": x})
        np.testing.assert_allclose(y, (x @ w + add) * odd, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("source", ["file", "external"])
def test_symbolic_rows_weights_packed_only(tmp_path, monkeypatch, source):
    """A model with a symbolic dim keeps only the packed copy of its matrix
    weights too (the first signature packs them for every size); each size
    gives what a session that keeps them gives, bit for bit."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((256, 384)).astype(np.float32)  # 384 KiB: pages of its own
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "sym", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", 384])],
        [numpy_helper.from_array(w, "w")])
    path = str(tmp_path / "model.onnx")
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    if source == "external":
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data", size_threshold=0)
    else:
        onnx.save_model(m, path)
    sess = cge.InferenceSession(path)
    monkeypatch.setenv("CGE_KEEP_PACKED_WEIGHTS", "1")
    kept = cge.InferenceSession(path)
    st, sk = sess.memory_stats(), kept.memory_stats()
    assert st["released_weights"] == w.nbytes
    assert st["weights"] < w.nbytes
    assert sk["released_weights"] == 0 and sk["weights"] >= w.nbytes
    for rows in (1, 7, 33, 2, 128):
        x = rng.standard_normal((rows, 256)).astype(np.float32)
        (y,), (yk,) = sess.run(None, {"x": x}), kept.run(None, {"x": x})
        np.testing.assert_array_equal(y, yk)
        np.testing.assert_allclose(y, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)
    assert sess.memory_stats()["released_weights"] == w.nbytes
