# The functional graph builder for Python (cge.GraphBuilder): one method per
# registered operator, made at run time from the registry's schemas (so ops of
# libraries loaded later appear too), plus cge.Graph, cge.Session over built
# graphs and cge.load_op_library. ctypes over es.h, op.h and session.h.
"""Build graphs in Python and run them::

    b = cge.GraphBuilder("x_plus_2y")
    x = b.input("x", "float32", [8, 2048])
    y = b.input("y", "float32", [8, 2048])
    b.output(b.add(b.add(x, y), y), "z")
    s = cge.Session(b.build())
    z, = s.run(None, {"x": xa, "y": ya})
"""
import ctypes
import os
import threading

import numpy as np

from . import _lib, errors
from ._lib import lib
from ._session import (_GRAPH_ID, _RUN_MODES, Error, InferenceSession, _check, _dist, _last_error,
                       _make_shape, _shape_list, dtype_to_numpy, numpy_to_dtype)

_P = ctypes.POINTER
c_int32, c_int64, c_uint32 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32
c_char_p, c_void_p, c_enum = ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int


# ---- mirrors of op.h, graph.h, es.h, session.h structs ----------------------

class ArgDef(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("flags", c_uint32), ("dtypes", c_uint32), ("doc", c_char_p)]


class AttrDef(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("kind", c_enum), ("required", ctypes.c_bool),
                ("default_i", c_int64), ("default_f", ctypes.c_float), ("default_s", c_char_p),
                ("doc", c_char_p)]


class OpDef(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("domain", c_char_p), ("since_version", c_int32),
                ("end_version", c_int32), ("inputs", _P(ArgDef)), ("num_inputs", c_int32),
                ("outputs", _P(ArgDef)), ("num_outputs", c_int32), ("attrs", _P(AttrDef)),
                ("num_attrs", c_int32), ("infer", c_void_p), ("kernels", c_void_p),
                ("num_kernels", c_int32), ("doc", c_char_p)]


class Attr(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("kind", c_enum), ("i", c_int64), ("f", ctypes.c_float),
                ("s", c_char_p), ("t", _P(_lib.Tensor)), ("g", c_void_p), ("n", c_int64),
                ("ints", _P(c_int64)), ("floats", _P(ctypes.c_float)), ("strings", _P(c_char_p)),
                ("tensors", _P(_lib.Tensor)), ("graphs", _P(c_void_p))]


class Handle(ctypes.Structure):   # cge_t
    _fields_ = [("id", c_int32)]


RunOptions = _lib.RunOptions  # cge_run_options: one prototype for cge_session_run


ARG_OPTIONAL, ARG_VARIADIC = 1, 2
ATTR_FLOAT, ATTR_INT, ATTR_STRING, ATTR_TENSOR, ATTR_GRAPH = 1, 2, 3, 4, 5
ATTR_FLOATS, ATTR_INTS, ATTR_STRINGS = 6, 7, 8
NONE = Handle(-1)

_protos = {
    "cge_op_count": (c_int32, []),
    "cge_op_at": (_P(OpDef), [c_int32]),
    "cge_op_find": (_P(OpDef), [c_char_p, c_char_p, c_int32]),
    "cge_op_origin": (c_char_p, [_P(OpDef)]),
    "cge_load_op_library": (c_enum, [c_char_p]),
    "cge_builder_create": (c_void_p, [c_char_p]),
    "cge_builder_destroy": (None, [c_void_p]),
    "cge_builder_status": (c_enum, [c_void_p]),
    "cge_builder_error_message": (c_char_p, [c_void_p]),
    "cge_builder_set_next_name": (None, [c_void_p, c_char_p]),
    "cge_builder_finish": (c_enum, [c_void_p, _P(c_void_p)]),
    "cge_es_desc": (c_enum, [c_void_p, Handle, _P(_lib.TensorDesc)]),
    "cge_es_name": (c_char_p, [c_void_p, Handle]),
    "cge_es_input": (Handle, [c_void_p, c_char_p, c_enum, _lib.Shape]),
    "cge_es_constant": (Handle, [c_void_p, c_char_p, c_enum, _lib.Shape, c_void_p]),
    "cge_es_output": (c_enum, [c_void_p, Handle, c_char_p]),
    "cge_es_op": (c_enum, [c_void_p, c_char_p, c_char_p, _P(Handle), c_int32, _P(Attr), c_int32,
                           _P(Handle), c_int32]),
    "cge_graph_clone": (c_enum, [c_void_p, _P(c_void_p)]),
    "cge_graph_num_inputs": (c_int32, [c_void_p]),
    "cge_graph_input": (c_char_p, [c_void_p, c_int32]),
    "cge_graph_num_outputs": (c_int32, [c_void_p]),
    "cge_graph_output": (c_char_p, [c_void_p, c_int32]),
    "cge_graph_num_nodes": (c_int32, [c_void_p]),
    "cge_graph_node": (c_void_p, [c_void_p, c_int32]),
    "cge_graph_name": (c_char_p, [c_void_p]),
    "cge_node_op_type": (c_char_p, [c_void_p]),
    "cge_node_domain": (c_char_p, [c_void_p]),
    "cge_node_name": (c_char_p, [c_void_p]),
}
for _name, (_res, _args) in _protos.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


def _s(b):
    return b.decode() if b is not None else None


# ---- operator libraries and schemas -----------------------------------------

_loaded = {}
_load_lock = threading.Lock()


def load_op_library(path):
    """Load a custom operator library (a shared object with the cge entry
    point) and register its operators. Returns the ``(domain, name)`` pairs it
    registered; loading the same file again returns them without reloading."""
    real = os.path.realpath(os.fspath(path))
    with _load_lock:
        if real in _loaded:
            return list(_loaded[real])
        # The library resolves cge's symbols from the process: make libcge's
        # global (ctypes opened it RTLD_LOCAL). dlopen promotes an open library.
        ctypes.CDLL(_lib.path, mode=ctypes.RTLD_GLOBAL)
        before = lib.cge_op_count()
        _check(lib.cge_load_op_library(os.fsencode(real)), "load_op_library")
        ops = [(_s(d.contents.domain), _s(d.contents.name))
               for d in (lib.cge_op_at(i) for i in range(before, lib.cge_op_count()))]
        _loaded[real] = ops
        _registry.cache_clear()
        return list(ops)


class Schema:
    """An operator's schema as registered: ``name``, ``domain``, ``inputs``
    [(name, optional, variadic)], ``outputs`` [names], ``attrs`` {name: kind},
    ``required`` attribute names, ``origin`` (the registering library)."""

    def __init__(self, ptr):
        d = ptr.contents
        self.name, self.domain = _s(d.name), _s(d.domain) or ""
        self.since_version = d.since_version
        self.inputs = [(_s(d.inputs[i].name), bool(d.inputs[i].flags & ARG_OPTIONAL),
                        bool(d.inputs[i].flags & ARG_VARIADIC)) for i in range(d.num_inputs)]
        self.input_dtypes = [d.inputs[i].dtypes for i in range(d.num_inputs)]
        self.outputs = [_s(d.outputs[i].name) for i in range(d.num_outputs)]
        self.optional_outputs = [bool(d.outputs[i].flags & ARG_OPTIONAL)
                                 for i in range(d.num_outputs)]
        self.attrs = {_s(d.attrs[i].name): d.attrs[i].kind for i in range(d.num_attrs)}
        self.required = [_s(d.attrs[i].name) for i in range(d.num_attrs) if d.attrs[i].required]
        self.origin = _s(lib.cge_op_origin(ptr))
        self.doc = _s(d.doc) or ""

    def default_outputs(self):
        n = 1
        for i, opt in enumerate(self.optional_outputs):
            if not opt:
                n = i + 1
        return n

    def __repr__(self):
        return "Schema(%s%s(%s) -> %s)" % (self.domain + "::" if self.domain else "", self.name,
                                            ", ".join(n for n, _, _ in self.inputs),
                                            ", ".join(self.outputs))


def snake(name):
    """"LogSoftmax" -> "log_softmax", "MatMul" -> "mat_mul" (as tools/gen_es.c)."""
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i > 0 and (name[i - 1].islower() or (
                i + 1 < len(name) and name[i + 1].islower() and name[i - 1].isupper())):
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def schema(name, domain=""):
    """The newest schema of (domain, name); SchemaError if there is none."""
    p = lib.cge_op_find(domain.encode(), name.encode(), 0)
    if not p:
        raise _last_error("op lookup")
    return Schema(p)


class _Registry:
    """snake_case name -> (domain, name), rebuilt when the registry grows."""

    def __init__(self):
        self._count, self._map = -1, {}

    def cache_clear(self):
        self._count = -1

    def get(self):
        n = lib.cge_op_count()
        if n != self._count:
            m = {}
            for i in range(n):
                d = lib.cge_op_at(i).contents
                key = (_s(d.domain) or "", _s(d.name))
                sn = snake(key[1])
                # The default domain wins a clash; then the first registered.
                if sn not in m or (key[0] == "" and m[sn][0] != ""):
                    m[sn] = key
            self._map, self._count = m, n
        return self._map


_registry = _Registry()


def operators():
    """Every registered operator as ``{snake_name: (domain, name)}``."""
    return dict(_registry.get())


# ---- graphs -------------------------------------------------------------------

class Graph:
    """A built graph (owns its cge_graph). ``inputs``/``outputs`` are names;
    ``nodes()`` lists (name, op_type, domain)."""

    def __init__(self, ptr):
        self._ptr = ptr

    @property
    def ptr(self):
        return self._ptr

    @property
    def name(self):
        return _s(lib.cge_graph_name(self._ptr))

    @property
    def inputs(self):
        return [_s(lib.cge_graph_input(self._ptr, i)) for i in range(lib.cge_graph_num_inputs(self._ptr))]

    @property
    def outputs(self):
        return [_s(lib.cge_graph_output(self._ptr, i))
                for i in range(lib.cge_graph_num_outputs(self._ptr))]

    def nodes(self):
        out = []
        for i in range(lib.cge_graph_num_nodes(self._ptr)):
            n = lib.cge_graph_node(self._ptr, i)
            out.append((_s(lib.cge_node_name(n)), _s(lib.cge_node_op_type(n)),
                        _s(lib.cge_node_domain(n)) or ""))
        return out

    def __del__(self):
        p = getattr(self, "_ptr", None)
        if p:
            lib.cge_graph_destroy(p)
            self._ptr = None

    def __repr__(self):
        return "Graph(%r, %d nodes, inputs=%r, outputs=%r)" % (
            self.name, lib.cge_graph_num_nodes(self._ptr), self.inputs, self.outputs)


def _dtype_code(dtype):
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        return dtype
    if isinstance(dtype, str):
        try:
            return numpy_to_dtype(np.dtype({"bfloat16": "uint16"}.get(dtype, dtype)))
        except TypeError:
            pass
    try:
        return numpy_to_dtype(np.dtype(dtype))
    except TypeError:
        raise errors.GraphError("[graph] unknown dtype %r" % (dtype,), "graph",
                                "CGE_ERR_DTYPE") from None


class Value:
    """A value in a builder: ``name``, ``dtype`` (numpy), ``shape`` (None for
    dynamic dims). Arithmetic operators build Add/Sub/Mul/Div/MatMul nodes."""

    __slots__ = ("builder", "id")

    def __init__(self, builder, handle_id):
        self.builder, self.id = builder, handle_id

    def _desc(self):
        d = _lib.TensorDesc()
        _check(lib.cge_es_desc(self.builder._b, Handle(self.id), ctypes.byref(d)), "es_desc")
        return d

    @property
    def name(self):
        return _s(lib.cge_es_name(self.builder._b, Handle(self.id)))

    @property
    def dtype(self):
        return dtype_to_numpy(self._desc().dtype)

    @property
    def dtype_code(self):
        return self._desc().dtype

    @property
    def shape(self):
        return tuple(_shape_list(self._desc().shape))

    def __add__(self, o):
        return self.builder.op("Add", self, o)

    def __radd__(self, o):
        return self.builder.op("Add", o, self)

    def __sub__(self, o):
        return self.builder.op("Sub", self, o)

    def __rsub__(self, o):
        return self.builder.op("Sub", o, self)

    def __mul__(self, o):
        return self.builder.op("Mul", self, o)

    def __rmul__(self, o):
        return self.builder.op("Mul", o, self)

    def __truediv__(self, o):
        return self.builder.op("Div", self, o)

    def __matmul__(self, o):
        return self.builder.op("MatMul", self, o)

    def __neg__(self):
        return self.builder.op("Neg", self)

    def __repr__(self):
        try:
            return "Value(%r, %s%s)" % (self.name, self.dtype, list(self.shape))
        except Error:
            return "Value(#%d)" % self.id


class GraphBuilder:
    """The functional builder. ``b.<op>(inputs..., attr=value)`` exists for
    every registered operator (snake_case of its name: ``b.mat_mul``,
    ``b.add_custom`` once its library is loaded); ``b.op(type, *inputs,
    domain=..., num_outputs=..., **attrs)`` reaches any. Each call runs meta at
    once: a bad shape raises MetaError at the call that made it. Inputs may be
    Values, None (absent optional input), or numbers/arrays (constants)."""

    def __init__(self, name="graph"):
        self._b = lib.cge_builder_create(name.encode())
        if not self._b:
            raise errors.GraphError("[graph] out of memory creating a builder", "graph",
                                    "CGE_ERR_NO_MEMORY")
        self._keep = []

    def __del__(self):
        b = getattr(self, "_b", None)
        if b:
            lib.cge_builder_destroy(b)
            self._b = None

    def _fail(self, context):
        msg = _s(lib.cge_builder_error_message(self._b)) or ""
        err = _last_error(context)
        if msg and msg != str(err):  # the builder keeps the first error
            layer = msg[1:msg.index("]")] if msg.startswith("[") and "]" in msg else ""
            return errors.make(msg, layer, err.status)
        return err

    def _value(self, h, context):
        if h.id < 0:
            raise self._fail(context)
        return Value(self, h.id)

    def input(self, name, dtype, shape):
        """A graph input; ``shape`` may hold None (or names) for dynamic dims."""
        return self._value(lib.cge_es_input(self._b, name.encode(), _dtype_code(dtype),
                                            _make_shape(shape)), "input '%s'" % name)

    def constant(self, value, dtype=None, name=None, bits_of=None):
        """A constant from an array-like (copied). ``bits_of``: a cge dtype
        code whose elements ``value`` holds as raw bits of its width
        (bfloat16, which numpy has not, as uint16)."""
        a = np.asarray(value, dtype=dtype)
        a = np.ascontiguousarray(a) if a.ndim else a.copy()  # ascontiguousarray makes rank >= 1
        code = numpy_to_dtype(a.dtype) if bits_of is None else bits_of
        h = lib.cge_es_constant(self._b, name.encode() if name else None,
                                code, _make_shape(a.shape),
                                a.ctypes.data if a.nbytes else None)
        return self._value(h, "constant")

    def output(self, value, name=None):
        """Mark a value as a graph output, renamed to ``name`` if given."""
        self._own(value)
        if lib.cge_es_output(self._b, Handle(value.id), name.encode() if name else None):
            raise self._fail("output")
        return value

    def set_next_name(self, name):
        lib.cge_builder_set_next_name(self._b, name.encode())

    def _own(self, v):
        if not isinstance(v, Value) or v.builder is not self:
            raise errors.GraphError("[graph] %r is not a value of this builder" % (v,), "graph",
                                    "CGE_ERR_INVALID_ARG")

    def _as_input(self, v, like):
        if v is None:
            return NONE
        if isinstance(v, Value):
            self._own(v)
            return Handle(v.id)
        if isinstance(v, (bool, int, float)):
            # Python numbers take the dtype of the op's other inputs.
            dt = like if like is not None else np.float32 if isinstance(v, float) else np.int64
            a = np.asarray(v, dtype=dt)
        else:
            a = np.asarray(v)
        return Handle(self.constant(a).id)

    def _attr(self, name, value, kind, keep):
        a = Attr()
        nb = name.encode()
        keep.append(nb)
        a.name = nb
        if kind is None:  # not in the schema: guess, and let cge say it is unknown
            kind = (ATTR_FLOAT if isinstance(value, float) else ATTR_STRING
                    if isinstance(value, str) else ATTR_INTS if isinstance(value, (list, tuple))
                    else ATTR_INT)
        a.kind = kind
        if kind == ATTR_INT:
            a.i = int(value)
        elif kind == ATTR_FLOAT:
            a.f = float(value)
        elif kind == ATTR_STRING:
            s = value.encode() if isinstance(value, str) else bytes(value)
            keep.append(s)
            a.s = s
        elif kind in (ATTR_INTS, ATTR_FLOATS):
            vals = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
            if kind == ATTR_INTS:
                arr = (c_int64 * max(1, len(vals)))(*[int(x) for x in vals])
                a.ints = arr
            else:
                arr = (ctypes.c_float * max(1, len(vals)))(*[float(x) for x in vals])
                a.floats = arr
            keep.append(arr)
            a.n = len(vals)
        elif kind == ATTR_STRINGS:
            bs = [x.encode() for x in value]
            arr = (c_char_p * max(1, len(bs)))(*bs)
            keep.extend([bs, arr])
            a.strings, a.n = arr, len(bs)
        elif kind == ATTR_TENSOR:
            t = np.asarray(value)
            t = np.ascontiguousarray(t) if t.ndim else t.copy()
            tt = _lib.Tensor(None, numpy_to_dtype(t.dtype), _make_shape(t.shape),
                             t.ctypes.data if t.nbytes else None, t.nbytes)
            keep.extend([t, tt])
            a.t = ctypes.pointer(tt)
        elif kind == ATTR_GRAPH:
            a.g = value.ptr
            keep.append(value)
        else:
            raise errors.SchemaError("[schema] attribute '%s': kind %d is not supported from "
                                     "Python" % (name, kind), "schema", "CGE_ERR_UNSUPPORTED")
        return a

    def op(self, op_type, *inputs, domain="", num_outputs=None, name=None, **attrs):
        """Add any registered operator; returns a Value, or a tuple of them
        when the op has several outputs."""
        sch = schema(op_type, domain)
        like = None
        for v in inputs:
            if isinstance(v, Value):
                like = v.dtype
                break
        handles = [self._as_input(v, like) for v in inputs]
        keep = []
        attr_list = [self._attr(k, v, sch.attrs.get(k), keep) for k, v in attrs.items()
                     if v is not None]
        n_out = num_outputs if num_outputs is not None else sch.default_outputs()
        ins = (Handle * max(1, len(handles)))(*handles)
        ats = (Attr * max(1, len(attr_list)))(*attr_list)
        outs = (Handle * max(1, n_out))()
        if name:
            self.set_next_name(name)
        st = lib.cge_es_op(self._b, op_type.encode(), domain.encode(), ins, len(handles), ats,
                           len(attr_list), outs, n_out)
        del keep
        if st:
            raise self._fail(op_type)
        vals = tuple(Value(self, outs[i].id) for i in range(n_out))
        return vals[0] if n_out == 1 else vals

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        key = _registry.get().get(attr)
        if key is None:
            raise AttributeError("GraphBuilder has no operator '%s' (registered operators: "
                                 "cge.builder.operators())" % attr)
        domain, op_type = key

        def call(*inputs, **kw):
            return self.op(op_type, *inputs, domain=domain, **kw)
        sch = schema(op_type, domain)
        call.__name__ = attr
        call.__doc__ = "%s%s(%s) -> %s; attributes: %s. %s" % (
            domain + "::" if domain else "", op_type, ", ".join(n for n, _, _ in sch.inputs),
            ", ".join(sch.outputs), ", ".join(sch.attrs) or "none", sch.doc)
        return call

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_registry.get()))

    def build(self):
        """Finish: the verified Graph (the builder can build only once)."""
        g = c_void_p()
        if lib.cge_builder_finish(self._b, ctypes.byref(g)):
            raise self._fail("build")
        return Graph(g)


# ---- sessions over built graphs -----------------------------------------------

class Session(InferenceSession):
    """A cge session over a Graph (from GraphBuilder or cge.torch): the same
    ``run(output_names, feeds)``, ``get_inputs()``, ``get_outputs()`` as
    InferenceSession. ``run_mode``: "eager", "plan", "replay" or None.
    ``sess_options`` (cge.SessionOptions, may be None): its
    intra_op_num_threads and distributed fields (dist, dist_tp, dist_pp,
    dist_micro_batches, dist_timeout_ms, ...) apply."""

    def __init__(self, graph, run_mode=None, num_threads=0, capture_limit=0, sess_options=None):
        if not isinstance(graph, Graph):
            raise errors.GraphError("[graph] Session takes a cge.Graph (from GraphBuilder.build)",
                                    "graph", "CGE_ERR_INVALID_ARG")
        if run_mode not in _RUN_MODES:
            raise errors.SessionError("[session] unknown run mode %r (want eager, plan or replay)"
                                      % run_mode, "session", "CGE_ERR_INVALID_ARG")
        self._session = c_void_p()
        self._init_lifecycle()
        self._shape_cache = {}
        self.run_mode = run_mode
        if sess_options is not None and sess_options.intra_op_num_threads and not num_threads:
            num_threads = int(sess_options.intra_op_num_threads)
        so = _lib.SessionOptions(None, int(num_threads), _RUN_MODES[run_mode], int(capture_limit))
        if sess_options is not None:
            # the distributed fields (dist, dist_tp, dist_pp, ...: docs/distributed.md)
            _dist(so, sess_options)
        _check(lib.cge_session_create(ctypes.byref(so), ctypes.byref(self._session)))
        _check(lib.cge_session_add_graph(self._session, _GRAPH_ID, graph.ptr))
        _check(lib.cge_session_compile_graph(self._session, _GRAPH_ID))
        ni, no = c_int32(), c_int32()
        _check(lib.cge_session_num_io(self._session, _GRAPH_ID, ctypes.byref(ni),
                                      ctypes.byref(no)))
        self._inputs = [self._desc(lib.cge_session_input_desc, i) for i in range(ni.value)]
        self._outputs = [self._desc(lib.cge_session_output_desc, i) for i in range(no.value)]
        self._out_index = {o.name: i for i, o in enumerate(self._outputs)}

    def run_raw(self, inputs, num_inputs, outputs, num_outputs, mode=0):
        """Run with prepared ctypes arrays of cge_tensor (the torch front end's
        zero-copy path); raises the layer's exception on failure."""
        opts = RunOptions()
        opts.mode = mode
        session = self._enter("run")
        try:
            st = lib.cge_session_run(session, _GRAPH_ID, inputs, num_inputs, outputs,
                                     num_outputs, ctypes.byref(opts))
            if st:
                raise _last_error("run")
        finally:
            self._leave()


__all__ = ["GraphBuilder", "Graph", "Value", "Session", "Schema", "load_op_library", "schema",
           "operators", "snake"]
