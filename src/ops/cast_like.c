/* CastLike: Cast to the dtype of a second input. Its kernel hands the work to
 * the registered Cast kernel (unary.c), so that both follow one set of
 * conversion rules. */
#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/string_util.h"

static cge_status castlike_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = ctx->inputs[1].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status castlike_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    if (ctx->num_inputs < 1 || ctx->num_outputs < 1)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "expects input, target_type, output");
    const cge_op_def *cast = cge_op_find(CGE_DOMAIN_DEFAULT, "Cast", 0);
    const cge_kernel_def *k = cast ? cge_op_find_kernel(cast, "cpu", ctx->inputs[0].dtype) : NULL;
    if (!k)
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "no Cast kernel to delegate to");
    cge_kernel_ctx c = *ctx;
    c.num_inputs = 1;
    c.num_outputs = 1;
    c.workspace = NULL;
    c.workspace_size = 0;
    /* Cast's state is its string store (a cast to string); CastLike's
     * prepare made the same one. */
    return k->launch(&c, stream);
}

/* ---- definitions ---------------------------------------------------------------------- */

static const cge_kernel_def k_castlike[] = {
    {.engine = "cpu", .dtypes = CGE_DT_ALL | CGE_DT_STRING, .launch = castlike_launch,
     .prepare = cge__cast_string_prepare, .release = cge__cast_string_release, .inplace_input = -1}};

static const cge_arg_def castlike_in[] = {
    {"input", 0, CGE_DT_ALL | CGE_DT_STRING, "tensor to convert"},
    {"target_type", 0, CGE_DT_ALL | CGE_DT_STRING, "only its dtype is used"},
};
static const cge_arg_def castlike_out[] = {
    {"output", 0, CGE_DT_ALL | CGE_DT_STRING, "input in target's dtype"}};

static const cge_op_def cast_like_ops[] = {
    CGE__OPDEF("CastLike", 15, castlike_in, 2, castlike_out, 1, NULL, 0, castlike_infer,
               k_castlike, "Cast to the dtype of the second input (Cast's conversion rules)."),
};

const cge_op_def *cge__ops_cast_like(int32_t *count)
{
    *count = (int32_t)(sizeof cast_like_ops / sizeof cast_like_ops[0]);
    return cast_like_ops;
}
