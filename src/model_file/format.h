/* The .cgm layout on disk: header, section table and fixed-size records, all
 * little-endian and naturally aligned (sections start at multiples of 8), so
 * that the loader reads them in place from the mapping. docs/model_file.md. */
#ifndef CGE_MODEL_FILE_FORMAT_H
#define CGE_MODEL_FILE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "cge/model_file.h"

#define CGM_MAGIC "CGEMODEL"
#define CGM_BYTE_ORDER 0x01020304u
#define CGM_WEIGHTS_ALIGN 4096u   /* page: the mapping's base keeps it aligned */

/* Everything before the weights is covered by meta_crc32 (computed with
 * that field zero); the weights by weights_crc32, checked on request. */
typedef struct cgm_header {
    char magic[8];
    uint32_t format_version;
    uint32_t header_bytes;        /* sizeof(cgm_header) */
    uint32_t byte_order;          /* CGM_BYTE_ORDER as the writer stored it */
    uint32_t engine_version;      /* major << 16 | minor << 8 | patch */
    uint64_t file_bytes;
    uint32_t num_sections;
    uint32_t meta_crc32;
    uint64_t section_table;       /* offset of num_sections cgm_section entries */
    uint64_t meta_end;            /* == weights_offset */
    uint64_t weights_offset;
    uint64_t weights_bytes;
    uint32_t weights_crc32;
    uint32_t flags;               /* 0 */
    uint64_t cpu_required;
    uint64_t cpu_compiled_on;
    char arch[16];
    uint8_t reserved[16];
} cgm_header;

typedef enum cgm_section_kind {
    CGM_SEC_STRINGS = 1,   /* NUL-terminated strings; references are byte offsets */
    CGM_SEC_MODEL = 2,     /* one cgm_model */
    CGM_SEC_VALUES = 3,    /* cgm_value[num_values] */
    CGM_SEC_STEPS = 4,     /* cgm_step[num_steps] */
    CGM_SEC_INDICES = 5,   /* int32: step inputs/outputs/waits, graph inputs/outputs */
    CGM_SEC_ATTRS = 6,     /* cgm_attr[] */
    CGM_SEC_AUX = 7,       /* attribute arrays and tensors, 8-byte aligned items */
    CGM_SEC_LIBS = 8,      /* cgm_lib[] */
    /* Version 2: a symbolic plan's shape program (docs/model_file.md):
     * cgm_symbol[], record 0 a header ({CGM_SHAPES_MAGIC, number of named
     * symbols}), then one record per symbol, in id order. Empty (or absent,
     * version 1): the plan is static. */
    CGM_SEC_SHAPES = 9,
    /* Version 3: weights packed for their kernels at compile time
     * (docs/model_file.md, "Packed weights"): cgm_packed[], record 0 a
     * header ({CGM_PACKED_MAGIC, ...}: the region after the weights that
     * holds them, its CRC-32 and the CPU features they were packed on),
     * then one record per packed weight. Absent or empty: kernels pack at
     * load, as for versions 1 and 2. */
    CGM_SEC_PACKED = 10,
    CGM_SEC_COUNT = 11
} cgm_section_kind;

/* The first version the loader still reads (version 1: static plans only). */
#define CGM_FORMAT_OLDEST 1
#define CGM_SHAPES_MAGIC 0x53594d42u   /* "BMYS" on disk: symbols follow */
#define CGM_PACKED_MAGIC 0x4b434150u   /* "PACK" on disk: packed weights follow */
#define CGM_PACKED_KEY_MAX 4096u       /* bytes of a kernel's key for one packed weight */

typedef struct cgm_section {
    uint32_t kind;
    uint32_t record_bytes;        /* size of one record (1 for byte sections) */
    uint64_t offset;
    uint64_t bytes;
    uint64_t count;               /* records: count * record_bytes == bytes */
} cgm_section;

typedef struct cgm_model {
    uint32_t graph_name;          /* string */
    int32_t num_values, num_steps;
    int32_t num_inputs, num_outputs;
    int32_t num_streams, num_events;
    uint32_t inputs_first, outputs_first;   /* in INDICES: plan value per graph input/output */
    int32_t nodes_in, num_subgraphs, num_conversions;
    int32_t opt_level;
    int32_t num_attrs;
    uint64_t arena_bytes, constant_bytes;
    uint64_t lower_bound_bytes, naive_bytes;
    double compile_ms;
    double stage_ms[4];
} cgm_model;

typedef struct cgm_value {
    uint32_t name;
    int32_t dtype, rank, format, memory_space, storage;
    int32_t alias_of, first_step, last_step, input_index, output_index;
    uint32_t pad;
    int64_t dims[8];
    uint64_t bytes, offset;
} cgm_value;

typedef struct cgm_step {
    uint32_t name, op, domain, engine;   /* strings */
    int32_t kernel_dtype;         /* the dtype its kernel was chosen by */
    int32_t stream;
    int32_t num_inputs, num_outputs;
    uint32_t io_first;            /* INDICES: inputs (-1 absent), then outputs */
    int32_t num_waits;
    uint32_t waits_first;         /* INDICES: events to wait for */
    int32_t record;               /* event recorded after it, -1 none */
    uint32_t attr_first;          /* ATTRS */
    int32_t num_attrs;
    int32_t ws_last;              /* last step its workspace is live */
    uint32_t pad;
    uint64_t ws_offset, ws_bytes;
} cgm_step;

typedef struct cgm_attr {
    uint32_t name;
    int32_t kind;                 /* cge_attr_kind */
    int64_t i;
    float f;
    uint32_t s;                   /* STRING: string */
    int64_t n;                    /* list length (TENSOR: 1) */
    uint64_t aux;                 /* AUX offset of the list (or of the cgm_tensor) */
} cgm_attr;

typedef struct cgm_tensor {
    int32_t dtype, rank;
    int64_t dims[8];
    uint64_t data;                /* AUX offset */
    uint64_t bytes;
} cgm_tensor;

/* A graph an attribute holds (If, Loop and Scan bodies; version 4), in AUX:
 * a GRAPH attribute's aux is one cgm_graph, a GRAPHS attribute's n of them.
 * Its arrays lie in AUX too; names are strings (0: ""). Nested bodies nest
 * the same way. */
typedef struct cgm_graph {
    uint32_t name;
    uint32_t num_inputs, num_outputs, num_constants, num_nodes;
    uint32_t pad;
    uint64_t inputs;              /* cgm_graph_input[num_inputs] */
    uint64_t outputs;             /* uint32_t names[num_outputs] */
    uint64_t constants;           /* cgm_graph_constant[num_constants] */
    uint64_t nodes;               /* cgm_graph_node[num_nodes] */
} cgm_graph;

typedef struct cgm_graph_input {
    uint32_t name;
    int32_t dtype, value_type, rank;  /* value_type: cge_value_type */
    int64_t dims[8];
} cgm_graph_input;

typedef struct cgm_graph_constant {
    uint32_t name, pad;
    cgm_tensor t;
} cgm_graph_constant;

typedef struct cgm_graph_node {
    uint32_t name, op, domain;
    uint32_t num_inputs, num_outputs, num_attrs;
    uint64_t inputs, outputs;     /* uint32_t names ("": an absent input) */
    uint64_t attrs;               /* cgm_attr[num_attrs] */
} cgm_graph_node;

/* How deep bodies may nest in a file (a reader refuses deeper ones). */
#define CGM_GRAPH_DEPTH_MAX 16

typedef struct cgm_lib {
    uint32_t name, path;          /* strings */
} cgm_lib;

/* A record of the shape program's section: the header {magic, count}, or a
 * symbol {name (string), 0}. */
typedef struct cgm_symbol {
    uint32_t a, b;
} cgm_symbol;

/* A record of the packed weights' section. The header (record 0):
 * magic = CGM_PACKED_MAGIC, src = the region's offset in the file (right
 * after the weights, 64-byte aligned), bytes = its size (to the file's end),
 * crc32 = its CRC-32, key = the CPU features (cge_cpu_features) of the
 * machine that packed them. Each weight after it: the constant it was made
 * from (`src`, an offset into the weights), the kernel's key for it
 * (`key_bytes` at AUX offset `key`), and its bytes (`bytes` at file offset
 * `data`, 64-byte aligned, with 64 bytes free before it). */
typedef struct cgm_packed {
    uint32_t magic;               /* header: CGM_PACKED_MAGIC; weights: 0 */
    uint32_t key_bytes;
    uint64_t src;
    uint64_t key;
    uint64_t data;
    uint64_t bytes;
    uint32_t crc32;               /* header only */
    uint32_t pad;
} cgm_packed;

_Static_assert(sizeof(cgm_header) == 128, "cgm_header is 128 bytes");
_Static_assert(sizeof(cgm_section) == 32, "cgm_section is 32 bytes");
_Static_assert(sizeof(cgm_model) % 8 == 0, "cgm_model keeps 8-byte alignment");
_Static_assert(sizeof(cgm_value) == 128, "cgm_value is 128 bytes");
_Static_assert(sizeof(cgm_step) == 80, "cgm_step is 80 bytes");
_Static_assert(sizeof(cgm_attr) == 40, "cgm_attr is 40 bytes");
_Static_assert(sizeof(cgm_tensor) == 88, "cgm_tensor is 88 bytes");
_Static_assert(sizeof(cgm_symbol) == 8, "cgm_symbol is 8 bytes");
_Static_assert(sizeof(cgm_packed) == 48, "cgm_packed is 48 bytes");

/* CRC-32 (IEEE 802.3, as zlib), continued from `crc` (0 to start); carry-less
 * multiplication (PCLMULQDQ) where the CPU has it. */
uint32_t cgm_crc32(uint32_t crc, const void *data, size_t n);
/* The same by tables only (the reference the tests hold the fast path to). */
uint32_t cgm_crc32_table(uint32_t crc, const void *data, size_t n);
/* The header's CRC over [0, meta_end) with the crc field taken as zero;
 * `data` holds at least meta_end bytes. */
uint32_t cgm_meta_crc(const void *data, uint64_t meta_end);

/* Features the library's kernels were compiled to assume (-march). */
uint64_t cgm_cpu_build_features(void);
const char *cgm_arch(void);

#endif
