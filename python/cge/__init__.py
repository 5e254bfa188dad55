# cge's Python entry point: InferenceSession over the ONNX importer and the
# session API (ctypes over libcge.so), shaped like ONNX Runtime's Python API.
"""cge: a graph engine. ``cge.InferenceSession(path_or_bytes).run(None, feeds)``;
``cge.GraphBuilder`` and ``cge.Session`` build and run graphs directly;
``cge.load_op_library`` brings custom operators; ``cge.torch`` compiles
PyTorch modules. Errors are ``cge.Error`` subclasses, one per layer."""
from ._session import Error, InferenceSession, NodeArg, dtype_to_numpy, numpy_to_dtype
from . import _lib
from .errors import (CgeIOError, CgeRuntimeError, ConverterError, EngineError, GraphError,
                     KernelError, MetaError, SchemaError, SessionError)
from .builder import Graph, GraphBuilder, Session, Value, load_op_library, schema
from . import builder

# Layer names as the issue spells them; attributes of the package, so they do
# not replace Python's builtins for code that does `from cge import *`.
RuntimeError = CgeRuntimeError
IOError = CgeIOError

__version__ = "0.1.0"
library_path = _lib.path

__all__ = ["Error", "InferenceSession", "NodeArg", "dtype_to_numpy", "numpy_to_dtype",
           "library_path", "__version__", "SchemaError", "MetaError", "ConverterError",
           "EngineError", "KernelError", "CgeRuntimeError", "CgeIOError", "GraphError",
           "SessionError", "GraphBuilder", "Graph", "Value", "Session", "load_op_library",
           "schema"]
