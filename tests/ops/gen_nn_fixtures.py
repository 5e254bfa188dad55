#!/usr/bin/python3
"""Writes the fixtures of the CNN operator tests (conv, pool, norm, resize,
pad): every ONNX 1.12 node test case of those operators (inputs, attributes,
expected outputs), plus extra cases computed here with numpy for what the ONNX
cases leave out (groups, depthwise, dilations, 1-D/3-D, batches, GEMM tile
remainders, negative pads, other dtypes).

Run from anywhere: /usr/bin/python3 tests/ops/gen_nn_fixtures.py
"""
import os
import re
import sys

import numpy as np

# onnx 1.12's case generators use names numpy has since removed
np.float = float
np.int = int
np.bool = bool
np.object = object
import onnx  # noqa: E402
from onnx import helper  # noqa: E402
from onnx.backend.test.case import node  # noqa: E402
from onnx.backend.test.case.node.pool_op_common import pool as onnx_pool  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

FAMILIES = {
    "conv": {"Conv", "ConvTranspose"},
    "pool": {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool",
             "GlobalLpPool"},
    "norm": {"BatchNormalization", "InstanceNormalization", "LayerNormalization", "LRN"},
    "resize": {"Resize", "Upsample"},
    "pad": {"Pad"},
}
# Too large for a header (187k values each); 3-D pooling is covered by the
# smaller cases made below with the same reference function.
SKIP = {"test_maxpool_3d_default", "test_averagepool_3d_default"}

DT = {
    np.dtype("float32"): ("CGE_F32", "float"),
    np.dtype("float64"): ("CGE_F64", "double"),
    np.dtype("int64"): ("CGE_I64", "int64_t"),
    np.dtype("int32"): ("CGE_I32", "int32_t"),
    np.dtype("uint8"): ("CGE_U8", "uint8_t"),
    np.dtype("int8"): ("CGE_I8", "int8_t"),
}

rng = np.random.RandomState(1234)


def rnd(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


# ---- numpy references for the extra cases ---------------------------------

def geometry(in_sp, k, s, d, pads, auto_pad):
    n = len(in_sp)
    out, pb, pe = [], [], []
    for i in range(n):
        ext = (k[i] - 1) * d[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-in_sp[i] // s[i])
            tot = max(0, (o - 1) * s[i] + ext - in_sp[i])
            b = tot // 2 if auto_pad == "SAME_UPPER" else tot - tot // 2
            pb.append(b)
            pe.append(tot - b)
            out.append(o)
        else:
            b, e = (pads[i], pads[n + i]) if pads else (0, 0)
            pb.append(b)
            pe.append(e)
            out.append((in_sp[i] + b + e - ext) // s[i] + 1)
    return out, pb, pe


def conv_ref(x, w, b, strides=None, dilations=None, pads=None, group=1, auto_pad="NOTSET"):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    N, C = x.shape[:2]
    M = w.shape[0]
    nsp = x.ndim - 2
    k = list(w.shape[2:])
    s = strides or [1] * nsp
    d = dilations or [1] * nsp
    out, pb, pe = geometry(list(x.shape[2:]), k, s, d, pads, auto_pad)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pb[i], pe[i] + s[i] * d[i] + k[i] * d[i]) for i in range(nsp)])
    y = np.zeros([N, M] + out)
    cpg, mpg = C // group, M // group
    for m in range(M):
        g = m // mpg
        for idx in np.ndindex(*k):
            sl = tuple(slice(idx[i] * d[i], idx[i] * d[i] + out[i] * s[i], s[i]) for i in range(nsp))
            patch = xp[(slice(None), slice(g * cpg, (g + 1) * cpg)) + sl]
            y[:, m] += np.tensordot(patch, w[m][(slice(None),) + idx], axes=([1], [0]))
    if b is not None:
        y += b.reshape([1, M] + [1] * nsp)
    return y.astype(np.float32)


def convt_ref(x, w, b, strides, pads, group, output_padding=None, dilations=None):
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    N, C = x.shape[:2]
    nsp = x.ndim - 2
    mpg = w.shape[1]
    M = mpg * group
    k = list(w.shape[2:])
    s = strides
    d = dilations or [1] * nsp
    op = output_padding or [0] * nsp
    ext = [(k[i] - 1) * d[i] + 1 for i in range(nsp)]
    full = [s[i] * (x.shape[2 + i] - 1) + op[i] + ext[i] for i in range(nsp)]
    y = np.zeros([N, M] + [f + ext[i] for i, f in enumerate(full)])
    cpg = C // group
    for n in range(N):
        for c in range(C):
            g = c // cpg
            for pos in np.ndindex(*x.shape[2:]):
                v = x[(n, c) + pos]
                sl = tuple(slice(pos[i] * s[i], pos[i] * s[i] + ext[i], d[i]) for i in range(nsp))
                y[(n, slice(g * mpg, (g + 1) * mpg)) + sl] += v * w[c]
    sl = tuple(slice(pads[i], full[i] - pads[nsp + i]) for i in range(nsp))
    y = y[(slice(None), slice(None)) + sl]
    if b is not None:
        y += b.reshape([1, M] + [1] * nsp)
    return y.astype(np.float32)


def pool_case(name, op, x, kernel, strides=None, pads=None, count_include_pad=0):
    nsp = x.ndim - 2
    s = strides or [1] * nsp
    out, pb, pe = geometry(list(x.shape[2:]), kernel, s, [1] * nsp, pads, "NOTSET")
    pad_val = -np.inf if op == "MaxPool" else (0.0 if count_include_pad else np.nan)
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pb[i], pe[i]) for i in range(nsp)],
                    mode="constant", constant_values=pad_val)
    kind = "MAX" if op == "MaxPool" else "AVG"
    pad_shape = [pb[i] + pe[i] for i in range(nsp)]
    y = onnx_pool(padded, x.shape, kernel, s, out, pad_shape, kind,
                  count_include_pad=count_include_pad)
    attrs = {"kernel_shape": kernel}
    if strides:
        attrs["strides"] = strides
    if pads:
        attrs["pads"] = pads
    if count_include_pad:
        attrs["count_include_pad"] = 1
    return dict(name=name, op=op, attrs=attrs, inputs=[x], outputs=[y.astype(x.dtype)])


def extra_cases():
    out = {k: [] for k in FAMILIES}
    cv = out["conv"]

    def conv(name, x, w, b=None, **attrs):
        y = conv_ref(x, w, b, attrs.get("strides"), attrs.get("dilations"), attrs.get("pads"),
                     attrs.get("group", 1), attrs.get("auto_pad", "NOTSET"))
        cv.append(dict(name=name, op="Conv", attrs=attrs,
                       inputs=[x, w] + ([b] if b is not None else []), outputs=[y]))

    # GEMM path: K = 32*9 > 256 (two depth passes), M = 13 and P = 99 not tile multiples
    conv("cge_conv_gemm_remainders", rnd(1, 32, 9, 11), rnd(13, 32, 3, 3), rnd(13),
         pads=[1, 1, 1, 1])
    conv("cge_conv_stride2_batch2", rnd(2, 5, 9, 10), rnd(7, 5, 3, 3), rnd(7),
         strides=[2, 2], pads=[1, 0, 1, 2])
    conv("cge_conv_7x7_s2", rnd(1, 3, 20, 18), rnd(8, 3, 7, 7), rnd(8), strides=[2, 2],
         pads=[3, 3, 3, 3])
    conv("cge_conv_1x1", rnd(2, 20, 6, 7), rnd(24, 20, 1, 1), rnd(24))
    conv("cge_conv_1x1_s2", rnd(1, 8, 7, 7), rnd(5, 8, 1, 1), None, strides=[2, 2])
    conv("cge_conv_groups2", rnd(1, 6, 8, 8), rnd(4, 3, 3, 3), rnd(4), group=2, pads=[1, 1, 1, 1])
    conv("cge_conv_dilated", rnd(1, 3, 11, 12), rnd(4, 3, 3, 3), rnd(4), dilations=[2, 3],
         pads=[2, 1, 2, 3])
    conv("cge_conv_depthwise_s1", rnd(1, 6, 10, 9), rnd(6, 1, 3, 3), rnd(6), group=6,
         pads=[1, 1, 1, 1])
    conv("cge_conv_depthwise_s2", rnd(2, 4, 11, 10), rnd(4, 1, 3, 3), rnd(4), group=4,
         strides=[2, 2], pads=[1, 1, 1, 1])
    conv("cge_conv_depthwise_mult2_dil", rnd(1, 3, 9, 9), rnd(6, 1, 3, 3), None, group=3,
         dilations=[2, 2], pads=[2, 2, 2, 2], strides=[1, 3])
    conv("cge_conv_depthwise_same_lower", rnd(1, 2, 7, 8), rnd(2, 1, 4, 4), rnd(2), group=2,
         auto_pad="SAME_LOWER", strides=[2, 2])
    conv("cge_conv_same_upper", rnd(1, 3, 7, 8), rnd(2, 3, 4, 4), rnd(2), auto_pad="SAME_UPPER")
    conv("cge_conv_valid", rnd(1, 3, 7, 8), rnd(2, 3, 3, 2), None, auto_pad="VALID",
         strides=[2, 1])
    conv("cge_conv_1d", rnd(2, 3, 17), rnd(5, 3, 4), rnd(5), strides=[2], pads=[1, 2])
    conv("cge_conv_3d", rnd(1, 2, 5, 6, 7), rnd(3, 2, 3, 2, 3), rnd(3), pads=[1, 0, 1, 1, 1, 0],
         strides=[1, 2, 1])
    x64 = rnd(1, 2, 5, 5).astype(np.float64)
    w64 = rnd(3, 2, 3, 3).astype(np.float64)
    b64 = rnd(3).astype(np.float64)
    cv.append(dict(name="cge_conv_f64", op="Conv", attrs={"pads": [1, 1, 1, 1]},
                   inputs=[x64, w64, b64],
                   outputs=[conv_ref(x64, w64, b64, pads=[1, 1, 1, 1]).astype(np.float64)]))
    x, w, b = rnd(1, 4, 3, 4), rnd(4, 3, 3, 2), rnd(6)
    cv.append(dict(name="cge_convtranspose_groups2", op="ConvTranspose",
                   attrs={"group": 2, "strides": [2, 1], "pads": [1, 0, 0, 1]},
                   inputs=[x, w, b], outputs=[convt_ref(x, w, b, [2, 1], [1, 0, 0, 1], 2)]))

    pl = out["pool"]
    pl.append(pool_case("cge_maxpool_3d_small", "MaxPool", rnd(1, 2, 5, 6, 7), [2, 3, 2],
                        strides=[1, 2, 2], pads=[0, 1, 1, 1, 0, 1]))
    pl.append(pool_case("cge_averagepool_3d_small", "AveragePool", rnd(1, 2, 5, 6, 7), [3, 2, 2],
                        strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0], count_include_pad=1))
    pl.append(pool_case("cge_averagepool_3x3_s2_pad", "AveragePool", rnd(2, 3, 13, 12), [3, 3],
                        strides=[2, 2], pads=[1, 1, 1, 1]))
    pl.append(pool_case("cge_maxpool_3x3_s2_pad", "MaxPool", rnd(1, 4, 21, 20), [3, 3],
                        strides=[2, 2], pads=[1, 1, 1, 1]))
    x = rnd(2, 3, 5, 6)
    pl.append(dict(name="cge_globalaveragepool_batch", op="GlobalAveragePool", attrs={},
                   inputs=[x], outputs=[x.mean(axis=(2, 3), keepdims=True)]))
    x = rnd(2, 3, 40)
    pl.append(dict(name="cge_globalmaxpool_1d", op="GlobalMaxPool", attrs={},
                   inputs=[x], outputs=[x.max(axis=2, keepdims=True)]))
    pl.append(dict(name="cge_globallppool", op="GlobalLpPool", attrs={"p": 3},
                   inputs=[x], outputs=[((np.abs(x.astype(np.float64)) ** 3).sum(
                       axis=2, keepdims=True) ** (1 / 3)).astype(np.float32)]))
    x = rnd(1, 2, 6, 5)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (0, 0)])
    y = np.zeros((1, 2, 4, 4))
    for i in range(4):
        for j in range(4):
            y[:, :, i, j] = np.sqrt((xp[:, :, 2 * i:2 * i + 2, j:j + 2] ** 2).sum(axis=(2, 3)))
    pl.append(dict(name="cge_lppool_2d", op="LpPool",
                   attrs={"kernel_shape": [2, 2], "strides": [2, 1], "pads": [1, 0, 1, 0]},
                   inputs=[x], outputs=[y.astype(np.float32)]))
    xi = rng.randint(-128, 127, size=(1, 2, 5, 6)).astype(np.int8)
    yi = onnx_pool(xi.astype(np.float64), xi.shape, [2, 2], [2, 2], [2, 3], [0, 0], "MAX")
    pl.append(dict(name="cge_maxpool_int8", op="MaxPool",
                   attrs={"kernel_shape": [2, 2], "strides": [2, 2]},
                   inputs=[xi], outputs=[yi.astype(np.int8)]))

    nm = out["norm"]
    x = rnd(2, 5, 3, 4)
    sc, bi = rnd(5), rnd(5)
    mean = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    var = x.astype(np.float64).var(axis=(2, 3), keepdims=True)
    y = (x - mean) / np.sqrt(var + 1e-5) * sc.reshape(1, 5, 1, 1) + bi.reshape(1, 5, 1, 1)
    nm.append(dict(name="cge_instancenorm_batch", op="InstanceNormalization", attrs={},
                   inputs=[x, sc, bi], outputs=[y.astype(np.float32)]))
    x = rnd(3, 300)
    sc = rnd(300)
    m = x.astype(np.float64).mean(axis=1, keepdims=True)
    v = x.astype(np.float64).var(axis=1, keepdims=True)
    y = (x - m) / np.sqrt(v + 1e-5) * sc
    nm.append(dict(name="cge_layernorm_no_bias_long_rows", op="LayerNormalization", attrs={},
                   inputs=[x, sc], outputs=[y.astype(np.float32)]))
    x = rnd(2, 3, 4).astype(np.float64)
    sc, bi, mu, va = (rnd(3).astype(np.float64), rnd(3).astype(np.float64),
                      rnd(3).astype(np.float64), np.abs(rnd(3)).astype(np.float64))
    y = (x - mu.reshape(1, 3, 1)) / np.sqrt(va.reshape(1, 3, 1) + 1e-5) * sc.reshape(1, 3, 1) \
        + bi.reshape(1, 3, 1)
    nm.append(dict(name="cge_batchnorm_f64_rank3", op="BatchNormalization", attrs={},
                   inputs=[x, sc, bi, mu, va], outputs=[y]))

    pd = out["pad"]
    x = rnd(2, 3, 4)
    pd.append(dict(name="cge_pad_negative", op="Pad", attrs={},
                   inputs=[x, np.array([0, -1, 2, -1, 1, -1], np.int64)],
                   outputs=[np.pad(x[:1, 1:, :3], [(0, 0), (0, 1), (2, 0)])]))
    x = rnd(3, 4)
    pd.append(dict(name="cge_pad_reflect_wide", op="Pad", attrs={"mode": "reflect"},
                   inputs=[x, np.array([5, 7, 4, 6], np.int64)],
                   outputs=[np.pad(x, [(5, 4), (7, 6)], mode="reflect")]))
    pd.append(dict(name="cge_pad_edge_crop", op="Pad", attrs={"mode": "edge"},
                   inputs=[x, np.array([2, -1, -1, 3], np.int64)],
                   outputs=[np.pad(x[:, 1:], [(2, 0), (0, 3)], mode="edge")[:, :]
                            if False else np.pad(x, [(2, 0), (0, 3)], mode="edge")[:-1, 1:]]))
    xu = rng.randint(0, 255, size=(2, 3, 3)).astype(np.uint8)
    pd.append(dict(name="cge_pad_uint8_constant", op="Pad", attrs={},
                   inputs=[xu, np.array([1, 0, 2, 0, 1, 1], np.int64), np.array(7, np.uint8)],
                   outputs=[np.pad(xu, [(1, 0), (0, 1), (2, 1)], constant_values=7)]))

    rz = out["resize"]
    x = rnd(1, 2, 3, 5)
    # nearest by scales on int32 data; half_pixel, round_prefer_floor
    xi = rng.randint(-50, 50, size=(1, 1, 3, 4)).astype(np.int32)
    sc = np.array([1, 1, 2, 1.5], np.float32)
    from onnx.backend.test.case.node.resize import interpolate_nd, nearest_coeffs, \
        linear_coeffs
    yi = interpolate_nd(xi, nearest_coeffs, scale_factors=sc).astype(np.int32)
    rz.append(dict(name="cge_resize_nearest_int32", op="Resize", attrs={"mode": "nearest"},
                   inputs=[xi, None, sc], outputs=[yi]))
    sc = np.array([1, 1, 1.7, 0.6], np.float32)
    y = interpolate_nd(x, linear_coeffs, scale_factors=sc).astype(np.float32)
    rz.append(dict(name="cge_resize_linear_channels", op="Resize", attrs={"mode": "linear"},
                   inputs=[x, None, sc], outputs=[y]))

    # ConvTranspose on oneDNN's deconvolution (drawn last: the cases above
    # keep their random values): U-Net's 2x2 stride 2, output_padding,
    # dilations, depthwise, 1-D, 3-D, one pixel, prime sizes.
    def convt(name, x, w, b, strides, pads, group=1, output_padding=None, dilations=None):
        attrs = {"strides": strides, "pads": pads}
        if group != 1:
            attrs["group"] = group
        if output_padding:
            attrs["output_padding"] = output_padding
        if dilations:
            attrs["dilations"] = dilations
        cv.append(dict(name=name, op="ConvTranspose", attrs=attrs,
                       inputs=[x, w] + ([b] if b is not None else []),
                       outputs=[convt_ref(x, w, b, strides, pads, group, output_padding,
                                          dilations)]))

    convt("cge_convtranspose_2x2_s2", rnd(1, 8, 5, 7), rnd(8, 4, 2, 2), rnd(4), [2, 2],
          [0, 0, 0, 0])
    convt("cge_convtranspose_outpad_dilated", rnd(2, 3, 5, 6), rnd(3, 2, 3, 3), rnd(2), [2, 3],
          [1, 0, 2, 1], output_padding=[1, 2], dilations=[2, 1])
    convt("cge_convtranspose_depthwise_s2", rnd(1, 4, 6, 5), rnd(4, 1, 3, 3), rnd(4), [2, 2],
          [1, 1, 1, 1], group=4, output_padding=[1, 1])
    convt("cge_convtranspose_1d", rnd(2, 3, 9), rnd(3, 5, 4), None, [3], [1, 2])
    convt("cge_convtranspose_3d", rnd(1, 2, 3, 4, 3), rnd(2, 3, 2, 3, 2), rnd(3), [2, 1, 2],
          [0, 1, 0, 0, 0, 1])
    convt("cge_convtranspose_one_pixel", rnd(1, 5, 1, 1), rnd(5, 3, 3, 3), rnd(3), [1, 1],
          [0, 0, 0, 0])
    convt("cge_convtranspose_prime", rnd(1, 7, 13, 11), rnd(7, 11, 5, 5), rnd(11), [3, 3],
          [2, 2, 2, 2], output_padding=[2, 1])
    return out


# ---- emitting ----------------------------------------------------------------

def cfloat(v, ctype):
    if np.isnan(v):
        return "NAN"
    if np.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    if ctype == "float":
        return repr(float(np.float32(v))) + "f"
    return repr(float(v))


def carray(name, a):
    a = np.asarray(a)
    dt, ctype = DT[a.dtype]
    flat = a.reshape(-1)
    if ctype in ("float", "double"):
        vals = [cfloat(v, ctype) for v in flat]
    elif ctype == "int64_t":
        vals = ["%dLL" % int(v) if v != -(2 ** 63) else "INT64_MIN" for v in flat]
    else:
        vals = [str(int(v)) for v in flat]
    lines = []
    for i in range(0, len(vals), 8):
        lines.append("    " + ", ".join(vals[i:i + 8]) + ",")
    return "static const %s %s[%d] = {\n%s\n};\n" % (ctype, name, len(vals), "\n".join(lines))


def tensor_entry(name, a):
    if a is None:
        return "{0, CGE_DTYPE_UNDEFINED, 0, {0}, NULL}"
    a = np.asarray(a)
    dt, _ = DT[a.dtype]
    dims = ", ".join(str(d) for d in a.shape) or "0"
    data = name if a.size else "NULL"
    return "{1, %s, %d, {%s}, %s}" % (dt, a.ndim, dims, data)


def attr_entry(prefix, i, key, v, decls):
    if isinstance(v, bytes):
        v = v.decode()
    if isinstance(v, str):
        return '{.name = "%s", .kind = CGE_ATTR_STRING, .s = "%s"}' % (key, v)
    if isinstance(v, (int, np.integer)):
        return '{.name = "%s", .kind = CGE_ATTR_INT, .i = %d}' % (key, int(v))
    if isinstance(v, (float, np.floating)):
        return '{.name = "%s", .kind = CGE_ATTR_FLOAT, .f = %s}' % (key, cfloat(v, "float"))
    v = list(v)
    if all(isinstance(e, (int, np.integer)) for e in v):
        arr = "%s_a%d" % (prefix, i)
        decls.append("static const int64_t %s[%d] = {%s};\n" % (
            arr, max(len(v), 1), ", ".join("%dLL" % int(e) for e in v) or "0"))
        return '{.name = "%s", .kind = CGE_ATTR_INTS, .n = %d, .ints = %s}' % (key, len(v), arr)
    arr = "%s_a%d" % (prefix, i)
    decls.append("static const float %s[%d] = {%s};\n" % (
        arr, len(v), ", ".join(cfloat(e, "float") for e in v)))
    return '{.name = "%s", .kind = CGE_ATTR_FLOATS, .n = %d, .floats = %s}' % (key, len(v), arr)


def onnx_cases():
    out = {k: [] for k in FAMILIES}
    seen = {}
    for c in node.collect_testcases(None):
        if c.name in SKIP:
            continue
        n = c.model.graph.node
        if len(n) != 1:
            continue
        n = n[0]
        fam = [f for f, ops in FAMILIES.items() if n.op_type in ops]
        if not fam:
            continue
        inputs, outputs = c.data_sets[0]
        ins, k = [], 0
        for nm in n.input:
            if nm == "":
                ins.append(None)
            else:
                ins.append(np.asarray(inputs[k]))
                k += 1
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        name = c.name
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = "%s_%d" % (name, seen[name])
        out[fam[0]].append(dict(name=name, op=n.op_type, attrs=attrs, inputs=ins,
                                outputs=[np.asarray(o) for o in outputs]))
    return out


def write(fam, cases):
    path = os.path.join(HERE, "%s_fixtures.h" % fam)
    parts = ["/* Generated by gen_nn_fixtures.py (onnx %s, numpy %s): ONNX node test cases and\n"
             " * extra numpy cases for the %s family. Do not edit. */\n" % (
                 onnx.__version__, np.__version__, fam),
             "#include <math.h>\n#include <stdint.h>\n\n#include \"nn_fixture.h\"\n\n"]
    entries = []
    for ci, c in enumerate(cases):
        p = "%s%d" % (fam, ci)
        decls = []
        ins = []
        for i, a in enumerate(c["inputs"]):
            if a is not None and np.asarray(a).size:
                decls.append(carray("%s_i%d" % (p, i), a))
            ins.append(tensor_entry("%s_i%d" % (p, i), a))
        outs = []
        for i, a in enumerate(c["outputs"]):
            if np.asarray(a).size:
                decls.append(carray("%s_o%d" % (p, i), a))
            outs.append(tensor_entry("%s_o%d" % (p, i), a))
        attrs = [attr_entry(p, i, k, v, decls) for i, (k, v) in enumerate(sorted(c["attrs"].items()))]
        parts.extend(decls)
        parts.append("static const nn_fx_tensor %s_in[] = {%s};\n" % (p, ", ".join(ins)))
        parts.append("static const nn_fx_tensor %s_out[] = {%s};\n" % (p, ", ".join(outs)))
        if attrs:
            parts.append("static const cge_attr %s_attrs[] = {\n    %s,\n};\n" % (
                p, ",\n    ".join(attrs)))
        parts.append("\n")
        entries.append('    {"%s", "%s", %d, %s, %d, %s_in, %d, %s_out},' % (
            c["name"], c["op"], len(attrs), "%s_attrs" % p if attrs else "NULL",
            len(ins), p, len(outs), p))
    parts.append("static const nn_fx_case %s_cases[] = {\n%s\n};\n" % (fam, "\n".join(entries)))
    parts.append("#define %s_NUM_CASES %d\n" % (fam.upper(), len(cases)))
    with open(path, "w") as f:
        f.write("".join(parts))
    print("%s: %d cases" % (path, len(cases)))


def main():
    on = onnx_cases()
    ex = extra_cases()
    for fam in FAMILIES:
        write(fam, on[fam] + ex[fam])


if __name__ == "__main__":
    sys.exit(main())
