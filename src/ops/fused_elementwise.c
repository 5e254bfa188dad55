/* cge.fused ElementwiseChain: a float32 bytecode interpreter (cge/fused_ops.h
 * has the bytecode) that reads each input once and writes each output once,
 * a tile of registers at a time; the compiler's fuse_elementwise pass makes it. */
#include <math.h>
#include <string.h>

#include "base/cpu_isa.h"
#include "cge/fused_ops.h"
#include "ops/builtin.h"
#include "ops/fast_math.h"
#include "ops/fused_act.h"
#include "ops/kernel_util.h"

/* Elements per register: a tile of every register stays in L1. */
#define EW_TILE 128

typedef struct ew_args {
    const float *in[CGE_EW_MAX_INPUTS];
    float *out[CGE_EW_MAX_OUTPUTS];
    int64_t numel;
    int32_t num_in, num_out, num_instr;
    uint8_t scalar[CGE_EW_MAX_INPUTS];
    int16_t prog[CGE_EW_MAX_INSTRUCTIONS][4];
    int16_t out_reg[CGE_EW_MAX_OUTPUTS];
    float imm[CGE_EW_MAX_IMM];
} ew_args;

static inline __attribute__((always_inline)) void ew_apply(const int16_t *ins, const float *imm,
                                                           float r[][EW_TILE], int64_t len)
{
    float *d = r[ins[1]];
    const float *a = r[ins[2]];
    const float *b = ins[0] <= CGE_EW_DIV ? r[ins[3]] : NULL;
    switch ((cge_ew_op)ins[0]) {
    case CGE_EW_ADD: for (int64_t j = 0; j < len; j++) d[j] = a[j] + b[j]; break;
    case CGE_EW_SUB: for (int64_t j = 0; j < len; j++) d[j] = a[j] - b[j]; break;
    case CGE_EW_MUL: for (int64_t j = 0; j < len; j++) d[j] = a[j] * b[j]; break;
    case CGE_EW_DIV: for (int64_t j = 0; j < len; j++) d[j] = a[j] / b[j]; break;
    case CGE_EW_NEG: for (int64_t j = 0; j < len; j++) d[j] = -a[j]; break;
    case CGE_EW_ABS: for (int64_t j = 0; j < len; j++) d[j] = fabsf(a[j]); break;
    case CGE_EW_EXP: cge__exp_f32_row(d, a, len); break;
    case CGE_EW_LOG: for (int64_t j = 0; j < len; j++) d[j] = (float)log((double)a[j]); break;
    case CGE_EW_SQRT: for (int64_t j = 0; j < len; j++) d[j] = sqrtf(a[j]); break;
    case CGE_EW_RECIP: for (int64_t j = 0; j < len; j++) d[j] = 1.0f / a[j]; break;
    case CGE_EW_RELU: for (int64_t j = 0; j < len; j++) d[j] = a[j] < 0.0f ? 0.0f : a[j]; break;
    case CGE_EW_LEAKY: {
        float al = imm[ins[3]];
        for (int64_t j = 0; j < len; j++)
            d[j] = a[j] < 0.0f ? al * a[j] : a[j];
        break;
    }
    case CGE_EW_SIGMOID: cge__sigmoid_f32_row(d, a, len); break;
    case CGE_EW_TANH: for (int64_t j = 0; j < len; j++) d[j] = (float)tanh((double)a[j]); break;
    case CGE_EW_ERF: cge__erf_f32_row(d, a, len); break;
    case CGE_EW_GELU: cge__gelu_f32_row(d, a, len); break;
    case CGE_EW_GELU_TANH:
        for (int64_t j = 0; j < len; j++)
            d[j] = cge__gelu_tanh_f(a[j]);
        break;
    case CGE_EW_COPY: for (int64_t j = 0; j < len; j++) d[j] = a[j]; break;
    case CGE_EW_CLIP: {
        float lo = imm[ins[3]], hi = imm[ins[3] + 1];
        /* Clip's order: max with lo first, then min with hi; NaN passes. */
        for (int64_t j = 0; j < len; j++) {
            float x = a[j];
            x = x < lo ? lo : x;
            d[j] = x > hi ? hi : x;
        }
        break;
    }
    default: break;
    }
}

static inline __attribute__((always_inline)) void ew_block_impl(int64_t blk, int64_t nblk,
                                                                void *p)
{
    const ew_args *a = p;
    float r[CGE_EW_MAX_REGS][EW_TILE];
    int64_t lo, hi;
    cge__block_range(a->numel, blk, nblk, &lo, &hi);
    for (int64_t t = lo; t < hi; t += EW_TILE) {
        int64_t len = hi - t < EW_TILE ? hi - t : EW_TILE;
        for (int32_t i = 0; i < a->num_in; i++) {
            if (a->scalar[i])
                for (int64_t j = 0; j < len; j++)
                    r[i][j] = a->in[i][0];
            else
                memcpy(r[i], a->in[i] + t, sizeof(float) * (size_t)len);
        }
        for (int32_t k = 0; k < a->num_instr; k++)
            ew_apply(a->prog[k], a->imm, r, len);
        for (int32_t o = 0; o < a->num_out; o++)
            memcpy(a->out[o] + t, r[a->out_reg[o]], sizeof(float) * (size_t)len);
    }
}

/* The interpreter compiled for the baseline and for AVX2 (8-lane loops; no
 * multiply-add is fused, so both give the same bits, and the same as the
 * unfused kernels), picked by cge__cpu_has: CGE_CPU_ISA selects either. */
static void ew_block_generic(int64_t blk, int64_t nblk, void *p)
{
    ew_block_impl(blk, nblk, p);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void ew_block_avx2(int64_t blk, int64_t nblk, void *p)
{
    ew_block_impl(blk, nblk, p);
}
#endif

static void ew_block(int64_t blk, int64_t nblk, void *p)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (cge__cpu_has(CGE_CPU_AVX2)) {
        ew_block_avx2(blk, nblk, p);
        return;
    }
#endif
    ew_block_generic(blk, nblk, p);
}

static cge_status ew_args_make(const cge_attrs *at, int32_t ni, int32_t no, ew_args *a,
                               char *why, size_t size)
{
    const int64_t *prog, *outs;
    const float *imm;
    int64_t np = cge_attrs_get_ints(at, "program", &prog);
    int64_t nout = cge_attrs_get_ints(at, "out_regs", &outs);
    int64_t nimm = cge_attrs_get_floats(at, "imm", &imm);
    memset(a, 0, sizeof *a);
    if (ni < 1 || ni > CGE_EW_MAX_INPUTS || no < 1 || no > CGE_EW_MAX_OUTPUTS || np < 4 || np % 4 ||
        np / 4 > CGE_EW_MAX_INSTRUCTIONS || nout != no || nimm > CGE_EW_MAX_IMM) {
        snprintf(why, size, "program of %lld ints, %d inputs, %d outputs, %lld out_regs is "
                 "malformed or too large", (long long)np, (int)ni, (int)no, (long long)nout);
        return CGE_ERR_INVALID_ARG;
    }
    a->num_in = ni;
    a->num_out = no;
    a->num_instr = (int32_t)(np / 4);
    int64_t defined = ni;
    for (int32_t k = 0; k < a->num_instr; k++) {
        const int64_t *q = prog + 4 * k;
        bool binary = q[0] >= CGE_EW_ADD && q[0] <= CGE_EW_DIV;
        bool uses_imm = q[0] == CGE_EW_LEAKY || q[0] == CGE_EW_CLIP;
        int64_t need_imm = q[0] == CGE_EW_CLIP ? 2 : 1;
        if (q[0] < CGE_EW_ADD || q[0] >= CGE_EW_COUNT || q[1] != defined || q[1] >= CGE_EW_MAX_REGS ||
            q[2] < 0 || q[2] >= defined || (binary && (q[3] < 0 || q[3] >= defined)) ||
            (uses_imm && (q[3] < 0 || q[3] + need_imm > nimm))) {
            snprintf(why, size, "instruction %d (op %lld, dst %lld, a %lld, b %lld) is invalid",
                     (int)k, (long long)q[0], (long long)q[1], (long long)q[2], (long long)q[3]);
            return CGE_ERR_INVALID_ARG;
        }
        for (int c = 0; c < 4; c++)
            a->prog[k][c] = (int16_t)q[c];
        defined++;
    }
    for (int32_t o = 0; o < no; o++) {
        if (outs[o] < 0 || outs[o] >= defined) {
            snprintf(why, size, "out_regs[%d] = %lld is not a register", (int)o, (long long)outs[o]);
            return CGE_ERR_INVALID_ARG;
        }
        a->out_reg[o] = (int16_t)outs[o];
    }
    for (int64_t i = 0; i < nimm; i++)
        a->imm[i] = imm[i];
    return CGE_OK;
}

static cge_status ew_infer(cge_infer_ctx *ctx)
{
    ew_args a;
    char why[256];
    cge_status st = ew_args_make(ctx->attrs, ctx->num_inputs, ctx->num_outputs, &a, why, sizeof why);
    if (st)
        return cge_meta_error(ctx, st, "%s", why);
    const cge_shape *big = NULL;
    int64_t best = -1;
    for (int32_t i = 0; i < ctx->num_inputs; i++) {
        if (ctx->inputs[i].dtype != CGE_F32)
            return cge_meta_error(ctx, CGE_ERR_DTYPE, "input %d is %s; only float32 is fused",
                                  (int)i, cge_dtype_name(ctx->inputs[i].dtype));
        int64_t n = cge_shape_numel(&ctx->inputs[i].shape);
        if (n < 0) {
            big = &ctx->inputs[i].shape;
            best = INT64_MAX;
        } else if (n > best) {
            best = n;
            big = &ctx->inputs[i].shape;
        }
    }
    for (int32_t i = 0; i < ctx->num_inputs; i++) {
        int64_t n = cge_shape_numel(&ctx->inputs[i].shape);
        if (n != 1 && !cge_shape_equal(&ctx->inputs[i].shape, big)) {
            char x[CGE_SHAPE_STR_MAX], y[CGE_SHAPE_STR_MAX];
            return cge_meta_error(ctx, CGE_ERR_SHAPE,
                                  "input %d is %s; inputs must be %s or have one element", (int)i,
                                  cge_shape_str(&ctx->inputs[i].shape, x, sizeof x),
                                  cge_shape_str(big, y, sizeof y));
        }
    }
    for (int32_t o = 0; o < ctx->num_outputs; o++) {
        ctx->outputs[o].dtype = CGE_F32;
        ctx->outputs[o].shape = *big;
    }
    return CGE_OK;
}

static cge_status ew_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    ew_args a;
    char why[256];
    cge_status st = ew_args_make(ctx->attrs, ctx->num_inputs, ctx->num_outputs, &a, why, sizeof why);
    if (st)
        return cge_kernel_error(ctx, st, "%s", why);
    a.numel = cge_shape_numel(&ctx->outputs[0].shape);
    for (int32_t i = 0; i < a.num_in; i++) {
        a.in[i] = ctx->inputs[i].data;
        a.scalar[i] = cge_shape_numel(&ctx->inputs[i].shape) == 1 && a.numel != 1;
        if (!a.in[i] && a.numel > 0)
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "input %d has no buffer", (int)i);
    }
    for (int32_t o = 0; o < a.num_out; o++) {
        a.out[o] = ctx->outputs[o].data;
        if (!a.out[o] && a.numel > 0)
            return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "output %d has no buffer", (int)o);
    }
    if (a.numel <= 0)
        return CGE_OK;
    return cge_launch(stream, ew_block, cge__blocks_for(a.numel, 16384, ctx->num_threads), &a, sizeof a);
}


/* ---- registration ------------------------------------------------------------ */

static const cge_arg_def ew_in[] = {{"inputs", CGE_ARG_VARIADIC, CGE_DT(CGE_F32), "operands"}};
static const cge_arg_def ew_out[] = {{"outputs", CGE_ARG_VARIADIC, CGE_DT(CGE_F32), "results"}};
static const cge_attr_def ew_attrs[] = {
    {.name = "program", .kind = CGE_ATTR_INTS, .required = true,
     .doc = "4 ints per instruction: op, dst register, a, b (register or imm index)"},
    {.name = "out_regs", .kind = CGE_ATTR_INTS, .required = true, .doc = "register of each output"},
    {.name = "imm", .kind = CGE_ATTR_FLOATS, .doc = "parameters (LeakyRelu alpha, Clip bounds)"},
};
/* Each tile is read whole before it is written, at the same positions: the
 * result may take input 0's buffer (the planner checks the sizes match). */
static const cge_kernel_def ew_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = ew_launch, .inplace_input = 0}};


static const cge_op_def ew_ops[] = {
    {.name = "ElementwiseChain", .domain = CGE_DOMAIN_FUSED, .since_version = 1,
     .inputs = ew_in, .num_inputs = 1, .outputs = ew_out, .num_outputs = 1, .attrs = ew_attrs,
     .num_attrs = 3, .infer = ew_infer, .kernels = ew_kernels, .num_kernels = 1,
     .doc = "a fused chain of float32 elementwise ops"},
};

const cge_op_def *cge__ops_fused_elementwise(int32_t *count)
{
    *count = (int32_t)(sizeof ew_ops / sizeof ew_ops[0]);
    return ew_ops;
}
