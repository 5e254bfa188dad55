# ctypes bindings over libcge.so: the C structs the Python API passes across
# (mirrors of include/cge/types.h, graph.h, session.h, onnx.h) and the
# prototypes of the functions it calls. Layouts are checked by a test.
import ctypes
import ctypes.util
import os

MAX_RANK = 8
DIM_DYNAMIC = -1

c_int32, c_int64, c_size_t = ctypes.c_int32, ctypes.c_int64, ctypes.c_size_t
c_char_p, c_void_p = ctypes.c_char_p, ctypes.c_void_p
c_enum = ctypes.c_int  # C enums are ints on every ABI cge builds for


class Shape(ctypes.Structure):
    _fields_ = [("rank", c_int32), ("dims", c_int64 * MAX_RANK)]


class Tensor(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_enum), ("shape", Shape),
                ("data", c_void_p), ("bytes", c_size_t)]


class TensorDesc(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_enum), ("shape", Shape), ("format", c_enum)]


class SessionOptions(ctypes.Structure):
    # Mirrors cge_session_options; opt_level 0 is CGE_OPT_DEFAULT.
    _fields_ = [("device", c_void_p), ("num_threads", ctypes.c_int), ("run_mode", c_enum),
                ("capture_limit", ctypes.c_int), ("opt_level", c_enum),
                ("num_streams", ctypes.c_int)]


class OnnxInputShape(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("shape", Shape)]


class OnnxDimValue(ctypes.Structure):
    _fields_ = [("dim_param", c_char_p), ("value", c_int64)]


class OnnxOptions(ctypes.Structure):
    _fields_ = [("input_shapes", ctypes.POINTER(OnnxInputShape)), ("num_input_shapes", c_int32),
                ("dim_values", ctypes.POINTER(OnnxDimValue)), ("num_dim_values", c_int32)]


def _candidates():
    env = os.environ.get("CGE_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.normpath(os.path.join(here, "..", "..", "build", "libcge.so"))
    found = ctypes.util.find_library("cge")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.path.sep in path and not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:  # pragma: no cover - reported below
            tried[-1] = "%s (%s)" % (path, e)
    raise ImportError("cge: cannot find libcge.so (tried: %s); build it with `make` or set "
                      "$CGE_LIBRARY" % (", ".join(tried) or "nothing"))


lib, path = _load()

_P = ctypes.POINTER
_protos = {
    "cge_last_error": (c_char_p, []),
    "cge_last_error_layer": (c_enum, []),
    "cge_last_error_status": (c_enum, []),
    "cge_clear_error": (None, []),
    "cge_status_name": (c_char_p, [c_enum]),
    "cge_layer_name": (c_char_p, [c_enum]),
    "cge_dtype_name": (c_char_p, [c_enum]),
    "cge_onnx_import_file": (c_enum, [c_char_p, _P(OnnxOptions), _P(c_void_p)]),
    "cge_onnx_import_buffer": (c_enum, [c_void_p, c_size_t, c_char_p, _P(OnnxOptions),
                                        _P(c_void_p)]),
    "cge_graph_destroy": (None, [c_void_p]),
    "cge_session_create": (c_enum, [_P(SessionOptions), _P(c_void_p)]),
    "cge_session_destroy": (None, [c_void_p]),
    "cge_session_add_graph": (c_enum, [c_void_p, ctypes.c_uint32, c_void_p]),
    "cge_session_compile_graph": (c_enum, [c_void_p, ctypes.c_uint32]),
    "cge_session_num_io": (c_enum, [c_void_p, ctypes.c_uint32, _P(c_int32), _P(c_int32)]),
    "cge_session_input_desc": (c_enum, [c_void_p, ctypes.c_uint32, c_int32, _P(TensorDesc)]),
    "cge_session_output_desc": (c_enum, [c_void_p, ctypes.c_uint32, c_int32, _P(TensorDesc)]),
    "cge_session_last_output_desc": (c_enum, [c_void_p, ctypes.c_uint32, c_int32,
                                              _P(TensorDesc)]),
    "cge_session_dim_symbol_name": (c_char_p, [c_void_p, ctypes.c_uint32, ctypes.c_int64]),
    "cge_session_run_graph": (c_enum, [c_void_p, ctypes.c_uint32, _P(Tensor), c_int32,
                                       _P(Tensor), c_int32]),
}
for _name, (_res, _args) in _protos.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args
