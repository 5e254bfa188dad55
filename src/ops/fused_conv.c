/* cge.fused FusedConv's schema: Y = act(Conv(X, W, B) + Z) (or ConvTranspose),
 * made by the compiler's fuse_conv_activation pass; its meta and kernels share
 * Conv's paths in conv.c (conv_fused.h). */
#include "cge/fused_ops.h"
#include "ops/family_util.h"
#include "ops/builtin.h"
#include "ops/conv_fused.h"

static const cge_arg_def fconv_in[] = {
    {"X", 0, CGE_DT(CGE_F32), "[N, C, D1, ...] (1 to 3 spatial dims)"},
    {"W", 0, CGE_DT(CGE_F32), "[M, C/group, k1, ...] ([C, M/group, k1, ...] transposed)"},
    {"B", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "[M] bias"},
    {"Z", CGE_ARG_OPTIONAL, CGE_DT(CGE_F32), "addend of Y's shape (a residual)"},
};
static const cge_arg_def fconv_out[] = {{"Y", 0, CGE_DT(CGE_F32), "act(Conv(X, W, B) + Z)"}};
static const cge_attr_def fconv_attrs[] = {
    CGE__CONV_ATTR_DEFS,
    {.name = "activation", .kind = CGE_ATTR_STRING, .default_s = "none",
     .doc = "none relu leaky_relu clip sigmoid tanh silu hardsigmoid hardswish gelu"},
    {.name = "alpha", .kind = CGE_ATTR_FLOAT, .default_f = 0.01f,
     .doc = "leaky_relu slope; hardsigmoid / hardswish alpha"},
    {.name = "beta", .kind = CGE_ATTR_FLOAT, .default_f = 0.5f,
     .doc = "hardsigmoid / hardswish beta"},
    {.name = "min", .kind = CGE_ATTR_FLOAT, .doc = "clip lower bound"},
    {.name = "max", .kind = CGE_ATTR_FLOAT, .doc = "clip upper bound"},
    {.name = "w_const", .kind = CGE_ATTR_INT, .doc = "W is a graph constant"},
    {.name = "channels_last", .kind = CGE_ATTR_INT,
     .doc = "X, Z and Y are in NHWC format (set by the layout pass; needs oneDNN)"},
    {.name = "precision", .kind = CGE_ATTR_STRING, .default_s = "fp32",
     .doc = "fp32, or bf16: bfloat16 X and W, float32 accumulation (set by the precision "
            "pass; oneDNN's kernels only, others stay float32)"},
    {.name = "transpose", .kind = CGE_ATTR_INT,
     .doc = "a ConvTranspose: W is [C, M/group, k1, ...], the attributes below apply"},
    {.name = "output_padding", .kind = CGE_ATTR_INTS, .doc = "ConvTranspose's"},
    {.name = "output_shape", .kind = CGE_ATTR_INTS, .doc = "ConvTranspose's"},
};
static const cge_kernel_def fconv_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge__fused_conv_launch,
     .workspace_size = cge__fused_conv_workspace, .prepare = cge__fused_conv_prepare,
     .release = cge__fused_conv_release, .inplace_input = -1}};

static const cge_op_def fconv_ops[] = {
    {.name = "FusedConv", .domain = CGE_DOMAIN_FUSED, .since_version = 1, .inputs = fconv_in,
     .num_inputs = 4, .outputs = fconv_out, .num_outputs = 1, .attrs = fconv_attrs,
     .num_attrs = CGE__NATTR(fconv_attrs), .infer = cge__fused_conv_infer, .kernels = fconv_kernels, .num_kernels = 1,
     .doc = "convolution with bias, a residual addend and an activation applied to its output"},
};

const cge_op_def *cge__ops_fused_conv(int32_t *count)
{
    *count = (int32_t)(sizeof fconv_ops / sizeof fconv_ops[0]);
    return fconv_ops;
}
