# Operators opset 18 added (onnx 1.12, which the conformance cases come from,
# stops at 17): GroupNormalization, Col2Im, CenterCropPad and LpPool's new
# attributes, each against a NumPy reference of the ONNX definition.
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
