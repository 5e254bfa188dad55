/* A custom operator library for the registry tests, built as a shared object
 * (and once more declaring a wrong API version). Domain "test":
 *   TestScale: y = x * scale (float32 kernel; its schema deliberately also
 *              admits float64 so that tests reach the [engine] layer);
 *   TestFail:  meta passes, the kernel refuses at launch ([kernel] layer). */
#include <string.h>

#include "cge/op.h"

#ifndef TEST_OPLIB_API_VERSION
#define TEST_OPLIB_API_VERSION CGE_OP_API_VERSION
#endif
#ifndef TEST_OPLIB_NAME
#define TEST_OPLIB_NAME "test_oplib"
#endif

typedef struct scale_args {
    const float *x;
    float *y;
    int64_t n;
    float scale;
} scale_args;

static void scale_block(int64_t b, int64_t nb, void *p)
{
    scale_args *a = p;
    int64_t lo = a->n * b / nb, hi = a->n * (b + 1) / nb;
    for (int64_t i = lo; i < hi; i++)
        a->y[i] = a->x[i] * a->scale;
}

static cge_status same_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status scale_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    scale_args a = {
        .x = ctx->inputs[0].data,
        .y = ctx->outputs[0].data,
        .n = cge_shape_numel(&ctx->inputs[0].shape),
        .scale = cge_attrs_get_float(ctx->attrs, "scale", 1.0f),
    };
    if (a.n == 0)
        return CGE_OK;
    return cge_launch(stream, scale_block, a.n > 4 ? 4 : 1, &a, sizeof a);
}

static cge_status fail_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    (void)stream;
    return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "this kernel refuses every input");
}

static const cge_arg_def x_in[] = {{.name = "x", .dtypes = CGE_DT(CGE_F32) | CGE_DT(CGE_F64)}};
static const cge_arg_def y_out[] = {{.name = "y"}};
static const cge_attr_def scale_attrs[] = {
    {.name = "scale", .kind = CGE_ATTR_FLOAT, .default_f = 1.0f},
};
static const cge_kernel_def scale_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = scale_launch, .inplace_input = 0},
};
static const cge_kernel_def fail_kernels[] = {
    {.engine = "cpu", .launch = fail_launch, .inplace_input = -1},
};

static const cge_op_def ops[] = {
    {.name = "TestScale", .domain = "test", .since_version = 1, .inputs = x_in, .num_inputs = 1,
     .outputs = y_out, .num_outputs = 1, .attrs = scale_attrs, .num_attrs = 1,
     .infer = same_infer, .kernels = scale_kernels, .num_kernels = 1},
    {.name = "TestFail", .domain = "test", .since_version = 1, .inputs = x_in, .num_inputs = 1,
     .outputs = y_out, .num_outputs = 1, .infer = same_infer, .kernels = fail_kernels,
     .num_kernels = 1},
};

static const cge_op_library library = {
    .api_version = TEST_OPLIB_API_VERSION,
    .name = TEST_OPLIB_NAME,
    .ops = ops,
    .num_ops = 2,
};

__attribute__((visibility("default"))) const cge_op_library *cge_op_library_entry(void)
{
    return &library;
}
