# Converters for the selection ops of detection heads (torchvision's
# postprocess: score masks, topk, nms, unique, index_put into a keep mask):
# bool-mask indexing, nonzero, nms and unique have data-dependent output
# sizes, which cge computes at run time (Compress, NonZero, NonMaxSuppression,
# Unique); the segment is then marked so that its outputs take the size the
# run reports (_compile._run_segment).
import numpy as np
import torch

from ._registry import Missing, cge_dtype, register_converter

aten = torch.ops.aten


def _opt(packet, overload="default", ns=None):
    try:
        return getattr(getattr(ns or aten, packet), overload)
    except (AttributeError, RuntimeError):
        return None


def _axis(d, rank):
    return d + rank if d < 0 else d


def data_dependent(ctx):
    """Marks the graph being built: an output size depends on values."""
    ctx.b.data_dependent = True


def _dim_of(ctx, x, d):
    """x's size along d at run time, int64 [1] (a data-dependent size is not
    the trace's)."""
    return ctx.op("Slice", data=ctx.op("Shape", data=x), starts=ctx.ints([d]),
                  ends=ctx.ints([d + 1]))


def index_bool_mask(ctx, node, x, indices):
    """x[..., mask, ...] with one bool mask over dims p .. p+r-1: those dims
    (merged into one) are compressed by the mask (flattened), so the result
    is x's leading dims, the count of true elements, then x's trailing dims."""
    given = [(k, t) for k, t in enumerate(indices) if t is not None]
    if len(given) != 1:
        raise ctx.error("a bool mask together with other index tensors")
    p, mask = given[0]
    r = ctx.rank(mask)
    dims = ctx.dims_of(node.args[0])
    mdims = ctx.dims_of(node.args[1][p])
    if r == 0:
        raise ctx.error("indexing with a 0-d bool mask")
    if any(ctx.is_sym(d) for d in dims[p:p + r] + mdims):
        raise ctx.not_expressible("a bool mask over varying dims", dims[p:p + r] + mdims)
    if [int(d) for d in mdims] != [int(d) for d in dims[p:p + r]]:
        raise ctx.error("a bool mask of shape %s over dims %s" % (list(mdims), list(dims[p:p + r])))
    data_dependent(ctx)
    if r > 1:
        merged = dims[:p] + [int(np.prod([int(d) for d in dims[p:p + r]]))] + dims[p + r:]
        x = ctx.op("Reshape", data=x, shape=ctx.shape_value(merged, like=[x], infer_one=True))
        mask = ctx.op("Reshape", data=mask, shape=ctx.ints([-1]))
    return ctx.op("Compress", input=x, condition=mask, axis=p)


@register_converter(*filter(None, [_opt("nonzero")]))
def _nonzero(ctx, node, x):
    """[N, rank] int64 of the non-zero positions (ONNX's NonZero is [rank, N])."""
    data_dependent(ctx)
    return ctx.op("Transpose", data=ctx.op("NonZero", X=x), perm=[1, 0])


@register_converter(*filter(None, [_opt("topk")]))
def _topk(ctx, node, x, k, dim=-1, largest=True, sorted=True):
    d = _axis(dim, ctx.rank(x))
    k = ctx.literal(lambda n: n.args[1])
    if ctx.is_sym(k):
        raise ctx.not_expressible("topk of a varying k", [k])
    return ctx.op("TopK", X=x, K=ctx.ints([int(k)]), axis=d, largest=int(bool(largest)),
                  sorted=1, outputs=2)


@register_converter(*filter(None, [_opt("sort"), _opt("sort", "stable")]))
def _sort(ctx, node, x, *args, **kwargs):
    """sort(x, dim, descending) and sort.stable(x, stable=, dim=, descending=)
    as a TopK of the whole axis (its length read at run time: the sorted
    tensor may have a data-dependent size). Ties keep the lower index first,
    as a stable sort does."""
    if node.target is _opt("sort", "stable"):
        dim, descending = kwargs.get("dim", -1), kwargs.get("descending", False)
    else:
        dim = args[0] if args else kwargs.get("dim", -1)
        descending = args[1] if len(args) > 1 else kwargs.get("descending", False)
    d = _axis(dim, ctx.rank(x))
    return ctx.op("TopK", X=x, K=_dim_of(ctx, x, d), axis=d, largest=int(bool(descending)),
                  sorted=1, outputs=2)


def _nms_target():
    try:
        import torchvision  # noqa: F401  (registers torch.ops.torchvision)
        return torch.ops.torchvision.nms.default
    except (ImportError, AttributeError, RuntimeError):
        return None


@register_converter(*filter(None, [_nms_target()]))
def _nms(ctx, node, boxes, scores, iou_threshold):
    """torchvision.ops.nms: the kept indices by decreasing score, through
    ONNX's NonMaxSuppression (one batch, one class; corners in either order
    give the same IoU), its box column."""
    data_dependent(ctx)
    b = ctx.op("Unsqueeze", data=boxes, axes=ctx.ints([0]))
    s = ctx.op("Unsqueeze", data=scores, axes=ctx.ints([0, 1]))
    sel = ctx.op("NonMaxSuppression", boxes=b, scores=s,
                 max_output_boxes_per_class=_dim_of(ctx, boxes, 0),
                 iou_threshold=ctx.const(np.asarray([iou_threshold], dtype=np.float32)))
    col = ctx.op("Slice", data=sel, starts=ctx.ints([2]), ends=ctx.ints([3]), axes=ctx.ints([1]))
    return ctx.op("Reshape", data=col, shape=ctx.ints([-1]))


@register_converter(*filter(None, [_opt("_unique2")]))
def _unique2(ctx, node, x, sorted=True, return_inverse=False, return_counts=False):
    """torch.unique (flattened): ONNX's Unique (sorted; cge sorts also when
    not asked, as PyTorch's CPU kernel does)."""
    data_dependent(ctx)
    y, _, inv, counts = ctx.op("Unique", X=x, sorted=1, outputs=4)
    if return_inverse:
        inv = ctx.op("Reshape", data=inv, shape=ctx.op("Shape", data=x))
    else:
        inv = Missing("unique's inverse indices (not asked for)")
    return (y, inv, counts if return_counts else Missing("unique's counts (not asked for)"))


@register_converter(*filter(None, [_opt("index_put"), _opt("index_put_"),
                                   _opt("_index_put_impl_")]))
def _index_put(ctx, node, x, indices, values, accumulate=False, *unsafe):
    """x[i] = v (one int64 index tensor on dim 0: ScatterND, add with
    accumulate) and x[mask] = v for a mask over x's leading dims and a
    single value (Where)."""
    given = [(k, t) for k, t in enumerate(indices) if t is not None]
    if len(given) != 1 or given[0][0] != 0:
        raise ctx.error("index_put with other than one index tensor on dim 0")
    idx = given[0][1]
    if values.dtype_code != x.dtype_code:
        values = ctx.op("Cast", input=values, to=x.dtype_code)
    r = ctx.rank(x)
    if idx.dtype_code == cge_dtype(torch.bool):
        vn = int(np.prod(ctx.dims_of(node.args[2]))) if node.args[2] is not None else 0
        if accumulate or vn != 1:
            raise ctx.error("index_put with a bool mask and more than one value")
        m = ctx.rank(idx)
        mask = idx if m == r else ctx.op("Reshape", data=idx, shape=ctx.ints(
            [int(d) for d in ctx.dims_of(node.args[1][0])] + [1] * (r - m)))
        v = ctx.op("Reshape", data=values, shape=ctx.ints([]))
        return ctx.op("Where", condition=mask, X=v, Y=x)
    if ctx.rank(idx) != 1:
        raise ctx.error("index_put with a %d-d index tensor" % ctx.rank(idx))
    if idx.dtype_code != cge_dtype(torch.int64):
        idx = ctx.op("Cast", input=idx, to=cge_dtype(torch.int64))
    # updates: values broadcast to [len(idx)] + x.shape[1:], both read at run
    # time (the index may have a data-dependent length).
    upd_shape = ctx.op("Concat", inputs=[ctx.op("Shape", data=idx), ctx.op(
        "Slice", data=ctx.op("Shape", data=x), starts=ctx.ints([1]), ends=ctx.ints([r]))],
        axis=0) if r > 1 else ctx.op("Shape", data=idx)
    upd = ctx.op("Expand", input=values, shape=upd_shape)
    return ctx.op("ScatterND", data=x, indices=ctx.op("Unsqueeze", data=idx,
                                                       axes=ctx.ints([1])),
                  updates=upd, reduction="add" if accumulate else "none")
