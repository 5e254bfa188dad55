# InferenceSession: import an ONNX model into a cge session and run it with
# numpy arrays. Output buffers are sized from the compiled shapes, or, when
# shapes depend on values, from what the run computed (then run again).
import ctypes
import re
import datetime
import json
import math
import os
import signal
import threading

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
STRING = 8
_FROM_NUMPY = {np.dtype(t): k for k, (t, _) in _DTYPES.items()}
# A string tensor's C element (cge_string in cge/types.h): the address and
# length of its bytes. numpy gives and receives strings as object arrays of
# str (as ONNX Runtime does); str and bytes arrays ("U", "S") are accepted.
_STRING_ELEM = np.dtype([("data", np.uintp), ("size", np.int64)])

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
    if dtype == STRING:
        return np.dtype(object)
    if dtype not in _DTYPES:
        raise Error("[session] cge dtype %d has no numpy equivalent" % dtype, "session",
                    "CGE_ERR_DTYPE")
    return np.dtype(_DTYPES[dtype][0])


def numpy_to_dtype(dt):
    dt = np.dtype(dt)
    if dt.kind in "OUS":
        return STRING
    if dt not in _FROM_NUMPY:
        raise Error("[session] numpy dtype %s has no cge equivalent" % dt, "session",
                    "CGE_ERR_DTYPE")
    return _FROM_NUMPY[dt]


def _type_name(dtype):
    if dtype == BFLOAT16:
        return "tensor(bfloat16)"
    if dtype == STRING:
        return "tensor(string)"
    return "tensor(%s)" % _DTYPES[dtype][1] if dtype in _DTYPES else "tensor(undefined)"


def _value_type_name(vtype, dtype):
    """ONNX Runtime's type string: "seq(tensor(float))", "optional(...)"."""
    t = _type_name(dtype)
    if vtype == _lib.TYPE_SEQUENCE:
        return "seq(%s)" % t
    if vtype == _lib.TYPE_OPTIONAL:
        return "optional(%s)" % t
    if vtype == _lib.TYPE_OPTIONAL_SEQUENCE:
        return "optional(seq(%s))" % t
    return t


class _Sequence:
    """A cge_sequence (cge/sequence.h) for one run's sequence or optional
    input or output, destroyed with this object."""

    def __init__(self, vtype, dtype):
        self.handle = ctypes.c_void_p()
        _check(lib.cge_sequence_create(vtype, dtype, ctypes.byref(self.handle)), "sequence")

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h and lib is not None:   # lib may be gone at interpreter exit
            lib.cge_sequence_destroy(h)

    @classmethod
    def from_value(cls, name, vtype, declared, value):
        """A list of arrays (a sequence), an array or None (an optional)."""
        seq_like = vtype in (_lib.TYPE_SEQUENCE, _lib.TYPE_OPTIONAL_SEQUENCE)
        if value is None and vtype == _lib.TYPE_SEQUENCE:
            raise Error("[session] input '%s' is a sequence: give a list of arrays, not None"
                        % name, "session", "CGE_ERR_INVALID_ARG")
        if value is not None and seq_like and not isinstance(value, (list, tuple)):
            raise Error("[session] input '%s' is a sequence: give a list of arrays" % name,
                        "session", "CGE_ERR_INVALID_ARG")
        if value is not None and not seq_like and isinstance(value, (list, tuple)):
            raise Error("[session] input '%s' is an optional tensor: give an array or None"
                        % name, "session", "CGE_ERR_INVALID_ARG")
        items = [] if value is None else (list(value) if seq_like else [value])
        arrays = []
        for v in items:
            if hasattr(v, "ortvalue_from_numpy"):
                v = v.numpy()
            arrays.append(np.ascontiguousarray(np.asarray(v)) if np.ndim(v) else np.asarray(v))
        dt = numpy_to_dtype(arrays[0].dtype) if arrays else declared
        if dt == STRING:
            # Its elements would point into this call's Python objects.
            raise Error("[session] input '%s': sequences and optionals of strings are not "
                        "supported" % name, "session", "CGE_ERR_UNSUPPORTED")
        for i, a in enumerate(arrays):
            if numpy_to_dtype(a.dtype) != dt:
                raise Error("[session] input '%s': element %d is %s; element 0 is %s (a sequence "
                            "holds one dtype)" % (name, i, a.dtype, arrays[0].dtype), "session",
                            "CGE_ERR_DTYPE")
        s = cls(vtype, dt)
        if value is None:
            _check(lib.cge_sequence_set_none(s.handle), "sequence")
        for a in arrays:
            shape = _make_shape(a.shape)
            _check(lib.cge_sequence_append(s.handle, ctypes.byref(shape),
                                           a.ctypes.data if a.nbytes else None), "sequence")
        key = ("seq", name, tuple(a.shape for a in arrays), dt, value is None)
        return s, key

    def value(self):
        """The Python value: a list of arrays, an array, or None."""
        if not lib.cge_sequence_has_value(self.handle):
            return None
        out = []
        for i in range(lib.cge_sequence_length(self.handle)):
            t = _lib.Tensor()
            _check(lib.cge_sequence_at(self.handle, i, ctypes.byref(t)), "sequence")
            shape = tuple(int(t.shape.dims[k]) for k in range(t.shape.rank))
            npdt = dtype_to_numpy(t.dtype)
            a = np.empty(shape, dtype=npdt)
            if a.nbytes:
                ctypes.memmove(a.ctypes.data, t.data, a.nbytes)
            out.append(a)
        if lib.cge_sequence_type(self.handle) == _lib.TYPE_OPTIONAL:
            return out[0] if out else None
        return out


class _SeqInput:
    """A run's sequence or optional input: its cge_sequence, and the key the
    output-shape cache sees for it."""

    def __init__(self, seq, key):
        self.seq, self.key = seq, key


class _StrInput:
    """A run's string tensor input: the cge_string elements and the one
    buffer of bytes they point into (both kept until the run ends), and
    the shape and dtype the output-shape cache sees."""

    def __init__(self, value):
        flat = value.reshape(-1)
        enc = [v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogateescape")
               for v in flat.tolist()]
        self.blob = np.frombuffer(b"".join(enc) or b"\0", dtype=np.uint8)
        self.elems = np.zeros(value.shape, dtype=_STRING_ELEM)
        sizes = np.array([len(e) for e in enc], dtype=np.int64)
        offsets = np.cumsum(sizes) - sizes
        ev = self.elems.reshape(-1)
        ev["size"] = sizes
        ev["data"] = self.blob.ctypes.data + offsets.astype(np.uintp)
        self.shape, self.nbytes = value.shape, self.elems.nbytes
        self.key = ("string", value.shape)


def _strings_from(elems, shape):
    """An object array of str from a run's cge_string elements (copied: the
    bytes are the engine's until its next run)."""
    flat = elems.reshape(-1)
    out = np.empty(len(flat), dtype=object)
    for i, (addr, size) in enumerate(flat.tolist()):
        out[i] = ctypes.string_at(addr, size).decode("utf-8", "surrogateescape") if size else ""
    return out.reshape(shape)


def _collect(outs, bufs, n):
    """A run's outputs as Python values, from the C tensors the run wrote
    (dtype and shape) and the buffers they point into (which may be larger)."""
    result = []
    for j in range(n):
        t = outs[j]
        if isinstance(bufs[j], _Sequence):
            result.append(bufs[j].value())
            continue
        shape = tuple(t.shape.dims[:t.shape.rank])
        npdt = _STRING_ELEM if t.dtype == STRING else dtype_to_numpy(t.dtype)
        nbytes = math.prod(shape) * npdt.itemsize
        buf = bufs[j]
        if t.dtype == STRING:
            elems = (buf.reshape(-1).view(np.uint8)[:nbytes].view(_STRING_ELEM)
                     if buf is not None and buf.nbytes >= nbytes else
                     np.zeros(0, dtype=_STRING_ELEM))
            arr = _strings_from(elems, shape)
        elif buf is None or buf.nbytes < nbytes:
            arr = np.empty(shape, dtype=npdt)  # only for outputs with no elements
        elif buf.shape == shape and buf.dtype == npdt:
            arr = buf
        else:
            # The run wrote dtype and shape back; the buffer may be larger.
            arr = buf.reshape(-1).view(np.uint8)[:nbytes].view(npdt).reshape(shape)
        result.append(arr)
    return result


_NDARRAY = np.ndarray
# Run signatures whose C tensors a session keeps (_RunEntry).
_MAX_ENTRIES = 256
# Signatures whose output shapes a session remembers (_remember_shapes).
_MAX_SHAPES = 4096


def _plain_feed(input_feed):
    """The arrays of a feed whose values are all numpy arrays (or OrtValues),
    C-contiguous ones as they are, and its signature (name, dtype, shape per
    input); (None, None) when a value needs the general path (a list, None)."""
    arrays, sig = [], []
    for name, v in input_feed.items():
        if type(v) is not _NDARRAY:
            if not hasattr(v, "ortvalue_from_numpy"):
                return None, None
            v = v.numpy()
            if type(v) is not _NDARRAY:
                return None, None
        if not v.flags.c_contiguous:
            v = np.ascontiguousarray(v)
        arrays.append(v)
        sig.append((name, v.dtype, v.shape))
    return arrays, tuple(sig)


_ADDRESSOF, _CHAR_AT = ctypes.addressof, ctypes.c_char.from_buffer


def _data_ptr(a):
    """The address of a C-contiguous array's first element: through the
    buffer protocol (a quarter of ndarray.ctypes.data's cost), or, for a
    read-only array (which that refuses), ndarray.ctypes."""
    try:
        return _ADDRESSOF(_CHAR_AT(a))
    except (TypeError, ValueError):
        return a.ctypes.data


def _point(elems, live, held, arrays):
    """Set the data pointers of the C tensors elems to arrays' where the
    array is not the one held (and so pointed at) already."""
    for i, a in enumerate(arrays):
        if a is not held[i]:
            if live[i]:
                elems[i].data = _data_ptr(a)
            held[i] = a


def _check_bound(outs, output_arrays):
    """The [session] error for a bound output whose buffer is not the
    dtype and shape the run produced."""
    for j, (name, a) in enumerate(output_arrays.items()):
        t = outs[j]
        shape = tuple(int(t.shape.dims[i]) for i in range(t.shape.rank))
        if dtype_to_numpy(t.dtype) != a.dtype or shape != a.shape:
            raise Error("[session] output '%s' is %s %s; the buffer bound for it is %s %s"
                        % (name, dtype_to_numpy(t.dtype), list(shape), a.dtype,
                           list(a.shape)), "session", "CGE_ERR_SHAPE")


# A run with I/O binding's options (cge_run_options.bind_buffers); the C
# side only reads them.
_BIND_OPTIONS = _lib.RunOptions()
_BIND_OPTIONS.bind_buffers = True
_BIND_OPTIONS_REF = ctypes.byref(_BIND_OPTIONS)


class _Template:
    """A general run's C tensors (InferenceSession._keep_template), copied by
    the next run whose inputs have the same names, dtypes and ranks."""
    __slots__ = ("ins", "outs", "names", "idx", "out_key", "n_in", "n_out", "npdt",
                 "out_dtypes")


_MAX_TEMPLATES = 16


class _RunEntry:
    """The C tensors of one run signature (input names, dtypes and shapes;
    output names), built by the general path once and reused: names, dtypes,
    shapes and sizes stay; a run sets only the data pointers of arrays that
    are not the ones the entry points at already. The entry used last holds
    those arrays, which keeps their memory where it is (numpy refuses to
    resize an array with other references), so an array that is the same
    object has the same data pointer; the others hold none."""

    def __init__(self, ins, n_in, names):
        self.ins, self.n_in, self.names = ins, n_in, names
        self.in_elems = [ins[i] for i in range(n_in)]
        self.in_live = [bool(ins[i].bytes) for i in range(n_in)]
        # Nothing held until a run uses the entry (InferenceSession._use_entry):
        # only the entry used last holds arrays.
        self.held = [None] * n_in

    def release(self):
        self.held = [None] * self.n_in
        if getattr(self, "out_held", None) is not None:
            self.out_held = [None] * self.n_out

    def set_inputs(self, arrays):
        _point(self.in_elems, self.in_live, self.held, arrays)

    def set_bound(self, outs, arrays, expect):
        """I/O binding: the output tensors point at the caller's arrays
        (as the inputs do); expect: per output (cge dtype, rank, dims)."""
        self.outs, self.n_out = outs, len(arrays)
        self.out_elems = [outs[j] for j in range(self.n_out)]
        self.out_live = [bool(outs[j].bytes) for j in range(self.n_out)]
        self.out_views = [(t, t.shape, t.shape.dims) for t in self.out_elems]
        self.out_expect = expect
        self.out_held = [None] * self.n_out

    def set_bound_outputs(self, arrays):
        _point(self.out_elems, self.out_live, self.out_held, arrays)

    def set_outputs(self, outs, spec):
        """spec: per output (numpy dtype, shape, bytes, cge dtype)."""
        self.outs, self.n_out = outs, len(spec)
        self.out_elems = [outs[j] for j in range(len(spec))]
        self.out_alloc = [(s[0], s[1], bool(s[2])) for s in spec]
        self.out_views = [(t, t.shape, t.shape.dims) for t in self.out_elems]
        self.out_expect = [(s[3], len(s[1]), list(s[1])) for s in spec]
        for t, s in zip(self.out_elems, spec):
            t.bytes = s[2]
            if not s[2]:
                t.data = None

    def new_outputs(self):
        bufs = []
        for t, (npdt, shape, live) in zip(self.out_elems, self.out_alloc):
            b = np.empty(shape, npdt)
            if live:
                t.data = _ADDRESSOF(_CHAR_AT(b))
            bufs.append(b)
        return bufs

    def outputs_match(self):
        """Whether the run wrote the dtypes and shapes the buffers have."""
        for (t, shp, dims), (dt, rank, want) in zip(self.out_views, self.out_expect):
            if t.dtype != dt or shp.rank != rank or dims[:rank] != want:
                return False
        return True


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

# signal.getsignal without its conversion of SIG_DFL / SIG_IGN to enums
# (most of its cost; a Python handler is returned as it is either way).
_getsignal = getattr(signal, "_signal", signal).getsignal

# One cancel token per thread (cge_cancel, reset before each run), never
# freed: the SIGINT watch may point at it, and a thread runs one run at a time.
_tokens = threading.local()


def _thread_token():
    t = getattr(_tokens, "token", None)
    if t is None:
        t = ctypes.c_void_p()
        _check(lib.cge_cancel_create(ctypes.byref(t)), "cancel token")
        _tokens.token = t
    return t


class _RunScope:
    """A run's cancellation: the thread's token bound to what the run
    enqueues (cge_cancel_scope), with a deadline for ``timeout``, reachable
    from RunOptions.terminate, and requested by Ctrl-C when the run is on the
    main thread with Python's own SIGINT handler (KeyboardInterrupt follows
    once the run has stopped; the session stays usable)."""

    def __init__(self, run_options, timeout):
        self.run_options, self.timeout = run_options, timeout

    def __enter__(self):
        self.token = _thread_token()
        lib.cge_cancel_reset(self.token)
        if self.timeout is not None:
            t = float(self.timeout)
            if not t >= 0:
                raise Error("[session] timeout %r is not a number of seconds >= 0"
                            % (self.timeout,), "session", "CGE_ERR_INVALID_ARG")
            lib.cge_cancel_set_timeout(self.token, t * 1000.0)
        self.registered = False
        ro = self.run_options
        if ro is not None and hasattr(ro, "_add_run"):
            if not ro._add_run(self.token.value):
                raise Error("[session] the run was refused: RunOptions.terminate is set",
                            "session", "CGE_ERR_STATE")
            self.registered = True
        self.watching = (threading.current_thread() is threading.main_thread() and
                         _getsignal(signal.SIGINT) is signal.default_int_handler and
                         lib.cge_cancel_watch_sigint(self.token) == 0)
        self.prev = lib.cge_cancel_scope(self.token)
        return self

    def __exit__(self, *exc):
        lib.cge_cancel_scope(self.prev)
        if self.watching:
            lib.cge_cancel_unwatch_sigint()
        if self.registered:
            self.run_options._remove_run(self.token.value)
        return False

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


def _buckets(so, capture_sizes):
    """Fill so's buckets from {dim: [sizes]}; returns what must stay alive
    until the session is created (it copies them)."""
    if not capture_sizes:
        return None
    if not isinstance(capture_sizes, dict):
        raise Error("[session] capture_sizes must be {dim name: [sizes]}", "session",
                    "CGE_ERR_INVALID_ARG")
    arr = (_lib.DimBuckets * len(capture_sizes))()
    keep = [arr]
    for i, (dim, sizes) in enumerate(capture_sizes.items()):
        sizes = [int(x) for x in sizes]
        name = str(dim).encode()
        vals = (ctypes.c_int64 * max(1, len(sizes)))(*sizes)
        keep += [name, vals]
        arr[i].dim, arr[i].sizes, arr[i].num_sizes = name, vals, len(sizes)
    so.buckets, so.num_buckets = arr, len(capture_sizes)
    return keep


def _precision(name):
    """cge_precision for "fp32" / "bf16" (and their long names)."""
    v = lib.cge_precision_from_name(str(name).encode()) if isinstance(name, str) else -1
    if v < 0:
        raise Error("[session] precision %r is not 'fp32' or 'bf16'" % (name,), "session",
                    "CGE_ERR_INVALID_ARG")
    return v


def precision_bf16_available():
    """Whether this build and CPU run bfloat16 kernels (precision="bf16"
    changes anything)."""
    return bool(lib.cge_precision_bf16_available())


_DIST_SOURCES = {"none": 0, None: 0, "env": 1}


def _dist(so, sess_options):
    """Copy SessionOptions' distributed fields into the C options."""
    src = getattr(sess_options, "dist", "none")
    if src not in _DIST_SOURCES:
        raise Error("[session] SessionOptions.dist %r is not 'none' or 'env'" % (src,), "session",
                    "CGE_ERR_INVALID_ARG")
    so.dist = _DIST_SOURCES[src]
    so.dist_tp = int(getattr(sess_options, "dist_tp", 0) or 0)
    so.dist_pp = int(getattr(sess_options, "dist_pp", 0) or 0)
    so.dist_micro_batches = int(getattr(sess_options, "dist_micro_batches", 0) or 0)
    so.dist_timeout_ms = int(getattr(sess_options, "dist_timeout_ms", 0) or 0)
    so.dist_world_size = int(getattr(sess_options, "dist_world_size", 0) or 0)
    so.dist_rank = int(getattr(sess_options, "dist_rank", 0) or 0)


class InferenceSession:
    """Load an ONNX model or a compiled model (.cgm, from `cge compile`; a path or
    the model's bytes) and run it.

    As ONNX Runtime's: ``sess_options`` (cge.SessionOptions), ``providers``
    (only "CPUExecutionProvider"; others warn and fall back to it),
    ``provider_options`` (accepted). docs/python.md lists what maps how.
    cge's own keywords:

    ``input_shapes`` ({name: [dims]}) replaces declared input shapes;
    ``dim_values`` ({dim_param: int}) fixes symbolic dimensions;
    ``run_mode`` is "eager", "plan", "replay" or None (cge's default);
    ``num_threads`` 0 uses $CGE_NUM_THREADS or every core;
    ``opt_level`` 0-3 is the compiler's optimisation level (None: cge's
    default, 3, or $CGE_OPT_LEVEL; a compiled .cgm keeps the level it was
    compiled at);
    ``capture_sizes`` ({dim_param: [sizes]}, e.g. {"batch": [1, 2, 4, 8]})
    declares symbolic dims whose rows are independent: a run's size is
    rounded up to the next listed size (inputs padded with zeros, outputs cut
    back; padded rows are never visible), so a few compiled and captured
    signatures serve every size;
    ``verify_weights`` (a .cgm): True checks the weights' checksum, False
    trusts the file (a faster load), None (default) checks unless
    $CGE_VERIFY_WEIGHTS=0 — a damaged or replaced weights section raises the
    [io] error;
    ``precision`` "fp32" (default) or "bf16": float32 Conv, MatMul and Gemm
    run with bfloat16 operands and float32 accumulation where the CPU has
    AVX512-BF16 (relative errors near 1e-3; SessionOptions.precision says
    the same; None takes it from there);
    ``kv_cache_max_len`` N rewrites a concat-form key/value cache export
    (past_* concatenated into present_*) to the static form: caches of N
    slots, bound as one buffer for past and present, and a last input
    ``cache_position`` (int64 [1]); docs/guide.md, "Static-cache decoding"."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None,
                 input_shapes=None, dim_values=None, run_mode=None, num_threads=0, base_dir=None,
                 opt_level=None, capture_sizes=None, verify_weights=None, precision=None,
                 kv_cache_max_len=None, **kwargs):
        from . import _ort
        self._session = ctypes.c_void_p()
        self._init_lifecycle()
        self._shape_cache = {}
        if isinstance(sess_options, dict) and input_shapes is None:
            sess_options, input_shapes = None, sess_options  # cge's older positional form
        if kwargs:
            # ORT's keywords without a cge meaning (disabled_optimizers, ...).
            unknown = [k for k in kwargs if k not in ("disabled_optimizers",)]
            if unknown:
                raise TypeError("InferenceSession() got unexpected keyword arguments %s"
                                % ", ".join(sorted(unknown)))
        self._providers = _ort.check_providers(providers, provider_options)
        self._sess_options = sess_options if sess_options is not None else _ort.SessionOptions()
        so = self._sess_options
        if sess_options is not None:
            if so.intra_op_num_threads and not num_threads:
                num_threads = int(so.intra_op_num_threads)
            if so._free_dims:
                dim_values = dict(so._free_dims, **(dim_values or {}))
        self._source = path_or_bytes if not isinstance(path_or_bytes, os.PathLike) \
            else os.fspath(path_or_bytes)
        self._profile_events = []
        self._profile_runs = 0
        self._profile_start = lib.cge_profile_clock_ms()
        self._profile_start_ns = datetime.datetime.now().timestamp() * 1e9
        self._profiling = bool(so.enable_profiling)
        self._save_path = so.optimized_model_filepath or None
        if _is_cgm(path_or_bytes):
            self._is_cgm = True
            if input_shapes or dim_values:
                raise Error("[session] a compiled model (.cgm) has fixed input shapes",
                            "session", "CGE_ERR_INVALID_ARG")
            if kv_cache_max_len:
                raise Error("[session] a compiled model (.cgm) keeps the interface it was "
                            "compiled with (cge compile --kv-cache-max-len)", "session",
                            "CGE_ERR_INVALID_ARG")
            if opt_level is not None:
                raise Error("[session] a compiled model (.cgm) keeps the level it was compiled "
                            "at (cge compile --opt-level)", "session", "CGE_ERR_INVALID_ARG")
            if precision not in (None, "fp32") and _precision(precision) != 0:
                raise Error("[session] a compiled model (.cgm) keeps the precision it was "
                            "compiled at (cge compile --precision)", "session",
                            "CGE_ERR_INVALID_ARG")
            self._open_cgm(path_or_bytes, run_mode, num_threads, verify_weights)
            return
        self._is_cgm = False
        if opt_level is None and sess_options is not None:
            opt_level = _ort.cge_opt_level(so.graph_optimization_level)
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
            if precision is None:
                precision = getattr(self._sess_options, "precision", "fp32")
            so = _lib.SessionOptions(None, int(num_threads), _RUN_MODES[run_mode], 0,
                                     0 if opt_level is None else opt_level + 1)
            so.precision = self._precision = _precision(precision)
            if kv_cache_max_len is not None and (not isinstance(kv_cache_max_len, int) or
                                                 kv_cache_max_len < 0):
                raise Error("[session] kv_cache_max_len %r is not a positive int"
                            % (kv_cache_max_len,), "session", "CGE_ERR_INVALID_ARG")
            so.kv_cache_max_len = self._kv_cache_max_len = kv_cache_max_len or 0
            held = _buckets(so, capture_sizes)
            _dist(so, self._sess_options)
            _check(lib.cge_session_create(ctypes.byref(so), ctypes.byref(self._session)))
            del held
            _check(lib.cge_session_add_graph(self._session, _GRAPH_ID, graph))
            if self._save_path:
                self._save_compiled(graph, 0 if opt_level is None else opt_level + 1)
        finally:
            lib.cge_graph_destroy(graph)
        self._describe()

    def _save_compiled(self, graph, level):
        """optimized_model_filepath: compile the imported graph (as the session
        does) and write the plan as a compiled model (.cgm)."""
        co = _lib.CompileOptions()
        co.opt_level = level
        co.precision = getattr(self, "_precision", 0)
        co.kv_cache_max_len = getattr(self, "_kv_cache_max_len", 0)
        plan = ctypes.c_void_p()
        if lib.cge_compile(graph, None, 0, ctypes.byref(co), ctypes.byref(plan)) != 0:
            err = _last_error("compile")
            raise type(err)("%s (optimized_model_filepath needs static input shapes: fix them "
                            "with SessionOptions.add_free_dimension_override_by_name or "
                            "input_shapes)" % err.message, err.layer, err.status)
        try:
            self._save_plan(plan, level)
        finally:
            lib.cge_plan_destroy(plan)

    def _save_plan(self, plan, level):
        libs = list(self._sess_options._custom_op_libraries)
        arr = (ctypes.c_char_p * max(1, len(libs)))(*[os.fsencode(x) for x in libs])
        mo = _lib.ModelSaveOptions(arr if libs else None, len(libs), level,
                                   os.environ.get("CGE_CGM_PACKED") != "0")
        _check(lib.cge_model_save(plan, os.fsencode(os.fspath(self._save_path)),
                                  ctypes.byref(mo)), "model save")

    def _open_cgm(self, path_or_bytes, run_mode, num_threads, verify_weights=None):
        """A compiled model (cge compile): mapped from its file, or loaded from bytes."""
        _model_protos()
        if verify_weights not in (None, True, False):
            raise Error("[session] verify_weights %r is not True, False or None"
                        % (verify_weights,), "session", "CGE_ERR_INVALID_ARG")
        lo = _lib.ModelLoadOptions({None: 0, True: 1, False: 2}[verify_weights], 0)
        model = ctypes.c_void_p()
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            buf = bytes(path_or_bytes)
            st = lib.cge_model_load_buffer(buf, len(buf), ctypes.byref(lo), ctypes.byref(model))
        else:
            st = lib.cge_model_load(os.fsencode(os.fspath(path_or_bytes)), ctypes.byref(lo),
                                    ctypes.byref(model))
        _check(st, "model load")
        try:
            if run_mode not in _RUN_MODES:
                raise Error("[session] unknown run mode %r (want eager, plan or replay)"
                            % run_mode, "session", "CGE_ERR_INVALID_ARG")
            so = _lib.SessionOptions(None, int(num_threads), _RUN_MODES[run_mode], 0)
            _dist(so, self._sess_options)
            _check(lib.cge_session_create(ctypes.byref(so), ctypes.byref(self._session)))
            _check(lib.cge_session_add_model(self._session, _GRAPH_ID, model))
            if self._save_path:
                self._save_plan(lib.cge_model_plan(model), 0)
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
        shape = self._named_shape(d.shape) if d.shape.rank >= 0 else None
        arg = NodeArg(d.name.decode(), shape, _value_type_name(d.type, d.dtype), d.dtype)
        arg.value_type = d.type   # cge_value_type: tensor, sequence, optional
        return arg

    def _named_shape(self, shape):
        """Dims as ONNX Runtime reports them: ints, the dim_param name (str) of
        a symbolic dim, None for an unknown one."""
        dims = _shape_list(shape)
        for i in range(shape.rank):
            if shape.dims[i] <= -2:
                name = lib.cge_session_dim_symbol_name(self._session, _GRAPH_ID, shape.dims[i])
                name = name.decode() if name is not None else None
                # The importer names an input dim that has neither dim_value nor
                # dim_param "unk__<input>_<axis>" (a symbol of its own, for the
                # shape program); ONNX Runtime reports such dims as None.
                if name is not None and re.fullmatch(r"unk__(.+)_\d+(#\d+)?", name, re.S):
                    name = None
                dims[i] = name
        return dims

    # ---- lifetime: close() against runs in flight ----------------------------
    #
    # Runs enter and leave under a condition variable; close() stops new runs
    # at once, waits for those in flight, then destroys the C session, so no
    # call can reach a destroyed session (that corrupted the heap). A thread
    # inside a run of this session (a profiling callback) cannot wait for its
    # own run: close() refuses there. After close(), calls that need the C
    # session raise SessionError; get_inputs() and the like keep answering
    # from what was read at creation.

    def _init_lifecycle(self):
        self._life = threading.Condition()
        self._active = {}          # thread id -> runs it has in flight
        self._closed = False

    def _closed_error(self, what):
        return _LAYER_ERRORS.get("session", Error)(
            "[session] %s: the session is closed" % what, "session", "CGE_ERR_STATE")

    def _enter(self, what):
        """Mark a run in flight; the C session it may use (until _leave)."""
        with self._life:
            if self._closed or not self._session:
                raise self._closed_error(what)
            me = threading.get_ident()
            self._active[me] = self._active.get(me, 0) + 1
            return self._session

    def _leave(self):
        with self._life:
            me = threading.get_ident()
            self._active[me] -= 1
            if not self._active[me]:
                del self._active[me]
            if not self._active:
                self._life.notify_all()
                if self._closed:
                    self._destroy()   # the last run of a close() that timed out

    def _destroy(self):
        s, self._session = self._session, ctypes.c_void_p()
        if s:
            lib.cge_session_destroy(s)

    def close(self, timeout=None):
        """Release the session: new runs are refused from now (SessionError
        "the session is closed"), runs in flight in other threads finish
        first. ``timeout`` (seconds; None waits as long as they take): if runs
        are still in flight then, SessionError is raised and the session is
        released when the last of them ends. Closing twice is a no-op.
        ``with InferenceSession(...) as s:`` closes at the end of the block."""
        life = getattr(self, "_life", None)
        if life is None:  # __init__ failed before the lifecycle existed
            if getattr(self, "_session", None):
                self._destroy()
            return
        with life:
            if threading.get_ident() in self._active:
                raise _LAYER_ERRORS.get("session", Error)(
                    "[session] close() was called from inside a run of this session (a "
                    "callback): it would wait for itself", "session", "CGE_ERR_STATE")
            self._closed = True
            if not life.wait_for(lambda: not self._active, timeout):
                n = sum(self._active.values())
                raise _LAYER_ERRORS.get("session", Error)(
                    "[session] close(): %d run%s still in flight after %g s; the session is "
                    "released when %s" % (n, "" if n == 1 else "s", timeout,
                                           "it ends" if n == 1 else "they end"),
                    "session", "CGE_ERR_STATE")
            self._destroy()

    @property
    def closed(self):
        return bool(getattr(self, "_closed", False))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        # Unreachable objects have no runs in flight (a run holds a reference).
        if getattr(self, "_session", None):
            self._destroy()

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []  # cge folds initializers into the plan: none can be fed

    # ---- ONNX Runtime's session API (docs/python.md) -------------------------

    def get_providers(self):
        return list(self._providers)

    def get_provider_options(self):
        return {p: {} for p in self._providers}

    def set_providers(self, providers=None, provider_options=None):
        from . import _ort
        self._providers = _ort.check_providers(providers, provider_options)

    def disable_fallback(self):
        pass  # one provider: there is nothing to fall back from

    def enable_fallback(self):
        pass

    def get_session_options(self):
        return self._sess_options

    def get_modelmeta(self):
        """The model's metadata (ModelMetadata): an ONNX model's fields, read
        with the onnx package; a compiled model (.cgm) has none but
        producer_name "cge"."""
        from . import _ort
        if self._is_cgm:
            return _ort.ModelMetadata(producer_name="cge", description="compiled model (.cgm)")
        return _ort.model_metadata(self._source)

    def get_profiling_start_time_ns(self):
        return int(self._profile_start_ns)

    def end_profiling(self):
        """Stop profiling and write what the runs since the session began (or
        the last end_profiling) recorded as a Chrome trace (JSON, as ORT's:
        one complete event per kernel and copy, times in microseconds).
        Returns the file's path; "" when profiling is off."""
        if not self._profiling:
            return ""
        t = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        path = "%s_%s.json" % (self._sess_options.profile_file_prefix or "cge_profile", t)
        n = 0
        while os.path.exists(path):
            n += 1
            path = "%s_%s_%d.json" % (self._sess_options.profile_file_prefix or "cge_profile",
                                      t, n)
        with open(path, "w") as f:
            json.dump(self._profile_events, f, indent=0)
        self._profile_events = []
        self._profiling = False
        return path

    def _profile_callback(self, run_index):
        events, t0 = self._profile_events, self._profile_start
        cats = {0: "Node", 1: "CopyIn", 2: "CopyOut"}

        def on_event(ev_p, user):
            ev = ev_p.contents
            name = (ev.name or b"").decode("utf-8", "replace")
            op = (ev.op_type or b"").decode("utf-8", "replace")
            args = {"op_name": op, "engine": (ev.engine or b"").decode(),
                    "stream": int(ev.stream), "step": int(ev.step), "run": run_index,
                    "launch_us": round((ev.launch_end_ms - ev.launch_begin_ms) * 1000.0, 3)}
            if ev.kind != 0:
                args["bytes"] = int(ev.bytes)
            events.append({"cat": cats.get(ev.kind, "Node"), "pid": os.getpid(),
                           "tid": int(ev.stream), "ph": "X",
                           "name": name if ev.kind == 0 else "%s_%s" % (cats[ev.kind], name),
                           "ts": round((ev.launch_begin_ms - t0) * 1000.0, 3),
                           "dur": round((ev.end_ms - ev.launch_begin_ms) * 1000.0, 3),
                           "args": args})
        return _lib.PROFILE_FN(on_event)

    def last_run_mode(self):
        """The mode the last run used: "eager", "plan" or "replay" (what the
        default resolved to: a replay once the signature is captured)."""
        m = _lib.c_enum()
        session = self._enter("last_run_mode")
        try:
            _check(lib.cge_session_last_run_mode(session, _GRAPH_ID, ctypes.byref(m)))
        finally:
            self._leave()
        return {1: "eager", 2: "plan", 3: "replay"}.get(m.value, "default")

    def arena_bytes(self):
        """Bytes of the arena the model's compiled signatures share (as large
        as the largest plan's; 0 before the first compile)."""
        n = ctypes.c_size_t()
        session = self._enter("arena_bytes")
        try:
            _check(lib.cge_session_arena_bytes(session, _GRAPH_ID, ctypes.byref(n)))
        finally:
            self._leave()
        return n.value

    def memory_stats(self):
        """Where the model's memory goes, in bytes: ``weights`` (constants the
        plans read as they are), ``packed_weights`` (copies kernels made at
        prepare in their own layout), ``released_weights`` (weights freed once
        packed: with static input shapes only the packed copy stays, also
        under value-dependent nodes whose packed copy holds at any shape, and
        with symbolic dims the matrix weights packed for every size) and
        ``arena`` (activations and workspaces)."""
        st = _lib.GraphStats()
        session = self._enter("memory_stats")
        try:
            _check(lib.cge_session_get_graph_stats(session, _GRAPH_ID, ctypes.byref(st)))
        finally:
            self._leave()
        return {"weights": st.weight_bytes, "packed_weights": st.packed_bytes,
                "released_weights": st.released_bytes, "arena": st.arena_bytes}

    def io_binding(self):
        """An IOBinding (ORT's): outputs bound to buffers are written in place
        by the kernels, with no copy (see cge._ort.IOBinding)."""
        from . import _ort
        return _ort.IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        iobinding._run(run_options)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        from . import _ort
        return [_ort.OrtValue(a) for a in self.run(output_names, input_dict_ort_values,
                                                   run_options)]

    def run(self, output_names, input_feed, run_options=None, timeout=None):
        """Run the model: ``output_names`` (None: all outputs) and ``input_feed``
        ({input name: array or OrtValue}); returns a list of numpy arrays.
        ``run_options``: a cge.RunOptions (terminate=True, from another
        thread, stops the run; set before, it refuses it; the logging fields
        are accepted). ``timeout``: seconds after which the run stops with
        the [runtime] "deadline exceeded" error (cge's; None: no limit).
        Ctrl-C during a run on the main thread stops it and raises
        KeyboardInterrupt; the session stays usable."""
        if run_options is not None and getattr(run_options, "terminate", False):
            raise Error("[session] the run was refused: RunOptions.terminate is set", "session",
                        "CGE_ERR_STATE")
        session = self._enter("run")
        try:
            with _RunScope(run_options, timeout):
                return self._run(session, output_names, input_feed)
        finally:
            self._leave()

    def _run(self, session, output_names, input_feed):
        profiling = getattr(self, "_profiling", False)  # builder.Session sets none
        sig = None
        if not profiling:
            arrays, sig = _plain_feed(input_feed)
            if sig is not None:
                ckey = (None if output_names is None else tuple(output_names), sig)
                # Taken out while in use: a concurrent run of the same
                # signature in another thread takes the general path.
                entry = self._run_entries().pop(ckey, None)
                if entry is not None:
                    result = self._run_cached(session, ckey, entry, arrays)
                    if result is not None:
                        return result
                else:
                    result = self._run_resized(session, ckey, sig, arrays)
                    if result is not None:
                        return result
        if output_names is None:
            output_names = [o.name for o in self._outputs]
        for n in output_names:
            if n not in self._out_index:
                raise Error("[session] the model has no output named '%s' (its outputs: %s)"
                            % (n, ", ".join(o.name for o in self._outputs)), "session",
                            "CGE_ERR_NOT_FOUND")
        ins, arrays, names = self._input_tensors(input_feed)
        key = (tuple(a.key if isinstance(a, (_SeqInput, _StrInput)) else (n, a.shape, a.dtype.str)
                     for n, a in zip(names, arrays)), tuple(output_names))
        idx = [self._out_index[n] for n in output_names]
        guess = self._shape_cache.get(key)
        seen = guess is not None
        if guess is None:
            guess = self._predict_shapes(key, idx)
        if profiling:
            self._profile_runs += 1  # a retry (larger outputs) is part of the same run
            profile_fn = self._profile_callback(self._profile_runs)
        for attempt in (0, 1):
            outs = (_lib.Tensor * max(1, len(idx)))()
            bufs = []
            for j, k in enumerate(idx):
                nb = output_names[j].encode()
                names.append(nb)
                outs[j].name = nb
                vt = getattr(self._outputs[k], "value_type", _lib.TYPE_TENSOR)
                if vt != _lib.TYPE_TENSOR:
                    # a sequence or optional output: a cge_sequence receives it
                    seq = _Sequence(vt, self._outputs[k].dtype or 1)
                    outs[j].data = seq.handle
                    bufs.append(seq)
                    continue
                g = guess[j]
                buf = None
                if g is not None and g[0] == STRING:
                    buf = np.empty(g[1], dtype=_STRING_ELEM)
                elif g is not None and g[0] != 0:
                    buf = np.empty(g[1], dtype=dtype_to_numpy(g[0]))
                bufs.append(buf)
                if buf is not None and buf.nbytes:
                    outs[j].data, outs[j].bytes = buf.ctypes.data, buf.nbytes
            if profiling:
                ro = _lib.RunOptions()
                ro.profile = profile_fn
                st = lib.cge_session_run(session, _GRAPH_ID, ins, len(arrays), outs,
                                         len(idx), ctypes.byref(ro))
            else:
                st = lib.cge_session_run_graph(session, _GRAPH_ID, ins, len(arrays),
                                               outs, len(idx))
            if st == 0:
                break
            err = _last_error("run")
            new = None if attempt else self._retry_shapes(err, outs, len(idx), guess)
            if new is None:
                raise err
            guess = new
        result = _collect(outs, bufs, len(idx))
        self._remember_shapes(key, [None if isinstance(bufs[j], _Sequence)
                                  else (outs[j].dtype, tuple(r.shape))
                                  for j, r in enumerate(result)])
        self._last_shapes = (key, self._shape_cache[key])
        if seen and not profiling and sig is not None:
            # A signature's second run: it may come back (one seen once,
            # as each step of a growing cache, costs no entry).
            self._remember_run(ckey, ins, names, arrays, outs, result, bufs, key)
        if not profiling and sig is not None:
            self._keep_template(ckey, sig, ins, names, arrays, outs, bufs, idx, key)
        return result

    def _keep_template(self, ckey, sig, ins, names, arrays, outs, bufs, idx, key):
        """The C tensors of a general run, for the next signature with the same
        input names, dtypes and ranks (_run_resized); only when every input is
        a plain array and every output a tensor of a numeric dtype."""
        if any(type(a) is not _NDARRAY for a in arrays):
            return
        npdt = []
        for j in range(len(idx)):
            if isinstance(bufs[j], _Sequence) or outs[j].dtype in (0, STRING):
                return
            npdt.append(dtype_to_numpy(outs[j].dtype))
        t = _Template()
        t.ins, t.outs, t.names, t.idx, t.out_key = ins, outs, names, idx, key[1]
        t.n_in, t.n_out, t.npdt = len(arrays), len(idx), npdt
        t.out_dtypes = [outs[j].dtype for j in range(len(idx))]
        d = getattr(self, "_templates", None)
        if d is None:
            d = self._templates = {}
        d[(ckey[0], tuple((n, dt, len(shp)) for n, dt, shp in sig))] = t
        while len(d) > _MAX_TEMPLATES:
            d.pop(next(iter(d)), None)

    def _run_resized(self, session, ckey, sig, arrays):
        """A signature not seen before whose inputs have the names, dtypes and
        ranks of an earlier general run's (a decode step's: every cache a row
        longer): that run's C tensors, copied, with the new shapes, sizes and
        data pointers, and output buffers sized by _predict_shapes, instead of
        building them again from the feed (a guess too small is retried once
        with the shapes the refused run reported, as the general path does).
        None when no run matches (the general path runs it then)."""
        d = getattr(self, "_templates", None)
        t = d.get((ckey[0], tuple((n, dt, len(shp)) for n, dt, shp in sig))) if d else None
        if t is None:
            return None
        # The general path's key: the names as the C tensors hold them.
        key = (tuple((nb, a.shape, a.dtype.str) for nb, a in zip(t.names, arrays)), t.out_key)
        guess = self._shape_cache.get(key)
        seen = guess is not None
        if guess is None:
            guess = self._predict_shapes(key, t.idx)
        ins = type(t.ins).from_buffer_copy(t.ins)
        for i, a in enumerate(arrays):
            e = ins[i]
            dims = e.shape.dims
            for k, v in enumerate(a.shape):
                dims[k] = v
            e.bytes = a.nbytes
            e.data = _data_ptr(a) if a.nbytes else None
        for attempt in (0, 1):
            outs = type(t.outs).from_buffer_copy(t.outs)
            bufs = []
            for j, g in enumerate(guess):
                if g is None or g[0] != t.out_dtypes[j]:
                    return None
                b = np.empty(g[1], t.npdt[j])
                o = outs[j]
                o.dtype = 0
                o.shape.rank = 0
                if b.nbytes:
                    o.data, o.bytes = _ADDRESSOF(_CHAR_AT(b)), b.nbytes
                else:
                    o.data, o.bytes = None, 0
                bufs.append(b)
            st = lib.cge_session_run_graph(session, _GRAPH_ID, ins, t.n_in, outs, t.n_out)
            if st == 0:
                break
            err = _last_error("run")
            # A guess too small: the run said what it needs (as the general path's retry).
            new = None if attempt else self._retry_shapes(err, outs, t.n_out, guess)
            if new is None:
                raise err
            guess = new
        result = _collect(outs, bufs, t.n_out)
        self._remember_shapes(key, [(outs[j].dtype, tuple(r.shape))
                                    for j, r in enumerate(result)])
        self._last_shapes = (key, self._shape_cache[key])
        if seen:
            self._remember_run(ckey, ins, t.names, arrays, outs, result, bufs, key)
        return result

    def _remember_shapes(self, key, shapes):
        """The output shapes of signature `key`, for its next run; the
        _MAX_SHAPES signatures seen last are kept (a decode loop meets a new
        one at every step)."""
        c = self._shape_cache
        c.pop(key, None)
        c[key] = shapes
        while len(c) > _MAX_SHAPES:
            c.pop(next(iter(c)))

    def _run_entries(self):
        d = getattr(self, "_entries", None)
        if d is None:
            d = self._entries = {}
        return d

    def _add_entry(self, ckey, entry):
        """Keep entry for ckey; past _MAX_ENTRIES signatures the one used
        least recently goes (entries in use are re-inserted: dict order)."""
        d = self._run_entries()
        d[ckey] = entry
        while len(d) > _MAX_ENTRIES:
            d.pop(next(iter(d)), None)

    def _remember_run(self, ckey, ins, names, arrays, outs, result, bufs, skey):
        """Keep a successful run's C tensors for its signature (_RunEntry):
        only when every input is a plain array and every output a tensor of
        a numeric dtype (others take the general path each run)."""
        if any(isinstance(a, (_SeqInput, _StrInput)) for a in arrays):
            return
        spec = []
        for j, r in enumerate(result):
            t = outs[j]
            if isinstance(bufs[j], _Sequence) or t.dtype in (0, STRING):
                return
            spec.append((dtype_to_numpy(t.dtype), r.shape, r.nbytes, t.dtype))
        e = _RunEntry(ins, len(arrays), names)
        e.set_outputs(outs, spec)
        e.shapes = (skey, self._shape_cache[skey])
        self._add_entry(ckey, e)

    def _run_cached(self, session, ckey, entry, arrays):
        """A run of a signature seen before (_RunEntry): only data pointers
        change. None when the outputs did not fit (shapes that depend on
        values): the general path then runs it, with its retry."""
        self._use_entry(entry, arrays)
        bufs = entry.new_outputs()
        st = lib.cge_session_run_graph(session, _GRAPH_ID, entry.ins, entry.n_in, entry.outs,
                                       entry.n_out)
        if st != 0:
            err = _last_error("run")
            if err.layer == "session" and "the buffer given has" in err.message:
                return None
            self._entries[ckey] = entry
            raise err
        if entry.outputs_match():
            self._entries[ckey] = entry
            self._last_shapes = entry.shapes
            return bufs
        # Value-dependent shapes changed: read what the run wrote, and let
        # the next run of this signature take the general path again.
        result = _collect(entry.outs, bufs, entry.n_out)
        skey = entry.shapes[0]
        self._remember_shapes(skey, [(entry.outs[j].dtype, tuple(r.shape))
                                     for j, r in enumerate(result)])
        self._last_shapes = (skey, self._shape_cache[skey])
        return result

    def _use_entry(self, entry, arrays):
        """Point entry's inputs at arrays; the arrays of the entry used last
        (if another) are let go, so that at most one run's inputs are held."""
        last = getattr(self, "_last_entry", None)
        if last is not entry:
            if last is not None:
                last.release()
            self._last_entry = entry
        entry.set_inputs(arrays)

    def _predict_shapes(self, key, idx):
        """Output (dtype, shape) guesses for a signature not seen before, so
        that its first run needs no refused try (a run whose output buffers
        are too small fails, reports the shapes, and is run again). Static
        outputs are their declared shape. A dynamic dim follows the last
        run's signature with the same input names: it was some input dim
        there plus an offset, and that input dim's change since gives the
        guess (a decode step's present is its past + 1); where several
        changed input dims could explain it (each no larger than the dim),
        the closest one does, the largest guess on a tie, since a larger
        buffer is accepted (the run writes the real shape); a dim no changed
        input explains stays. A guess too small costs the refused try that
        tells the real shapes, as with no guess."""
        guess, changed = [], None
        last = getattr(self, "_last_shapes", None)
        usable = (last is not None and last[0][1] == key[1] and
                  [k[0] for k in last[0][0] if isinstance(k, tuple)] ==
                  [k[0] for k in key[0] if isinstance(k, tuple)])
        for j, k in enumerate(idx):
            o = self._outputs[k]
            static = o.shape is not None and all(isinstance(d, int) for d in o.shape)
            if static:
                guess.append((o.dtype, tuple(o.shape)))
                continue
            prev = last[1][j] if usable else None
            if prev is None or prev[0] == 0:
                guess.append(None)
                continue
            if changed is None:
                # the input dims that changed since the last run: (was, now)
                # (each pair once: a decode step's caches all grow the same way)
                changed = sorted({(a, b) for old, new in zip(last[0][0], key[0])
                                  if isinstance(old, tuple) and len(old[1]) == len(new[1])
                                  for a, b in zip(old[1], new[1]) if a != b})
            dims = []
            for was in prev[1]:
                gap, best = None, was
                for a, b in changed:
                    if a > was:
                        continue
                    if gap is None or was - a < gap:
                        gap, best = was - a, was - a + b
                    elif was - a == gap:
                        best = max(best, was - a + b)
                dims.append(best)
            guess.append((prev[0], tuple(dims)))
        return guess

    def _input_tensors(self, input_feed):
        """The C tensors of ``input_feed`` ({name: array or OrtValue}), read
        in place where the array is C-contiguous; with the arrays and the
        encoded names they point into (keep them until the run ends)."""
        arrays, names = [], []
        ins = (_lib.Tensor * max(1, len(input_feed)))()
        declared = {a.name: a.dtype for a in self._inputs}
        vtypes = {a.name: getattr(a, "value_type", _lib.TYPE_TENSOR) for a in self._inputs}
        for i, (name, value) in enumerate(input_feed.items()):
            if vtypes.get(name, _lib.TYPE_TENSOR) != _lib.TYPE_TENSOR:
                # A list of arrays (sequence), an array or None (optional):
                # the C tensor's data is a cge_sequence holding copies.
                seq, skey = _Sequence.from_value(name, vtypes[name], declared[name], value)
                nb = name.encode()
                arrays.append(_SeqInput(seq, skey))
                names.append(nb)
                ins[i].name = nb
                ins[i].dtype = lib.cge_sequence_dtype(seq.handle)
                ins[i].shape = _make_shape(())
                ins[i].data = seq.handle
                continue
            if hasattr(value, "ortvalue_from_numpy"):
                value = value.numpy()
            a = np.asarray(value)  # keeps rank 0 (ascontiguousarray would not)
            if not a.flags["C_CONTIGUOUS"]:
                a = np.ascontiguousarray(a)
            if a.dtype == np.uint16 and declared.get(name) == BFLOAT16:
                dt = BFLOAT16  # bfloat16 travels as its uint16 bits
            else:
                dt = numpy_to_dtype(a.dtype)
            nb = name.encode()
            names.append(nb)
            ins[i].name = nb
            ins[i].dtype = dt
            ins[i].shape = _make_shape(a.shape)
            if dt == STRING:
                si = _StrInput(a)
                arrays.append(si)
                ins[i].data = si.elems.ctypes.data if si.nbytes else None
                ins[i].bytes = si.nbytes
                continue
            arrays.append(a)
            ins[i].data = a.ctypes.data if a.nbytes else None
            ins[i].bytes = a.nbytes
        return ins, arrays, names

    def _run_bound(self, input_feed, output_arrays, run_options=None):
        """One run with I/O binding (cge_run_options.bind_buffers): the kernels
        read ``input_feed``'s arrays and write ``output_arrays`` ({name:
        array}, each C-contiguous, of the output's exact dtype and shape)
        themselves, with no copy. The arrays must not change during the run
        (it is synchronous)."""
        if run_options is not None and getattr(run_options, "terminate", False):
            raise Error("[session] the run was refused: RunOptions.terminate is set", "session",
                        "CGE_ERR_STATE")
        arrays, sig = _plain_feed(input_feed)
        ckey = None
        if sig is not None:
            dests, okey = list(output_arrays.values()), []
            for name, a in output_arrays.items():
                f = a.flags if type(a) is _NDARRAY else None
                if f is None or not f.c_contiguous or not f.writeable:
                    okey = None   # the general path says what is wrong
                    break
                okey.append((name, a.dtype, a.shape))
            if okey is not None:
                ckey = (sig, tuple(okey))
                entry = self._run_entries().pop(ckey, None)
                if entry is not None:
                    return self._run_bound_cached(ckey, entry, arrays, dests, output_arrays,
                                                  run_options)
        ins, keep, names = self._input_tensors(input_feed)
        outs = (_lib.Tensor * max(1, len(output_arrays)))()
        for j, (name, a) in enumerate(output_arrays.items()):
            if name not in self._out_index:
                raise Error("[session] the model has no output named '%s' (its outputs: %s)"
                            % (name, ", ".join(o.name for o in self._outputs)), "session",
                            "CGE_ERR_NOT_FOUND")
            if not isinstance(a, np.ndarray) or not a.flags["C_CONTIGUOUS"] or \
                    not a.flags["WRITEABLE"]:
                raise Error("[session] the buffer bound for output '%s' must be a writable "
                            "C-contiguous numpy array" % name, "session", "CGE_ERR_INVALID_ARG")
            nb = name.encode()
            names.append(nb)
            outs[j].name = nb
            outs[j].data, outs[j].bytes = (a.ctypes.data if a.nbytes else None), a.nbytes
        session = self._enter("run")
        try:
            with _RunScope(run_options, None):
                _check(lib.cge_session_run(session, _GRAPH_ID, ins, len(input_feed), outs,
                                           len(output_arrays), _BIND_OPTIONS_REF), "run")
        finally:
            self._leave()
        _check_bound(outs, output_arrays)
        if ckey is not None and not any(isinstance(a, (_SeqInput, _StrInput)) for a in keep):
            e = _RunEntry(ins, len(keep), names)
            e.set_bound(outs, list(output_arrays.values()),
                        [(outs[j].dtype, outs[j].shape.rank, list(a.shape))
                         for j, a in enumerate(output_arrays.values())])
            self._add_entry(ckey, e)
        return [output_arrays[n] for n in output_arrays]

    def _run_bound_cached(self, ckey, entry, arrays, dests, output_arrays, run_options):
        """_run_bound for a signature (and output dtypes and shapes) seen
        before: only data pointers change (_RunEntry)."""
        try:
            session = self._enter("run")
            try:
                with _RunScope(run_options, None):
                    self._use_entry(entry, arrays)
                    entry.set_bound_outputs(dests)
                    _check(lib.cge_session_run(session, _GRAPH_ID, entry.ins, entry.n_in,
                                               entry.outs, entry.n_out, _BIND_OPTIONS_REF), "run")
            finally:
                self._leave()
            if not entry.outputs_match():
                _check_bound(entry.outs, output_arrays)
        finally:
            self._entries[ckey] = entry
        return dests

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
