# Converters from aten ops (as make_fx traces them) onto cge operators: every
# op of resnet18, mobilenet_v2 and nn.TransformerEncoder, and the common
# elementwise, shape and reduction ops around them. Converters map; they never
# compute (shapes they need come from the traced node or the cge values; under
# compile(dynamic=...), sizes that vary come from the runtime shapes).
import operator

import numpy as np
import torch

from ..errors import ConverterError
from ._registry import Missing, cge_dtype, register_converter, torch_dtype

aten = torch.ops.aten
INT64_MAX = 2 ** 63 - 1


def _opt(name):
    """aten.<packet>.<overload> where this PyTorch has it, else None."""
    packet, _, overload = name.partition(".")
    try:
        return getattr(getattr(aten, packet), overload or "default")
    except (AttributeError, RuntimeError):
        return None


def _axis(d, rank):
    return d + rank if d < 0 else d


def _pair(v, n):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return v * n if len(v) == 1 else v


def _scalar(ctx, v, like):
    """A tensor operand that may be a Python number."""
    return ctx.const(v, like=like) if isinstance(v, (int, float, bool)) else v


# ---- structure ----------------------------------------------------------------

@register_converter(operator.getitem)
def _getitem(ctx, node, seq, i):
    if not isinstance(seq, (tuple, list)):
        raise ctx.error("getitem on a value that is not a tuple")
    v = seq[i]
    if isinstance(v, Missing):
        raise ctx.error("reads %s, which the cge mapping does not produce" % v.what)
    return v


@register_converter(aten.clone.default, aten.detach.default, aten.alias.default,
                    *filter(None, [_opt("contiguous"), _opt("lift_fresh_copy"),
                                   _opt("dropout"), _opt("native_dropout")]))
def _identity(ctx, node, x, *args, **kwargs):
    if node.target is aten.native_dropout.default:
        if args and args[1]:
            raise ctx.error("dropout in training mode")
        return (ctx.op("Identity", input=x), Missing("the dropout mask"))
    if node.target is aten.dropout.default and len(args) > 1 and args[1]:
        raise ctx.error("dropout in training mode")
    return ctx.op("Identity", input=x)


@register_converter(*filter(None, [_opt(n) for n in (
    "view", "_reshape_alias", "reshape", "_unsafe_view", "flatten.using_ints", "view_copy")]))
def _reshape(ctx, node, x, *args, **kwargs):
    return ctx.op("Reshape", data=x, shape=ctx.shape_value(ctx.out_dims(), like=[x],
                                                           infer_one=True))


@register_converter(*filter(None, [_opt(n) for n in (
    "squeeze.dim", "squeeze", "unsqueeze", "squeeze.dims")]))
def _squeeze(ctx, node, x, *args):
    return ctx.op("Reshape", data=x, shape=ctx.shape_value(ctx.out_dims(), like=[x],
                                                           infer_one=True))


@register_converter(aten.t.default)
def _t(ctx, node, x):
    if ctx.rank(x) < 2:
        return ctx.op("Identity", input=x)
    return ctx.op("Transpose", data=x, perm=[1, 0])


@register_converter(aten.transpose.int)
def _transpose(ctx, node, x, d0, d1):
    r = ctx.rank(x)
    perm = list(range(r))
    a, b = _axis(d0, r), _axis(d1, r)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.op("Transpose", data=x, perm=perm)


@register_converter(aten.permute.default)
def _permute(ctx, node, x, dims):
    r = ctx.rank(x)
    return ctx.op("Transpose", data=x, perm=[_axis(d, r) for d in dims])


@register_converter(aten.expand.default)
def _expand(ctx, node, x, size, implicit=False):
    dims = ctx.out_dims()
    if any(ctx.is_sym(d) for d in dims):
        # Where x already has the size, Expand's 1 keeps it (whatever it is).
        xd = ctx.dims_of(node.args[0])
        off = len(dims) - len(xd)
        dims = [1 if i >= off and xd[i - off] == d else d for i, d in enumerate(dims)]
    return ctx.op("Expand", input=x, shape=ctx.shape_value(dims, like=[x]))


@register_converter(aten.cat.default)
def _cat(ctx, node, tensors, dim=0):
    tensors = [t for t in tensors if 0 not in t.shape or ctx.rank(t) != 1]
    # cat promotes mixed dtypes (int64 with float32: float32), Concat does not.
    tensors = [_as_out_dtype(ctx, node, t) for t in tensors]
    return ctx.op("Concat", inputs=tensors, axis=dim)


@register_converter(aten.stack.default)
def _stack(ctx, node, tensors, dim=0):
    r = ctx.rank(tensors[0]) + 1
    ax = ctx.ints([_axis(dim, r)])
    return ctx.op("Concat", inputs=[ctx.op("Unsqueeze", data=t, axes=ax) for t in tensors],
                  axis=_axis(dim, r))


@register_converter(aten.split.Tensor, aten.split_with_sizes.default)
def _split(ctx, node, x, split, dim=0):
    d = _axis(dim, ctx.rank(x))
    metas = node.meta.get("tensor_meta")
    if isinstance(metas, (tuple, list)):    # the traced pieces
        sizes = [ctx.out_dims(k)[d] for k in range(len(metas))]
    else:
        n = ctx.dims_of(node.args[0])[d]
        if isinstance(split, int):
            sizes = [split] * (n // split) + ([n % split] if n % split else [])
        else:
            sizes = list(split)
    if any(ctx.is_sym(s) for s in sizes):
        if not all(s == sizes[0] for s in sizes):
            raise ctx.not_expressible("a split into unequal pieces of a varying dim", sizes)
        # Equal pieces of a varying dim: Split without sizes splits evenly.
        outs = ctx.op("Split", input=x, axis=d, outputs=len(sizes))
    else:
        outs = ctx.op("Split", input=x, split=ctx.ints(sizes), axis=d, outputs=len(sizes))
    return outs if isinstance(outs, tuple) else (outs,)


@register_converter(aten.slice.Tensor)
def _slice(ctx, node, x, dim=0, start=None, end=None, step=1):
    d = _axis(dim, ctx.rank(x))
    start = 0 if start is None else start
    end = INT64_MAX if end is None or end > INT64_MAX else end
    if ctx.dynamic:
        size = ctx.dims_of(node.args[0])[d]
        if len(node.args) > 2 and node.args[2] is not None:
            start = ctx.literal(lambda n: n.args[2])
        if len(node.args) > 3 and node.args[3] is not None and end != INT64_MAX:
            end = ctx.literal(lambda n: min(n.args[3], INT64_MAX))
            if ctx.is_sym(end) and end == size:
                end = INT64_MAX             # x[:n] with n = x's size: to the end
        return ctx.op("Slice", data=x, starts=ctx.dim_value(start, like=[x]),
                      ends=ctx.dim_value(end, like=[x]), axes=ctx.ints([d]),
                      steps=ctx.ints([step]))
    return ctx.op("Slice", data=x, starts=ctx.ints([start]), ends=ctx.ints([end]),
                  axes=ctx.ints([d]), steps=ctx.ints([step]))


@register_converter(aten.select.int)
def _select(ctx, node, x, dim, index):
    d = _axis(dim, ctx.rank(x))
    return ctx.op("Gather", data=x, indices=ctx.const(np.int64(index)), axis=d)


@register_converter(*filter(None, [_opt("flip")]))
def _flip(ctx, node, x, dims):
    r = ctx.rank(x)
    axes = [_axis(d, r) for d in dims]
    return ctx.op("Slice", data=x, starts=ctx.ints([-1] * len(axes)),
                  ends=ctx.ints([-(2 ** 63)] * len(axes)), axes=ctx.ints(axes),
                  steps=ctx.ints([-1] * len(axes)))


@register_converter(*filter(None, [_opt("gather")]))
def _gather(ctx, node, x, dim, index, sparse_grad=False):
    return ctx.op("GatherElements", data=x, indices=index, axis=_axis(dim, ctx.rank(x)))


@register_converter(*filter(None, [_opt("index_select")]))
def _index_select(ctx, node, x, dim, index):
    return ctx.op("Gather", data=x, indices=index, axis=_axis(dim, ctx.rank(x)))


@register_converter(aten.embedding.default)
def _embedding(ctx, node, weight, indices, *args):
    return ctx.op("Gather", data=weight, indices=indices, axis=0)


@register_converter(aten._to_copy.default)
def _to_copy(ctx, node, x, dtype=None, **kwargs):
    if dtype is None or cge_dtype(dtype) == x.dtype_code:
        return ctx.op("Identity", input=x)
    return ctx.op("Cast", input=x, to=cge_dtype(dtype))


# ---- elementwise -------------------------------------------------------------

def _binary(op_type):
    def conv(ctx, node, a, b, alpha=1):
        like = a if not isinstance(a, (int, float, bool)) else b
        tm = node.meta.get("tensor_meta")
        if op_type in ("Add", "Sub", "Mul", "Div") and hasattr(tm, "dtype") and \
                like.dtype_code != cge_dtype(tm.dtype):
            # The result's dtype is not the tensor's (int64 + 0.5, int64 / int64
            # are float in PyTorch): tensors go to it first, so that a Python
            # number is not truncated to the tensor's dtype (0.5 -> 0).
            to = cge_dtype(tm.dtype)
            a, b = (v if isinstance(v, (int, float, bool)) or v.dtype_code == to
                    else ctx.op("Cast", input=v, to=to) for v in (a, b))
            like = a if not isinstance(a, (int, float, bool)) else b
        a, b = _scalar(ctx, a, like), _scalar(ctx, b, like)
        if a.dtype_code != b.dtype_code:
            # PyTorch promotes mixed dtypes (float + int64): cge's operators
            # take one dtype, so both go to the promoted one first.
            tm = node.meta.get("tensor_meta")
            to = cge_dtype(tm.dtype) if op_type in ("Add", "Sub", "Mul", "Div") and \
                hasattr(tm, "dtype") else cge_dtype(torch.promote_types(
                    torch_dtype(a.dtype_code), torch_dtype(b.dtype_code)))
            a, b = (v if v.dtype_code == to else ctx.op("Cast", input=v, to=to) for v in (a, b))
            like = a
        if alpha != 1:
            b = ctx.op("Mul", A=b, B=ctx.const(alpha, like=like))
        return ctx.op(op_type, A=a, B=b)
    conv.__name__ = "_" + op_type.lower()
    return conv


for _t_op, _cge in ((aten.add, "Add"), (aten.sub, "Sub"), (aten.mul, "Mul"), (aten.div, "Div"),
                    (aten.eq, "Equal"), (aten.lt, "Less"), (aten.gt, "Greater"),
                    (aten.le, "LessOrEqual"), (aten.ge, "GreaterOrEqual")):
    _fns = [getattr(_t_op, o) for o in ("Tensor", "Scalar") if hasattr(_t_op, o)]
    register_converter(*_fns)(_binary(_cge))
register_converter(aten.add_.Tensor, aten.mul_.Tensor, aten.sub_.Tensor, aten.div_.Tensor)(
    lambda ctx, node, a, b, alpha=1: _binary({"add_": "Add", "mul_": "Mul", "sub_": "Sub",
                                              "div_": "Div"}[node.target._schema.name[6:]])(
        ctx, node, a, b, alpha))


@register_converter(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(ctx, node, a, b, alpha=1):
    return _binary("Sub")(ctx, node, b, a, 1) if alpha == 1 else \
        ctx.op("Sub", A=_scalar(ctx, b, a), B=ctx.op("Mul", A=a, B=ctx.const(alpha, like=a)))


def _as_out_dtype(ctx, node, x):
    """x cast to the node's traced dtype where they differ (sqrt of an int
    tensor is float in PyTorch; cge's Sqrt takes floats only)."""
    tm = node.meta.get("tensor_meta") if node is not None else None
    if hasattr(tm, "dtype") and cge_dtype(tm.dtype) != x.dtype_code:
        return ctx.op("Cast", input=x, to=cge_dtype(tm.dtype))
    return x


def _unary(op_type, **attrs):
    def conv(ctx, node, x, *args, **kwargs):
        x = _as_out_dtype(ctx, node, x)
        return ctx.op(op_type, X=x, **attrs) if "X" in _in_names(op_type) else \
            ctx.op(op_type, input=x, **attrs)
    return conv


_IN_NAMES = {}


def _in_names(op_type):
    if op_type not in _IN_NAMES:
        from .. import builder
        _IN_NAMES[op_type] = [n for n, _, _ in builder.schema(op_type).inputs]
    return _IN_NAMES[op_type]


for _ops, _cge in (((aten.relu.default, aten.relu_.default), "Relu"),
                   ((aten.sigmoid.default, aten.sigmoid_.default), "Sigmoid"),
                   ((aten.tanh.default, aten.tanh_.default), "Tanh"),
                   ((aten.exp.default,), "Exp"), ((aten.log.default,), "Log"),
                   ((aten.sqrt.default,), "Sqrt"), ((aten.neg.default,), "Neg"),
                   ((aten.abs.default,), "Abs"), ((aten.erf.default,), "Erf"),
                   ((aten.sin.default,), "Sin"), ((aten.cos.default,), "Cos"),
                   ((aten.reciprocal.default,), "Reciprocal"), ((aten.floor.default,), "Floor"),
                   ((aten.ceil.default,), "Ceil"), ((aten.sign.default,), "Sign"),
                   ((aten.round.default,), "Round"),
                   ((aten.hardswish.default, aten.hardswish_.default), "HardSwish")):
    # and the in-place form (sqrt_ after a var, ...): value semantics in the trace
    _inplace = [_opt(o._schema.name.split("::")[1] + "_") for o in _ops]
    register_converter(*_ops, *[o for o in _inplace if o is not None and o not in _ops])(
        _unary(_cge))


@register_converter(*filter(None, [_opt("round.decimals")]))
def _round_decimals(ctx, node, x, decimals=0):
    """round(x * 10^d) / 10^d, half to even as PyTorch (and ONNX's Round)."""
    k = ctx.const(10.0 ** decimals, like=x)
    return ctx.op("Div", A=ctx.op("Round", X=ctx.op("Mul", A=x, B=k)), B=k)


@register_converter(*filter(None, [_opt("softplus")]))
def _softplus(ctx, node, x, beta=1, threshold=20):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold
    (PyTorch's linear region)."""
    bx = x if beta == 1 else ctx.op("Mul", A=x, B=ctx.const(float(beta), like=x))
    sp = ctx.op("Softplus", X=bx)
    if beta != 1:
        sp = ctx.op("Div", A=sp, B=ctx.const(float(beta), like=x))
    big = ctx.op("Greater", A=bx, B=ctx.const(float(threshold), like=x))
    return ctx.op("Where", condition=big, X=x, Y=sp)


@register_converter(aten.rsqrt.default)
def _rsqrt(ctx, node, x):
    x = _as_out_dtype(ctx, node, x)
    return ctx.op("Reciprocal", X=ctx.op("Sqrt", X=x))


@register_converter(aten.hardsigmoid.default, aten.hardsigmoid_.default)
def _hardsigmoid(ctx, node, x):
    return ctx.op("HardSigmoid", X=x, alpha=1.0 / 6.0, beta=0.5)


@register_converter(aten.silu.default, aten.silu_.default)
def _silu(ctx, node, x):
    return ctx.op("Mul", A=x, B=ctx.op("Sigmoid", X=x))


@register_converter(aten.gelu.default)
def _gelu(ctx, node, x, approximate="none"):
    return ctx.op("Gelu", X=x, approximate=approximate)


@register_converter(aten.leaky_relu.default, aten.leaky_relu_.default)
def _leaky_relu(ctx, node, x, slope=0.01):
    return ctx.op("LeakyRelu", X=x, alpha=float(slope))


@register_converter(aten.elu.default, aten.elu_.default)
def _elu(ctx, node, x, alpha=1.0, scale=1, input_scale=1):
    if scale != 1 or input_scale != 1:
        raise ctx.error("elu with scale or input_scale")
    return ctx.op("Elu", X=x, alpha=float(alpha))


@register_converter(aten.hardtanh.default, aten.hardtanh_.default, aten.clamp.default,
                    aten.clamp_.default, aten.clamp_min.default, aten.clamp_max.default,
                    *filter(None, [_opt("clamp_min_"), _opt("clamp_max_")]))
def _clip(ctx, node, x, lo=None, hi=None):
    name = node.target._schema.name
    if name in ("aten::clamp_max", "aten::clamp_max_"):
        lo, hi = None, lo
    if name.startswith("aten::hardtanh"):
        lo = -1.0 if lo is None else lo
        hi = 1.0 if hi is None else hi
    return ctx.op("Clip", input=x, min=None if lo is None else ctx.const(lo, like=x),
                  max=None if hi is None else ctx.const(hi, like=x))


@register_converter(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)
def _pow(ctx, node, x, y):
    return ctx.op("Pow", X=x, Y=_scalar(ctx, y, x))


@register_converter(aten.where.self)
def _where(ctx, node, cond, x, y):
    return ctx.op("Where", condition=cond, X=_scalar(ctx, x, y), Y=_scalar(ctx, y, x))


# ---- linear algebra, convolution, pooling, normalisation ------------------------

@register_converter(aten.addmm.default)
def _addmm(ctx, node, bias, a, b, beta=1, alpha=1):
    if ctx.rank(a) == 2 and ctx.rank(b) == 2:
        return ctx.op("Gemm", A=a, B=b, C=bias, alpha=float(alpha), beta=float(beta))
    # Gemm takes matrices only: another rank (a batched operand) is MatMul + Add.
    y = ctx.op("MatMul", A=a, B=b)
    if alpha != 1:
        y = ctx.op("Mul", A=y, B=ctx.const(alpha, like=y))
    if beta != 1:
        bias = ctx.op("Mul", A=bias, B=ctx.const(beta, like=bias))
    return ctx.op("Add", A=y, B=bias)


@register_converter(*filter(None, [_opt("baddbmm.default")]))
def _baddbmm(ctx, node, bias, a, b, beta=1, alpha=1):
    return _addmm(ctx, node, bias, a, b, beta, alpha)


@register_converter(aten.mm.default, aten.bmm.default, aten.matmul.default)
def _matmul(ctx, node, a, b):
    return ctx.op("MatMul", A=a, B=b)


@register_converter(aten.linear.default)
def _linear(ctx, node, x, w, b=None):
    y = ctx.op("MatMul", A=x, B=ctx.op("Transpose", data=w, perm=[1, 0]))
    return y if b is None else ctx.op("Add", A=y, B=b)


@register_converter(aten.convolution.default)
def _convolution(ctx, node, x, w, b, stride, padding, dilation, transposed, output_padding,
                 groups):
    n = ctx.rank(x) - 2
    attrs = dict(strides=_pair(stride, n), pads=_pair(padding, n) * 2,
                 dilations=_pair(dilation, n), group=int(groups),
                 kernel_shape=list(w.shape[2:]))
    if transposed:
        return ctx.op("ConvTranspose", X=x, W=w, B=b, output_padding=_pair(output_padding, n),
                      **attrs)
    return ctx.op("Conv", X=x, W=w, B=b, **attrs)


@register_converter(*[getattr(aten, n).default for n in
                      ("native_batch_norm", "_native_batch_norm_legit_no_training")
                      if hasattr(aten, n)])
def _batch_norm(ctx, node, x, w, b, mean, var, *rest):
    training = rest[0] if len(rest) == 3 else False
    eps = rest[-1]
    c = ctx.dims_of(node.args[0])[1]
    if training and mean is None and var is None:
        # Batch statistics and no running ones to update: instance norm
        # traces so (over [1, N*C, ...]), and so does BN with
        # track_running_stats=False. Mean and biased variance per channel.
        axes = ctx.ints([0] + list(range(2, ctx.rank(x))))
        mu = ctx.op("ReduceMean", data=x, axes=axes, keepdims=1)
        d = ctx.op("Sub", A=x, B=mu)
        v = ctx.op("ReduceMean", data=ctx.op("Mul", A=d, B=d), axes=axes, keepdims=1)
        y = ctx.op("Div", A=d, B=ctx.op("Sqrt", X=ctx.op("Add", A=v, B=ctx.const(
            float(eps), like=x))))
        per_c = ctx.ints([int(c)] + [1] * (ctx.rank(x) - 2))
        if w is not None:
            y = ctx.op("Mul", A=y, B=ctx.op("Reshape", data=w, shape=per_c))
        if b is not None:
            y = ctx.op("Add", A=y, B=ctx.op("Reshape", data=b, shape=per_c))
        return (y, Missing("batch norm's saved mean"), Missing("batch norm's saved inverse std"))
    if training:
        raise ctx.error("batch normalisation in training mode (call module.eval())")
    w = w if w is not None else ctx.const(np.ones(c), like=x)
    b = b if b is not None else ctx.const(np.zeros(c), like=x)
    y = ctx.op("BatchNormalization", X=x, scale=w, B=b, input_mean=mean, input_var=var,
               epsilon=float(eps))
    return (y, Missing("batch norm's saved mean"), Missing("batch norm's saved inverse std"))


@register_converter(aten.native_layer_norm.default)
def _layer_norm(ctx, node, x, shape, w, b, eps):
    k = len(shape)
    if w is None:
        w = ctx.const(np.ones(shape), like=x)
    y = ctx.op("LayerNormalization", X=x, Scale=w, B=b, axis=-k, epsilon=float(eps))
    return (y, Missing("layer norm's mean"), Missing("layer norm's inverse std"))


@register_converter(aten.max_pool2d_with_indices.default)
def _max_pool(ctx, node, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    k = _pair(kernel, 2)
    s = _pair(stride, 2) if stride else k
    y = ctx.op("MaxPool", X=x, kernel_shape=k, strides=s, pads=_pair(padding, 2) * 2,
               dilations=_pair(dilation, 2), ceil_mode=int(bool(ceil_mode)))
    return (y, Missing("max pooling's indices"))


@register_converter(aten.avg_pool2d.default)
def _avg_pool(ctx, node, x, kernel, stride=(), padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=None):
    if divisor_override:
        raise ctx.error("avg_pool2d with divisor_override")
    k = _pair(kernel, 2)
    return ctx.op("AveragePool", X=x, kernel_shape=k, strides=_pair(stride, 2) if stride else k,
                  pads=_pair(padding, 2) * 2, ceil_mode=int(bool(ceil_mode)),
                  count_include_pad=int(bool(count_include_pad)))


@register_converter(aten._adaptive_avg_pool2d.default, aten.adaptive_avg_pool2d.default)
def _adaptive_avg_pool(ctx, node, x, size):
    oh, ow = _pair(size, 2)
    if (oh, ow) == (1, 1):
        return ctx.op("GlobalAveragePool", X=x)
    h, w = (int(v) for v in ctx.dims_of(node.args[0])[2:4])
    if h % oh or w % ow:
        # PyTorch's bins [floor(i h / oh), ceil((i + 1) h / oh)), overlapping
        # where h is not a multiple: the mean over each is a product with a
        # constant averaging matrix per axis, A_h x A_w^T.
        a_h, a_w = _bin_matrix(h, oh), _bin_matrix(w, ow)
        y = ctx.op("MatMul", A=ctx.const(a_h, like=x), B=x)
        return ctx.op("MatMul", A=y, B=ctx.const(a_w.T.copy(), like=x))
    k = [h // oh, w // ow]
    return ctx.op("AveragePool", X=x, kernel_shape=k, strides=k)


def _bins(n, out):
    return [(i * n // out, -(-(i + 1) * n // out)) for i in range(out)]


def _bin_matrix(n, out):
    m = np.zeros((out, n), np.float32)
    for i, (a, b) in enumerate(_bins(n, out)):
        m[i, a:b] = 1.0 / (b - a)
    return m


@register_converter(*filter(None, [_opt("adaptive_max_pool2d"), _opt("adaptive_max_pool1d")]))
def _adaptive_max_pool(ctx, node, x, size):
    """The max over each of PyTorch's bins, axis by axis (a max over a
    rectangle is the max over its rows of the max over its columns); the
    indices are not made."""
    r = ctx.rank(x)
    dims = ctx.dims_of(node.args[0])
    outs = _pair(size, r - 2)
    y = x
    for k, o in enumerate(outs):
        ax = 2 + k
        if ctx.is_sym(dims[ax]):
            raise ctx.not_expressible("adaptive pooling of a varying size", [dims[ax]])
        parts = [ctx.op("ReduceMax", data=ctx.op("Slice", data=y, starts=ctx.ints([a]),
                                                  ends=ctx.ints([b]), axes=ctx.ints([ax])),
                        axes=ctx.ints([ax]), keepdims=1) for a, b in _bins(int(dims[ax]), int(o))]
        y = parts[0] if len(parts) == 1 else ctx.op("Concat", inputs=parts, axis=ax)
    return (y, Missing("adaptive max pooling's indices"))


@register_converter(*filter(None, [_opt("unfold")]))
def _unfold(ctx, node, x, dim, size, step):
    """Windows of `size` every `step` along dim: a Gather of their positions
    ([windows, size] at dim), the size axis moved last, as PyTorch has it."""
    r = ctx.rank(x)
    d = _axis(dim, r)
    n = ctx.dims_of(node.args[0])[d]
    if ctx.is_sym(n):
        raise ctx.not_expressible("unfold of a varying dim", [n])
    nw = (int(n) - size) // step + 1
    idx = (np.arange(nw)[:, None] * step + np.arange(size)[None, :]).astype(np.int64)
    g = ctx.op("Gather", data=x, indices=ctx.const(idx), axis=d)
    perm = list(range(d + 1)) + list(range(d + 2, r + 1)) + [d + 1]
    return ctx.op("Transpose", data=g, perm=perm)


@register_converter(aten._softmax.default, aten.softmax.int)
def _softmax(ctx, node, x, dim, half_or_dtype=None):
    return ctx.op("Softmax", input=x, axis=int(dim))


@register_converter(aten._log_softmax.default, aten.log_softmax.int)
def _log_softmax(ctx, node, x, dim, half_or_dtype=None):
    return ctx.op("LogSoftmax", input=x, axis=int(dim))


# ---- reductions ----------------------------------------------------------------

def _reduce(op_type):
    def conv(ctx, node, x, dims=None, keepdim=False, dtype=None):
        if dtype is not None:   # accumulate in that dtype, as PyTorch does
            x = ctx.op("Cast", input=x, to=cge_dtype(dtype))
        r = ctx.rank(x)
        dims = list(range(r)) if dims is None or dims == [] else \
            [_axis(d, r) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
        return ctx.op(op_type, data=x, axes=ctx.ints(dims), keepdims=int(bool(keepdim)))
    return conv


register_converter(aten.mean.dim)(_reduce("ReduceMean"))
register_converter(aten.sum.dim_IntList)(_reduce("ReduceSum"))
register_converter(aten.amax.default)(_reduce("ReduceMax"))
register_converter(*filter(None, [_opt("amin")]))(_reduce("ReduceMin"))


@register_converter(*filter(None, [_opt("max.dim"), _opt("min.dim")]))
def _max_min_dim(ctx, node, x, dim, keepdim=False):
    """(values, indices) along dim: ReduceMax/Min and ArgMax/Min (the first
    index of a tie)."""
    d = _axis(dim, ctx.rank(x))
    top = node.target is _opt("max.dim")
    vals = ctx.op("ReduceMax" if top else "ReduceMin", data=x, axes=ctx.ints([d]),
                  keepdims=int(bool(keepdim)))
    idx = ctx.op("ArgMax" if top else "ArgMin", data=x, axis=d, keepdims=int(bool(keepdim)))
    return (vals, idx)


@register_converter(*filter(None, [_opt("argmax"), _opt("argmin")]))
def _argmax(ctx, node, x, dim=None, keepdim=False):
    op = "ArgMax" if node.target is _opt("argmax") else "ArgMin"
    if dim is None:   # over the flattened tensor
        flat = ctx.op("Reshape", data=x, shape=ctx.ints([-1]))
        i = ctx.op(op, data=flat, axis=0, keepdims=0)
        return ctx.op("Reshape", data=i, shape=ctx.ints([1] * ctx.rank(x))) if keepdim else i
    return ctx.op(op, data=x, axis=_axis(dim, ctx.rank(x)), keepdims=int(bool(keepdim)))


@register_converter(*filter(None, [_opt("cumsum")]))
def _cumsum(ctx, node, x, dim, dtype=None):
    x = _as_out_dtype(ctx, node, x)
    return ctx.op("CumSum", x=x, axis=ctx.const(np.int64(_axis(dim, ctx.rank(x)))))


@register_converter(*filter(None, [_opt("var.correction"), _opt("std.correction"),
                                   _opt("var.dim"), _opt("std.dim")]))
def _var_std(ctx, node, x, dims=None, *args, correction=None, keepdim=False, unbiased=None):
    """The mean of the squared deviations times n / (n - correction) (n the
    reduced count), and its square root for std."""
    if node.target in (_opt("var.dim"), _opt("std.dim")):
        # var.dim(x, dim, unbiased=True, keepdim=False)
        unbiased = args[0] if args else (True if unbiased is None else unbiased)
        keepdim = args[1] if len(args) > 1 else keepdim
        correction = 1 if unbiased else 0
    elif args:
        keepdim = args[0]
    correction = 1 if correction is None else correction
    r = ctx.rank(x)
    axes = list(range(r)) if dims is None or dims == [] else \
        [_axis(d, r) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
    mean = ctx.op("ReduceMean", data=x, axes=ctx.ints(axes), keepdims=1)
    dev = ctx.op("Sub", A=x, B=mean)
    v = ctx.op("ReduceMean", data=ctx.op("Mul", A=dev, B=dev), axes=ctx.ints(axes),
               keepdims=int(bool(keepdim)))
    if correction:
        sizes = ctx.dims_of(node.args[0])
        if any(ctx.is_sym(sizes[a]) for a in axes):
            raise ctx.not_expressible("var/std over varying dims", [sizes[a] for a in axes])
        n = float(np.prod([int(sizes[a]) for a in axes]))
        v = ctx.op("Mul", A=v, B=ctx.const(n / (n - correction) if n > correction else
                                             float("inf"), like=x))
    if node.target in (_opt("std.correction"), _opt("std.dim")):
        v = ctx.op("Sqrt", X=v)
    return v


@register_converter(aten.mean.default, aten.sum.default)
def _reduce_all(ctx, node, x, dtype=None):
    op_type = "ReduceMean" if node.target is aten.mean.default else "ReduceSum"
    return _reduce(op_type)(ctx, node, x, None, False, dtype)


# ---- tensors made from sizes (masks, positions) --------------------------------------
# Under compile(dynamic=...) their sizes may vary: they come from the runtime
# shapes (shape_value / dim_value), so a causal mask of the sequence length
# needs no graph break.

def _np_dtype(node):
    dt = node.meta["tensor_meta"].dtype
    if dt == torch.bfloat16:
        raise ConverterError("[converter] node '%s' (%s): a bfloat16 result of this op is not "
                             "supported (numpy has no bfloat16 for its values)"
                             % (node.name, node.target), "converter", "CGE_ERR_DTYPE")
    return torch.empty(0, dtype=dt).numpy().dtype


def _fill(ctx, node, value, like=()):
    sizes = ctx.shape_value(ctx.out_dims(), like=like)
    if node.meta["tensor_meta"].dtype == torch.bfloat16:
        # a float32 fill rounded once (numpy has no bfloat16 for the attribute)
        f = ctx.op("ConstantOfShape", input=sizes, value=np.asarray([value], dtype=np.float32))
        return ctx.op("Cast", input=f, to=cge_dtype(torch.bfloat16))
    return ctx.op("ConstantOfShape", input=sizes, value=np.asarray([value], dtype=_np_dtype(node)))


@register_converter(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(ctx, node, *nums, dtype=None, layout=None, device=None, pin_memory=None):
    nums = list(nums)
    bounds = [0, nums[0], 1] if len(nums) == 1 else nums + [1] * (3 - len(nums))
    pos = [None, 0, None] if len(nums) == 1 else list(range(len(nums))) + [None] * (3 - len(nums))
    dt = _np_dtype(node)
    vals = []
    for v, p in zip(bounds, pos):
        if p is not None and isinstance(v, int) and not isinstance(v, bool):
            v = ctx.literal(lambda n, p=p: n.args[p])
        if ctx.is_sym(v):
            s = ctx.op("Reshape", data=ctx.dim_value(v), shape=ctx.ints([]))
            vals.append(s if dt == np.int64 else ctx.op("Cast", input=s, to=cge_dtype(
                node.meta["tensor_meta"].dtype)))
        else:
            vals.append(ctx.const(np.asarray(v, dtype=dt)))
    return ctx.op("Range", start=vals[0], limit=vals[1], delta=vals[2])


@register_converter(aten.full.default)
def _full(ctx, node, size, fill_value, **kwargs):
    return _fill(ctx, node, fill_value)


@register_converter(aten.zeros.default, aten.ones.default)
def _zeros_ones(ctx, node, size, **kwargs):
    return _fill(ctx, node, 0 if node.target is aten.zeros.default else 1)


@register_converter(aten.full_like.default)
def _full_like(ctx, node, x, fill_value, **kwargs):
    return _fill(ctx, node, fill_value, like=[x])


@register_converter(aten.zeros_like.default, aten.ones_like.default)
def _zeros_ones_like(ctx, node, x, **kwargs):
    return _fill(ctx, node, 0 if node.target is aten.zeros_like.default else 1, like=[x])


@register_converter(aten.new_zeros.default, aten.new_ones.default)
def _new_zeros_ones(ctx, node, x, size, **kwargs):
    return _fill(ctx, node, 0 if node.target is aten.new_zeros.default else 1, like=[x])


@register_converter(aten.new_full.default)
def _new_full(ctx, node, x, size, fill_value, **kwargs):
    return _fill(ctx, node, fill_value, like=[x])


@register_converter(*filter(None, [_opt("eye"), _opt("eye.m")]))
def _eye(ctx, node, n, m=None, **kwargs):
    """EyeLike of a zero fill of the output's sizes (read at run time, so
    that under dynamic= a size that follows an input dim stays symbolic)."""
    z = _fill(ctx, node, 0)
    return ctx.op("EyeLike", input=z)


@register_converter(aten.triu.default, aten.tril.default)
def _triu(ctx, node, x, diagonal=0):
    return ctx.op("Trilu", input=x, k=ctx.const(np.int64(diagonal)),
                  upper=int(node.target is aten.triu.default))


# ---- more structure: unbind, index, pad, roll, masks, scatters (the zoo's ops) -------

@register_converter(*filter(None, [_opt("unbind.int")]))
def _unbind(ctx, node, x, dim=0):
    d = _axis(dim, ctx.rank(x))
    n = ctx.dims_of(node.args[0])[d]
    if ctx.is_sym(n):
        raise ctx.not_expressible("unbind along a varying dim", [n])
    pieces = ctx.op("Split", input=x, split=ctx.ints([1] * int(n)), axis=d, outputs=int(n))
    pieces = pieces if isinstance(pieces, tuple) else (pieces,)
    axes = ctx.ints([d])
    return tuple(ctx.op("Squeeze", data=p, axes=axes) for p in pieces)


register_converter(*filter(None, [_opt("unsafe_split.Tensor"),
                                  _opt("unsafe_split_with_sizes.default")]))(_split)


@register_converter(aten.index.Tensor)
def _index(ctx, node, x, indices):
    """x[i] / x[:, i] (one index tensor: Gather) and x[i, j, ...] over the
    leading dims (GatherND of the broadcast indices); a bool mask selects a
    data-dependent number of elements (aten_select.index_bool_mask)."""
    given = [(k, t) for k, t in enumerate(indices) if t is not None]
    if not given:
        return ctx.op("Identity", input=x)
    if any(t.dtype_code == cge_dtype(torch.bool) for _, t in given):
        from .aten_select import index_bool_mask   # data-dependent size: Compress
        return index_bool_mask(ctx, node, x, indices)
    given = [(k, t if t.dtype_code == cge_dtype(torch.int64) else
              ctx.op("Cast", input=t, to=cge_dtype(torch.int64))) for k, t in given]
    if len(given) == 1:
        return ctx.op("Gather", data=x, indices=given[0][1], axis=given[0][0])
    if [k for k, _ in given] != list(range(len(given))):
        raise ctx.error("advanced indexing on non-leading or non-adjacent dims")
    shapes = [ctx.dims_of(node.args[1][k]) for k, _ in given]
    bshape = list(torch.broadcast_shapes(*[tuple(s) for s in shapes]))
    if any(ctx.is_sym(d) for s in shapes for d in s):
        raise ctx.not_expressible("multi-tensor indexing with varying sizes",
                                  [d for s in shapes for d in s])
    cols = [ctx.op("Unsqueeze", data=ctx.op("Expand", input=t, shape=ctx.ints(bshape)),
                   axes=ctx.ints([len(bshape)])) for _, t in given]
    return ctx.op("GatherND", data=x, indices=ctx.op("Concat", inputs=cols, axis=-1))


@register_converter(*filter(None, [_opt("repeat.default")]))
def _repeat(ctx, node, x, repeats):
    repeats = [int(r) for r in repeats]
    r = ctx.rank(x)
    if len(repeats) > r:       # repeat adds leading dims
        x = ctx.op("Reshape", data=x, shape=ctx.ints([1] * (len(repeats) - r) +
                                                     [int(d) for d in ctx.dims_of(node.args[0])]))
    return ctx.op("Tile", input=x, repeats=ctx.ints(repeats))


@register_converter(*filter(None, [_opt("constant_pad_nd.default")]))
def _constant_pad(ctx, node, x, pad, value=0):
    return ctx.op("Pad", data=x, pads=_onnx_pads(ctx, x, pad), mode="constant",
                  constant_value=ctx.const(value, like=x))


def _onnx_pads(ctx, x, pad):
    """PyTorch's pad list (pairs from the last dim) as ONNX's begins + ends."""
    r = ctx.rank(x)
    begins, ends = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        begins[r - 1 - i], ends[r - 1 - i] = int(pad[2 * i]), int(pad[2 * i + 1])
    return ctx.ints(begins + ends)


@register_converter(*filter(None, [_opt("roll.default")]))
def _roll(ctx, node, x, shifts, dims=()):
    shifts = list(shifts) if isinstance(shifts, (list, tuple)) else [shifts]
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    if not dims:
        raise ctx.error("roll without dims (over the flattened tensor)")
    sizes = ctx.dims_of(node.args[0])
    for s, d in zip(shifts, dims):
        d = _axis(d, ctx.rank(x))
        n = sizes[d]
        if ctx.is_sym(n):
            raise ctx.not_expressible("roll along a varying dim", [n])
        s = int(s) % int(n)
        if s == 0:
            continue
        tail = ctx.op("Slice", data=x, starts=ctx.ints([n - s]), ends=ctx.ints([n]),
                      axes=ctx.ints([d]))
        head = ctx.op("Slice", data=x, starts=ctx.ints([0]), ends=ctx.ints([n - s]),
                      axes=ctx.ints([d]))
        x = ctx.op("Concat", inputs=[tail, head], axis=d)
    return x if x is not node.args[0] else ctx.op("Identity", input=x)


@register_converter(*filter(None, [_opt("ne.Scalar"), _opt("ne.Tensor")]))
def _ne(ctx, node, a, b):
    return ctx.op("Not", X=_binary("Equal")(ctx, node, a, b))


@register_converter(*filter(None, [_opt("masked_fill.Scalar"), _opt("masked_fill.Tensor")]))
def _masked_fill(ctx, node, x, mask, value):
    v = ctx.const(value, like=x) if isinstance(value, (int, float, bool)) else value
    if v.dtype_code != x.dtype_code:
        v = ctx.op("Cast", input=v, to=x.dtype_code)
    return ctx.op("Where", condition=mask, X=v, Y=x)


@register_converter(*filter(None, [_opt("fill.Scalar"), _opt("fill.Tensor")]))
def _fill_like(ctx, node, x, value):
    if isinstance(value, (int, float, bool)):
        return _fill(ctx, node, value, like=[x])
    if value.dtype_code != x.dtype_code:
        value = ctx.op("Cast", input=value, to=x.dtype_code)
    return ctx.op("Expand", input=value, shape=ctx.op("Shape", data=x))


@register_converter(*filter(None, [_opt("copy.default")]))
def _copy(ctx, node, dst, src, non_blocking=False):
    """dst's shape and dtype, src's values (broadcast)."""
    if src.dtype_code != dst.dtype_code:
        src = ctx.op("Cast", input=src, to=dst.dtype_code)
    return ctx.op("Expand", input=src, shape=ctx.op("Shape", data=dst))


@register_converter(*filter(None, [_opt("slice_scatter.default")]))
def _slice_scatter(ctx, node, base, src, dim=0, start=None, end=None, step=1):
    """base with base[start:end] (along dim) replaced by src: Concat of the
    parts of base before and after, around src."""
    d = _axis(dim, ctx.rank(base))
    n = ctx.dims_of(node.args[0])[d]
    if ctx.is_sym(n):
        raise ctx.not_expressible("slice_scatter along a varying dim", [n])
    if step != 1:
        raise ctx.error("slice_scatter with a step")
    start = 0 if start is None else (start + n if start < 0 else min(start, n))
    end = n if end is None or end > n else (end + n if end < 0 else end)
    parts = []
    if start > 0:
        parts.append(ctx.op("Slice", data=base, starts=ctx.ints([0]), ends=ctx.ints([start]),
                            axes=ctx.ints([d])))
    parts.append(src)
    if end < n:
        parts.append(ctx.op("Slice", data=base, starts=ctx.ints([end]), ends=ctx.ints([n]),
                            axes=ctx.ints([d])))
    return parts[0] if len(parts) == 1 else ctx.op("Concat", inputs=parts, axis=d)


@register_converter(*filter(None, [_opt("select_scatter.default")]))
def _select_scatter(ctx, node, base, src, dim, index):
    d = _axis(dim, ctx.rank(base))
    n = ctx.dims_of(node.args[0])[d]
    index = index + n if index < 0 else index
    return _slice_scatter(ctx, node, base, ctx.op("Unsqueeze", data=src, axes=ctx.ints([d])),
                          d, index, index + 1)


# ---- normalisation and resampling --------------------------------------------------

@register_converter(*filter(None, [_opt("native_group_norm.default")]))
def _group_norm(ctx, node, x, w, b, n, c, hw, groups, eps):
    """InstanceNormalization over [N, groups, C/groups * HW] (each group's
    mean and variance), then the per-channel scale and shift."""
    dims = ctx.dims_of(node.args[0])
    if any(ctx.is_sym(d) for d in dims[1:]):
        raise ctx.not_expressible("group norm with varying channel or spatial dims", dims[1:])
    g = int(groups)
    y = ctx.op("Reshape", data=x, shape=ctx.ints([0, g, -1]))
    y = ctx.op("InstanceNormalization", input=y, scale=ctx.const(np.ones(g), like=x),
               B=ctx.const(np.zeros(g), like=x), epsilon=float(eps))
    y = ctx.op("Reshape", data=y, shape=ctx.op("Shape", data=x))
    per_c = ctx.ints([int(dims[1])] + [1] * (len(dims) - 2))
    if w is not None:
        y = ctx.op("Mul", A=y, B=ctx.op("Reshape", data=w, shape=per_c))
    if b is not None:
        y = ctx.op("Add", A=y, B=ctx.op("Reshape", data=b, shape=per_c))
    return (y, Missing("group norm's mean"), Missing("group norm's inverse std"))


def _upsample(mode, align_corners):
    if mode == "nearest":
        return dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                    nearest_mode="floor")
    return dict(mode=mode, coordinate_transformation_mode="align_corners" if align_corners
                else "pytorch_half_pixel", **({"cubic_coeff_a": -0.75} if mode == "cubic" else {}))


def _resize_to_out(ctx, node, x, mode, align_corners=False, scales=None):
    """Resize to the traced output size (PyTorch's own rounding of the
    scale); with the scale factors the call gave (and no align_corners),
    Resize by those scales instead: PyTorch then maps output positions back
    by the given scale, not by the ratio of the sizes (x1.5 of 9 rows is 13
    rows, sampled at steps of 1/1.5, not 9/13)."""
    if scales and not align_corners and all(s is not None for s in scales):
        sc = _float32_scales(ctx, node, scales)
        if sc is not None:
            return ctx.op("Resize", X=x, scales=ctx.const(sc), **_upsample(mode, align_corners))
    dims = ctx.out_dims()
    xd = ctx.dims_of(node.args[0])
    if any(ctx.is_sym(d) for d in dims[2:]):
        raise ctx.not_expressible("resampling to a varying size", dims[2:])
    sizes = ctx.shape_value([xd[0], xd[1]] + [int(d) for d in dims[2:]], like=[x])
    return ctx.op("Resize", X=x, sizes=sizes, **_upsample(mode, align_corners))


def _float32_scales(ctx, node, scales):
    """[1, 1, *scales] as float32 (Resize's scales), each nudged by an ulp or
    two where float32 would round PyTorch's output size down (10 x 0.7 is 7
    in double, 6.99999988 with 0.7f); None when no float32 gives the traced
    size (then the sizes are used)."""
    out = [1.0, 1.0]
    ins, outs = ctx.dims_of(node.args[0])[2:], ctx.out_dims()[2:]
    for k, v in enumerate(scales):
        s = np.float32(v)
        if k < len(ins) and not ctx.is_sym(ins[k]) and not ctx.is_sym(outs[k]):
            n, want = int(ins[k]), int(outs[k])
            for _ in range(4):
                got = int(np.floor(n * np.float64(s)))
                if got == want:
                    break
                s = np.nextafter(s, np.float32(np.inf) if got < want else np.float32(0))
            if int(np.floor(n * np.float64(s))) != want:
                return None
        out.append(float(s))
    return np.asarray(out, np.float32)


def _given_scales(node, rest, spatial):
    """The scale factors of an upsample call: .vec's list, or .default's
    per-axis scales_* arguments (None where the call gave sizes)."""
    if node.target._overloadname == "vec":
        return list(rest[0]) if rest and rest[0] is not None else None
    got = list(rest[:spatial])
    return got if len(got) == spatial and all(v is not None for v in got) else None


for _name, _mode, _sp in (("upsample_bilinear2d", "linear", 2), ("upsample_linear1d", "linear", 1),
                          ("upsample_trilinear3d", "linear", 3),
                          ("upsample_bicubic2d", "cubic", 2)):
    register_converter(*filter(None, [_opt(_name + ".vec"), _opt(_name + ".default")]))(
        lambda ctx, node, x, size, align_corners=False, *rest, _m=_mode, _s=_sp:
        _resize_to_out(ctx, node, x, _m, bool(align_corners), _given_scales(node, rest, _s)))
for _k in (1, 2, 3):
    register_converter(*filter(None, [_opt("upsample_nearest%dd.%s" % (_k, o))
                                      for o in ("vec", "default")]))(
        lambda ctx, node, x, size, *rest, _s=_k:
        _resize_to_out(ctx, node, x, "nearest", False, _given_scales(node, rest, _s)))


@register_converter(*filter(None, [_opt("as_strided.default"), _opt("as_strided_.default")]))
def _as_strided(ctx, node, x, size, stride, offset=None):
    """Only the restriding that keeps every element where it is (the same
    sizes, contiguous strides on the dims larger than 1): cge values have no
    strides, so other windows on the storage are not expressible."""
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    if offset or size != [int(d) for d in ctx.dims_of(node.args[0])]:
        raise ctx.error("as_strided onto other sizes or an offset")
    expect = 1
    for s, st in zip(reversed(size), reversed(stride)):
        if s > 1 and st != expect:
            raise ctx.error("as_strided with non-contiguous strides %s" % stride)
        expect *= s
    return ctx.op("Identity", input=x)


@register_converter(*filter(None, [_opt("linspace.default")]))
def _linspace(ctx, node, start, end, steps, dtype=None, layout=None, device=None,
              pin_memory=None):
    """Literal bounds and count: the constant PyTorch's own linspace makes
    (its rounding: the second half counts back from `end`)."""
    if not all(isinstance(v, (int, float)) for v in (start, end, steps)):
        raise ctx.error("linspace with tensor bounds")
    return ctx.const(torch.linspace(start, end, steps, dtype=node.meta["tensor_meta"].dtype))


@register_converter(*filter(None, [_opt("grid_sampler_2d.default"), _opt("grid_sampler.default")]))
def _grid_sampler(ctx, node, x, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    modes = ("bilinear", "nearest", "bicubic")
    pads = ("zeros", "border", "reflection")
    if interpolation_mode not in (0, 1, 2) or padding_mode not in (0, 1, 2):
        raise ctx.error("grid_sampler mode %r / padding %r" % (interpolation_mode, padding_mode))
    return ctx.op("GridSample", X=x, grid=grid, mode=modes[interpolation_mode],
                  padding_mode=pads[padding_mode], align_corners=int(bool(align_corners)))


@register_converter(*filter(None, [_opt("norm.ScalarOpt_dim"), _opt("linalg_vector_norm.default")]))
def _norm(ctx, node, x, p=2, dim=None, keepdim=False, dtype=None):
    """The 1- and 2-norms over dims (F.normalize, swin_v2's cosine attention)."""
    p = 2 if p is None else p
    if p not in (1, 2, 1.0, 2.0) or dtype is not None:
        raise ctx.error("norm with p=%r%s" % (p, " and a dtype" if dtype is not None else ""))
    return _reduce("ReduceL2" if p == 2 else "ReduceL1")(ctx, node, x, dim, keepdim)


@register_converter(*filter(None, [_opt("max_pool3d_with_indices.default"),
                                   _opt("max_pool1d_with_indices.default")]))
def _max_pool_nd(ctx, node, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    n = ctx.rank(x) - 2
    k = _pair(kernel, n)
    y = ctx.op("MaxPool", X=x, kernel_shape=k, strides=_pair(stride, n) if stride else k,
               pads=_pair(padding, n) * 2, dilations=_pair(dilation, n),
               ceil_mode=int(bool(ceil_mode)))
    return (y, Missing("max pooling's indices"))


@register_converter(*filter(None, [_opt("avg_pool3d.default"), _opt("avg_pool1d.default")]))
def _avg_pool_nd(ctx, node, x, kernel, stride=(), padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
    if divisor_override:
        raise ctx.error("avg_pool with divisor_override")
    n = ctx.rank(x) - 2
    k = _pair(kernel, n)
    return ctx.op("AveragePool", X=x, kernel_shape=k, strides=_pair(stride, n) if stride else k,
                  pads=_pair(padding, n) * 2, ceil_mode=int(bool(ceil_mode)),
                  count_include_pad=int(bool(count_include_pad)))


# ---- more elementwise ops (found missing by random modules against eager) --------

def _bin_promoted(ctx, node, a, b):
    """a, b as cge values of the node's dtype (Python numbers included)."""
    to = cge_dtype(node.meta["tensor_meta"].dtype)
    like = a if not isinstance(a, (int, float, bool)) else b
    a, b = _scalar(ctx, a, like), _scalar(ctx, b, like)
    return tuple(v if v.dtype_code == to else ctx.op("Cast", input=v, to=to) for v in (a, b))


@register_converter(*filter(None, [_opt("maximum"), _opt("minimum")]))
def _maximum(ctx, node, a, b):
    a, b = _bin_promoted(ctx, node, a, b)
    return ctx.op("Max" if node.target is _opt("maximum") else "Min", data_0=[a, b])


@register_converter(*filter(None, [_opt("fmod.Scalar"), _opt("fmod.Tensor"),
                                   _opt("remainder.Scalar"), _opt("remainder.Tensor")]))
def _fmod(ctx, node, a, b):
    """fmod: C's (the dividend's sign); remainder: Python's (the divisor's)."""
    a, b = _bin_promoted(ctx, node, a, b)
    fl = a.dtype_code in (cge_dtype(torch.float32), cge_dtype(torch.float64),
                          cge_dtype(torch.float16))
    if node.target._schema.name == "aten::fmod":
        if fl:
            return ctx.op("Mod", A=a, B=b, fmod=1)
        # integers: a - b * (a / b), Div truncating toward zero as C does
        return ctx.op("Sub", A=a, B=ctx.op("Mul", A=b, B=ctx.op("Div", A=a, B=b)))
    if not fl:
        return ctx.op("Mod", A=a, B=b, fmod=0)
    r = ctx.op("Mod", A=a, B=b, fmod=1)
    # Python's sign: r + b where r and b differ in sign and r is not 0
    zero = ctx.const(0.0, like=a)
    differ = ctx.op("And", A=ctx.op("Not", X=ctx.op("Equal", A=r, B=zero)),
                    B=ctx.op("Xor", A=ctx.op("Less", A=r, B=zero), B=ctx.op("Less", A=b, B=zero)))
    return ctx.op("Where", condition=differ, X=ctx.op("Add", A=r, B=b), Y=r)


def _trunc(ctx, x):
    neg = ctx.op("Less", A=x, B=ctx.const(0.0, like=x))
    return ctx.op("Where", condition=neg, X=ctx.op("Ceil", X=x), Y=ctx.op("Floor", X=x))


@register_converter(*filter(None, [_opt("trunc"), _opt("fix")]))
def _trunc_op(ctx, node, x):
    return _trunc(ctx, x)


@register_converter(*filter(None, [_opt("frac")]))
def _frac(ctx, node, x):
    return ctx.op("Sub", A=x, B=_trunc(ctx, x))


@register_converter(*filter(None, [_opt("div.Tensor_mode"), _opt("div.Scalar_mode")]))
def _div_mode(ctx, node, a, b, rounding_mode=None):
    a, b = _bin_promoted(ctx, node, a, b)
    fl = a.dtype_code == cge_dtype(torch.float32) or a.dtype_code == cge_dtype(torch.float64)
    if rounding_mode is None:
        return ctx.op("Div", A=a, B=b)
    if not fl:
        if rounding_mode == "trunc":
            return ctx.op("Div", A=a, B=b)
        # floor division of integers: the truncated quotient, one less where
        # the remainder is not 0 and the signs differ
        q = ctx.op("Div", A=a, B=b)
        r = ctx.op("Sub", A=a, B=ctx.op("Mul", A=q, B=b))
        zero = ctx.const(0, like=a)
        adjust = ctx.op("And", A=ctx.op("Not", X=ctx.op("Equal", A=r, B=zero)),
                        B=ctx.op("Xor", A=ctx.op("Less", A=r, B=zero),
                                 B=ctx.op("Less", A=b, B=zero)))
        return ctx.op("Sub", A=q, B=ctx.op("Cast", input=adjust, to=a.dtype_code))
    q = ctx.op("Div", A=a, B=b)
    return ctx.op("Floor", X=q) if rounding_mode == "floor" else _trunc(ctx, q)


@register_converter(*filter(None, [_opt("floor_divide"), _opt("floor_divide.Scalar")]))
def _floor_divide(ctx, node, a, b):
    return _div_mode(ctx, node, a, b, rounding_mode="floor")


@register_converter(*filter(None, [_opt("log1p")]))
def _log1p(ctx, node, x):
    x = _as_out_dtype(ctx, node, x)
    return ctx.op("Log", X=ctx.op("Add", A=x, B=ctx.const(1.0, like=x)))


@register_converter(*filter(None, [_opt("expm1")]))
def _expm1(ctx, node, x):
    x = _as_out_dtype(ctx, node, x)
    return ctx.op("Sub", A=ctx.op("Exp", X=x), B=ctx.const(1.0, like=x))


for _n, _cge in (("asinh", "Asinh"), ("acosh", "Acosh"), ("atanh", "Atanh"), ("atan", "Atan"),
                 ("asin", "Asin"), ("acos", "Acos"), ("sinh", "Sinh"), ("cosh", "Cosh"),
                 ("tan", "Tan"), ("mish", "Mish")):
    if _opt(_n) is not None:
        register_converter(*filter(None, [_opt(_n), _opt(_n + "_")]))(_unary(_cge))


@register_converter(*filter(None, [_opt("log_sigmoid_forward")]))
def _log_sigmoid_forward(ctx, node, x):
    """(log(sigmoid(x)) = -softplus(-x), the backward's buffer: not made)."""
    return (ctx.op("Neg", X=ctx.op("Softplus", X=ctx.op("Neg", X=x))),
            Missing("log_sigmoid's backward buffer"))


@register_converter(*filter(None, [_opt("prelu"), _opt("_prelu_kernel")]))
def _prelu(ctx, node, x, w):
    """PyTorch's weight is per channel (dim 1): reshaped to broadcast there."""
    r = ctx.rank(x)
    if ctx.rank(w) == 1 and r >= 2 and w.shape[0] != 1:
        w = ctx.op("Reshape", data=w, shape=ctx.ints([-1] + [1] * (r - 2)))
    return ctx.op("PRelu", X=x, slope=w)


@register_converter(*filter(None, [_opt("hardshrink")]))
def _hardshrink(ctx, node, x, lambd=0.5):
    big = ctx.op("Greater", A=ctx.op("Abs", X=x), B=ctx.const(float(lambd), like=x))
    return ctx.op("Where", condition=big, X=x, Y=ctx.const(0.0, like=x))


@register_converter(*filter(None, [_opt("threshold"), _opt("threshold_")]))
def _threshold(ctx, node, x, threshold, value):
    keep = ctx.op("Greater", A=x, B=ctx.const(threshold, like=x))
    return ctx.op("Where", condition=keep, X=x, Y=ctx.const(value, like=x))


@register_converter(*filter(None, [_opt("clamp.Tensor"), _opt("clamp_.Tensor")]))
def _clamp_tensor(ctx, node, x, lo=None, hi=None):
    if lo is not None:
        x = ctx.op("Max", data_0=[x, _scalar(ctx, lo, x)])
    if hi is not None:
        x = ctx.op("Min", data_0=[x, _scalar(ctx, hi, x)])
    return x


@register_converter(*filter(None, [_opt("addcmul"), _opt("addcdiv")]))
def _addcmul(ctx, node, x, a, b, value=1):
    op = "Mul" if node.target is _opt("addcmul") else "Div"
    t = ctx.op(op, A=a, B=b)
    if value != 1:
        t = ctx.op("Mul", A=t, B=ctx.const(value, like=x))
    return ctx.op("Add", A=x, B=t)


@register_converter(*filter(None, [_opt("lerp.Scalar"), _opt("lerp.Tensor")]))
def _lerp(ctx, node, a, b, w):
    return ctx.op("Add", A=a, B=ctx.op("Mul", A=_scalar(ctx, w, a), B=ctx.op("Sub", A=b, B=a)))


@register_converter(*filter(None, [_opt("nan_to_num")]))
def _nan_to_num(ctx, node, x, nan=0.0, posinf=None, neginf=None):
    big = float(torch.finfo(node.meta["tensor_meta"].dtype).max)
    nan = 0.0 if nan is None else nan
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    y = ctx.op("Where", condition=ctx.op("IsNaN", X=x), X=ctx.const(float(nan), like=x), Y=x)
    y = ctx.op("Where", condition=ctx.op("IsInf", X=y, detect_negative=0),
               X=ctx.const(float(posinf), like=x), Y=y)
    return ctx.op("Where", condition=ctx.op("IsInf", X=y, detect_positive=0),
                  X=ctx.const(float(neginf), like=x), Y=y)


@register_converter(*filter(None, [_opt("glu")]))
def _glu(ctx, node, x, dim=-1):
    d = _axis(dim, ctx.rank(x))
    a, b = ctx.op("Split", input=x, axis=d, outputs=2)   # two equal halves
    return ctx.op("Mul", A=a, B=ctx.op("Sigmoid", X=b))


for _n, _cge in (("bitwise_and", ("And", "BitwiseAnd")), ("bitwise_or", ("Or", "BitwiseOr")),
                 ("bitwise_xor", ("Xor", "BitwiseXor"))):
    def _bitwise(ctx, node, a, b, _ops=_cge):
        a, b = _bin_promoted(ctx, node, a, b)
        return ctx.op(_ops[0] if a.dtype_code == cge_dtype(torch.bool) else _ops[1], A=a, B=b)
    register_converter(*filter(None, [_opt(_n + ".Tensor"), _opt(_n + ".Scalar")]))(_bitwise)


@register_converter(*filter(None, [_opt("scatter_add"), _opt("scatter_reduce.two")]))
def _scatter_add(ctx, node, x, dim, index, src, reduce="sum", include_self=True):
    red = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}.get(reduce)
    if red is None or not include_self:
        raise ctx.error("scatter_reduce '%s' (include_self=%s)" % (reduce, include_self))
    return ctx.op("ScatterElements", data=x, indices=index, updates=src,
                  axis=_axis(dim, ctx.rank(x)), reduction=red)


@register_converter(*filter(None, [_opt("reflection_pad1d"), _opt("reflection_pad2d"),
                                   _opt("reflection_pad3d"), _opt("replication_pad1d"),
                                   _opt("replication_pad2d"), _opt("replication_pad3d")]))
def _mode_pad(ctx, node, x, pad):
    mode = "reflect" if node.target._schema.name.startswith("aten::reflection") else "edge"
    return ctx.op("Pad", data=x, pads=_onnx_pads(ctx, x, pad), mode=mode)


@register_converter(*filter(None, [_opt("pixel_shuffle"), _opt("pixel_unshuffle")]))
def _pixel_shuffle(ctx, node, x, r):
    """[N, C*r*r, H, W] <-> [N, C, H*r, W*r] by one reshape, a transpose and a
    reshape (PyTorch's channel order: c*r*r + i*r + j)."""
    dims = ctx.dims_of(node.args[0])
    if any(ctx.is_sym(d) for d in dims):
        raise ctx.not_expressible("pixel shuffle of varying sizes", [d for d in dims if ctx.is_sym(d)])
    n, c, h, w = (int(d) for d in dims)
    if node.target is _opt("pixel_shuffle"):
        y = ctx.op("Reshape", data=x, shape=ctx.ints([n, c // (r * r), r, r, h, w]))
        y = ctx.op("Transpose", data=y, perm=[0, 1, 4, 2, 5, 3])
        return ctx.op("Reshape", data=y, shape=ctx.ints([n, c // (r * r), h * r, w * r]))
    y = ctx.op("Reshape", data=x, shape=ctx.ints([n, c, h // r, r, w // r, r]))
    y = ctx.op("Transpose", data=y, perm=[0, 1, 3, 5, 2, 4])
    return ctx.op("Reshape", data=y, shape=ctx.ints([n, c * r * r, h // r, w // r]))
