/* ONNX tensors to dense cge tensors: dtype mapping, raw and typed fields,
 * external data files (confined to the model's folder, mapped), with every
 * size checked against the shape before anything is copied; the importer's
 * file mappings. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/shared_block.h"
#include "base/strings.h"
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
    case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9: case 10: case 11:
    case 12: case 13: case 16:
        /* cge's dtype numbers are ONNX's (8 is STRING). */
        *out = (cge_dtype)t;
        return CGE_OK;
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

cge_status cge__onnx_map_file(const char *path, onnx_mapping *m, const char **why)
{
    memset(m, 0, sizeof *m);
    m->fd = -1;
    size_t size = 0;
    int fd = cge__open_regular(path, &size, why);
    if (fd < 0)
        return CGE_ERR_IO;
    void *p = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (p != MAP_FAILED) {
        m->fd = fd;
        m->data = p;
        m->size = size;
        m->mapped = true;
        return CGE_OK;
    }
    /* Empty files, file systems without mmap: read them. */
    uint8_t *buf = malloc(size ? size : 1);
    size_t got = 0;
    while (buf && got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != size) {
        *why = buf ? "short read" : "out of memory";
        free(buf);
        return buf ? CGE_ERR_IO : CGE_ERR_NO_MEMORY;
    }
    m->data = buf;
    m->size = size;
    return CGE_OK;
}

void cge__onnx_unmap(onnx_mapping *m)
{
    if (m->mapped)
        munmap((void *)m->data, m->size);
    else
        free((void *)m->data);
    if (m->fd >= 0)
        close(m->fd);
    free(m->path);
    memset(m, 0, sizeof *m);
    m->fd = -1;
}

void cge__onnx_unmap_external(onnx_ctx *cx)
{
    for (int32_t i = 0; i < cx->num_ext; i++)
        cge__onnx_unmap(&cx->ext[i]);
    free(cx->ext);
    cx->ext = NULL;
    cx->num_ext = cx->cap_ext = 0;
}

void cge__onnx_drop_pages(const void *p, size_t n)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || !n)
        return;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~((uintptr_t)page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice: a failure costs memory only */
}

#define IN_PLACE_FROM ((size_t)256 << 10)

static const onnx_mapping *mapping_of(const onnx_ctx *cx, const void *p, size_t n)
{
    const uint8_t *b = p;
    if (cx->model_map && b >= cx->model_map->data && n <= cx->model_map->size &&
        (size_t)(b - cx->model_map->data) <= cx->model_map->size - n)
        return cx->model_map;
    for (int32_t i = 0; i < cx->num_ext; i++) {
        const onnx_mapping *m = &cx->ext[i];
        if (b >= m->data && n <= m->size && (size_t)(b - m->data) <= m->size - n)
            return m;
    }
    return NULL;
}

void *cge__onnx_copy_mapped(const onnx_ctx *cx, const void *src, size_t n)
{
    const onnx_mapping *m = mapping_of(cx, src, n);
    /* Large weights at 8-byte aligned offsets (external data mostly) are
     * the file's pages, mapped in place: no copy at all. (Not small ones:
     * a mapping each.) */
    if (m && m->fd >= 0 && n >= IN_PLACE_FROM) {
        void *mapped = cge__block_map_file(m->fd, (uint64_t)((const uint8_t *)src - m->data), n);
        if (mapped)
            return mapped;
    }
    void *block = cge__block_new(NULL, n);
    if (!block)
        return NULL;
    size_t done = 0;
    if (m && m->fd >= 0) {
        off_t at = (off_t)((const uint8_t *)src - m->data);
        while (done < n) {
            ssize_t r = pread(m->fd, (char *)block + done, n - done, at + (off_t)done);
            if (r <= 0)
                break;
            done += (size_t)r;
        }
    }
    /* No file to read (or it failed): from the mapping, a slice at a time,
     * so that the mapping and the copy are resident together for one slice. */
    enum { SLICE = 16 << 20 };
    /* Only a file's pages come back if read again (malloc'd bytes would
     * come back as zeros): read bytes stay where the file was read. */
    bool drop = m && m->mapped;
    for (size_t off = done; off < n; off += SLICE) {
        size_t len = n - off < SLICE ? n - off : SLICE;
        memcpy((char *)block + off, (const char *)src + off, len);
        if (drop)
            cge__onnx_drop_pages((const char *)src + off, len);
    }
    if (drop && done < n)
        cge__onnx_drop_pages(src, n);   /* the pages slices shared */
    return block;
}

/* The external file at `real_file`, mapped once per import. */
static cge_status external_mapping(onnx_ctx *cx, const char *real_file, const char *what,
                                   const char *loc, const onnx_mapping **out)
{
    for (int32_t i = 0; i < cx->num_ext; i++)
        if (!strcmp(cx->ext[i].path, real_file)) {
            *out = &cx->ext[i];
            return CGE_OK;
        }
    if (cx->num_ext == cx->cap_ext) {
        int32_t cap = cx->cap_ext ? 2 * cx->cap_ext : 4;
        onnx_mapping *e = realloc(cx->ext, sizeof *e * (size_t)cap);
        if (!e)
            return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory", what);
        cx->ext = e;
        cx->cap_ext = cap;
    }
    onnx_mapping m;
    const char *why = NULL;
    cge_status st = cge__onnx_map_file(real_file, &m, &why);
    if (st == CGE_ERR_NO_MEMORY)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory", what);
    if (st)
        return cge__onnx_io_error(cx, "%s: cannot read external data '%s' (%s)", what, loc, why);
    m.path = malloc(strlen(real_file) + 1);
    if (!m.path) {
        cge__onnx_unmap(&m);
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory", what);
    }
    strcpy(m.path, real_file);
    cx->ext[cx->num_ext] = m;
    *out = &cx->ext[cx->num_ext++];
    return CGE_OK;
}

/* The tensor's bytes in its external file's mapping (*dst). */
static cge_status read_external(onnx_ctx *cx, const Onnx__TensorProto *tp, const char *what,
                                size_t need, const uint8_t **dst)
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
    const onnx_mapping *map = NULL;
    if (!st)
        st = external_mapping(cx, real_file, what, loc, &map);
    if (!st) {
        uint64_t fsize = (uint64_t)map->size;
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
    if (!st)
        *dst = map->data + offset;
    free(real_base);
    free(real_file);
    return st;
}

/* UINT4 / INT4 (ONNX 1.16): two values a byte, the first in the low nibble,
 * in raw_data, external data or one byte per int32_data entry; unpacked
 * into uint8 / int8 (sign-extended), out->shape already set. */
static cge_status decode_4bit(onnx_ctx *cx, const Onnx__TensorProto *tp, const char *what,
                              size_t numel, bool sgn, const onnx_raw *detached, cge_tensor *out)
{
    size_t packed = (numel + 1) / 2;
    bool external = tp->has_data_location &&
                    tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    bool raw = tp->has_raw_data && !external;
    const uint8_t *raw_bytes = tp->raw_data.data;
    size_t raw_len = tp->raw_data.len;
    if (raw && detached && detached->present) { /* the slim copy's bytes stay in the file */
        raw_bytes = detached->data;
        raw_len = detached->len;
    }
    if (!external && !raw && tp->n_int32_data != packed)
        return cge__onnx_io_error(cx, "%s: int32_data holds %zu packed bytes; %zu 4-bit values "
                                     "need %zu", what, tp->n_int32_data, numel, packed);
    if (raw && raw_len != packed)
        return cge__onnx_io_error(cx, "%s: raw_data holds %zu bytes; %zu 4-bit values need %zu",
                                 what, raw_len, numel, packed);
    uint8_t *bytes = malloc(packed ? packed : 1), *data = malloc(numel ? numel : 1);
    if (!bytes || !data) {
        free(bytes);
        free(data);
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory (%zu bytes)", what,
                         numel);
    }
    cge_status st = CGE_OK;
    const uint8_t *ext = NULL;
    if (external && !(st = read_external(cx, tp, what, packed, &ext)) && packed)
        memcpy(bytes, ext, packed);
    else if (raw && packed)
        memcpy(bytes, raw_bytes, packed);
    else if (!external)
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

/* A STRING tensor: its values are string_data (ONNX allows no raw_data or
 * external data for strings), packed here into one owned block of elements
 * and bytes (base/strings.h), as a string constant keeps them. */
static cge_status view_strings(onnx_ctx *cx, const Onnx__TensorProto *tp, const char *what,
                               size_t numel, cge_tensor *out)
{
    if (tp->has_raw_data || (tp->has_data_location &&
                             tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
        return cge__onnx_io_error(cx, "%s: a string tensor keeps its values in string_data "
                                     "(raw_data and external data are not allowed for strings)",
                                 what);
    if (tp->n_string_data != numel)
        return cge__onnx_io_error(cx, "%s: string_data holds %zu strings; the shape needs %zu",
                                 what, tp->n_string_data, numel);
    cge_string *elems = malloc(sizeof(cge_string) * (numel ? numel : 1));
    if (!elems)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory", what);
    for (size_t i = 0; i < numel; i++)
        elems[i] = (cge_string){.data = (const char *)tp->string_data[i].data,
                                .size = (int64_t)tp->string_data[i].len};
    size_t bytes = 0;
    void *packed = cge__strings_pack_dup(elems, (int64_t)numel, &bytes);
    free(elems);
    if (!packed)
        return bytes == SIZE_MAX
                   ? cge__onnx_io_error(cx, "%s: string_data is too large", what)
                   : cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory", what);
    out->dtype = CGE_STRING;
    out->data = packed;
    out->bytes = numel * sizeof(cge_string);
    return CGE_OK;
}

cge_status cge__onnx_view_tensor(onnx_ctx *cx, const Onnx__TensorProto *tp, const char *what,
                                const onnx_raw *detached, cge_tensor *out, onnx_bytes *how)
{
    memset(out, 0, sizeof *out);
    *how = ONNX_BYTES_OWNED;
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
    if (dt == CGE_STRING)
        return view_strings(cx, tp, what, (size_t)numel, out);
    if (tp->data_type == 21 || tp->data_type == 22)
        return decode_4bit(cx, tp, what, (size_t)numel, tp->data_type == 22, detached, out);
    bool external = tp->has_data_location &&
                    tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    typed_field f = field_of(dt);
    size_t have = field_count(tp, f);
    bool raw = tp->has_raw_data && !external;
    const uint8_t *raw_bytes = tp->raw_data.data;
    size_t raw_len = tp->raw_data.len;
    if (raw && detached && detached->present) {
        raw_bytes = detached->data;
        raw_len = detached->len;
    }
    if (!external && !raw && have == 0 && numel > 0)
        return cge__onnx_io_error(cx, "%s: tensor of %llu %s elements holds no data (expected "
                                     "raw_data or %s)", what, (unsigned long long)numel,
                                 cge_dtype_name(dt), field_name(f));
    if (raw && raw_len != need)
        return cge__onnx_io_error(cx, "%s: raw_data holds %zu bytes; shape and type need %zu",
                                 what, raw_len, need);
    if (!external && !raw && have != numel)
        return cge__onnx_io_error(cx, "%s: %s holds %zu values; the shape needs %llu", what,
                                 field_name(f), have, (unsigned long long)numel);
    out->dtype = dt;
    out->bytes = need;
    /* Raw bytes are cge's layout (little-endian) as they are; bools are
     * normalised to 0/1 in a copy. */
    const uint8_t *src = NULL;
    if (external) {
        st = read_external(cx, tp, what, need, &src);
        if (st)
            return st;
    } else if (raw) {
        src = raw_bytes;
    }
    if (src && need && dt != CGE_BOOL) {
        out->data = (void *)src;
        *how = external || (detached && detached->present && cx->own_buffer)
                   ? ONNX_BYTES_MAPPED : ONNX_BYTES_BORROWED;
        return CGE_OK;
    }
    void *data = malloc(need ? need : 1);
    if (!data)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory (%zu bytes)", what,
                         need);
    if (src) {
        if (need)
            memcpy(data, src, need);
    } else {
        copy_typed(tp, dt, (size_t)numel, data);
    }
    if (dt == CGE_BOOL)
        for (size_t i = 0; i < need; i++)
            ((uint8_t *)data)[i] = ((uint8_t *)data)[i] != 0;
    out->data = data;
    return CGE_OK;
}

cge_status cge__onnx_decode_tensor(onnx_ctx *cx, const Onnx__TensorProto *tp, const char *what,
                                  cge_tensor *out)
{
    onnx_bytes how;
    cge_status st = cge__onnx_view_tensor(cx, tp, what, NULL, out, &how);
    if (!st && how != ONNX_BYTES_OWNED) {
        void *data = malloc(out->bytes ? out->bytes : 1);
        if (data)
            memcpy(data, out->data, out->bytes);
        else
            st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "%s: out of memory (%zu bytes)", what,
                           out->bytes);
        out->data = data;
    }
    if (!cx->cache_ext)
        cge__onnx_unmap_external(cx);
    return st;
}
