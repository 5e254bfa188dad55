# Low precision: com.microsoft MatMulNBits against a numpy reference of its
# formula (4 and 8 bits, zero points packed, float or absent, K not a multiple
# of the block, odd N, decode and prefill rows), and precision="bf16" against
# float32 within the stated tolerance (1e-2 of each output's largest value).
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cge

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import nbits  # noqa: E402

CLI = os.path.join(os.path.dirname(os.environ.get("CGE_LIBRARY", "")) or
                   os.path.join(os.path.dirname(__file__), "..", "..", "build"), "cge")


def nbits_model(a_shape, w, bias=None, opset_ms=True, **kw):
    n, inits = nbits.node(helper, numpy_helper, "a", w, "y", "q", bias=bias, **kw)
    out_shape = list(a_shape[:-1]) + [w.shape[1]]
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, a_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], inits)
    ops = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.microsoft", 1)] if opset_ms else [])
    return helper.make_model(g, opset_imports=ops).SerializeToString()


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("zp", ["packed", "none", "float"])
@pytest.mark.parametrize("K,N,block,M", [(100, 37, 32, 1), (256, 48, 64, 5), (64, 33, 16, 3)])
def test_matmul_nbits_matches_reference(bits, zp, K, N, block, M):
    rng = np.random.default_rng(K * N + bits)
    w = rng.standard_normal((K, N)).astype(np.float32)
    a = rng.standard_normal((M, K)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32) if M > 1 else None
    kw = dict(bits=bits, block_size=block, zero_points=zp != "none", zp_float=zp == "float")
    model = nbits_model([M, K], w, bias=bias, **kw)
    y = cge.InferenceSession(model).run(None, {"a": a})[0]
    packed, scales, zps = nbits.quantize(w, bits, block, zp != "none", zp == "float")
    ref = a.astype(np.float64) @ nbits.dequantize(packed, scales, zps, K, bits, block)
    if bias is not None:
        ref = ref + bias
    assert y.shape == (M, N)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # and the quantization itself is what an int4/int8 weight should be
    err = np.abs(nbits.dequantize(packed, scales, zps, K, bits, block) - w).max()
    assert err <= (0.6 if bits == 4 else 0.04) * np.abs(w).max()


def test_matmul_nbits_rank3_and_prefill_rows():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((128, 80)).astype(np.float32)
    a = rng.standard_normal((2, 9, 128)).astype(np.float32)
    y = cge.InferenceSession(nbits_model([2, 9, 128], w, bits=4, block_size=32)).run(None, {"a": a})[0]
    p, s, z = nbits.quantize(w, 4, 32)
    ref = a @ nbits.dequantize(p, s, z, 128, 4, 32)
    assert y.shape == (2, 9, 80)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_matmul_nbits_refuses_what_it_cannot_do():
    w = np.ones((64, 16), np.float32)
    packed, scales, _ = nbits.quantize(w, 4, 32, zero_points=False)
    inits = [numpy_helper.from_array(packed, "B"), numpy_helper.from_array(scales, "S"),
             # act-order g_idx: a permutation of blocks the kernel does not follow
             numpy_helper.from_array((np.arange(64)[::-1] // 32).astype(np.int32), "g")]

    def model(ins, bits):
        n = helper.make_node("MatMulNBits", ins, ["y"], domain="com.microsoft", K=64, N=16,
                             bits=bits, block_size=32)
        g = helper.make_graph([n], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.microsoft", 1)])

    with pytest.raises(cge.Error, match="g_idx"):
        cge.InferenceSession(model(["a", "B", "S", "", "g"], 4).SerializeToString())
    with pytest.raises(cge.Error, match="bits 4 or 8"):
        cge.InferenceSession(model(["a", "B", "S"], 2).SerializeToString())


# ---- bf16 ------------------------------------------------------------------------------

def encoder_like(rng, S=32, D=64):
    """MatMul + bias + Gelu (FusedMatMul), an attention-shaped batched MatMul
    of two activations, and a Conv: every operator the precision pass takes."""
    f = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)  # noqa: E731
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]),
             helper.make_node("Reshape", ["h2", "shp"], ["h3"]),
             helper.make_node("Transpose", ["h3"], ["h3t"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["h3", "h3t"], ["att"]),
             helper.make_node("Unsqueeze", ["att", "ax"], ["img"]),
             helper.make_node("Conv", ["img", "cw"], ["y"], pads=[1, 1, 1, 1])]
    inits = [numpy_helper.from_array(f(D, D), "w1"), numpy_helper.from_array(f(D), "b1"),
             numpy_helper.from_array(np.array([4, S // 4, D], np.int64), "shp"),
             numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(f(8, 4, 3, 3), "cw")]
    g = helper.make_graph(nodes, "enc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, D])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_bf16_within_tolerance_of_fp32():
    rng = np.random.default_rng(3)
    model = encoder_like(rng)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y32 = cge.InferenceSession(model).run(None, {"x": x})[0]
    y16 = cge.InferenceSession(model, precision="bf16").run(None, {"x": x})[0]
    so = cge.SessionOptions()
    so.precision = "bf16"
    y16b = cge.InferenceSession(model, sess_options=so).run(None, {"x": x})[0]
    assert y16.shape == y32.shape == (1, 8, 8, 8)
    rel = np.abs(y16 - y32).max() / np.abs(y32).max()
    assert rel <= 1e-2
    np.testing.assert_array_equal(y16, y16b)
    if cge.precision_bf16_available():
        assert rel > 0, "bf16 gave float32's bits: the precision pass did not run"
    else:
        assert rel == 0


def test_bf16_option_errors():
    with pytest.raises(cge.Error, match="precision"):
        cge.InferenceSession(encoder_like(np.random.default_rng(0)), precision="fp16")


def test_cli_precision_flags(tmp_path):
    path = tmp_path / "enc.onnx"
    path.write_bytes(encoder_like(np.random.default_rng(1)))
    r = subprocess.run([CLI, "bench", str(path), "--compare-precision", "--iterations", "2",
                        "--warmup", "0"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "max rel error" in r.stdout and "speed-up" in r.stdout
    err = float(r.stdout.split("max rel error")[1].split()[0])
    assert err <= 1e-2
    r = subprocess.run([CLI, "run", str(path), "--precision", "bf16"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([CLI, "run", str(path), "--precision", "fp16"], capture_output=True, text=True)
    assert r.returncode == 2 and "want fp32 or bf16" in r.stderr
    # a .cgm compiled with --precision bf16 keeps it
    cgm = tmp_path / "enc_bf16.cgm"
    r = subprocess.run([CLI, "compile", str(path), "-o", str(cgm), "--precision", "bf16"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    x = np.random.default_rng(2).standard_normal((32, 64)).astype(np.float32)
    y32 = cge.InferenceSession(str(path)).run(None, {"x": x})[0]
    y16 = cge.InferenceSession(str(cgm)).run(None, {"x": x})[0]
    rel = np.abs(y16 - y32).max() / np.abs(y32).max()
    assert rel <= 1e-2 and (rel > 0) == cge.precision_bf16_available()
    with pytest.raises(cge.Error, match="keeps the precision"):
        cge.InferenceSession(str(cgm), precision="bf16")
