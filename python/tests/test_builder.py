# cge.GraphBuilder (methods made from the registry's schemas), cge.Session
# over built graphs in every run mode, and the per-layer exceptions: each
# layer's failure raises its class (under cge.Error) with the layered message.
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

import cge
from cge import _lib, builder
from cge._session import _last_error

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.dirname(os.path.abspath(cge.library_path))

LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "cge/cge.h"
#define S(T) printf(#T " size %zu\n", sizeof(T))
#define O(T, f) printf(#T "." #f " %zu\n", offsetof(T, f))
int main(void) {
    S(cge_arg_def); O(cge_arg_def, flags); O(cge_arg_def, dtypes); O(cge_arg_def, doc);
    S(cge_attr_def); O(cge_attr_def, kind); O(cge_attr_def, required);
    O(cge_attr_def, default_i); O(cge_attr_def, default_f); O(cge_attr_def, default_s);
    S(cge_op_def); O(cge_op_def, since_version); O(cge_op_def, inputs); O(cge_op_def, num_inputs);
    O(cge_op_def, outputs); O(cge_op_def, attrs); O(cge_op_def, num_attrs);
    O(cge_op_def, infer); O(cge_op_def, num_kernels); O(cge_op_def, doc);
    S(cge_attr); O(cge_attr, kind); O(cge_attr, i); O(cge_attr, f); O(cge_attr, s); O(cge_attr, t);
    O(cge_attr, n); O(cge_attr, ints); O(cge_attr, floats); O(cge_attr, strings);
    O(cge_attr, graphs);
    S(cge_t); S(cge_run_options); O(cge_run_options, stream);
    O(cge_run_options, profile_user);
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
    gen = os.path.join(BUILD, "generated", "include")
    subprocess.run([cc, "-I", os.path.join(ROOT, "include"), "-I", gen, str(src), "-o", str(exe)],
                   check=True)
    structs = {"cge_arg_def": builder.ArgDef, "cge_attr_def": builder.AttrDef,
               "cge_op_def": builder.OpDef, "cge_attr": builder.Attr, "cge_t": builder.Handle,
               "cge_run_options": builder.RunOptions}
    n = 0
    for line in subprocess.run([str(exe)], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        key, value = line.rsplit(" ", 1)
        n += 1
        if key.endswith(" size"):
            assert ctypes.sizeof(structs[key[:-5]]) == int(value), key
        else:
            struct, field = key.split(".")
            assert getattr(structs[struct], field).offset == int(value), key
    assert n == 35


def test_methods_come_from_the_registry():
    b = cge.GraphBuilder()
    names = dir(b)
    for op in ("add", "mat_mul", "log_softmax", "reduce_sum", "conv", "batch_normalization"):
        assert op in names
    assert builder.snake("LogSoftmax") == "log_softmax"
    assert builder.snake("MatMul") == "mat_mul"
    assert builder.snake("QLinearConv") == "q_linear_conv"
    assert "Softmax(input) -> output" in b.softmax.__doc__ and "axis" in b.softmax.__doc__
    with pytest.raises(AttributeError, match="no operator 'frobnicate'"):
        b.frobnicate
    ops = builder.operators()
    assert ops["add"] == ("", "Add")
    assert len(ops) >= 150


def build_mlp():
    b = cge.GraphBuilder("mlp")
    x = b.input("x", "float32", [None, 4])
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    h = b.relu(b.gemm(x, w, np.float32([0.5, -1, 0]), transB=0))
    s = b.softmax(h * 2.0 - 1.0, axis=-1)
    b.output(s, "y")
    b.output(b.reduce_sum(x, b.constant(np.int64([1])), keepdims=0), "s")
    return b.build(), w


def ref_mlp(x, w):
    h = np.maximum(x @ w + np.float32([0.5, -1, 0]), 0) * 2 - 1
    e = np.exp(h - h.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True), x.sum(1)


@pytest.mark.parametrize("mode", ["eager", "plan", "replay", None])
def test_session_run_modes(mode):
    g, w = build_mlp()
    assert g.inputs == ["x"] and g.outputs == ["y", "s"]
    assert [op for _, op, _ in g.nodes()][:2] == ["Gemm", "Relu"]
    s = cge.Session(g, run_mode=mode)
    assert s.get_inputs()[0].shape == [None, 4]
    for n in (3, 5, 3):
        x = np.random.RandomState(n).randn(n, 4).astype(np.float32)
        y, sm = s.run(None, {"x": x})
        ry, rs = ref_mlp(x, w)
        np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(sm, rs, rtol=1e-5, atol=1e-6)
    if mode:
        assert s.last_run_mode() == mode


def test_values_and_multiple_outputs():
    b = cge.GraphBuilder()
    x = b.input("x", np.float32, [2, 6])
    assert (x.name, x.dtype, x.shape) == ("x", np.float32, (2, 6))
    parts = b.split(x, b.constant(np.int64([2, 4])), axis=1, num_outputs=2)
    assert [p.shape for p in parts] == [(2, 2), (2, 4)]
    top, idx = b.top_k(x, b.constant(np.int64([3])), axis=1)
    assert idx.dtype == np.int64
    b.output(parts[0] @ b.constant(np.ones((2, 3), np.float32)), "m")
    b.output(-top, "t")
    xa = np.arange(12, dtype=np.float32).reshape(2, 6)
    m, t = cge.Session(b.build()).run(None, {"x": xa})
    np.testing.assert_array_equal(m, xa[:, :2] @ np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(t, -np.sort(xa, 1)[:, ::-1][:, :3])


def test_builder_errors_name_the_layer_and_node():
    b = cge.GraphBuilder()
    x = b.input("x", "float32", [2, 3])
    y = b.input("y", "float32", [4])
    with pytest.raises(cge.MetaError) as e:
        b.add(x, y, name="bad_add")
    assert str(e.value).startswith("[meta] Add 'bad_add'")
    assert e.value.layer == "meta" and isinstance(e.value, cge.Error)
    b = cge.GraphBuilder()
    x = b.input("x", "float32", [2, 3])
    with pytest.raises(cge.SchemaError, match="unknown attribute 'axsi'"):
        b.softmax(x, axsi=1)
    b = cge.GraphBuilder()
    x = b.input("x", "float32", [2, 3])
    with pytest.raises(cge.SchemaError, match="required attribute 'to'"):
        b.cast(x)
    with pytest.raises(cge.SchemaError, match="no operator 'Nope' in domain 'acme'"):
        cge.GraphBuilder().op("Nope", domain="acme")
    other = cge.GraphBuilder().input("z", "float32", [1])
    with pytest.raises(cge.GraphError, match="not a value of this builder"):
        cge.GraphBuilder().relu(other)
    with pytest.raises(cge.GraphError):
        cge.Session("not a graph")
    with pytest.raises(cge.SessionError, match="unknown run mode"):
        cge.Session(build_mlp()[0], run_mode="fast")


def test_exception_classes():
    assert cge.RuntimeError is cge.CgeRuntimeError and cge.RuntimeError is not RuntimeError
    assert cge.IOError is cge.CgeIOError and cge.IOError is not OSError
    for cls in (cge.SchemaError, cge.MetaError, cge.ConverterError, cge.EngineError,
                cge.KernelError, cge.RuntimeError, cge.IOError, cge.GraphError, cge.SessionError):
        assert issubclass(cls, cge.Error)
    # Each layer's recorded error raises its class, carrying the message.
    lib = _lib.lib
    for code, cls in ((1, cge.SchemaError), (2, cge.MetaError), (3, cge.ConverterError),
                      (4, cge.EngineError), (5, cge.KernelError), (6, cge.RuntimeError),
                      (7, cge.IOError), (8, cge.GraphError), (9, cge.SessionError)):
        lib.cge_error(code, 1, b"%s", b"something went wrong")
        err = _last_error()
        assert type(err) is cls
        assert str(err).endswith("] something went wrong") and err.status == "CGE_ERR_INVALID_ARG"
    lib.cge_clear_error()


def test_io_and_converter_errors_from_onnx():
    from onnx import TensorProto, helper
    with pytest.raises(cge.IOError) as e:
        cge.InferenceSession(b"\x08\x07garbage that is not a model")
    assert e.value.layer == "io"
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "xy"]
    g = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], name="f0")], "g",
                          vi[:1], vi[1:])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(cge.ConverterError, match="'Frobnicate'.*node 'f0'"):
        cge.InferenceSession(m.SerializeToString())


def test_engine_and_kernel_errors():
    path = os.path.join(BUILD, "tests", "libcge_test_oplib.so")
    # The build makes it (tests/CMakeLists.txt: cge_test_oplib) with libcge.so.
    if not os.path.exists(path):
        pytest.fail("%s is not built (ninja -C %s cge_test_oplib)" % (path, BUILD), pytrace=False)
    cge.load_op_library(path)
    b = cge.GraphBuilder()
    x = b.input("x", "float64", [2])
    b.output(b.op("TestScale", x, domain="test", scale=2.0), "y")
    with pytest.raises(cge.EngineError, match="TestScale 'TestScale_0' with dtype float64"):
        cge.Session(b.build())
    b = cge.GraphBuilder()
    x = b.input("x", "float32", [2])
    b.output(b.op("TestFail", x, domain="test"), "y")
    s = cge.Session(b.build(), run_mode="plan")
    with pytest.raises(cge.KernelError, match="TestFail .*refuses every input"):
        s.run(None, {"x": np.ones(2, np.float32)})
