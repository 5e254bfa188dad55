/* Internal to the model_file layer: the loaded model (a mapping or an owned
 * buffer, the plan rebuilt from it, what it needs of the machine). */
#ifndef CGE_MODEL_FILE_INTERNAL_H
#define CGE_MODEL_FILE_INTERNAL_H

#include <stdbool.h>

#include "cge/model_file.h"
#include "model_file/format.h"

/* A weight as its kernel packed it when the file was written (version 3),
 * in the file's bytes: a borrowed block (cge__block_borrow). */
typedef struct cgm_packed_weight {
    const void *src;              /* the constant it was made from (in weights) */
    const void *key;              /* the kernel's key (in the file) */
    size_t key_bytes;
    void *block;
    size_t bytes;
} cgm_packed_weight;

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
    /* Packed weights to hand to sessions' kernel caches; 0 where the file
     * has none or was packed on a machine with other CPU features. */
    int32_t num_packed;
    cgm_packed_weight *packed;
};

/* Names of the libraries whose operators count as built in (not recorded). */
bool cgm_builtin_origin(const char *origin);

#endif
