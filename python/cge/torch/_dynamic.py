# dynamic=True for cge.torch.compile: PyTorch 1.13's make_fx has no symbolic
# shapes, so the module is traced at the example sizes and again with each
# symbol's size changed; where the traces agree the graph is generalised
# (input dims become symbols, sizes in converters come from runtime shapes).
import inspect
from fractions import Fraction

import numpy as np
import torch

from .. import builder as _b
from ..errors import ConverterError

# A trace whose graph differs from the example's cannot be generalised.


class Mismatch(Exception):
    pass


def dim_symbol(k):
    """CGE_DIM_SYMBOL(k) of include/cge/types.h."""
    return -k - 2


class Symbol:
    """A symbolic size: ``name`` ("s0", or the user's), the input dims it
    stands for [(input index, axis)], its example ``size``, the ``base``
    size the generalisation is traced at (the example's, or 2 where size 1
    traces another graph: PyTorch takes other paths for size-1 dims; then
    ``min_size`` is 2) and the ``alt`` size its own trace used."""

    def __init__(self, name, dims, size):
        self.name, self.dims, self.size = name, list(dims), size
        self.base, self.alt, self.joint, self.min_size = size, None, None, 1

    def copy(self):
        c = Symbol(self.name, self.dims, self.size)
        return c

    def __repr__(self):
        return "Symbol(%r, dims=%r, size=%d, base=%d, alt=%r)" % (
            self.name, self.dims, self.size, self.base, self.alt)


class Sym:
    """An integer the traces disagree on: ``values`` (one per trace, the
    example's first) and ``expr``, (c, {symbol index: exponent}) when it is
    c * prod(s_k ** e_k) in every trace, else None. ``int(sym)`` is the
    example's value."""

    __slots__ = ("values", "expr", "deps")

    def __init__(self, values, expr, deps):
        self.values, self.expr, self.deps = tuple(values), expr, frozenset(deps)

    def __int__(self):
        return self.values[0]

    __index__ = __int__

    def __eq__(self, o):
        return isinstance(o, Sym) and o.values == self.values

    def __hash__(self):
        return hash(self.values)

    def __repr__(self):
        return "Sym(%r, expr=%r)" % (self.values, self.expr)


class NotExpressible(ConverterError):
    """A size a converter needs that cge cannot compute from the input dims;
    ``deps``: the symbols it depends on (they are made static)."""

    def __init__(self, msg, deps):
        super().__init__(msg, "converter", "CGE_ERR_UNSUPPORTED")
        self.deps = frozenset(deps)


# ---- which dims: the user's request ----------------------------------------------

def _param_names(module):
    fn = module.forward if isinstance(module, torch.nn.Module) else module
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def request(dynamic, module, example_inputs):
    """The symbols asked for: ``(symbols, auto)``. ``dynamic=True`` asks for
    every dim of every tensor input (auto: dims whose traces fail stay
    static, silently); a dict {input (position or parameter name): dims (a
    list, or {dim: name})} asks for those. Unnamed dims of equal example size
    share a symbol (duck sizing, as TorchDynamo); named dims share by name."""
    tensors = [i for i, a in enumerate(example_inputs) if isinstance(a, torch.Tensor)]
    marks = []                                   # (input, axis, name or None)
    if dynamic is True:
        for i in tensors:
            marks.extend((i, d, None) for d in range(example_inputs[i].dim()))
        auto = True
    elif isinstance(dynamic, dict):
        names = _param_names(module)
        auto = False
        for key, dims in dynamic.items():
            if isinstance(key, str):
                if key not in names:
                    raise ValueError("cge.torch.compile: dynamic names input %r, which is not "
                                     "a parameter of the module (%s)" % (key, ", ".join(names)))
                i = names.index(key)
            elif isinstance(key, int) and not isinstance(key, bool):
                i = key
            else:
                raise TypeError("cge.torch.compile: dynamic's keys are input positions or "
                                "parameter names, not %r" % (key,))
            if i not in tensors:
                raise ValueError("cge.torch.compile: dynamic names input %r, which is not a "
                                 "tensor among the example inputs" % (key,))
            rank = example_inputs[i].dim()
            items = dims.items() if isinstance(dims, dict) else [(d, None) for d in (
                dims if isinstance(dims, (list, tuple)) else [dims])]
            for d, nm in items:
                if not isinstance(d, int) or not -rank <= d < rank:
                    raise ValueError("cge.torch.compile: dynamic dim %r of input %r: the input "
                                     "has rank %d" % (d, key, rank))
                if nm is not None and (not isinstance(nm, str) or not nm):
                    raise ValueError("cge.torch.compile: dim names are non-empty strings, "
                                     "not %r" % (nm,))
                marks.append((i, d % rank, nm))
    else:
        raise TypeError("cge.torch.compile: dynamic is False, True or a dict {input: dims}, "
                        "not %r" % (dynamic,))
    groups, order = {}, []
    for i, d, nm in marks:
        size = int(example_inputs[i].shape[d])
        if size == 0:
            continue                             # an empty dim stays what it is
        key = ("name", nm) if nm is not None else ("size", size)
        if key not in groups:
            groups[key] = []
            order.append(key)
        if (i, d) not in groups[key]:
            groups[key].append((i, d))
    symbols = []
    for key in order:
        dims = groups[key]
        sizes = {int(example_inputs[i].shape[d]) for i, d in dims}
        if len(sizes) > 1:
            raise ValueError("cge.torch.compile: the dims named %r have different sizes (%s) "
                             "in these inputs" % (key[1], sorted(sizes)))
        symbols.append(Symbol(key[1] if key[0] == "name" else None, dims, sizes.pop()))
    used = {s.name for s in symbols if s.name}
    k = 0
    for s in symbols:
        if s.name is None:
            while "s%d" % k in used:
                k += 1
            s.name = "s%d" % k
            used.add(s.name)
    return symbols, auto


def resize(example_inputs, sizes):
    """The example inputs with dims resized ({(input, axis): size}): values
    repeat along the dim (indices, masks stay valid)."""
    out = list(example_inputs)
    for (i, d), n in sizes.items():
        t = out[i]
        if t.shape[d] == n:
            continue
        idx = torch.arange(n) % t.shape[d]
        out[i] = t.detach().index_select(d, idx).contiguous().requires_grad_(t.requires_grad)
    return out


# ---- comparing traces ------------------------------------------------------------

def _nodes(gm):
    return [n for n in gm.graph.nodes]


def match(gm0, gm1):
    """{node of gm0: node of gm1} when the two graphs have the same nodes with
    the same targets and arguments (numbers may differ); Mismatch otherwise."""
    a, b = _nodes(gm0), _nodes(gm1)
    if len(a) != len(b):
        raise Mismatch("the traces have %d and %d nodes" % (len(a), len(b)))
    m = {}
    for x, y in zip(a, b):
        if x.op != y.op or x.target != y.target:
            raise Mismatch("node '%s' (%s) is '%s' (%s) in the other trace"
                           % (x.name, x.target, y.name, y.target))
        m[x] = y
    for x, y in zip(a, b):
        _same_args(x, x.args, y.args, m)
        _same_args(x, x.kwargs, y.kwargs, m)
        if x.op == "get_attr":
            ta, tb = _attr(gm0, x.target), _attr(gm1, y.target)
            if isinstance(ta, torch.Tensor) != isinstance(tb, torch.Tensor) or (
                    isinstance(ta, torch.Tensor) and (ta.shape != tb.shape or ta.dtype != tb.dtype
                                                      or not torch.equal(ta, tb))):
                raise Mismatch("constant '%s' differs between the traces" % x.target)
    return m


def _attr(gm, target):
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _same_args(node, a, b, m):
    if isinstance(a, torch.fx.Node):
        if not isinstance(b, torch.fx.Node) or m.get(a) is not b:
            raise Mismatch("node '%s' reads other values in the other trace" % node.name)
    elif isinstance(a, (list, tuple)):
        if not isinstance(b, (list, tuple)) or len(a) != len(b):
            raise Mismatch("node '%s': an argument has another length in the other trace"
                           % node.name)
        for x, y in zip(a, b):
            _same_args(node, x, y, m)
    elif isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            raise Mismatch("node '%s': other keyword arguments in the other trace" % node.name)
        for k in a:
            _same_args(node, a[k], b[k], m)
    elif isinstance(a, (int, float)) and not isinstance(a, bool):
        if type(a) is not type(b) and not (isinstance(b, (int, float)) and
                                           not isinstance(b, bool)):
            raise Mismatch("node '%s': an argument changes type between the traces" % node.name)
    elif a != b:
        raise Mismatch("node '%s': argument %r is %r in the other trace" % (node.name, a, b))


# ---- the generalisation: traces and the sizes they disagree on -----------------------

class Spec:
    """The traces of one generalisation. Trace 0 is at the base sizes; trace
    1+k has symbol k at its ``alt`` size, the others at their base; a last
    trace, where there is one, has every symbol at its ``joint`` size (its
    alt with two or more symbols; a third size with one), which checks the
    sizes fitted from the others. ``maps[t]`` maps trace 0's nodes onto
    trace t's."""

    def __init__(self, symbols, gms):
        self.symbols = symbols
        self.gms = gms
        self.maps = [None] + [match(gms[0], g) for g in gms[1:]]
        self.maps[0] = {n: n for n in gms[0].graph.nodes}
        self.to0 = [{v: k for k, v in m.items()} for m in self.maps]
        self._dims = {}

    @property
    def num_traces(self):
        return len(self.gms)

    def symbol_values(self, k):
        """Symbol k's size in each trace."""
        s = self.symbols[k]
        vals = [s.base] * self.num_traces
        vals[1 + k] = s.alt
        if self.num_traces > 1 + len(self.symbols):
            vals[-1] = s.joint
        return tuple(vals)

    def value(self, values):
        """An int where every trace agrees, else a Sym."""
        values = [int(v) for v in values]
        if all(v == values[0] for v in values):
            return values[0]
        deps = [k for k in range(len(self.symbols)) if values[1 + k] != values[0]]
        if len(deps) == 0:
            deps = range(len(self.symbols))
        return Sym(values, self._fit(values), deps)

    def _fit(self, values):
        """("mul", c, {k: e}): c * prod(s_k ** e_k) (B*S, 4*B), or ("add", b,
        {k: a}): b + sum(a_k * s_k) (S + 1), fitted on the per-symbol traces
        and checked on the joint one; None if neither fits."""
        return self._fit_mul(values) or self._fit_add(values)

    def _joint_ok(self, values, f):
        if self.num_traces <= 1 + len(self.symbols):
            return True
        return f([s.joint for s in self.symbols]) == values[-1]

    def _fit_mul(self, values):
        v0 = values[0]
        if any(v <= 0 for v in values):
            return None
        exps = {}
        for k, s in enumerate(self.symbols):
            r, q = Fraction(values[1 + k], v0), Fraction(s.alt, s.base)
            for e in range(4):
                if q ** e == r:
                    break
            else:
                return None
            if e:
                exps[k] = e

        def product(sizes):
            out = Fraction(1)
            for k, e in exps.items():
                out *= Fraction(sizes[k]) ** e
            return out
        c = Fraction(v0) / product([s.base for s in self.symbols])
        if c.denominator != 1 or not self._joint_ok(values, lambda sz: c * product(sz)):
            return None
        return ("mul", int(c), exps)

    def _fit_add(self, values):
        coef = {}
        for k, s in enumerate(self.symbols):
            a = Fraction(values[1 + k] - values[0], s.alt - s.base)
            if a.denominator != 1:
                return None
            if a:
                coef[k] = int(a)
        b = values[0] - sum(a * self.symbols[k].base for k, a in coef.items())

        def f(sizes):
            return b + sum(a * sizes[k] for k, a in coef.items())
        if not self._joint_ok(values, f):
            return None
        return ("add", b, coef)

    def node_dims(self, node0, index=None):
        """The dims of node0's (index-th) tensor output: ints and Syms; None
        if it has no traced tensor shape."""
        key = (node0, index)
        if key not in self._dims:
            shapes = []
            for t, m in enumerate(self.maps):
                tm = m[node0].meta.get("tensor_meta")
                if tm is None and node0.op == "get_attr":
                    tm = _attr(self.gms[t], m[node0].target)   # a constant: its shape
                if index is not None and isinstance(tm, (tuple, list)):
                    tm = tm[index] if index < len(tm) else None
                if not hasattr(tm, "shape"):
                    shapes = None
                    break
                shapes.append([int(d) for d in tm.shape])
            if shapes is None or any(len(s) != len(shapes[0]) for s in shapes):
                self._dims[key] = None
            else:
                self._dims[key] = [self.value(col) for col in zip(*shapes)]
        return self._dims[key]

    def literal(self, node0, get):
        """``get(node)`` (a number in the node's arguments) in every trace."""
        return self.value([get(m[node0]) for m in self.maps])

    def deps_of_node(self, node0):
        """Symbols that node0's inputs or outputs depend on."""
        deps = set()
        for n in [node0] + list(node0.all_input_nodes):
            for idx in (None,) if not isinstance(n.meta.get("tensor_meta"), (tuple, list)) else \
                    range(len(n.meta["tensor_meta"])):
                for d in self.node_dims(n, idx) or []:
                    if isinstance(d, Sym):
                        deps |= d.deps
        return deps


# ---- converting with symbolic sizes ---------------------------------------------------

class SegmentDyn:
    """What a converter's context consults in a dynamic conversion of one
    segment at trace ``t``: the spec, and the values converted so far (fx
    node -> cge value), whose runtime shapes are where sizes come from."""

    def __init__(self, spec, t, env, inputs, value_of=None):
        self.spec, self.t, self.env, self.inputs = spec, t, env, inputs
        self.value_of = value_of      # makes a graph input of a placeholder
        self._shapes = {}

    def node0(self, node):
        return self.spec.to0[self.t].get(node, node)

    def dims_of_node(self, node, index=None):
        return self.spec.node_dims(self.node0(node), index)

    def literal(self, node, get):
        return self.spec.literal(self.node0(node), get)

    def _candidates(self, prefer):
        seen = set()
        order = [v for v in prefer if v is not None] + \
            [self.env[n] for n in self.inputs] + list(self.env.values())
        nodes = {id(v): n for n, v in self.env.items() if isinstance(v, _b.Value)}
        for v in order:
            if not isinstance(v, _b.Value) or id(v) in seen or id(v) not in nodes:
                continue
            seen.add(id(v))
            yield v, nodes[id(v)]

    def source(self, sym, prefer=()):
        """(value, axis): a converted value whose dim ``axis`` is ``sym`` in
        every trace, or else a module input that has it (made an input of
        the segment); None if there is none."""
        for v, n in self._candidates(prefer):
            dims = self.dims_of_node(n)
            if dims is None or len(dims) != len(v.shape):
                continue
            for j, d in enumerate(dims):
                if d == sym:
                    return v, j
        if self.value_of is None:
            return None
        for n in self.spec.gms[self.t].graph.nodes:
            if n.op != "placeholder" or n in self.env:
                continue
            dims = self.dims_of_node(n)
            for j, d in enumerate(dims or []):
                if d == sym:
                    return self.value_of(n), j
        return None

    def shape_of(self, ctx, v):
        if id(v) not in self._shapes:
            self._shapes[id(v)] = (v, ctx.op("Shape", data=v))
        return self._shapes[id(v)][1]

    def _symbol(self, ctx, k, prefer):
        s = self.source(Sym(self.spec.symbol_values(k), ("mul", 1, {k: 1}), [k]), prefer)
        if s is None:
            return None
        return ctx.op("Gather", data=self.shape_of(ctx, s[0]), indices=ctx.ints([s[1]]), axis=0)

    def _realise(self, ctx, expr, prefer):
        kind, c, terms = expr
        gathered = {}
        for k in terms:
            g = self._symbol(ctx, k, prefer)
            if g is None:
                return None
            gathered[k] = g
        out = None
        for k, e in sorted(terms.items()):
            for _ in range(e if kind == "mul" else 1):
                f = gathered[k]
                if kind == "add" and e != 1:
                    f = ctx.op("Mul", A=f, B=ctx.ints([e]))
                out = f if out is None else ctx.op("Mul" if kind == "mul" else "Add", A=out, B=f)
        if out is None:
            return ctx.ints([c])
        if kind == "mul" and c != 1:
            out = ctx.op("Mul", A=out, B=ctx.ints([c]))
        if kind == "add" and c != 0:
            out = ctx.op("Add", A=out, B=ctx.ints([c]))
        return out

    def dim_value(self, ctx, sym, prefer=()):
        """An int64 [1] cge value holding ``sym`` at run time."""
        src = self.source(sym, prefer)
        if src is not None:
            return ctx.op("Gather", data=self.shape_of(ctx, src[0]), indices=ctx.ints([src[1]]),
                          axis=0)
        if sym.expr is not None:
            out = self._realise(ctx, sym.expr, prefer)
            if out is not None:
                return out
        names = ", ".join(self.spec.symbols[k].name for k in sorted(sym.deps))
        raise NotExpressible("[converter] a size (%s across the traces) that depends on %s "
                             "cannot be computed from the input dims%s"
                             % (list(sym.values), names, ctx._where()), sym.deps)


class RecordingBuilder(_b.GraphBuilder):
    """A GraphBuilder that logs what converters build (operators, inputs,
    attributes, constants' bytes), tagged with the fx node being converted,
    so that the conversions of two traces can be compared."""

    def __init__(self, name):
        super().__init__(name)
        self.log = []
        self.node = None

    def input(self, name, dtype, shape):
        self.log.append((self.node, ("input", name, str(dtype), tuple(shape))))
        return super().input(name, dtype, shape)

    def constant(self, value, dtype=None, name=None):
        a = np.asarray(value, dtype=dtype)
        a = np.ascontiguousarray(a) if a.ndim else a.copy()
        self.log.append((self.node, ("constant", a.dtype.str, a.shape, a.tobytes())))
        return super().constant(a, name=name)

    def op(self, op_type, *inputs, domain="", num_outputs=None, name=None, **attrs):
        ins = tuple(v.id if isinstance(v, _b.Value) else None if v is None else
                    ("const", repr(v)) for v in inputs)
        self.log.append((self.node, ("op", op_type, domain, ins, num_outputs,
                                     tuple(sorted((k, _norm(v)) for k, v in attrs.items())))))
        return super().op(op_type, *inputs, domain=domain, num_outputs=num_outputs, name=name,
                          **attrs)


def _norm(v):
    if isinstance(v, np.ndarray):
        return ("array", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        return tuple(_norm(x) for x in v)
    if isinstance(v, _b.Graph):
        return ("graph", id(v))
    return v


def first_difference(log0, log1):
    """(fx node name of trace 0, what) at the first entry where two logs
    differ; None if they agree."""
    for i in range(max(len(log0), len(log1))):
        a = log0[i] if i < len(log0) else (None, None)
        b = log1[i] if i < len(log1) else (None, None)
        if a[1] != b[1]:
            what = a[1][0] if a[1] else "nothing"
            return a[0], what
    return None


# ---- tracing at the sizes -------------------------------------------------------------

def _alternatives(n):
    return [n * 2] + ([n + 1] if n + 1 != n * 2 else [])


def describe(symbol, names):
    parts = []
    for i, d in symbol.dims:
        nm = "input %d ('%s')" % (i, names[i]) if i < len(names) else "input %d" % i
        parts.append("%s dim %d" % (nm, d))
    return "%s (%s, size %d)" % (symbol.name, ", ".join(parts), symbol.size)


def generalise(capture, module, example_inputs, symbols, traces, notes, names):
    """A Spec over the symbols whose traces agree with the base trace, or
    None. Symbols that do not trace or change the graph are left out, with a
    note. ``traces`` caches captures by sizes (a trace, or the exception).
    The spec's ``base_inputs`` are the example inputs at the base sizes."""
    def sizes(over):
        out = {}
        for s in symbols:
            n = over.get(s, s.base)
            if n != s.size:
                out.update({d: n for d in s.dims})
        return out

    def trace(over):
        key = tuple(sorted(sizes(over).items()))
        if key not in traces:
            try:
                traces[key] = capture(module, resize(example_inputs, dict(key)))
            except Exception as e:  # the module refuses the size
                traces[key] = e
        return traces[key]

    def agree(over):
        """None if the trace at `over` has the base trace's graph, else why."""
        gm0, gm = trace({}), trace(over)
        if isinstance(gm0, Exception):
            return "tracing at the base sizes failed: %s" % _first_line(gm0)
        if isinstance(gm, Exception):
            return "tracing at size %s failed: %s" % (
                "/".join(str(n) for n in over.values()), _first_line(gm))
        try:
            match(gm0, gm)
        except Mismatch as e:
            return "at size %s the traced graph differs: %s" % (
                "/".join(str(n) for n in over.values()), e)
        return None

    gm0 = trace({})
    if isinstance(gm0, Exception):
        raise gm0
    symbols = list(symbols)
    while True:
        # Size-1 dims: where size 2 traces another graph than size 1 but the
        # same as size 4, the generalisation is traced from size 2.
        for s in symbols:
            if s.size == 1 and s.alt is None and s.base == 1 and agree({s: 2}) is not None:
                s.base = 2
                if agree({s: 4}) is None:
                    s.min_size = 2
                else:
                    s.base = 1
        failed, gms = [], [trace({})]
        for s in symbols:
            s.joint = None
        for s in symbols:
            why = None
            for alt in ([s.alt] if s.alt is not None else _alternatives(s.base)):
                why = agree({s: alt})
                if why is None:
                    s.alt = alt
                    break
            if why is not None:
                failed.append((s, why))
            else:
                gms.append(trace({s: s.alt}))
        if not failed and len(symbols) >= 2:
            joint = {s: s.alt for s in symbols}
            why = agree(joint)
            if why is None:
                for s in symbols:
                    s.joint = s.alt
                gms.append(trace(joint))
            else:
                failed.append((symbols[-1], "with every symbol changed, " + why))
        elif not failed and symbols:
            # One symbol: a third size checks what two traces fit (S + 1
            # against 2 * S); where it does not trace, there is no check.
            s = symbols[0]
            for third in [n for n in _alternatives(s.base) + [3 * s.base]
                          if n not in (s.base, s.alt)][:1]:
                if agree({s: third}) is None:
                    s.joint = third
                    gms.append(trace({s: third}))
        if not failed:
            break
        for s, why in failed:
            notes.append((s, "%s stays static: %s" % (describe(s, names), why)))
            s.base, s.alt, s.joint, s.min_size = s.size, None, None, 1
            symbols.remove(s)
        # Again without them (their dims back at the example's sizes).
    if not symbols:
        return None
    spec = Spec(symbols, gms)
    spec.base_inputs = resize(example_inputs, sizes({}))
    return spec


def _first_line(e):
    return str(e).splitlines()[0] if str(e) else type(e).__name__
