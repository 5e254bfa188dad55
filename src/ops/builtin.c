/* Registers the builtin operator families as one library, "builtin", through
 * the same path a custom library takes, with a 1:1 ONNX converter for each
 * operator (the ONNX importer adds version-specific converters). */
#include <stdlib.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/registry.h"

typedef const cge_op_def *(*family_fn)(int32_t *count);

static const family_fn families[] = {
    cge__ops_binary, cge__ops_unary, cge__ops_matmul, cge__ops_softmax,
    cge__ops_reduce, cge__ops_shape, cge__ops_transform,
    cge__ops_conv, cge__ops_pool, cge__ops_norm, cge__ops_resize, cge__ops_pad,
    cge__ops_rnn,
    cge__ops_gather_scatter, cge__ops_sort_scan,
    cge__ops_generate,
    cge__ops_variadic,
    cge__ops_quant,
    cge__ops_spectral,
    cge__ops_einsum,
    cge__ops_loss, cge__ops_cast_like, cge__ops_linalg, cge__ops_sampling, cge__ops_detection,
    cge__ops_text, cge__ops_random, cge__ops_string_normalizer,
    cge__ops_control_flow,
    cge__ops_training,
    cge__ops_fused_elementwise, cge__ops_fused_matmul, cge__ops_fused_conv, cge__ops_qlinear,
    cge__ops_attention,
    cge__ops_matmul_bf16, cge__ops_matmul_nbits,
    cge__ops_channels_last, cge__ops_copy,
    cge__ops_sequence, cge__ops_optional,
};

/* Built once and kept for the life of the process, as a loaded library's
 * static data would be. */
static cge_op_def *builtin_ops;
static cge_converter_def *builtin_converters;
static cge_op_library builtin_library;

void cge__ops_builtin_init(void)
{
    int32_t total = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        int32_t n = 0;
        families[f](&n);
        total += n;
    }
    builtin_ops = calloc((size_t)total + 1, sizeof *builtin_ops);
    builtin_converters = calloc((size_t)total + 1, sizeof *builtin_converters);
    if (!builtin_ops || !builtin_converters) {
        free(builtin_ops);
        free(builtin_converters);
        builtin_ops = NULL;
        builtin_converters = NULL;
        return; /* lookups then report every builtin as missing */
    }
    int32_t k = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
        int32_t n = 0;
        const cge_op_def *defs = families[f](&n);
        for (int32_t i = 0; i < n; i++, k++) {
            builtin_ops[k] = defs[i];
            builtin_converters[k] = (cge_converter_def){
                .front_end = "onnx",
                .source_op = defs[i].name,
                .source_domain = defs[i].domain,
                .since_version = defs[i].since_version,
                .end_version = defs[i].end_version,
                .target_op = defs[i].name,
                .target_domain = defs[i].domain,
            };
        }
    }
    builtin_library = (cge_op_library){
        .api_version = CGE_OP_API_VERSION,
        .name = "builtin",
        .ops = builtin_ops,
        .num_ops = total,
        .converters = builtin_converters,
        .num_converters = total,
    };
    cge__registry_add_library(&builtin_library);
}
