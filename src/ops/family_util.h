/* What the smaller operator family files share: their block size and index
 * dtype set, the float-input check of their metas, the node label of their
 * kernels' messages, a product of dims, and the macros of their op tables. */
#ifndef CGE_OPS_FAMILY_UTIL_H
#define CGE_OPS_FAMILY_UTIL_H

#include <stdio.h>

#include "cge/op.h"

/* Elements (or comparable units of work) per block below which work stays
 * in one block: smaller blocks cost more to schedule than they save. */
#define CGE__MIN_BLOCK ((int64_t)1 << 14)

/* Index, axis and count inputs. */
#define CGE__IDX_DT (CGE_DT(CGE_I32) | CGE_DT(CGE_I64))

/* A [meta] dtype error unless input i is a float type; `what` names it. */
static inline cge_status cge__meta_need_float(cge_infer_ctx *ctx, int32_t i, const char *what)
{
    if (!cge_dtype_is_float(ctx->inputs[i].dtype))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "%s is %s; it must be a float type", what,
                              cge_dtype_name(ctx->inputs[i].dtype));
    return CGE_OK;
}

/* "OpType 'node'", for messages a kernel's blocks report through
 * cge_kernel_fail: the blocks run without the kernel context, so the label
 * is copied into their arguments at launch. */
static inline void cge__kernel_label(const cge_kernel_ctx *ctx, char *buf, size_t size)
{
    snprintf(buf, size, "%s '%s'", ctx->op_type ? ctx->op_type : "op",
             ctx->node_name ? ctx->node_name : "");
}

/* dims[lo] * ... * dims[hi - 1] (1 when empty). */
static inline int64_t cge__dims_prod(const int64_t *dims, int32_t lo, int32_t hi)
{
    int64_t p = 1;
    for (int32_t i = lo; i < hi; i++)
        p *= dims[i];
    return p;
}

/* One cpu kernel for dtypes DT (0: any) with an optional workspace function
 * and the input whose buffer output 0 may take (-1: none). */
#define CGE__KDEF(DT, FN, WS, INPLACE)                                                     \
    {{.engine = "cpu", .dtypes = DT, .launch = FN, .workspace_size = WS,                   \
      .inplace_input = INPLACE}}

/* An operator of the default (ONNX) domain with one kernel table K. */
#define CGE__OPDEF(NAME, SINCE, IN, NIN, OUT, NOUT, ATTRS, NATTRS, INFER, K, DOC)          \
    {                                                                                      \
        .name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE, .inputs = IN,  \
        .num_inputs = NIN, .outputs = OUT, .num_outputs = NOUT, .attrs = ATTRS,            \
        .num_attrs = NATTRS, .infer = INFER, .kernels = K, .num_kernels = 1, .doc = DOC    \
    }

/* The length of a static array of attribute definitions. */
#define CGE__NATTR(A) ((int32_t)(sizeof A / sizeof A[0]))

#endif
