/* Random generators: RandomUniform, RandomNormal (and their *Like forms),
 * Bernoulli and Multinomial, all drawing from one counter-based generator so
 * that results do not depend on how the work is split into blocks. */
#include <math.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"

/* ---- random generators ---------------------------------------------------------------- */

/* A counter-based generator: element i's numbers are a hash of (key, i), so
 * results do not depend on how the work is split into blocks. With a `seed`
 * attribute the key comes from the seed and every run gives the same values;
 * without one a fresh key is drawn on the stream at each run (also in a
 * replay), from the system's entropy. */
static inline uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double rng_uniform(uint64_t key, uint64_t i)
{
    return (double)(mix64(key ^ mix64(i)) >> 11) * 0x1.0p-53;
}

static inline double rng_normal(uint64_t key, uint64_t i)
{
    double u1 = 1.0 - rng_uniform(key, 2 * i), u2 = rng_uniform(key, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

enum { RNG_UNIFORM, RNG_NORMAL, RNG_BERNOULLI, RNG_MULTINOMIAL };

typedef struct rng_args {
    int kind;
    uint64_t *key;                  /* workspace slot written by rng_key_block */
    bool seeded;
    uint64_t seed_key;
    const void *x;                  /* Bernoulli probabilities, Multinomial logits */
    cge_dtype xt, yt;
    void *y;
    int64_t numel;
    double a, b;                    /* low/high, mean/scale */
    int64_t classes, samples;       /* Multinomial */
    double *cdf;                    /* Multinomial workspace [rows][classes] */
} rng_args;

static void rng_key_block(int64_t b, int64_t nb, void *p)
{
    const rng_args *a = p;
    uint64_t k = 0;
    if (a->seeded) {
        k = a->seed_key;
    } else {
        struct timespec ts;
        if (getrandom(&k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            k = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
                      (uint64_t)(uintptr_t)a->key);
        }
    }
    *a->key = k;
}

static void rng_block(int64_t b, int64_t nb, void *p)
{
    const rng_args *a = p;
    uint64_t key = *a->key;
    int64_t lo, hi;
    if (a->kind == RNG_MULTINOMIAL) {
        int64_t rows = a->numel / (a->samples > 0 ? a->samples : 1);
        cge__block_range(rows, b, nb, &lo, &hi);
        for (int64_t r = lo; r < hi; r++) {
            double *cdf = a->cdf + r * a->classes, mx = -INFINITY, tot = 0.0;
            for (int64_t k = 0; k < a->classes; k++) {
                double v = cge__load_as_double(a->xt, a->x, r * a->classes + k);
                mx = v > mx ? v : mx;
            }
            for (int64_t k = 0; k < a->classes; k++) {
                tot += exp(cge__load_as_double(a->xt, a->x, r * a->classes + k) - mx);
                cdf[k] = tot;
            }
            for (int64_t s = 0; s < a->samples; s++) {
                double u = rng_uniform(key, (uint64_t)(r * a->samples + s)) * tot;
                int64_t l = 0, h = a->classes - 1;
                while (l < h) {            /* first class with cdf > u */
                    int64_t m = (l + h) / 2;
                    if (cdf[m] > u)
                        h = m;
                    else
                        l = m + 1;
                }
                cge__store_from_double(a->yt, a->y, r * a->samples + s, (double)l);
            }
        }
        return;
    }
    cge__block_range(a->numel, b, nb, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        double v;
        if (a->kind == RNG_UNIFORM)
            v = a->a + (a->b - a->a) * rng_uniform(key, (uint64_t)i);
        else if (a->kind == RNG_NORMAL)
            v = a->a + a->b * rng_normal(key, (uint64_t)i);
        else
            v = rng_uniform(key, (uint64_t)i) < cge__load_as_double(a->xt, a->x, i) ? 1.0 : 0.0;
        cge__store_from_double(a->yt, a->y, i, v);
    }
}

/* The output dtype: the dtype attribute, else `dflt`. */
static cge_dtype rng_dtype(const cge_attrs *attrs, cge_dtype dflt)
{
    const cge_attr *d = cge_attrs_find(attrs, "dtype");
    return d && d->kind == CGE_ATTR_INT ? (cge_dtype)d->i : dflt;
}

static cge_status rng_check_float_out(cge_infer_ctx *ctx, cge_dtype t)
{
    if (t <= CGE_DTYPE_UNDEFINED || t >= CGE_DTYPE_MAX || !cge_dtype_is_float(t))
        return cge_meta_error(ctx, CGE_ERR_DTYPE,
                              "output dtype %d is not a float type (float16, float, double, "
                              "bfloat16)", (int)t);
    return CGE_OK;
}

static cge_status rng_generate_infer(cge_infer_ctx *ctx)
{
    const int64_t *dims = NULL;
    int64_t n = cge_attrs_get_ints(ctx->attrs, "shape", &dims);
    cge_dtype t = rng_dtype(ctx->attrs, CGE_F32);
    cge_status st = rng_check_float_out(ctx, t);
    if (st)
        return st;
    if (n < 0 || n > CGE_MAX_RANK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "shape must list at most %d dims",
                              CGE_MAX_RANK);
    cge_shape s = {.rank = (int32_t)n};
    for (int64_t i = 0; i < n; i++) {
        if (dims[i] < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "shape[%lld] is %lld", (long long)i,
                                  (long long)dims[i]);
        s.dims[i] = dims[i];
    }
    ctx->outputs[0].dtype = t;
    ctx->outputs[0].shape = s;
    return CGE_OK;
}

static cge_status rng_like_infer(cge_infer_ctx *ctx)
{
    cge_dtype t = rng_dtype(ctx->attrs, ctx->inputs[0].dtype);
    cge_status st = rng_check_float_out(ctx, t);
    if (st)
        return st;
    ctx->outputs[0].dtype = t;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status bernoulli_infer(cge_infer_ctx *ctx)
{
    cge_status st = cge__meta_need_float(ctx, 0, "input");
    if (st)
        return st;
    cge_dtype t = rng_dtype(ctx->attrs, ctx->inputs[0].dtype);
    if (t <= CGE_DTYPE_UNDEFINED || t >= CGE_DTYPE_MAX || !(CGE_DT_ALL & CGE_DT(t)))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "dtype %d is not a numeric type or bool",
                              (int)t);
    ctx->outputs[0].dtype = t;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status multinomial_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    cge_status st = cge__meta_need_float(ctx, 0, "input");
    if (st)
        return st;
    cge_dtype t = rng_dtype(ctx->attrs, CGE_I32);
    int64_t samples = cge_attrs_get_int(ctx->attrs, "sample_size", 1);
    if (t != CGE_I32 && t != CGE_I64)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "dtype %d must be int32 (6) or int64 (7)",
                              (int)t);
    if (x->shape.rank != 2 || samples < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "input must be [batch, classes] and sample_size >= 1");
    if (cge_dim_is_known(x->shape.dims[1]) && x->shape.dims[1] < 1)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input has no classes");
    ctx->outputs[0].dtype = t;
    ctx->outputs[0].shape = CGE_SHAPE(x->shape.dims[0], samples);
    return CGE_OK;
}

static size_t rng_workspace(const cge_kernel_ctx *ctx)
{
    size_t n = sizeof(uint64_t) * 8; /* the key, kept 64 bytes apart from the rest */
    if (!strcmp(ctx->op_type ? ctx->op_type : "", "Multinomial") && ctx->num_inputs > 0)
        n += sizeof(double) * (size_t)cge_shape_numel(&ctx->inputs[0].shape);
    return n;
}

static cge_status rng_launch(const cge_kernel_ctx *ctx, cge_stream *stream, int kind)
{
    cge_tensor *y = &ctx->outputs[0];
    rng_args a;
    memset(&a, 0, sizeof a);
    a.kind = kind;
    a.y = y->data;
    a.yt = y->dtype;
    a.numel = cge_shape_numel(&y->shape);
    const cge_attr *seed = cge_attrs_find(ctx->attrs, "seed");
    a.seeded = seed && seed->kind == CGE_ATTR_FLOAT;
    if (a.seeded) {
        uint32_t bits;
        memcpy(&bits, &seed->f, sizeof bits);
        a.seed_key = mix64(bits ^ 0x5EEDull);
    }
    if (kind == RNG_UNIFORM) {
        a.a = cge_attrs_get_float(ctx->attrs, "low", 0.0f);
        a.b = cge_attrs_get_float(ctx->attrs, "high", 1.0f);
    } else if (kind == RNG_NORMAL) {
        a.a = cge_attrs_get_float(ctx->attrs, "mean", 0.0f);
        a.b = cge_attrs_get_float(ctx->attrs, "scale", 1.0f);
    } else {
        const cge_tensor *x = &ctx->inputs[0];
        a.x = x->data;
        a.xt = x->dtype;
        if (!cge_dtype_is_float(x->dtype))
            return cge_kernel_error(ctx, CGE_ERR_DTYPE, "input must be a float type");
        if (kind == RNG_BERNOULLI && cge_shape_numel(&x->shape) != a.numel)
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must have the input's shape");
        if (kind == RNG_MULTINOMIAL) {
            if (x->shape.rank != 2 || y->shape.rank != 2 || y->shape.dims[0] != x->shape.dims[0] ||
                (y->dtype != CGE_I32 && y->dtype != CGE_I64) || x->shape.dims[1] < 1)
                return cge_kernel_error(ctx, CGE_ERR_SHAPE, "expects [batch, classes] logits and "
                                        "an int32/int64 [batch, samples] output");
            a.classes = x->shape.dims[1];
            a.samples = y->shape.dims[1];
        }
    }
    if (!cge_dtype_is_float(a.yt) && kind != RNG_BERNOULLI && kind != RNG_MULTINOMIAL)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "output must be a float type");
    if (a.numel == 0)
        return CGE_OK;
    if (!a.y || (kind >= RNG_BERNOULLI && !a.x))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    if (!ctx->workspace || ctx->workspace_size < rng_workspace(ctx))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "workspace missing or too small");
    a.key = ctx->workspace;
    a.cdf = (double *)((char *)ctx->workspace + sizeof(uint64_t) * 8);
    cge_status st = cge_launch(stream, rng_key_block, 1, &a, sizeof a);
    if (st)
        return st;
    int64_t work = kind == RNG_MULTINOMIAL ? a.numel / a.samples : a.numel;
    int64_t per = kind == RNG_MULTINOMIAL ? a.classes + a.samples * 8 : 1;
    return cge_launch(stream, rng_block,
                      cge__blocks_for(work, per >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / per,
                                     ctx->num_threads),
                      &a, sizeof a);
}

static cge_status uniform_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rng_launch(ctx, stream, RNG_UNIFORM);
}

static cge_status normal_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rng_launch(ctx, stream, RNG_NORMAL);
}

static cge_status bernoulli_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rng_launch(ctx, stream, RNG_BERNOULLI);
}

static cge_status multinomial_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    return rng_launch(ctx, stream, RNG_MULTINOMIAL);
}

/* ---- definitions ---------------------------------------------------------------------- */

static const cge_kernel_def k_uniform[] = CGE__KDEF(0, uniform_launch, rng_workspace, -1);
static const cge_kernel_def k_normal[] = CGE__KDEF(0, normal_launch, rng_workspace, -1);
static const cge_kernel_def k_bernoulli[] =
    CGE__KDEF(CGE_DT_FLOAT, bernoulli_launch, rng_workspace, -1);
static const cge_kernel_def k_multinomial[] =
    CGE__KDEF(CGE_DT_FLOAT, multinomial_launch, rng_workspace, -1);

static const cge_arg_def like_in[] = {{"input", 0, CGE_DT_ALL, "gives the shape (and dtype)"}};
static const cge_arg_def rng_out[] = {{"output", 0, CGE_DT_FLOAT, "random values"}};
static const cge_arg_def bern_in[] = {{"input", 0, CGE_DT_FLOAT, "probabilities of 1"}};
static const cge_arg_def bern_out[] = {{"output", 0, CGE_DT_ALL, "0 or 1"}};
static const cge_arg_def multi_in[] = {
    {"input", 0, CGE_DT_FLOAT, "[batch, classes] unnormalised log-probabilities"}};
static const cge_arg_def multi_out[] = {
    {"output", 0, CGE__IDX_DT, "[batch, sample_size] drawn classes"}};

static const cge_attr_def uniform_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 1, 0.0f, NULL, "output dtype (default float)"},
    {"high", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "upper bound (exclusive)"},
    {"low", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "lower bound"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
    {"shape", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "output shape"},
};
static const cge_attr_def uniform_like_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 0, 0.0f, NULL, "output dtype (default the input's)"},
    {"high", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "upper bound (exclusive)"},
    {"low", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "lower bound"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
};
static const cge_attr_def normal_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 1, 0.0f, NULL, "output dtype (default float)"},
    {"mean", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "mean"},
    {"scale", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "standard deviation"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
    {"shape", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "output shape"},
};
static const cge_attr_def normal_like_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 0, 0.0f, NULL, "output dtype (default the input's)"},
    {"mean", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "mean"},
    {"scale", CGE_ATTR_FLOAT, false, 0, 1.0f, NULL, "standard deviation"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
};
static const cge_attr_def bern_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 0, 0.0f, NULL, "output dtype (default the input's)"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
};
static const cge_attr_def multi_attrs[] = {
    {"dtype", CGE_ATTR_INT, false, 6, 0.0f, NULL, "int32 (6, default) or int64 (7)"},
    {"sample_size", CGE_ATTR_INT, false, 1, 0.0f, NULL, "samples per batch row"},
    {"seed", CGE_ATTR_FLOAT, false, 0, 0.0f, NULL, "fixed seed: the same values every run"},
};

static const cge_op_def random_ops[] = {
    CGE__OPDEF("RandomUniform", 1, NULL, 0, rng_out, 1, uniform_attrs, CGE__NATTR(uniform_attrs),
               rng_generate_infer, k_uniform, "Uniform random values in [low, high)."),
    CGE__OPDEF("RandomUniformLike", 1, like_in, 1, rng_out, 1, uniform_like_attrs,
               CGE__NATTR(uniform_like_attrs), rng_like_infer, k_uniform,
               "Uniform random values in [low, high), shaped like the input."),
    CGE__OPDEF("RandomNormal", 1, NULL, 0, rng_out, 1, normal_attrs, CGE__NATTR(normal_attrs),
               rng_generate_infer, k_normal, "Normal random values (mean, scale)."),
    CGE__OPDEF("RandomNormalLike", 1, like_in, 1, rng_out, 1, normal_like_attrs,
               CGE__NATTR(normal_like_attrs), rng_like_infer, k_normal,
               "Normal random values (mean, scale), shaped like the input."),
    CGE__OPDEF("Bernoulli", 15, bern_in, 1, bern_out, 1, bern_attrs, CGE__NATTR(bern_attrs),
               bernoulli_infer, k_bernoulli, "1 with the input's probability, else 0."),
    CGE__OPDEF("Multinomial", 7, multi_in, 1, multi_out, 1, multi_attrs, CGE__NATTR(multi_attrs),
               multinomial_infer, k_multinomial,
               "Classes drawn from the softmax of each row, sample_size per row."),
};

const cge_op_def *cge__ops_random(int32_t *count)
{
    *count = (int32_t)(sizeof random_ops / sizeof random_ops[0]);
    return random_ops;
}
