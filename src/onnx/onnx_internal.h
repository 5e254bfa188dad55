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

typedef struct onnx_ctx {
    const char *label;              /* file name (or "<buffer>") for messages */
    const char *base_dir;           /* external data root; NULL refuses it */
    const cge_onnx_options *opts;   /* never NULL inside the importer */
    onnx_opset *opsets;
    int32_t num_opsets;
    uint64_t uniq;                  /* counter for generated value names */
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
cge_status cge__onnx_decode_tensor(const onnx_ctx *cx, const Onnx__TensorProto *tp,
                                  const char *what, cge_tensor *out);

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
