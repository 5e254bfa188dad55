/* Registers the builtin operator families as one library, "builtin", through
 * the same path a custom library takes, with a 1:1 ONNX converter for each
 * operator (the ONNX importer adds version-specific converters). */
#include <stdlib.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/registry.h"

typedef const cge_op_def *(*family_fn)(int32_t *count);

static const family_fn families[] = {
    cge_ops_binary, cge_ops_unary, cge_ops_matmul, cge_ops_softmax,
    cge_ops_reduce, cge_ops_shape, cge_ops_transform,
    cge_ops_conv, cge_ops_pool, cge_ops_norm, cge_ops_resize, cge_ops_pad,
    cge_ops_rnn,
    cge_ops_gather_scatter, cge_ops_sort_scan,
    cge_ops_generate,
    cge_ops_variadic,
    cge_ops_quant,
    cge_ops_spectral,
    cge_ops_einsum,
    cge_ops_loss, cge_ops_cast_like, cge_ops_linalg, cge_ops_sampling, cge_ops_detection,
    cge_ops_text, cge_ops_random,
    cge_ops_control_flow,
    cge_ops_training,
    cge__ops_fused_elementwise, cge__ops_fused_matmul, cge__ops_fused_conv,
    cge__ops_channels_last, cge__ops_copy,
};

/* Built once and kept for the life of the process, as a loaded library's
 * static data would be. */
static cge_op_def *builtin_ops;
static cge_converter_def *builtin_converters;
static cge_op_library builtin_library;

void cge_ops_builtin_init(void)
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
    cge_registry_add_library(&builtin_library);
}
