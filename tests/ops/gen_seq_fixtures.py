#!/usr/bin/python3
"""Node cases for test_rnn.c, test_quant.c, test_spectral.c and test_einsum.c.

Two sources, written as one table of cases per family (node_cases.h runs them):
  - every ONNX 1.12 node test case of these operators (onnx.backend.test.case:
    inputs, attributes and expected outputs exactly as onnx ships them);
  - extra cases for what those do not cover (directions, sequence_lens,
    activations, per-axis quantization, padding, ellipsis, ...), with expected
    values from the numpy references below.
Run from this folder: /usr/bin/python3 gen_seq_fixtures.py
"""
import numpy as np

np.float = float
np.int = int
np.bool = bool
np.object = object
from onnx import helper, numpy_helper  # noqa: E402
from onnx.backend.test.case import node as onnx_node  # noqa: E402

FAMILIES = {
    "rnn": ["RNN", "GRU", "LSTM"],
    "quant": ["QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
              "ConvInteger", "QLinearMatMul", "QLinearConv"],
    "spectral": ["DFT", "STFT", "HannWindow", "HammingWindow", "BlackmanWindow",
                 "MelWeightMatrix"],
    "einsum": ["Einsum"],
}

DTYPES = {
    np.dtype(np.float32): (1, "float"), np.dtype(np.uint8): (2, "uint8_t"),
    np.dtype(np.int8): (3, "int8_t"), np.dtype(np.uint16): (4, "uint16_t"),
    np.dtype(np.int16): (5, "int16_t"), np.dtype(np.int32): (6, "int32_t"),
    np.dtype(np.int64): (7, "int64_t"), np.dtype(np.float16): (10, "uint16_t"),
    np.dtype(np.float64): (11, "double"), np.dtype(np.uint32): (12, "uint32_t"),
    np.dtype(np.uint64): (13, "uint64_t"),
}


def cfloat(x):
    if not np.isfinite(x):
        return "NAN" if np.isnan(x) else ("-INFINITY" if x < 0 else "INFINITY")
    t = "%.9g" % x
    return t + ("f" if ("." in t or "e" in t) else ".0f")


def c_items(a):
    a = np.asarray(a)
    flat = a.ravel()
    if a.dtype == np.float32:
        return [cfloat(x) for x in flat.astype(np.float64)]
    if a.dtype == np.float64:
        return ["%.17g" % x for x in flat]
    if a.dtype == np.float16:
        return ["0x%04x" % x for x in flat.view(np.uint16)]
    if a.dtype == np.int64:
        return ["INT64_C(%d)" % x for x in flat]
    if a.dtype == np.uint64:
        return ["UINT64_C(%d)" % x for x in flat]
    return ["%d" % x for x in flat]


class Header:
    def __init__(self, family):
        self.family = family
        self.lines = []
        self.cases = []
        self.count = 0

    def array(self, name, ctype, items):
        if not items:
            items = ["0"]
        self.lines.append("static const %s %s[%d] = {" % (ctype, name, len(items)))
        for k in range(0, len(items), 8):
            self.lines.append("    " + ", ".join(items[k:k + 8]) + ",")
        self.lines.append("};")

    def tensor(self, name, a):
        if a is None:
            return "{0, 0, {0}, NULL}"
        a = np.asarray(a)
        code, ctype = DTYPES[a.dtype]
        self.array(name, ctype, c_items(a))
        dims = ", ".join("%d" % d for d in a.shape) or "0"
        return "{%d, %d, {%s}, %s}" % (code, a.ndim, dims, name)

    def add(self, name, op, inputs, attrs, outputs, rtol, atol):
        """inputs/outputs: arrays or None (absent); attrs: dict name -> value."""
        p = "c%d" % self.count
        self.count += 1
        ins = [self.tensor("%s_in%d" % (p, i), a) for i, a in enumerate(inputs)]
        outs = [self.tensor("%s_out%d" % (p, i), a) for i, a in enumerate(outputs)]
        at = []
        for k, v in sorted(attrs.items()):
            at.append(self.attr(p, k, v))
        self.lines.append("static const nc_tensor %s_ins[] = {%s};" % (p, ", ".join(ins) or "{0}"))
        self.lines.append("static const nc_tensor %s_outs[] = {%s};" % (p, ", ".join(outs)))
        self.lines.append("static const nc_attr %s_attrs[] = {%s};" % (p, ", ".join(at) or "{0}"))
        self.cases.append('{"%s", "%s", %d, %s_ins, %d, %s_attrs, %d, %s_outs, %r, %r}'
                          % (name, op, len(inputs), p, len(at), p, len(outputs), p, rtol, atol))

    def attr(self, p, k, v):
        n = "%s_a_%s" % (p, k)
        if isinstance(v, (bool, int, np.integer)):
            return '{"%s", 2, %d, 0, NULL, 0, NULL, NULL, NULL}' % (k, int(v))
        if isinstance(v, (float, np.floating)):
            return '{"%s", 1, 0, %s, NULL, 0, NULL, NULL, NULL}' % (k, cfloat(np.float32(v)))
        if isinstance(v, (str, bytes)):
            s = v.decode() if isinstance(v, bytes) else v
            return '{"%s", 3, 0, 0, "%s", 0, NULL, NULL, NULL}' % (k, s)
        v = list(v)
        if all(isinstance(x, (int, np.integer)) for x in v):
            self.array(n, "int64_t", ["INT64_C(%d)" % x for x in v])
            return '{"%s", 7, 0, 0, NULL, %d, %s, NULL, NULL}' % (k, len(v), n)
        if all(isinstance(x, (float, np.floating, int)) for x in v):
            self.array(n, "float", [cfloat(np.float32(x)) for x in v])
            return '{"%s", 6, 0, 0, NULL, %d, NULL, %s, NULL}' % (k, len(v), n)
        strs = [x.decode() if isinstance(x, bytes) else x for x in v]
        self.array(n, "char *const", ['"%s"' % s for s in strs])
        return '{"%s", 8, 0, 0, NULL, %d, NULL, NULL, %s}' % (k, len(v), n)

    def write(self, path):
        out = ["/* Generated by gen_seq_fixtures.py (onnx node cases and numpy %s "
               "references): %s operators. Do not edit. */" % (np.__version__, self.family),
               "#include <stddef.h>", "#include <stdint.h>", "", '#include "node_cases.h"', ""]
        out += self.lines
        out.append("")
        out.append("static const nc_case %s_cases[] = {" % self.family)
        out += ["    %s," % c for c in self.cases]
        out.append("};")
        out.append("#define NUM_%s_CASES %d" % (self.family.upper(), len(self.cases)))
        with open(path, "w") as f:
            f.write("\n".join(out) + "\n")


def onnx_cases(h, ops):
    """Every ONNX node case whose single node is one of `ops`."""
    names = []
    for c in onnx_node.collect_testcases(None):
        g = c.model.graph
        if len(g.node) != 1 or g.node[0].op_type not in ops:
            continue
        nd = g.node[0]
        attrs = {a.name: helper.get_attribute_value(a) for a in nd.attribute}
        for inputs, outputs in c.data_sets:
            ins, k = [], 0
            for name in nd.input:
                if name == "":
                    ins.append(None)
                else:
                    ins.append(np.asarray(inputs[k]))
                    k += 1
            outs, k = [], 0
            for name in nd.output:
                if name == "":
                    outs.append(None)
                else:
                    outs.append(np.asarray(outputs[k]))
                    k += 1
            h.add(c.name, nd.op_type, ins, attrs, outs, c.rtol, c.atol)
            names.append(c.name)
    return names


# ---- RNN references -----------------------------------------------------------

ACT_PARAMS = {"Affine": (1.0, 0.0), "LeakyRelu": (0.01, None), "ThresholdedRelu": (1.0, None),
              "ScaledTanh": (1.0, 1.0), "HardSigmoid": (0.2, 0.5), "Elu": (1.0, None)}


def act_fn(name, a, b):
    return {
        "Relu": lambda x: np.maximum(x, 0),
        "Tanh": np.tanh,
        "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "Affine": lambda x: a * x + b,
        "LeakyRelu": lambda x: np.where(x >= 0, x, a * x),
        "ThresholdedRelu": lambda x: np.where(x > a, x, 0),
        "ScaledTanh": lambda x: a * np.tanh(b * x),
        "HardSigmoid": lambda x: np.clip(a * x + b, 0, 1),
        "Elu": lambda x: np.where(x >= 0, x, a * (np.exp(x) - 1)),
        "Softsign": lambda x: x / (1 + np.abs(x)),
        "Softplus": lambda x: np.log1p(np.exp(x)),
    }[name]


def make_acts(names, alphas, betas):
    """alphas/betas are consumed in order by the functions that take them."""
    alphas, betas = list(alphas), list(betas)
    fns = []
    for n in names:
        da, db = ACT_PARAMS.get(n, (None, None))
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        fns.append(act_fn(n, a, b))
    return fns


def rnn_ref(kind, X, W, R, B=None, lens=None, h0=None, c0=None, P=None, direction="forward",
            layout=0, acts=None, alphas=(), betas=(), clip=None, input_forget=0, lbr=0):
    G = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    per = {"RNN": 1, "GRU": 2, "LSTM": 3}[kind]
    defaults = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    D = 2 if direction == "bidirectional" else 1
    x = X.astype(np.float64)
    if layout:
        x = np.swapaxes(x, 0, 1)
    S, Bt, _ = x.shape
    H = R.shape[2]
    names = acts if acts else defaults * D
    if len(names) == per and D == 2:
        fns = make_acts(names, alphas, betas)
        fns = fns + fns
    else:
        fns = make_acts(names, alphas, betas)
    lens = np.full(Bt, S) if lens is None else lens
    h0 = np.zeros((D, Bt, H)) if h0 is None else (np.swapaxes(h0, 0, 1) if layout else h0)
    c0 = np.zeros((D, Bt, H)) if c0 is None else (np.swapaxes(c0, 0, 1) if layout else c0)
    Y = np.zeros((S, D, Bt, H))
    Yh = np.zeros((D, Bt, H))
    Yc = np.zeros((D, Bt, H))
    cl = (lambda v: np.clip(v, -clip, clip)) if clip is not None else (lambda v: v)
    for d in range(D):
        rev = direction == "reverse" or d == 1
        f = fns[d * per:(d + 1) * per]
        w, r = W[d].astype(np.float64), R[d].astype(np.float64)
        b = B[d].astype(np.float64) if B is not None else np.zeros(2 * G * H)
        wb, rb = b[:G * H], b[G * H:]
        p = P[d].astype(np.float64) if P is not None else np.zeros(3 * H)
        for n in range(Bt):
            h, c = h0[d, n].astype(np.float64), c0[d, n].astype(np.float64)
            L = lens[n]
            for s in range(L):
                t = L - 1 - s if rev else s
                xt = x[t, n]
                if kind == "RNN":
                    h = f[0](cl(w @ xt + r @ h + wb + rb))
                elif kind == "LSTM":
                    g = w @ xt + r @ h + wb + rb
                    gi, go, gf, gc = np.split(g, 4)
                    i = f[0](cl(gi + p[:H] * c))
                    ff = 1 - i if input_forget else f[0](cl(gf + p[2 * H:] * c))
                    cc = f[1](cl(gc))
                    c = ff * c + i * cc
                    o = f[0](cl(go + p[H:2 * H] * c))
                    h = o * f[2](c)
                else:
                    gx = w @ xt + wb
                    wz, wr, wh = np.split(gx, 3)
                    rz, rr, rh = np.split(r, 3)
                    bz, br, bh = np.split(rb, 3)
                    z = f[0](cl(wz + rz @ h + bz))
                    rg = f[0](cl(wr + rr @ h + br))
                    if lbr:
                        hh = f[1](cl(wh + rg * (rh @ h + bh)))
                    else:
                        hh = f[1](cl(wh + rh @ (rg * h) + bh))
                    h = (1 - z) * hh + z * h
                Y[t, d, n] = h
            Yh[d, n] = h
            Yc[d, n] = c
    if layout:
        Y = np.transpose(Y, (2, 0, 1, 3))
        Yh = np.swapaxes(Yh, 0, 1)
        Yc = np.swapaxes(Yc, 0, 1)
    f32 = np.float32
    return Y.astype(f32), Yh.astype(f32), Yc.astype(f32)


def rnn_extra(h):
    rs = np.random.RandomState(7)

    def u(*shape, s=0.5):
        return (rs.uniform(-s, s, shape)).astype(np.float32)

    def case(name, kind, S, Bt, I, H, direction="forward", layout=0, bias=True, lens=None,
             init=False, peep=False, outs=3, **kw):
        G = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
        D = 2 if direction == "bidirectional" else 1
        X = u(Bt, S, I, s=1.0) if layout else u(S, Bt, I, s=1.0)
        W, R = u(D, G * H, I), u(D, G * H, H)
        B = u(D, 2 * G * H) if bias else None
        L = np.array(lens, dtype=np.int32) if lens is not None else None
        hshape = (Bt, D, H) if layout else (D, Bt, H)
        h0 = u(*hshape) if init else None
        c0 = u(*hshape) if init and kind == "LSTM" else None
        P = u(D, 3 * H) if peep else None
        Y, Yh, Yc = rnn_ref(kind, X, W, R, B, L, h0, c0, P, direction, layout, **kw)
        attrs = {"hidden_size": H}
        if direction != "forward":
            attrs["direction"] = direction
        if layout:
            attrs["layout"] = 1
        for k, a in (("acts", "activations"), ("alphas", "activation_alpha"),
                     ("betas", "activation_beta"), ("clip", "clip"),
                     ("input_forget", "input_forget"), ("lbr", "linear_before_reset")):
            if k in kw:
                attrs[a] = kw[k]
        ins = [X, W, R, B, L, h0]
        if kind == "LSTM":
            ins += [c0, P]
        while ins[-1] is None:
            ins.pop()
        res = [Y, Yh, Yc] if kind == "LSTM" else [Y, Yh]
        h.add(name, kind, ins, attrs, res[:outs], 1e-4, 1e-5)

    for kind in ("RNN", "GRU", "LSTM"):
        k = kind.lower()
        case("%s_bidirectional_lens" % k, kind, 5, 3, 4, 3, "bidirectional", lens=[5, 2, 0],
             init=True)
        case("%s_reverse_layout1" % k, kind, 4, 2, 3, 5, "reverse", layout=1, init=True)
        case("%s_bidir_layout1_lens" % k, kind, 4, 5, 3, 4, "bidirectional", layout=1,
             lens=[4, 1, 3, 4, 2])
        case("%s_big" % k, kind, 6, 9, 21, 19, "forward", bias=True, init=True)
        case("%s_clip" % k, kind, 4, 2, 3, 4, clip=0.3)
    case("rnn_acts_alpha", "RNN", 3, 2, 3, 4, "bidirectional",
         acts=["LeakyRelu", "ScaledTanh"], alphas=[0.2, 0.7], betas=[1.5])
    case("rnn_one_output", "RNN", 3, 2, 3, 4, outs=1)
    case("gru_linear_before_reset", "GRU", 4, 3, 3, 5, "bidirectional", lbr=1, init=True)
    case("gru_acts", "GRU", 3, 2, 3, 4, acts=["HardSigmoid", "Softsign"], alphas=[0.3],
         betas=[0.4])
    case("gru_acts_per_dir", "GRU", 3, 2, 3, 4, "bidirectional",
         acts=["Sigmoid", "Elu", "HardSigmoid", "Softplus"], alphas=[0.9, 0.25])
    case("lstm_peepholes_bidir", "LSTM", 4, 3, 3, 4, "bidirectional", peep=True, init=True,
         lens=[4, 3, 1])
    case("lstm_input_forget", "LSTM", 4, 2, 3, 4, input_forget=1, peep=True)
    case("lstm_acts", "LSTM", 3, 2, 3, 4, acts=["HardSigmoid", "Affine", "ThresholdedRelu"],
         alphas=[0.3, 0.5, 0.1], betas=[0.45, 0.2])
    case("lstm_relu", "LSTM", 3, 2, 3, 4, acts=["Sigmoid", "Relu", "Tanh"])


# ---- quantization references ------------------------------------------------------

def q_sat(v, dt):
    info = np.iinfo(dt)
    return np.clip(v, info.min, info.max).astype(dt)


def quantize(x, scale, zp, axis, dt):
    s, z = np.asarray(scale, np.float32), np.asarray(zp).astype(np.int64)
    if s.ndim == 1:
        shape = [1] * x.ndim
        shape[axis] = -1
        s, z = s.reshape(shape), z.reshape(shape)
    q = np.rint(x.astype(np.float32) / s)
    return q_sat(q + z, dt)


def conv_ref(x, w, xz, wz, strides, pads, dil, group):
    """Direct N-d integer convolution, zero points subtracted; pads [begins..., ends...]."""
    x = x.astype(np.int64) - np.int64(xz)
    w = w.astype(np.int64) - np.asarray(wz, np.int64).reshape((-1,) + (1,) * (w.ndim - 1))
    nsp = x.ndim - 2
    padw = [(0, 0), (0, 0)] + [(pads[i], pads[i + nsp]) for i in range(nsp)]
    xp = np.pad(x, padw)
    N, C = x.shape[:2]
    M = w.shape[0]
    ks = w.shape[2:]
    osz = [(xp.shape[2 + i] - dil[i] * (ks[i] - 1) - 1) // strides[i] + 1 for i in range(nsp)]
    y = np.zeros((N, M) + tuple(osz), np.int64)
    cg, mg = C // group, M // group
    for idx in np.ndindex(*osz):
        sl = tuple(slice(idx[i] * strides[i], idx[i] * strides[i] + dil[i] * (ks[i] - 1) + 1,
                         dil[i]) for i in range(nsp))
        for m in range(M):
            gi = m // mg
            patch = xp[(slice(None), slice(gi * cg, (gi + 1) * cg)) + sl]
            y[(slice(None), m) + idx] = np.sum(patch * w[m], axis=tuple(range(1, nsp + 2)))
    return y


def requant(acc, mult, zp, dt):
    v = np.rint(acc.astype(np.float32) * np.float32(mult))
    return q_sat(v + np.int64(zp), dt)


def quant_extra(h):
    rs = np.random.RandomState(11)
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 300, -300, 126.5, 127.5, -128.5, 3.49],
                 np.float32)
    h.add("quantize_ties_int8", "QuantizeLinear",
          [x, np.float32(1.0), np.int8(0)], {}, [quantize(x, 1.0, 0, 0, np.int8)], 0, 0)
    x2 = (rs.uniform(-4, 4, (3, 4))).astype(np.float32)
    h.add("quantize_default_uint8", "QuantizeLinear", [x2, np.float32(0.02)], {},
          [quantize(x2, 0.02, 0, 0, np.uint8)], 0, 0)
    xi = np.array([-1000, -7, -5, 0, 5, 7, 1000, 255], np.int32)
    h.add("quantize_int32_input", "QuantizeLinear", [xi, np.float32(2.0), np.uint8(100)], {},
          [quantize(xi, 2.0, 100, 0, np.uint8)], 0, 0)
    x3 = rs.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
    s3, z3 = np.array([0.1, 0.05, 0.2, 0.03], np.float32), np.array([0, -10, 5, 20], np.int8)
    h.add("quantize_axis_last", "QuantizeLinear", [x3, s3, z3], {"axis": -1},
          [quantize(x3, s3, z3, 2, np.int8)], 0, 0)
    q = rs.randint(-128, 128, (3, 2, 4)).astype(np.int8)
    sc, zq = np.array([0.5, 0.25, 2.0], np.float32), np.array([-3, 0, 7], np.int8)
    h.add("dequantize_axis0_int8", "DequantizeLinear", [q, sc, zq], {"axis": 0},
          [((q.astype(np.float32) - zq.reshape(3, 1, 1)) * sc.reshape(3, 1, 1))], 0, 0)
    qi = np.array([-70000, -1, 0, 3, 123456], np.int32)
    h.add("dequantize_int32", "DequantizeLinear", [qi, np.float32(0.125)], {},
          [(qi.astype(np.float32) * np.float32(0.125))], 0, 0)
    for nm, xd in (("dynamic_zeros", np.zeros((2, 3), np.float32)),
                   ("dynamic_random", rs.uniform(-2, 5, (4, 5)).astype(np.float32)),
                   ("dynamic_positive", rs.uniform(1, 3, (7,)).astype(np.float32))):
        mn, mx = min(0.0, float(xd.min())), max(0.0, float(xd.max()))
        scale = np.float32((np.float32(mx) - np.float32(mn)) / np.float32(255))
        if scale == 0:
            scale = np.float32(1.0)
        zp = np.uint8(np.clip(np.rint(np.float32(0) - np.float32(mn) / scale), 0, 255))
        y = quantize(xd, scale, zp, 0, np.uint8)
        h.add(nm, "DynamicQuantizeLinear", [xd], {}, [y, scale, zp], 0, 0)
    # MatMulInteger: mixed signedness, per-column B zero point, batched A
    A = rs.randint(-128, 128, (2, 3, 5)).astype(np.int8)
    Bm = rs.randint(0, 256, (5, 4)).astype(np.uint8)
    bz = np.array([0, 128, 3, 255], np.uint8)
    ref = np.matmul(A.astype(np.int32) - np.int32(-2), Bm.astype(np.int32) - bz.astype(np.int32))
    h.add("matmulinteger_batched_percol", "MatMulInteger", [A, Bm, np.int8(-2), bz], {},
          [ref.astype(np.int32)], 0, 0)
    A2 = rs.randint(0, 256, (4, 3)).astype(np.uint8)
    B2 = rs.randint(-128, 128, (2, 3, 6)).astype(np.int8)
    az = np.array([1, 2, 3, 4], np.uint8)
    ref2 = np.matmul(A2.astype(np.int32) - az.reshape(4, 1).astype(np.int32), B2.astype(np.int32))
    h.add("matmulinteger_perrow_bbatch", "MatMulInteger", [A2, B2, az], {},
          [ref2.astype(np.int32)], 0, 0)
    A3 = rs.randint(0, 256, (20, 33)).astype(np.uint8)
    B3 = rs.randint(0, 256, (33, 17)).astype(np.uint8)
    h.add("matmulinteger_nozp", "MatMulInteger", [A3, B3], {},
          [np.matmul(A3.astype(np.int32), B3.astype(np.int32))], 0, 0)
    # ConvInteger
    xc = rs.randint(0, 256, (2, 4, 7, 6)).astype(np.uint8)
    wc = rs.randint(-128, 128, (6, 2, 3, 2)).astype(np.int8)
    wz = rs.randint(-5, 5, (6,)).astype(np.int8)
    y = conv_ref(xc, wc, 7, wz, [2, 1], [1, 0, 2, 1], [1, 2], 2)
    h.add("convinteger_group_stride_dil", "ConvInteger", [xc, wc, np.uint8(7), wz],
          {"group": 2, "strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]},
          [y.astype(np.int32)], 0, 0)
    x1 = rs.randint(-128, 128, (1, 3, 10)).astype(np.int8)
    w1 = rs.randint(-128, 128, (2, 3, 3)).astype(np.int8)
    # SAME_UPPER with stride 2 on length 10: output 5, total pad 1 -> end
    y1 = conv_ref(x1, w1, 0, 0, [2], [0, 1], [1], 1)
    h.add("convinteger_1d_same_upper", "ConvInteger", [x1, w1],
          {"auto_pad": "SAME_UPPER", "strides": [2]}, [y1.astype(np.int32)], 0, 0)
    # QLinearMatMul int8, per-column b scale
    a = rs.randint(-128, 128, (3, 6)).astype(np.int8)
    b = rs.randint(-128, 128, (6, 5)).astype(np.int8)
    a_s, a_z = np.float32(0.02), np.int8(3)
    b_s = rs.uniform(0.005, 0.02, (5,)).astype(np.float32)
    b_z = np.zeros(5, np.int8)
    y_s, y_z = np.float32(0.05), np.int8(-4)
    acc = np.matmul(a.astype(np.int32) - a_z, b.astype(np.int32) - b_z)
    mult = (a_s * b_s / y_s).astype(np.float32)
    yq = q_sat(np.rint(acc.astype(np.float32) * mult) + y_z, np.int8)
    h.add("qlinearmatmul_int8_percol", "QLinearMatMul", [a, a_s, a_z, b, b_s, b_z, y_s, y_z],
          {}, [yq], 0, 0)
    # QLinearConv with bias and per-channel weight scales
    xq = rs.randint(0, 256, (1, 2, 5, 5)).astype(np.uint8)
    wq = rs.randint(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    x_s, x_z = np.float32(0.03), np.uint8(120)
    w_s = np.array([0.01, 0.02, 0.005], np.float32)
    w_z = np.zeros(3, np.int8)
    bias = np.array([100, -2000, 35], np.int32)
    o_s, o_z = np.float32(0.25), np.uint8(128)
    acc = conv_ref(xq, wq, x_z, w_z, [1, 1], [1, 1, 1, 1], [1, 1], 1) + bias.reshape(1, 3, 1, 1)
    mult = (x_s * w_s / o_s).astype(np.float32).reshape(1, 3, 1, 1)
    yq = q_sat(np.rint(acc.astype(np.float32) * mult) + np.int64(o_z), np.uint8)
    h.add("qlinearconv_bias_perchannel", "QLinearConv",
          [xq, x_s, x_z, wq, w_s, w_z, o_s, o_z, bias], {"pads": [1, 1, 1, 1]}, [yq], 0, 0)


# ---- spectral references --------------------------------------------------------

def to_c(z, dt=np.float32):
    return np.stack((z.real, z.imag), axis=-1).astype(dt)


def spectral_extra(h):
    rs = np.random.RandomState(5)
    for n in (8, 7, 16, 12):
        x = rs.uniform(-1, 1, (2, n, 3, 1)).astype(np.float32)
        y = np.fft.rfft(x[..., 0].astype(np.float64), axis=1)
        h.add("dft_onesided_real_%d" % n, "DFT", [x], {"onesided": 1}, [to_c(y)], 1e-4, 1e-5)
    x = rs.uniform(-1, 1, (2, 3, 6, 2)).astype(np.float32)
    z = x[..., 0].astype(np.float64) + 1j * x[..., 1]
    h.add("dft_inverse_complex_axis2", "DFT", [x], {"axis": 2, "inverse": 1},
          [to_c(np.fft.ifft(z, axis=2))], 1e-4, 1e-5)
    h.add("dft_complex_axis_neg2", "DFT", [x], {"axis": -2},
          [to_c(np.fft.fft(z, axis=2))], 1e-4, 1e-5)
    for L in (12, 4):
        h.add("dft_length_%d" % L, "DFT", [x, np.int64(L)], {"axis": 1},
              [to_c(np.fft.fft(z, n=L, axis=1))], 1e-4, 1e-5)
    xr = rs.uniform(-1, 1, (1, 32, 1)).astype(np.float32)
    h.add("dft_length_onesided_int32", "DFT", [xr, np.int32(20)], {"onesided": 1},
          [to_c(np.fft.rfft(xr[..., 0].astype(np.float64), n=20, axis=1))], 1e-4, 1e-5)
    xd = rs.uniform(-1, 1, (3, 64, 2))
    zd = xd[..., 0] + 1j * xd[..., 1]
    h.add("dft_double_64", "DFT", [xd], {}, [to_c(np.fft.fft(zd, axis=1), np.float64)],
          1e-9, 1e-10)
    # STFT: complex signal, window and frame_length, full spectrum
    sig = rs.uniform(-1, 1, (2, 40, 2)).astype(np.float32)
    zs = sig[..., 0].astype(np.float64) + 1j * sig[..., 1]
    win = np.hanning(10).astype(np.float32)
    step, n = 6, 10
    frames = (40 - n) // step + 1
    out = np.stack([np.fft.fft(zs[:, f * step:f * step + n] * win, axis=1)
                    for f in range(frames)], axis=1)
    h.add("stft_complex_window", "STFT", [sig, np.int64(step), win, np.int64(n)],
          {"onesided": 0}, [to_c(out)], 1e-4, 1e-5)
    sr = rs.uniform(-1, 1, (1, 50, 1)).astype(np.float32)
    out = np.stack([np.fft.rfft(sr[0, f * 5:f * 5 + 16, 0].astype(np.float64))
                    for f in range((50 - 16) // 5 + 1)], axis=0)[None]
    h.add("stft_int32_step", "STFT", [sr, np.int32(5), None, np.int32(16)], {}, [to_c(out)],
          1e-4, 1e-5)
    # windows
    for op, fn in (("HannWindow", lambda k, N: 0.5 - 0.5 * np.cos(2 * np.pi * k / N)),
                   ("HammingWindow",
                    lambda k, N: 25 / 46 - 21 / 46 * np.cos(2 * np.pi * k / N)),
                   ("BlackmanWindow", lambda k, N: 0.42 - 0.5 * np.cos(2 * np.pi * k / N) +
                    0.08 * np.cos(4 * np.pi * k / N))):
        k = np.arange(7)
        h.add("%s_double_7" % op.lower(), op, [np.int64(7)], {"output_datatype": 11},
              [fn(k, 7.0)], 1e-12, 1e-12)
        h.add("%s_symmetric_7" % op.lower(), op, [np.int32(7)], {"periodic": 0},
              [fn(k, 6.0).astype(np.float32)], 1e-5, 1e-6)
    # MelWeightMatrix, same algorithm as the onnx case
    def mel(nb, L, rate, lo, hi, dt):
        bins = np.arange(0, nb + 2)
        lm = 2595 * np.log10(1 + lo / 700)
        hm = 2595 * np.log10(1 + hi / 700)
        step = (hm - lm) / bins.shape[0]
        fb = 700 * (np.power(10, (bins * step + lm) / 2595) - 1)
        fb = (((L + 1) * fb) // rate).astype(int)
        out = np.zeros((L // 2 + 1, nb))
        for i in range(nb):
            l, c, r = fb[i], fb[i + 1], fb[i + 2]
            if c - l == 0:
                out[c, i] = 1
            else:
                for j in range(l, c + 1):
                    out[j, i] = (j - l) / (c - l)
            if r - c > 0:
                for j in range(c, r):
                    out[j, i] = (r - j) / (r - c)
        return out.astype(dt)
    h.add("melweightmatrix_double", "MelWeightMatrix",
          [np.int64(5), np.int64(64), np.int64(16000), np.float32(100), np.float32(6000)],
          {"output_datatype": 11}, [mel(5, 64, 16000, 100.0, 6000.0, np.float64)], 1e-9, 1e-12)


# ---- einsum references --------------------------------------------------------------

def einsum_extra(h):
    rs = np.random.RandomState(3)

    def f(*shape, dt=np.float32):
        return rs.uniform(-1, 1, shape).astype(dt)

    def case(name, eq, *ops, tol=(1e-5, 1e-5)):
        ref = np.einsum(eq, *[o.astype(np.float64) if o.dtype.kind == "f" else o for o in ops])
        ref = np.asarray(ref).astype(ops[0].dtype)
        h.add(name, "Einsum", list(ops), {"equation": eq}, [ref], tol[0], tol[1])

    case("einsum_matmul_gemm", "ij,jk->ik", f(20, 30), f(30, 17))
    case("einsum_matmul_transposed_out", "ij,jk->ki", f(13, 7), f(7, 19))
    case("einsum_batch_broadcast", "...ij,...jk->...ik", f(2, 1, 3, 4), f(5, 4, 2))
    case("einsum_contract_batch", "bij,bjk->bik", f(3, 4, 5), f(3, 5, 6))
    case("einsum_multi_k", "abcd,cdbe->ae", f(2, 3, 4, 5), f(4, 5, 3, 6))
    case("einsum_diag", "ii->i", f(5, 5))
    case("einsum_trace_implicit", "ii", f(6, 6))
    case("einsum_sum_all", "ij->", f(4, 7))
    case("einsum_outer", "i,j->ij", f(5), f(3))
    case("einsum_hadamard", "ij,ij->ij", f(3, 4), f(3, 4))
    case("einsum_implicit_sorted", "ba,ac", f(3, 4), f(4, 2))
    case("einsum_diag_transpose", "iij->ji", f(3, 3, 4))
    case("einsum_ellipsis_diag", "...ii->...i", f(2, 3, 4, 4))
    case("einsum_ellipsis_implicit", "...ij,...jk", f(2, 3, 4), f(2, 4, 5))
    case("einsum_spaces", " i j , j k -> i k ", f(3, 4), f(4, 2))
    case("einsum_three_operands", "abc,cd,de->abe", f(2, 3, 4), f(4, 5), f(5, 2))
    case("einsum_one_sided_sum", "ij,jk->i", f(3, 4), f(4, 5))
    case("einsum_repeated_across", "ij,ij->", f(3, 4), f(3, 4))
    case("einsum_uppercase", "Ab,bC->AC", f(2, 3), f(3, 4))
    case("einsum_double", "ij,jk->ik", f(4, 5, dt=np.float64), f(5, 3, dt=np.float64),
         tol=(1e-12, 1e-12))
    case("einsum_int32", "ij,jk->ik", rs.randint(-9, 9, (4, 5)).astype(np.int32),
         rs.randint(-9, 9, (5, 3)).astype(np.int32), tol=(0, 0))
    case("einsum_int64_diag_sum", "iij->j", rs.randint(-9, 9, (3, 3, 4)).astype(np.int64),
         tol=(0, 0))
    case("einsum_uint8_transpose", "ijk->kji", rs.randint(0, 200, (2, 3, 4)).astype(np.uint8),
         tol=(0, 0))
    case("einsum_f16", "ij,jk->ik", f(4, 5, dt=np.float16), f(5, 3, dt=np.float16),
         tol=(1e-2, 1e-2))
    case("einsum_big_gemm_batch", "bmk,bkn->bnm", f(3, 20, 30), f(3, 30, 24))
    case("einsum_gemm_broadcast_batch", "...ij,...jk->...ik", f(2, 1, 12, 20), f(3, 20, 17))
    case("einsum_gemm_multi_index", "abcd,cdbe->ea", f(6, 5, 4, 6), f(4, 6, 5, 20))
    # Read in place by the GEMM (no gather, no scatter): attention as maxvit
    # writes it (partial 12x16 tiles: 19 rows, 19 columns), a batch index one
    # operand broadcasts (stride 0), and an output that must be scattered
    # while A is read in place.
    case("einsum_attention_scores", "bghid,bghjd->bghij", f(1, 3, 2, 19, 11), f(1, 3, 2, 19, 11))
    case("einsum_attention_values", "bghij,bghjd->bghid", f(1, 3, 2, 19, 19), f(1, 3, 2, 19, 13))
    case("einsum_direct_broadcast_batch", "bhid,hjd->bhij", f(2, 3, 13, 8), f(3, 20, 8))
    case("einsum_direct_a_scattered_out", "bik,bkj->jbi", f(2, 17, 9), f(2, 9, 20))
    case("einsum_direct_size1_dims", "bxik,bkjy->bixjy", f(2, 1, 13, 7), f(2, 7, 19, 1))


def main():
    extras = {"rnn": rnn_extra, "quant": quant_extra, "spectral": spectral_extra,
              "einsum": einsum_extra}
    for fam, ops in FAMILIES.items():
        h = Header(fam)
        names = onnx_cases(h, set(ops))
        print("%s: %d onnx cases (%s)" % (fam, len(names), " ".join(names)))
        extras[fam](h)
        h.write("%s_fixtures.h" % fam)
        print("%s: %d cases in all" % (fam, len(h.cases)))


if __name__ == "__main__":
    main()
