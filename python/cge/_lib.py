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
    _fields_ = [("name", c_char_p), ("dtype", c_enum), ("shape", Shape), ("format", c_enum),
                ("type", c_enum)]


# cge_value_type (types.h): what a value holds.
TYPE_TENSOR, TYPE_SEQUENCE, TYPE_OPTIONAL, TYPE_OPTIONAL_SEQUENCE = 0, 1, 2, 3


class DimBuckets(ctypes.Structure):
    # Mirrors cge_dim_buckets (session.h).
    _fields_ = [("dim", c_char_p), ("sizes", ctypes.POINTER(ctypes.c_int64)),
                ("num_sizes", c_int32)]


class SessionOptions(ctypes.Structure):
    # Mirrors cge_session_options; opt_level 0 is CGE_OPT_DEFAULT.
    _fields_ = [("device", c_void_p), ("num_threads", ctypes.c_int), ("run_mode", c_enum),
                ("capture_limit", ctypes.c_int), ("opt_level", c_enum),
                ("num_streams", ctypes.c_int), ("buckets", ctypes.POINTER(DimBuckets)),
                ("num_buckets", c_int32), ("disable_shape_program", ctypes.c_bool),
                ("precision", c_enum),
                # distribution (cge/dist.h): source, MPI_Comm*, world size, rank,
                # timeout, tensor-parallel degree, pipeline stages
                ("dist", c_enum), ("dist_mpi_comm", c_void_p), ("dist_world_size", ctypes.c_int),
                ("dist_rank", ctypes.c_int), ("dist_timeout_ms", ctypes.c_int),
                ("dist_tp", ctypes.c_int), ("dist_pp", ctypes.c_int),
                ("dist_micro_batches", ctypes.c_int),
                # > 0: the concat-form KV cache rewritten to the static form
                ("kv_cache_max_len", c_int64)]


class ProfileEvent(ctypes.Structure):
    # Mirrors cge_profile_event (session.h).
    _fields_ = [("kind", c_enum), ("step", c_int32), ("name", c_char_p), ("op_type", c_char_p),
                ("domain", c_char_p), ("engine", c_char_p), ("stream", c_int32),
                ("launch_begin_ms", ctypes.c_double), ("launch_end_ms", ctypes.c_double),
                ("end_ms", ctypes.c_double), ("bytes", c_size_t)]


PROFILE_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(ProfileEvent), c_void_p)


class RunOptions(ctypes.Structure):
    # Mirrors cge_run_options (session.h).
    _fields_ = [("mode", c_enum), ("stream", c_void_p), ("profile", PROFILE_FN),
                ("profile_user", c_void_p), ("bind_buffers", ctypes.c_bool),
                ("cancel", c_void_p)]


class GraphStats(ctypes.Structure):
    # Mirrors cge_session_graph_stats (session.h).
    _fields_ = [("compiles", ctypes.c_int64), ("specializations", ctypes.c_int64),
                ("arena_grows", ctypes.c_int64), ("shape_program", ctypes.c_bool),
                ("weight_bytes", c_size_t), ("packed_bytes", c_size_t),
                ("released_bytes", c_size_t), ("arena_bytes", c_size_t),
                # the shape program's (new signatures in place)
                ("respecializations", ctypes.c_int64), ("kernel_prepares", ctypes.c_int64),
                ("arena_replans", ctypes.c_int64), ("specialize_ms", ctypes.c_double),
                ("bind_ms", ctypes.c_double),
                # node-by-node runs of value-dependent graphs
                ("eager_prepares", ctypes.c_int64), ("eager_allocs", ctypes.c_int64),
                # delta rebinds at new lengths, and the shape program's work
                ("delta_rebinds", ctypes.c_int64), ("steps_rebound", ctypes.c_int64),
                ("shape_metas", ctypes.c_int64), ("shape_allocations", ctypes.c_int64)]


class CompileOptions(ctypes.Structure):
    # Mirrors cge_compile_options (compiler.h); zeroed means cge's defaults.
    _fields_ = [("opt_level", c_enum), ("disable", c_char_p), ("enable", c_char_p),
                ("dump_dir", c_char_p), ("verify_each_pass", ctypes.c_bool),
                ("collect_stats", ctypes.c_bool), ("num_streams", c_int32),
                ("fold_limit_bytes", c_size_t), ("training", ctypes.c_bool),
                ("engines", c_void_p), ("num_engines", c_int32), ("device", c_void_p),
                ("allow_incomplete", ctypes.c_bool), ("symbolic_plan", ctypes.c_bool),
                ("precision", c_enum), ("kv_cache_max_len", c_int64)]


class ModelSaveOptions(ctypes.Structure):
    # Mirrors cge_model_save_options (model_file.h).
    _fields_ = [("op_libraries", ctypes.POINTER(c_char_p)), ("num_op_libraries", c_int32),
                ("opt_level", c_enum), ("pack_weights", ctypes.c_bool)]


class ModelLoadOptions(ctypes.Structure):
    # Mirrors cge_model_load_options (model_file.h): weights_check 0 default
    # (check unless $CGE_VERIFY_WEIGHTS=0), 1 always check, 2 trust.
    _fields_ = [("weights_check", c_enum), ("cpu_features", ctypes.c_uint64)]


class OnnxInputShape(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("shape", Shape)]


class OnnxDimValue(ctypes.Structure):
    _fields_ = [("dim_param", c_char_p), ("value", c_int64)]


class OnnxOptions(ctypes.Structure):
    _fields_ = [("input_shapes", ctypes.POINTER(OnnxInputShape)), ("num_input_shapes", c_int32),
                ("dim_values", ctypes.POINTER(OnnxDimValue)), ("num_dim_values", c_int32)]


def _candidates():
    """Where libcge.so is looked for: $CGE_LIBRARY alone when set; else the
    source tree's build/libcge.so when this package runs from the tree
    (python/cge); else the system's (ldconfig's libcge, then the dynamic
    loader's search path: libcge.so.0, libcge.so)."""
    env = os.environ.get("CGE_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", ".."))
    if os.path.isfile(os.path.join(tree, "include", "cge", "cge.h")):
        yield os.path.join(tree, "build", "libcge.so")
    found = ctypes.util.find_library("cge")
    if found:
        yield found
    yield "libcge.so.0"
    yield "libcge.so"


def _check_major(found, path):
    """A libcge of another major version has another ABI: refuse it at
    import rather than misread its structures later."""
    from cge._version import __version__
    want = int(__version__.split(".")[0])
    if not hasattr(found, "cge_version_major"):
        return  # a library from before versioning: nothing to compare
    fn = found.cge_version_major
    fn.restype, fn.argtypes = ctypes.c_int, []
    have = fn()
    if have != want:
        raise ImportError("cge: %s is libcge major version %d; this package (%s) needs major "
                          "version %d" % (path, have, __version__, want))


# libgomp's spin count after a parallel region, unless the user sets one.
OPENMP_SPINCOUNT = "30000"


def _load():
    # libgomp (oneDNN's OpenMP, a dependency of libcge) reads its wait policy
    # once, when it loads; unset, its workers spin after every oneDNN call on
    # the cores cge's next kernels need (issue 14, docs/runtime.md). So unless
    # the user chose one, GOMP_SPINCOUNT=30000 (a short spin, as the cge tool
    # sets it) is set while libcge loads and taken away after: libgomp keeps
    # it, the process's environment and its children do not. No effect when
    # this libgomp was loaded before.
    ours = "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ
    if ours:
        os.environ["GOMP_SPINCOUNT"] = OPENMP_SPINCOUNT
    try:
        return _load_lib()
    finally:
        if ours:
            os.environ.pop("GOMP_SPINCOUNT", None)


def _load_lib():
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.path.sep in path and not os.path.exists(path):
            continue
        try:
            found = ctypes.CDLL(path)
        except OSError as e:  # pragma: no cover - reported below
            tried[-1] = "%s (%s)" % (path, e)
            continue
        _check_major(found, path)
        return found, path
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
    "cge_session_last_run_mode": (c_enum, [c_void_p, ctypes.c_uint32, _P(c_enum)]),
    "cge_session_arena_bytes": (c_enum, [c_void_p, ctypes.c_uint32, _P(c_size_t)]),
    "cge_session_get_graph_stats": (c_enum, [c_void_p, ctypes.c_uint32, _P(GraphStats)]),
    "cge_session_run_graph": (c_enum, [c_void_p, ctypes.c_uint32, _P(Tensor), c_int32,
                                       _P(Tensor), c_int32]),
    "cge_session_run": (c_enum, [c_void_p, ctypes.c_uint32, _P(Tensor), c_int32,
                                 _P(Tensor), c_int32, _P(RunOptions)]),
    "cge_profile_clock_ms": (ctypes.c_double, []),
    "cge_sequence_create": (c_enum, [c_enum, c_enum, _P(c_void_p)]),
    "cge_sequence_destroy": (None, [c_void_p]),
    "cge_sequence_type": (c_enum, [c_void_p]),
    "cge_sequence_dtype": (c_enum, [c_void_p]),
    "cge_sequence_length": (c_int64, [c_void_p]),
    "cge_sequence_has_value": (ctypes.c_bool, [c_void_p]),
    "cge_sequence_set_none": (c_enum, [c_void_p]),
    "cge_sequence_append": (c_enum, [c_void_p, _P(Shape), c_void_p]),
    "cge_sequence_at": (c_enum, [c_void_p, c_int64, _P(Tensor)]),
    "cge_precision_from_name": (ctypes.c_int, [c_char_p]),
    "cge_precision_bf16_available": (ctypes.c_bool, []),
    "cge_compile": (c_enum, [c_void_p, c_void_p, c_int32, _P(CompileOptions), _P(c_void_p)]),
    "cge_plan_destroy": (None, [c_void_p]),
    "cge_model_save": (c_enum, [c_void_p, c_char_p, _P(ModelSaveOptions)]),
    "cge_model_plan": (c_void_p, [c_void_p]),
    "cge_cancel_create": (c_enum, [_P(c_void_p)]),
    "cge_cancel_request": (None, [c_void_p]),
    "cge_cancel_set_timeout": (None, [c_void_p, ctypes.c_double]),
    "cge_cancel_reset": (None, [c_void_p]),
    "cge_cancel_scope": (c_void_p, [c_void_p]),
    "cge_cancel_watch_sigint": (c_enum, [c_void_p]),
    "cge_cancel_unwatch_sigint": (None, []),
}
for _name, (_res, _args) in _protos.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


def version():
    """The C library's version string, or None when it has no cge_version()."""
    if not hasattr(lib, "cge_version"):
        return None
    fn = lib.cge_version
    fn.restype, fn.argtypes = c_char_p, []
    v = fn()
    return v.decode() if v else None
