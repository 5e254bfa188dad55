# Block quantization in ONNX Runtime's com.microsoft MatMulNBits layout, in
# numpy: the packer the tests and bench/lowprec.py write models with, and the
# reference dequantization they check cge's kernel against.
import numpy as np


def quantize(w, bits=4, block_size=32, zero_points=True, zp_float=False):
    """w: float32 [K, N] (MatMul's B). Returns (B uint8 [N, n_blocks, blob],
    scales float32 [N * n_blocks], zero_points or None) as MatMulNBits takes
    them: codes packed low bits first along K, the last block padded with
    zero codes; 4-bit zero points packed two per byte per column."""
    K, N = w.shape
    nb = (K + block_size - 1) // block_size
    kp = nb * block_size
    wt = np.zeros((N, kp), np.float32)
    wt[:, :K] = w.T
    blocks = wt.reshape(N, nb, block_size)
    # Padding stays out of the ranges: it must not widen a block's scale.
    real = np.arange(kp).reshape(nb, block_size) < K
    lo = np.where(real, blocks, np.inf).min(axis=2)
    hi = np.where(real, blocks, -np.inf).max(axis=2)
    qmax = (1 << bits) - 1
    if zero_points:
        lo, hi = np.minimum(lo, 0), np.maximum(hi, 0)
        scale = (hi - lo) / qmax
        scale[scale == 0] = 1.0
        zp = np.clip(np.round(-lo / scale), 0, qmax)
    else:
        amax = np.maximum(np.abs(lo), np.abs(hi))
        scale = amax / (1 << (bits - 1))
        scale[scale == 0] = 1.0
        zp = np.full_like(scale, 1 << (bits - 1))
    q = np.clip(np.round(blocks / scale[:, :, None]) + zp[:, :, None], 0, qmax).astype(np.uint8)
    q[:, ~real] = 0
    if bits == 4:
        packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    else:
        packed = q
    zps = None
    if zero_points:
        if zp_float:
            zps = zp.astype(np.float32).reshape(-1)
        elif bits == 8:
            zps = zp.astype(np.uint8).reshape(-1)
        else:
            zpad = np.zeros((N, nb + (nb & 1)), np.uint8)
            zpad[:, :nb] = zp
            zps = (zpad[:, 0::2] | (zpad[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
    return packed, scale.astype(np.float32).reshape(-1), zps


def dequantize(packed, scales, zps, K, bits=4, block_size=32):
    """The reference: float32 [K, N] from MatMulNBits' inputs."""
    N, nb, _ = packed.shape
    if bits == 4:
        q = np.zeros((N, nb, block_size), np.float32)
        q[:, :, 0::2] = packed & 15
        q[:, :, 1::2] = packed >> 4
    else:
        q = packed.astype(np.float32)
    if zps is None:
        zp = np.full((N, nb), 1 << (bits - 1), np.float32)
    elif zps.dtype == np.float32:
        zp = zps.reshape(N, nb)
    elif bits == 8:
        zp = zps.reshape(N, nb).astype(np.float32)
    else:
        zb = zps.reshape(N, -1)
        zp = np.zeros((N, zb.shape[1] * 2), np.float32)
        zp[:, 0::2] = zb & 15
        zp[:, 1::2] = zb >> 4
        zp = zp[:, :nb]
    w = (q - zp[:, :, None]) * scales.reshape(N, nb)[:, :, None]
    return w.reshape(N, nb * block_size)[:, :K].T.copy()


def node(helper, numpy_helper, a, w, y, name, bits=4, block_size=32, zero_points=True,
         zp_float=False, bias=None):
    """A MatMulNBits node computing y = a @ w (+ bias) with w quantized, and its
    initializers."""
    K, N = w.shape
    packed, scales, zps = quantize(w, bits, block_size, zero_points, zp_float)
    inits = [numpy_helper.from_array(packed, name + "_B"),
             numpy_helper.from_array(scales, name + "_scales")]
    ins = [a, name + "_B", name + "_scales"]
    if zps is not None:
        inits.append(numpy_helper.from_array(zps, name + "_zp"))
        ins.append(name + "_zp")
    if bias is not None:
        while len(ins) < 5:
            ins.append("")
        inits.append(numpy_helper.from_array(bias.astype(np.float32), name + "_bias"))
        ins.append(name + "_bias")
    n = helper.make_node("MatMulNBits", ins, [y], name=name, domain="com.microsoft", K=K, N=N,
                         bits=bits, block_size=block_size, accuracy_level=0)
    return n, inits


def to_matmul_nbits(model, bits=4, block_size=32):
    """Rewrite every MatMul of `model` (an onnx ModelProto, changed in place)
    whose B is a 2-D float32 initializer into a MatMulNBits with B quantized
    (the form ONNX Runtime's weight-only quantizer writes). Returns the number
    of products rewritten."""
    from onnx import helper, numpy_helper
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    uses = {}
    for n in g.node:
        for x in n.input:
            uses[x] = uses.get(x, 0) + 1
    nodes, done, dropped = [], 0, set()
    for k, n in enumerate(g.node):
        t = inits.get(n.input[1]) if n.op_type == "MatMul" and len(n.input) == 2 else None
        if t is None or len(t.dims) != 2 or t.data_type != 1:
            nodes.append(n)
            continue
        w = numpy_helper.to_array(t).astype(np.float32)
        q, new_inits = node(helper, numpy_helper, n.input[0], w, n.output[0],
                            (n.name or "matmul") + "_q%d" % k, bits, block_size)
        nodes.append(q)
        g.initializer.extend(new_inits)
        uses[t.name] -= 1
        if uses[t.name] == 0:
            dropped.add(t.name)
        done += 1
    del g.node[:]
    g.node.extend(nodes)
    keep = [i for i in g.initializer if i.name not in dropped]
    del g.initializer[:]
    g.initializer.extend(keep)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return done


def weight_bytes(model):
    """Bytes of weights the matrix products read per run: float32 B of
    MatMul/Gemm initializers, MatMulNBits' codes, scales and zero points, or
    those of the DequantizeLinear a MatMul's B comes from (uint4/int4 at half
    a byte each)."""
    inits = {i.name: i for i in model.graph.initializer}
    dq = {n.output[0]: n for n in model.graph.node if n.op_type == "DequantizeLinear"}
    total = 0
    for n in model.graph.node:
        names = n.input[1:2] if n.op_type in ("MatMul", "Gemm") else \
            n.input[1:4] if n.op_type == "MatMulNBits" else []
        if n.op_type == "MatMul" and n.input[1] in dq:
            names = dq[n.input[1]].input[:3]
        for x in names:
            if x in inits:
                t = inits[x]
                size = {1: 4, 2: 1, 3: 1, 10: 2, 16: 2, 21: 0.5, 22: 0.5}.get(t.data_type, 4)
                total += int(np.ceil(int(np.prod(t.dims)) * size))
    return total
