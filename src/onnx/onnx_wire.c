/* The protobuf wire format before protobuf-c sees it: a pre-pass that refuses
 * hostile nesting (protobuf-c unpacks nested messages recursively without a
 * depth limit), and a slim copy whose initializers leave their raw_data in
 * the caller's buffer, so that protobuf-c does not copy the weights. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Returns the depth reached, or -1 on malformed framing. */
static int walk(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *desc,
                int depth)
{
    if (depth > CGE_ONNX_MAX_DEPTH)
        return depth;
    int deepest = depth;
    while (p < end) {
        uint64_t tag;
        if (!read_varint(&p, end, &tag))
            return -1;
        uint64_t wire = tag & 7, number = tag >> 3;
        uint64_t skip = 0;
        switch (wire) {
        case 0:
            if (!read_varint(&p, end, &skip))
                return -1;
            skip = 0;
            break;
        case 1: skip = 8; break;
        case 5: skip = 4; break;
        case 2:
            if (!read_varint(&p, end, &skip))
                return -1;
            break;
        default: return -1; /* groups: not used by onnx.proto */
        }
        if (skip > (uint64_t)(end - p))
            return -1;
        if (wire == 2 && desc && number <= UINT32_MAX) {
            const ProtobufCFieldDescriptor *fd =
                protobuf_c_message_descriptor_get_field(desc, (unsigned)number);
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                int d = walk(p, p + skip, fd->descriptor, depth + 1);
                if (d < 0)
                    return -1;
                if (d > deepest)
                    deepest = d;
                if (deepest > CGE_ONNX_MAX_DEPTH)
                    return deepest;
            }
        }
        p += skip;
    }
    return deepest;
}

cge_status cge__onnx_check_wire(const onnx_ctx *cx, const uint8_t *data, size_t size,
                               const ProtobufCMessageDescriptor *desc)
{
    int d = walk(data, data + size, desc, 0);
    if (d < 0)
        return cge__onnx_io_error(cx, "not a valid ONNX model (malformed protobuf framing)");
    if (d > CGE_ONNX_MAX_DEPTH)
        return cge__onnx_io_error(cx, "messages are nested more than %d levels deep (refused)",
                                 CGE_ONNX_MAX_DEPTH);
    return CGE_OK;
}

/* ---- detaching initializers' raw_data ------------------------------------ */

/* Field numbers of onnx.proto that the slim copy follows: ModelProto.graph,
 * GraphProto.initializer, TensorProto.raw_data. */
enum { MODEL_GRAPH = 7, GRAPH_INITIALIZER = 5, TENSOR_RAW_DATA = 9 };

typedef struct slim_ctx {
    uint8_t *out;           /* NULL: only measure */
    size_t pos;
    onnx_raw *raw;          /* one per initializer of the main graph */
    size_t num_raw, cap_raw;
    bool oom;
} slim_ctx;

static void put(slim_ctx *s, const void *p, size_t n)
{
    if (s->out && n)
        memcpy(s->out + s->pos, p, n);
    s->pos += n;
}

static void put_varint(slim_ctx *s, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    put(s, b, n);
}

/* One field at *p: its tag, where the tag ends, and where its payload lies
 * (wire type 2: the bytes after the length); *p moves past the field.
 * false on malformed framing. */
static bool next_field(const uint8_t **p, const uint8_t *end, uint64_t *tag,
                       const uint8_t **tag_end, const uint8_t **payload, uint64_t *len)
{
    if (!read_varint(p, end, tag))
        return false;
    *tag_end = *p;
    uint64_t skip = 0;
    switch (*tag & 7) {
    case 0:
        if (!read_varint(p, end, &skip))
            return false;
        skip = 0;
        break;
    case 1: skip = 8; break;
    case 5: skip = 4; break;
    case 2:
        if (!read_varint(p, end, &skip))
            return false;
        break;
    default: return false;
    }
    if (skip > (uint64_t)(end - *p))
        return false;
    *payload = *p;
    *len = skip;
    *p += skip;
    return true;
}

static bool slim_msg(slim_ctx *s, const uint8_t *p, const uint8_t *end, int level);

/* A nested message written with its new length: measured first, then
 * written (the length precedes the bytes). */
static bool slim_nested(slim_ctx *s, const uint8_t *at, const uint8_t *tag_end,
                        const uint8_t *payload, uint64_t len, int level)
{
    slim_ctx m = {.oom = false};
    if (!slim_msg(&m, payload, payload + len, level))
        return false;
    put(s, at, (size_t)(tag_end - at));
    put_varint(s, m.pos);
    return slim_msg(s, payload, payload + len, level);
}

static bool slim_msg(slim_ctx *s, const uint8_t *p, const uint8_t *end, int level)
{
    while (p < end) {
        const uint8_t *at = p, *tag_end, *payload;
        uint64_t tag, len;
        if (!next_field(&p, end, &tag, &tag_end, &payload, &len))
            return false;
        uint64_t number = tag >> 3;
        bool bytes = (tag & 7) == 2;
        if (bytes && level == 0 && number == MODEL_GRAPH) {
            if (!slim_nested(s, at, tag_end, payload, len, 1))
                return false;
        } else if (bytes && level == 1 && number == GRAPH_INITIALIZER) {
            if (s->out) {
                /* A slot for this initializer, filled if it has raw_data. */
                if (s->num_raw == s->cap_raw) {
                    size_t cap = s->cap_raw ? 2 * s->cap_raw : 64;
                    onnx_raw *r = realloc(s->raw, cap * sizeof *r);
                    if (!r) {
                        s->oom = true;
                        return false;
                    }
                    s->raw = r;
                    s->cap_raw = cap;
                }
                s->raw[s->num_raw++] = (onnx_raw){0};
            }
            if (!slim_nested(s, at, tag_end, payload, len, 2))
                return false;
        } else if (bytes && level == 2 && number == TENSOR_RAW_DATA) {
            /* An empty raw_data stays, so that the tensor still says where
             * its bytes are; the bytes are read from the buffer itself. */
            if (s->out)
                s->raw[s->num_raw - 1] = (onnx_raw){.data = payload, .len = (size_t)len,
                                                    .present = true};
            put(s, at, (size_t)(tag_end - at));
            put_varint(s, 0);
        } else {
            put(s, at, (size_t)(p - at));
        }
    }
    return true;
}

/* How many ModelProto.graph fields the buffer holds (protobuf merges
 * repeated ones, which the slim copy does not follow). */
static int count_graphs(const uint8_t *p, const uint8_t *end)
{
    int n = 0;
    while (p < end) {
        const uint8_t *tag_end, *payload;
        uint64_t tag, len;
        if (!next_field(&p, end, &tag, &tag_end, &payload, &len))
            return -1;
        n += (tag >> 3) == MODEL_GRAPH && (tag & 7) == 2;
    }
    return n;
}

cge_status cge__onnx_slim_model(const onnx_ctx *cx, const uint8_t *data, size_t size,
                               uint8_t **slim, size_t *slim_size, onnx_raw **raw, size_t *num_raw)
{
    *slim = NULL;
    *slim_size = 0;
    *raw = NULL;
    *num_raw = 0;
    if (count_graphs(data, data + size) != 1)
        return CGE_OK; /* unpacked as it is; malformed framing was refused before */
    slim_ctx m = {0};
    if (!slim_msg(&m, data, data + size, 0))
        return CGE_OK;
    slim_ctx s = {.out = malloc(m.pos ? m.pos : 1)};
    if (!s.out)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory",
                         cx && cx->label ? cx->label : "<onnx>");
    if (!slim_msg(&s, data, data + size, 0) || s.pos != m.pos) {
        bool oom = s.oom;
        free(s.out);
        free(s.raw);
        if (oom)
            return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory",
                             cx && cx->label ? cx->label : "<onnx>");
        return CGE_OK;
    }
    *slim = s.out;
    *slim_size = s.pos;
    *raw = s.raw;
    *num_raw = s.num_raw;
    return CGE_OK;
}
