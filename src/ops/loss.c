/* Loss operators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset
 * 13): per-position losses over [N, C, d1..dk] with class weights, an ignored
 * class and none/sum/mean reductions. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/kernel_util.h"

/* Sums are kept per block and added in block order, so a reduction does not
 * depend on the thread count. */

#define LOSS_DT (CGE_DT(CGE_F32) | CGE_DT(CGE_F64) | CGE_DT(CGE_F16) | CGE_DT(CGE_BF16))
#define LOSS_IDX_DT (CGE_DT(CGE_I32) | CGE_DT(CGE_I64))
/* Positions (n, d) per block, in units of classes touched. */
#define LOSS_MIN_WORK ((int64_t)1 << 14)
#define LOSS_MAX_BLOCKS 256

enum { RED_NONE, RED_SUM, RED_MEAN };

static int parse_reduction(const cge_attrs *attrs)
{
    const char *r = cge_attrs_get_string(attrs, "reduction", "mean");
    if (!strcmp(r, "none"))
        return RED_NONE;
    if (!strcmp(r, "sum"))
        return RED_SUM;
    if (!strcmp(r, "mean"))
        return RED_MEAN;
    return -1;
}

/* ---- meta ----------------------------------------------------------------------------- */

static cge_status loss_infer(cge_infer_ctx *ctx, bool softmax)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *t = &ctx->inputs[1];
    int32_t r = x->shape.rank;
    int red = parse_reduction(ctx->attrs);
    if (red < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "reduction is '%s'; it must be 'none', 'sum' or 'mean'",
                              cge_attrs_get_string(ctx->attrs, "reduction", ""));
    if (r < 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input has rank %d; it must be [N, C, d1..dk]",
                              (int)r);
    if (t->shape.rank != r - 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "target has rank %d; it must be %d ([N, d1..dk] for input rank %d)",
                              (int)t->shape.rank, (int)(r - 1), (int)r);
    cge_shape per_pos = {.rank = r - 1};
    for (int32_t i = 0; i < r - 1; i++) {
        int64_t xd = x->shape.dims[i == 0 ? 0 : i + 1], td = t->shape.dims[i];
        if (!cge_dim_may_equal(xd, td))
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "target dim %d is %lld; the input's matching dim is %lld",
                                  (int)i, (long long)td, (long long)xd);
        per_pos.dims[i] = cge_dim_merge(xd, td);
    }
    if (ctx->num_inputs > 2 && ctx->inputs[2].dtype != CGE_DTYPE_UNDEFINED) {
        const cge_tensor_desc *w = &ctx->inputs[2];
        if (w->dtype != x->dtype)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "weight is %s; it must match the input (%s)",
                                  cge_dtype_name(w->dtype), cge_dtype_name(x->dtype));
        int64_t c = x->shape.dims[1];
        if (w->shape.rank != 1 ||
            !cge_dim_may_equal(c, w->shape.dims[0]))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "weight must be 1-D with C = %lld values",
                                  (long long)c);
    }
    ctx->outputs[0].dtype = x->dtype;
    ctx->outputs[0].shape = red == RED_NONE ? per_pos : CGE_SCALAR;
    if (softmax && ctx->num_outputs > 1) {
        ctx->outputs[1].dtype = x->dtype;
        ctx->outputs[1].shape = x->shape;
    }
    return CGE_OK;
}

static cge_status nll_infer(cge_infer_ctx *ctx)
{
    return loss_infer(ctx, false);
}

static cge_status sce_infer(cge_infer_ctx *ctx)
{
    return loss_infer(ctx, true);
}

/* ---- kernels -------------------------------------------------------------------------- */

typedef struct loss_args {
    const void *x, *target, *weight;
    cge_dtype xt, tt;
    void *out, *log_prob;           /* log_prob: SCE's optional second output */
    double *partial;                /* [nb][2]: sum of w*loss, sum of w */
    int64_t n, c, d, nb;
    int64_t ignore;
    bool has_ignore, softmax;
    int reduction;
    char node[64];
} loss_args;

static int64_t loss_blocks(const cge_kernel_ctx *ctx)
{
    const cge_shape *s = &ctx->inputs[0].shape;
    int64_t units = cge_shape_numel(s);
    int64_t nb = cge__blocks_for(units, LOSS_MIN_WORK, ctx->num_threads);
    int64_t pos = s->rank >= 2 && s->dims[1] > 0 ? units / s->dims[1] : 1;
    if (nb > pos)
        nb = pos > 0 ? pos : 1;
    return nb > LOSS_MAX_BLOCKS ? LOSS_MAX_BLOCKS : nb;
}

static size_t loss_workspace(const cge_kernel_ctx *ctx)
{
    return (size_t)loss_blocks(ctx) * 2 * sizeof(double);
}

static void loss_block(int64_t b, int64_t nb, void *p)
{
    const loss_args *a = p;
    int64_t lo, hi;
    cge__block_range(a->n * a->d, b, nb, &lo, &hi);
    double sum_wl = 0.0, sum_w = 0.0;
    for (int64_t u = lo; u < hi; u++) {
        int64_t n = u / a->d, dd = u % a->d, base = n * a->c * a->d + dd;
        int64_t t = cge__load_as_i64(a->tt, a->target, u);
        double lse = 0.0;
        if (a->softmax) {
            /* log_softmax over the classes of this position */
            double mx = -INFINITY;
            for (int64_t k = 0; k < a->c; k++) {
                double v = cge__load_as_double(a->xt, a->x, base + k * a->d);
                if (v > mx || v != v)
                    mx = v;
            }
            double s = 0.0;
            for (int64_t k = 0; k < a->c; k++)
                s += exp(cge__load_as_double(a->xt, a->x, base + k * a->d) - mx);
            lse = mx + log(s);
            if (a->log_prob)
                for (int64_t k = 0; k < a->c; k++)
                    cge__store_from_double(a->xt, a->log_prob, base + k * a->d,
                                          cge__load_as_double(a->xt, a->x, base + k * a->d) - lse);
        }
        double loss = 0.0, w = 0.0;
        if (!(a->has_ignore && t == a->ignore)) {
            if (t < 0 || t >= a->c) {
                cge_kernel_fail(CGE_ERR_INVALID_ARG,
                                "%s: target %lld (position %lld) is outside [0, %lld) and is "
                                "not ignore_index",
                                a->node, (long long)t, (long long)u, (long long)a->c);
                loss = NAN;
            } else {
                double v = cge__load_as_double(a->xt, a->x, base + t * a->d);
                loss = -(a->softmax ? v - lse : v);
                w = a->weight ? cge__load_as_double(a->xt, a->weight, t) : 1.0;
            }
        }
        if (a->reduction == RED_NONE)
            cge__store_from_double(a->xt, a->out, u, w * loss);
        sum_wl += w * loss;
        sum_w += w;
    }
    if (a->partial) {
        a->partial[2 * b] = sum_wl;
        a->partial[2 * b + 1] = sum_w;
    }
}

/* One block: adds the per-block sums in order and writes the scalar. */
static void loss_finish(int64_t b, int64_t nb, void *p)
{
    const loss_args *a = p;
    double sum_wl = 0.0, sum_w = 0.0;
    for (int64_t k = 0; k < a->nb; k++) {
        sum_wl += a->partial[2 * k];
        sum_w += a->partial[2 * k + 1];
    }
    /* mean divides by the summed weights (the count of counted positions
     * without weights); when nothing counts this is 0/0, NaN, as in onnx. */
    double v = a->reduction == RED_SUM ? sum_wl : sum_wl / sum_w;
    cge__store_from_double(a->xt, a->out, 0, v);
}

static cge_status loss_launch(const cge_kernel_ctx *ctx, cge_stream *stream, bool softmax)
{
    if (ctx->num_inputs < 2 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "expects input, target and an output");
    const cge_tensor *x = &ctx->inputs[0], *t = &ctx->inputs[1];
    const cge_tensor *w = ctx->num_inputs > 2 && ctx->inputs[2].data ? &ctx->inputs[2] : NULL;
    loss_args a;
    memset(&a, 0, sizeof a);
    a.reduction = parse_reduction(ctx->attrs);
    int32_t r = x->shape.rank;
    if (a.reduction < 0 || r < 2 || t->shape.rank != r - 1 ||
        !(LOSS_DT & CGE_DT(x->dtype)) || !(LOSS_IDX_DT & CGE_DT(t->dtype)))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "inputs or reduction the meta did not accept");
    a.n = x->shape.dims[0];
    a.c = x->shape.dims[1];
    a.d = 1;
    for (int32_t i = 2; i < r; i++)
        a.d *= x->shape.dims[i];
    if (cge_shape_numel(&t->shape) != a.n * a.d || (w && (w->dtype != x->dtype ||
                                                          cge_shape_numel(&w->shape) != a.c)))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "target or weight do not match the input");
    const cge_attr *ii = cge_attrs_find(ctx->attrs, "ignore_index");
    a.has_ignore = ii && ii->kind == CGE_ATTR_INT;
    a.ignore = a.has_ignore ? ii->i : 0;
    a.x = x->data;
    a.xt = x->dtype;
    a.target = t->data;
    a.tt = t->dtype;
    a.weight = w ? w->data : NULL;
    a.out = ctx->outputs[0].data;
    a.softmax = softmax;
    a.log_prob = softmax && ctx->num_outputs > 1 ? ctx->outputs[1].data : NULL;
    snprintf(a.node, sizeof a.node, "%s '%s'", ctx->op_type ? ctx->op_type : "loss",
             ctx->node_name ? ctx->node_name : "");
    a.nb = loss_blocks(ctx);
    if (a.reduction != RED_NONE) {
        if (!ctx->workspace || ctx->workspace_size < (size_t)a.nb * 2 * sizeof(double))
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "workspace missing or too small");
        a.partial = ctx->workspace;
    }
    if (a.reduction == RED_NONE && a.n * a.d == 0)
        return CGE_OK;
    if (!a.out || (a.n * a.d * a.c > 0 && (!a.x || !a.target)))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    if (a.n * a.d > 0) {
        cge_status st = cge_launch(stream, loss_block, a.nb, &a, sizeof a);
        if (st || a.reduction == RED_NONE)
            return st;
    } else if (a.reduction == RED_NONE) {
        return CGE_OK;
    } else {
        a.nb = 0;
    }
    return cge_launch(stream, loss_finish, 1, &a, sizeof a);
}

static cge_status nll_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return loss_launch(ctx, stream, false);
}

static cge_status sce_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return loss_launch(ctx, stream, true);
}

/* ---- definitions ---------------------------------------------------------------------- */

static const cge_kernel_def k_nll[] = {{.engine = "cpu", .dtypes = LOSS_DT, .launch = nll_launch,
                                        .workspace_size = loss_workspace, .inplace_input = -1}};
static const cge_kernel_def k_sce[] = {{.engine = "cpu", .dtypes = LOSS_DT, .launch = sce_launch,
                                        .workspace_size = loss_workspace, .inplace_input = -1}};

static const cge_arg_def nll_in[] = {
    {"input", 0, LOSS_DT, "[N, C, d1..dk] log-probabilities"},
    {"target", 0, LOSS_IDX_DT, "[N, d1..dk] class indices in [0, C) or ignore_index"},
    {"weight", CGE_ARG_OPTIONAL, LOSS_DT, "[C] class weights"},
};
static const cge_arg_def nll_out[] = {
    {"loss", 0, LOSS_DT, "[N, d1..dk] with reduction none, else a scalar"}};
static const cge_arg_def sce_in[] = {
    {"scores", 0, LOSS_DT, "[N, C, d1..dk] unnormalised scores"},
    {"labels", 0, LOSS_IDX_DT, "[N, d1..dk] class indices in [0, C) or ignore_index"},
    {"weights", CGE_ARG_OPTIONAL, LOSS_DT, "[C] class weights"},
};
static const cge_arg_def sce_out[] = {
    {"output", 0, LOSS_DT, "[N, d1..dk] with reduction none, else a scalar"},
    {"log_prob", CGE_ARG_OPTIONAL, LOSS_DT, "log_softmax of scores along axis 1"},
};
static const cge_attr_def loss_attrs[] = {
    {"ignore_index", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "target value that contributes nothing (no default: absent means none)"},
    {"reduction", CGE_ATTR_STRING, false, 0, 0.0f, "mean", "none, sum or mean (weighted)"},
};

static const cge_op_def loss_ops[] = {
    {.name = "NegativeLogLikelihoodLoss", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13,
     .inputs = nll_in, .num_inputs = 3, .outputs = nll_out, .num_outputs = 1,
     .attrs = loss_attrs, .num_attrs = 2, .infer = nll_infer, .kernels = k_nll, .num_kernels = 1,
     .doc = "loss[n, d] = -input[n, target[n, d], d] * weight[target[n, d]], then reduced."},
    {.name = "SoftmaxCrossEntropyLoss", .domain = CGE_DOMAIN_DEFAULT, .since_version = 13,
     .inputs = sce_in, .num_inputs = 3, .outputs = sce_out, .num_outputs = 2,
     .attrs = loss_attrs, .num_attrs = 2, .infer = sce_infer, .kernels = k_sce, .num_kernels = 1,
     .doc = "NegativeLogLikelihoodLoss of log_softmax(scores, axis 1)."},
};

const cge_op_def *cge__ops_loss(int32_t *count)
{
    *count = (int32_t)(sizeof loss_ops / sizeof loss_ops[0]);
    return loss_ops;
}
