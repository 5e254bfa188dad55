/* ONNX tensors to dense cge tensors: dtype mapping, raw and typed fields,
 * external data files (confined to the model's folder), with every size
 * checked against the shape before anything is copied. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "onnx/onnx_internal.h"

static cge_status layered(cge_layer layer, cge_status st, const onnx_ctx *cx, const char *fmt,
                          va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return cge_error(layer, st, "%s: %s", cx && cx->label ? cx->label : "<onnx>", msg);
}

cge_status cge__onnx_io_error(const onnx_ctx *cx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cge_status st = layered(CGE_LAYER_IO, CGE_ERR_IO, cx, fmt, ap);
    va_end(ap);
    return st;
}

cge_status cge__onnx_unsupported(const onnx_ctx *cx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cge_status st = layered(CGE_LAYER_CONVERTER, CGE_ERR_UNSUPPORTED, cx, fmt, ap);
    va_end(ap);
    return st;
}

cge_status cge__onnx_map_dtype(const onnx_ctx *cx, int32_t t, const char *what, cge_dtype *out)
{
    switch (t) {
    case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 9: case 10: case 11: case 12:
    case 13: case 16:
        /* cge's dtype numbers are ONNX's. */
        *out = (cge_dtype)t;
        return CGE_OK;
    case 8:
        return cge__onnx_unsupported(cx, "%s: string tensors are not supported", what);
    case 14: case 15:
        return cge__onnx_unsupported(cx, "%s: complex tensors are not supported", what);
    case 21: case 22:
        /* UINT4 / INT4: cge has no 4-bit dtype; tensors are unpacked into
         * one byte per value (cge__onnx_decode_tensor) */
        *out = t == 21 ? CGE_U8 : CGE_I8;
        return CGE_OK;
    case 17: case 18: case 19: case 20:
        return cge__onnx_unsupported(cx, "%s: element type %d (8-bit float) is not supported",
                                     what, (int)t);
    case 0:
        return cge__onnx_io_error(cx, "%s: element type is missing (UNDEFINED)", what);
    default:
        return cge__onnx_io_error(cx, "%s: unknown element type %d", what, (int)t);
    }
}

/* Which typed field carries a dtype's values, as the ONNX schema says. */
typedef enum { F_FLOAT, F_DOUBLE, F_INT32, F_INT64, F_UINT64 } typed_field;

static typed_field field_of(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return F_FLOAT;
    case CGE_F64: return F_DOUBLE;
    case CGE_I64: return F_INT64;
    case CGE_U32: case CGE_U64: return F_UINT64;
    default: return F_INT32; /* int8/16/32, uint8/16, bool, float16, bfloat16 (bits) */
    }
}

static const char *field_name(typed_field f)
{
    static const char *const names[] = {"float_data", "double_data", "int32_data", "int64_data",
                                        "uint64_data"};
    return names[f];
}

static size_t field_count(const Onnx__TensorProto *tp, typed_field f)
{
    switch (f) {
    case F_FLOAT: return tp->n_float_data;
    case F_DOUBLE: return tp->n_double_data;
    case F_INT32: return tp->n_int32_data;
    case F_INT64: return tp->n_int64_data;
    case F_UINT64: return tp->n_uint64_data;
    }
    return 0;
}

static void copy_typed(const Onnx__TensorProto *tp, cge_dtype t, size_t n, void *dst)
{
    if (n == 0)
        return; /* the typed arrays may be NULL */
    switch (t) {
    case CGE_F32: memcpy(dst, tp->float_data, n * sizeof(float)); break;
    case CGE_F64: memcpy(dst, tp->double_data, n * sizeof(double)); break;
    case CGE_I64: memcpy(dst, tp->int64_data, n * sizeof(int64_t)); break;
    case CGE_U64: memcpy(dst, tp->uint64_data, n * sizeof(uint64_t)); break;
    case CGE_U32:
        for (size_t i = 0; i < n; i++)
            ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i];
        break;
    case CGE_I32: memcpy(dst, tp->int32_data, n * sizeof(int32_t)); break;
    case CGE_I16: case CGE_U16: case CGE_F16: case CGE_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = (uint16_t)tp->int32_data[i];
        break;
    case CGE_I8: case CGE_U8:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = (uint8_t)tp->int32_data[i];
        break;
    case CGE_BOOL:
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)dst)[i] = tp->int32_data[i] != 0;
        break;
    default: break;
    }
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end || *end)
        return false;
    *out = v;
    return true;
}

/* A relative path whose components never climb above its root. */
static bool path_is_confined(const char *loc)
{
    if (!loc[0] || loc[0] == '/')
        return false;
    const char *p = loc;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return false;
        if (!slash)
            break;
        p = slash + 1;
    }
    return true;
}

static cge_status read_external(const onnx_ctx *cx, const Onnx__TensorProto *tp, const char *what,
                                size_t need, void *dst)
{
    const char *loc = NULL;
    uint64_t offset = 0, length = 0;
    bool has_length = false;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = tp->external_data[i];
        if (!e || !e->key)
            continue;
        if (!strcmp(e->key, "location"))
            loc = e->value;
        else if (!strcmp(e->key, "offset") && !parse_u64(e->value, &offset))
            return cge__onnx_io_error(cx, "%s: external data offset '%s' is not a number", what,
                                     e->value ? e->value : "");
        else if (!strcmp(e->key, "length")) {
            if (!parse_u64(e->value, &length))
                return cge__onnx_io_error(cx, "%s: external data length '%s' is not a number",
                                         what, e->value ? e->value : "");
            has_length = true;
        }
    }
    if (!loc || !loc[0])
        return cge__onnx_io_error(cx, "%s: external data without a location", what);
    if (!cx->base_dir)
        return cge__onnx_io_error(cx, "%s: external data '%s' refused: the model was imported "
                                     "from memory without a base directory", what, loc);
    if (!path_is_confined(loc))
        return cge__onnx_io_error(cx, "%s: external data location '%s' is absolute or leaves the "
                                     "model's folder (refused)", what, loc);
    size_t blen = strlen(cx->base_dir), llen = strlen(loc);
    char *path = malloc(blen + llen + 2);
    if (!path)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory", what);
    snprintf(path, blen + llen + 2, "%s/%s", cx->base_dir, loc);
    /* Symbolic links may still lead out: compare the resolved paths too. */
    char *real_base = realpath(cx->base_dir, NULL);
    char *real_file = realpath(path, NULL);
    free(path);
    cge_status st = CGE_OK;
    if (!real_base || !real_file) {
        st = cge__onnx_io_error(cx, "%s: cannot open external data '%s': %s", what, loc,
                               strerror(errno));
    } else {
        size_t rb = strlen(real_base);
        bool inside = !strncmp(real_file, real_base, rb) &&
                      (real_file[rb] == '/' || (rb == 1 && real_base[0] == '/'));
        if (!inside)
            st = cge__onnx_io_error(cx, "%s: external data '%s' resolves outside the model's "
                                       "folder (refused)", what, loc);
    }
    FILE *f = NULL;
    size_t file_size = 0;
    if (!st) {
        const char *why = NULL;
        f = cge__fopen_regular(real_file, &file_size, &why);
        if (!f)
            st = cge__onnx_io_error(cx, "%s: cannot read external data '%s' (%s)", what, loc, why);
    }
    if (!st) {
        uint64_t fsize = (uint64_t)file_size;
        if (offset > fsize)
            st = cge__onnx_io_error(cx, "%s: external data offset %llu is past the end of '%s' "
                                       "(%llu bytes)", what, (unsigned long long)offset, loc,
                                   (unsigned long long)fsize);
        else if (!has_length)
            length = fsize - offset;
        if (!st && length > fsize - offset)
            st = cge__onnx_io_error(cx, "%s: external data claims %llu bytes at offset %llu; "
                                       "'%s' holds %llu", what, (unsigned long long)length,
                                   (unsigned long long)offset, loc, (unsigned long long)fsize);
        if (!st && length != need)
            st = cge__onnx_io_error(cx, "%s: external data holds %llu bytes; the shape needs %zu",
                                   what, (unsigned long long)length, need);
    }
    if (!st && need) {
        if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fread(dst, 1, need, f) != need)
            st = cge__onnx_io_error(cx, "%s: reading %zu bytes of external data '%s' failed",
                                   what, need, loc);
    }
    if (f)
        fclose(f);
    free(real_base);
    free(real_file);
    return st;
}

/* UINT4 / INT4 (ONNX 1.16): two values a byte, the first in the low nibble,
 * in raw_data, external data or one byte per int32_data entry; unpacked
 * into uint8 / int8 (sign-extended), out->shape already set. */
static cge_status decode_4bit(const onnx_ctx *cx, const Onnx__TensorProto *tp, const char *what,
                              size_t numel, bool sgn, cge_tensor *out)
{
    size_t packed = (numel + 1) / 2;
    bool external = tp->has_data_location &&
                    tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    bool raw = tp->has_raw_data && !external;
    if (!external && !raw && tp->n_int32_data != packed)
        return cge__onnx_io_error(cx, "%s: int32_data holds %zu packed bytes; %zu 4-bit values "
                                     "need %zu", what, tp->n_int32_data, numel, packed);
    if (raw && tp->raw_data.len != packed)
        return cge__onnx_io_error(cx, "%s: raw_data holds %zu bytes; %zu 4-bit values need %zu",
                                 what, tp->raw_data.len, numel, packed);
    uint8_t *bytes = malloc(packed ? packed : 1), *data = malloc(numel ? numel : 1);
    if (!bytes || !data) {
        free(bytes);
        free(data);
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory (%zu bytes)", what,
                         numel);
    }
    cge_status st = CGE_OK;
    if (external)
        st = read_external(cx, tp, what, packed, bytes);
    else if (raw && packed)
        memcpy(bytes, tp->raw_data.data, packed);
    else
        for (size_t i = 0; i < packed; i++)
            bytes[i] = (uint8_t)tp->int32_data[i];
    for (size_t i = 0; !st && i < numel; i++) {
        int v = (bytes[i / 2] >> (4 * (i & 1))) & 15;
        data[i] = (uint8_t)(sgn && v >= 8 ? v - 16 : v);
    }
    free(bytes);
    if (st) {
        free(data);
        return st;
    }
    out->dtype = sgn ? CGE_I8 : CGE_U8;
    out->data = data;
    out->bytes = numel;
    return CGE_OK;
}

cge_status cge__onnx_decode_tensor(const onnx_ctx *cx, const Onnx__TensorProto *tp,
                                  const char *what, cge_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (!tp)
        return cge__onnx_io_error(cx, "%s: tensor is missing", what);
    if (!tp->has_data_type)
        return cge__onnx_io_error(cx, "%s: tensor has no data type", what);
    cge_dtype dt;
    cge_status st = cge__onnx_map_dtype(cx, tp->data_type, what, &dt);
    if (st)
        return st;
    if (tp->segment)
        return cge__onnx_unsupported(cx, "%s: segmented tensors are not supported", what);
    if (tp->n_dims > CGE_MAX_RANK)
        return cge__onnx_unsupported(cx, "%s: rank %zu is above cge's limit of %d", what,
                                    tp->n_dims, CGE_MAX_RANK);
    size_t esize = cge_dtype_size(dt);
    uint64_t numel = 1;
    out->shape.rank = (int32_t)tp->n_dims;
    for (size_t i = 0; i < tp->n_dims; i++) {
        int64_t d = tp->dims[i];
        if (d < 0)
            return cge__onnx_io_error(cx, "%s: dimension %zu is negative (%lld)", what, i,
                                     (long long)d);
        /* Cap well below overflow of numel * esize. */
        if (d && numel > ((uint64_t)1 << 60) / (uint64_t)d / esize)
            return cge__onnx_io_error(cx, "%s: shape has too many elements", what);
        numel *= (uint64_t)d;
        out->shape.dims[i] = d;
    }
    size_t need = (size_t)numel * esize;
    if (tp->data_type == 21 || tp->data_type == 22)
        return decode_4bit(cx, tp, what, (size_t)numel, tp->data_type == 22, out);
    bool external = tp->has_data_location &&
                    tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    typed_field f = field_of(dt);
    size_t have = field_count(tp, f);
    bool raw = tp->has_raw_data && !external;
    if (!external && !raw && have == 0 && numel > 0)
        return cge__onnx_io_error(cx, "%s: tensor of %llu %s elements holds no data (expected "
                                     "raw_data or %s)", what, (unsigned long long)numel,
                                 cge_dtype_name(dt), field_name(f));
    if (raw && tp->raw_data.len != need)
        return cge__onnx_io_error(cx, "%s: raw_data holds %zu bytes; shape and type need %zu",
                                 what, tp->raw_data.len, need);
    if (!external && !raw && have != numel)
        return cge__onnx_io_error(cx, "%s: %s holds %zu values; the shape needs %llu", what,
                                 field_name(f), have, (unsigned long long)numel);
    void *data = malloc(need ? need : 1);
    if (!data)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory (%zu bytes)", what,
                         need);
    if (external) {
        st = read_external(cx, tp, what, need, data);
        if (st) {
            free(data);
            return st;
        }
    } else if (raw) {
        if (need)
            memcpy(data, tp->raw_data.data, need);
    } else {
        copy_typed(tp, dt, (size_t)numel, data);
    }
    if (dt == CGE_BOOL)
        for (size_t i = 0; i < need; i++)
            ((uint8_t *)data)[i] = ((uint8_t *)data)[i] != 0;
    out->dtype = dt;
    out->data = data;
    out->bytes = need;
    return CGE_OK;
}
