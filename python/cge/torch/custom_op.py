# The example custom operator on the PyTorch side: cge_example::add_custom,
# defined with torch.library (schema, a CPU implementation, a Meta
# implementation enforcing the kernel's float32 [8,2048] limit) and converted
# onto AddCustom (domain "custom") from examples/custom_op/libadd_custom.so.
"""``op = cge.torch.custom_op.register()`` loads libadd_custom.so into cge,
defines ``torch.ops.cge_example.add_custom`` and its converter; then a model
calling ``op(x, y)`` compiles with ``cge.torch.compile(..., fullgraph=True)``."""
import os
import threading

import torch

from .. import _lib
from .. import builder as _b
from ._registry import register_converter

NAMESPACE = "cge_example"
SHAPE = (8, 2048)
_state = {}
_lock = threading.Lock()


def library_path():
    """libadd_custom.so: $CGE_ADD_CUSTOM_LIBRARY, else beside libcge.so."""
    env = os.environ.get("CGE_ADD_CUSTOM_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(_lib.path)), "libadd_custom.so")


def _check(x, y):
    for name, t in (("x", x), ("y", y)):
        if t.dtype != torch.float32 or tuple(t.shape) != SHAPE:
            raise RuntimeError("cge_example::add_custom: %s is %s%s; this kernel supports only "
                               "float32 [8, 2048]" % (name, t.dtype, list(t.shape)))


def _cpu(x, y):
    _check(x, y)
    return x + y


def _meta(x, y):
    _check(x, y)
    return torch.empty_like(x)


def define():
    """Define torch.ops.cge_example.add_custom (once); returns it."""
    with _lock:
        if "lib" not in _state:
            lib = torch.library.Library(NAMESPACE, "DEF")
            lib.define("add_custom(Tensor x, Tensor y) -> Tensor")
            lib.impl("add_custom", _cpu, "CPU")
            lib.impl("add_custom", _meta, "Meta")
            # PyTorch 1.13 has no autograd fallthrough for Meta on custom ops.
            if int(torch.__version__.split(".")[0]) < 2:
                lib.impl("add_custom", _meta, "AutogradMeta")
            _state["lib"] = lib  # the registrations live as long as this object
    return torch.ops.cge_example.add_custom


def _convert(ctx, node, x, y):
    return ctx.op("AddCustom", domain="custom", x=x, y=y)


def register(path=None):
    """Load the cge library, define the PyTorch op, register the converter.
    Returns the PyTorch op (call it, or ``.default``)."""
    _b.load_op_library(path or library_path())
    op = define()
    register_converter(op.default, override=True)(_convert)
    return op
