/* The ONNX importer: a ModelProto (file or buffer) becomes a cge_graph, each
 * node mapped through the registry's converters for its domain and opset;
 * import options and the importer's own converters. */
#ifndef CGE_ONNX_H
#define CGE_ONNX_H

#include "cge/graph.h"

/* Malformed input is an [io] error, valid but unsupported content a
 * [converter] error; neither ever crashes. */

/* The newest default-domain (ai.onnx) opset the importer knows; a model
 * that imports a newer one is a [converter] error naming it, since its
 * operators may mean something this cge does not implement. */
#define CGE_ONNX_MAX_OPSET 21

#ifdef __cplusplus
extern "C" {
#endif

/* Replaces the declared shape of a graph input (e.g. to fix dynamic dims, or
 * to give a shape to an input that declares none). */
typedef struct cge_onnx_input_shape {
    const char *name;
    cge_shape shape;
} cge_onnx_input_shape;

/* Gives a symbolic dimension (dim_param, "batch") a value everywhere in the
 * graph's inputs. */
typedef struct cge_onnx_dim_value {
    const char *dim_param;
    int64_t value;
} cge_onnx_dim_value;

typedef struct cge_onnx_options {
    const cge_onnx_input_shape *input_shapes;
    int32_t num_input_shapes;
    const cge_onnx_dim_value *dim_values;
    int32_t num_dim_values;
} cge_onnx_options;

/* Import the model at `path`; external data files are resolved relative to
 * its folder. `opts` may be NULL. On success *out is a new graph (the caller
 * destroys it); on failure *out is NULL. */
cge_status cge_onnx_import_file(const char *path, const cge_onnx_options *opts, cge_graph **out);
/* The same from memory. `base_dir` is the folder external data is resolved
 * against; NULL refuses every external-data reference. */
cge_status cge_onnx_import_buffer(const void *data, size_t size, const char *base_dir,
                                  const cge_onnx_options *opts, cge_graph **out);

/* Register the importer's version-specific converters (library
 * "onnx_converters": older opsets mapped onto the current definitions).
 * The import functions call it; it runs once, thread-safely. */
cge_status cge_onnx_register_converters(void);


/* ---- quantization (cge quantize) --------------------------------------- */

/* How activation ranges come from the calibration data. */
typedef enum cge_quant_method {
    CGE_QUANT_MINMAX = 0,      /* the observed minimum and maximum */
    CGE_QUANT_ENTROPY = 1,     /* TensorRT's KL-divergence threshold on a histogram of |x| */
    CGE_QUANT_PERCENTILE = 2   /* the `percentile` of |x| (default 99.999) */
} cge_quant_method;

typedef struct cge_quantize_options {
    /* Calibration data: num_samples samples of inputs_per_sample named host
     * tensors each, sample-major (samples[k * inputs_per_sample + i]). Every
     * sample names every graph input, with the same shapes in every sample.
     * Needed for the QDQ form; ignored by weights_only_bits. */
    const cge_tensor *samples;
    int32_t num_samples;
    int32_t inputs_per_sample;
    cge_quant_method method;
    /* Weights: per output channel (axis 0 of Conv, the output axis of Gemm
     * and MatMul) instead of one scale per tensor. Needs opset 13. */
    bool per_channel;
    double percentile;          /* CGE_QUANT_PERCENTILE: 0 means 99.999 */
    /* 0: the QDQ form. 8 or 4: only MatMuls with constant 2-D weights become
     * com.microsoft MatMulNBits (block-wise weights, float activations); no
     * calibration. */
    int32_t weights_only_bits;
    int32_t block_size;         /* MatMulNBits block (power of two >= 16): 0 means 32 */
    /* Nodes (by ONNX node name) left in float. */
    const char *const *exclude;
    int32_t num_exclude;
    int num_threads;            /* calibration runs: 0 means cge's default */
    /* With weights_only_bits: 0 writes com.microsoft MatMulNBits; 1 writes
     * standard ONNX instead, MatMul(A, DequantizeLinear(W)) with W uint4 /
     * uint8 [K, N], block_size blocks along K (axis 0) and per-block scales
     * and zero points (opset 21: the model's default opset is raised to it). */
    int32_t weights_only_format;
    /* QDQ activations: 0 uint8 with a zero point (ONNX Runtime's default), 1
     * int8 with a zero point, 2 int8 symmetric (zero point 0, scale
     * max|x| / 127; Relu/Clip are then not folded into the range). */
    int32_t activation_type;
} cge_quantize_options;

/* What cge_onnx_quantize did, for the caller to print. */
typedef struct cge_quantize_report {
    int32_t nodes_quantized;    /* operators now reading DequantizeLinear outputs / MatMulNBits */
    int32_t activations;        /* activation tensors given a QuantizeLinear/DequantizeLinear pair */
    int32_t weights;            /* constant tensors stored as integers */
    int32_t relu_folded;        /* Relu/Clip absorbed into the range of the tensor before them */
    int32_t nodes_left_float;   /* quantizable operators kept in float (excluded, not float data) */
    int64_t opset_in, opset_out;
    char warning[256];          /* "" or one line worth printing */
} cge_quantize_report;

/* Read the float model at `path_in`, calibrate it by running it through cge
 * on opts->samples, and write to `path_out` a standard QDQ ONNX model
 * (ONNX Runtime's QDQ conventions: u8 activations with zero points, s8
 * symmetric weights, int32 biases with scale x_scale * w_scale), or the
 * MatMulNBits form. Every part of the model it does not rewrite is copied
 * byte for byte. `report` may be NULL. Errors: [io] for files and
 * calibration data, [converter] for models it cannot quantize, and the
 * layers of the calibration run (meta, kernel, ...). */
cge_status cge_onnx_quantize(const char *path_in, const char *path_out,
                             const cge_quantize_options *opts, cge_quantize_report *report);

#ifdef __cplusplus
}
#endif
#endif
