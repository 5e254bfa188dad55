# cge's Python entry point: InferenceSession over the ONNX importer and the
# session API (ctypes over libcge.so), shaped like ONNX Runtime's Python API.
"""cge: a graph engine. ``cge.InferenceSession(path_or_bytes).run(None, feeds)``;
``cge.GraphBuilder`` and ``cge.Session`` build and run graphs directly;
``cge.load_op_library`` brings custom operators; ``cge.torch`` compiles
PyTorch modules. ONNX Runtime's Python API is followed where it applies
(``import cge as ort``: SessionOptions, RunOptions, io_binding, ...;
docs/python.md). Errors are ``cge.Error`` subclasses, one per layer."""
from ._session import (Error, InferenceSession, NodeArg, dtype_to_numpy, numpy_to_dtype,
                       precision_bf16_available)
from . import _lib
from .errors import (CgeIOError, CgeRuntimeError, ConverterError, EngineError, GraphError,
                     KernelError, MetaError, SchemaError, SessionError)
from .builder import Graph, GraphBuilder, Session, Value, load_op_library, schema
from . import builder
from ._ort import (ExecutionMode, ExecutionOrder, GraphOptimizationLevel, IOBinding,
                   ModelMetadata, OrtValue, RunOptions, SessionOptions, get_all_providers,
                   get_available_providers, get_device, set_default_logger_severity, set_seed)
from ._version import __version__
from ._quantize import quantize

# Layer names as the issue spells them; attributes of the package, so they do
# not replace Python's builtins for code that does `from cge import *`.
RuntimeError = CgeRuntimeError
IOError = CgeIOError

library_path = _lib.path

__all__ = ["Error", "InferenceSession", "NodeArg", "dtype_to_numpy", "numpy_to_dtype",
           "library_path", "__version__", "SchemaError", "MetaError", "ConverterError",
           "EngineError", "KernelError", "CgeRuntimeError", "CgeIOError", "GraphError",
           "SessionError", "GraphBuilder", "Graph", "Value", "Session", "load_op_library",
           "schema", "SessionOptions", "RunOptions", "GraphOptimizationLevel", "ExecutionMode",
           "ExecutionOrder", "ModelMetadata", "OrtValue", "IOBinding", "get_available_providers",
           "get_all_providers", "get_device", "set_default_logger_severity", "set_seed",
           "library_version", "quantize"]


def library_version():
    """libcge's version string (cge_version()), or None for a library without it."""
    return _lib.version()
