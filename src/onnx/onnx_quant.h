/* Internal to src/onnx: what the quantizer (onnx_quantize.c) asks of its
 * calibration (onnx_calibrate.c): the ranges of named float tensors over the
 * calibration samples, by the chosen method. */
#ifndef CGE_ONNX_QUANT_H
#define CGE_ONNX_QUANT_H

#include "cge/onnx.h"

typedef struct cge__qrange {
    float rmin, rmax;   /* the range to quantize to (method applied) */
    float min, max;     /* what was observed */
    bool found;         /* the tensor exists in the imported graph and is float32 */
} cge__qrange;

/* Run the model (serialised in model[0..size), external data under
 * base_dir) on opts->samples, which the caller has checked against the
 * model's inputs, and fill out[i] for names[i] (graph inputs or values
 * produced by nodes). A name cge's graph does not have, or whose values are
 * not float32, gets found = false. */
cge_status cge__onnx_calibrate(const void *model, size_t size, const char *base_dir,
                              const cge_quantize_options *opts, const char *const *names,
                              int32_t n, cge__qrange *out);

/* Input `name` of calibration sample k; NULL if the sample does not name it. */
const cge_tensor *cge__quant_sample(const cge_quantize_options *o, int32_t k, const char *name);

/* The threshold on |x| that a method picks from a histogram of |x| with
 * `bins` bins of width `width` (exposed for the tests through the ranges). */
double cge__calib_threshold(const uint64_t *hist, int bins, double width, cge_quant_method m,
                            double percentile);

#endif
