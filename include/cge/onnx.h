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
#define CGE_ONNX_MAX_OPSET 18

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

#ifdef __cplusplus
}
#endif
#endif
