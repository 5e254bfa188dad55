/* Input cases for the contract checker: generic candidates from the schema,
 * case specs parsed from text, and the builtin operators whose valid inputs
 * need a spec (or that are skipped, with the reason). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "opcheck/opcheck_internal.h"

/* The generic candidates come from arity, dtype sets and a few small
 * shapes. */

/* ---- specs for builtin operators the generic candidates cannot satisfy --- */

typedef struct oc_spec {
    const char *name;
    const char *cases[4];
} oc_spec;

/* Each needs values or attributes a generator cannot guess; the first case
 * is the base that shape perturbations start from. */
static const oc_spec builtin_specs[] = {
    {"AddCustom", {"f32[8,2048]; f32[8,2048]"}},
    {"Cast", {"f32[2,3] | to=7", "i64[2,3] | to=1"}},
    {"CastLike", {"f32[2,3]; i64[1]"}},
    {"Concat", {"f32[2,3]; f32[4,3] | axis=0", "f32[2,3]; f32[2,1] | axis=-1"}},
    {"Reshape", {"f32[2,3,4]; i64[2]={6,4}", "f32[2,3]; i64[3]={3,-1,1}"}},
    {"Expand", {"f32[3,1]; i64[2]={3,4}"}},
    {"Squeeze", {"f32[2,1,3]; i64[1]={1}"}},
    {"Unsqueeze", {"f32[2,3]; i64[1]={1}"}},
    {"Transpose", {"f32[2,3,4] | perm=2,0,1"}},
    {"Split", {"f32[4,6]; i64[2]={2,4} | axis=1"}},
    {"Slice", {"f32[4,6]; i64[2]={1,0}; i64[2]={3,5}; i64[2]={0,1}; i64[2]={1,2}"}},
    {"Gather", {"f32[4,3]; i64[2]={3,0} | axis=0"}},
    {"GatherElements", {"f32[3,4]; i64[3,2]={0,2,1,3,0,1} | axis=1"}},
    {"GatherND", {"f32[3,4]; i64[2,2]={0,1,2,3}"}},
    {"ScatterND", {"f32[4,3]; i64[2,1]={1,3}; f32[2,3]"}},
    {"ScatterElements", {"f32[3,4]; i64[2,2]={0,2,1,3}; f32[2,2] | axis=1"}},
    {"OneHot", {"i64[3]={0,2,1}; i64[]={4}; f32[2]={0,1}"}},
    {"TopK", {"f32[3,5]; i64[1]={2} | axis=1"}},
    {"CumSum", {"f32[3,4]; i64[]={1}"}},
    {"Compress", {"f32[3,4]; bool[4]={1,0,1,1} | axis=1"}},
    {"Range", {"f32[]={1}; f32[]={7}; f32[]={1.5}", "i64[]={0}; i64[]={10}; i64[]={3}"}},
    {"ConstantOfShape", {"i64[2]={2,3}"}},
    {"Tile", {"f32[2,3]; i64[2]={2,1}"}},
    {"DepthToSpace", {"f32[1,8,2,3] | blocksize=2"}},
    {"SpaceToDepth", {"f32[1,2,4,6] | blocksize=2"}},
    {"ReverseSequence", {"f32[4,3,2]; i64[3]={4,1,2}"}},
    {"BitShift", {"u32[2,3]; u32[2,3]={1,2} | direction=LEFT", "u8[4]; u8[4]={1} | direction=RIGHT"}},
    {"Constant", {" | value_float=2.5", " | value_ints=1,2,3"}},
    {"Conv", {"f32[1,2,6,6]; f32[4,2,3,3]; f32[4] | pads=1,1,1,1", "f32[1,4,5,5]; f32[4,2,3,3] | group=2 strides=2,2"}},
    {"ConvTranspose", {"f32[1,2,4,4]; f32[2,3,3,3]; f32[3] | strides=2,2"}},
    {"MaxPool", {"f32[1,2,6,6] | kernel_shape=3,3 strides=2,2 pads=1,1,1,1"}},
    {"AveragePool", {"f32[1,2,6,6] | kernel_shape=2,2 strides=2,2"}},
    {"LpPool", {"f32[1,2,6,6] | kernel_shape=2,2"}},
    {"GlobalAveragePool", {"f32[2,3,4,5]"}},
    {"GlobalMaxPool", {"f32[2,3,4,5]"}},
    {"GlobalLpPool", {"f32[2,3,4,5]"}},
    {"BatchNormalization", {"f32[2,3,4,4]; f32[3]; f32[3]; f32[3]; f32[3]"}},
    {"InstanceNormalization", {"f32[2,3,4,4]; f32[3]; f32[3]"}},
    {"GroupNormalization", {"f32[2,6,3,3]; f32[3]; f32[3] | num_groups=3",
                            "f32[3,4]; f32[2]; f32[2] | num_groups=2 epsilon=0.01"}},
    {"LayerNormalization", {"f32[2,3,8]; f32[8]; f32[8] | axis=-1"}},
    {"LRN", {"f32[1,5,3,3] | size=3"}},
    {"Col2Im", {"f32[1,4,6]; i64[2]={3,4}; i64[2]={2,2}",
                "f32[2,6,4]; i64[2]={4,4}; i64[2]={1,3} | strides=2,1 pads=0,1,0,1 dilations=1,2"}},
    {"MaxUnpool", {"f32[1,1,2,2]; i64[1,1,2,2]={0,3,10,15} | kernel_shape=2,2 strides=2,2"}},
    {"Resize", {"f32[1,1,2,3]; -; f32[4]={1,1,2,2} | mode=nearest"}},
    {"Upsample", {"f32[1,1,2,3]; f32[4]={1,1,2,2}"}},
    {"Pad", {"f32[2,3]; i64[4]={1,0,0,2}"}},
    {"CenterCropPad", {"f32[4,5,3]; i64[3]={2,8,3}", "u8[3,6,2]; i64[2]={6,3} | axes=0,-2"}},
    {"RNN", {"f32[3,2,4]; f32[1,5,4]; f32[1,5,5] | hidden_size=5"}},
    {"GRU", {"f32[3,2,4]; f32[1,15,4]; f32[1,15,5] | hidden_size=5"}},
    {"LSTM", {"f32[3,2,4]; f32[1,20,4]; f32[1,20,5] | hidden_size=5"}},
    {"MatMulInteger", {"u8[2,3]; u8[3,4]"}},
    {"ConvInteger", {"u8[1,1,4,4]; u8[2,1,2,2]"}},
    {"QuantizeLinear", {"f32[2,3]; f32[]={0.5}; u8[]={3}"}},
    {"DequantizeLinear", {"u8[2,3]; f32[]={0.5}; u8[]={3}"}},
    {"QLinearMatMul", {"u8[2,3]; f32[]={0.5}; u8[]={1}; u8[3,2]; f32[]={0.25}; u8[]={2}; f32[]={1}; u8[]={0}"}},
    {"QLinearConv", {"u8[1,1,4,4]; f32[]={0.5}; u8[]={1}; u8[2,1,2,2]; f32[]={0.25}; u8[]={0}; f32[]={1}; u8[]={0}"}},
    {"DFT", {"f32[1,8,1] | axis=1", "f32[2,6,2] | axis=1 inverse=1"}},
    {"STFT", {"f32[1,16,1]; i64[]={4}; f32[8]; i64[]={8}"}},
    {"HannWindow", {"i64[]={8}"}},
    {"HammingWindow", {"i64[]={8}"}},
    {"BlackmanWindow", {"i64[]={8}"}},
    {"MelWeightMatrix", {"i64[]={4}; i64[]={16}; i64[]={8000}; f32[]={100}; f32[]={3000}"}},
    {"Einsum", {"f32[2,3]; f32[3,4] | equation=ij,jk->ik", "f32[2,3,4] | equation=bij->bji"}},
    {"NegativeLogLikelihoodLoss", {"f32[3,5]; i64[3]={1,0,4}"}},
    {"SoftmaxCrossEntropyLoss", {"f32[3,5]; i64[3]={1,0,4}"}},
    {"Det", {"f32[2,3,3]"}},
    {"GridSample", {"f32[1,2,4,4]; f32[1,3,3,2]"}},
    {"RoiAlign", {"f32[1,2,8,8]; f32[2,4]={0,0,4,4,1,1,6,7}; i64[2]={0} | output_height=2 output_width=2"}},
    {"MaxRoiPool", {"f32[2,3,8,8]; f32[2,5]={0,0,0,4,4,1,1,2,6,7} | pooled_shape=2,2",
                    "f32[1,2,6,5]; f32[1,5]={0,1,1,3,2} | pooled_shape=3,2 spatial_scale=0.5"}},
    {"NonMaxSuppression", {"f32[1,3,4]={0,0,1,1,0,0.1,1,1.1,0,5,1,6}; f32[1,1,3]={0.9,0.8,0.7}; i64[1]={3}; f32[1]={0.5}"}},
    {"TfIdfVectorizer", {"i64[2,4]={1,2,3,1} | max_gram_length=2 max_skip_count=0 min_gram_length=1 mode=TF ngram_counts=0,3 ngram_indexes=0,1,2,3 pool_int64s=1,2,3,1,2"}},
    {"RandomUniformLike", {"f32[2,3] | seed=1"}},
    {"RandomUniform", {" | shape=2,3 seed=1"}},
    {"RandomNormal", {" | shape=2,3 seed=1"}},
    {"RandomNormalLike", {"f32[2,3] | seed=1"}},
    {"Bernoulli", {"f32[2,3]={0.5} | seed=1"}},
    {"Multinomial", {"f32[2,3] | seed=1 sample_size=4"}},
    {"Trilu", {"f32[3,4]; i64[]={1}"}},
    {"EyeLike", {"f32[3,4] | k=1"}},
    {"Shape", {"f32[2,3,4] | start=1"}},
    {"Gemm", {"f32[2,3]; f32[3,4]; f32[4]", "f32[3,2]; f32[4,3] | transA=1 transB=1"}},
    {"PRelu", {"f32[2,3]; f32[3]"}},
    {"Where", {"bool[2,3]={1,0,0}; f32[2,3]; f32[2,3]"}},
    {"Clip", {"f32[2,3]; f32[]={0.5}; f32[]={1}"}},
    {"Dropout", {"f32[2,3]"}},
    {"MeanVarianceNormalization", {"f32[2,3,4,4]"}},
    {"Softmax", {"f32[2,3,4] | axis=1"}},
    {"LogSoftmax", {"f32[2,3,4] | axis=-1"}},
    {"Hardmax", {"f32[2,3,4] | axis=1"}},
    {"ReduceSum", {"f32[2,3,4]; i64[1]={1}", "f32[2,3]"}},
    {"Mod", {"i64[2,3]; i64[2,3]={2}", "f32[2,3]; f32[2,3]={0.5} | fmod=1"}},
    {"Size", {"f32[2,3]"}},
    {"Adagrad", {"f32[]={0.1}; i64[]={2}; f32[3]; f32[3]; f32[3] -> 2 | decay_factor=0.1",
                 "f64[]={0.1}; i64[]={0}; f64[2]; f64[1]; f64[2]; f64[1]; f64[2]; f64[1] -> 4"}},
    {"Momentum", {"f32[]={0.1}; i64[]={1}; f32[3]; f32[3]; f32[3] -> 2 | alpha=0.9 beta=0.5 "
                  "mode=nesterov norm_coefficient=0.01"}},
    {"Adam", {"f32[]={0.1}; i64[]={3}; f32[2,2]; f32[2,2]; f32[2,2]; f32[2,2] -> 3"}},
    /* cge.fused (cge/fused_ops.h). ElementwiseChain: Mul then Relu; Add of a
     * one-element input then Clip by imm; Mul then Gelu with both results. */
    {"ElementwiseChain", {"f32[2,3]; f32[2,3] | program=3,2,0,1,11,3,2,0 out_regs=3",
                          "f32[2,3]; f32[1] | program=1,2,0,1,19,3,2,0 out_regs=3 imm=-0.5,0.5",
                          "f32[4]; f32[4] -> 2 | program=3,2,0,1,16,3,2,0 out_regs=2,3"}},
    {"FusedMatMul", {"f32[2,3]; f32[3,4]; f32[4] | activation=relu",
                     "f32[2,2,3]; f32[4,3] | trans_b=1 activation=gelu_tanh",
                     "f32[3,5]; f32[5,2]; f32[2] | activation=clip min=-0.5 max=0.5"}},
    {"MatMulBF16", {"f32[2,3]; f32[3,4]; f32[4] | activation=relu",
                    "f32[2,2,3]; f32[2,3,4]", "f32[2,3]; f32[4,3] | trans_b=1 b_const=1"}},
    /* com.microsoft MatMulNBits: 4-bit (64 = 2 blocks of 32) and 8-bit codes */
    {"MatMulNBits", {"f32[2,64]; u8[3,2,16]; f32[6] | K=64 N=3 bits=4 block_size=32",
                     "f32[1,32]; u8[2,1,32]; f32[2]; u8[2] | K=32 N=2 bits=8 block_size=32"}},
    {"FusedConv",
     {"f32[1,2,6,6]; f32[4,2,3,3]; f32[4]; f32[1,4,6,6] | pads=1,1,1,1 activation=relu",
      "f32[1,4,5,5]; f32[4,2,3,3] | group=2 strides=2,2 activation=leaky_relu alpha=0.1"}},
    {"ChannelsLastPool", {"f32[1,2,6,6] | mode=max kernel_shape=3,3 strides=2,2 pads=1,1,1,1",
                          "f32[1,3,5,5] | mode=avg kernel_shape=2,2 count_include_pad=1",
                          "f32[2,3,4,5] | mode=global_avg", "f32[2,3,4,5] | mode=global_max"}},
    {"ChannelsLastConcat",
     {"f32[1,2,3,3]; f32[1,4,3,3] | axis=1", "f32[2,3,2,2]; f32[2,3,1,2] | axis=2"}},
    {"ChannelsLastSplit", {"f32[1,6,2,2]; i64[2]={2,4} | axis=1", "f32[2,3,4,2] -> 2 | axis=2"}},
    {"ChannelsLastAffine", {"f32[1,3,4,4]; f64[3]; f64[3] | relu=1"}},
    {"ChannelsLastScale", {"f32[2,3,4,4]; f32[2,3,1,1]", "f32[1,3,2,2]; f32[1,3,1,1]"}},
    {"ChannelsLastGroupNorm", {"f32[2,4,3,3]; f32[2]; f32[2]", "f32[1,6,7]; f32[3]; f32[3] | epsilon=0.01"}},
    {"ChannelsLastResize", {"f32[1,2,2,3]; -; f32[4]={1,1,2,2} | mode=nearest",
                            "f32[1,2,3,3]; -; -; i64[4]={1,2,5,4} | mode=linear",
                            "f32[2,3,3,2]; -; -; i64[4]={2,3,7,4} | mode=linear plain_output=1"}},
    {"ChannelsLastShuffle", {"f32[1,6,2,2] | groups=2", "f32[2,6,3] | groups=3"}},
    {"LayoutView", {"f32[2,3,4] | perm=0,2,1", "f32[1,3,4,5] | perm=0,3,1,2 to=1"}},
    {"QConv",
     {"u8[1,1,4,4]; f32[]={0.5}; u8[]={1}; u8[2,1,2,2]; f32[]={0.25}; u8[]={0}; f32[]={1}; u8[]={0} | lo=3",
      "u8[1,2,5,5]; f32[]={0.5}; u8[]={7}; i8[4,2,3,3]; f32[4]; i8[4]={0,0,0,0}; f32[]={2}; u8[]={9}; "
      "i32[4] | pads=1,1,1,1 w_const=1 hi=200"}},
    {"QConvAdd",
     {"u8[1,2,5,5]; f32[]={0.5}; u8[]={7}; i8[4,2,3,3]; f32[4]; i8[4]={0,0,0,0}; f32[]={2}; u8[]={9}; "
      "i32[4]; u8[1,4,5,5]; f32[]={0.3}; u8[]={5}; f32[]={0.7}; u8[]={3} | pads=1,1,1,1 w_const=1 add_lo=4",
      "i8[1,3,6,4]; f32[]={0.25}; i8[]={-2}; i8[5,3,1,1]; f32[]={0.1}; i8[]={0}; f32[]={1}; i8[]={1}; -; "
      "i8[1,5,6,4]; f32[]={0.5}; i8[]={0}; f32[]={0.4}; u8[]={128} | w_const=1"}},
    {"QConvPair",
     {"u8[1,2,5,5]; f32[]={0.5}; u8[]={7}; i8[4,2,3,3]; f32[4]; i8[4]={0,0,0,0}; f32[]={2}; u8[]={9}; "
      "i32[4]; i8[3,4,1,1]; f32[]={0.1}; i8[]={0}; f32[]={0.5}; u8[]={3} | pads=1,1,1,1 w_const=1",
      /* the add's five inputs pass the checker's 16: python/tests/test_qconv_add.py */
      "u8[1,2,4,6]; f32[]={0.5}; u8[]={0}; i8[4,2,1,1]; f32[]={0.2}; i8[]={0}; f32[]={1}; u8[]={0}; -; "
      "i8[5,4,1,1]; f32[5]; i8[5]={0,0,0,0,0}; f32[]={0.5}; u8[]={3}; i32[5] | w_const=1 b_lo=4"}},
    {"QMatMul",
     {"u8[2,3]; f32[]={0.5}; u8[]={1}; u8[3,2]; f32[]={0.25}; u8[]={2}; f32[]={1}; u8[]={0}",
      "u8[3,5]; f32[]={0.5}; u8[]={4}; i8[5,2]; f32[2]; i8[2]={0,0}; f32[]={1}; i8[]={3}; i32[2] | "
      "w_const=1 lo=-5"}},
    {"QAdd", {"u8[2,3]; f32[]={0.5}; u8[]={1}; u8[2,3]; f32[]={0.25}; u8[]={2}; f32[]={1}; u8[]={0} | lo=3",
              "i8[4]; f32[]={0.5}; i8[]={-1}; u8[1]; f32[]={0.25}; u8[]={2}; f32[]={0.3}; i8[]={1}"}},
    {"QMul", {"u8[2,3]; f32[]={0.5}; u8[]={1}; i8[2,3]; f32[]={0.25}; i8[]={2}; f32[]={1}; u8[]={0}"}},
    {"QLookup", {"u8[2,3]; u8[256]", "i8[5]; i8[256]"}},
    {"QuantizeNHWC", {"f32[1,3,2,17]; f32[]={0.05}; u8[]={3}", "f32[2,1,3,5]; f32[]={0.1}; i8[]={-2}"}},
    {"QPool", {"u8[1,2,6,6]; f32[]={0.5}; u8[]={1}; f32[]={0.5}; u8[]={1} | mode=max kernel_shape=3,3 "
               "strides=2,2 pads=1,1,1,1",
               "i8[1,3,5,5]; f32[]={0.5}; i8[]={1}; f32[]={0.25}; u8[]={3} | mode=avg kernel_shape=2,2",
               "u8[2,3,4,5]; f32[]={0.5}; u8[]={1}; f32[]={0.1}; u8[]={3} | mode=global_avg"}},
};

/* Ops the checker does not run, and why. */
static const struct {
    const char *name, *why;
} builtin_skips[] = {
    {"If", "runs subgraphs (graph attributes): checked by the session tests"},
    {"Loop", "runs subgraphs (graph attributes): checked by the session tests"},
    {"Scan", "runs subgraphs (graph attributes): checked by the session tests"},
    {"SequenceMap", "runs subgraphs (graph attributes): checked by the session tests"},
#define SEQ_SKIP "reads or makes sequences or optionals (host objects, not the tensors its " \
                 "cases are): checked by python/tests/test_sequences.py and the conformance cases"
    {"SequenceEmpty", SEQ_SKIP},
    {"SequenceConstruct", SEQ_SKIP},
    {"SequenceAt", SEQ_SKIP},
    {"SequenceLength", SEQ_SKIP},
    {"SequenceInsert", SEQ_SKIP},
    {"SequenceErase", SEQ_SKIP},
    {"SplitToSequence", SEQ_SKIP},
    {"ConcatFromSequence", SEQ_SKIP},
    {"Optional", SEQ_SKIP},
    {"OptionalHasElement", SEQ_SKIP},
    {"OptionalGetElement", SEQ_SKIP},
#undef SEQ_SKIP
    {"StringNormalizer", "takes string tensors only, and op-check's cases are numbers: checked by "
                         "tests/session/test_strings.c and the conformance cases"},
};

const char *const *oc_builtin_cases(const char *name)
{
    for (size_t i = 0; i < sizeof builtin_specs / sizeof builtin_specs[0]; i++)
        if (!strcmp(builtin_specs[i].name, name))
            return builtin_specs[i].cases;
    return NULL;
}

const char *oc_builtin_skip(const char *name)
{
    for (size_t i = 0; i < sizeof builtin_skips / sizeof builtin_skips[0]; i++)
        if (!strcmp(builtin_skips[i].name, name))
            return builtin_skips[i].why;
    return NULL;
}

/* ---- cases ------------------------------------------------------------- */

static const cge_arg_def *arg_def(const cge_op_def *def, int32_t i)
{
    if (def->num_inputs == 0)
        return NULL;
    return i < def->num_inputs ? &def->inputs[i] : &def->inputs[def->num_inputs - 1];
}

bool oc_same_type_var(const cge_op_def *def, int32_t i)
{
    const cge_arg_def *a = arg_def(def, i), *a0 = arg_def(def, 0);
    return a && a0 && a->dtypes == a0->dtypes;
}

int32_t oc_default_outputs(const cge_op_def *def)
{
    int32_t n = 1;
    for (int32_t i = 0; i < def->num_outputs; i++)
        if (!(def->outputs[i].flags & CGE_ARG_OPTIONAL))
            n = i + 1;
    return n;
}

cge_status oc_case_init(oc_case *c, const cge_op_def *def)
{
    memset(c, 0, sizeof *c);
    c->num_outputs = oc_default_outputs(def);
    cge_status st = cge_graph_create("opcheck", &c->holder);
    if (!st)
        st = cge_graph_add_node(c->holder, def->name, def->domain, "opcheck", NULL, 0,
                                (const char *const[]){"out"}, 1, &c->node);
    if (st)
        oc_case_free(c);
    return st;
}

void oc_case_free(oc_case *c)
{
    for (int32_t i = 0; i < OC_MAX_ARGS; i++) {
        free(c->values[i]);
        free(c->given[i]);
    }
    cge_graph_destroy(c->holder);
    memset(c, 0, sizeof *c);
}

const cge_attrs *oc_case_attrs(const oc_case *c)
{
    return c->node ? cge_node_attrs_const(c->node) : NULL;
}

cge_status oc_case_clone(const oc_case *src, const cge_op_def *def, oc_case *dst)
{
    cge_status st = oc_case_init(dst, def);
    if (st)
        return st;
    dst->num_inputs = src->num_inputs;
    dst->num_outputs = src->num_outputs;
    const cge_attrs *a = oc_case_attrs(src);
    for (int32_t i = 0; !st && i < cge_attrs_count(a); i++)
        st = cge_attrs_set(cge_node_attrs(dst->node), cge_attrs_at(a, i));
    for (int32_t i = 0; !st && i < src->num_inputs; i++) {
        dst->present[i] = src->present[i];
        dst->dtype[i] = src->dtype[i];
        dst->shape[i] = src->shape[i];
        if (src->given[i]) {
            dst->given[i] = malloc(sizeof(double) * (size_t)src->num_given[i]);
            if (!dst->given[i]) {
                st = cge_error(CGE_LAYER_NONE, CGE_ERR_NO_MEMORY, "op-check: out of memory");
                break;
            }
            memcpy(dst->given[i], src->given[i], sizeof(double) * (size_t)src->num_given[i]);
            dst->num_given[i] = src->num_given[i];
        }
        if (src->present[i])
            st = oc_case_fill(dst, def, i);
    }
    if (st)
        oc_case_free(dst);
    return st;
}

/* Values that keep most ops in their domain: positive floats (log, sqrt),
 * integers >= 1 (division), alternating booleans. */
cge_status oc_case_fill(oc_case *c, const cge_op_def *def, int32_t i)
{
    free(c->values[i]);
    c->values[i] = NULL;
    if (!c->present[i])
        return CGE_OK;
    int64_t n = cge_shape_numel(&c->shape[i]);
    size_t nb = cge_tensor_nbytes(c->dtype[i], &c->shape[i]);
    if (n < 0 || (n > 0 && nb == 0))
        return cge_error(CGE_LAYER_NONE, CGE_ERR_SHAPE, "op-check: input %d has no static size", i);
    c->values[i] = malloc(nb ? nb : 1);
    if (!c->values[i])
        return cge_error(CGE_LAYER_NONE, CGE_ERR_NO_MEMORY, "op-check: out of memory");
    bool tvar = oc_same_type_var(def, i);
    cge_dtype t = c->dtype[i];
    for (int64_t k = 0; k < n; k++) {
        double v;
        if (c->given[i] && c->num_given[i] > 0)
            v = c->given[i][k % c->num_given[i]];
        else if (t == CGE_BOOL)
            v = (double)((k + i) % 2);
        else if (!tvar)
            v = 1;
        else if (cge_dtype_is_float(t))
            v = 0.25 + (double)((k * 7 + i * 3) % 11) / 10.0;
        else
            v = (double)(1 + (k * 7 + i) % 3);
        cge__store_from_double(t, c->values[i], k, v);
    }
    return CGE_OK;
}

const char *oc_case_str(const oc_case *c, const cge_op_def *def, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = 0;
    for (int32_t i = 0; i < c->num_inputs && len < size; i++) {
        const cge_arg_def *a = arg_def(def, i);
        char s[CGE_SHAPE_STR_MAX];
        int w;
        if (!c->present[i])
            w = snprintf(buf + len, size - len, "%s%s=-", i ? " " : "", a ? a->name : "?");
        else
            w = snprintf(buf + len, size - len, "%s%s=%s%s", i ? " " : "", a ? a->name : "?",
                         cge_dtype_name(c->dtype[i]), cge_shape_str(&c->shape[i], s, sizeof s));
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (c->num_inputs == 0)
        snprintf(buf, size, "(no inputs)");
    return buf;
}

/* ---- spec parsing ------------------------------------------------------ */

static cge_status spec_error(const cge_op_def *def, const char *spec, const char *why)
{
    return cge_error(CGE_LAYER_NONE, CGE_ERR_INVALID_ARG, "op-check: case '%s' for %s: %s", spec,
                     def->name, why);
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

/* Comma-separated numbers into a fresh array. */
static int32_t parse_numbers(const char *s, double **out)
{
    int32_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    double *v = malloc(sizeof(double) * (size_t)n);
    if (!v)
        return -1;
    int32_t k = 0;
    const char *p = s;
    while (*p && k < n) {
        char *end;
        v[k] = strtod(p, &end);
        if (end == p) {
            free(v);
            return -1;
        }
        k++;
        p = end;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == ',')
            p++;
        else if (*p) {
            free(v);
            return -1;
        }
    }
    *out = v;
    return k;
}

static cge_status parse_input(const cge_op_def *def, const char *spec, char *tok, oc_case *c,
                              int32_t i)
{
    tok = trim(tok);
    if (!strcmp(tok, "-"))
        return CGE_OK;
    char *lb = strchr(tok, '['), *rb = lb ? strchr(lb, ']') : NULL;
    if (!lb || !rb)
        return spec_error(def, spec, "an input needs dtype[dims]");
    *lb = 0;
    *rb = 0;
    cge_dtype t = cge_dtype_from_name(trim(tok));
    if (t == CGE_DTYPE_UNDEFINED)
        return spec_error(def, spec, "unknown dtype");
    c->present[i] = true;
    c->dtype[i] = t;
    c->shape[i].rank = 0;
    char *dims = trim(lb + 1);
    if (*dims) {
        double *d = NULL;
        int32_t n = parse_numbers(dims, &d);
        if (n < 0 || n > CGE_MAX_RANK) {
            free(d);
            return spec_error(def, spec, "bad dims");
        }
        c->shape[i].rank = n;
        for (int32_t k = 0; k < n; k++)
            c->shape[i].dims[k] = (int64_t)d[k];
        free(d);
    }
    char *eq = strchr(rb + 1, '=');
    if (eq) {
        char *open = strchr(eq, '{'), *close = open ? strchr(open, '}') : NULL;
        if (!open || !close)
            return spec_error(def, spec, "values need ={...}");
        *close = 0;
        c->num_given[i] = parse_numbers(open + 1, &c->given[i]);
        if (c->num_given[i] <= 0)
            return spec_error(def, spec, "bad values");
    }
    return oc_case_fill(c, def, i);
}

static cge_status parse_attr(const cge_op_def *def, const char *spec, char *tok, oc_case *c)
{
    char *eq = strchr(tok, '=');
    if (!eq)
        return spec_error(def, spec, "an attribute needs name=value");
    *eq = 0;
    const char *name = tok, *val = eq + 1;
    const cge_attr_def *ad = NULL;
    for (int32_t k = 0; k < def->num_attrs; k++)
        if (!strcmp(def->attrs[k].name, name))
            ad = &def->attrs[k];
    if (!ad)
        return spec_error(def, spec, "no such attribute in the schema");
    cge_attr a = {.name = name, .kind = ad->kind};
    double *nums = NULL;
    int64_t ints[64];
    float floats[64];
    switch (ad->kind) {
    case CGE_ATTR_INT: a.i = strtoll(val, NULL, 10); break;
    case CGE_ATTR_FLOAT: a.f = strtof(val, NULL); break;
    case CGE_ATTR_STRING: a.s = val; break;
    case CGE_ATTR_INTS:
    case CGE_ATTR_FLOATS: {
        int32_t n = parse_numbers(val, &nums);
        if (n < 0 || n > 64) {
            free(nums);
            return spec_error(def, spec, "bad list");
        }
        for (int32_t k = 0; k < n; k++) {
            ints[k] = (int64_t)nums[k];
            floats[k] = (float)nums[k];
        }
        a.n = n;
        a.ints = ints;
        a.floats = floats;
        free(nums);
        break;
    }
    default: return spec_error(def, spec, "attribute kind not supported in specs");
    }
    return cge_attrs_set(cge_node_attrs(c->node), &a);
}

cge_status oc_case_parse(const cge_op_def *def, const char *spec, oc_case *c)
{
    cge_status st = oc_case_init(c, def);
    if (st)
        return st;
    char *copy = strdup(spec);
    if (!copy) {
        oc_case_free(c);
        return cge_error(CGE_LAYER_NONE, CGE_ERR_NO_MEMORY, "op-check: out of memory");
    }
    char *bar = strchr(copy, '|');
    if (bar)
        *bar = 0;
    /* "inputs -> N": N outputs instead of the schema's required ones
     * (variadic outputs, as the optimizers' per-tensor groups). */
    char *arrow = strstr(copy, "->");
    if (arrow) {
        *arrow = 0;
        char *end = NULL;
        long k = strtol(arrow + 2, &end, 10);
        if (k < 1 || k > OC_MAX_ARGS || *trim(end)) {
            free(copy);
            oc_case_free(c);
            return spec_error(def, spec, "'-> N' needs an output count from 1 to the maximum");
        }
        c->num_outputs = (int32_t)k;
    }
    char *ins = trim(copy);
    int32_t n = 0;
    if (*ins) {
        char *save = NULL;
        for (char *tok = strtok_r(ins, ";", &save); tok && !st; tok = strtok_r(NULL, ";", &save)) {
            if (n >= OC_MAX_ARGS) {
                st = spec_error(def, spec, "too many inputs");
                break;
            }
            st = parse_input(def, spec, tok, c, n++);
        }
    }
    c->num_inputs = n;
    if (!st && bar) {
        char *save = NULL;
        for (char *tok = strtok_r(bar + 1, " \t", &save); tok && !st;
             tok = strtok_r(NULL, " \t", &save))
            st = parse_attr(def, spec, tok, c);
    }
    free(copy);
    if (st)
        oc_case_free(c);
    return st;
}

/* ---- generic candidates -------------------------------------------------- */

/* Shapes for the type-variable inputs, auxiliary input shapes (by the main
 * rank, [1] or scalar) and auxiliary values (1, then 0). */
static const cge_shape main_shapes[] = {
    {2, {2, 3}}, {4, {2, 3, 4, 5}}, {1, {3}}, {0, {0}}, {3, {2, 3, 4}},
};
#define N_MAIN ((int32_t)(sizeof main_shapes / sizeof main_shapes[0]))
#define N_AUX 3
#define N_VAL 2

static cge_dtype aux_dtype(cge_dtype_set set)
{
    static const cge_dtype pref[] = {CGE_I64, CGE_F32, CGE_I32, CGE_BOOL, CGE_U8};
    for (size_t k = 0; k < sizeof pref / sizeof pref[0]; k++)
        if (!set || (set & CGE_DT(pref[k])))
            return pref[k];
    for (int t = 1; t < CGE_DTYPE_MAX; t++)
        if ((set & CGE_DT(t)) && t != CGE_STRING)
            return (cge_dtype)t;
    return CGE_F32;
}

cge_status oc_generic_case(const cge_op_def *def, int32_t k, cge_dtype t, oc_case *c)
{
    if (k < 0 || k >= N_MAIN * N_AUX * N_VAL)
        return CGE_ERR_NOT_FOUND;
    const cge_shape *ms = &main_shapes[k / (N_AUX * N_VAL)];
    int32_t aux = (k / N_VAL) % N_AUX;
    double val = (k % N_VAL) ? 0 : 1;
    cge_status st = oc_case_init(c, def);
    if (st)
        return st;
    int32_t n = 0;
    for (int32_t i = 0; i < def->num_inputs; i++)
        if (!(def->inputs[i].flags & CGE_ARG_OPTIONAL))
            n = i + 1;
    bool variadic = def->num_inputs > 0 && (def->inputs[def->num_inputs - 1].flags & CGE_ARG_VARIADIC);
    if (variadic && n == def->num_inputs)
        n++;
    if (n > OC_MAX_ARGS)
        n = OC_MAX_ARGS;
    c->num_inputs = n;
    for (int32_t i = 0; i < n && !st; i++) {
        const cge_arg_def *a = arg_def(def, i);
        if (i < def->num_inputs && (a->flags & CGE_ARG_OPTIONAL))
            continue;
        c->present[i] = true;
        if (oc_same_type_var(def, i)) {
            c->dtype[i] = t;
            c->shape[i] = *ms;
        } else {
            c->dtype[i] = aux_dtype(a->dtypes);
            c->shape[i] = aux == 0 ? (cge_shape){1, {ms->rank ? ms->rank : 1}}
                        : aux == 1 ? (cge_shape){1, {1}} : CGE_SCALAR;
            c->given[i] = malloc(sizeof(double));
            if (!c->given[i]) {
                st = cge_error(CGE_LAYER_NONE, CGE_ERR_NO_MEMORY, "op-check: out of memory");
                break;
            }
            c->given[i][0] = val;
            c->num_given[i] = 1;
        }
        st = oc_case_fill(c, def, i);
    }
    /* Required attributes get a plain value (ops that need better have
     * specs); random ops get a seed, so that runs are comparable. */
    for (int32_t j = 0; !st && j < def->num_attrs; j++) {
        const cge_attr_def *ad = &def->attrs[j];
        if (!ad->required && strcmp(ad->name, "seed"))
            continue;
        static const int64_t one_i[1] = {1};
        static const float one_f[1] = {1};
        cge_attr a = {.name = ad->name, .kind = ad->kind, .i = 1, .f = 1, .s = "",
                      .n = 1, .ints = one_i, .floats = one_f};
        st = cge_attrs_set(cge_node_attrs(c->node), &a);
    }
    if (st)
        oc_case_free(c);
    return st;
}
