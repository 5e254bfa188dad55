/* Internal to the ONNX importer: the import context, error helpers, tensor
 * decoding (typed fields, raw data, external files) and the wire checks made
 * before protobuf-c sees the bytes. */
#ifndef CGE_ONNX_INTERNAL_H
#define CGE_ONNX_INTERNAL_H

#include "cge/onnx.h"
#include "cge/op.h"
#include "onnx.pb-c.h"

/* Nested messages deeper than this are refused before unpacking: protobuf-c
 * recurses once per level and would run off the stack on hostile input. */
#define CGE_ONNX_MAX_DEPTH 64

typedef struct onnx_opset {
    const char *domain;     /* "" for the default domain */
    int64_t version;
} onnx_opset;

/* An initializer's raw_data left in the model's buffer by the slim copy
 * (cge__onnx_slim_model): present says the tensor had one. */
typedef struct onnx_raw {
    const uint8_t *data;
    size_t len;
    bool present;
} onnx_raw;

/* A file's bytes, mapped read-only (mapped) or read into malloc'd memory. */
typedef struct onnx_mapping {
    char *path;                     /* the resolved path (external data files) */
    const uint8_t *data;
    size_t size;
    bool mapped;
    int fd;                         /* open while mapped (pread copies), else -1 */
} onnx_mapping;

typedef struct onnx_ctx {
    const char *label;              /* file name (or "<buffer>") for messages */
    const char *base_dir;           /* external data root; NULL refuses it */
    const cge_onnx_options *opts;   /* never NULL inside the importer */
    onnx_opset *opsets;
    int32_t num_opsets;
    uint64_t uniq;                  /* counter for generated value names */
    /* The main graph's initializers' raw_data in the model's buffer, by
     * initializer index (NULL: the unpacked tensors hold their bytes). */
    const onnx_raw *raw;
    size_t num_raw;
    /* The model's buffer is the importer's own mapping: pages whose bytes
     * were copied into the graph may be dropped. */
    bool own_buffer;
    const onnx_mapping *model_map;  /* the model file's mapping where own_buffer */
    /* External data files mapped so far; they stay until the import ends
     * (cge__onnx_unmap_external) where cache_ext is set, else each goes once
     * cge__onnx_decode_tensor has copied its bytes. */
    bool cache_ext;
    onnx_mapping *ext;
    int32_t num_ext, cap_ext;
} onnx_ctx;

/* "[io] <label>: <message>" with CGE_ERR_IO. */
cge_status cge__onnx_io_error(const onnx_ctx *cx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* "[converter] <label>: <message>" with CGE_ERR_UNSUPPORTED: valid ONNX that
 * this build cannot represent (strings, sparse tensors, sequences, ...). */
cge_status cge__onnx_unsupported(const onnx_ctx *cx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ONNX TensorProto.DataType -> cge dtype; unsupported types are [converter]
 * errors naming `what`, unknown numbers [io] errors. */
cge_status cge__onnx_map_dtype(const onnx_ctx *cx, int32_t onnx_type, const char *what,
                              cge_dtype *out);

/* Decode a TensorProto into a dense tensor: out->data is malloc'd (at least
 * one byte) and owned by the caller; out->name is not set. Every size is
 * checked against the shape. */
cge_status cge__onnx_decode_tensor(onnx_ctx *cx, const Onnx__TensorProto *tp,
                                  const char *what, cge_tensor *out);

/* Where a tensor's bytes are after cge__onnx_view_tensor. */
typedef enum onnx_bytes {
    ONNX_BYTES_OWNED,       /* malloc'd: the caller frees them */
    ONNX_BYTES_BORROWED,    /* in the caller's model buffer: left as they are */
    ONNX_BYTES_MAPPED,      /* in the importer's own mapping: pages may be dropped
                               (cge__onnx_drop_pages) once copied */
} onnx_bytes;

/* As cge__onnx_decode_tensor, but out->data points into the model's bytes
 * (`raw`: the tensor's detached raw_data, or NULL) or an external file's
 * mapping where they can be used as they are (little-endian raw data, not
 * bool); *how says who owns them. */
cge_status cge__onnx_view_tensor(onnx_ctx *cx, const Onnx__TensorProto *tp, const char *what,
                                const onnx_raw *raw, cge_tensor *out, onnx_bytes *how);

/* Map the regular file at `path` read-only (or read it where it cannot be
 * mapped); NULL with *why set on failure. */
cge_status cge__onnx_map_file(const char *path, onnx_mapping *m, const char **why);
void cge__onnx_unmap(onnx_mapping *m);
/* The importer's external data mappings go (at the end of an import). */
void cge__onnx_unmap_external(onnx_ctx *cx);
/* A shared block (base/shared_block.h) holding [src, src + n) of one of the
 * importer's mappings (the model file's or an external file's): the file's
 * pages mapped in place where the offset allows (large, 64-byte aligned),
 * else read from the file (pread: the page cache is copied once and the
 * mapping's pages are never touched) or, failing that, copied a slice at a
 * time with each slice's pages dropped. NULL when out of memory. */
void *cge__onnx_copy_mapped(const onnx_ctx *cx, const void *src, size_t n);
/* Drop the whole pages of [p, p + n) from the process's resident memory: the
 * bytes were copied, and a mapped file's page comes back from the page cache
 * if it is read again. Only for the importer's own read-only mappings. */
void cge__onnx_drop_pages(const void *p, size_t n);

/* A copy of the ModelProto bytes whose main graph's initializers hold an
 * empty raw_data, their bytes left in `data` (*raw, by initializer index):
 * protobuf-c then unpacks the small copy without copying the weights.
 * *slim is NULL (no error) where the bytes are unpacked as they are (more
 * than one graph field, framing the slim copy does not follow). */
cge_status cge__onnx_slim_model(const onnx_ctx *cx, const uint8_t *data, size_t size,
                               uint8_t **slim, size_t *slim_size, onnx_raw **raw, size_t *num_raw);

/* Walk the protobuf wire format of `desc` over data[0..size) and refuse
 * nesting deeper than CGE_ONNX_MAX_DEPTH or malformed framing. */
cge_status cge__onnx_check_wire(const onnx_ctx *cx, const uint8_t *data, size_t size,
                               const ProtobufCMessageDescriptor *desc);

/* Converter helpers (onnx_converters.c): "<base>/<suffix>" made unique among
 * dst's values, into buf. */
void cge__onnx_fresh_name(const cge_graph *dst, const char *base, const char *suffix, char *buf,
                          size_t size);
/* The converter-only libraries the importer registers besides its own:
 * opsets 19-21 (onnx_opset21.c) and ONNX Runtime's QOperator ops
 * (onnx_qoperator.c). */
const cge_op_library *cge__onnx_opset21_library(void);
const cge_op_library *cge__onnx_qoperator_library(void);
/* A QuantizeLinear node (opset 21 on) whose zero point is an INT4 / UINT4
 * initializer of gp: its 4-bit output type is written to src as
 * output_dtype, which the initializer's unpacking into int8 would lose. */
cge_status cge__onnx_note_4bit_output(const Onnx__GraphProto *gp, const Onnx__NodeProto *np,
                                      int64_t opset, cge_node *src);
#endif
