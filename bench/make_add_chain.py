"""Writes the Add-chain model of the dispatch benchmark as ONNX (opset 13):
y = x + b + b + ... (N Add nodes), b a constant initializer of x's shape.
Usage: make_add_chain.py OUT.onnx NODES ROWS COLS"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out, nodes, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    b = (np.arange(rows * cols) % 3).astype(np.float32).reshape(rows, cols) * np.float32(0.001)
    graph_nodes, prev = [], "x"
    for i in range(nodes):
        name = "y" if i == nodes - 1 else f"t{i}"
        graph_nodes.append(helper.make_node("Add", [prev, "b"], [name], name=f"add{i}"))
        prev = name
    graph = helper.make_graph(
        graph_nodes, "add_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])],
        [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out)


if __name__ == "__main__":
    main()
