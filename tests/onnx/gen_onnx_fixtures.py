#!/usr/bin/env python3
# Generates tests/onnx/onnx_fixtures.h: small ONNX models (serialised bytes)
# for the importer's C tests, well-formed and deliberately broken ones.
# Run: /usr/bin/python3 tests/onnx/gen_onnx_fixtures.py > tests/onnx/onnx_fixtures.h
import numpy as np
from onnx import TensorProto, helper
from onnx import onnx_pb

T = TensorProto


def model(nodes, inputs, outputs, inits=(), opset=13, extra_opsets=(), value_info=(), ir=8):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops, producer_name="cge-fixtures")
    m.ir_version = ir
    return m.SerializeToString()


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


fx = {}

# x[2,3] + w (raw_data) -> y
w = helper.make_tensor("w", T.FLOAT, [2, 3], np.arange(6, dtype=np.float32).tobytes(), raw=True)
fx["add_init"] = model([helper.make_node("Add", ["x", "w"], ["y"], name="add0")],
                       [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2, 3])], [w])

# Every typed field: values 1, -2 (or 1, 0 for unsigned/bool), 3.5 for floats.
typed = [
    helper.make_tensor("f32", T.FLOAT, [3], [1.0, -2.0, 3.5]),
    helper.make_tensor("f64", T.DOUBLE, [3], [1.0, -2.0, 3.5]),
    helper.make_tensor("f16", T.FLOAT16, [3], [1.0, -2.0, 3.5]),
    helper.make_tensor("bf16", T.BFLOAT16, [3], [1.0, -2.0, 3.5]),
    helper.make_tensor("i8", T.INT8, [3], [1, -2, 3]),
    helper.make_tensor("u8", T.UINT8, [3], [1, 200, 3]),
    helper.make_tensor("i16", T.INT16, [3], [1, -2, 3]),
    helper.make_tensor("u16", T.UINT16, [3], [1, 60000, 3]),
    helper.make_tensor("i32", T.INT32, [3], [1, -2, 3]),
    helper.make_tensor("i64", T.INT64, [3], [1, -2, 3]),
    helper.make_tensor("u32", T.UINT32, [3], [1, 4000000000, 3]),
    helper.make_tensor("u64", T.UINT64, [3], [1, 2**63 + 5, 3]),
    helper.make_tensor("b", T.BOOL, [3], [True, False, True]),
    helper.make_tensor("scalar", T.FLOAT, [], [7.0]),
    helper.make_tensor("empty", T.FLOAT, [0, 4], []),
]
fx["typed_inits"] = model([helper.make_node("Identity", ["f32"], ["y"])], [],
                          [vi("y", T.FLOAT, [3])], typed)

bad = helper.make_tensor("w", T.FLOAT, [4], np.zeros(4, np.float32).tobytes(), raw=True)
bad.raw_data = bad.raw_data[:8]
fx["bad_raw_size"] = model([helper.make_node("Add", ["x", "w"], ["y"])],
                           [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])], [bad])
bad = helper.make_tensor("w", T.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
del bad.float_data[3]
fx["bad_typed_count"] = model([helper.make_node("Add", ["x", "w"], ["y"])],
                              [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])], [bad])
bad = helper.make_tensor("w", T.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
bad.dims[0] = -4
fx["negative_dim"] = model([helper.make_node("Add", ["x", "w"], ["y"])],
                           [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])], [bad])

fx["unsupported_op"] = model([helper.make_node("FooBar", ["x"], ["y"], name="my_node")],
                             [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])])
fx["custom_domain_op"] = model(
    [helper.make_node("Gizmo", ["x"], ["y"], name="giz", domain="com.example")],
    [vi("x", T.FLOAT, [4])], [vi("y", T.FLOAT, [4])], extra_opsets=[("com.example", 2)])

# Opset 11 Softmax: 2-D coercion at axis 1 (rows of 12 on a [2,3,4] input).
fx["softmax11"] = model([helper.make_node("Softmax", ["x"], ["y"], axis=1, name="sm")],
                        [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 3, 4])], opset=11)
# Opset 11 ReduceSum: axes as an attribute.
fx["reduce11"] = model([helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)],
                       [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [2])], opset=11)
# Constant node feeding Reshape: folded into a constant so the shape is static.
c = helper.make_tensor("c", T.INT64, [2], [3, 2])
fx["constant_reshape"] = model(
    [helper.make_node("Constant", [], ["shape"], value=c),
     helper.make_node("Reshape", ["x", "shape"], ["y"])],
    [vi("x", T.FLOAT, [2, 3])], [vi("y", T.FLOAT, [3, 2])])

s = helper.make_tensor("s", T.STRING, [1], [b"hello"])
fx["string_init"] = model([helper.make_node("Identity", ["x"], ["y"])],
                          [vi("x", T.FLOAT, [1])], [vi("y", T.FLOAT, [1])], [s])
sp = helper.make_sparse_tensor(helper.make_tensor("v", T.FLOAT, [1], [1.0]),
                               helper.make_tensor("i", T.INT64, [1], [0]), [4])
fx["sparse_constant"] = model([helper.make_node("Constant", [], ["y"], sparse_value=sp)], [],
                              [vi("y", T.FLOAT, [4])])
fx["sequence_input"] = model(
    [helper.make_node("Identity", ["x"], ["y"])],
    [helper.make_tensor_sequence_value_info("x", T.FLOAT, [2])],
    [helper.make_tensor_sequence_value_info("y", T.FLOAT, [2])])
# Maps are no value type of cge's (sequences and optionals are).
map_type = onnx_pb.TypeProto()
map_type.map_type.key_type = T.INT64
map_type.map_type.value_type.tensor_type.elem_type = T.FLOAT
fx["map_input"] = model([helper.make_node("Identity", ["x"], ["y"])],
                        [helper.make_value_info("x", map_type)], [vi("y", T.FLOAT, [2])])

# External data: "w.bin" beside the model, and locations that try to leave.
for name, loc, length in (("external_ok", "w.bin", 24), ("external_escape", "../w.bin", 24),
                          ("external_absolute", "/etc/hostname", 24),
                          ("external_too_long", "w.bin", 100),
                          ("external_symlink", "link.bin", 24)):
    t = TensorProto(name="w", data_type=T.FLOAT, dims=[2, 3])
    t.data_location = T.EXTERNAL
    for k, v in (("location", loc), ("offset", "0"), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = k, v
    fx[name] = model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", T.FLOAT, [2, 3])],
                     [vi("y", T.FLOAT, [2, 3])], [t])

# A graph attribute (custom op "Holder" in domain "cge.test", which the test registers).
def holder_body(inner=None):
    k = helper.make_tensor("k", T.FLOAT, [1], [2.0])
    nodes = [helper.make_node("Mul", ["a", "k"], ["b"], name="body_mul")]
    if inner is not None:
        nodes.append(helper.make_node("Holder", ["b"], ["c"], domain="cge.test", body=inner))
    return helper.make_graph(nodes, "body", [vi("a", T.FLOAT, [2])],
                             [vi("c" if inner is not None else "b", T.FLOAT, [2])], [k])
fx["nested_graph"] = model(
    [helper.make_node("Holder", ["x"], ["y"], name="holder", domain="cge.test", body=holder_body())],
    [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], extra_opsets=[("cge.test", 1)])
deep = holder_body()
for _ in range(80):
    deep = holder_body(deep)
fx["deep_nesting"] = model(
    [helper.make_node("Holder", ["x"], ["y"], domain="cge.test", body=deep)],
    [vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], extra_opsets=[("cge.test", 1)])

# Symbolic and missing dimensions; value_info describing an intermediate.
fx["dynamic"] = model(
    [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
    [vi("x", T.FLOAT, ["N", 3, None])], [vi("y", T.FLOAT, ["N", 3, None])],
    value_info=[vi("t", T.FLOAT, ["N", 3, None])])
# Two inputs sharing the dim_param "batch" (a symbol in cge), another one
# "seq", and an output declared with "batch".
fx["batch_pair"] = model(
    [helper.make_node("Add", ["a", "b"], ["y"]), helper.make_node("Relu", ["s"], ["z"])],
    [vi("a", T.FLOAT, ["batch", 4]), vi("b", T.FLOAT, ["batch", 4]), vi("s", T.FLOAT, ["seq", 2])],
    [vi("y", T.FLOAT, ["batch", 4]), vi("z", T.FLOAT, ["seq", 2])])
# Old style: the initializer is also listed among the inputs.
w = helper.make_tensor("w", T.FLOAT, [2], [1.0, 2.0])
fx["init_in_inputs"] = model([helper.make_node("Add", ["x", "w"], ["y"])],
                             [vi("x", T.FLOAT, [2]), vi("w", T.FLOAT, [2])],
                             [vi("y", T.FLOAT, [2])], [w], ir=3)
m_no_opset = helper.make_model(helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                                                 [vi("x", T.FLOAT, [1])], [vi("y", T.FLOAT, [1])]))
del m_no_opset.opset_import[:]
fx["no_opset"] = m_no_opset.SerializeToString()

# Outer-scope reads: both If branches read "x" of the main graph; the else
# branch does so through an inner If whose branch reads "x" and "k" (defined
# in the else branch): the importer lists them as extra inputs + outer_names.
def branch(name, nodes, out, inits=()):
    return helper.make_graph(nodes, name, [], [vi(out, T.FLOAT, [2])], list(inits))
inner_then = branch("inner_then", [helper.make_node("Add", ["x", "k"], ["it"])], "it")
inner_else = branch("inner_else", [helper.make_node("Neg", ["x"], ["ie"])], "ie")
kk = helper.make_tensor("k", T.FLOAT, [2], [1.0, 2.0])
fx["outer_scope"] = model(
    [helper.make_node("If", ["c"], ["y"], name="outer_if",
                      then_branch=branch("then", [helper.make_node("Neg", ["x"], ["t"])], "t"),
                      else_branch=branch("else", [helper.make_node(
                          "If", ["c"], ["e"], name="inner_if", then_branch=inner_then,
                          else_branch=inner_else)], "e", [kk]))],
    [vi("c", T.BOOL, []), vi("x", T.FLOAT, [2])], [vi("y", T.FLOAT, [2])], opset=16)

print("/* Generated by tests/onnx/gen_onnx_fixtures.py: ONNX models for the importer tests. */")
print("#ifndef CGE_TEST_ONNX_FIXTURES_H\n#define CGE_TEST_ONNX_FIXTURES_H\n#include <stddef.h>\n")
for name, data in fx.items():
    print("static const unsigned char fx_%s[%d] = {" % (name, len(data)))
    for i in range(0, len(data), 16):
        print("    " + ", ".join("0x%02x" % b for b in data[i:i + 16]) + ",")
    print("};")
print("\n#endif")
