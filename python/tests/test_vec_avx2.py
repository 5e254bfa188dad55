# The AVX2 + FMA kernels (Softmax rows, LayerNormalization / SkipLayerNorm
# rows, the fused Attention's tiled path, the fast_math rows) against numpy
# references, on every instruction-set path this machine can run: each cap
# (CGE_CPU_ISA=avx2, generic, and none) in its own process, since the cap is
# read once per process. Odd lengths around the 8- and 16-lane steps, the
# empty tensor, and extreme values (exp overflow / underflow, NaN, inf).
import json
import math
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import cge

LENGTHS = [0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 255, 257, 1023]
CAPS = [None, "avx2", "generic"]

# Runs every (model, inputs, output) job of a JSON list in one session each;
# with "ab", also with the named pass disabled, and records bit-equality.
CHILD = r"""
import json, os, sys
import numpy as np
import cge
jobs = json.load(open(sys.argv[1]))
for j in jobs:
    data = np.load(j["npz"])
    s = cge.InferenceSession(j["model"])
    feeds = {i.name: data[i.name] for i in s.get_inputs()}
    out = s.run(None, feeds)
    np.save(j["out"], out[0])
    if j.get("ab"):
        os.environ["CGE_DISABLE_PASSES"] = j["ab"]
        plain = cge.InferenceSession(j["model"]).run(None, feeds)
        del os.environ["CGE_DISABLE_PASSES"]
        np.save(j["out"] + ".plain.npy", plain[0])
print("ok")
"""


def _run_caps(jobs, tmp_path):
    """{cap: [output of each job]} (and the unfused outputs under key (cap, "plain"))."""
    res = {}
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(cge.__file__)))
    for cap in CAPS:
        tag = cap or "native"
        mine = []
        for i, j in enumerate(jobs):
            mine.append(dict(j, out=str(tmp_path / ("%s_%d.npy" % (tag, i)))))
        spec = tmp_path / ("%s.json" % tag)
        spec.write_text(json.dumps(mine))
        env = dict(os.environ)
        env.pop("CGE_CPU_ISA", None)
        env.pop("CGE_DISABLE_PASSES", None)
        env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
        if cap:
            env["CGE_CPU_ISA"] = cap
        r = subprocess.run([sys.executable, "-c", CHILD, str(spec)], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        res[cap] = [np.load(j["out"]) for j in mine]
        res[(cap, "plain")] = [np.load(j["out"] + ".plain.npy") if j.get("ab") else None
                               for j in mine]
    return res


def _save(tmp_path, name, nodes, inputs, outputs, inits, feeds, opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    path = str(tmp_path / (name + ".onnx"))
    onnx.save(m, path)
    npz = str(tmp_path / (name + ".npz"))
    np.savez(npz, **feeds)
    return {"model": path, "npz": npz}


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _softmax_ref(x):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(x, axis=-1, keepdims=True)
        e = np.exp(x - m)
        return e / e.sum(axis=-1, keepdims=True)


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((3, n)) * 6.0).astype(np.float32)


def _extreme_rows(n):
    """Rows of n (>= 1) hitting the exp's edges: -inf entries, a NaN, one huge
    value, a spread that underflows, +inf, all -inf."""
    j = np.arange(n)
    rows = [
        np.where(j % 3 == 0, j.astype(np.float32), -np.inf),
        np.where(j == n // 2, np.nan, j.astype(np.float32)),
        np.where(j == n - 1, 1e30, -1e30),
        (j - n / 2.0) * 3.0,
        np.where(j == 0, np.inf, 0.0),
        np.full(n, -np.inf),
        np.full(n, 88.5),
        np.linspace(-200.0, 0.0, n),
    ]
    return np.stack(rows).astype(np.float32)


def _close(got, want, rtol, atol, what):
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape, what
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), "%s: NaN positions differ" % what
    ok = ~nan
    inf = np.isinf(want) & ok
    assert np.array_equal(got[inf], want[inf]), "%s: infinities differ" % what
    fin = ok & ~inf
    np.testing.assert_allclose(got[fin], want[fin], rtol=rtol, atol=atol, err_msg=what)


def test_softmax_rows(tmp_path):
    jobs, refs = [], []
    for n in LENGTHS:
        x = _rows(n, n)
        node = helper.make_node("Softmax", ["x"], ["y"], axis=-1)
        jobs.append(_save(tmp_path, "sm%d" % n, [node], [_vi("x", [3, n])],
                          [_vi("y", [3, n])], [], {"x": x}))
        refs.append(_softmax_ref(x) if n else np.zeros((3, 0)))
    for n in [1, 7, 8, 9, 17, 1023]:
        x = _extreme_rows(n)
        node = helper.make_node("Softmax", ["x"], ["y"], axis=-1)
        jobs.append(_save(tmp_path, "smx%d" % n, [node], [_vi("x", list(x.shape))],
                          [_vi("y", list(x.shape))], [], {"x": x}))
        refs.append(_softmax_ref(x))
    res = _run_caps(jobs, tmp_path)
    for cap in CAPS:
        for job, ref, got in zip(jobs, refs, res[cap]):
            what = "%s CGE_CPU_ISA=%s" % (os.path.basename(job["model"]), cap)
            _close(got, ref, 5e-6, 1e-30, what)
            if got.size and not np.isnan(ref).all():
                sums = np.nansum(got.astype(np.float64), axis=-1)
                rows_ok = ~np.isnan(ref).any(axis=-1)
                assert np.all(np.abs(sums[rows_ok] - 1.0) < 1e-5), what


def _ln_ref(x, scale, bias, eps):
    x = x.astype(np.float64)
    m = x.mean(axis=-1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * scale + bias


def test_layernorm_and_skip_rows(tmp_path):
    """LayerNormalization rows, and Add + LayerNormalization (fused into
    SkipLayerNorm): the fused rows equal the unfused pair's bits on each path."""
    jobs, refs = [], []
    for d in [1, 7, 8, 9, 15, 17, 255, 257, 1023]:
        rng = np.random.default_rng(d)
        a = (rng.standard_normal((5, d)) * 3.0 + 10.0).astype(np.float32)
        b = rng.standard_normal((5, d)).astype(np.float32)
        scale = rng.standard_normal(d).astype(np.float32)
        bias = rng.standard_normal(d).astype(np.float32)
        inits = [numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(bias, "bias")]
        ln = helper.make_node("LayerNormalization", ["a", "scale", "bias"], ["y"], axis=-1,
                              epsilon=1e-5)
        jobs.append(_save(tmp_path, "ln%d" % d, [ln], [_vi("a", [5, d])], [_vi("y", [5, d])],
                          inits, {"a": a}))
        refs.append(_ln_ref(a, scale, bias, 1e-5) if d > 1 else np.broadcast_to(bias, (5, 1)))
        add = helper.make_node("Add", ["a", "b"], ["s"])
        ln2 = helper.make_node("LayerNormalization", ["s", "scale", "bias"], ["y"], axis=-1,
                               epsilon=1e-5)
        job = _save(tmp_path, "sln%d" % d, [add, ln2], [_vi("a", [5, d]), _vi("b", [5, d])],
                    [_vi("y", [5, d])], inits, {"a": a, "b": b})
        job["ab"] = "fuse_skip_layernorm"
        jobs.append(job)
        s = (a + b).astype(np.float32)
        refs.append(_ln_ref(s, scale, bias, 1e-5) if d > 1 else np.broadcast_to(bias, (5, 1)))
    res = _run_caps(jobs, tmp_path)
    for cap in CAPS:
        for k, (job, ref, got) in enumerate(zip(jobs, refs, res[cap])):
            what = "%s CGE_CPU_ISA=%s" % (os.path.basename(job["model"]), cap)
            _close(got, ref, 2e-4, 2e-5, what)
            plain = res[(cap, "plain")][k]
            if plain is not None:
                assert np.array_equal(got.view(np.uint32), plain.view(np.uint32)), \
                    what + ": SkipLayerNorm differs from Add + LayerNormalization"


def _attention_job(tmp_path, name, B, H, M, N, D, causal):
    rng = np.random.default_rng(M * 100 + N + D)
    q = rng.standard_normal((B, H, M, D)).astype(np.float32)
    k = rng.standard_normal((B, H, N, D)).astype(np.float32)
    v = rng.standard_normal((B, H, N, D)).astype(np.float32)
    scale = np.float32(1.0 / math.sqrt(D))
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s0"]),
             helper.make_node("Mul", ["s0", "sc"], ["s1"])]
    inits = [numpy_helper.from_array(np.array(scale, np.float32), "sc")]
    last = "s1"
    mask = np.zeros((M, N), np.float32)
    if causal:
        mask = np.triu(np.full((M, N), -np.inf, np.float32), 1 + N - M)
        inits.append(numpy_helper.from_array(mask, "mask"))
        nodes.append(helper.make_node("Add", ["s1", "mask"], ["s2"]))
        last = "s2"
    nodes += [helper.make_node("Softmax", [last], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["o"])]
    job = _save(tmp_path, name, nodes,
                [_vi("q", [B, H, M, D]), _vi("k", [B, H, N, D]), _vi("v", [B, H, N, D])],
                [_vi("o", [B, H, M, D])], inits, {"q": q, "k": k, "v": v})
    s = np.einsum("bhmd,bhnd->bhmn", q.astype(np.float64), k.astype(np.float64)) * float(scale)
    p = _softmax_ref(s + mask)
    return job, np.einsum("bhmn,bhnd->bhmd", p, v.astype(np.float64))


def test_attention_tiled_rows(tmp_path):
    """The fused Attention on every path: one row (decode), rows around the
    6-row tiles, keys around the 8-key vectors and 64-key chunks, head sizes
    around the 8- and 16-column vectors; a causal -inf mask."""
    jobs, refs = [], []
    for (M, N, D, causal) in [(1, 17, 8, False), (4, 4, 1, False), (5, 9, 7, False),
                              (7, 7, 15, True), (13, 70, 17, False), (64, 64, 32, True),
                              (33, 130, 64, False), (70, 70, 9, True)]:
        job, ref = _attention_job(tmp_path, "at%d_%d_%d" % (M, N, D), 1, 2, M, N, D, causal)
        jobs.append(job)
        refs.append(ref)
    res = _run_caps(jobs, tmp_path)
    for cap in CAPS:
        for job, ref, got in zip(jobs, refs, res[cap]):
            what = "%s CGE_CPU_ISA=%s" % (os.path.basename(job["model"]), cap)
            _close(got, ref, 1e-4, 1e-5, what)


def _unary_inputs(n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 4.0).astype(np.float32)
    edge = np.array([0.0, -0.0, 1e-30, -1e-30, 88.0, 88.8, 89.0, -87.0, -87.5, -104.0, -200.0,
                     200.0, np.inf, -np.inf, np.nan, 9.5, -9.5, 0.4999, 0.5, 0.625],
                    np.float32)
    x[: min(n, edge.size)] = edge[: min(n, edge.size)]
    return x


UNARY = {
    "Exp": lambda x: np.exp(x),
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "Tanh": np.tanh,
    "Erf": lambda x: np.vectorize(math.erf, otypes=[np.float64])(x) if x.size else x,
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_rows(op, tmp_path):
    jobs, refs = [], []
    for n in LENGTHS:
        x = _unary_inputs(n)
        node = helper.make_node(op, ["x"], ["y"])
        jobs.append(_save(tmp_path, "%s%d" % (op, n), [node], [_vi("x", [n])], [_vi("y", [n])],
                          [], {"x": x}))
        with np.errstate(over="ignore", invalid="ignore"):
            # rounded to float32 (past its range: inf), then compared in float64
            refs.append(UNARY[op](x.astype(np.float64)).astype(np.float32).astype(np.float64))
    res = _run_caps(jobs, tmp_path)
    tiny = np.finfo(np.float32).tiny
    for cap in CAPS:
        for job, ref, got in zip(jobs, refs, res[cap]):
            what = "%s CGE_CPU_ISA=%s" % (os.path.basename(job["model"]), cap)
            # fast_math's rows make the same bits on every path (fast_math.c),
            # NaN's sign and payload aside
            base = res[CAPS[0]][jobs.index(job)]
            bits = lambda a: np.where(np.isnan(a), np.float32(np.nan), a).view(np.uint32)
            assert np.array_equal(bits(got), bits(base)), what
            # below the smallest normal float the fast exp flushes to 0
            ref = np.where(np.abs(ref) < tiny, 0.0, ref)
            g = np.where(np.abs(got) < tiny, 0.0, got)
            _close(g, ref, 4e-6, 1e-7 if op == "Tanh" else 1e-37, what)


def _gelu_ref(x):
    # erfc: 1 + erf(x / sqrt 2) cancels for x < 0
    return 0.5 * x * np.vectorize(math.erfc, otypes=[np.float64])(-x / math.sqrt(2.0))


def test_gelu_and_chains(tmp_path):
    """Gelu (opset 20) rows, and chains fused into one ElementwiseChain
    (SiLU: x * Sigmoid(x); Exp and Gelu behind an Add): each path gives the
    reference, the fused chain equals the unfused nodes' bits, and every path
    the same bits."""
    jobs, refs = [], []
    for n in [1, 7, 9, 17, 1023]:
        x = _unary_inputs(n)
        jobs.append(_save(tmp_path, "gelu%d" % n, [helper.make_node("Gelu", ["x"], ["y"])],
                          [_vi("x", [n])], [_vi("y", [n])], [], {"x": x}, opset=20))
        refs.append(_gelu_ref(x.astype(np.float64)) if n > 0 else x)
        nodes = [helper.make_node("Sigmoid", ["x"], ["s"]),
                 helper.make_node("Mul", ["x", "s"], ["m"]),
                 helper.make_node("Add", ["m", "c"], ["a"]),
                 helper.make_node("Gelu", ["a"], ["g"]),
                 helper.make_node("Exp", ["g"], ["y"])]
        c = numpy_helper.from_array(np.array([0.25], np.float32), "c")
        job = _save(tmp_path, "chain%d" % n, nodes, [_vi("x", [n])], [_vi("y", [n])], [c],
                    {"x": x}, opset=20)
        job["ab"] = "fuse_elementwise"
        jobs.append(job)
        xd = x.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            m = (xd / (1.0 + np.exp(-xd))).astype(np.float32).astype(np.float64)
            g = _gelu_ref((m + 0.25).astype(np.float32).astype(np.float64))
            refs.append(np.exp(g.astype(np.float32)).astype(np.float32).astype(np.float64))
    res = _run_caps(jobs, tmp_path)
    bits = lambda a: np.where(np.isnan(a), np.float32(np.nan), a).view(np.uint32)
    for cap in CAPS:
        for k, (job, ref, got) in enumerate(zip(jobs, refs, res[cap])):
            what = "%s CGE_CPU_ISA=%s" % (os.path.basename(job["model"]), cap)
            _close(got, ref, 5e-5, 1e-30, what)
            assert np.array_equal(bits(got), bits(res[CAPS[0]][k])), what + ": paths differ"
            plain = res[(cap, "plain")][k]
            if plain is not None:
                assert np.array_equal(bits(got), bits(plain)), what + ": fused differs from unfused"


def test_transpose_tiles(tmp_path):
    """Transpose of 4-byte elements (the AVX2 8x8 blocks, their 4x4 and
    element edges): exactly numpy's, on every path, NaN bits included."""
    jobs, refs = [], []
    rng = np.random.default_rng(7)
    cases = [((n, m), (1, 0)) for n in (1, 7, 8, 9, 17, 33) for m in (1, 8, 15, 40)]
    cases += [((9, 3, 17), (1, 2, 0)), ((2, 24, 5, 16), (0, 2, 3, 1)), ((0, 5), (1, 0))]
    for k, (shape, perm) in enumerate(cases):
        x = rng.standard_normal(shape).astype(np.float32)
        if x.size:
            x.flat[0] = np.nan
        out = [shape[p] for p in perm]
        jobs.append(_save(tmp_path, "tr%d" % k, [helper.make_node("Transpose", ["x"], ["y"],
                                                                  perm=list(perm))],
                          [_vi("x", list(shape))], [_vi("y", out)], [], {"x": x}))
        refs.append(np.transpose(x, perm))
    res = _run_caps(jobs, tmp_path)
    for cap in CAPS:
        for job, ref, got in zip(jobs, refs, res[cap]):
            what = "%s CGE_CPU_ISA=%s" % (os.path.basename(job["model"]), cap)
            assert got.shape == ref.shape, what
            assert np.array_equal(got.view(np.uint32), ref.view(np.uint32)), what
