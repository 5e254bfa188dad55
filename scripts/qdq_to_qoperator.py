#!/usr/bin/env python3
# Rewrites a QDQ ONNX model (as `cge quantize` writes it) into the QOperator
# form ONNX Runtime's quantizer writes with QuantFormat.QOperator: each
# DQ(x) -> Conv(DQ(w), [DQ(b)]) -> Q becomes one QLinearConv; with --contrib
# also DQ -> Add / Mul / GlobalAveragePool / AveragePool / Sigmoid /
# LeakyRelu / Concat / Gemm -> Q into ONNX Runtime's com.microsoft
# QLinearAdd, QLinearMul, ..., QLinearConcat, QGemm. Everything else stays
# QDQ. Used to measure cge on QOperator models (docs/quantization.md).
#   qdq_to_qoperator.py in.onnx out.onnx [--contrib]
import sys

import onnx
from onnx import helper


CONTRIB = {"Add": "QLinearAdd", "Mul": "QLinearMul", "GlobalAveragePool": "QLinearGlobalAveragePool",
           "AveragePool": "QLinearAveragePool", "Sigmoid": "QLinearSigmoid",
           "LeakyRelu": "QLinearLeakyRelu", "Concat": "QLinearConcat", "Gemm": "QGemm"}


def contrib_node(n, dqs, q):
    """The com.microsoft QOperator node for n (its inputs' DQs, its output's Q), or None."""
    op = CONTRIB.get(n.op_type)
    if op is None or any(d is None or len(d.input) < 3 for d in dqs):
        return None
    trip = [list(d.input[:3]) for d in dqs]
    if op == "QLinearConcat":
        ins = [q.input[1], q.input[2]] + [x for t in trip for x in t]
    elif op == "QGemm":
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if attrs.get("beta", 1.0) != 1.0 or attrs.get("transA", 0) or len(dqs) not in (2, 3):
            return None
        ins = trip[0] + trip[1] + ([dqs[2].input[0]] if len(dqs) == 3 else [""]) + \
            [q.input[1], q.input[2]]
    elif len(trip) == 2:
        ins = trip[0] + trip[1] + [q.input[1], q.input[2]]
    else:
        ins = trip[0] + [q.input[1], q.input[2]]
    node = helper.make_node(op, ins, [q.output[0]], name=n.name + "_qlinear",
                            domain="com.microsoft")
    node.attribute.extend(a for a in n.attribute if a.name != "beta")
    return node


def convert(m, contrib=False):
    g = m.graph
    inits = {t.name for t in g.initializer}
    prod = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)

    def dq_of(name):
        p = prod.get(name)
        return p if p is not None and p.op_type == "DequantizeLinear" else None

    drop, new = set(), {}
    for n in g.node:
        outs = readers.get(n.output[0], []) if n.output else []
        if contrib and n.op_type in CONTRIB and len(outs) == 1 and \
                outs[0].op_type == "QuantizeLinear" and len(outs[0].input) == 3:
            ql = contrib_node(n, [dq_of(i) for i in n.input], outs[0])
            if ql is not None:
                new[id(outs[0])] = ql
                drop.add(id(n))
            continue
        if n.op_type != "Conv":
            continue
        dx, dw = dq_of(n.input[0]), dq_of(n.input[1])
        db = dq_of(n.input[2]) if len(n.input) > 2 and n.input[2] else None
        outs = readers.get(n.output[0], [])
        if not dx or not dw or dw.input[0] not in inits or len(outs) != 1 or \
                outs[0].op_type != "QuantizeLinear" or len(dx.input) < 3 or len(dw.input) < 3:
            continue
        if len(n.input) > 2 and n.input[2] and (not db or db.input[0] not in inits):
            continue
        q = outs[0]
        ins = [dx.input[0], dx.input[1], dx.input[2], dw.input[0], dw.input[1], dw.input[2],
               q.input[1], q.input[2]] + ([db.input[0]] if db else [])
        ql = helper.make_node("QLinearConv", ins, [q.output[0]], name=n.name + "_qlinear")
        ql.attribute.extend(n.attribute)
        new[id(q)] = ql
        drop.add(id(n))
    nodes = []
    for n in g.node:
        if id(n) in drop:
            continue
        nodes.append(new.get(id(n), n))
    # drop what nothing reads any more (the weights' DQs)
    while True:
        used = {i for n in nodes for i in n.input} | {o.name for o in g.output}
        keep = [n for n in nodes if any(o in used for o in n.output)]
        if len(keep) == len(nodes):
            break
        nodes = keep
    used = {i for n in nodes for i in n.input}
    kept_inits = [t for t in g.initializer if t.name in used]
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(kept_inits)
    return len(drop)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--contrib"]
    contrib = len(args) < len(sys.argv) - 1
    m = onnx.load(args[0])
    k = convert(m, contrib)
    if contrib:
        if not any(o.domain == "com.microsoft" for o in m.opset_import):
            m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    else:
        onnx.checker.check_model(m)  # it does not know com.microsoft's operators
    onnx.save(m, args[1])
    print("%s -> %s: %d QOperator nodes" % (args[0], args[1], k))
