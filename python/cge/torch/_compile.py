# cge.torch.compile: capture a module with make_fx (aten level), convert its
# nodes through the converter registry into cge graphs (one per run of
# convertible nodes; the rest run in PyTorch between them: graph breaks),
# compile them in cge sessions, and return a callable guarded on the inputs'
# shapes, dtypes and strides that recompiles, or past a limit runs eagerly.
# dynamic=...: one compiled module for every size of the marked dims
# (_dynamic.py: traced at several sizes, generalised where they agree).
import ctypes
import operator
import threading
import warnings

import numpy as np
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from .. import _lib
from .. import builder as _b
from ..errors import ConverterError, Error
from . import _dynamic
from ._registry import ConversionContext, cge_dtype, find_converter, op_name

_MODES = ("replay", "plan", "eager")


# ---- capture ----------------------------------------------------------------------

def capture(module, example_inputs):
    """An aten-level torch.fx.GraphModule of ``module`` on these inputs, in
    value semantics (in-place ops rebound) and without dead nodes. A module
    whose float16/bfloat16 ops PyTorch's CPU cannot run (its addmm, conv and
    friends have no Half kernels in 1.13) is traced as a float32 copy between
    casts: ``_widened``."""
    fn = module
    if isinstance(module, torch.nn.Module):
        def fn(*args):
            return module(*args)
    try:
        gm = _trace(fn, example_inputs)
    except RuntimeError as e:
        half = _half_without_kernel(module, e)
        if half is None:
            raise
        gm = _trace(_widened(module, half), example_inputs)
    _functionalize(gm.graph)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _trace(fn, example_inputs):
    # Traced with autograd on: under no_grad PyTorch swaps some modules
    # (TransformerEncoder) for fused inference kernels that have no aten
    # decomposition.
    with torch.enable_grad():
        gm = make_fx(fn)(*example_inputs)
        if _writes_through_view(gm.graph):
            # `m[a:b] = v` writes into m through a view: rebinding readers
            # (below) cannot express that (m's later readers would read the
            # unwritten m), so such modules are traced functionalized
            # (slice_scatter and friends instead of writes).
            from functorch import functionalize
            gm = make_fx(functionalize(fn))(*example_inputs)
    return gm


_HALF_NAMES = {"'Half'": torch.float16, "'BFloat16'": torch.bfloat16}


def _half_without_kernel(module, error):
    """The half dtype of a module's weights when tracing it failed for want
    of a CPU kernel of that dtype ("... not implemented for 'Half'"), else
    None."""
    if not isinstance(module, torch.nn.Module) or "not implemented for" not in str(error):
        return None
    for name, dt in _HALF_NAMES.items():
        if name in str(error) and any(t.dtype == dt for t in
                                      list(module.parameters()) + list(module.buffers())):
            return dt
    return None


def _widened(module, half):
    """A function computing ``module`` in float32: a copy of it whose `half`
    parameters and buffers are float32 (exactly: every half value is one),
    reading its `half` inputs cast to float32 and giving its float32 outputs
    cast back to `half`. As cge's widen_half pass runs a half ONNX model:
    values between operators are not rounded to half."""
    import copy
    m32 = copy.deepcopy(module)
    with torch.no_grad():
        for t in list(m32.parameters()) + list(m32.buffers()):
            if t.dtype == half:
                t.data = t.data.float()

    def narrow(t):
        return t.to(half) if torch.is_tensor(t) and t.dtype == torch.float32 else t

    def fn(*args):
        wide = [a.float() if torch.is_tensor(a) and a.dtype == half else a for a in args]
        return torch.utils._pytree.tree_map(narrow, m32(*wide))
    return fn


def _constant(b, t):
    """A cge constant of tensor t (bfloat16, which numpy has not, by its bits)."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return b.constant(t.view(torch.int16).numpy().view(np.uint16),
                          bits_of=cge_dtype(torch.bfloat16))
    return b.constant(t.numpy())


def _is_view(n):
    """An fx node whose result aliases its first argument (view, slice, ...)."""
    if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
        return False
    rets = n.target._schema.returns
    return bool(rets) and rets[0].alias_info is not None and not rets[0].alias_info.is_write


def _writes_through_view(graph):
    """True where an in-place op writes into a view of another value."""
    for n in graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        args = n.target._schema.arguments
        writes = bool(args) and args[0].alias_info is not None and args[0].alias_info.is_write
        if writes and n.args and isinstance(n.args[0], torch.fx.Node) and _is_view(n.args[0]):
            return True
    return False


def _functionalize(graph):
    """``relu_(x)`` returns x mutated: later readers of x read the in-place
    node instead, so every node is a pure function of its inputs."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    for n in list(graph.nodes):
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        name = n.target._schema.name
        if not name.endswith("_") or not n.args or not isinstance(n.args[0], torch.fx.Node):
            continue
        src = n.args[0]
        if src.op == "placeholder":
            raise ConverterError("[converter] %s (node '%s') writes into graph input '%s': cge "
                                 "does not write back into inputs" % (op_name(n.target), n.name,
                                                                      src.target),
                                 "converter", "CGE_ERR_UNSUPPORTED")
        for user in list(src.users):
            if user is not n and order[user] > order[n]:
                user.replace_input_with(src, n)


# ---- conversion --------------------------------------------------------------------

def _is_tensor_meta(m):
    return hasattr(m, "shape") and hasattr(m, "dtype")


class _Segment:
    """Consecutive convertible nodes compiled into one cge graph."""

    def __init__(self, nodes):
        self.nodes = nodes
        self.inputs = []       # fx nodes read from outside (placeholders, earlier steps)
        self.outputs = []      # fx nodes read after the segment
        self.session = None
        self.out_meta = []     # (torch dtype, shape) per output


class _DynFailure(Exception):
    """A dynamic conversion that cannot hold for every size: the symbols it
    depends on (``deps``) become static. ``node``: trace 0's fx node."""

    def __init__(self, node, deps, why):
        super().__init__(why)
        self.node, self.deps, self.why = node, frozenset(deps), why


def _input_dims(spec, node0):
    """A segment input's declared dims under a Spec: sizes, CGE_DIM_SYMBOL(k)
    where the dim is symbol k in every trace, else -1 (unknown)."""
    out = []
    for d in spec.node_dims(node0):
        if not isinstance(d, _dynamic.Sym):
            out.append(int(d))
            continue
        k = next((k for k in range(len(spec.symbols)) if d.values == spec.symbol_values(k)),
                 None)
        out.append(_lib.DIM_DYNAMIC if k is None else _dynamic.dim_symbol(k))
    return out


def _convert_nodes(nodes, gm, name, outputs_wanted=None, probe=False, spec=None, trace=0):
    """Build a cge graph from `nodes` (in order). Values read from outside
    become graph inputs (their traced shapes), get_attr nodes constants.
    Returns (graph, inputs, outputs); with `probe`, only converts. With a
    Spec: a dynamic conversion at trace `trace` (`nodes` are trace 0's; the
    builder records what it builds in .log); returns (graph, inputs,
    outputs, log) (graph None but at trace 0)."""
    if spec is not None:
        m = spec.maps[trace]
        nodes = [m[n] for n in nodes]
        if outputs_wanted is not None:
            outputs_wanted = [m[n] for n in outputs_wanted]
        gm = spec.gms[trace]
        b = _dynamic.RecordingBuilder(name)
    else:
        b = _b.GraphBuilder(name)
    env, inputs = {}, []
    inside = set(nodes)
    dyn = None

    def value_of(a):
        if isinstance(a, torch.fx.Node):
            if a in env:
                return env[a]
            if a.op == "get_attr":
                t = _fetch_attr(gm, a.target)
                v = _constant(b, t) if isinstance(t, torch.Tensor) else t
                env[a] = v
                return v
            tm = a.meta.get("tensor_meta")
            if a in inside or not _is_tensor_meta(tm):
                raise ConverterError("[converter] node '%s' reads '%s', which is not a tensor "
                                     "cge can take as an input" % (n.name, a.name), "converter",
                                     "CGE_ERR_UNSUPPORTED")
            dims = [int(d) for d in tm.shape] if spec is None else \
                _input_dims(spec, spec.to0[trace][a])
            v = b.input(a.name if spec is None else spec.to0[trace][a].name,
                        cge_dtype(tm.dtype), dims)
            env[a] = v
            inputs.append(a)
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(value_of(x) for x in a)
        if isinstance(a, dict):
            return {k: value_of(x) for k, x in a.items()}
        return a

    if spec is not None:
        dyn = _dynamic.SegmentDyn(spec, trace, env, inputs, value_of)
    for n in nodes:
        conv = find_converter(n.target)
        if conv is None:
            raise ConverterError("[converter] no converter for %s (node '%s')"
                                 % (op_name(n.target), n.name), "converter",
                                 "CGE_ERR_UNSUPPORTED")
        if dyn is None:
            args = value_of(n.args)
            kwargs = value_of(n.kwargs)
            env[n] = conv(ConversionContext(b, n), n, *args, **kwargs)
            _check_traced_shapes(n, env[n])
            continue
        n0 = spec.to0[trace][n]
        b.node = n0.name
        try:
            args = value_of(n.args)
            kwargs = value_of(n.kwargs)
            env[n] = conv(ConversionContext(b, n, dyn), n, *args, **kwargs)
        except _dynamic.NotExpressible as e:
            raise _DynFailure(n0, e.deps or spec.deps_of_node(n0), str(e)) from None
        except Exception as e:  # a converter or meta that cannot take the varying sizes
            raise _DynFailure(n0, spec.deps_of_node(n0), "%s (%s): %s" % (
                n0.name, op_name(n0.target), e)) from None
    if probe:
        return None, inputs, []
    outs = []
    for n in (outputs_wanted if outputs_wanted is not None else nodes[-1:]):
        v = env[n]
        if not isinstance(v, _b.Value):
            raise ConverterError("[converter] node '%s' (%s) leaves cge as a %s, not a tensor"
                                 % (n.name, op_name(n.target), type(v).__name__), "converter",
                                 "CGE_ERR_UNSUPPORTED")
        b.output(v, "out_%d" % len(outs))
        outs.append(n)
    if spec is None:
        g = b.build()
        g.data_dependent = getattr(b, "data_dependent", False)
        return g, inputs, outs
    to0 = spec.to0[trace]
    inputs, outs = [to0[n] for n in inputs], [to0[n] for n in outs]
    if trace:
        return None, inputs, outs, b.log
    g = b.build()
    g.data_dependent = getattr(b, "data_dependent", False)
    _name_symbols(g, spec)
    return g, inputs, outs, b.log


def _check_traced_shapes(n, v):
    """A converted node gives the shapes PyTorch traced (where both are
    known): else its outputs would be read into buffers of the trace's
    sizes, and a silent difference (a float32 scale rounding a size down)
    would come back as garbage."""
    tm = n.meta.get("tensor_meta")
    vals = v if isinstance(v, (tuple, list)) else (v,)
    metas = (tm,) if _is_tensor_meta(tm) or not isinstance(tm, (tuple, list)) else tm
    for k, (val, m) in enumerate(zip(vals, metas)):
        if not isinstance(val, _b.Value) or not _is_tensor_meta(m):
            continue
        got = val.shape
        if got is None or any(d is None or d < 0 for d in got):
            continue   # sizes known only at run time
        want = tuple(int(d) for d in m.shape)
        if tuple(got) != want:
            raise ConverterError("[converter] node '%s' (%s): cge computes output %d as %s, "
                                 "PyTorch traced %s" % (n.name, op_name(n.target), k,
                                                        list(got), list(want)),
                                 "converter", "CGE_ERR_SHAPE")


def _name_symbols(g, spec):
    """Names the graph's symbols (CGE_DIM_SYMBOL(k), in order) "s0", ...:
    naming gives ids in order, from 0, in a graph with none named yet."""
    if lib_graph_num_dim_symbols(g.ptr) != 0:
        return
    for s in spec.symbols:
        lib_graph_dim_symbol(g.ptr, s.name.encode())


def lib_graph_dim_symbol(ptr, name):
    f = _lib.lib.cge_graph_dim_symbol
    f.restype, f.argtypes = ctypes.c_int64, [ctypes.c_void_p, ctypes.c_char_p]
    return f(ptr, name)


def lib_graph_num_dim_symbols(ptr):
    f = _lib.lib.cge_graph_num_dim_symbols
    f.restype, f.argtypes = ctypes.c_int32, [ctypes.c_void_p]
    return f(ptr)


def _fetch_attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _probe(gm):
    """Per call_function node: None if it converts on its own, else why not."""
    reasons = {}
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if find_converter(n.target) is None:
            reasons[n] = "no converter for %s" % op_name(n.target)
            continue
        if n.target is operator.getitem:
            # Converts with its tuple's node (alone, it would read a tuple
            # from outside cge, which no graph input can be).
            if n.args[0] in reasons:
                reasons[n] = "reads an output of '%s', which runs in PyTorch" % n.args[0].name
            continue
        tm = n.meta.get("tensor_meta")
        # A tuple result (batch norm's) may carry no meta of its own: its
        # getitem readers have the pieces'.
        tuple_read = bool(n.users) and all(
            u.target is operator.getitem and _is_tensor_meta(u.meta.get("tensor_meta"))
            for u in n.users)
        if not _is_tensor_meta(tm) and not isinstance(tm, (tuple, list)) and not tuple_read:
            reasons[n] = "produces a %s, not tensors" % type(n.meta.get("val", tm)).__name__
            continue
        try:
            _, _, _ = _convert_nodes([n], gm, "probe", probe=True)
        except Error as e:
            reasons[n] = str(e)
    return reasons


def _plan_steps(gm, reasons):
    """Steps in order: ("cge", segment) for runs of convertible nodes,
    ("torch", node) for the others."""
    steps, cur = [], []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n in reasons:
            if cur:
                steps.append(("cge", _Segment(cur)))
                cur = []
            steps.append(("torch", n))
        else:
            cur.append(n)
    if cur:
        steps.append(("cge", _Segment(cur)))
    # A segment's outputs: its nodes read by later steps or by the output.
    pos = {}
    for i, (kind, s) in enumerate(steps):
        for n in (s.nodes if kind == "cge" else [s]):
            pos[n] = i
    for i, (kind, s) in enumerate(steps):
        if kind != "cge":
            continue
        for n in s.nodes:
            if any(u.op == "output" or pos.get(u, i) != i for u in n.users):
                s.outputs.append(n)
    return steps


# ---- the compiled callable -----------------------------------------------------------

class _Compiled:
    """One specialisation: steps with their cge sessions, for one signature
    or, with a Spec (dynamic=...), for every size of the spec's symbols."""

    def __init__(self, module, example_inputs, fullgraph, mode, spec=None, sess_options=None):
        self.spec = spec
        self.gm = spec.gms[0] if spec is not None else capture(module, example_inputs)
        self.placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        self.output_node = next(n for n in self.gm.graph.nodes if n.op == "output")
        if fullgraph:
            nodes = [n for n in self.gm.graph.nodes if n.op == "call_function"]
            seg = _Segment(nodes)
            used = set(self.output_node.all_input_nodes)
            seg.outputs = [n for n in nodes if n in used]
            self.steps = [("cge", seg)] if nodes else []
            self.reasons = {}
        else:
            self.reasons = _probe(self.gm)
            self.steps = _plan_steps(self.gm, self.reasons)
        if spec is not None:
            self._check_literals()
        mode_code = {"replay": 3, "plan": 2, "eager": 1}[mode]
        for i, (kind, s) in enumerate(self.steps):
            if kind != "cge":
                continue
            if not s.outputs:
                continue
            if spec is None:
                g, s.inputs, s.outputs = _convert_nodes(s.nodes, self.gm, "torch_%d" % i,
                                                        s.outputs)
            else:
                g = self._convert_dynamic(s, "torch_%d" % i)
            s.graph = g
            # An output size depends on values (bool masks, nonzero, nms):
            # each run's outputs take the size the run reports.
            s.data_dependent = bool(getattr(g, "data_dependent", False))
            if int(getattr(sess_options, "dist_micro_batches", 0) or 0) > 1 and (
                    sum(1 for k, _ in self.steps if k == "cge") > 1 or
                    set(s.inputs) != set(self.placeholders)):
                # A subgraph between graph breaks takes intermediate values,
                # whose axis 0 need not be the batch: splitting it could mix
                # samples (attention over a sequence-first layout).
                raise Error("[session] cge.torch.compile: dist_micro_batches splits the "
                            "module's inputs on axis 0 and needs the whole module in one cge "
                            "graph; this one has graph breaks (cge.torch.explain says where)",
                            "session", "CGE_ERR_UNSUPPORTED")
            s.session = _b.Session(g, run_mode=mode, sess_options=sess_options)
            s.mode = mode_code
            s.out_meta = []
            for n in s.outputs:
                tm = n.meta["tensor_meta"]
                s.out_meta.append((tm.dtype, tuple(int(d) for d in tm.shape)))
            s.in_meta = []
            for n in s.inputs:
                tm = n.meta["tensor_meta"]
                dims = tuple(int(d) for d in tm.shape) if spec is None else \
                    tuple(_input_dims(spec, n))
                s.in_meta.append((tm.dtype, dims))
            s.ins = (_lib.Tensor * max(1, len(s.inputs)))()
            s.outs = (_lib.Tensor * max(1, len(s.outputs)))()
            for k, (dt, shape) in enumerate(s.in_meta):
                s.ins[k].dtype = cge_dtype(dt)
                s.ins[k].shape = _b._make_shape(shape)
            for k, (dt, shape) in enumerate(s.out_meta):
                s.outs[k].dtype = cge_dtype(dt)
            s.out_shapes = {}   # dynamic: input shapes -> output shapes, as cge said
        self.steps = [st for st in self.steps if st[0] != "cge" or st[1].session is not None]
        self.lock = threading.Lock()
        self.num_segments = sum(1 for k, _ in self.steps if k == "cge")

    def _convert_dynamic(self, s, name):
        """The segment's graph at trace 0, with symbolic input dims; the same
        conversion at every other trace must build the same thing (else a
        converter baked a size of its trace into the graph)."""
        spec = self.spec
        g, s.inputs, s.outputs, log0 = _convert_nodes(s.nodes, self.gm, name, s.outputs,
                                                      spec=spec, trace=0)
        for t in range(1, spec.num_traces):
            _, _, _, log = _convert_nodes(s.nodes, self.gm, name, s.outputs, spec=spec, trace=t)
            diff = _dynamic.first_difference(log0, log)
            if diff is not None:
                node = next((n for n in s.nodes if n.name == diff[0]), s.nodes[0])
                deps = spec.deps_of_node(node) or set(range(len(spec.symbols)))
                raise _DynFailure(node, deps, "%s (%s): its conversion builds a different %s "
                                  "at another size (the converter uses a size of the trace)"
                                  % (node.name, op_name(node.target), diff[1]))
        return g

    def _check_literals(self):
        """Nodes that run in PyTorch (graph breaks) and the module's outputs
        replay trace 0's arguments: numbers there must not vary."""
        spec = self.spec
        for kind, n in self.steps:
            if kind == "torch":
                self._same_numbers(n, spec, "runs in PyTorch with a size of the trace as an "
                                   "argument")
        self._same_numbers(self.output_node, spec, "is returned: a size as a Python number")

    @staticmethod
    def _same_numbers(n, spec, why):
        def walk(a, path):
            if isinstance(a, (list, tuple)):
                for i, x in enumerate(a):
                    walk(x, path + (i,))
            elif isinstance(a, dict):
                for k, x in a.items():
                    walk(x, path + (k,))
            elif isinstance(a, (int, float)) and not isinstance(a, bool):
                def get(node, path=path):
                    v = (node.args, node.kwargs)
                    for p in path:
                        v = v[p]
                    return v
                vals = [get(m[n]) for m in spec.maps]
                if any(v != vals[0] for v in vals):
                    deps = spec.value([int(v) for v in vals]).deps if all(
                        float(v).is_integer() for v in vals) else range(len(spec.symbols))
                    raise _DynFailure(n, deps, "%s (%s) %s" % (n.name, op_name(n.target)
                                                                if n.op != "output" else
                                                                "output", why))
        walk((n.args, n.kwargs), ())

    def _run_segment(self, s, env):
        keep = []
        dynamic = self.spec is not None
        for k, n in enumerate(s.inputs):
            t = env[n]
            dt, shape = s.in_meta[k]
            if t.dtype != dt or (tuple(t.shape) != shape if not dynamic else (
                    t.dim() != len(shape) or
                    any(d >= 0 and d != e for d, e in zip(shape, t.shape)))):
                raise ConverterError("[converter] '%s' reached cge as %s%s, traced as %s%s"
                                     % (n.name, t.dtype, list(t.shape), dt, list(shape)),
                                     "converter", "CGE_ERR_SHAPE")
            if not t.is_contiguous() or t.device.type != "cpu":
                t = t.detach().cpu().contiguous()
            keep.append(t)
            if dynamic:
                s.ins[k].shape = _b._make_shape(t.shape)
            s.ins[k].data = t.data_ptr() if t.numel() else None
            s.ins[k].bytes = t.numel() * t.element_size()
        if dynamic:
            key = tuple(tuple(t.shape) for t in keep)
            shapes = s.out_shapes.get(key)
            if shapes is None:
                shapes = self._learn_shapes(s)
                self._check_shapes(s, shapes)
                s.out_shapes[key] = shapes
        else:
            shapes = [shape for _, shape in s.out_meta]
        if getattr(s, "data_dependent", False):
            results = self._run_data_dependent(s, shapes)
        else:
            results = self._bind_outputs(s, shapes)
            s.session.run_raw(s.ins, len(s.inputs), s.outs, len(s.outputs), s.mode)
        for n, o in zip(s.outputs, results):
            env[n] = o

    @staticmethod
    def _bind_outputs(s, shapes):
        """New torch tensors of these shapes as the segment's output space."""
        results = []
        for k, (dt, _) in enumerate(s.out_meta):
            o = torch.empty(shapes[k], dtype=dt)
            results.append(o)
            s.outs[k].data = o.data_ptr() if o.numel() else None
            s.outs[k].bytes = o.numel() * o.element_size()
        return results

    @staticmethod
    def _written_shapes(s):
        """The output shapes the last run wrote back."""
        return [tuple(int(s.outs[k].shape.dims[i]) for i in range(s.outs[k].shape.rank))
                for k in range(len(s.outputs))]

    def _run_data_dependent(self, s, shapes):
        """A run whose output sizes depend on values: buffers of the last
        sizes seen (the trace's at first); cge writes each output's shape
        back, and an output that needs more room makes it run once more with
        the sizes it asked for."""
        last = getattr(s, "dd_shapes", None) or shapes
        for attempt in (0, 1):
            bufs = self._bind_outputs(s, last)
            try:
                s.session.run_raw(s.ins, len(s.inputs), s.outs, len(s.outputs), s.mode)
            except Error as e:
                if attempt or e.layer != "session" or "the buffer given has" not in e.message:
                    raise
                last = self._written_shapes(s)
                continue
            got = self._written_shapes(s)
            s.dd_shapes = got
            return [o if tuple(o.shape) == g else o.reshape(-1)[:int(np.prod(g))].view(g)
                    for o, g in zip(bufs, got)]
        raise Error("[session] cge.torch: a data-dependent output kept changing size",
                    "session", "CGE_ERR_SHAPE")

    @staticmethod
    def _learn_shapes(s):
        """Output shapes at new input sizes: a run without output space fails
        at once, before any work, writing what each output needs."""
        for k in range(len(s.outputs)):
            s.outs[k].data, s.outs[k].bytes = None, 0
        try:
            s.session.run_raw(s.ins, len(s.inputs), s.outs, len(s.outputs), s.mode)
        except Error as e:
            if e.layer != "session" or "the buffer given has" not in e.message:
                raise
        return _Compiled._written_shapes(s)

    def _check_shapes(self, s, shapes):
        """What cge computes at new sizes keeps the traced ranks and static dims."""
        for n, shape in zip(s.outputs, shapes):
            dims = self.spec.node_dims(n)
            if dims is None or len(dims) != len(shape) or any(
                    not isinstance(d, _dynamic.Sym) and d != e for d, e in zip(dims, shape)):
                raise ConverterError("[converter] cge computes %s for '%s' (%s) at these sizes; "
                                     "the traces say %s" % (list(shape), n.name,
                                                            op_name(n.target), dims),
                                     "converter", "CGE_ERR_SHAPE")

    def __call__(self, *args):
        env = dict(zip(self.placeholders, args))
        with self.lock, torch.no_grad():  # the ctypes arrays are shared
            for kind, s in self.steps:
                if kind == "cge":
                    self._run_segment(s, env)
                else:
                    env[s] = s.target(*_map(s.args, env, self.gm), **_map(s.kwargs, env, self.gm))
        return _map(self.output_node.args[0], env, self.gm)


def _map(a, env, gm):
    if isinstance(a, torch.fx.Node):
        if a.op == "get_attr" and a not in env:
            env[a] = _fetch_attr(gm, a.target)
        return env[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_map(x, env, gm) for x in a)
    if isinstance(a, dict):
        return {k: _map(x, env, gm) for k, x in a.items()}
    return a


def _signature(args):
    sig = []
    for a in args:
        if isinstance(a, torch.Tensor):
            sig.append(("T", tuple(a.shape), a.dtype, tuple(a.stride()), a.device.type,
                        a.requires_grad))
        else:
            sig.append(("V", type(a).__name__, repr(a)))
    return tuple(sig)


class _DynamicGuard:
    """Whether a call fits a dynamic specialisation: same dtypes, devices,
    ranks, contiguity and static dims as its example; each symbol's dims
    equal to each other and at least the symbol's min_size (1, or 2 where
    size 1 traces another graph); other arguments equal."""

    def __init__(self, args, symbols):
        sym = {}
        for k, s in enumerate(symbols):
            for i, d in s.dims:
                sym[(i, d)] = k
        self.entries = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                static = tuple((d, int(a.shape[d])) for d in range(a.dim()) if (i, d) not in sym)
                self.entries.append((True, (a.dtype, a.device.type, a.requires_grad, a.dim(),
                                            a.is_contiguous(),
                                            None if a.is_contiguous() else tuple(a.stride())),
                                     static))
            else:
                self.entries.append((False, (type(a).__name__, repr(a)), None))
        self.ties = [(list(s.dims), s.min_size) for s in symbols]

    def __call__(self, args):
        if len(args) != len(self.entries):
            return False
        for a, (is_t, key, static) in zip(args, self.entries):
            if is_t:
                if not isinstance(a, torch.Tensor) or key[3] != a.dim() or \
                        key != (a.dtype, a.device.type, a.requires_grad, a.dim(),
                                a.is_contiguous(),
                                None if a.is_contiguous() else tuple(a.stride())):
                    return False
                shape = a.shape
                for d, n in static:
                    if shape[d] != n:
                        return False
            elif isinstance(a, torch.Tensor) or key != (type(a).__name__, repr(a)):
                return False
        for dims, lo in self.ties:
            i, d = dims[0]
            n = args[i].shape[d]
            if n < lo or any(args[j].shape[e] != n for j, e in dims[1:]):
                return False
        return True


class CompiledModule:
    """What cge.torch.compile returns: call it as the module. Guarded on the
    inputs' shapes, dtypes, strides and devices (and other arguments' values):
    a call that breaks every guard compiles a new specialisation; past
    ``recompile_limit`` new signatures run in eager PyTorch (one warning).
    With ``dynamic``, a specialisation serves every size of its symbolic dims
    (``dynamic_dims``); ``dynamic_notes`` says why other dims stayed static."""

    def __init__(self, module, example_inputs, fullgraph=False, mode="replay",
                 recompile_limit=8, dynamic=False, sess_options=None):
        self.module = module
        self.sess_options = sess_options
        self.fullgraph = fullgraph
        self.mode = mode
        self.recompile_limit = recompile_limit
        self.dynamic = dynamic
        self.cache = {}          # static specialisations by signature
        self._dyn = []           # dynamic ones: (guard, compiled), newest last
        self._first = None
        self.recompiles = 0
        self.eager_calls = 0
        self._warned = False
        self._warned_notes = set()
        self._lock = threading.Lock()
        self._compile(list(example_inputs))

    def _compile(self, args):
        if self.dynamic is False:
            c = _Compiled(self.module, args, self.fullgraph, self.mode,
                          sess_options=self.sess_options)
            self.cache[_signature(args)] = c
        else:
            c = self._compile_dynamic(args)
        if self._first is None:
            self._first = c
        return c

    def _compile_dynamic(self, args, exclude=()):
        """Trace at the example sizes and at others, drop the symbols that do
        not generalise (with a note, a warning for dims the user named), and
        compile one specialisation for the rest. Where a size-1 dim had to be
        generalised from size 2, a second specialisation serves the example
        (that dim static at 1). ``exclude``: dims kept static."""
        symbols, auto = _dynamic.request(self.dynamic, self.module, args)
        symbols = [s for s in symbols if not any(d in exclude for d in s.dims)]
        names = _dynamic._param_names(self.module)
        notes, traces = [], {}
        while True:
            spec = _dynamic.generalise(capture, self.module, args, symbols, traces, notes, names)
            try:
                c = _Compiled(self.module, spec.base_inputs if spec else args, self.fullgraph,
                              self.mode, spec=spec, sess_options=self.sess_options)
                break
            except _DynFailure as f:
                drop = [spec.symbols[k] for k in sorted(f.deps)] or list(spec.symbols)
                for s in drop:
                    notes.append((s, "%s stays static: %s" % (_dynamic.describe(s, names),
                                                              f.why)))
                    s.base, s.alt, s.joint, s.min_size = s.size, None, None, 1
                symbols = [s for s in spec.symbols if s not in drop]
        kept = spec.symbols if spec is not None else []
        if not auto:
            for s, why in notes:
                key = tuple(s.dims)     # once per module and dims, not per recompile
                if key not in self._warned_notes:
                    self._warned_notes.add(key)
                    warnings.warn("cge.torch.compile(dynamic=...): " + why, RuntimeWarning,
                                  stacklevel=4)
        c.dynamic_notes = [why for _, why in notes]
        c.dynamic_dims = {}
        for s in kept:
            for i, d in s.dims:
                c.dynamic_dims.setdefault(i, {})[d] = s.name
        self._dyn.append((_DynamicGuard(spec.base_inputs if spec else args, kept), c))
        rebased = [d for s in kept if s.min_size > 1 for d in s.dims]
        if rebased:
            self._compile_dynamic(args, exclude=tuple(exclude) + tuple(rebased))
        return c

    @property
    def dynamic_dims(self):
        """{input position: {dim: symbol name}} of the first specialisation's
        symbolic dims (empty when dynamic=False)."""
        return dict(getattr(self._first, "dynamic_dims", {}))

    @property
    def dynamic_notes(self):
        """Why dims asked to be dynamic stayed static (first specialisation)."""
        return list(getattr(self._first, "dynamic_notes", []))

    @property
    def graph_breaks(self):
        """(node, op, reason) of the nodes that run in PyTorch, first specialisation."""
        return [(n.name, op_name(n.target), r) for n, r in self._first.reasons.items()]

    @property
    def num_segments(self):
        return self._first.num_segments

    def graph_nodes(self):
        """(name, op, domain) of every cge node, first specialisation."""
        return [n for k, s in self._first.steps if k == "cge" for n in s.graph.nodes()]

    def graphs(self):
        """The cge graphs (cge.Graph) of the first specialisation, one per subgraph."""
        return [s.graph for k, s in self._first.steps if k == "cge"]

    def last_run_modes(self):
        """The run mode each cge subgraph used last ("replay", "plan", ...)."""
        return [s.session.last_run_mode() for k, s in self._first.steps if k == "cge"]

    def _find(self, args):
        if self.dynamic is False:
            return self.cache.get(_signature(args))
        for guard, c in reversed(self._dyn):
            if guard(args):
                return c
        return None

    def __call__(self, *args):
        c = self._find(args)
        if c is None:
            with self._lock:
                c = self._find(args)
                if c is None:
                    if self.recompiles >= self.recompile_limit:
                        if not self._warned:
                            self._warned = True
                            warnings.warn("cge.torch: %d recompilations reached the limit "
                                          "(recompile_limit=%d); new input signatures run in "
                                          "eager PyTorch" % (self.recompiles,
                                                             self.recompile_limit),
                                          RuntimeWarning, stacklevel=2)
                        self.eager_calls += 1
                        with torch.no_grad():
                            return self.module(*args)
                    self.recompiles += 1
                    c = self._compile(list(args))
        return c(*args)


def compile(module, example_inputs, fullgraph=False, dynamic=False, mode="replay",
            recompile_limit=8, sess_options=None, dist_tp=None, dist_pp=None,
            dist_micro_batches=None):
    """Compile ``module`` (an nn.Module or a function of tensors) with cge.

    The module is traced with make_fx on ``example_inputs`` (aten ops), each
    node converted through the converter registry, and the graph compiled by
    cge; the result takes and returns torch tensors. ``fullgraph=True``: a
    node that cannot convert is a ConverterError naming its aten op and node;
    otherwise such nodes run in PyTorch between cge subgraphs (see
    ``explain``). ``mode``: cge's run mode, "replay" (captured once, then
    replayed), "plan" or "eager". A call with new shapes, dtypes or strides
    recompiles (``recompiles`` counts), up to ``recompile_limit`` times, then
    runs in eager PyTorch with one warning. Weights are copied into cge at
    compile time: recompile after changing them.

    ``dynamic``: False specialises every shape. True makes every input dim
    that can vary symbolic; a dict ``{input: dims}`` (input by position or
    parameter name; dims a list, or ``{dim: name}``) marks dims. PyTorch
    1.13's tracer has no symbolic shapes, so the module is traced at the
    example sizes and once more per symbol (that symbol's size doubled, or
    +1), plus once with all changed; dims where the traces agree become
    symbols (dims of equal example size share one, as TorchDynamo's duck
    sizing; dims named alike share one), sizes inside the graph (reshape
    targets) come from the runtime shapes, and one cge graph serves all sizes:
    new sizes of symbolic dims do not recompile. A dim whose traces differ
    (another graph, a failing trace, a size baked into a converter or a
    graph break) stays static, listed in ``dynamic_notes`` (and warned about
    when the dict asked for it). A call that changes a static dim, a rank or
    a dtype, or gives dims of one symbol different sizes, recompiles.

    ``sess_options`` (cge.SessionOptions) applies to every cge session the
    compiled module makes: intra_op_num_threads and the distributed fields
    (docs/distributed.md). ``dist_tp``, ``dist_pp``, ``dist_micro_batches``
    set those fields (over ``sess_options``' or a fresh SessionOptions, with
    ``dist="env"``): under ``mpirun -np N`` every rank calls compile and
    the module alike, and each cge subgraph is sharded (tp) or cut into
    stages (pp) across the ranks; every rank gets the whole outputs.
    """
    if mode not in _MODES:
        raise ValueError("cge.torch.compile: mode must be one of %s, not %r" % (_MODES, mode))
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if dynamic is not False and dynamic is not True and not isinstance(dynamic, dict):
        raise TypeError("cge.torch.compile: dynamic is False, True or a dict {input: dims}, "
                        "not %r" % (dynamic,))
    if dist_tp or dist_pp or dist_micro_batches:
        import copy
        from .._ort import SessionOptions
        sess_options = copy.copy(sess_options) if sess_options is not None else SessionOptions()
        if getattr(sess_options, "dist", "none") in ("none", None):
            sess_options.dist = "env"
        for k, v in (("dist_tp", dist_tp), ("dist_pp", dist_pp),
                     ("dist_micro_batches", dist_micro_batches)):
            if v:
                setattr(sess_options, k, int(v))
    return CompiledModule(module, example_inputs, fullgraph=fullgraph, mode=mode,
                          recompile_limit=recompile_limit, dynamic=dynamic,
                          sess_options=sess_options)


class Explanation:
    """What ``explain`` found: ``graph_breaks`` [(node, op, reason)],
    ``num_segments`` (cge subgraphs), ``ops_in_cge`` and ``ops_in_torch``
    (node counts) and ``op_counts`` {op: count} of the traced graph."""

    def __init__(self, gm, reasons, steps):
        self.graph_breaks = [(n.name, op_name(n.target), r) for n, r in reasons.items()]
        self.num_segments = sum(1 for k, _ in steps if k == "cge")
        self.ops_in_cge = sum(len(s.nodes) for k, s in steps if k == "cge")
        self.ops_in_torch = len(reasons)
        self.op_counts = {}
        for n in gm.graph.nodes:
            if n.op == "call_function":
                k = op_name(n.target)
                self.op_counts[k] = self.op_counts.get(k, 0) + 1

    def __str__(self):
        lines = ["%d graph break(s), %d cge subgraph(s), %d op(s) in cge, %d in PyTorch"
                 % (len(self.graph_breaks), self.num_segments, self.ops_in_cge,
                    self.ops_in_torch)]
        for node, op, reason in self.graph_breaks:
            lines.append("  break at %s (%s): %s" % (node, op, reason))
        return "\n".join(lines)

    __repr__ = __str__


def explain(module, example_inputs):
    """Trace and probe ``module`` without compiling: which nodes would run in
    PyTorch (graph breaks) and why."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    gm = capture(module, list(example_inputs))
    reasons = _probe(gm)
    return Explanation(gm, reasons, _plan_steps(gm, reasons))

