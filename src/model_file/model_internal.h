/* Internal to the model_file layer: the loaded model (a mapping or an owned
 * buffer, the plan rebuilt from it, what it needs of the machine). */
#ifndef CGE_MODEL_FILE_INTERNAL_H
#define CGE_MODEL_FILE_INTERNAL_H

#include <stdbool.h>

#include "cge/model_file.h"
#include "model_file/format.h"

struct cge_model {
    int refs;                     /* the caller's and each session's (atomic) */
    void *base;                   /* the file's bytes: a mapping or a buffer */
    size_t size;
    bool mapped;
    uint64_t private_bytes;       /* of the mapping, copied at load (model_load.c) */
    cge_plan *plan;
    const void *weights;          /* base + weights_offset */
    size_t weight_bytes;
    int32_t num_libs;
    const char **lib_names, **lib_paths;   /* into base */
    cge_model_info info;
    char arch[17];
};

/* Names of the libraries whose operators count as built in (not recorded). */
bool cgm_builtin_origin(const char *origin);

#endif
