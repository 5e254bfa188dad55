/* The offline model file (.cgm): saving a compiled plan and its weights,
 * loading them elsewhere without recompiling, sessions over a loaded model,
 * and the CPU features a model records. docs/model_file.md. */
#ifndef CGE_MODEL_FILE_H
#define CGE_MODEL_FILE_H

#include "cge/compiler.h"
#include "cge/session.h"

/* Loading maps the file: large weights are used in place, every offset,
 * size and count is checked first, the weights' checksum too (by default),
 * and a truncated, corrupt or foreign file is an [io] error. What the
 * mapping asks of the file afterwards: docs/model_file.md, "A mapped file". */

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the file layout this cge writes (it reads this one and 1 to 3).
 * Version 2 adds the shape program of a plan with symbolic dims; version 3
 * the weights packed for their kernels (cge_model_save_options.pack_weights);
 * version 4 graph attributes (the bodies of If, Loop and Scan). */
#define CGE_MODEL_FORMAT_VERSION 4

typedef struct cge_model cge_model;

typedef struct cge_model_save_options {
    /* Paths of the custom operator libraries loaded for this model; those the
     * plan uses are recorded by name (and path, as a hint) so that loading
     * without them names what is missing. */
    const char *const *op_libraries;
    int32_t num_op_libraries;
    /* The level the plan was compiled at, recorded for inspection (the plan
     * does not keep it); CGE_OPT_DEFAULT: not said. */
    cge_opt_level opt_level;
    /* Also store the weights as their kernels pack them at prepare (packed
     * GEMM panels, oneDNN's blocked layouts), so that a load on a machine
     * with the same CPU features maps them instead of packing; elsewhere
     * the kernels pack at load as without them. Makes the file larger by
     * about the packed weights' size. `cge compile` sets it by default. */
    bool pack_weights;
} cge_model_save_options;

/* Write `plan` (and its constants) to `path` atomically (a temporary file
 * renamed into place). `opts` may be NULL. [io] errors name the path. */
cge_status cge_model_save(const cge_plan *plan, const char *path,
                          const cge_model_save_options *opts);
/* The same into a new buffer (*data, free() it). */
cge_status cge_model_save_buffer(const cge_plan *plan, const cge_model_save_options *opts,
                                 void **data, size_t *size);

/* Whether the load checks the weights' CRC-32 (the header's checksum always
 * covers everything else). Checking reads every weight byte once: a load of
 * resnet18 (45 MiB) takes 3-8 ms with it, 0.6 ms without (docs/model_file.md,
 * "The weights' checksum"). */
typedef enum cge_weights_check {
    CGE_WEIGHTS_CHECK_DEFAULT = 0,  /* check, unless CGE_VERIFY_WEIGHTS=0 is set */
    CGE_WEIGHTS_CHECK_VERIFY = 1,   /* check, whatever the environment says */
    CGE_WEIGHTS_CHECK_SKIP = 2      /* trust the weights (a file you wrote): fastest load */
} cge_weights_check;

typedef struct cge_model_load_options {
    /* A damaged or replaced weights section is an [io] error naming the
     * checksum, unless this is CGE_WEIGHTS_CHECK_SKIP. verify_weights is the
     * 0.1 name, kept so that programs written against it still build: true
     * there is CGE_WEIGHTS_CHECK_VERIFY (set one or the other on zeroed
     * options). */
    union {
        cge_weights_check weights_check;
        bool verify_weights;
    };
    /* CPU features to check the model's requirements against (CGE_CPU_*
     * bits); 0: this machine's. For tests and for "would it load there?". */
    uint64_t cpu_features;
} cge_model_load_options;

/* Map `path` and rebuild the plan: operators and kernels looked up by
 * (domain, op, engine, dtype), every node's shapes checked by its meta, the
 * workspace sizes by its kernel. On failure *out is NULL and the error is
 * [io] (file and what differs), or [schema]/[engine] wrapped in [io] for
 * operators this cge lacks. `opts` may be NULL. */
cge_status cge_model_load(const char *path, const cge_model_load_options *opts, cge_model **out);
/* The same from memory (copied into an aligned buffer the model owns). */
cge_status cge_model_load_buffer(const void *data, size_t size,
                                 const cge_model_load_options *opts, cge_model **out);
/* Release the caller's reference; sessions holding the model keep it alive
 * until they remove it. NULL is a no-op. */
void cge_model_destroy(cge_model *m);

/* The loaded plan (steps, values, statistics as compiled). Valid while `m` is. */
const cge_plan *cge_model_plan(const cge_model *m);
/* The constant blob (the file's weights, mapped) and its size. */
const void *cge_model_weights(const cge_model *m);
size_t cge_model_weight_bytes(const cge_model *m);

typedef struct cge_model_info {
    uint32_t format_version;
    uint32_t engine_version;        /* major << 16 | minor << 8 | patch */
    const char *arch;               /* "x86_64" */
    uint64_t cpu_required;          /* CGE_CPU_* bits the plan's kernels assume */
    uint64_t cpu_compiled_on;       /* features of the machine that compiled it */
    uint64_t file_bytes;
    uint64_t weights_offset;        /* in the file (page-aligned) */
    uint32_t meta_crc32, weights_crc32;
    bool mapped;                    /* weights used in place from a file mapping */
    double load_ms;                 /* map + validate + rebuild */
    int32_t opt_level;              /* cge_opt_level the plan was compiled at */
    int32_t num_op_libraries;
    bool weights_verified;          /* the weights' checksum was checked at load */
    /* Bytes of the mapping the loader made private (copied) at load: the
     * metadata and the small constants kernels read as values, so that a
     * file changed under the mapping cannot change them. */
    uint64_t private_bytes;
} cge_model_info;
cge_status cge_model_get_info(const cge_model *m, cge_model_info *out);
/* Custom operator library i the model needs: its name and the path it was
 * loaded from when compiled ("" if unknown). false if out of range. */
bool cge_model_op_library(const cge_model *m, int32_t i, const char **name, const char **path);

/* Run a loaded model in a session under `graph_id` (the session keeps a
 * reference). Its input shapes are those it was compiled for. Run modes:
 * PLAN and REPLAY as for graphs; EAGER runs the plan's steps one at a time,
 * synchronizing after each (a loaded model keeps no unoptimised graph). */
cge_status cge_session_add_model(cge_session *s, uint32_t graph_id, cge_model *m);

/* ---- CPU features ----------------------------------------------------------- */

enum {
    CGE_CPU_SSE2 = 1u << 0, CGE_CPU_SSE3 = 1u << 1, CGE_CPU_SSSE3 = 1u << 2,
    CGE_CPU_SSE4_1 = 1u << 3, CGE_CPU_SSE4_2 = 1u << 4, CGE_CPU_POPCNT = 1u << 5,
    CGE_CPU_AVX = 1u << 6, CGE_CPU_AVX2 = 1u << 7, CGE_CPU_FMA = 1u << 8,
    CGE_CPU_F16C = 1u << 9, CGE_CPU_BMI2 = 1u << 10, CGE_CPU_AVX512F = 1u << 11,
    CGE_CPU_AVX512BW = 1u << 12, CGE_CPU_AVX512VL = 1u << 13, CGE_CPU_AVX512VNNI = 1u << 14,
    CGE_CPU_AVX512BF16 = 1u << 15,
    CGE_CPU_NUM_FEATURES = 16
};
/* This machine's features. */
uint64_t cge_cpu_features(void);
/* Writes the names of the bits of `features` ("sse4_2,avx2") into buf. */
char *cge_cpu_features_str(uint64_t features, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
