/* A pre-pass over the protobuf wire format: protobuf-c unpacks nested
 * messages recursively without a depth limit, so hostile input (a graph in an
 * attribute in a graph ... thousands deep) is refused here first. */
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
