/* Internal to src/onnx: a protobuf wire writer (growable buffer, varints,
 * length-delimited fields, small ONNX messages) and a field walker, so that a
 * rewritten model copies every field it does not change as the original bytes. */
#ifndef CGE_ONNX_WRITE_H
#define CGE_ONNX_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cge/graph.h"

/* An output buffer. A failed allocation sets `oom` and turns every later
 * write into a no-op, so writers check once at the end. */
typedef struct cge__pbw {
    uint8_t *data;
    size_t len, cap;
    bool oom;
} cge__pbw;

void cge__pbw_free(cge__pbw *w);
void cge__pbw_raw(cge__pbw *w, const void *p, size_t n);
void cge__pbw_varint(cge__pbw *w, uint64_t v);
void cge__pbw_tag(cge__pbw *w, uint32_t field, uint32_t wire);
void cge__pbw_int(cge__pbw *w, uint32_t field, int64_t v);           /* wire 0 */
void cge__pbw_float(cge__pbw *w, uint32_t field, float v);           /* wire 5 */
void cge__pbw_bytes(cge__pbw *w, uint32_t field, const void *p, size_t n);
void cge__pbw_string(cge__pbw *w, uint32_t field, const char *s);
/* A nested message: `sub`'s bytes as field `field` (sub is left as is). */
void cge__pbw_message(cge__pbw *w, uint32_t field, const cge__pbw *sub);

/* One field of a message as it lies in the input. */
typedef struct cge__pb_field {
    uint32_t number, wire;
    const uint8_t *start, *end;  /* the whole field, tag included */
    const uint8_t *payload;      /* wire 2: the bytes; others: after the tag */
    size_t payload_len;
    uint64_t varint;             /* wire 0: the value */
} cge__pb_field;

/* The next field of data[*pos..size); false at the end or on malformed
 * framing (*bad set). */
bool cge__pb_next(const uint8_t *data, size_t size, size_t *pos, cge__pb_field *f, bool *bad);

/* ONNX messages the quantizer writes whole (field numbers from onnx.proto). */
typedef struct cge__onnx_attr_w {
    const char *name;
    int kind;                 /* CGE_ATTR_INT, CGE_ATTR_FLOAT */
    int64_t i;
    float f;
} cge__onnx_attr_w;

/* NodeProto: inputs ("" for an absent optional one), outputs, attributes. */
void cge__onnx_write_node(cge__pbw *w, uint32_t field, const char *name, const char *op_type,
                          const char *domain, const char *const *inputs, int n_in,
                          const char *const *outputs, int n_out, const cge__onnx_attr_w *attrs,
                          int n_attrs);
/* TensorProto with raw_data (little-endian, as cge holds it). */
void cge__onnx_write_tensor(cge__pbw *w, uint32_t field, const char *name, cge_dtype dtype,
                            const int64_t *dims, int rank, const void *data, size_t bytes);
/* OperatorSetIdProto. */
void cge__onnx_write_opset(cge__pbw *w, uint32_t field, const char *domain, int64_t version);

#endif
