/* The builtin operator families. Each family file defines its ops and returns
 * them here; builtin.c registers them all, as one library named "builtin",
 * through the same public API a custom library uses. */
#ifndef CGE_OPS_BUILTIN_H
#define CGE_OPS_BUILTIN_H

#include "cge/op.h"

/* Each returns a static array and writes its length. */
const cge_op_def *cge__ops_binary(int32_t *count);     /* Add Sub Mul Div Pow Mod, comparisons, And Or Xor, BitShift Bitwise*, PRelu, Where */
const cge_op_def *cge__ops_unary(int32_t *count);      /* Neg Abs Exp ... Gelu Cast Identity Floor ... Shrink Clip Dropout Hardmax */
const cge_op_def *cge__ops_matmul(int32_t *count);     /* MatMul Gemm */
const cge_op_def *cge__ops_softmax(int32_t *count);    /* Softmax LogSoftmax */
const cge_op_def *cge__ops_reduce(int32_t *count);     /* ReduceSum Mean Max Min Prod L1 L2 LogSum LogSumExp SumSquare ArgMax ArgMin */
const cge_op_def *cge__ops_shape(int32_t *count);      /* Reshape Flatten Squeeze Unsqueeze Expand Shape Constant */
const cge_op_def *cge__ops_transform(int32_t *count);  /* Transpose Concat Split Slice Gather */
const cge_op_def *cge__ops_conv(int32_t *count);       /* Conv ConvTranspose */
const cge_op_def *cge__ops_pool(int32_t *count);       /* MaxPool AveragePool LpPool Global*Pool */
const cge_op_def *cge__ops_norm(int32_t *count);       /* BatchNormalization InstanceNormalization LayerNormalization LRN MeanVarianceNormalization */
const cge_op_def *cge__ops_resize(int32_t *count);     /* Resize Upsample */
const cge_op_def *cge__ops_pad(int32_t *count);        /* Pad */
const cge_op_def *cge__ops_rnn(int32_t *count);        /* RNN GRU LSTM */
const cge_op_def *cge__ops_gather_scatter(int32_t *count); /* GatherElements GatherND ScatterND ScatterElements OneHot NonZero Compress */
const cge_op_def *cge__ops_sort_scan(int32_t *count);  /* TopK CumSum Unique */
const cge_op_def *cge__ops_generate(int32_t *count);   /* Range ConstantOfShape EyeLike Trilu Tile Size DepthToSpace SpaceToDepth ReverseSequence */
const cge_op_def *cge__ops_variadic(int32_t *count);   /* Max Min Sum Mean */
const cge_op_def *cge__ops_quant(int32_t *count);   /* QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger ConvInteger QLinearMatMul QLinearConv, cge.fused QConv QMatMul */
const cge_op_def *cge__ops_spectral(int32_t *count); /* DFT STFT HannWindow HammingWindow BlackmanWindow MelWeightMatrix */
const cge_op_def *cge__ops_einsum(int32_t *count);  /* Einsum */
const cge_op_def *cge__ops_loss(int32_t *count);    /* NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss */
const cge_op_def *cge__ops_control_flow(int32_t *count); /* If Loop Scan SequenceMap */
/* How many If/Loop/Scan/SequenceMap bodies ran for real (not meta only) in
 * this process: tests check that a measured branch is not run again. */
long long cge__control_flow_body_runs(void);
/* Allocations If bodies made (value buffers, workspaces, tables, devices,
 * measured outputs' copies): a run at sizes seen before makes none. */
long long cge__control_flow_body_allocs(void);
/* Frees the If bodies' buffers kept for later runs (those not running now). */
void cge__control_flow_trim(void);
const cge_op_def *cge__ops_training(int32_t *count); /* Adagrad Momentum Adam (ai.onnx.preview.training) */
const cge_op_def *cge__ops_cast_like(int32_t *count); /* CastLike */
const cge_op_def *cge__ops_linalg(int32_t *count);  /* Det */
const cge_op_def *cge__ops_sampling(int32_t *count); /* GridSample MaxUnpool */
const cge_op_def *cge__ops_detection(int32_t *count); /* RoiAlign NonMaxSuppression */
const cge_op_def *cge__ops_text(int32_t *count);    /* TfIdfVectorizer */
const cge_op_def *cge__ops_string_normalizer(int32_t *count); /* StringNormalizer */
const cge_op_def *cge__ops_random(int32_t *count);  /* RandomUniform(Like) RandomNormal(Like) Bernoulli Multinomial */
/* cge's own operators (cge/fused_ops.h), builtins like the rest: */
const cge_op_def *cge__ops_fused_elementwise(int32_t *count); /* cge.fused ElementwiseChain */
const cge_op_def *cge__ops_fused_matmul(int32_t *count); /* cge.fused FusedMatMul */
const cge_op_def *cge__ops_fused_conv(int32_t *count); /* cge.fused FusedConv */
const cge_op_def *cge__ops_attention(int32_t *count); /* cge.fused Attention */
const cge_op_def *cge__ops_qlinear(int32_t *count); /* cge.fused QAdd QMul QLookup QPool */
const cge_op_def *cge__ops_matmul_bf16(int32_t *count); /* cge.fused MatMulBF16 */
const cge_op_def *cge__ops_matmul_nbits(int32_t *count); /* com.microsoft MatMulNBits */
const cge_op_def *cge__ops_channels_last(int32_t *count); /* cge.fused ChannelsLast* LayoutView */
const cge_op_def *cge__ops_copy(int32_t *count); /* cge Copy Reorder */
const cge_op_def *cge__ops_sequence(int32_t *count); /* SequenceEmpty Construct At Length Insert Erase, SplitToSequence ConcatFromSequence */
const cge_op_def *cge__ops_optional(int32_t *count); /* Optional OptionalHasElement OptionalGetElement */

/* Register the builtin library once (thread-safe; called by every lookup). */
void cge__ops_builtin_init(void);

#endif
