# The converter registry of the PyTorch front end and the context converters
# work through: a converter maps one FX node onto cge operators, naming inputs
# and attributes by the operator's schema (checked here, at conversion time).
import operator

import numpy as np
import torch

from .. import builder as _b
from ..errors import ConverterError

_CONVERTERS = {}

_TORCH_TO_CGE = {
    torch.float32: 1, torch.uint8: 2, torch.int8: 3, torch.int16: 5, torch.int32: 6,
    torch.int64: 7, torch.bool: 9, torch.float16: 10, torch.float64: 11, torch.bfloat16: 16,
}
_CGE_TO_TORCH = {v: k for k, v in _TORCH_TO_CGE.items()}


def cge_dtype(dt):
    """cge dtype number of a torch dtype; ConverterError if cge has none."""
    if dt not in _TORCH_TO_CGE:
        raise ConverterError("[converter] torch dtype %s has no cge equivalent" % dt, "converter",
                             "CGE_ERR_DTYPE")
    return _TORCH_TO_CGE[dt]


def torch_dtype(code):
    return _CGE_TO_TORCH[code]


def op_name(target):
    """"aten::add.Tensor" for an OpOverload; a readable name otherwise."""
    if isinstance(target, torch._ops.OpOverload):
        s = target._schema
        return s.name + ("." + s.overload_name if s.overload_name else "")
    if target is operator.getitem:
        return "getitem"
    return getattr(target, "__name__", str(target))


def register_converter(*targets, override=False):
    """Decorator: ``@cge.torch.register_converter(torch.ops.aten.add.Tensor)``
    registers ``fn(ctx, node, *args, **kwargs)`` for those targets (an
    OpOverload, or an OpOverloadPacket for all its overloads). ``args`` are the
    node's arguments with tensors as cge values; it returns the value (or a
    tuple of values) that the node produces. A second converter for a target is
    an error unless ``override``."""
    def deco(fn):
        for t in targets:
            if t in _CONVERTERS and not override:
                raise ConverterError("[converter] %s already has a converter (%s); pass "
                                     "override=True to replace it" % (op_name(t),
                                                                      _CONVERTERS[t].__name__),
                                     "converter", "CGE_ERR_EXISTS")
            _CONVERTERS[t] = fn
        return fn
    return deco


def find_converter(target):
    fn = _CONVERTERS.get(target)
    if fn is None and isinstance(target, torch._ops.OpOverload):
        fn = _CONVERTERS.get(target.overloadpacket)
    return fn


def converters():
    """The registered targets -> converter functions."""
    return dict(_CONVERTERS)


class Missing:
    """An output a converter does not produce (batch norm's saved statistics,
    max pooling's indices): reading it is a ConverterError."""

    def __init__(self, what):
        self.what = what


class ConversionContext:
    """What a converter sees: ``op`` (emit a cge operator, arguments by schema
    name), ``const``, ``shape``/``dtype`` of values, and the FX ``node``."""

    def __init__(self, builder, node=None, dyn=None):
        self.b = builder
        self.node = node
        self.dyn = dyn      # compile(dynamic=...): the traces' sizes (see out_dims)
        self._k = 0
        self._aux = 0       # > 0 while building sizes (shape_value, dim_value)
        self._ka = 0

    def _where(self):
        if self.node is None:
            return ""
        return " (converter for %s, node '%s')" % (op_name(self.node.target), self.node.name)

    def error(self, msg):
        """A ConverterError naming this node's aten op and the node."""
        return ConverterError("[converter] %s%s" % (msg, self._where()), "converter",
                              "CGE_ERR_UNSUPPORTED")

    def op(self, op_type, domain="", outputs=None, **named):
        """Emit ``op_type``: each keyword is an input or an attribute of its
        schema (by name); ``outputs`` is a count or a list of output names
        (default: the required ones). Returns a value or a tuple of values."""
        try:
            sch = _b.schema(op_type, domain)
        except Exception as e:  # no such operator: the mapping is wrong
            raise self.error("%s" % e) from None
        in_names = [n for n, _, _ in sch.inputs]
        inputs, attrs = {}, {}
        for k, v in named.items():
            if k in in_names:
                inputs[k] = v
            elif k in sch.attrs:
                attrs[k] = v
            else:
                raise self.error("operator %s has no input or attribute '%s' (inputs: %s; "
                                 "attributes: %s)" % (op_type, k, ", ".join(in_names) or "none",
                                                      ", ".join(sch.attrs) or "none"))
        args = []
        for name, optional, variadic in sch.inputs:
            v = inputs.get(name)
            if variadic:
                vals = list(v) if isinstance(v, (list, tuple)) else ([] if v is None else [v])
                if not vals and not optional:
                    raise self.error("operator %s needs at least one '%s'" % (op_type, name))
                args.extend(vals)
            elif v is None:
                if not optional:
                    raise self.error("operator %s needs input '%s' (inputs: %s)"
                                     % (op_type, name, ", ".join(in_names)))
                args.append(None)
            else:
                args.append(v)
        while args and args[-1] is None:
            args.pop()
        for a in args:
            if isinstance(a, Missing):
                raise self.error("reads %s, which the cge mapping does not produce" % a.what)
        for r in sch.required:
            if r not in attrs:
                raise self.error("operator %s needs attribute '%s'" % (op_type, r))
        if outputs is None:
            n_out = sch.default_outputs()
        elif isinstance(outputs, int):
            n_out = outputs
        else:
            bad = [o for o in outputs if o not in sch.outputs]
            if bad:
                raise self.error("operator %s has no output '%s' (outputs: %s)"
                                 % (op_type, bad[0], ", ".join(sch.outputs)))
            n_out = max(sch.outputs.index(o) for o in outputs) + 1
        if n_out < 1 or (n_out > len(sch.outputs) and not sch.outputs):
            raise self.error("operator %s: %d outputs asked" % (op_type, n_out))
        name = None
        if self.node is not None:
            # The node's first operator takes its name; the others a suffix
            # no fx name has ('.'), sizes ('.size') apart, so that the
            # operator a message names is the node's own.
            if self._aux:
                name = "%s.size%d" % (self.node.name, self._ka)
                self._ka += 1
            else:
                name = self.node.name if self._k == 0 else "%s.%d" % (self.node.name, self._k)
                self._k += 1
        res = self.b.op(op_type, *args, domain=domain, num_outputs=n_out, name=name, **attrs)
        if isinstance(outputs, (list, tuple)):
            res = res if isinstance(res, tuple) else (res,)
            return tuple(res[sch.outputs.index(o)] for o in outputs)
        return res

    def const(self, value, like=None, dtype=None):
        """A constant; Python numbers take ``like``'s dtype (or ``dtype``).
        bfloat16 (numpy has none) goes by its bits: a value of ``like``'s
        dtype rounded to bfloat16, not cast to its uint16 carrier."""
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().contiguous()
            if value.dtype == torch.bfloat16:
                return self.b.constant(value.view(torch.int16).numpy().view(np.uint16),
                                       bits_of=_TORCH_TO_CGE[torch.bfloat16])
            value = value.numpy()
        if dtype is None and like is not None:
            if like.dtype_code == _TORCH_TO_CGE[torch.bfloat16]:
                bits = torch.from_numpy(np.asarray(value, np.float32).copy()).to(torch.bfloat16)
                return self.b.constant(bits.view(torch.int16).numpy().view(np.uint16),
                                       bits_of=_TORCH_TO_CGE[torch.bfloat16])
            dtype = like.dtype
        return self.b.constant(np.asarray(value, dtype=dtype))

    def ints(self, values):
        """An int64 vector constant (shapes, axes)."""
        return self.b.constant(np.asarray(list(values), dtype=np.int64).reshape(-1))

    @staticmethod
    def shape(v):
        return tuple(v.shape)

    @staticmethod
    def rank(v):
        return len(v.shape)

    def out_shape(self):
        """The shape the node produces, as PyTorch traced it."""
        tm = self.node.meta.get("tensor_meta") if self.node is not None else None
        if tm is None or not hasattr(tm, "shape"):
            raise self.error("no traced shape for this node")
        return tuple(int(d) for d in tm.shape)

    # ---- sizes that vary (compile(dynamic=...)) ------------------------------------
    # Under dynamic=..., the module was traced at several sizes: a size the
    # traces disagree on is a Sym (int(sym) is the example's), and a converter
    # that needs it in the graph asks for a value computed from the runtime
    # shapes (shape_value / dim_value) instead of baking a constant. A
    # converter that bakes one anyway is caught (its graphs differ between the
    # traces) and the dims it depends on stay static.

    @property
    def dynamic(self):
        """True in a conversion under compile(dynamic=...)."""
        return self.dyn is not None

    def out_dims(self, index=None):
        """The node's output dims: ints, and under dynamic=... a Sym for each
        dim that differs between the traces. ``index``: of a tuple output."""
        if self.dyn is None:
            if index is None:
                return list(self.out_shape())
            return [int(d) for d in self.node.meta["tensor_meta"][index].shape]
        dims = self.dyn.dims_of_node(self.node, index)
        if dims is None:
            raise self.error("no traced shape for this node")
        return list(dims)

    def dims_of(self, fx_node, index=None):
        """The traced dims of another node (an input of this one), as out_dims."""
        if self.dyn is None:
            tm = fx_node.meta.get("tensor_meta")
            if tm is None and fx_node.op == "get_attr":
                tm = fx_node.graph.owning_module
                for part in fx_node.target.split("."):
                    tm = getattr(tm, part)
            if index is not None:
                tm = tm[index]
            return [int(d) for d in tm.shape]
        dims = self.dyn.dims_of_node(fx_node, index)
        if dims is None:
            raise self.error("no traced shape for '%s'" % fx_node.name)
        return list(dims)

    def literal(self, get):
        """A number of the node's arguments, ``get(node)`` (``lambda n:
        n.args[3]``): an int, or a Sym where the traces disagree."""
        if self.dyn is None:
            return get(self.node)
        return self.dyn.literal(self.node, get)

    @staticmethod
    def is_sym(d):
        from ._dynamic import Sym
        return isinstance(d, Sym)

    def not_expressible(self, what, dims):
        """The error that makes the symbols ``dims`` (Syms) depend on static."""
        from ._dynamic import NotExpressible
        deps = set()
        for d in dims:
            if self.is_sym(d):
                deps |= d.deps
        return NotExpressible("[converter] %s%s" % (what, self._where()), deps)

    def dim_value(self, d, like=()):
        """An int64 [1] value holding size ``d`` (an int or a Sym) at run time;
        a Sym comes from the runtime shape of a value (those in ``like``
        first) that has it as a dim, or from the symbols' dims."""
        if not self.is_sym(d):
            return self.ints([int(d)])
        self._aux += 1
        try:
            return self.dyn.dim_value(self, d, like)
        finally:
            self._aux -= 1

    def shape_value(self, dims, like=(), infer_one=False):
        """An int64 vector value of ``dims`` (ints and Syms): a constant when
        every dim is an int. ``infer_one``: a Reshape target, where one
        varying dim may be -1 (inferred by Reshape from the element count)."""
        from ._dynamic import NotExpressible
        syms = [i for i, d in enumerate(dims) if self.is_sym(d)]
        if not syms:
            return self.ints([int(d) for d in dims])
        if infer_one and len(syms) == 1:
            return self.ints([-1 if i == syms[0] else int(d) for i, d in enumerate(dims)])
        pieces, failed = {}, []
        for i in syms:
            if infer_one and not failed and i == syms[-1]:
                failed.append(i)        # the last one left: -1
                break
            try:
                pieces[i] = self.dim_value(dims[i], like)
            except NotExpressible:
                if not infer_one or failed:
                    raise
                failed.append(i)
        self._aux += 1
        try:
            return self._concat_shape(dims, pieces, failed)
        finally:
            self._aux -= 1

    def _concat_shape(self, dims, pieces, failed):
        parts, run = [], []
        for i, d in enumerate(dims):
            if i in failed:
                run.append(-1)
            elif i in pieces:
                if run:
                    parts.append(self.ints(run))
                    run = []
                parts.append(pieces[i])
            else:
                run.append(int(d))
        if run:
            parts.append(self.ints(run))
        return parts[0] if len(parts) == 1 else self.op("Concat", inputs=parts, axis=0)
