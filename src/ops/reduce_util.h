/* Internal helpers shared by the reduction families (reduce.c, reduce_ext.c):
 * axes validation, the common meta (keepdims, axes attribute or input) and the
 * plan that merges dims into [outer, reduce, inner] views. */
#ifndef CGE_OPS_REDUCE_UTIL_H
#define CGE_OPS_REDUCE_UTIL_H

#include <stdio.h>
#include <string.h>

#include "cge/op.h"

/* Reduced axes as a mask; *known = false when they come from an input whose
 * value is not available. */
typedef struct axes_info {
    bool known;
    bool noop;          /* empty axes with noop_with_empty_axes: identity */
    bool reduce[CGE_MAX_RANK];
} axes_info;

/* Validate `n` axes for a rank-`rank` input into a mask; an error message
 * goes to `err`. Empty axes reduce every dimension unless `noop_empty`. */
static inline cge_status axes_mask(const int64_t *axes, int64_t n, int32_t rank,
                                   bool noop_empty, axes_info *ai, char *err, size_t errlen)
{
    memset(ai, 0, sizeof *ai);
    ai->known = true;
    if (n == 0) {
        ai->noop = noop_empty;
        for (int32_t d = 0; d < rank; d++)
            ai->reduce[d] = !noop_empty;
        return CGE_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t a;
        if (!cge_axis_normalize(axes[i], rank, false, &a)) {
            snprintf(err, errlen, "axis %lld is out of range for rank %d", (long long)axes[i],
                     (int)rank);
            return CGE_ERR_SHAPE;
        }
        if (ai->reduce[a]) {
            snprintf(err, errlen, "axis %lld appears more than once in axes", (long long)axes[i]);
            return CGE_ERR_SHAPE;
        }
        ai->reduce[a] = true;
    }
    return CGE_OK;
}

static inline cge_status reduce_infer(cge_infer_ctx *ctx, bool axes_input)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "needs input data and output reduced");
    const cge_tensor_desc *x = &ctx->inputs[0];
    int32_t rank = x->shape.rank;
    bool keepdims = cge_attrs_get_int(ctx->attrs, "keepdims", 1) != 0;
    bool noop = axes_input && cge_attrs_get_int(ctx->attrs, "noop_with_empty_axes", 0) != 0;
    axes_info ai;
    char err[160];
    cge_status st = CGE_OK;
    if (!axes_input) {
        const int64_t *v = NULL;
        int64_t n = cge_attrs_get_ints(ctx->attrs, "axes", &v);
        st = axes_mask(v, n < 0 ? 0 : n, rank, false, &ai, err, sizeof err);
    } else if (ctx->num_inputs > 1 && ctx->inputs[1].dtype != CGE_DTYPE_UNDEFINED) {
        const cge_tensor_desc *ax = &ctx->inputs[1];
        if (ax->shape.rank != 1)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "axes must be 1-D, got rank %d",
                                  (int)ax->shape.rank);
        const void *val = ctx->input_values ? ctx->input_values[1] : NULL;
        if (ax->shape.dims[0] == 0) {
            st = axes_mask(NULL, 0, rank, noop, &ai, err, sizeof err);
        } else if (val && ax->shape.dims[0] > 0) {
            st = axes_mask(val, ax->shape.dims[0], rank, noop, &ai, err, sizeof err);
        } else {
            memset(&ai, 0, sizeof ai);
            if (!keepdims) {
                /* k distinct axes go: the rank is known, which dims stay is
                 * not (the run infers again with the values). */
                int64_t k = ax->shape.dims[0];
                if (k < 0)
                    return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED,
                                          "with keepdims=0 the number of axes must be known (the "
                                          "output rank depends on it)");
                if (k > rank)
                    return cge_meta_error(ctx, CGE_ERR_SHAPE, "%lld axes for a rank-%d input",
                                          (long long)k, (int)rank);
                ctx->outputs[0].dtype = x->dtype;
                ctx->outputs[0].shape = (cge_shape){.rank = rank - (int32_t)k};
                for (int32_t d = 0; d < rank - (int32_t)k; d++)
                    ctx->outputs[0].shape.dims[d] = CGE_DIM_DYNAMIC;
                return CGE_OK;
            }
        }
    } else {
        st = axes_mask(NULL, 0, rank, noop, &ai, err, sizeof err);
    }
    if (st != CGE_OK)
        return cge_meta_error(ctx, st, "%s", err);
    cge_shape out = {.rank = 0};
    for (int32_t d = 0; d < rank; d++) {
        int64_t dim = x->shape.dims[d];
        if (!ai.known) /* unknown axes, keepdims: each dim stays or becomes 1 */
            out.dims[out.rank++] = dim == 1 ? 1 : CGE_DIM_DYNAMIC;
        else if (!ai.reduce[d])
            out.dims[out.rank++] = dim;
        else if (keepdims)
            out.dims[out.rank++] = 1;
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = out;
    return CGE_OK;
}

/* Which loops a given mask needs. */
enum { PLAN_COPY, PLAN_ROWS, PLAN_MID, PLAN_STRIDED };

typedef struct red_plan {
    int kind;
    int64_t outer, count, inner;       /* ROWS/MID view; count = elements reduced */
    int32_t nk, nr;                    /* STRIDED: kept and reduced groups */
    int64_t kdims[CGE_MAX_RANK], kstr[CGE_MAX_RANK], rdims[CGE_MAX_RANK], rstr[CGE_MAX_RANK];
} red_plan;

/* Merge the input into groups of kept and reduced dims for `mask` and pick
 * the loops they need. */
static inline void red_plan_make(const cge_shape *in, const bool *mask, red_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    int64_t strides[CGE_MAX_RANK];
    cge_shape_strides(in, strides);
    /* Size-1 dims never matter; consecutive dims of one kind merge. */
    int32_t ng = 0;
    int64_t gsize[CGE_MAX_RANK], gstr[CGE_MAX_RANK];
    bool gred[CGE_MAX_RANK];
    for (int32_t d = 0; d < in->rank; d++) {
        int64_t n = in->dims[d];
        if (n == 1)
            continue;
        if (ng > 0 && gred[ng - 1] == mask[d]) {
            gsize[ng - 1] *= n;
            gstr[ng - 1] = strides[d];
        } else {
            gsize[ng] = n;
            gstr[ng] = strides[d];
            gred[ng] = mask[d];
            ng++;
        }
    }
    pl->count = 1;
    for (int32_t g = 0; g < ng; g++) {
        if (gred[g]) {
            pl->rdims[pl->nr] = gsize[g];
            pl->rstr[pl->nr++] = gstr[g];
            pl->count *= gsize[g];
        } else {
            pl->kdims[pl->nk] = gsize[g];
            pl->kstr[pl->nk++] = gstr[g];
        }
    }
    pl->outer = pl->inner = 1;
    if (pl->nr == 0) {
        pl->kind = PLAN_COPY;
    } else if (pl->nr == 1 && ng <= 3 && (ng < 3 || !gred[0])) {
        int32_t r = 0;
        while (!gred[r])
            r++;
        if (r > 0)
            pl->outer = gsize[0];
        if (r + 1 < ng)
            pl->inner = gsize[r + 1];
        pl->kind = pl->inner == 1 ? PLAN_ROWS : PLAN_MID;
    } else {
        pl->kind = PLAN_STRIDED;
    }
}

/* What every reduction kernel gets (reduce.c and reduce_ext.c). */
typedef struct red_args {
    cge_dtype dtype;
    int op;
    const void *x;
    void *y;
    cge_shape in;
    int64_t out_numel;
    /* Either a mask decided at launch, or axes read when the kernel runs
     * (keepdims=0 with an axes input: its value is only safe to read then). */
    bool have_mask;
    bool reduce[CGE_MAX_RANK];
    const int64_t *axes;
    int64_t num_axes;
    bool noop_empty;    /* noop_with_empty_axes */
    bool identity;      /* noop_with_empty_axes and no axes: output = input */
} red_args;

/* The loop plan of a launch: from its mask, or from axes read now (on the
 * stream). False if those axes are invalid. */
static inline bool red_args_plan(const red_args *p, red_plan *pl)
{
    bool mask[CGE_MAX_RANK];
    if (p->have_mask) {
        memcpy(mask, p->reduce, sizeof mask);
    } else {
        axes_info ai;
        char err[160];
        if (axes_mask(p->axes, p->num_axes, p->in.rank, p->noop_empty, &ai, err, sizeof err) !=
            CGE_OK)
            return false;
        memcpy(mask, ai.reduce, sizeof mask);
    }
    red_plan_make(&p->in, mask, pl);
    return true;
}

/* The launch shared by every reduction: dtype and rank checks, the axes (an
 * attribute, a mask derived from the shapes, or an input read on the stream),
 * blocks over the outputs, then `fn` on the stream. */
static inline cge_status reduce_launch_with(const cge_kernel_ctx *ctx, cge_stream *stream,
                                            cge_kernel_fn fn, int op, bool axes_input)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "needs input data and output reduced");
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    if (!fn || y->dtype != x->dtype)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "unsupported dtypes %s -> %s",
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    /* An empty input may have no buffer; it is never read then, but a NULL
     * base would make even zero-offset pointer arithmetic undefined. */
    red_args p = {.dtype = x->dtype, .op = op, .x = x->data ? x->data : y->data, .y = y->data,
                  .in = x->shape};
    p.out_numel = cge_shape_numel(&y->shape);
    bool keepdims = cge_attrs_get_int(ctx->attrs, "keepdims", 1) != 0;
    p.noop_empty = axes_input && cge_attrs_get_int(ctx->attrs, "noop_with_empty_axes", 0) != 0;
    const cge_tensor *ax = axes_input && ctx->num_inputs > 1 &&
                                   ctx->inputs[1].dtype != CGE_DTYPE_UNDEFINED
                               ? &ctx->inputs[1]
                               : NULL;
    int32_t expect_rank = x->shape.rank;
    if (ax && ax->shape.rank == 1 && ax->shape.dims[0] > 0) {
        if (ax->dtype != CGE_I64 || (!ax->data))
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "axes must be an int64 buffer");
        if (keepdims) {
            /* Same rank: a dim reduced is one that became 1 (reducing a size-1
             * dim changes nothing), so the shapes say it all. */
            if (y->shape.rank != x->shape.rank)
                return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output rank differs from input");
            p.have_mask = true;
            for (int32_t d = 0; d < x->shape.rank; d++)
                p.reduce[d] = y->shape.dims[d] == 1 && x->shape.dims[d] != 1;
        } else {
            p.axes = ax->data;
            p.num_axes = ax->shape.dims[0];
            expect_rank = x->shape.rank - (int32_t)p.num_axes;
        }
    } else {
        const int64_t *v = NULL;
        int64_t n = 0;
        if (!axes_input) {
            n = cge_attrs_get_ints(ctx->attrs, "axes", &v);
            n = n < 0 ? 0 : n;
        }
        axes_info ai;
        char err[160];
        cge_status st = axes_mask(v, n, x->shape.rank, p.noop_empty, &ai, err, sizeof err);
        if (st != CGE_OK)
            return cge_kernel_error(ctx, st, "%s", err);
        p.identity = ai.noop;
        p.have_mask = true;
        memcpy(p.reduce, ai.reduce, sizeof p.reduce);
        if (!keepdims) {
            expect_rank = 0;
            for (int32_t d = 0; d < x->shape.rank; d++)
                expect_rank += !ai.reduce[d];
        }
    }
    if (y->shape.rank != expect_rank)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output rank %d, expected %d",
                                (int)y->shape.rank, (int)expect_rank);
    if (p.out_numel == 0)
        return CGE_OK;
    int64_t in_numel = cge_shape_numel(&x->shape);
    if ((in_numel > 0 && !x->data) || !y->data)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t per = in_numel / p.out_numel;
    int64_t min_out = per >= 16384 ? 1 : 16384 / (per > 0 ? per : 1);
    return cge_launch(stream, fn, cge_blocks_for(p.out_numel, min_out, ctx->num_threads), &p,
                      sizeof p);
}

#endif
