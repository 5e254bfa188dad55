/* float32 convolution through oneDNN's C API, when the build has it
 * (CGE_HAVE_DNNL): a primitive made once per node (plain NCHW activations and
 * OIHW weights, so no reorders), run on the calling thread with oneDNN's
 * OpenMP team limited to the engine's thread budget. */
#ifndef CGE_OPS_DNNL_CONV_H
#define CGE_OPS_DNNL_CONV_H

#include <stddef.h>
#include <stdint.h>

#include "cge/status.h"

typedef struct cge_dnnl_conv cge_dnnl_conv;

/* One forward convolution: N, C, M, G and 1 to 3 spatial dims, each with its
 * input and output size, kernel, stride, dilation (1 = none) and pads. */
typedef struct cge_dnnl_conv_desc {
    int64_t N, C, M, G;
    int32_t nsp;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int has_bias;
} cge_dnnl_conv_desc;

/* Whether this build has oneDNN. */
int cge_dnnl_available(void);
/* Make the primitive; CGE_ERR_UNSUPPORTED when oneDNN is absent or refuses. */
cge_status cge_dnnl_conv_create(const cge_dnnl_conv_desc *d, cge_dnnl_conv **out);
/* Scratch bytes the primitive needs from the caller. */
size_t cge_dnnl_conv_scratch_size(const cge_dnnl_conv *c);
/* Run on the calling thread with at most `threads` OpenMP threads. */
cge_status cge_dnnl_conv_run(cge_dnnl_conv *c, const float *x, const float *w, const float *b,
                             float *y, void *scratch, int threads);
void cge_dnnl_conv_destroy(cge_dnnl_conv *c);

#endif
