/* The builtin operator families. Each family file defines its ops and returns
 * them here; builtin.c registers them all, as one library named "builtin",
 * through the same public API a custom library uses. */
#ifndef CGE_OPS_BUILTIN_H
#define CGE_OPS_BUILTIN_H

#include "cge/op.h"

/* Each returns a static array and writes its length. */
const cge_op_def *cge_ops_binary(int32_t *count);     /* Add Sub Mul Div Pow Mod, comparisons, And Or Xor, BitShift Bitwise*, PRelu, Where */
const cge_op_def *cge_ops_unary(int32_t *count);      /* Neg Abs Exp ... Gelu Cast Identity Floor ... Shrink Clip Dropout Hardmax */
const cge_op_def *cge_ops_matmul(int32_t *count);     /* MatMul Gemm */
const cge_op_def *cge_ops_softmax(int32_t *count);    /* Softmax LogSoftmax */
const cge_op_def *cge_ops_reduce(int32_t *count);     /* ReduceSum Mean Max Min Prod L1 L2 LogSum LogSumExp SumSquare ArgMax ArgMin */
const cge_op_def *cge_ops_shape(int32_t *count);      /* Reshape Flatten Squeeze Unsqueeze Expand Shape Constant */
const cge_op_def *cge_ops_transform(int32_t *count);  /* Transpose Concat Split Slice Gather */
const cge_op_def *cge_ops_conv(int32_t *count);       /* Conv ConvTranspose */
const cge_op_def *cge_ops_pool(int32_t *count);       /* MaxPool AveragePool LpPool Global*Pool */
const cge_op_def *cge_ops_norm(int32_t *count);       /* BatchNormalization InstanceNormalization LayerNormalization LRN */
const cge_op_def *cge_ops_resize(int32_t *count);     /* Resize Upsample */
const cge_op_def *cge_ops_pad(int32_t *count);        /* Pad */
const cge_op_def *cge_ops_rnn(int32_t *count);        /* RNN GRU LSTM */
const cge_op_def *cge_ops_index(int32_t *count);      /* GatherElements GatherND ScatterND ScatterElements OneHot NonZero TopK CumSum Trilu Compress */
const cge_op_def *cge_ops_generate(int32_t *count);   /* Range ConstantOfShape EyeLike Tile Size DepthToSpace SpaceToDepth ReverseSequence */
const cge_op_def *cge_ops_variadic(int32_t *count);   /* Max Min Sum Mean */
const cge_op_def *cge_ops_quant(int32_t *count);   /* QuantizeLinear DequantizeLinear DynamicQuantizeLinear MatMulInteger ConvInteger QLinearMatMul QLinearConv */
const cge_op_def *cge_ops_spectral(int32_t *count); /* DFT STFT HannWindow HammingWindow BlackmanWindow MelWeightMatrix */
const cge_op_def *cge_ops_einsum(int32_t *count);  /* Einsum */
const cge_op_def *cge_ops_loss(int32_t *count);    /* NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss */
const cge_op_def *cge_ops_control_flow(int32_t *count); /* If Loop Scan */
const cge_op_def *cge_ops_training(int32_t *count); /* Adagrad Momentum Adam (ai.onnx.preview.training) */
const cge_op_def *cge_ops_misc(int32_t *count);    /* CastLike MVN Det GridSample MaxUnpool RoiAlign NonMaxSuppression Unique TfIdfVectorizer Random* Bernoulli Multinomial */

/* Register the builtin library once (thread-safe; called by every lookup). */
void cge_ops_builtin_init(void);

#endif
