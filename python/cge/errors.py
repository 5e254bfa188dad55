# One exception class per cge layer, all under cge.Error: a failed call raises
# the class of the layer its message names ("[meta] ..." -> MetaError).
"""cge's exceptions. ``cge.Error`` is the base; ``e.layer`` and ``e.status``
name the layer and status code, ``str(e)`` is the layered message."""
from ._session import Error, _LAYER_ERRORS


class SchemaError(Error):
    """[schema]: unknown or duplicate operator, wrong arity or attributes."""


class MetaError(Error):
    """[meta]: shapes or dtypes an operator (or its kernel) cannot take."""


class ConverterError(Error):
    """[converter]: a front-end node with no mapping onto cge operators."""


class EngineError(Error):
    """[engine]: no engine has a kernel for a node's dtype."""


class KernelError(Error):
    """[kernel]: a kernel failed at run time."""


class CgeRuntimeError(Error):
    """[runtime]: device, memory, streams, events (``cge.RuntimeError``)."""


class CgeIOError(Error):
    """[io]: unreadable or malformed files and data (``cge.IOError``)."""


class GraphError(Error):
    """[graph]: graph construction and verification, builders."""


class SessionError(Error):
    """[session]: graph ids, run inputs and outputs."""


_LAYER_ERRORS.update({
    "schema": SchemaError, "meta": MetaError, "converter": ConverterError,
    "engine": EngineError, "kernel": KernelError, "runtime": CgeRuntimeError,
    "io": CgeIOError, "graph": GraphError, "session": SessionError,
})


def make(message, layer="", status=""):
    """The exception for a message of `layer` (cge.Error if the layer is unknown)."""
    return _LAYER_ERRORS.get(layer, Error)(message, layer, status)
