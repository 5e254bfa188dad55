# cge.torch: the PyTorch front end. A converter registry (aten op -> cge
# operators), compile() with guards, recompilation and graph breaks,
# explain(), the example custom operator, and a torch.compile backend where
# PyTorch has torch.compile (>= 2).
"""Compile PyTorch modules with cge::

    import cge.torch
    fast = cge.torch.compile(model.eval(), (x,), fullgraph=True)
    y = fast(x)
    print(cge.torch.explain(model, (x,)))

Converters map FX nodes onto cge operators, naming inputs and attributes by
the operator's schema::

    @cge.torch.register_converter(torch.ops.aten.add.Tensor, override=True)
    def add(ctx, node, a, b, alpha=1):
        return ctx.op("Add", A=a, B=b)
"""
from ._registry import (ConversionContext, Missing, cge_dtype, converters, find_converter,
                        register_converter, torch_dtype)
from . import aten  # noqa: F401  (registers the aten converters)
from . import aten_select  # noqa: F401  (selection ops with data-dependent sizes)
from ._compile import CompiledModule, Explanation, capture, compile, explain
from . import custom_op
from ._backend import backend, register_backend

register_backend()

__all__ = ["register_converter", "compile", "explain", "ConversionContext", "CompiledModule",
           "Explanation", "capture", "converters", "find_converter", "cge_dtype", "torch_dtype",
           "Missing", "custom_op", "backend"]
