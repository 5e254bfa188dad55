/* The contract of cge's own operators: domain "cge.fused" (what the compiler's
 * fusion and layout passes put in a graph) and domain "cge" (the border
 * conversions partition inserts). They are builtin operators like any other. */
#ifndef CGE_FUSED_OPS_H
#define CGE_FUSED_OPS_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CGE_DOMAIN_FUSED "cge.fused"
#define CGE_DOMAIN_CONVERSION "cge"

/* Operators of CGE_DOMAIN_FUSED, all version 1 (cge_op_find has each
 * schema's inputs and attribute docs):
 *
 *   ElementwiseChain   float32 inputs of one shape or one element; runs the
 *                      bytecode below ("program", "out_regs", "imm").
 *   FusedMatMul        act(A B + bias): "activation" (none relu sigmoid tanh
 *                      gelu gelu_tanh leaky_relu clip), "alpha", "min",
 *                      "max", "trans_b", "b_const" (B packed once),
 *                      "b_cols" ([lo, hi]: B and bias are those columns
 *                      of the inputs; one piece of a packed projection).
 *   FusedConv          act(Conv(X, W, B) + Z): Conv's attributes plus
 *                      "activation" (none relu leaky_relu clip sigmoid tanh),
 *                      "alpha", "min", "max", "w_const", "channels_last".
 *   SkipLayerNorm      Y = LayerNormalization(A + B) over the last axis
 *                      (Scale, optional Bias [D]; "epsilon"); optional
 *                      output S = A + B.
 *
 * and, over channels-last (NHWC) activations whose shapes and axes stay the
 * logical NCHW ones:
 *
 *   ChannelsLastPool   "mode" (max avg global_max global_avg) and the pool
 *                      attributes of MaxPool / AveragePool.
 *   ChannelsLastConcat, ChannelsLastSplit   Concat / Split ("axis").
 *   ChannelsLastAffine X * A[c] + B[c] (A, B float64 [C]), "relu".
 *   ChannelsLastScale  X * S, S [N or 1, C, 1, ...].
 *   ChannelsLastResize Resize's inputs and attributes, channels kept.
 *   LayoutView         a Transpose ("perm", "to": cge_format of the output)
 *                      whose output has the input's bytes.
 *
 * Operators of CGE_DOMAIN_CONVERSION: Copy (between memory spaces) and
 * Reorder ("from", "to": cge_format of input and output). */

/* ElementwiseChain's bytecode: 4 int64 per instruction (op, dst, a, b) in
 * its "program" attribute. Registers 0 .. num_inputs-1 hold the inputs and
 * instruction k writes register num_inputs + k (dst must say so); a and b
 * name earlier registers, except that for LEAKY b indexes "imm" (alpha) and
 * for CLIP b indexes (lo, hi) in "imm". "out_regs" names each output's
 * register. The element functions are the unfused kernels', so a chain gives
 * the same bits as the nodes it replaces. */
typedef enum cge_ew_op {
    CGE_EW_ADD = 1, CGE_EW_SUB, CGE_EW_MUL, CGE_EW_DIV,
    CGE_EW_NEG, CGE_EW_ABS, CGE_EW_EXP, CGE_EW_LOG, CGE_EW_SQRT, CGE_EW_RECIP, CGE_EW_RELU,
    CGE_EW_LEAKY, CGE_EW_SIGMOID, CGE_EW_TANH, CGE_EW_ERF, CGE_EW_GELU, CGE_EW_GELU_TANH,
    CGE_EW_COPY, CGE_EW_CLIP,
    CGE_EW_COUNT
} cge_ew_op;

/* ElementwiseChain's limits: meta refuses a chain beyond them. */
#define CGE_EW_MAX_REGS 32         /* inputs + instructions */
#define CGE_EW_MAX_INPUTS 16
#define CGE_EW_MAX_OUTPUTS 8
#define CGE_EW_MAX_INSTRUCTIONS 48
#define CGE_EW_MAX_IMM 32

/* Parts one ChannelsLastConcat may join or one ChannelsLastSplit split into. */
#define CGE_CHANNELS_LAST_MAX_PARTS 128

/* Whether FusedConv takes channels_last = 1 (X, Z and Y in NHWC format,
 * float32, constant W) in this build: it needs oneDNN. The layout passes
 * make channels-last operators only when it does. */
bool cge_fused_conv_channels_last_available(void);

#ifdef __cplusplus
}
#endif
#endif
