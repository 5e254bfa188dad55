/* libadd_custom.so: a custom operator library with one operator, AddCustom in
 * domain "custom" (z = x + y, float32, only [8,2048]). Built twice more for the
 * tests: ADD_CUSTOM_BROKEN (meta claims any shape, the kernel still assumes
 * [8,2048]) and ADD_CUSTOM_API_VERSION (a library for another contract). */
#include <string.h>

#include "cge/op.h"

#ifndef ADD_CUSTOM_API_VERSION
#define ADD_CUSTOM_API_VERSION CGE_OP_API_VERSION
#endif

#ifdef ADD_CUSTOM_BROKEN
/* Its own domain and name, so that it loads beside the good library. */
#define ADD_CUSTOM_DOMAIN "custom_broken"
#define ADD_CUSTOM_LIBNAME "add_custom_broken"
#else
#define ADD_CUSTOM_DOMAIN "custom"
#define ADD_CUSTOM_LIBNAME "add_custom"
#endif

/* The kernel's real limit: one tile of 8 rows of 2048 floats. */
#define ROWS 8
#define COLS 2048
#define NUMEL (ROWS * COLS)

typedef struct add_args {
    const float *x;
    const float *y;
    float *z;
} add_args;

/* SPMD: block b of nb takes its slice of the 16,384 elements. */
static void add_block(int64_t b, int64_t nb, void *p)
{
    const add_args *a = p;
    int64_t lo = NUMEL * b / nb, hi = NUMEL * (b + 1) / nb;
    for (int64_t i = lo; i < hi; i++)
        a->z[i] = a->x[i] + a->y[i];
}

static inline bool is_tile(const cge_shape *s)
{
    return s->rank == 2 && s->dims[0] == ROWS && s->dims[1] == COLS;
}

static cge_status add_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0], *y = &ctx->inputs[1];
    char sx[CGE_SHAPE_STR_MAX], sy[CGE_SHAPE_STR_MAX];
    if (x->dtype != CGE_F32 || y->dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "inputs are %s and %s; this kernel supports only "
                              "float32", cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
#ifndef ADD_CUSTOM_BROKEN
    /* Dynamic dims are refused too: the kernel has exactly one shape. */
    for (int i = 0; i < 2; i++)
        if (!is_tile(&ctx->inputs[i].shape))
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "input %d is %s; this kernel supports only "
                                  "[8,2048]", i, cge_shape_str(&ctx->inputs[i].shape, sx, sizeof sx));
#else
    /* The bug under test: any shape is promised, as long as x and y agree. */
    if (!cge_shape_equal(&x->shape, &y->shape))
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "x is %s but y is %s",
                              cge_shape_str(&x->shape, sx, sizeof sx),
                              cge_shape_str(&y->shape, sy, sizeof sy));
#endif
    (void)sy;
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = x->shape;
    return CGE_OK;
}

static cge_status add_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
#ifndef ADD_CUSTOM_BROKEN
    /* The same constraint as meta, checked again: a caller that skipped meta
     * gets an error, not a write past its buffers. */
    for (int i = 0; i < 2; i++)
        if (ctx->inputs[i].dtype != CGE_F32 || !is_tile(&ctx->inputs[i].shape))
            return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input %d must be float32 [8,2048]", i);
    if (ctx->outputs[0].dtype != CGE_F32 || !is_tile(&ctx->outputs[0].shape) ||
        ctx->outputs[0].bytes < NUMEL * sizeof(float))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "output must be float32 [8,2048]");
#endif
    add_args a = {ctx->inputs[0].data, ctx->inputs[1].data, ctx->outputs[0].data};
    int64_t nb = ctx->num_threads > 0 ? ctx->num_threads : 1;
    if (nb > 16)
        nb = 16;
    return cge_launch(stream, add_block, nb, &a, sizeof a);
}

static const cge_arg_def inputs[] = {
    {.name = "x", .dtypes = CGE_DT(CGE_F32), .doc = "float32 [8,2048]"},
    {.name = "y", .dtypes = CGE_DT(CGE_F32), .doc = "float32 [8,2048]"},
};
static const cge_arg_def outputs[] = {{.name = "z", .doc = "x + y"}};
static const cge_kernel_def kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = add_launch, .inplace_input = 0},
};
static const cge_op_def ops[] = {
    {.name = "AddCustom", .domain = ADD_CUSTOM_DOMAIN, .since_version = 1,
     .inputs = inputs, .num_inputs = 2, .outputs = outputs, .num_outputs = 1,
     .infer = add_infer, .kernels = kernels, .num_kernels = 1,
     .doc = "z = x + y for float32 [8,2048] only"},
};
/* ONNX nodes of domain "custom" map 1:1 onto the operator. */
static const cge_converter_def converters[] = {
    {.front_end = "onnx", .source_op = "AddCustom", .source_domain = ADD_CUSTOM_DOMAIN,
     .since_version = 1, .target_op = "AddCustom", .target_domain = ADD_CUSTOM_DOMAIN},
};

static const cge_op_library library = {
    .api_version = ADD_CUSTOM_API_VERSION,
    .name = ADD_CUSTOM_LIBNAME,
    .ops = ops,
    .num_ops = 1,
    .converters = converters,
    .num_converters = 1,
};

__attribute__((visibility("default"))) const cge_op_library *cge_op_library_entry(void)
{
    return &library;
}
