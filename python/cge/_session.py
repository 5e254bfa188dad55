# InferenceSession: import an ONNX model into a cge session and run it with
# numpy arrays. Output buffers are sized from the compiled shapes, or, when
# shapes depend on values, from what the run computed (then run again).
import ctypes
import os

import numpy as np

from . import _lib
from ._lib import lib

# cge dtype numbers (ONNX's TensorProto numbers) <-> numpy and ORT type names.
_DTYPES = {
    1: (np.float32, "float"), 2: (np.uint8, "uint8"), 3: (np.int8, "int8"),
    4: (np.uint16, "uint16"), 5: (np.int16, "int16"), 6: (np.int32, "int32"),
    7: (np.int64, "int64"), 9: (np.bool_, "bool"), 10: (np.float16, "float16"),
    11: (np.float64, "double"), 12: (np.uint32, "uint32"), 13: (np.uint64, "uint64"),
}
BFLOAT16 = 16
_FROM_NUMPY = {np.dtype(t): k for k, (t, _) in _DTYPES.items()}

_GRAPH_ID = 1


class Error(RuntimeError):
    """A failed cge call. ``str(e)`` is the layered message ("[io] ..."); ``layer``
    and ``status`` name the layer and status code."""

    def __init__(self, message, layer="", status=""):
        super().__init__(message)
        self.message, self.layer, self.status = message, layer, status


# Layer name -> Error subclass; filled by cge.errors.
_LAYER_ERRORS = {}


def _last_error(context=None):
    msg = (lib.cge_last_error() or b"").decode("utf-8", "replace")
    layer = (lib.cge_layer_name(lib.cge_last_error_layer()) or b"").decode()
    status = (lib.cge_status_name(lib.cge_last_error_status()) or b"").decode()
    if not msg:
        msg = "[%s] %s failed" % (layer or "cge", context or "call")
    return _LAYER_ERRORS.get(layer, Error)(msg, layer, status)


def _raise_last(context=None):
    raise _last_error(context)


def _check(st, context=None):
    if st != 0:
        _raise_last(context)


def dtype_to_numpy(dtype):
    """numpy dtype of a cge dtype number (bfloat16 travels as its uint16 bits)."""
    if dtype == BFLOAT16:
        return np.dtype(np.uint16)
    if dtype not in _DTYPES:
        raise Error("[session] cge dtype %d has no numpy equivalent" % dtype, "session",
                    "CGE_ERR_DTYPE")
    return np.dtype(_DTYPES[dtype][0])


def numpy_to_dtype(dt):
    dt = np.dtype(dt)
    if dt not in _FROM_NUMPY:
        raise Error("[session] numpy dtype %s has no cge equivalent" % dt, "session",
                    "CGE_ERR_DTYPE")
    return _FROM_NUMPY[dt]


def _type_name(dtype):
    if dtype == BFLOAT16:
        return "tensor(bfloat16)"
    return "tensor(%s)" % _DTYPES[dtype][1] if dtype in _DTYPES else "tensor(undefined)"


class NodeArg:
    """A graph input or output: ``name``, ``shape`` (ints; the dim_param name, a
    str, for a symbolic dimension; None for another unknown one) and ``type``
    ("tensor(float)", ...), as ONNX Runtime's NodeArg."""

    def __init__(self, name, shape, type_, dtype):
        self.name, self.shape, self.type, self.dtype = name, shape, type_, dtype

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


def _shape_list(shape):
    return [None if shape.dims[i] < 0 else int(shape.dims[i]) for i in range(shape.rank)]


def _make_shape(dims):
    dims = list(dims)
    if len(dims) > _lib.MAX_RANK:
        raise Error("[session] rank %d is above cge's limit of %d" % (len(dims), _lib.MAX_RANK),
                    "session", "CGE_ERR_SHAPE")
    s = _lib.Shape()
    s.rank = len(dims)
    for i, d in enumerate(dims):
        s.dims[i] = _lib.DIM_DYNAMIC if d is None or (isinstance(d, str)) else int(d)
    return s


_RUN_MODES = {None: 0, "default": 0, "eager": 1, "plan": 2, "replay": 3}

_CGM_MAGIC = b"CGEMODEL"


def _is_cgm(path_or_bytes):
    """Whether a path or buffer holds a compiled model (.cgm, by its magic)."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes[:8]) == _CGM_MAGIC
    try:
        with open(os.fspath(path_or_bytes), "rb") as f:
            return f.read(8) == _CGM_MAGIC
    except OSError:
        return os.fspath(path_or_bytes).endswith(".cgm")


def _model_protos():
    """ctypes prototypes of the model file API (include/cge/model_file.h)."""
    P = ctypes.POINTER
    for name, res, args in (
            ("cge_model_load", ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p,
                                              P(ctypes.c_void_p)]),
            ("cge_model_load_buffer", ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t,
                                                     ctypes.c_void_p, P(ctypes.c_void_p)]),
            ("cge_model_destroy", None, [ctypes.c_void_p]),
            ("cge_session_add_model", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint32,
                                                     ctypes.c_void_p])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


class InferenceSession:
    """Load an ONNX model or a compiled model (.cgm, from `cge compile`; a path or
    the model's bytes) and run it.

    ``input_shapes`` ({name: [dims]}) replaces declared input shapes;
    ``dim_values`` ({dim_param: int}) fixes symbolic dimensions;
    ``run_mode`` is "eager", "plan", "replay" or None (cge's default);
    ``num_threads`` 0 uses $CGE_NUM_THREADS or every core;
    ``opt_level`` 0-3 is the compiler's optimisation level (None: cge's
    default, 3, or $CGE_OPT_LEVEL; a compiled .cgm keeps the level it was
    compiled at)."""

    def __init__(self, path_or_bytes, input_shapes=None, dim_values=None, run_mode=None,
                 num_threads=0, base_dir=None, opt_level=None):
        self._session = ctypes.c_void_p()
        self._shape_cache = {}
        if _is_cgm(path_or_bytes):
            if input_shapes or dim_values:
                raise Error("[session] a compiled model (.cgm) has fixed input shapes",
                            "session", "CGE_ERR_INVALID_ARG")
            if opt_level is not None:
                raise Error("[session] a compiled model (.cgm) keeps the level it was compiled "
                            "at (cge compile --opt-level)", "session", "CGE_ERR_INVALID_ARG")
            self._open_cgm(path_or_bytes, run_mode, num_threads)
            return
        opts, keep = self._options(input_shapes, dim_values)
        graph = ctypes.c_void_p()
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            buf = bytes(path_or_bytes)
            bd = os.fsencode(base_dir) if base_dir is not None else None
            st = lib.cge_onnx_import_buffer(buf, len(buf), bd, ctypes.byref(opts),
                                            ctypes.byref(graph))
        else:
            st = lib.cge_onnx_import_file(os.fsencode(os.fspath(path_or_bytes)),
                                          ctypes.byref(opts), ctypes.byref(graph))
        del keep
        _check(st, "onnx import")
        try:
            if run_mode not in _RUN_MODES:
                raise Error("[session] unknown run mode %r (want eager, plan or replay)"
                            % run_mode, "session", "CGE_ERR_INVALID_ARG")
            if opt_level is not None and (not isinstance(opt_level, int) or
                                          not 0 <= opt_level <= 3):
                raise Error("[session] opt_level %r is not 0, 1, 2 or 3" % (opt_level,),
                            "session", "CGE_ERR_INVALID_ARG")
            so = _lib.SessionOptions(None, int(num_threads), _RUN_MODES[run_mode], 0,
                                     0 if opt_level is None else opt_level + 1)
            _check(lib.cge_session_create(ctypes.byref(so), ctypes.byref(self._session)))
            _check(lib.cge_session_add_graph(self._session, _GRAPH_ID, graph))
        finally:
            lib.cge_graph_destroy(graph)
        self._describe()

    def _open_cgm(self, path_or_bytes, run_mode, num_threads):
        """A compiled model (cge compile): mapped from its file, or loaded from bytes."""
        _model_protos()
        model = ctypes.c_void_p()
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            buf = bytes(path_or_bytes)
            st = lib.cge_model_load_buffer(buf, len(buf), None, ctypes.byref(model))
        else:
            st = lib.cge_model_load(os.fsencode(os.fspath(path_or_bytes)), None,
                                    ctypes.byref(model))
        _check(st, "model load")
        try:
            if run_mode not in _RUN_MODES:
                raise Error("[session] unknown run mode %r (want eager, plan or replay)"
                            % run_mode, "session", "CGE_ERR_INVALID_ARG")
            so = _lib.SessionOptions(None, int(num_threads), _RUN_MODES[run_mode], 0)
            _check(lib.cge_session_create(ctypes.byref(so), ctypes.byref(self._session)))
            _check(lib.cge_session_add_model(self._session, _GRAPH_ID, model))
        finally:
            lib.cge_model_destroy(model)  # the session keeps its own reference
        self._describe()

    def _describe(self):
        _check(lib.cge_session_compile_graph(self._session, _GRAPH_ID))
        ni, no = ctypes.c_int32(), ctypes.c_int32()
        _check(lib.cge_session_num_io(self._session, _GRAPH_ID, ctypes.byref(ni),
                                      ctypes.byref(no)))
        self._inputs = [self._desc(lib.cge_session_input_desc, i) for i in range(ni.value)]
        self._outputs = [self._desc(lib.cge_session_output_desc, i) for i in range(no.value)]
        self._out_index = {o.name: i for i, o in enumerate(self._outputs)}

    @staticmethod
    def _options(input_shapes, dim_values):
        opts = _lib.OnnxOptions()
        keep = []
        if input_shapes:
            arr = (_lib.OnnxInputShape * len(input_shapes))()
            for i, (name, dims) in enumerate(input_shapes.items()):
                b = name.encode()
                keep.append(b)
                arr[i].name = b
                arr[i].shape = _make_shape(dims)
            opts.input_shapes, opts.num_input_shapes = arr, len(input_shapes)
            keep.append(arr)
        if dim_values:
            arr = (_lib.OnnxDimValue * len(dim_values))()
            for i, (name, v) in enumerate(dim_values.items()):
                b = name.encode()
                keep.append(b)
                arr[i].dim_param, arr[i].value = b, int(v)
            opts.dim_values, opts.num_dim_values = arr, len(dim_values)
            keep.append(arr)
        return opts, keep

    def _desc(self, fn, i):
        d = _lib.TensorDesc()
        _check(fn(self._session, _GRAPH_ID, i, ctypes.byref(d)))
        return NodeArg(d.name.decode(), self._named_shape(d.shape), _type_name(d.dtype), d.dtype)

    def _named_shape(self, shape):
        """Dims as ONNX Runtime reports them: ints, the dim_param name (str) of
        a symbolic dim, None for an unknown one."""
        dims = _shape_list(shape)
        for i in range(shape.rank):
            if shape.dims[i] <= -2:
                name = lib.cge_session_dim_symbol_name(self._session, _GRAPH_ID, shape.dims[i])
                dims[i] = name.decode() if name is not None else None
        return dims

    def __del__(self):
        s = getattr(self, "_session", None)
        if s:
            lib.cge_session_destroy(s)
            self._session = ctypes.c_void_p()

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def run(self, output_names, input_feed, run_options=None):
        """Run the model: ``output_names`` (None: all outputs) and ``input_feed``
        ({input name: array}); returns a list of numpy arrays."""
        if output_names is None:
            output_names = [o.name for o in self._outputs]
        for n in output_names:
            if n not in self._out_index:
                raise Error("[session] the model has no output named '%s' (its outputs: %s)"
                            % (n, ", ".join(o.name for o in self._outputs)), "session",
                            "CGE_ERR_NOT_FOUND")
        arrays, names = [], []
        ins = (_lib.Tensor * max(1, len(input_feed)))()
        declared = {a.name: a.dtype for a in self._inputs}
        for i, (name, value) in enumerate(input_feed.items()):
            a = np.asarray(value)  # keeps rank 0 (ascontiguousarray would not)
            if not a.flags["C_CONTIGUOUS"]:
                a = np.ascontiguousarray(a)
            if a.dtype == np.uint16 and declared.get(name) == BFLOAT16:
                dt = BFLOAT16  # bfloat16 travels as its uint16 bits
            else:
                dt = numpy_to_dtype(a.dtype)
            nb = name.encode()
            arrays.append(a)
            names.append(nb)
            ins[i].name = nb
            ins[i].dtype = dt
            ins[i].shape = _make_shape(a.shape)
            ins[i].data = a.ctypes.data if a.nbytes else None
            ins[i].bytes = a.nbytes
        key = (tuple((n, a.shape, a.dtype.str) for n, a in zip(names, arrays)), tuple(output_names))
        idx = [self._out_index[n] for n in output_names]
        guess = self._shape_cache.get(key)
        if guess is None:
            guess = []
            for k in idx:
                o = self._outputs[k]
                static = all(isinstance(d, int) for d in o.shape)
                guess.append((o.dtype, tuple(o.shape)) if static else None)
        for attempt in (0, 1):
            outs = (_lib.Tensor * max(1, len(idx)))()
            bufs = []
            for j, k in enumerate(idx):
                nb = output_names[j].encode()
                names.append(nb)
                outs[j].name = nb
                g = guess[j]
                buf = None
                if g is not None and g[0] != 0:
                    buf = np.empty(g[1], dtype=dtype_to_numpy(g[0]))
                bufs.append(buf)
                if buf is not None and buf.nbytes:
                    outs[j].data, outs[j].bytes = buf.ctypes.data, buf.nbytes
            st = lib.cge_session_run_graph(self._session, _GRAPH_ID, ins, len(arrays), outs,
                                           len(idx))
            if st == 0:
                break
            err = _last_error("run")
            new = None if attempt else self._retry_shapes(err, outs, len(idx), guess)
            if new is None:
                raise err
            guess = new
        result = []
        for j in range(len(idx)):
            t = outs[j]
            shape = tuple(int(t.shape.dims[i]) for i in range(t.shape.rank))
            npdt = dtype_to_numpy(t.dtype)
            nbytes = int(np.prod(shape)) * npdt.itemsize
            buf = bufs[j]
            if buf is None or buf.nbytes < nbytes:
                arr = np.empty(shape, dtype=npdt)  # only for outputs with no elements
            else:
                # The run wrote dtype and shape back; the buffer may be larger.
                arr = buf.reshape(-1).view(np.uint8)[:nbytes].view(npdt).reshape(shape)
            result.append(arr)
        self._shape_cache[key] = [(outs[j].dtype, tuple(r.shape)) for j, r in enumerate(result)]
        return result

    def _retry_shapes(self, err, outs, n, guess):
        """Output shapes to retry with when the failed run was only short of
        output space: the run wrote what it needs into this call's own output
        tensors (never another thread's "last run"); else None."""
        if err.layer != "session" or "the buffer given has" not in err.message:
            return None
        new = []
        for j in range(n):
            dims = [int(outs[j].shape.dims[i]) for i in range(outs[j].shape.rank)]
            if outs[j].dtype == 0 or any(d < 0 for d in dims):
                return None
            new.append((outs[j].dtype, tuple(dims)))
        return new if new != guess else None
