/* The schemas of the cge.fused operators over channels-last (NHWC) activations
 * that the compiler's layout passes make: the ChannelsLast* operators and
 * LayoutView. */
#include <stdio.h>

#include "cge/fused_ops.h"
#include "ops/affine_nhwc.h"
#include "ops/builtin.h"
#include "ops/norm_nhwc.h"
#include "ops/pool_nhwc.h"
#include "ops/resize_nhwc.h"
#include "ops/transform_nhwc.h"

/* Their meta and kernels are elsewhere: ChannelsLastPool's in pool_nhwc.c,
 * ChannelsLastConcat's, ChannelsLastSplit's, ChannelsLastShuffle's and
 * LayoutView's in transform.c,
 * ChannelsLastAffine's and ChannelsLastScale's in affine_nhwc.c,
 * ChannelsLastResize's in resize.c, ChannelsLastGroupNorm's in norm.c. */

static const cge_arg_def clpool_in[] = {{"X", 0, CGE_DT(CGE_F32), "[N, C, D1, ...] in NHWC format"}};
static const cge_arg_def clpool_out[] = {{"Y", 0, CGE_DT(CGE_F32), "pooled, in NHWC format"}};
static const cge_attr_def clpool_attrs[] = {
    {.name = "mode", .kind = CGE_ATTR_STRING, .required = true,
     .doc = "max, avg, global_max or global_avg"},
    {"auto_pad", CGE_ATTR_STRING, false, 0, 0.0f, "NOTSET", "NOTSET, SAME_UPPER, SAME_LOWER, VALID"},
    {"ceil_mode", CGE_ATTR_INT, false, 0, 0.0f, NULL, "ceil for output sizes"},
    {"count_include_pad", CGE_ATTR_INT, false, 0, 0.0f, NULL, "pads count in the divisor"},
    {"dilations", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "default 1"},
    {"kernel_shape", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "window size (window modes)"},
    {"pads", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "begins then ends, default 0"},
    {"strides", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "default 1"},
};
static const cge_kernel_def clpool_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge__pool_nhwc_launch,
     .inplace_input = -1}};

/* Concat's and Split's meta with what the NHWC kernels need on top: a
 * channel axis (rank 3 or more) and at most CGE_CHANNELS_LAST_MAX_PARTS parts,
 * which the kernels check at launch too. */
static cge_status nhwc_parts_check(cge_infer_ctx *ctx, const cge_tensor_desc *whole,
                                   int32_t parts)
{
    if (whole->shape.rank < 3) {
        char s[CGE_SHAPE_STR_MAX];
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "%s has no channel axis: NHWC data has rank 3 "
                              "or more", cge_shape_str(&whole->shape, s, sizeof s));
    }
    if (parts > CGE_CHANNELS_LAST_MAX_PARTS)
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED, "%d parts; at most %d in NHWC",
                              (int)parts, CGE_CHANNELS_LAST_MAX_PARTS);
    return CGE_OK;
}

static cge_status clcat_infer(cge_infer_ctx *ctx)
{
    cge_status st = ctx->num_inputs > 0 ? nhwc_parts_check(ctx, &ctx->inputs[0], ctx->num_inputs)
                                        : CGE_OK;
    return st ? st : cge__concat_infer(ctx);
}

/* The layout pass makes this node from a Split that meta already accepted,
 * and drops Split-18's num_outputs on the way: an axis that n outputs do not
 * divide evenly can then only come from num_outputs, so its pieces are
 * num_outputs' (ceil(dim / n), the last smaller). */
static cge_status clsplit_infer(cge_infer_ctx *ctx)
{
    cge_status st = ctx->num_inputs > 0 ? nhwc_parts_check(ctx, &ctx->inputs[0], ctx->num_outputs)
                                        : CGE_OK;
    return st ? st : cge__split_infer_pieces(ctx, true);
}

static const cge_arg_def clcat_in[] = {
    {"inputs", CGE_ARG_VARIADIC, CGE_DT_ALL, "tensors of one dtype and rank, in NHWC format"}};
static const cge_arg_def clcat_out[] = {{"concat_result", 0, CGE_DT_ALL, "joined, in NHWC format"}};
static const cge_attr_def clcat_attrs[] = {
    {"axis", CGE_ATTR_INT, true, 0, 0.0f, NULL, "logical (NCHW) axis to join along"}};
static const cge_kernel_def clcat_kernels[] = {
    {.engine = "cpu", .launch = cge__concat_nhwc_launch, .inplace_input = -1}};
static const cge_arg_def clsplit_in[] = {
    {"input", 0, CGE_DT_ALL, "tensor to split, in NHWC format"},
    {"split", CGE_ARG_OPTIONAL, CGE_DT(CGE_I64), "sizes of the outputs along axis"}};
static const cge_arg_def clsplit_out[] = {
    {"outputs", CGE_ARG_VARIADIC, CGE_DT_ALL, "the pieces, in NHWC format"}};
static const cge_attr_def clsplit_attrs[] = {
    {"axis", CGE_ATTR_INT, false, 0, 0.0f, NULL, "logical (NCHW) axis to split"}};
static const cge_kernel_def clsplit_kernels[] = {
    {.engine = "cpu", .launch = cge__split_nhwc_launch, .inplace_input = -1}};

static const cge_arg_def claff_in[] = {
    {"X", 0, CGE_DT(CGE_F32), "[N, C, ...] in NHWC format"},
    {"A", 0, CGE_DT(CGE_F64), "[C] scale"},
    {"B", 0, CGE_DT(CGE_F64), "[C] shift"}};
static const cge_arg_def claff_out[] = {{"Y", 0, CGE_DT(CGE_F32), "X * A + B, in NHWC format"}};
static const cge_attr_def claff_attrs[] = {
    {"relu", CGE_ATTR_INT, false, 0, 0.0f, NULL, "1: Relu applied to the result"}};
static const cge_kernel_def claff_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge__affine_nhwc_launch,
     .inplace_input = 0}};

static const cge_arg_def lview_in[] = {{"data", 0, CGE_DT_ALL, "tensor"}};
static const cge_arg_def lview_out[] = {{"transposed", 0, CGE_DT_ALL, "the same bytes"}};
static const cge_attr_def lview_attrs[] = {
    {"perm", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "the Transpose's permutation"},
    {"to", CGE_ATTR_INT, false, 0, 0.0f, NULL, "cge_format of the output: 0 plain, 1 NHWC"}};
static const cge_kernel_def lview_kernels[] = {
    {.engine = "cpu", .launch = cge__layout_view_launch, .inplace_input = -1}};

/* Resize's schema and meta, less the dtypes: the NHWC kernel is float32's. */
static cge_status clrz_infer(cge_infer_ctx *ctx)
{
    if (ctx->num_inputs > 0 && ctx->inputs[0].dtype != CGE_F32)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "X is %s; the NHWC kernel takes float32",
                              cge_dtype_name(ctx->inputs[0].dtype));
    return cge__resize_infer(ctx);
}

static const cge_arg_def clrz_out[] = {{"Y", 0, CGE_DT(CGE_F32), "resized, in NHWC format"}};
static const cge_kernel_def clrz_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge__resize_nhwc_launch,
     .workspace_size = cge__resize_workspace, .inplace_input = -1}};

static const cge_arg_def clscale_in[] = {
    {"X", 0, CGE_DT(CGE_F32), "[N, C, ...] in NHWC format"},
    {"S", 0, CGE_DT(CGE_F32), "[1 or N, C, 1, ...] gate"}};
static const cge_arg_def clscale_out[] = {{"Y", 0, CGE_DT(CGE_F32), "X * S, in NHWC format"}};
static const cge_kernel_def clscale_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge__scale_nhwc_launch,
     .inplace_input = 0}};

static const cge_arg_def clgn_in[] = {
    {"X", 0, CGE_DT(CGE_F32), "[N, C, D1, ...] in NHWC format"},
    {"scale", 0, CGE_DT(CGE_F32), "[G], G dividing C"},
    {"bias", 0, CGE_DT(CGE_F32), "[G]"},
    {"A", CGE_ARG_OPTIONAL, CGE_DT(CGE_F64), "[C] epilogue scale (a ChannelsLastAffine's)"},
    {"B", CGE_ARG_OPTIONAL, CGE_DT(CGE_F64), "[C] epilogue shift"}};
static const cge_arg_def clgn_out[] = {{"Y", 0, CGE_DT(CGE_F32), "normalised, in NHWC format"}};
static const cge_attr_def clgn_attrs[] = {
    {"epsilon", CGE_ATTR_FLOAT, false, 0, 1e-5f, NULL, "added to the variance"},
    {"activation", CGE_ATTR_STRING, false, 0, 0.0f, "none", "none, relu or gelu (exact), last"}};
static const cge_kernel_def clgn_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = cge__group_norm_nhwc_launch,
     .workspace_size = cge__group_norm_nhwc_workspace, .inplace_input = 0}};

static const cge_arg_def clshuf_in[] = {{"X", 0, CGE_DT_ALL, "[N, C, ...] in NHWC format"}};
static const cge_arg_def clshuf_out[] = {
    {"Y", 0, CGE_DT_ALL, "channel c * groups + i is X's i * C / groups + c; NHWC format"}};
static const cge_attr_def clshuf_attrs[] = {
    {"groups", CGE_ATTR_INT, true, 0, 0.0f, NULL, "the shuffle's groups, dividing C"}};
static const cge_kernel_def clshuf_kernels[] = {
    {.engine = "cpu", .launch = cge__channel_shuffle_nhwc_launch, .inplace_input = -1}};

static const cge_op_def cl_ops[] = {
    {.name = "ChannelsLastPool", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = clpool_in, .num_inputs = 1, .outputs = clpool_out, .num_outputs = 1,
     .attrs = clpool_attrs, .num_attrs = 8, .infer = cge__pool_nhwc_infer,
     .kernels = clpool_kernels, .num_kernels = 1,
     .doc = "max / average / global pooling of NHWC activations (made by the layout passes)"},
    {.name = "ChannelsLastConcat", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = clcat_in, .num_inputs = 1, .outputs = clcat_out, .num_outputs = 1,
     .attrs = clcat_attrs, .num_attrs = 1, .infer = clcat_infer, .kernels = clcat_kernels,
     .num_kernels = 1, .doc = "Concat of NHWC activations (made by the layout passes)"},
    {.name = "ChannelsLastSplit", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = clsplit_in, .num_inputs = 2, .outputs = clsplit_out, .num_outputs = 1,
     .attrs = clsplit_attrs, .num_attrs = 1, .infer = clsplit_infer, .kernels = clsplit_kernels,
     .num_kernels = 1, .doc = "Split of NHWC activations (made by the layout passes)"},
    {.name = "ChannelsLastAffine", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = claff_in, .num_inputs = 3, .outputs = claff_out, .num_outputs = 1,
     .attrs = claff_attrs, .num_attrs = 1, .infer = cge__affine_nhwc_infer,
     .kernels = claff_kernels, .num_kernels = 1,
     .doc = "per-channel scale and shift of NHWC activations (an inference "
            "BatchNormalization, made by the layout passes)"},
    {.name = "LayoutView", .domain = CGE_DOMAIN_FUSED, .since_version = 1, .inputs = lview_in,
     .num_inputs = 1, .outputs = lview_out, .num_outputs = 1, .attrs = lview_attrs,
     .num_attrs = 2, .infer = cge__transpose_infer, .kernels = lview_kernels, .num_kernels = 1,
     .doc = "a Transpose between NHWC bytes and the plain transposed tensor: a view "
            "(made by the layout passes)"},
    {.name = "ChannelsLastResize", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = cge__resize_inputs, .num_inputs = CGE_RESIZE_NUM_INPUTS, .outputs = clrz_out,
     .num_outputs = 1, .attrs = cge__resize_nhwc_attrs, .num_attrs = CGE_RESIZE_NUM_ATTRS + 1,
     .infer = clrz_infer, .kernels = clrz_kernels, .num_kernels = 1,
     .doc = "Resize of NHWC activations, channels kept (made by the layout passes)"},
    {.name = "ChannelsLastScale", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = clscale_in, .num_inputs = 2, .outputs = clscale_out, .num_outputs = 1,
     .infer = cge__scale_nhwc_infer, .kernels = clscale_kernels, .num_kernels = 1,
     .doc = "NHWC activations times a per-image, per-channel gate (squeeze-excitation; "
            "made by the layout passes)"},
    {.name = "ChannelsLastGroupNorm", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = clgn_in, .num_inputs = 5, .outputs = clgn_out, .num_outputs = 1,
     .attrs = clgn_attrs, .num_attrs = 2, .infer = cge__group_norm_nhwc_infer,
     .kernels = clgn_kernels, .num_kernels = 1,
     .doc = "group normalisation of NHWC activations (an exported GroupNorm: Reshape, "
            "InstanceNormalization, Reshape; made by the layout passes)"},
    {.name = "ChannelsLastShuffle", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = clshuf_in, .num_inputs = 1, .outputs = clshuf_out, .num_outputs = 1,
     .attrs = clshuf_attrs, .num_attrs = 1, .infer = cge__channel_shuffle_infer,
     .kernels = clshuf_kernels, .num_kernels = 1,
     .doc = "channel shuffle of NHWC activations (an exported ShuffleNet shuffle: Reshape, "
            "Transpose, Reshape; made by the layout passes)"},
};

const cge_op_def *cge__ops_channels_last(int32_t *count)
{
    *count = (int32_t)(sizeof cl_ops / sizeof cl_ops[0]);
    return cl_ops;
}
