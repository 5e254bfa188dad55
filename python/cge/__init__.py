# cge's Python entry point: InferenceSession over the ONNX importer and the
# session API (ctypes over libcge.so), shaped like ONNX Runtime's Python API.
"""cge: a graph engine. ``cge.InferenceSession(path_or_bytes).run(None, feeds)``."""
from ._session import Error, InferenceSession, NodeArg, dtype_to_numpy, numpy_to_dtype
from . import _lib

__version__ = "0.1.0"
library_path = _lib.path

__all__ = ["Error", "InferenceSession", "NodeArg", "dtype_to_numpy", "numpy_to_dtype",
           "library_path", "__version__"]
