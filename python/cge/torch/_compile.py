# cge.torch.compile: capture a module with make_fx (aten level), convert its
# nodes through the converter registry into cge graphs (one per run of
# convertible nodes; the rest run in PyTorch between them: graph breaks),
# compile them in cge sessions, and return a callable guarded on the inputs'
# shapes, dtypes and strides that recompiles, or past a limit runs eagerly.
import operator
import threading
import warnings

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from .. import _lib
from .. import builder as _b
from ..errors import ConverterError, Error
from ._registry import ConversionContext, cge_dtype, find_converter, op_name

_MODES = ("replay", "plan", "eager")


# ---- capture ----------------------------------------------------------------------

def capture(module, example_inputs):
    """An aten-level torch.fx.GraphModule of ``module`` on these inputs, in
    value semantics (in-place ops rebound) and without dead nodes."""
    fn = module
    if isinstance(module, torch.nn.Module):
        def fn(*args):
            return module(*args)
    # Traced with autograd on: under no_grad PyTorch swaps some modules
    # (TransformerEncoder) for fused inference kernels that have no aten
    # decomposition.
    with torch.enable_grad():
        gm = make_fx(fn)(*example_inputs)
    _functionalize(gm.graph)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


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


def _convert_nodes(nodes, gm, name, outputs_wanted=None, probe=False):
    """Build a cge graph from `nodes` (in order). Values read from outside
    become graph inputs (their traced shapes), get_attr nodes constants.
    Returns (graph, inputs, outputs); with `probe`, only converts."""
    b = _b.GraphBuilder(name)
    env, inputs = {}, []
    inside = set(nodes)

    def value_of(a):
        if isinstance(a, torch.fx.Node):
            if a in env:
                return env[a]
            if a.op == "get_attr":
                t = _fetch_attr(gm, a.target)
                v = b.constant(t.detach().cpu().contiguous().numpy()) if isinstance(
                    t, torch.Tensor) else t
                env[a] = v
                return v
            tm = a.meta.get("tensor_meta")
            if a in inside or not _is_tensor_meta(tm):
                raise ConverterError("[converter] node '%s' reads '%s', which is not a tensor "
                                     "cge can take as an input" % (n.name, a.name), "converter",
                                     "CGE_ERR_UNSUPPORTED")
            v = b.input(a.name, cge_dtype(tm.dtype), [int(d) for d in tm.shape])
            env[a] = v
            inputs.append(a)
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(value_of(x) for x in a)
        if isinstance(a, dict):
            return {k: value_of(x) for k, x in a.items()}
        return a

    for n in nodes:
        conv = find_converter(n.target)
        if conv is None:
            raise ConverterError("[converter] no converter for %s (node '%s')"
                                 % (op_name(n.target), n.name), "converter",
                                 "CGE_ERR_UNSUPPORTED")
        args = value_of(n.args)
        kwargs = value_of(n.kwargs)
        ctx = ConversionContext(b, n)
        env[n] = conv(ctx, n, *args, **kwargs)
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
    return b.build(), inputs, outs


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
        if n.target is operator.getitem and n.args[0] in reasons:
            reasons[n] = "reads an output of '%s', which runs in PyTorch" % n.args[0].name
            continue
        tm = n.meta.get("tensor_meta")
        if not _is_tensor_meta(tm) and not isinstance(tm, (tuple, list)):
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
    """One specialisation: steps with their cge sessions, for one signature."""

    def __init__(self, module, example_inputs, fullgraph, mode):
        self.gm = capture(module, example_inputs)
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
        mode_code = {"replay": 3, "plan": 2, "eager": 1}[mode]
        for i, (kind, s) in enumerate(self.steps):
            if kind != "cge":
                continue
            if not s.outputs:
                continue
            g, s.inputs, s.outputs = _convert_nodes(s.nodes, self.gm, "torch_%d" % i, s.outputs)
            s.graph = g
            s.session = _b.Session(g, run_mode=mode)
            s.mode = mode_code
            s.out_meta = []
            for n in s.outputs:
                tm = n.meta["tensor_meta"]
                s.out_meta.append((tm.dtype, tuple(int(d) for d in tm.shape)))
            s.in_meta = []
            for n in s.inputs:
                tm = n.meta["tensor_meta"]
                s.in_meta.append((tm.dtype, tuple(int(d) for d in tm.shape)))
            s.ins = (_lib.Tensor * max(1, len(s.inputs)))()
            s.outs = (_lib.Tensor * max(1, len(s.outputs)))()
            for k, (dt, shape) in enumerate(s.in_meta):
                s.ins[k].dtype = cge_dtype(dt)
                s.ins[k].shape = _b._make_shape(shape)
            for k, (dt, shape) in enumerate(s.out_meta):
                s.outs[k].dtype = cge_dtype(dt)
        self.steps = [st for st in self.steps if st[0] != "cge" or st[1].session is not None]
        self.lock = threading.Lock()
        self.num_segments = sum(1 for k, _ in self.steps if k == "cge")

    def _run_segment(self, s, env):
        keep = []
        for k, n in enumerate(s.inputs):
            t = env[n]
            dt, shape = s.in_meta[k]
            if t.dtype != dt or tuple(t.shape) != shape:
                raise ConverterError("[converter] '%s' reached cge as %s%s, traced as %s%s"
                                     % (n.name, t.dtype, list(t.shape), dt, list(shape)),
                                     "converter", "CGE_ERR_SHAPE")
            if not t.is_contiguous() or t.device.type != "cpu":
                t = t.detach().cpu().contiguous()
            keep.append(t)
            s.ins[k].data = t.data_ptr() if t.numel() else None
            s.ins[k].bytes = t.numel() * t.element_size()
        results = []
        for k, (dt, shape) in enumerate(s.out_meta):
            o = torch.empty(shape, dtype=dt)
            results.append(o)
            s.outs[k].data = o.data_ptr() if o.numel() else None
            s.outs[k].bytes = o.numel() * o.element_size()
        s.session.run_raw(s.ins, len(s.inputs), s.outs, len(s.outputs), s.mode)
        for n, o in zip(s.outputs, results):
            env[n] = o

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


class CompiledModule:
    """What cge.torch.compile returns: call it as the module. Guarded on the
    inputs' shapes, dtypes, strides and devices (and other arguments' values):
    a call that breaks every guard compiles a new specialisation; past
    ``recompile_limit`` new signatures run in eager PyTorch (one warning)."""

    def __init__(self, module, example_inputs, fullgraph=False, mode="replay",
                 recompile_limit=8):
        self.module = module
        self.fullgraph = fullgraph
        self.mode = mode
        self.recompile_limit = recompile_limit
        self.cache = {}
        self.recompiles = 0
        self.eager_calls = 0
        self._warned = False
        self._lock = threading.Lock()
        first = _Compiled(module, list(example_inputs), fullgraph, mode)
        self.cache[_signature(example_inputs)] = first

    @property
    def graph_breaks(self):
        """(node, op, reason) of the nodes that run in PyTorch, first specialisation."""
        c = next(iter(self.cache.values()))
        return [(n.name, op_name(n.target), r) for n, r in c.reasons.items()]

    @property
    def num_segments(self):
        return next(iter(self.cache.values())).num_segments

    def graph_nodes(self):
        """(name, op, domain) of every cge node, first specialisation."""
        c = next(iter(self.cache.values()))
        return [n for k, s in c.steps if k == "cge" for n in s.graph.nodes()]

    def last_run_modes(self):
        """The run mode each cge subgraph used last ("replay", "plan", ...)."""
        c = next(iter(self.cache.values()))
        return [s.session.last_run_mode() for k, s in c.steps if k == "cge"]

    def __call__(self, *args):
        sig = _signature(args)
        c = self.cache.get(sig)
        if c is None:
            with self._lock:
                c = self.cache.get(sig)
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
                    c = _Compiled(self.module, list(args), self.fullgraph, self.mode)
                    self.cache[sig] = c
        return c(*args)


def compile(module, example_inputs, fullgraph=False, dynamic=False, mode="replay",
            recompile_limit=8):
    """Compile ``module`` (an nn.Module or a function of tensors) with cge.

    The module is traced with make_fx on ``example_inputs`` (aten ops), each
    node converted through the converter registry, and the graph compiled by
    cge; the result takes and returns torch tensors. ``fullgraph=True``: a
    node that cannot convert is a ConverterError naming its aten op and node;
    otherwise such nodes run in PyTorch between cge subgraphs (see
    ``explain``). ``mode``: cge's run mode, "replay" (captured once, then
    replayed), "plan" or "eager". Shapes are specialised and guarded
    (``dynamic=True`` is not supported: PyTorch 1.13's tracer gives no
    symbolic shapes); a call with new shapes, dtypes or strides recompiles, up
    to ``recompile_limit`` times, then runs in eager PyTorch with one warning.
    Weights are copied into cge at compile time: recompile after changing them.
    """
    if mode not in _MODES:
        raise ValueError("cge.torch.compile: mode must be one of %s, not %r" % (_MODES, mode))
    if dynamic:
        raise NotImplementedError("cge.torch.compile: dynamic=True needs symbolic shapes, which "
                                  "PyTorch %s's make_fx does not provide; shapes are specialised "
                                  "and guarded (dynamic=False)" % torch.__version__)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    return CompiledModule(module, example_inputs, fullgraph=fullgraph, mode=mode,
                          recompile_limit=recompile_limit)


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

