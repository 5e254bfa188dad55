# The ctypes binding: struct layouts against the C headers, InferenceSession
# metadata, runs for every dtype the engine has, dynamic and value-dependent
# shapes, and errors raised as cge.Error with their layer.
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import cge
from cge import _lib

import onnx  # noqa: F401  (required: conftest.REQUIRED)
from onnx import TensorProto, helper

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return m.SerializeToString()


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "cge/cge.h"
#define S(T) printf(#T " size %zu\n", sizeof(T))
#define O(T, f) printf(#T "." #f " %zu\n", offsetof(T, f))
int main(void) {
    S(cge_shape); O(cge_shape, rank); O(cge_shape, dims);
    S(cge_tensor); O(cge_tensor, name); O(cge_tensor, dtype); O(cge_tensor, shape);
    O(cge_tensor, data); O(cge_tensor, bytes);
    S(cge_tensor_desc); O(cge_tensor_desc, dtype); O(cge_tensor_desc, shape);
    O(cge_tensor_desc, format);
    S(cge_session_options); O(cge_session_options, num_threads);
    O(cge_session_options, run_mode); O(cge_session_options, capture_limit);
    O(cge_session_options, kv_cache_max_len);
    S(cge_onnx_input_shape); O(cge_onnx_input_shape, shape);
    S(cge_onnx_dim_value); O(cge_onnx_dim_value, value);
    S(cge_onnx_options); O(cge_onnx_options, num_input_shapes); O(cge_onnx_options, dim_values);
    O(cge_onnx_options, num_dim_values);
    S(cge_run_options); O(cge_run_options, stream); O(cge_run_options, profile);
    O(cge_run_options, profile_user);
    S(cge_profile_event); O(cge_profile_event, step); O(cge_profile_event, name);
    O(cge_profile_event, engine); O(cge_profile_event, stream);
    O(cge_profile_event, launch_begin_ms); O(cge_profile_event, end_ms);
    O(cge_profile_event, bytes);
    S(cge_compile_options); O(cge_compile_options, disable); O(cge_compile_options, dump_dir);
    O(cge_compile_options, collect_stats); O(cge_compile_options, num_streams);
    O(cge_compile_options, fold_limit_bytes); O(cge_compile_options, training);
    O(cge_compile_options, engines); O(cge_compile_options, num_engines);
    O(cge_compile_options, device); O(cge_compile_options, allow_incomplete);
    O(cge_compile_options, kv_cache_max_len);
    S(cge_model_save_options); O(cge_model_save_options, num_op_libraries);
    O(cge_model_save_options, opt_level);
    S(cge_model_load_options); O(cge_model_load_options, weights_check);
    O(cge_model_load_options, cpu_features);
    return 0;
}
"""


def test_struct_layouts_match_the_c_headers(tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    # The compiler that built cge: without it this build could not exist.
    if not cc:
        pytest.fail("no C compiler (gcc or cc) on PATH to read the headers' layouts", pytrace=False)
    src = tmp_path / "layout.c"
    src.write_text(LAYOUT_C)
    exe = tmp_path / "layout"
    # The generated headers (es_ops.h) live in the build beside libcge.so.
    gen = os.path.join(os.path.dirname(os.path.abspath(cge.library_path)), "generated", "include")
    subprocess.run([cc, "-I", os.path.join(ROOT, "include"), "-I", gen, str(src), "-o", str(exe)],
                   check=True)
    c = {}
    for line in subprocess.run([str(exe)], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        k, v = line.rsplit(" ", 1)
        c[k] = int(v)
    structs = {"cge_shape": _lib.Shape, "cge_tensor": _lib.Tensor,
               "cge_tensor_desc": _lib.TensorDesc, "cge_session_options": _lib.SessionOptions,
               "cge_onnx_input_shape": _lib.OnnxInputShape, "cge_onnx_dim_value": _lib.OnnxDimValue,
               "cge_onnx_options": _lib.OnnxOptions, "cge_run_options": _lib.RunOptions,
               "cge_profile_event": _lib.ProfileEvent, "cge_compile_options": _lib.CompileOptions,
               "cge_model_save_options": _lib.ModelSaveOptions,
               "cge_model_load_options": _lib.ModelLoadOptions}
    assert c["cge_shape size"] == 72
    for key, value in c.items():
        if key.endswith(" size"):
            assert ctypes.sizeof(structs[key[:-5]]) == value, key
        else:
            struct, field = key.split(".")
            assert getattr(structs[struct], field).offset == value, key
    assert len(c) == 26 + 30


def test_inputs_outputs_metadata():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", TensorProto.FLOAT, ["N", 3])],
              [vi("y", TensorProto.FLOAT, ["N", 3])])
    s = cge.InferenceSession(m)
    (i,), (o,) = s.get_inputs(), s.get_outputs()
    assert (i.name, i.type, i.shape) == ("x", "tensor(float)", ["N", 3])  # as ONNX Runtime
    assert (o.name, o.type, o.shape) == ("y", "tensor(float)", ["N", 3])
    s2 = cge.InferenceSession(m, dim_values={"N": 4})
    assert s2.get_inputs()[0].shape == [4, 3]
    s3 = cge.InferenceSession(m, input_shapes={"x": [2, 3]})
    assert s3.get_inputs()[0].shape == [2, 3]


def test_symbolic_dims_named_and_checked():
    # "batch" shared by two inputs and the output; an unnamed unknown dim is None
    m = model([helper.make_node("Add", ["a", "b"], ["y"]), helper.make_node("Neg", ["c"], ["z"])],
              [vi("a", TensorProto.FLOAT, ["batch", 2]), vi("b", TensorProto.FLOAT, ["batch", 2]),
               vi("c", TensorProto.FLOAT, [None, "seq"])],
              [vi("y", TensorProto.FLOAT, ["batch", 2]), vi("z", TensorProto.FLOAT, [None, "seq"])])
    s = cge.InferenceSession(m)
    assert [i.shape for i in s.get_inputs()] == [["batch", 2], ["batch", 2], [None, "seq"]]
    assert [o.shape for o in s.get_outputs()] == [["batch", 2], [None, "seq"]]
    for n in (3, 1, 3):
        a = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
        c = np.ones((2, n + 1), np.float32)
        y, z = s.run(None, {"a": a, "b": a, "c": c})
        np.testing.assert_array_equal(y, a + a)
        np.testing.assert_array_equal(z, -c)
    with pytest.raises(cge.Error) as e:
        s.run(None, {"a": np.zeros((3, 2), np.float32), "b": np.zeros((2, 2), np.float32),
                     "c": np.ones((1, 1), np.float32)})
    assert e.value.layer == "session" and "'batch'" in str(e.value)


def test_run_with_dynamic_batch_and_path(tmp_path):
    w = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    m = model([helper.make_node("Mul", ["x", "w"], ["y"])], [vi("x", TensorProto.FLOAT, ["N", 3])],
              [vi("y", TensorProto.FLOAT, ["N", 3])], [w])
    p = tmp_path / "m.onnx"
    p.write_bytes(m)
    s = cge.InferenceSession(str(p))
    for n in (1, 5, 2):
        x = np.random.RandomState(n).rand(n, 3).astype(np.float32)
        (y,) = s.run(None, {"x": x})
        assert y.shape == (n, 3)
        np.testing.assert_array_equal(y, x * np.array([1, 2, 3], np.float32))


DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int16, np.uint16, np.int32,
          np.int64, np.uint32, np.uint64, np.bool_]


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips(dt):
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dt)) if hasattr(helper, "np_dtype_to_tensor_dtype") \
        else onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(dt)]
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", t, [2, 3])],
              [vi("y", t, [2, 3])])
    s = cge.InferenceSession(m)
    assert s.get_inputs()[0].type == "tensor(%s)" % {"float32": "float", "float64": "double"}.get(
        np.dtype(dt).name, np.dtype(dt).name)
    x = (np.arange(6).reshape(2, 3) % 2 == 0) if dt is np.bool_ else np.arange(6).reshape(2, 3).astype(dt)
    (y,) = s.run(None, {"x": x})
    assert y.dtype == np.dtype(dt) and y.shape == (2, 3)
    np.testing.assert_array_equal(y, x)


def test_bfloat16_travels_as_uint16_bits():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", TensorProto.BFLOAT16, [2])],
              [vi("y", TensorProto.BFLOAT16, [2])])
    s = cge.InferenceSession(m)
    assert s.get_inputs()[0].type == "tensor(bfloat16)"
    bits = np.array([0x3F80, 0xC000], np.uint16)  # 1.0, -2.0
    (y,) = s.run(None, {"x": bits})
    assert y.dtype == np.uint16
    np.testing.assert_array_equal(y, bits)
    # The same through zero-copy I/O binding (it shares run's input handling).
    out = cge.OrtValue(np.zeros(2, np.uint16))
    io = s.io_binding()
    io.bind_cpu_input("x", bits)
    io.bind_ortvalue_output("y", out)
    s.run_with_iobinding(io)
    np.testing.assert_array_equal(out.numpy(), bits)


def test_scalar_input_keeps_rank_zero():
    m = model([helper.make_node("Neg", ["x"], ["y"])], [vi("x", TensorProto.FLOAT, [])],
              [vi("y", TensorProto.FLOAT, [])])
    (y,) = cge.InferenceSession(m).run(None, {"x": np.float32(2.5)})
    assert y.shape == () and y == -2.5


def test_value_dependent_output_shape():
    # Reshape to a shape given at run time: the output size is known only
    # after the run, so the binding sizes the buffer from what the run computed.
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])],
              [vi("x", TensorProto.FLOAT, [2, 6]), vi("s", TensorProto.INT64, [2])],
              [vi("y", TensorProto.FLOAT, None)])
    s = cge.InferenceSession(m)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    for shape in ([3, 4], [6, 2], [12, 1], [3, 4]):
        (y,) = s.run(None, {"x": x, "s": np.array(shape, np.int64)})
        np.testing.assert_array_equal(y, x.reshape(shape))


def test_output_subset_and_unknown_output():
    m = model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"])],
              [vi("x", TensorProto.FLOAT, [3])], [vi("a", TensorProto.FLOAT, [3]),
                                                   vi("b", TensorProto.FLOAT, [3])])
    s = cge.InferenceSession(m)
    x = np.array([-1, 0, 2], np.float32)
    (b,) = s.run(["b"], {"x": x})
    np.testing.assert_array_equal(b, -x)
    a, b = s.run(None, {"x": x})
    np.testing.assert_array_equal(a, np.maximum(x, 0))
    with pytest.raises(cge.Error) as e:
        s.run(["nope"], {"x": x})
    assert e.value.layer == "session" and "nope" in str(e.value)


def test_errors_carry_their_layer():
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession(b"\x08\x01 definitely not a model \xff\xff")
    assert e.value.layer == "io" and str(e.value).startswith("[io]")
    m = model([helper.make_node("FooBar", ["x"], ["y"], name="n1")],
              [vi("x", TensorProto.FLOAT, [1])], [vi("y", TensorProto.FLOAT, [1])])
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession(m)
    assert e.value.layer == "converter" and "FooBar" in str(e.value) and "'n1'" in str(e.value)
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession("/nonexistent/model.onnx")
    assert e.value.layer == "io"
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", TensorProto.FLOAT, [2])],
              [vi("y", TensorProto.FLOAT, [2])])
    s = cge.InferenceSession(m)
    with pytest.raises(cge.Error) as e:
        s.run(None, {"x": np.zeros(2, np.int32)})
    assert e.value.layer == "session" and "int32" in str(e.value)
    with pytest.raises(cge.Error) as e:
        s.run(None, {"x": np.zeros(3, np.float32)})
    assert e.value.layer == "session" and e.value.status == "CGE_ERR_SHAPE"
    with pytest.raises(cge.Error):
        s.run(None, {"x": np.zeros(2, np.complex64)})
