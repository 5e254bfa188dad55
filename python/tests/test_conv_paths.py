# The oneDNN convolution paths chosen by shape class (src/ops/dnnl_conv.c,
# the selection functions in src/ops/conv.c), each checked against a numpy
# float64 reference at the zoo's shapes and at odd ones (batch 1 and 3, prime
# sizes): a ConvTranspose whose kernel equals its stride as one oneDNN matmul
# (channels-last, level 3), against oneDNN's deconvolution and the reference,
# bit-equal across batches; which 3x3 layers take oneDNN's Winograd.
import ctypes
import itertools

import numpy as np
import pytest

import cge
from cge import _lib

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _counter(name):
    fn = getattr(_lib.lib, name, None)
    if fn is None:
        pytest.skip("%s is not exported by this build" % name)
    fn.restype = ctypes.c_int64
    fn.argtypes = []
    return fn


def _dnnl():
    return _counter("cge__dnnl_conv_deconv_matmul_made")


def conv_transpose_ref(x, w, b, strides, pads, dilations, output_padding, group):
    """ONNX ConvTranspose in float64: each kernel tap scatters x * W[:, :, tap]."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    nsp = x.ndim - 2
    n, c = x.shape[:2]
    mpg = w.shape[1]
    cpg = c // group
    k = w.shape[2:]
    ins = x.shape[2:]
    full = [(ins[i] - 1) * strides[i] + (k[i] - 1) * dilations[i] + 1 + output_padding[i]
            for i in range(nsp)]
    y = np.zeros((n, mpg * group) + tuple(full))
    for g in range(group):
        xg = x[:, g * cpg:(g + 1) * cpg]
        for tap in itertools.product(*[range(kk) for kk in k]):
            wt = w[(slice(g * cpg, (g + 1) * cpg), slice(None)) + tap]
            contrib = np.einsum("nc...,cm->nm...", xg, wt)
            sl = tuple(slice(tap[i] * dilations[i],
                             tap[i] * dilations[i] + (ins[i] - 1) * strides[i] + 1, strides[i])
                       for i in range(nsp))
            y[(slice(None), slice(g * mpg, (g + 1) * mpg)) + sl] += contrib
    crop = tuple(slice(pads[i], full[i] - pads[nsp + i]) for i in range(nsp))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y += b.astype(np.float64).reshape((1, -1) + (1,) * nsp)
    return y


def _model(path, xshape, w, b, attrs, tail, z_shape=None):
    """x -> ConvTranspose(W, B) [-> Add z] [-> activation], W and B constants."""
    inits = [numpy_helper.from_array(w, "w")]
    ins = ["x", "w"]
    if b is not None:
        inits.append(numpy_helper.from_array(b, "b"))
        ins.append("b")
    nodes = [helper.make_node("ConvTranspose", ins, ["y0"], **attrs)]
    cur = "y0"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xshape))]
    if "add" in tail:
        nodes.append(helper.make_node("Add", [cur, "z"], ["y1"]))
        inputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, list(z_shape)))
        cur = "y1"
    for act in ("Relu", "Sigmoid"):
        if act in tail:
            nodes.append(helper.make_node(act, [cur], [cur + act]))
            cur = cur + act
    nodes.append(helper.make_node("Identity", [cur], ["y"]))
    g = helper.make_graph(nodes, "t", inputs,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, path)


# (name, in channels, out channels, kernel = stride, batch, spatial size, bias)
MATMUL_CASES = [
    ("unet_u2", 64, 32, (2, 2), 1, (32, 32), True),
    ("unet_u1_batch3", 32, 16, (2, 2), 3, (64, 64), True),
    ("prime_sizes", 7, 11, (2, 2), 3, (13, 11), True),
    ("uneven_kernel", 5, 6, (2, 3), 2, (5, 7), False),
    ("one_by_one", 9, 4, (1, 1), 1, (3, 5), True),
    ("conv1d", 3, 5, (3,), 3, (9,), True),
    ("conv3d", 4, 3, (2, 2, 2), 1, (3, 4, 5), True),
    ("one_pixel", 16, 17, (2, 2), 1, (1, 1), True),
]


def _run(path, feeds, level):
    return cge.InferenceSession(path, opt_level=level).run(None, feeds)[0]


@pytest.mark.parametrize("case", MATMUL_CASES, ids=[c[0] for c in MATMUL_CASES])
@pytest.mark.parametrize("tail", [(), ("add", "Relu"), ("Sigmoid",)],
                         ids=["plain", "add_relu", "sigmoid"])
def test_conv_transpose_matmul_form(case, tail, tmp_path, monkeypatch):
    """Kernel == stride, no pads: at level 3 one oneDNN matmul (the counter
    moves), within float32 rounding of the float64 reference, of level 1 and of
    oneDNN's deconvolution (CGE_DNNL_DECONV_MATMUL=0, the counter still)."""
    name, ci, co, k, n, size, bias = case
    rng = np.random.default_rng(7)
    nsp = len(k)
    x = rng.standard_normal((n, ci) + size).astype(np.float32)
    w = (rng.standard_normal((ci, co) + k) / np.sqrt(ci)).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32) if bias else None
    out_sp = tuple(size[i] * k[i] for i in range(nsp))
    z = rng.standard_normal((n, co) + out_sp).astype(np.float32)
    path = str(tmp_path / (name + ".onnx"))
    attrs = {"strides": list(k), "kernel_shape": list(k)}
    _model(path, x.shape, w, b, attrs, tail, z.shape)
    ref = conv_transpose_ref(x, w, b, k, [0] * 2 * nsp, [1] * nsp, [0] * nsp, 1)
    if "add" in tail:
        ref = ref + z
    if "Relu" in tail:
        ref = np.maximum(ref, 0)
    if "Sigmoid" in tail:
        ref = 1 / (1 + np.exp(-ref))
    feeds = {"x": x, "z": z} if "add" in tail else {"x": x}
    made = _dnnl()
    before = made()
    y3 = _run(path, feeds, 3)
    took = made() - before
    y1 = _run(path, feeds, 1)
    before = made()
    monkeypatch.setenv("CGE_DNNL_DECONV_MATMUL", "0")
    yd = _run(path, feeds, 3)
    monkeypatch.delenv("CGE_DNNL_DECONV_MATMUL")
    assert made() == before, "CGE_DNNL_DECONV_MATMUL=0 still made the matmul form"
    scale = max(float(np.abs(ref).max()), 1e-6)
    for label, y in (("level 3 (matmul)", y3), ("level 1", y1), ("deconvolution", yd)):
        assert y.shape == ref.shape, (label, y.shape, ref.shape)
        np.testing.assert_allclose(y / scale, ref / scale, rtol=1e-5, atol=1e-6, err_msg=label)
    if _has_dnnl():
        assert took >= 1, "level 3 did not make the matmul form"


def _has_dnnl():
    fn = _lib.lib.cge_fused_conv_channels_last_available
    fn.restype = ctypes.c_bool
    fn.argtypes = []
    return bool(fn())


# Kernel != stride, pads, dilations, groups: oneDNN's deconvolution as before
# (no matmul form), still equal to the reference.
OTHER_CASES = [
    # (name, ci, co, kernel, stride, pads, dilation, output_padding, group, size)
    ("overlapping", 6, 5, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1, (6, 7)),
    ("padded_2x2", 4, 4, (2, 2), (2, 2), (1, 0, 0, 1), (1, 1), (0, 0), 1, (5, 5)),
    ("grouped_2x2", 4, 6, (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), (0, 0), 2, (5, 3)),
    ("dilated", 3, 4, (2, 2), (2, 2), (0, 0, 0, 0), (2, 2), (0, 0), 1, (4, 4)),
]


@pytest.mark.parametrize("case", OTHER_CASES, ids=[c[0] for c in OTHER_CASES])
def test_conv_transpose_other_forms(case, tmp_path):
    name, ci, co, k, s, pads, d, op, group, size = case
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, ci) + size).astype(np.float32)
    w = (rng.standard_normal((ci, co // group) + k) / np.sqrt(ci)).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    path = str(tmp_path / (name + ".onnx"))
    attrs = {"strides": list(s), "kernel_shape": list(k), "pads": list(pads),
             "dilations": list(d), "output_padding": list(op), "group": group}
    _model(path, x.shape, w, b, attrs, ())
    ref = conv_transpose_ref(x, w, b, s, pads, d, op, group)
    made = _dnnl()
    before = made()
    y3 = _run(path, {"x": x}, 3)
    assert made() == before, "a form with overlapping, padded, dilated or grouped windows " \
                             "took the matmul form"
    y1 = _run(path, {"x": x}, 1)
    scale = max(float(np.abs(ref).max()), 1e-6)
    for y in (y3, y1):
        assert y.shape == ref.shape
        np.testing.assert_allclose(y / scale, ref / scale, rtol=1e-5, atol=1e-6)


def test_conv_transpose_matmul_form_across_batches(tmp_path):
    """A symbolic batch: every image of a batch-5 run has the bytes of that
    image run alone and of a batch-3 run (the matmul's reduction over C is
    per output row, whatever the number of rows), and matches the reference."""
    rng = np.random.default_rng(9)
    for ci, co, h, w_ in [(64, 32, 32, 32), (32, 16, 64, 64), (7, 11, 13, 11)]:
        w = (rng.standard_normal((ci, co, 2, 2)) / np.sqrt(ci)).astype(np.float32)
        b = rng.standard_normal(co).astype(np.float32)
        path = str(tmp_path / ("b%d.onnx" % ci))
        _model(path, ["batch", ci, h, w_], w, b, {"strides": [2, 2], "kernel_shape": [2, 2]},
               ("Relu",))
        s = cge.InferenceSession(path)
        x = rng.standard_normal((5, ci, h, w_)).astype(np.float32)
        y5 = s.run(None, {"x": x})[0]
        ref = np.maximum(conv_transpose_ref(x, w, b, (2, 2), [0] * 4, [1, 1], [0, 0], 1), 0)
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(y5 / scale, ref / scale, rtol=1e-5, atol=1e-6)
        for i in range(5):
            assert np.array_equal(s.run(None, {"x": x[i:i + 1]})[0][0], y5[i]), (ci, i)
        assert np.array_equal(s.run(None, {"x": x[:3]})[0], y5[:3]), ci


def _has_avx512():
    """Whether cge's kernels may use AVX-512F (CGE_CPU_ISA's cap applied):
    conv.c asks oneDNN for Winograd only then."""
    fn = _lib.lib.cge_cpu_features
    fn.restype = ctypes.c_uint64
    return bool(fn() & (1 << 11))


def conv_ref(x, w, b, pad):
    """A 2-D stride-1 convolution in float64 (one group)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    w = w.astype(np.float64)
    kh, kw = w.shape[2:]
    oh, ow = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,mc->nmhw", x[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y + b.astype(np.float64).reshape(1, -1, 1, 1)


def _conv_model(path, x, w, b):
    """x -> Conv 3x3 (pads 1, constant W and B) -> Relu."""
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y0"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["y0"], ["y"])], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)


# (C, M, output size, batch, whether oneDNN's Winograd is taken)
WINO_CASES = [
    (96, 208, 14, 3, False),   # 13 blocks of 16 on a 14x14 map: the direct kernel
    (96, 176, 14, 1, False),   # 11 blocks
    (96, 192, 14, 3, True),    # 12 blocks
    (96, 224, 14, 1, True),    # 14 blocks
    (96, 208, 17, 3, True),    # 13 blocks from 17x17 (a prime size) up
    (256, 256, 14, 1, True),   # 2.25 MiB of float weights: Winograd (4x that in memory)
    (256, 512, 14, 1, False),  # 4.5 MiB: above WINO_MAX_WEIGHT_BYTES, the direct kernel
    (512, 512, 28, 1, False),  # 9 MiB (VGG's conv4): direct, even at 28x28
]


@pytest.mark.parametrize("case", WINO_CASES, ids=["%d_%d_%dx%d_b%d" % (c[0], c[1], c[2], c[2], c[3])
                                                  for c in WINO_CASES])
def test_winograd_selection(case, tmp_path):
    """conv.c's dnnl_winograd by shape class: which 3x3 layers take oneDNN's
    Winograd (the counter), each within float32 rounding of the float64
    reference (Winograd about 5e-7 of the largest output)."""
    c, m, size, n, wino = case
    rng = np.random.default_rng(10)
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w = (rng.standard_normal((m, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    path = str(tmp_path / "c.onnx")
    _conv_model(path, x, w, b)
    made = _counter("cge__dnnl_conv_winograd_made")
    before = made()
    y = cge.InferenceSession(path).run(None, {"x": x})[0]
    if _has_dnnl() and _has_avx512():
        assert (made() > before) == wino, "Winograd %s" % ("not taken" if wino else "taken")
    ref = np.maximum(conv_ref(x, w, b, 1), 0)
    scale = float(np.abs(ref).max())
    np.testing.assert_allclose(y / scale, ref / scale, rtol=1e-5, atol=1e-5)


def test_winograd_one_thread_workspace(tmp_path):
    """oneDNN's Winograd needs more scratch at one thread than at two on a
    56x56 map (vgg11's third conv): the workspace is sized for the threads the
    primitive is made with too, so a one-thread session runs it (it refused:
    'the workspace is missing or too small')."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 128, 56, 56)).astype(np.float32)
    w = (rng.standard_normal((256, 128, 3, 3)) / np.sqrt(9 * 128)).astype(np.float32)
    b = rng.standard_normal(256).astype(np.float32)
    path = str(tmp_path / "vgg_conv.onnx")
    _conv_model(path, x, w, b)
    ref = np.maximum(conv_ref(x, w, b, 1), 0)
    scale = float(np.abs(ref).max())
    for threads in (1, 2):
        so = cge.SessionOptions()
        so.intra_op_num_threads = threads
        y = cge.InferenceSession(path, so).run(None, {"x": x})[0]
        np.testing.assert_allclose(y / scale, ref / scale, rtol=1e-5, atol=1e-5,
                                   err_msg="%d threads" % threads)


def test_winograd_weight_bound_moves_with_the_environment(tmp_path, monkeypatch):
    """CGE_DNNL_WINOGRAD_MAX_MB moves the 4 MiB bound: a 4.5 MiB layer takes
    Winograd under 8, the 2.25 MiB one no longer does under 1; the outputs
    stay within float32 rounding of the reference either way."""
    if not _has_dnnl():
        pytest.skip("oneDNN is not in this build")
    if not _has_avx512():
        pytest.skip("oneDNN 2.6's Winograd needs AVX-512 (conv.c asks for it only there)")
    rng = np.random.default_rng(12)
    made = _counter("cge__dnnl_conv_winograd_made")
    for c, m, mb, wino in ((256, 512, "8", True), (256, 256, "1", False)):
        x = rng.standard_normal((1, c, 14, 14)).astype(np.float32)
        w = (rng.standard_normal((m, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        path = str(tmp_path / ("c%d_%d.onnx" % (c, m)))
        _conv_model(path, x, w, b)
        monkeypatch.setenv("CGE_DNNL_WINOGRAD_MAX_MB", mb)
        before = made()
        y = cge.InferenceSession(path).run(None, {"x": x})[0]
        assert (made() > before) == wino, (c, m, mb)
        ref = np.maximum(conv_ref(x, w, b, 1), 0)
        scale = float(np.abs(ref).max())
        np.testing.assert_allclose(y / scale, ref / scale, rtol=1e-5, atol=1e-5)
