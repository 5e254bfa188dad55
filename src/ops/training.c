/* The optimizer update rules of ONNX's ai.onnx.preview.training domain:
 * Adagrad, Momentum (standard and Nesterov) and Adam. */
#include <math.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/kernel_util.h"

/* Each takes a learning rate R and an update count T (scalars), then n tensors
 * to optimize with their gradients and accumulators, and returns the updated
 * tensors and accumulators. Deterministic formulas, computed in double per
 * element. */

#define OPT_DTYPES (CGE_DT(CGE_F32) | CGE_DT(CGE_F64))
#define OPT_MAX_TENSORS 32

typedef enum opt_kind { OPT_ADAGRAD, OPT_MOMENTUM, OPT_ADAM } opt_kind;

/* Inputs per optimized tensor after R and T, outputs per tensor. */
static const int32_t per_in[3] = {3, 3, 4}, per_out[3] = {2, 2, 3};

static opt_kind kind_of(const char *op)
{
    return !strcmp(op, "Adagrad") ? OPT_ADAGRAD : !strcmp(op, "Momentum") ? OPT_MOMENTUM : OPT_ADAM;
}

static cge_status opt_infer(cge_infer_ctx *ctx)
{
    opt_kind k = kind_of(ctx->op_type);
    int32_t n = ctx->num_outputs / per_out[k];
    if (n < 1 || ctx->num_outputs != n * per_out[k] || ctx->num_inputs != 2 + n * per_in[k])
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "%d inputs and %d outputs: %s takes R, T and %d tensors per "
                              "optimized tensor, and returns %d per tensor",
                              (int)ctx->num_inputs, (int)ctx->num_outputs, ctx->op_type,
                              (int)per_in[k], (int)per_out[k]);
    if (k == OPT_MOMENTUM) {
        const char *mode = cge_attrs_get_string(ctx->attrs, "mode", "");
        if (strcmp(mode, "standard") != 0 && strcmp(mode, "nesterov") != 0)
            return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                                  "mode '%s' is neither standard nor nesterov", mode);
    }
    if (n > OPT_MAX_TENSORS)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED, "%d tensors; at most %d per node",
                              (int)n, OPT_MAX_TENSORS);
    for (int32_t s = 0; s < 2; s++)
        if (cge_shape_numel(&ctx->inputs[s].shape) != 1 && cge_shape_is_static(&ctx->inputs[s].shape))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s must be a scalar", s ? "T" : "R");
    for (int32_t i = 0; i < n; i++) {
        const cge_tensor_desc *x = &ctx->inputs[2 + i];
        for (int32_t j = 1; j < per_in[k]; j++) {
            const cge_tensor_desc *o = &ctx->inputs[2 + j * n + i];
            if (o->dtype != x->dtype || !cge_shape_equal(&o->shape, &x->shape)) {
                char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
                return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                      "input %d is %s %s; it must match tensor %d (%s %s)",
                                      (int)(2 + j * n + i), cge_dtype_name(o->dtype),
                                      cge_shape_str(&o->shape, a, sizeof a), (int)i,
                                      cge_dtype_name(x->dtype), cge_shape_str(&x->shape, b, sizeof b));
            }
        }
        for (int32_t j = 0; j < per_out[k]; j++) {
            ctx->outputs[j * n + i].dtype = x->dtype;
            ctx->outputs[j * n + i].shape = x->shape;
        }
    }
    return CGE_OK;
}

typedef struct opt_args {
    opt_kind kind;
    int32_t n;
    cge_dtype dtype[OPT_MAX_TENSORS];
    int64_t numel[OPT_MAX_TENSORS];
    const void *in[OPT_MAX_TENSORS][4];  /* X, G, then V/H */
    void *out[OPT_MAX_TENSORS][3];
    const void *r, *t;
    cge_dtype r_dtype, t_dtype;
    double decay, eps, norm, norm_post, alpha, beta;
    int nesterov;
} opt_args;

static inline double ld(cge_dtype t, const void *p, int64_t i)
{
    return t == CGE_F32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static inline void st(cge_dtype t, void *p, int64_t i, double v)
{
    if (t == CGE_F32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

/* One block: every tensor (the updates are small and read R and T). */
static void opt_fn(int64_t blk, int64_t nblk, void *p)
{
    const opt_args *a = p;
    double r = cge__load_as_double(a->r_dtype, a->r, 0);
    double t = cge__load_as_double(a->t_dtype, a->t, 0);
    for (int32_t i = 0; i < a->n; i++) {
        cge_dtype dt = a->dtype[i];
        for (int64_t e = 0; e < a->numel[i]; e++) {
            double x = ld(dt, a->in[i][0], e), g = a->norm * x + ld(dt, a->in[i][1], e);
            if (a->kind == OPT_ADAGRAD) {
                double h = ld(dt, a->in[i][2], e) + g * g;
                double rate = r / (1.0 + t * a->decay);
                st(dt, a->out[i][0], e, x - rate * g / (sqrt(h) + a->eps));
                st(dt, a->out[i][1], e, h);
            } else if (a->kind == OPT_MOMENTUM) {
                double beta = t > 0 ? a->beta : 1.0;
                double v = a->alpha * ld(dt, a->in[i][2], e) + beta * g;
                double step = a->nesterov ? g + a->alpha * v : v;
                st(dt, a->out[i][0], e, x - r * step);
                st(dt, a->out[i][1], e, v);
            } else {
                double v = a->alpha * ld(dt, a->in[i][2], e) + (1.0 - a->alpha) * g;
                double h = a->beta * ld(dt, a->in[i][3], e) + (1.0 - a->beta) * g * g;
                double rate = t > 0 ? r * sqrt(1.0 - pow(a->beta, t)) / (1.0 - pow(a->alpha, t)) : r;
                double xn = x - rate * v / (sqrt(h) + a->eps);
                st(dt, a->out[i][0], e, (1.0 - a->norm_post) * xn);
                st(dt, a->out[i][1], e, v);
                st(dt, a->out[i][2], e, h);
            }
        }
    }
}

static cge_status opt_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    opt_args a;
    memset(&a, 0, sizeof a);
    a.kind = kind_of(ctx->op_type);
    int32_t n = ctx->num_outputs / per_out[a.kind];
    if (n < 1 || n > OPT_MAX_TENSORS || ctx->num_inputs != 2 + n * per_in[a.kind])
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "inputs and outputs do not agree");
    a.n = n;
    a.r = ctx->inputs[0].data;
    a.t = ctx->inputs[1].data;
    a.r_dtype = ctx->inputs[0].dtype;
    a.t_dtype = ctx->inputs[1].dtype;
    if (!a.r || !a.t || cge_shape_numel(&ctx->inputs[0].shape) != 1 ||
        cge_shape_numel(&ctx->inputs[1].shape) != 1)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "R and T must be scalars with data");
    for (int32_t i = 0; i < n; i++) {
        const cge_tensor *x = &ctx->inputs[2 + i];
        if (!(OPT_DTYPES & CGE_DT(x->dtype)))
            return cge_kernel_error(ctx, CGE_ERR_DTYPE, "tensor %d is %s; float or double only",
                                    (int)i, cge_dtype_name(x->dtype));
        a.dtype[i] = x->dtype;
        a.numel[i] = cge_shape_numel(&x->shape);
        for (int32_t j = 0; j < per_in[a.kind]; j++) {
            const cge_tensor *t = &ctx->inputs[2 + j * n + i];
            if (t->dtype != x->dtype || !cge_shape_equal(&t->shape, &x->shape) ||
                (a.numel[i] && !t->data))
                return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input %d does not match tensor %d",
                                        (int)(2 + j * n + i), (int)i);
            a.in[i][j] = t->data;
        }
        for (int32_t j = 0; j < per_out[a.kind]; j++) {
            const cge_tensor *o = &ctx->outputs[j * n + i];
            if (o->dtype != x->dtype || !cge_shape_equal(&o->shape, &x->shape) ||
                (a.numel[i] && !o->data))
                return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output %d does not match tensor %d",
                                        (int)(j * n + i), (int)i);
            a.out[i][j] = o->data;
        }
    }
    const cge_attrs *at = ctx->attrs;
    a.decay = cge_attrs_get_float(at, "decay_factor", 0.0f);
    a.eps = cge_attrs_get_float(at, "epsilon", 1e-6f);
    a.norm = cge_attrs_get_float(at, "norm_coefficient", 0.0f);
    a.norm_post = cge_attrs_get_float(at, "norm_coefficient_post", 0.0f);
    a.alpha = cge_attrs_get_float(at, "alpha", a.kind == OPT_ADAM ? 0.9f : 0.0f);
    a.beta = cge_attrs_get_float(at, "beta", a.kind == OPT_ADAM ? 0.999f : 0.0f);
    a.nesterov = !strcmp(cge_attrs_get_string(at, "mode", "standard"), "nesterov");
    return cge_launch(stream, opt_fn, 1, &a, sizeof a);
}

static const cge_arg_def opt_inputs[] = {
    {"R", 0, OPT_DTYPES, "learning rate (scalar)"},
    {"T", 0, CGE_DT(CGE_I64), "update count (scalar)"},
    {"inputs", CGE_ARG_VARIADIC, OPT_DTYPES,
     "the tensors to optimize, then their gradients, then their accumulators"},
};
static const cge_arg_def opt_outputs[] = {
    {"outputs", CGE_ARG_VARIADIC, OPT_DTYPES, "updated tensors, then updated accumulators"},
};
static const cge_attr_def adagrad_attrs[] = {
    {"decay_factor", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "learning-rate decay per update"},
    {"epsilon", CGE_ATTR_FLOAT, false, 0, 1e-6f, NULL, "added to the denominator"},
    {"norm_coefficient", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "L2 regularisation"},
};
static const cge_attr_def momentum_attrs[] = {
    {"alpha", CGE_ATTR_FLOAT, true, 0, 0.0f, NULL, "decay of the accumulated momentum"},
    {"beta", CGE_ATTR_FLOAT, true, 0, 0.0f, NULL, "scale of the gradient"},
    {"mode", CGE_ATTR_STRING, true, 0, 0.0f, NULL, "standard or nesterov"},
    {"norm_coefficient", CGE_ATTR_FLOAT, true, 0, 0.0f, NULL, "L2 regularisation"},
};
static const cge_attr_def adam_attrs[] = {
    {"alpha", CGE_ATTR_FLOAT, false, 0, 0.9f, NULL, "decay of the first moment"},
    {"beta", CGE_ATTR_FLOAT, false, 0, 0.999f, NULL, "decay of the second moment"},
    {"epsilon", CGE_ATTR_FLOAT, false, 0, 1e-6f, NULL, "added to the denominator"},
    {"norm_coefficient", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "L2 regularisation"},
    {"norm_coefficient_post", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "weight decay after the step"},
};
static const cge_kernel_def opt_kernels[] = {
    {.engine = "cpu", .dtypes = OPT_DTYPES, .launch = opt_launch, .inplace_input = -1}};

#define OPT_OP(NAME, ATTRS, NATTR, DOC)                                                    \
    {.name = NAME, .domain = "ai.onnx.preview.training", .since_version = 1,                \
     .inputs = opt_inputs, .num_inputs = 3, .outputs = opt_outputs, .num_outputs = 1,       \
     .attrs = ATTRS, .num_attrs = NATTR, .infer = opt_infer, .kernels = opt_kernels,        \
     .num_kernels = 1, .doc = DOC}

static const cge_op_def training_ops[] = {
    OPT_OP("Adagrad", adagrad_attrs, 3, "Adagrad update of n tensors (ONNX training preview)."),
    OPT_OP("Momentum", momentum_attrs, 4,
           "Momentum (standard or Nesterov) update of n tensors (ONNX training preview)."),
    OPT_OP("Adam", adam_attrs, 5, "Adam update of n tensors (ONNX training preview)."),
};

const cge_op_def *cge__ops_training(int32_t *count)
{
    *count = (int32_t)(sizeof training_ops / sizeof training_ops[0]);
    return training_ops;
}
