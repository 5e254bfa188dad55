# QuantizeLinear / DequantizeLinear of opsets 19-21 (blocked scales, int4 /
# uint4 and int16 / uint16 tensors, output_dtype) against a NumPy reference
# of the ONNX formulas; blocked 4-bit DequantizeLinear -> MatMul reaching
# MatMulNBits; the importer's opset 19-21 handling. onnx 1.12 does not know
# INT4 / UINT4 (22 / 21), so those tensors are written by hand here
# (TensorProto.data_type is a plain int32 field).
import glob
import os

import numpy as np
import pytest

import cge

import onnx
from onnx import TensorProto, helper

NP2ONNX = onnx.mapping.NP_TYPE_TO_TENSOR_TYPE
UINT4, INT4 = 21, 22
RANGES = {np.int8: (-128, 127), np.uint8: (0, 255), np.int16: (-32768, 32767),
          np.uint16: (0, 65535), INT4: (-8, 7), UINT4: (0, 15)}


def pack4(v):
    """ONNX's 4-bit packing: two values a byte, the first in the low nibble."""
    u = (np.asarray(v).astype(np.int64).ravel() & 15).astype(np.uint8)
    if u.size % 2:
        u = np.append(u, np.uint8(0))
    return (u[0::2] | (u[1::2] << 4)).tobytes()


def tensor(name, a, t=None, raw=True):
    """An initializer; t = INT4 / UINT4 packs a's values into 4 bits."""
    a = np.asarray(a)
    if t in (INT4, UINT4):
        tp = TensorProto()
        tp.name, tp.data_type = name, t
        tp.dims.extend(a.shape)
        if raw:
            tp.raw_data = pack4(a)
        else:  # one packed byte per int32_data entry
            tp.int32_data.extend(np.frombuffer(pack4(a), np.uint8).astype(np.int32).tolist())
        return tp
    return helper.make_tensor(name, NP2ONNX[a.dtype], a.shape, a.ravel())


def make(nodes, inputs, outputs, inits, opset=21):
    ins = [helper.make_tensor_value_info(n, NP2ONNX[a.dtype], list(a.shape))
           for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs]
    g = helper.make_graph(nodes, "g", ins, outs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def expand(p, shape, axis, block):
    """Per-element parameters: scalar, per axis (1-D), or blocked along axis."""
    p = np.asarray(p)
    if p.size == 1 and block == 0:
        return np.broadcast_to(p.reshape(()), shape)
    axis %= len(shape)
    if block == 0:
        view = [1] * len(shape)
        view[axis] = shape[axis]
        return np.broadcast_to(p.reshape(view), shape)
    return np.repeat(p, block, axis=axis).take(np.arange(shape[axis]), axis=axis)


def ref_dq(x, s, z, axis, block):
    zz = 0 if z is None else expand(z, x.shape, axis, block).astype(np.int64)
    return ((x.astype(np.int64) - zz) * expand(s, x.shape, axis, block)).astype(np.float32)


def ref_q(x, s, z, axis, block, t):
    lo, hi = RANGES[t]
    zz = 0 if z is None else expand(z, x.shape, axis, block).astype(np.float32)
    v = np.rint(x / expand(s, x.shape, axis, block).astype(np.float32)) + zz
    return np.clip(v, lo, hi)


def qdq_case(rng, shape, axis, block, t):
    ax = axis % len(shape)
    pshape = list(shape)
    if block:
        pshape[ax] = -(-shape[ax] // block)
    else:
        pshape = [shape[ax]]
    lo, hi = RANGES[t]
    s = rng.uniform(0.02, 0.2, pshape).astype(np.float32)
    z = rng.integers(lo + (hi - lo) // 4, hi - (hi - lo) // 4 + 1, pshape)
    return s, z


CASES = [((6, 10), 1, 3), ((6, 10), 1, 4), ((6, 10), -1, 10), ((6, 10), 0, 4), ((6, 10), -2, 1),
         ((2, 7, 5), 1, 2), ((2, 7, 5), -1, 3), ((9,), 0, 4), ((6, 10), 1, 0), ((6, 10), 0, 16)]
TYPES = [INT4, UINT4, np.int8, np.uint8, np.int16, np.uint16]


def onnx_type(t):
    return t if t in (INT4, UINT4) else NP2ONNX[np.dtype(t)]


def storage(t):
    return {INT4: np.int8, UINT4: np.uint8}.get(t, t)


@pytest.mark.parametrize("shape,axis,block", CASES)
@pytest.mark.parametrize("t", TYPES, ids=lambda t: {INT4: "int4", UINT4: "uint4"}.get(t, None))
def test_blocked_dequantize_and_quantize_match_reference(shape, axis, block, t):
    rng = np.random.default_rng(hash((shape, axis, block)) % 1000)
    lo, hi = RANGES[t]
    s, z = qdq_case(rng, shape, axis, block, t)
    xq = rng.integers(lo, hi + 1, shape)
    xq.ravel()[:2] = [lo, hi]  # the range's ends
    attrs = {"axis": axis}
    if block:
        attrs["block_size"] = block
    # Q input: values around the representable range, past both ends, and ties
    xf = (rng.uniform(-1.5, 1.5, shape) * (hi - lo) * 0.1).astype(np.float32)
    xf.ravel()[:4] = [1e6, -1e6, 0.0, 2.5 * float(s.ravel()[0])]
    nodes = [helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["y"], **attrs),
             helper.make_node("QuantizeLinear", ["xf", "s", "z"], ["q"], **attrs)]
    inits = [tensor("xq", xq.astype(storage(t)), t if t in (INT4, UINT4) else None),
             tensor("s", s), tensor("z", z.astype(storage(t)), t if t in (INT4, UINT4) else None)]
    y, q = cge.InferenceSession(make(nodes, {"xf": xf}, ["y", "q"], inits)).run(None, {"xf": xf})
    np.testing.assert_array_equal(y, ref_dq(xq, s, z, axis, block))
    assert q.dtype == np.dtype(storage(t))
    np.testing.assert_array_equal(q.astype(np.int64), ref_q(xf, s, z, axis, block, t))


@pytest.mark.parametrize("t", [INT4, UINT4, np.int8, np.uint8, np.int16, np.uint16],
                         ids=lambda t: {INT4: "int4", UINT4: "uint4"}.get(t, None))
def test_quantize_output_dtype_without_zero_point(t):
    # opset 21: output_dtype picks the type when there is no zero point
    x = np.linspace(-200000, 200000, 41).astype(np.float32)
    x[:3] = [0.5, 1.5, -2.5]  # ties go to even
    n = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], output_dtype=onnx_type(t))
    (q,) = cge.InferenceSession(make([n], {"x": x}, ["q"], [tensor("s", np.float32(1.0))])).run(
        None, {"x": x})
    assert q.dtype == np.dtype(storage(t))
    np.testing.assert_array_equal(q.astype(np.int64), ref_q(x, np.float32(1), None, 1, 0, t))


def test_int4_int32_data_and_odd_count_unpack():
    # int32_data holds one packed byte per entry; an odd count leaves the
    # last high nibble unused
    v = np.array([-8, 7, -1, 0, 3], np.int8)
    inits = [tensor("w", v, INT4, raw=False), tensor("s", np.float32(0.5))]
    n = helper.make_node("DequantizeLinear", ["w", "s"], ["y"])
    x = np.zeros(1, np.float32)
    nodes = [n, helper.make_node("Identity", ["x"], ["xo"])]
    y, _ = cge.InferenceSession(make(nodes, {"x": x}, ["y", "xo"], inits)).run(None, {"x": x})
    np.testing.assert_array_equal(y, v.astype(np.float32) * 0.5)


def test_bad_block_size_is_a_shape_error():
    x = np.zeros((4, 8), np.float32)
    n = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=1, block_size=3)
    m = make([n], {"x": x}, ["q"], [tensor("s", np.ones((4, 2), np.float32))])  # 3 blocks needed
    with pytest.raises(cge.Error) as e:
        cge.InferenceSession(m).run(None, {"x": x})
    assert "block_size 3" in str(e.value)


def _optimized_graph(m, tmp_path, feeds):
    os.environ["CGE_DUMP_DIR"] = str(tmp_path)
    try:
        s = cge.InferenceSession(m)
    finally:
        del os.environ["CGE_DUMP_DIR"]
    out = s.run(None, feeds)
    files = sorted(glob.glob(os.path.join(str(tmp_path), "*_optimize_*.txt")))
    return out, open(files[-1]).read()


@pytest.mark.parametrize("t", [INT4, UINT4, np.int8],
                         ids=lambda t: {INT4: "int4", UINT4: "uint4"}.get(t, None))
@pytest.mark.parametrize("K,block", [(64, 32), (100, 32), (96, 48), (40, 16), (64, 128)])
def test_blocked_dq_matmul_becomes_matmulnbits(t, K, block, tmp_path):
    rng = np.random.default_rng(K + block)
    N, M = 24, 3
    lo, hi = RANGES[t]
    nb = -(-K // block)
    w = rng.integers(lo, hi + 1, (K, N))
    w[0, :2] = [lo, hi]
    s = rng.uniform(0.01, 0.1, (nb, N)).astype(np.float32)
    z = rng.integers(lo, hi + 1, (nb, N))
    a = rng.standard_normal((M, K)).astype(np.float32)
    q4 = t if t in (INT4, UINT4) else None
    inits = [tensor("w", w.astype(storage(t)), q4), tensor("s", s),
             tensor("z", z.astype(storage(t)), q4)]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0,
                              block_size=block),
             helper.make_node("MatMul", ["a", "wf"], ["y"])]
    (y,), graph = _optimized_graph(make(nodes, {"a": a}, ["y"], inits), tmp_path, {"a": a})
    want = a.astype(np.float64) @ ref_dq(w, s, z, 0, block).astype(np.float64)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert "MatMulNBits" in graph and "DequantizeLinear" not in graph
    bits = 4 if q4 else 8
    assert f"bits={bits}" in graph.replace(" ", "") or f"bits: {bits}" in graph or \
        f"bits = {bits}" in graph


def test_blocked_dq_matmul_unfusable_block_runs_as_written(tmp_path):
    # block 24 has no power-of-two divisor >= 16: the product stays float
    # (and right)
    rng = np.random.default_rng(5)
    K, N, block = 48, 8, 24
    w = rng.integers(-8, 8, (K, N))
    s = rng.uniform(0.01, 0.1, (2, N)).astype(np.float32)
    a = rng.standard_normal((2, K)).astype(np.float32)
    inits = [tensor("w", w.astype(np.int8), INT4), tensor("s", s)]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], axis=0, block_size=block),
             helper.make_node("MatMul", ["a", "wf"], ["y"])]
    (y,), graph = _optimized_graph(make(nodes, {"a": a}, ["y"], inits), tmp_path, {"a": a})
    np.testing.assert_allclose(y, a @ ref_dq(w, s, None, 0, block), rtol=1e-5, atol=1e-5)
    assert "MatMulNBits" not in graph


# ---- the importer at opsets 19-21 -------------------------------------------------------

X = np.array([[-1.5, 0.5, 2.0]], np.float32)


def _run1(node, opset, feeds=None, inits=()):
    feeds = feeds or {"x": X}
    return cge.InferenceSession(make([node], feeds, [node.output[0]], inits, opset)).run(
        None, feeds)[0]


@pytest.mark.parametrize("opset", [19, 20, 21])
def test_unchanged_operators_import_at_new_opsets(opset):
    np.testing.assert_allclose(_run1(helper.make_node("Relu", ["x"], ["y"]), opset),
                               np.maximum(X, 0))
    # Cast gained saturate (float8 only)
    np.testing.assert_array_equal(
        _run1(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32, saturate=1), opset),
        X.astype(np.int32))


def test_opset_newer_than_21_is_refused():
    with pytest.raises(cge.Error) as e:
        _run1(helper.make_node("Relu", ["x"], ["y"]), 22)
    assert e.value.layer == "converter"
    assert "opset 22" in str(e.value) and "up to 21" in str(e.value)


@pytest.mark.parametrize("node,opset,what", [
    (helper.make_node("Pad", ["x", "p5"], ["y"], mode="wrap"), 19, "pads longer than the axis"),
    (helper.make_node("Cast", ["x"], ["y"], to=17), 19, "float8"),
    (helper.make_node("QuantizeLinear", ["x", "sc"], ["y"], output_dtype=17), 21, "float8"),
])
def test_changed_operators_are_converter_errors(node, opset, what):
    inits = [tensor("p5", np.array([0, 4, 0, 1], np.int64)), tensor("sc", np.float32(1.0)),
             tensor("b", np.float32(0.0))]
    with pytest.raises(cge.Error) as e:
        _run1(node, opset, inits=inits)
    assert e.value.layer == "converter", str(e.value)
    assert what in str(e.value) and f"opset {opset}" in str(e.value)


def test_grid_sample_20_mode_names():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    grid = np.array([[[[-0.5, -0.5], [0.25, 0.75]]]], np.float32)
    feeds = {"x": x, "g": grid}
    n20 = helper.make_node("GridSample", ["x", "g"], ["y"], mode="linear", align_corners=1)
    n16 = helper.make_node("GridSample", ["x", "g"], ["y"], mode="bilinear", align_corners=1)
    np.testing.assert_allclose(_run1(n20, 20, feeds), _run1(n16, 16, feeds))


@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 4), 3), ((1, 4, 5), 2), ((3, 8), 8)])
def test_group_normalization_21_per_channel_scale(shape, groups):
    # 21: scale and bias per channel (18: per group)
    rng = np.random.default_rng(len(shape) + groups)
    x = rng.standard_normal(shape).astype(np.float32)
    C = shape[1]
    sc = rng.uniform(0.5, 2, C).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    n = helper.make_node("GroupNormalization", ["x", "sc", "b"], ["y"], num_groups=groups,
                         epsilon=1e-3)
    y = _run1(n, 21, {"x": x}, [tensor("sc", sc), tensor("b", b)])
    g = x.reshape(shape[0], groups, -1).astype(np.float64)
    norm = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-3))
    view = [1, C] + [1] * (len(shape) - 2)
    want = norm.reshape(shape) * sc.reshape(view) + b.reshape(view)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axis", [None, 1, -3])
def test_dft_20_axis_input(axis):
    # 20: axis is input 2 (default -2); 17 had it as an attribute (default 1)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 6, 1)).astype(np.float32)
    ins, inits = ["x", ""], []
    if axis is not None:
        ins.append("ax")
        inits.append(tensor("ax", np.array(axis, np.int64)))
    y = _run1(helper.make_node("DFT", ins, ["y"]), 20, {"x": x}, inits)
    a = -2 if axis is None else axis
    want = np.fft.fft(x[..., 0], axis=a % 4)
    np.testing.assert_allclose(y[..., 0], want.real, atol=1e-4)
    np.testing.assert_allclose(y[..., 1], want.imag, atol=1e-4)


# What 19-21 changed in meaning (not only in types), each with a converter of that
# version in cge: an older definition whose range merely stays open would not know.
CHANGED_19_21 = [("QuantizeLinear", 19), ("Cast", 19), ("CastLike", 19), ("Pad", 19),
                 ("AveragePool", 19), ("Resize", 19), ("GridSample", 20), ("DFT", 20),
                 ("GroupNormalization", 21)]


def test_operators_changed_at_19_21_have_converters_of_their_version():
    import importlib.util
    root = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    path = os.path.join(root, "tests", "onnx_conformance", "opset_coverage.py")
    spec = importlib.util.spec_from_file_location("opset_coverage", path)
    cov = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cov)
    lookup = cov.cge_lookup()
    for op, v in CHANGED_19_21:
        for opset in range(v, 22):
            assert lookup(op, opset) == v, (op, opset, lookup(op, opset))


@pytest.mark.parametrize("pads,axes", [([0, 2, 1, 0, 1, 3], None), ([1, 0, 2, 1], [0, -1]),
                                       ([0, 0, 0, 0, 0, 0], None), ([3, 3], [1])])
def test_pad_19_wrap(pads, axes):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    inits = [tensor("p", np.array(pads, np.int64))]
    ins = ["x", "p"]
    if axes is not None:
        inits.append(tensor("ax", np.array(axes, np.int64)))
        ins += ["", "ax"]
    y = _run1(helper.make_node("Pad", ins, ["y"], mode="wrap"), 19, {"x": x}, inits)
    full = [(0, 0)] * 3
    for i, a in enumerate(axes if axes is not None else range(3)):
        full[a] = (pads[i], pads[len(pads) // 2 + i])
    np.testing.assert_array_equal(y, np.pad(x, full, mode="wrap"))


@pytest.mark.parametrize("use_sizes", [True, False])
def test_resize_19_half_pixel_symmetric_on_whole_sizes(use_sizes):
    # with whole output sizes it is half_pixel (ONNX 19's formula's shift is 0)
    x = np.random.default_rng(4).standard_normal((1, 2, 4, 6)).astype(np.float32)
    if use_sizes:
        inits, ins = [tensor("sz", np.array([1, 2, 6, 9], np.int64))], ["x", "", "", "sz"]
    else:
        inits, ins = [tensor("sc", np.array([1, 1, 1.5, 1.5], np.float32))], ["x", "", "sc"]
    got = _run1(helper.make_node("Resize", ins, ["y"], mode="linear",
                                 coordinate_transformation_mode="half_pixel_symmetric"),
                19, {"x": x}, inits)
    want = _run1(helper.make_node("Resize", ins, ["y"], mode="linear",
                                  coordinate_transformation_mode="half_pixel"), 18, {"x": x},
                 inits)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # 4 * 1.3 = 5.2 is not whole: the shift matters, and cge refuses
    bad = [tensor("sc", np.array([1, 1, 1.3, 1.5], np.float32))]
    with pytest.raises(cge.Error) as e:
        _run1(helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear",
                               coordinate_transformation_mode="half_pixel_symmetric"),
              19, {"x": x}, bad)
    assert e.value.layer == "converter" and "half_pixel_symmetric" in str(e.value)
