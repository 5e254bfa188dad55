/* The protobuf wire writer behind cge's ONNX output: varints, tags,
 * length-delimited fields, the few ONNX messages written whole (nodes,
 * tensors, opset ids), and the field walker that copies the rest verbatim. */
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_write.h"

void cge__pbw_free(cge__pbw *w)
{
    free(w->data);
    memset(w, 0, sizeof *w);
}

static bool grow(cge__pbw *w, size_t n)
{
    if (w->oom)
        return false;
    if (n <= w->cap - w->len)
        return true;
    size_t cap = w->cap ? w->cap : 256;
    while (cap - w->len < n) {
        if (cap > SIZE_MAX / 2) {
            w->oom = true;
            return false;
        }
        cap *= 2;
    }
    uint8_t *d = realloc(w->data, cap);
    if (!d) {
        w->oom = true;
        return false;
    }
    w->data = d;
    w->cap = cap;
    return true;
}

void cge__pbw_raw(cge__pbw *w, const void *p, size_t n)
{
    if (!n || !grow(w, n))
        return;
    memcpy(w->data + w->len, p, n);
    w->len += n;
}

void cge__pbw_varint(cge__pbw *w, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    cge__pbw_raw(w, b, n);
}

void cge__pbw_tag(cge__pbw *w, uint32_t field, uint32_t wire)
{
    cge__pbw_varint(w, ((uint64_t)field << 3) | wire);
}

void cge__pbw_int(cge__pbw *w, uint32_t field, int64_t v)
{
    cge__pbw_tag(w, field, 0);
    cge__pbw_varint(w, (uint64_t)v);   /* int64 negatives take ten bytes, as protobuf writes them */
}

void cge__pbw_float(cge__pbw *w, uint32_t field, float v)
{
    cge__pbw_tag(w, field, 5);
    cge__pbw_raw(w, &v, 4);            /* little-endian hosts only, as the rest of cge */
}

void cge__pbw_bytes(cge__pbw *w, uint32_t field, const void *p, size_t n)
{
    cge__pbw_tag(w, field, 2);
    cge__pbw_varint(w, n);
    cge__pbw_raw(w, p, n);
}

void cge__pbw_string(cge__pbw *w, uint32_t field, const char *s)
{
    cge__pbw_bytes(w, field, s, strlen(s));
}

void cge__pbw_message(cge__pbw *w, uint32_t field, const cge__pbw *sub)
{
    if (sub->oom)
        w->oom = true;
    cge__pbw_bytes(w, field, sub->data, sub->len);
}

static bool read_varint(const uint8_t *data, size_t size, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= size)
            return false;
        uint8_t b = data[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

bool cge__pb_next(const uint8_t *data, size_t size, size_t *pos, cge__pb_field *f, bool *bad)
{
    *bad = false;
    if (*pos >= size)
        return false;
    size_t p = *pos;
    uint64_t tag, len = 0;
    memset(f, 0, sizeof *f);
    f->start = data + p;
    if (!read_varint(data, size, &p, &tag))
        goto malformed;
    f->number = (uint32_t)(tag >> 3);
    f->wire = (uint32_t)(tag & 7);
    switch (f->wire) {
    case 0:
        f->payload = data + p;
        if (!read_varint(data, size, &p, &f->varint))
            goto malformed;
        break;
    case 1: len = 8; break;
    case 5: len = 4; break;
    case 2:
        if (!read_varint(data, size, &p, &len))
            goto malformed;
        break;
    default: goto malformed;   /* groups: onnx.proto has none */
    }
    if (f->wire != 0) {
        if (len > size - p)
            goto malformed;
        f->payload = data + p;
        f->payload_len = (size_t)len;
        p += (size_t)len;
    }
    f->end = data + p;
    *pos = p;
    return true;
malformed:
    *bad = true;
    return false;
}

/* AttributeProto: name 1, f 2, i 3, type 20. */
static void write_attr(cge__pbw *w, uint32_t field, const cge__onnx_attr_w *a)
{
    cge__pbw sub = {0};
    cge__pbw_string(&sub, 1, a->name);
    if (a->kind == CGE_ATTR_FLOAT)
        cge__pbw_float(&sub, 2, a->f);
    else
        cge__pbw_int(&sub, 3, a->i);
    cge__pbw_int(&sub, 20, a->kind);
    cge__pbw_message(w, field, &sub);
    cge__pbw_free(&sub);
}

/* NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7. */
void cge__onnx_write_node(cge__pbw *w, uint32_t field, const char *name, const char *op_type,
                          const char *domain, const char *const *inputs, int n_in,
                          const char *const *outputs, int n_out, const cge__onnx_attr_w *attrs,
                          int n_attrs)
{
    cge__pbw sub = {0};
    for (int i = 0; i < n_in; i++)
        cge__pbw_string(&sub, 1, inputs[i] ? inputs[i] : "");
    for (int i = 0; i < n_out; i++)
        cge__pbw_string(&sub, 2, outputs[i]);
    if (name)
        cge__pbw_string(&sub, 3, name);
    cge__pbw_string(&sub, 4, op_type);
    for (int i = 0; i < n_attrs; i++)
        write_attr(&sub, 5, &attrs[i]);
    if (domain && domain[0])
        cge__pbw_string(&sub, 7, domain);
    cge__pbw_message(w, field, &sub);
    cge__pbw_free(&sub);
}

/* TensorProto: dims 1, data_type 2, string_data 6, name 8, raw_data 9.
 * A string tensor's data are cge_string elements (bytes / 16 of them),
 * written as string_data: ONNX allows no raw_data for strings. */
void cge__onnx_write_tensor(cge__pbw *w, uint32_t field, const char *name, cge_dtype dtype,
                            const int64_t *dims, int rank, const void *data, size_t bytes)
{
    cge__pbw sub = {0};
    for (int i = 0; i < rank; i++)
        cge__pbw_int(&sub, 1, dims[i]);
    cge__pbw_int(&sub, 2, (int64_t)dtype);   /* cge's dtype numbers are ONNX's */
    if (dtype == CGE_STRING) {
        const cge_string *e = data;
        for (size_t i = 0; i < bytes / sizeof(cge_string); i++)
            cge__pbw_bytes(&sub, 6, e[i].size ? e[i].data : "", (size_t)e[i].size);
    }
    cge__pbw_string(&sub, 8, name);
    if (dtype != CGE_STRING)
        cge__pbw_bytes(&sub, 9, data, bytes);
    cge__pbw_message(w, field, &sub);
    cge__pbw_free(&sub);
}

/* OperatorSetIdProto: domain 1, version 2. */
void cge__onnx_write_opset(cge__pbw *w, uint32_t field, const char *domain, int64_t version)
{
    cge__pbw sub = {0};
    cge__pbw_string(&sub, 1, domain);
    cge__pbw_int(&sub, 2, version);
    cge__pbw_message(w, field, &sub);
    cge__pbw_free(&sub);
}
