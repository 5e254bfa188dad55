# Older opsets through the importer's version converters: attributes that
# later became inputs (axes, split, starts/ends), Softmax's 2-D coercion
# before opset 13, elementwise ops below their current definition, and
# versions that later changed only dtypes or documentation.
import numpy as np
import pytest

import cge

import onnx  # noqa: F401  (required: conftest.REQUIRED)
from onnx import TensorProto, helper

F = TensorProto.FLOAT


def run(node, inputs, out_shape, opset, n_out=1):
    ins = [helper.make_tensor_value_info(n, F, list(a.shape)) for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(o, F, None) for o in node.output[:n_out]]
    g = helper.make_graph([node], "g", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    s = cge.InferenceSession(m.SerializeToString())
    return s.run(None, inputs)


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7.0


@pytest.mark.parametrize("opset", [11, 12])
def test_reduce_axes_attribute(opset):
    for op, fn in (("ReduceSum", np.sum), ("ReduceMean", np.mean), ("ReduceMax", np.max)):
        node = helper.make_node(op, ["x"], ["y"], axes=[0, 2], keepdims=1)
        (y,) = run(node, {"x": X}, None, opset)
        np.testing.assert_allclose(y, fn(X, axis=(0, 2), keepdims=True), rtol=1e-6)


def test_reduce_mean_opset13_axes_attribute():
    # ReduceMean 13..17 still has the attribute; cge's current definition takes an input.
    (y,) = run(helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0), {"x": X}, None, 13)
    np.testing.assert_allclose(y, X.mean(axis=1), rtol=1e-6)


def test_squeeze_unsqueeze_axes_attribute():
    (y,) = run(helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 3]), {"x": X}, None, 11)
    assert y.shape == (1, 2, 3, 1, 4)
    x1 = X.reshape(2, 1, 3, 4)
    (y,) = run(helper.make_node("Squeeze", ["x"], ["y"], axes=[1]), {"x": x1}, None, 11)
    np.testing.assert_array_equal(y, X)


def test_split_attribute():
    node = helper.make_node("Split", ["x"], ["a", "b"], axis=2, split=[1, 3])
    a, b = run(node, {"x": X}, None, 11, n_out=2)
    np.testing.assert_array_equal(a, X[:, :, :1])
    np.testing.assert_array_equal(b, X[:, :, 1:])


def test_slice_attributes_opset9():
    node = helper.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, 2], axes=[1, 2])
    (y,) = run(node, {"x": X}, None, 9)
    np.testing.assert_array_equal(y, X[:, 1:3, 0:2])


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_before_13_is_2d(op):
    (y,) = run(helper.make_node(op, ["x"], ["y"], axis=1), {"x": X}, None, 11)
    flat = X.reshape(2, 12)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    ref = (e / e.sum(axis=1, keepdims=True)).reshape(X.shape)
    np.testing.assert_allclose(y, np.log(ref) if op == "LogSoftmax" else ref, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("opset", [7, 13])
def test_binary_ops_below_current_version(opset):
    b = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    for op, fn in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                   ("Div", np.divide)):
        (y,) = run(helper.make_node(op, ["x", "b"], ["y"]), {"x": X, "b": b}, None, opset)
        np.testing.assert_allclose(y, fn(X, b), rtol=1e-6)


def test_reshape_opset5():
    shape = helper.make_tensor("s", TensorProto.INT64, [2], [6, 4])
    ins = [helper.make_tensor_value_info("x", F, [2, 3, 4])]
    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"])], "g", ins,
                          [helper.make_tensor_value_info("y", F, None)], [shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 5)])
    (y,) = cge.InferenceSession(m.SerializeToString()).run(None, {"x": X})
    np.testing.assert_array_equal(y, X.reshape(6, 4))


def test_quantize_dequantize_opset10():
    # QuantizeLinear / DequantizeLinear 10 are 13's per-tensor case.
    x = np.array([-1.0, 0.0, 0.26, 1.0, 300.0], dtype=np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["y"])]
    inits = [helper.make_tensor("scale", F, [], [0.5]),
             helper.make_tensor("zp", TensorProto.UINT8, [], [10])]
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", F, [5])],
                          [helper.make_tensor_value_info("q", TensorProto.UINT8, [5]),
                           helper.make_tensor_value_info("y", F, [5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    q, y = cge.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    want_q = np.clip(np.rint(x / 0.5) + 10, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_allclose(y, (want_q.astype(np.float32) - 10) * 0.5)


def test_opset_newer_than_supported_is_refused():
    # Opset 21 is the newest the importer knows (test_quant_opset21.py has
    # what 19-21 changed); 22 could change what an operator means, so it is a
    # [converter] error naming the opset.
    (y,) = run(helper.make_node("Relu", ["x"], ["y"]), {"x": X}, None, 21)
    np.testing.assert_allclose(y, np.maximum(X, 0))
    with pytest.raises(cge.Error) as e:
        run(helper.make_node("Relu", ["x"], ["y"]), {"x": X}, None, 22)
    assert e.value.layer == "converter"
    assert "opset 22" in str(e.value) and "up to 21" in str(e.value)


def run_model(nodes, inputs, outputs, opset, inits=()):
    """Run nodes at `opset`; inputs {name: array}, outputs [(name, TensorProto type)]."""
    ins = [helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype],
                                         list(a.shape)) for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in outputs]
    g = helper.make_graph(nodes, "g", ins, outs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return cge.InferenceSession(m.SerializeToString()).run(None, inputs)


@pytest.mark.parametrize("opset", [6, 7])
def test_variadic_version_6_equal_shapes(opset):
    # Max/Min/Sum/Mean 6: no broadcasting, every input has the output's shape.
    a, b, c = X, X[::-1].copy(), np.full_like(X, 0.5)
    for op, want in (("Max", np.maximum(np.maximum(a, b), c)),
                     ("Min", np.minimum(np.minimum(a, b), c)),
                     ("Sum", a + b + c), ("Mean", (a + b + c) / 3)):
        (y,) = run_model([helper.make_node(op, ["a", "b", "c"], ["y"])],
                         {"a": a, "b": b, "c": c}, [("y", F)], opset)
        np.testing.assert_allclose(y, want, rtol=1e-6)


def test_mean_variance_normalization_9():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5), dtype=np.float32)
    (y,) = run_model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"])], {"x": x},
                     [("y", F)], 9)
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    std = np.sqrt(((x - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True))
    np.testing.assert_allclose(y, (x - mean) / (std + 1e-9), rtol=1e-4, atol=1e-5)


def test_compress_9():
    cond = np.array([True, False, True])
    for axis in (1, None):
        kw = {} if axis is None else {"axis": axis}
        (y,) = run_model([helper.make_node("Compress", ["x", "c"], ["y"], **kw)],
                         {"x": X, "c": cond}, [("y", F)], 9)
        np.testing.assert_array_equal(y, np.compress(cond, X, axis=axis))


def test_lp_pool_2():
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 5), dtype=np.float32)
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], p=3)
    (y,) = run_model([node], {"x": x}, [("y", F)], 7)
    win = np.abs(x[:, :, :4, :4]).reshape(1, 2, 2, 2, 2, 2) ** 3
    np.testing.assert_allclose(y, win.sum(axis=(3, 5)) ** (1 / 3), rtol=1e-5)


def test_max_unpool_9():
    x = np.array([[[[5.0, 6.0], [7.0, 8.0]]]], np.float32)
    idx = np.array([[[[5, 7], [13, 15]]]], np.int64)
    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    (y,) = run_model([node], {"x": x, "i": idx}, [("y", F)], 9)
    want = np.zeros(16, np.float32)
    want[idx.ravel()] = x.ravel()
    np.testing.assert_array_equal(y, want.reshape(1, 1, 4, 4))


def test_non_max_suppression_10():
    boxes = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9],
                       [0.0, 10.0, 1.0, 11.0], [0.0, 10.1, 1.0, 11.1],
                       [0.0, 100.0, 1.0, 101.0]]], np.float32)
    scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], np.float32)
    limits = [helper.make_tensor("k", TensorProto.INT64, [1], [3]),
              helper.make_tensor("iou", F, [1], [0.5]),
              helper.make_tensor("thr", F, [1], [0.0])]
    node = helper.make_node("NonMaxSuppression", ["b", "s", "k", "iou", "thr"], ["sel"])
    (sel,) = run_model([node], {"b": boxes, "s": scores}, [("sel", TensorProto.INT64)], 10,
                       limits)
    np.testing.assert_array_equal(sel, [[0, 0, 3], [0, 0, 0], [0, 0, 5]])


def test_roi_align_10_has_no_half_pixel_shift():
    # RoiAlign 10's coordinates are 16's "output_half_pixel", not 16's default.
    rng = np.random.default_rng(2)
    x = rng.random((1, 2, 10, 10), dtype=np.float32)
    rois = np.array([[0, 0, 9, 9], [0, 5, 4, 9], [5, 5, 9, 9]], np.float32)
    bi = np.array([0, 0, 0], np.int64)
    feed = {"x": x, "rois": rois, "bi": bi}

    def roi(opset, **mode):
        node = helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], output_height=5,
                                output_width=5, sampling_ratio=2, **mode)
        return run_model([node], feed, [("y", F)], opset)[0]
    y10 = roi(10)
    np.testing.assert_array_equal(y10, roi(16, coordinate_transformation_mode="output_half_pixel"))
    assert np.abs(y10 - roi(16)).max() > 1e-3
    with pytest.raises(cge.Error, match="from opset 16 on"):
        roi(10, coordinate_transformation_mode="half_pixel")


@pytest.mark.parametrize("opset", [7, 9, 10, 12])
def test_dropout_mask_type(opset):
    # Inference: the output is the data and the mask all ones; Dropout 7..9's
    # mask has the data's type, 10's on is bool.
    mask_type = F if opset < 10 else TensorProto.BOOL
    y, mask = run_model([helper.make_node("Dropout", ["x"], ["y", "mask"])], {"x": X},
                        [("y", F), ("mask", mask_type)], opset)
    np.testing.assert_array_equal(y, X)
    assert mask.dtype == (np.float32 if opset < 10 else np.bool_)
    np.testing.assert_array_equal(mask, np.ones_like(X))
    if opset < 12:  # ratio became an input at 12
        (y,) = run_model([helper.make_node("Dropout", ["x"], ["y"], ratio=0.3)], {"x": X},
                         [("y", F)], opset)
        np.testing.assert_array_equal(y, X)


@pytest.mark.parametrize("level", [None, 1])
def test_split_18_num_outputs(level):
    # Split 18: num_outputs pieces of ceil(dim / n), the last smaller; fed by a
    # convolution the Split runs on channels-last data at the default level.
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 7, 3, 3), dtype=np.float32)
    w = rng.standard_normal((7, 7, 1, 1), dtype=np.float32)
    c = np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0])
    for n, sizes in ((3, [3, 3, 1]), (4, [2, 2, 2, 1]), (7, [1] * 7)):
        outs = ["y%d" % i for i in range(n)]
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
                 helper.make_node("Split", ["c"], outs, axis=1, num_outputs=n)]
        ins = [helper.make_tensor_value_info("x", F, list(x.shape))]
        g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info(o, F, None)
                                                for o in outs],
                              [helper.make_tensor("w", F, w.shape, w.ravel())])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        got = cge.InferenceSession(m.SerializeToString(), opt_level=level).run(None, {"x": x})
        assert [a.shape[1] for a in got] == sizes
        np.testing.assert_allclose(np.concatenate(got, axis=1), c, rtol=1e-5, atol=1e-5)


def test_split_18_num_outputs_dynamic_axis_and_errors():
    ins = [helper.make_tensor_value_info("x", F, ["n", 2])]
    node = helper.make_node("Split", ["x"], ["a", "b"], num_outputs=2)
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info(o, F, None)
                                             for o in ("a", "b")])
    s = cge.InferenceSession(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString())
    for rows in (5, 4, 1):
        x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
        a, b = s.run(None, {"x": x})
        np.testing.assert_array_equal(a, x[:(rows + 1) // 2])
        np.testing.assert_array_equal(b, x[(rows + 1) // 2:])
    with pytest.raises(cge.Error, match="num_outputs is 3"):
        run_model([helper.make_node("Split", ["x"], ["a", "b"], axis=2, num_outputs=3)],
                  {"x": X}, [("a", F), ("b", F)], 18)
    with pytest.raises(cge.Error, match="exclusive"):
        run_model([helper.make_node("Split", ["x", "s"], ["a", "b"], axis=2, num_outputs=2)],
                  {"x": X}, [("a", F), ("b", F)], 18,
                  [helper.make_tensor("s", TensorProto.INT64, [2], [1, 3])])


def test_scatter_max_min_reductions_18():
    data = np.array([[1, 2, 3, 4, 5]], np.float32)
    feeds = {"d": data, "i": np.array([[1, 1]], np.int64),
             "u": np.array([[1.1, 2.1]], np.float32)}
    for red, want in (("max", 2.1), ("min", 1.1)):
        node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=1, reduction=red)
        (y,) = run_model([node], feeds, [("y", F)], 18)
        np.testing.assert_allclose(y, [[1, want, 3, 4, 5]], rtol=1e-6)
    data = np.arange(1, 9, dtype=np.float32).reshape(2, 2, 2)
    upd = np.array([[[5, 1], [1, 5]], [[0, 9], [9, 0]]], np.float32)
    feeds = {"d": data, "i": np.array([[0], [0]], np.int64), "u": upd}
    for red, fn in (("max", np.maximum), ("min", np.minimum)):
        (y,) = run_model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=red)],
                         feeds, [("y", F)], 18)
        want = data.copy()
        want[0] = fn(fn(data[0], upd[0]), upd[1])
        np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "floor", "ceil"])
@pytest.mark.parametrize("scale", [0.6, 1.7, 3.0])
def test_resize_11_tf_half_pixel_for_nn(nearest_mode, scale):
    # Resize 11-12: x_original = (x_resized + 0.5) / scale, no -0.5 shift.
    x = np.arange(1 * 2 * 5 * 4, dtype=np.float32).reshape(1, 2, 5, 4)
    scales = np.float32([1, 1, scale, scale])
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest",
                            coordinate_transformation_mode="tf_half_pixel_for_nn",
                            nearest_mode=nearest_mode)
    inits = [helper.make_tensor("roi", F, [0], []), helper.make_tensor("scales", F, [4], scales)]
    (y,) = run_model([node], {"x": x}, [("y", F)], 11, inits)

    def src(n_in, s):
        # every axis, those of scale 1 too (ceil moves them by one, as the
        # formula says)
        n_out = int(np.floor(n_in * s))
        pos = (np.arange(n_out) + 0.5) / s
        idx = {"floor": np.floor(pos), "ceil": np.ceil(pos),
               "round_prefer_floor": np.ceil(pos - 0.5)}[nearest_mode]
        return np.clip(idx.astype(np.int64), 0, n_in - 1)
    want = x[src(1, 1.0)][:, src(2, 1.0)][:, :, src(5, scale)][:, :, :, src(4, scale)]
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("opset", [7, 8])
@pytest.mark.parametrize("spatial", [None, 1, 0])
def test_batch_normalization_7_spatial(opset, spatial):
    # spatial=0: scale, B, mean and var hold one value per element of [C, D1, ...].
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 4, 5), dtype=np.float32)
    pshape = (3, 4, 5) if spatial == 0 else (3,)
    scale, bias, mean = (rng.standard_normal(pshape, dtype=np.float32) for _ in range(3))
    var = rng.random(pshape, dtype=np.float32) + 0.5
    kw = {} if spatial is None else {"spatial": spatial}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            epsilon=1e-3, **kw)
    inits = [helper.make_tensor(n, F, a.shape, a.ravel())
             for n, a in (("s", scale), ("b", bias), ("m", mean), ("v", var))]
    (y,) = run_model([node], {"x": x}, [("y", F)], opset, inits)
    bc = (lambda a: a) if spatial == 0 else (lambda a: a.reshape(3, 1, 1))
    want = (x - bc(mean)) / np.sqrt(bc(var) + 1e-3) * bc(scale) + bc(bias)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p,axis", [(2, None), (1, 1), (2, 0), (1, -2)])
def test_lp_normalization(p, axis):
    x = np.random.default_rng(14).standard_normal((3, 4, 5), dtype=np.float32)
    kw = {"p": p} if axis is None else {"p": p, "axis": axis}
    for opset in (7, 17):
        (y,) = run_model([helper.make_node("LpNormalization", ["x"], ["y"], **kw)], {"x": x},
                         [("y", F)], opset)
        ax = -1 if axis is None else axis
        norm = np.linalg.norm(x, ord=p, axis=ax, keepdims=True) if p == 2 else \
            np.abs(x).sum(axis=ax, keepdims=True)
        np.testing.assert_allclose(y, x / norm, rtol=1e-5, atol=1e-6)
    with pytest.raises(cge.Error, match="1 or 2 expected"):
        run_model([helper.make_node("LpNormalization", ["x"], ["y"], p=3)], {"x": x},
                  [("y", F)], 11)


def test_max_roi_pool_matches_torchvision():
    # MaxRoiPool (1) is Fast R-CNN's RoI pooling, which torchvision's roi_pool computes.
    import torch
    import torchvision
    rng = np.random.default_rng(15)
    x = rng.standard_normal((2, 3, 12, 10), dtype=np.float32)
    rois = np.array([[0, 1, 1, 8, 9], [1, 0, 0, 9, 11], [1, 3.4, 2.6, 3.6, 2.4],
                     [0, -2, -3, 4, 5], [1, 6, 7, 30, 30]], np.float32)
    for scale, shape in ((1.0, [3, 2]), (0.5, [2, 4]), (0.25, [1, 1])):
        node = helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=shape,
                                spatial_scale=scale)
        (y,) = run_model([node], {"x": x, "rois": rois}, [("y", F)], 7)
        ref = torchvision.ops.roi_pool(torch.from_numpy(x), torch.from_numpy(rois), shape,
                                       spatial_scale=scale).numpy()
        np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("ratio,size", [(2, 7), (0, 3), (1, 5), (0, 40)])
def test_roi_align_float32_path_equals_float64(ratio, size):
    # float32 avg mode lists each roi's samples once and sums them in the
    # same double arithmetic as the general loop (float64 here): the float32
    # result is the float64 one rounded. Rois partly or wholly outside the
    # map and a degenerate one included; 40x40 bins exceed the list and take
    # the general loop.
    # Channels go four at a time (5 and 9: groups and a rest of one).
    rng = np.random.default_rng(3)
    rois = np.array([[0, 0, 10, 12], [2.5, 1.25, 7.75, 9.5], [-4, -3, 3, 2], [9, 11, 30, 40],
                     [20, 20, 25, 26], [4, 4, 4, 4], [1, 2, 60, 50]], np.float32)
    bi = np.array([0, 1, 1, 0, 1, 0, 1], np.int64)

    def roi(xd, rd, t):
        node = helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], output_height=size,
                                output_width=size, sampling_ratio=ratio, spatial_scale=0.75)
        return run_model([node], {"x": xd, "rois": rd, "bi": bi}, [("y", t)], 16)[0]
    for channels in (5, 9):
        x = rng.standard_normal((2, channels, 13, 11)).astype(np.float32)
        y32 = roi(x, rois, F)
        y64 = roi(x.astype(np.float64), rois.astype(np.float64), TensorProto.DOUBLE)
        np.testing.assert_array_equal(y32, y64.astype(np.float32))
        assert np.abs(y32).max() > 0.1
