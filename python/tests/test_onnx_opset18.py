# Operators opset 18 added or changed (onnx 1.12, which the conformance cases
# come from, stops at 17): GroupNormalization, Col2Im, CenterCropPad, LpPool's
# and Resize's new attributes, each against a NumPy reference of the ONNX
# definition.
import numpy as np
import pytest

import cge

import onnx
from onnx import TensorProto, helper

F = TensorProto.FLOAT


def run(nodes, inputs, outputs, inits=(), opset=18, **session):
    ins = [helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype],
                                         list(a.shape)) for n, a in inputs.items()]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in outputs]
    g = helper.make_graph(nodes, "g", ins, outs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return cge.InferenceSession(m.SerializeToString(), **session).run(None, inputs)


def const(name, a):
    a = np.asarray(a)
    return helper.make_tensor(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape,
                              a.ravel())


# ---- GroupNormalization -------------------------------------------------------

def group_norm_ref(x, groups, scale, bias, eps=1e-5):
    # onnx 1.13's reference: scale and bias are per group at opset 18.
    n, c = x.shape[:2]
    g = x.reshape(n, groups, c // groups, *x.shape[2:]).astype(np.float64)
    axes = tuple(range(2, g.ndim))
    mean = g.mean(axis=axes, keepdims=True)
    var = g.var(axis=axes, keepdims=True)
    ones = (1,) * (g.ndim - 2)
    y = scale.reshape(-1, *ones) * (g - mean) / np.sqrt(var + eps) + bias.reshape(-1, *ones)
    return y.reshape(x.shape).astype(x.dtype)


@pytest.mark.parametrize("shape,groups,eps", [((3, 4, 2, 2), 2, None), ((2, 6, 5), 3, 1e-2),
                                               ((2, 8), 4, None), ((1, 6, 2, 3, 2), 6, None),
                                               ((2, 4, 3, 3), 1, None)])
def test_group_normalization(shape, groups, eps):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape, dtype=np.float32) * 3 + 1
    scale = rng.standard_normal(groups, dtype=np.float32)
    bias = rng.standard_normal(groups, dtype=np.float32)
    kw = {} if eps is None else {"epsilon": eps}
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups,
                            **kw)
    (y,) = run([node], {"x": x}, [("y", F)], [const("s", scale), const("b", bias)])
    ref = group_norm_ref(x, groups, scale, bias, eps if eps is not None else 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_group_normalization_matches_torch():
    # torch.nn.GroupNorm's affine is per channel: equal to 18's per-group
    # scale and bias when each group's channels share them.
    import torch
    torch.manual_seed(0)
    gn = torch.nn.GroupNorm(3, 6)
    scale, bias = np.float32([0.5, -1.0, 2.0]), np.float32([0.1, 0.2, -0.3])
    with torch.no_grad():
        gn.weight.copy_(torch.from_numpy(np.repeat(scale, 2)))
        gn.bias.copy_(torch.from_numpy(np.repeat(bias, 2)))
        x = torch.randn(2, 6, 4, 4)
        ref = gn(x).numpy()
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)
    (y,) = run([node], {"x": x.numpy()}, [("y", F)], [const("s", scale), const("b", bias)])
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_group_normalization_errors():
    x = np.zeros((2, 6, 3), np.float32)
    for groups, s, match in ((4, 4, "divide the 6 channels"), (3, 6, "num_groups \\(3\\)")):
        node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups)
        with pytest.raises(cge.Error, match=match) as e:
            run([node], {"x": x}, [("y", F)],
                [const("s", np.ones(s, np.float32)), const("b", np.zeros(s, np.float32))])
        assert e.value.layer == "meta"


# ---- LpPool 18: ceil_mode and dilations ----------------------------------------

def lp_pool_ref(x, k, s, d, pads, p, ceil_mode):
    # 2-D; taps outside the input (padding, or past the end with ceil_mode)
    # add |0|^p = 0.
    n, c, h, w = x.shape
    outs = []
    for i, size in enumerate((h, w)):
        span = size + pads[i] + pads[i + 2] - d[i] * (k[i] - 1) - 1
        o = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= size + pads[i]:
            o -= 1
        outs.append(o)
    y = np.zeros((n, c, *outs), np.float64)
    for oy in range(outs[0]):
        for ox in range(outs[1]):
            acc = np.zeros((n, c))
            for ky in range(k[0]):
                for kx in range(k[1]):
                    iy = oy * s[0] - pads[0] + ky * d[0]
                    ix = ox * s[1] - pads[1] + kx * d[1]
                    if 0 <= iy < h and 0 <= ix < w:
                        acc += np.abs(x[:, :, iy, ix].astype(np.float64)) ** p
            y[:, :, oy, ox] = acc ** (1.0 / p)
    return y.astype(np.float32)


@pytest.mark.parametrize("k,s,d,pads,p,ceil_mode", [
    ((3, 3), (1, 1), (2, 2), (0, 0, 0, 0), 2, 0),
    ((2, 2), (2, 2), (1, 1), (0, 0, 0, 0), 3, 1),
    ((3, 2), (2, 3), (2, 1), (1, 0, 1, 1), 1, 1),
    ((2, 2), (1, 2), (1, 2), (0, 0, 0, 0), 2, 0),
])
def test_lp_pool_18(k, s, d, pads, p, ceil_mode):
    x = np.random.default_rng(6).standard_normal((2, 3, 7, 8), dtype=np.float32)
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=list(k), strides=list(s),
                            dilations=list(d), pads=list(pads), p=p, ceil_mode=ceil_mode)
    (y,) = run([node], {"x": x}, [("y", F)])
    ref = lp_pool_ref(x, k, s, d, pads, p, ceil_mode)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


# ---- Col2Im ----------------------------------------------------------------------

def col2im_ref(x, image, block, strides, dilations, pads):
    n, ck, _ = x.shape
    sp = len(image)
    k = int(np.prod(block))
    c = ck // k
    blocks = [(image[i] + pads[i] + pads[sp + i] - dilations[i] * (block[i] - 1) - 1)
              // strides[i] + 1 for i in range(sp)]
    y = np.zeros((n, c, *image), np.float64)
    cols = x.reshape(n, c, *block, *blocks)
    for kk in np.ndindex(*block):
        for ll in np.ndindex(*blocks):
            pos = [ll[i] * strides[i] - pads[i] + kk[i] * dilations[i] for i in range(sp)]
            if all(0 <= pos[i] < image[i] for i in range(sp)):
                y[(slice(None), slice(None), *pos)] += cols[(slice(None), slice(None), *kk, *ll)]
    return y.astype(x.dtype)


@pytest.mark.parametrize("image,block,strides,dilations,pads", [
    ((5, 5), (1, 5), (1, 1), (1, 1), (0, 0, 0, 0)),   # onnx 1.13's col2im case
    ((3, 4), (2, 2), (1, 1), (1, 1), (0, 0, 0, 0)),
    ((6, 7), (3, 2), (2, 1), (1, 2), (1, 0, 1, 1)),
    ((4, 4), (2, 2), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((7,), (3,), (2,), (2,), (1, 2)),
    ((3, 4, 5), (2, 1, 3), (1, 2, 1), (1, 1, 2), (0, 1, 0, 0, 0, 1)),
])
def test_col2im(image, block, strides, dilations, pads):
    sp = len(image)
    blocks = [(image[i] + pads[i] + pads[sp + i] - dilations[i] * (block[i] - 1) - 1)
              // strides[i] + 1 for i in range(sp)]
    x = np.random.default_rng(7).standard_normal(
        (2, 3 * int(np.prod(block)), int(np.prod(blocks))), dtype=np.float32)
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=list(strides),
                            dilations=list(dilations), pads=list(pads))
    (y,) = run([node], {"x": x}, [("y", F)],
               [const("image", np.int64(image)), const("block", np.int64(block))])
    ref = col2im_ref(x, image, block, strides, dilations, pads)
    assert y.shape == ref.shape == (2, 3, *image)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_col2im_matches_torch_fold():
    import torch
    x = torch.randn(2, 3 * 3 * 2, 18)
    ref = torch.nn.functional.fold(x, (5, 6), (3, 2), dilation=(1, 2), padding=1,
                                   stride=(2, 1)).numpy()
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=[2, 1],
                            dilations=[1, 2], pads=[1, 1, 1, 1])
    (y,) = run([node], {"x": x.numpy()}, [("y", F)],
               [const("image", np.int64([5, 6])), const("block", np.int64([3, 2]))])
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_col2im_errors():
    x = np.zeros((1, 4, 5), np.float32)
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"])
    with pytest.raises(cge.Error, match="number of blocks") as e:
        run([node], {"x": x}, [("y", F)],
            [const("image", np.int64([3, 4])), const("block", np.int64([2, 2]))])
    assert e.value.layer == "meta"


# ---- CenterCropPad -----------------------------------------------------------------

def center_crop_pad_ref(x, shape, axes=None):
    axes = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    out_shape = list(x.shape)
    src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for a, t in zip(axes, shape):
        n = x.shape[a]
        out_shape[a] = t
        if t < n:
            src[a] = slice((n - t) // 2, (n - t) // 2 + t)
        elif t > n:
            dst[a] = slice((t - n) // 2, (t - n) // 2 + n)
    y = np.zeros(out_shape, x.dtype)
    y[tuple(dst)] = x[tuple(src)]
    return y


@pytest.mark.parametrize("in_shape,shape,axes", [
    ((20, 10, 3), (10, 7, 3), None),       # onnx 1.13's center_crop_pad_crop
    ((10, 7, 3), (20, 10, 3), None),       # ..._pad
    ((20, 8, 3), (10, 10, 3), None),       # ..._crop_and_pad
    ((3, 20, 8), (10, 9), (1, 2)),         # ..._crop_axes_chw
    ((20, 8, 3), (10, 9), (0, 1)),         # ..._crop_axes_hwc
    ((20, 8, 3), (10, 9), (-3, -2)),       # ..._crop_negative_axes_hwc
    ((5, 6), (5, 6), None),
    ((2, 3, 5, 4), (1, 8), (1, 3)),
])
def test_center_crop_pad(in_shape, shape, axes):
    x = np.random.default_rng(8).standard_normal(in_shape, dtype=np.float32)
    kw = {} if axes is None else {"axes": list(axes)}
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], **kw)
    (y,) = run([node], {"x": x}, [("y", F)], [const("shape", np.int64(shape))])
    ref = center_crop_pad_ref(x, shape, axes)
    assert y.shape == ref.shape
    np.testing.assert_array_equal(y, ref)


def test_center_crop_pad_runtime_shape_and_int_data():
    ins = [helper.make_tensor_value_info("x", TensorProto.INT32, [6, 5]),
           helper.make_tensor_value_info("shape", TensorProto.INT64, [2])]
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"])
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TensorProto.INT32,
                                                                           None)])
    s = cge.InferenceSession(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString())
    x = np.arange(30, dtype=np.int32).reshape(6, 5)
    for shape in ((3, 8), (7, 2), (6, 5)):
        (y,) = s.run(None, {"x": x, "shape": np.int64(shape)})
        np.testing.assert_array_equal(y, center_crop_pad_ref(x, shape))


def test_center_crop_pad_errors():
    x = np.zeros((4, 5), np.float32)
    for shape, axes, match in (((3,), None, "one per axis"), ((3, 3), (0, 0), "listed twice"),
                               ((3, 3), (0, 2), "out of range")):
        kw = {} if axes is None else {"axes": list(axes)}
        node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], **kw)
        with pytest.raises(cge.Error, match=match) as e:
            run([node], {"x": x}, [("y", F)], [const("shape", np.int64(shape))])
        assert e.value.layer == "meta"


# ---- Resize 18: antialias, axes, keep_aspect_ratio_policy ------------------------

def resize_axis_weights(n_in, n_out, scale, mode, ctm="half_pixel", antialias=False, A=-0.75,
                        exclude_outside=False):
    """[n_out, n_in] linear or cubic weights of one axis, as onnx 1.13's
    reference computes them (edge-clamped neighbours, ratio 1 for an integral
    coordinate, antialias's filters stretched by 1 / scale)."""
    w = np.zeros((n_out, n_in))
    owidth = scale * n_in
    for o in range(n_out):
        if ctm == "align_corners":
            x = 0.0 if owidth == 1 else o * (n_in - 1) / (owidth - 1)
        elif ctm == "asymmetric":
            x = o / scale
        else:
            x = (o + 0.5) / scale - 0.5
        xi = int(np.floor(x))
        ratio = x - xi
        if ratio == 0:
            xi, ratio = xi - 1, 1.0
        s = min(scale, 1.0) if antialias else 1.0
        reach = 1 if mode == "linear" else 2
        first = int(np.floor(-reach / s)) + 1
        taps = np.arange(first, 2 - first)
        d = np.abs((taps - ratio) * s)
        if mode == "linear":
            c = np.clip(1 - d, 0, 1)
        else:
            c = np.where(d <= 1, ((A + 2) * d - (A + 3)) * d * d + 1,
                         np.where(d < 2, ((A * d - 5 * A) * d + 8 * A) * d - 4 * A, 0))
        idx = xi + taps
        if exclude_outside:
            c = np.where((idx < 0) | (idx >= n_in), 0, c)
        if antialias or exclude_outside:
            c = c / c.sum()
        for j, i in enumerate(np.clip(idx, 0, n_in - 1)):
            w[o, i] += c[j]
    return w


def resize_ref(x, out_shape, scales, **kw):
    y = x.astype(np.float64)
    for d, (n_out, s) in enumerate(zip(out_shape, scales)):
        if n_out == x.shape[d] and s == 1:
            continue
        w = resize_axis_weights(x.shape[d], n_out, s, **kw)
        y = np.moveaxis(np.tensordot(w, np.moveaxis(y, d, 0), axes=1), 0, d)
    return y.astype(np.float32)


def run_resize(x, attrs, scales=None, sizes=None, level=None):
    ins = ["x", "", "scales" if scales is not None else ""]
    inits = []
    if scales is not None:
        inits.append(const("scales", np.float32(scales)))
    if sizes is not None:
        ins.append("sizes")
        inits.append(const("sizes", np.int64(sizes)))
    node = helper.make_node("Resize", ins, ["y"], **attrs)
    return run([node], {"x": x}, [("y", F)], inits, opt_level=level)[0]


def test_resize_18_linear_antialias_onnx_case():
    # onnx 1.13's test_resize_downsample_scales_linear_antialias
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    y = run_resize(x, {"mode": "linear", "antialias": 1}, scales=[1, 1, 0.6, 0.6])
    np.testing.assert_allclose(y, [[[[2.875, 4.5], [9.375, 11.0]]]], rtol=1e-6)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scale", [0.6, 0.3, 0.25, 1.5])
@pytest.mark.parametrize("ctm", ["half_pixel", "asymmetric", "align_corners"])
def test_resize_18_antialias(mode, scale, ctm):
    x = np.random.default_rng(10).standard_normal((1, 2, 9, 11), dtype=np.float32)
    attrs = {"mode": mode, "antialias": 1, "coordinate_transformation_mode": ctm}
    y = run_resize(x, attrs, scales=[1, 1, scale, scale])
    out = (1, 2, int(9 * scale), int(11 * scale))
    ref = resize_ref(x, out, [1, 1, scale, scale], mode=mode, ctm=ctm, antialias=True)
    assert y.shape == out
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_resize_18_antialias_exclude_outside_and_channels_last():
    # exclude_outside drops edge taps and renormalises; fed by a convolution,
    # at the default level the Resize runs on channels-last data.
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 3, 12, 10), dtype=np.float32)
    w = rng.standard_normal((4, 3, 1, 1), dtype=np.float32)
    c = np.einsum("nchw,oc->nohw", x, w[:, :, 0, 0])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("Resize", ["c", "", "", "sizes"], ["y"], mode="cubic",
                              antialias=1, exclude_outside=1, axes=[2, 3])]
    inits = [const("w", w), const("sizes", np.int64([5, 4]))]
    ref = resize_ref(c, (1, 4, 5, 4), [1, 1, 5 / 12, 4 / 10], mode="cubic", antialias=True,
                     exclude_outside=True)
    for level in (None, 1):
        (y,) = run(nodes, {"x": x}, [("y", F)], inits, opt_level=level)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("axes", [[2, 3], [3, 2], [-1], [1, 3]])
def test_resize_18_axes(axes):
    x = np.random.default_rng(12).standard_normal((2, 3, 6, 8), dtype=np.float32)
    per_axis = {1: 2.0, 2: 0.5, 3: 1.5, -1: 1.5}
    scales = [per_axis[a] for a in axes]
    y = run_resize(x, {"mode": "linear", "axes": axes}, scales=scales)
    full = [1.0] * 4
    for a, s in zip(axes, scales):
        full[a % 4] = s
    out = tuple(int(n * s) for n, s in zip(x.shape, full))
    assert y.shape == out
    np.testing.assert_allclose(y, resize_ref(x, out, full, mode="linear"), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("policy,sizes,want", [
    ("not_larger", [6, 6], (4, 6)), ("not_smaller", [6, 6], (6, 10)),
    ("stretch", [6, 6], (6, 6)), ("not_larger", [2, 9], (2, 3)),
])
def test_resize_18_keep_aspect_ratio_policy(policy, sizes, want):
    # the shapes of onnx's shape-inference cases for a [3, 5] input; the
    # coordinates use the one kept scale, not out / in
    x = np.random.default_rng(13).standard_normal((1, 1, 3, 5), dtype=np.float32)
    attrs = {"mode": "linear", "keep_aspect_ratio_policy": policy, "axes": [2, 3]}
    y = run_resize(x, attrs, sizes=sizes)
    assert y.shape == (1, 1) + want
    q = [sizes[0] / 3, sizes[1] / 5]
    s = {"not_larger": min(q), "not_smaller": max(q)}.get(policy)
    scales = [1, 1] + ([s, s] if s else q)
    np.testing.assert_allclose(y, resize_ref(x, (1, 1) + want, scales, mode="linear"),
                               rtol=1e-5, atol=1e-5)


def test_resize_18_errors():
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(cge.Error, match="one per listed axis"):
        run_resize(x, {"mode": "linear", "axes": [2, 3]}, scales=[1, 1, 2, 2])
    with pytest.raises(cge.Error, match="repeated"):
        run_resize(x, {"mode": "linear", "axes": [2, 2]}, scales=[2, 2])
    with pytest.raises(cge.Error, match="applies to sizes"):
        run_resize(x, {"keep_aspect_ratio_policy": "not_larger"}, scales=[1, 1, 2, 2])
