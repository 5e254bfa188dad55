#!/usr/bin/env python3
# Rewrites a QDQ ONNX model (as `cge quantize` writes it) into the QOperator
# form ONNX Runtime's quantizer writes with QuantFormat.QOperator: each
# DQ(x) -> Conv(DQ(w), [DQ(b)]) -> Q becomes one QLinearConv. Everything else
# stays QDQ. Used to measure cge on QOperator models (docs/quantization.md).
#   qdq_to_qoperator.py in.onnx out.onnx
import sys

import onnx
from onnx import helper


def convert(m):
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
    m = onnx.load(sys.argv[1])
    k = convert(m)
    onnx.checker.check_model(m)
    onnx.save(m, sys.argv[2])
    print("%s -> %s: %d QLinearConv" % (sys.argv[1], sys.argv[2], k))
