/* Shapes: construction, element counts, numpy broadcasting, strides, axes
 * and printing. Unknown dimensions (CGE_DIM_DYNAMIC, symbols) are carried
 * through. */
#include <stdio.h>
#include <string.h>

#include "cge/types.h"

cge_status cge_shape_make(int32_t rank, const int64_t *dims, cge_shape *out)
{
    if (!out || rank < 0 || rank > CGE_MAX_RANK || (rank > 0 && !dims))
        return CGE_ERR_SHAPE;
    cge_shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    for (int32_t i = 0; i < rank; i++) {
        if (!cge_dim_valid(dims[i]))
            return CGE_ERR_SHAPE;
        s.dims[i] = dims[i];
    }
    *out = s;
    return CGE_OK;
}

bool cge_shape_is_static(const cge_shape *s)
{
    for (int32_t i = 0; i < s->rank; i++)
        if (s->dims[i] < 0)
            return false;
    return true;
}

int64_t cge_shape_numel(const cge_shape *s)
{
    int64_t n = 1;
    for (int32_t i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0)
            return -1;
        if (s->dims[i] == 0)
            return 0;
        if (n > INT64_MAX / s->dims[i])
            return -1;
        n *= s->dims[i];
    }
    return n;
}

bool cge_shape_equal(const cge_shape *a, const cge_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int32_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

bool cge_shape_same(const cge_shape *a, const cge_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int32_t i = 0; i < a->rank; i++)
        if (!cge_dim_same(a->dims[i], b->dims[i]))
            return false;
    return true;
}

cge_status cge_shape_broadcast(const cge_shape *a, const cge_shape *b, cge_shape *out)
{
    cge_shape r;
    memset(&r, 0, sizeof r);
    r.rank = a->rank > b->rank ? a->rank : b->rank;
    for (int32_t i = 0; i < r.rank; i++) {
        int32_t ia = i - (r.rank - a->rank), ib = i - (r.rank - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1;
        int64_t db = ib >= 0 ? b->dims[ib] : 1;
        int64_t d;
        if (da == db)
            d = da;
        else if (da == 1)
            d = db;
        else if (db == 1)
            d = da;
        else if (da < 0 && db < 0)
            d = CGE_DIM_DYNAMIC; /* two different unknowns: nothing to keep */
        else if (da < 0)
            d = db; /* the known side fixes it; checked again at run time */
        else if (db < 0)
            d = da;
        else
            return CGE_ERR_SHAPE;
        r.dims[i] = d;
    }
    *out = r;
    return CGE_OK;
}

void cge_shape_strides(const cge_shape *s, int64_t strides[CGE_MAX_RANK])
{
    int64_t st = 1;
    for (int32_t i = s->rank - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s->dims[i] > 0 ? s->dims[i] : 0;
    }
    for (int32_t i = s->rank; i < CGE_MAX_RANK; i++)
        strides[i] = 0;
}

bool cge_axis_normalize(int64_t axis, int32_t rank, bool inclusive, int32_t *out)
{
    int64_t hi = inclusive ? rank + 1 : rank;
    if (axis < -hi || axis >= hi)
        return false;
    if (axis < 0)
        axis += hi;
    *out = (int32_t)axis;
    return true;
}

#define DERIVED_BASES 512
#define DERIVED_ADD 2048   /* add in [-2048, 2048) */
#define DERIVED_DIV 256

int64_t cge_dim_derive(int64_t d, int64_t add, int64_t div)
{
    if (div < 1)
        return CGE_DIM_DYNAMIC;
    if (d >= 0) {
        int64_t n = d + add;   /* floor division, also below zero */
        return n >= 0 ? n / div : -((-n + div - 1) / div);
    }
    if (!cge_dim_is_symbol(d))
        return CGE_DIM_DYNAMIC;
    int64_t base, a, s;
    cge_dim_derived_parts(d, &base, &a, &s);
    /* floor((floor((b + a) / s) + add) / div) = floor((b + a + add*s) / (s*div)) */
    if (add < -DERIVED_ADD || add >= DERIVED_ADD || div > DERIVED_DIV || s * div > DERIVED_DIV)
        return CGE_DIM_DYNAMIC;
    a += add * s;
    s *= div;
    if (a == 0 && s == 1)
        return base;
    int64_t k = cge_dim_symbol_id(base);
    if (k >= DERIVED_BASES || a < -DERIVED_ADD || a >= DERIVED_ADD)
        return CGE_DIM_DYNAMIC;
    return CGE_DIM_SYMBOL(CGE_DIM_DERIVED_FIRST + (k << 20) + ((s - 1) << 12) + (a + DERIVED_ADD));
}

bool cge_dim_derived_parts(int64_t d, int64_t *base, int64_t *add, int64_t *div)
{
    *base = d;
    *add = 0;
    *div = 1;
    if (!cge_dim_is_derived(d))
        return false;
    int64_t k = cge_dim_symbol_id(d) - CGE_DIM_DERIVED_FIRST;
    *base = CGE_DIM_SYMBOL(k >> 20);
    *div = ((k >> 12) & 0xff) + 1;
    *add = (k & 0xfff) - DERIVED_ADD;
    return true;
}

char *cge_shape_str_named(const cge_shape *s, cge_dim_name_fn name_of, const void *user,
                          char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    size_t n = 0;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (int32_t i = 0; i < s->rank && n < size; i++) {
        int64_t d = s->dims[i];
        const char *sep = i ? "," : "";
        int64_t base, add, div;
        bool derived = cge_dim_derived_parts(d, &base, &add, &div);
        const char *name = cge_dim_is_symbol(base) && name_of ? name_of(base, user) : NULL;
        char bn[64];
        if (cge_dim_is_symbol(base) && !name) {
            snprintf(bn, sizeof bn, "s%lld", (long long)cge_dim_symbol_id(base));
            name = bn;
        }
        if (derived && div == 1)
            n += (size_t)snprintf(buf + n, size - n, "%s%s%+lld", sep, name, (long long)add);
        else if (derived && add == 0)
            n += (size_t)snprintf(buf + n, size - n, "%s%s/%lld", sep, name, (long long)div);
        else if (derived)
            n += (size_t)snprintf(buf + n, size - n, "%s(%s%+lld)/%lld", sep, name,
                                  (long long)add, (long long)div);
        else if (name)
            n += (size_t)snprintf(buf + n, size - n, "%s%s", sep, name);
        else if (d < 0)
            n += (size_t)snprintf(buf + n, size - n, "%s?", sep);
        else
            n += (size_t)snprintf(buf + n, size - n, "%s%lld", sep, (long long)d);
    }
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

char *cge_shape_str(const cge_shape *s, char *buf, size_t size)
{
    return cge_shape_str_named(s, NULL, NULL, buf, size);
}

const char *cge_value_type_name(cge_value_type t)
{
    switch (t) {
    case CGE_TYPE_TENSOR: return "tensor";
    case CGE_TYPE_SEQUENCE: return "sequence";
    case CGE_TYPE_OPTIONAL: return "optional tensor";
    case CGE_TYPE_OPTIONAL_SEQUENCE: return "optional sequence";
    }
    return "invalid type";
}

const char *cge_format_name(cge_format f)
{
    switch (f) {
    case CGE_FORMAT_PLAIN: return "plain";
    case CGE_FORMAT_NHWC: return "nhwc";
    case CGE_FORMAT_BLOCKED: return "blocked";
    }
    return "invalid";
}

size_t cge_tensor_nbytes(cge_dtype dtype, const cge_shape *shape)
{
    size_t es = cge_dtype_size(dtype);
    if (!es || !shape || shape->rank < 0 || shape->rank > CGE_MAX_RANK)
        return 0;
    size_t n = es;
    for (int32_t i = 0; i < shape->rank; i++) {
        if (shape->dims[i] < 0)
            return 0;
        if (shape->dims[i] == 0)
            return 0;
        if ((uint64_t)shape->dims[i] > SIZE_MAX / n)
            return SIZE_MAX;
        n *= (size_t)shape->dims[i];
    }
    return n;
}

bool cge_tensor_too_large(cge_dtype dtype, const cge_shape *shape)
{
    uint64_t es = cge_dtype_size(dtype);
    if (!es || !shape || shape->rank < 0 || shape->rank > CGE_MAX_RANK ||
        !cge_shape_is_static(shape))
        return false;
    for (int32_t i = 0; i < shape->rank; i++)
        if (shape->dims[i] == 0)
            return false;
    uint64_t n = es; /* n <= CGE_MAX_TENSOR_BYTES throughout: no overflow */
    for (int32_t i = 0; i < shape->rank; i++) {
        if ((uint64_t)shape->dims[i] > CGE_MAX_TENSOR_BYTES / n)
            return true;
        n *= (uint64_t)shape->dims[i];
    }
    return false;
}

char *cge_tensor_size_str(cge_dtype dtype, const cge_shape *shape, char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    double n = 1;
    for (int32_t i = 0; shape && i < shape->rank && i < CGE_MAX_RANK; i++)
        n *= shape->dims[i] > 0 ? (double)shape->dims[i] : 0.0;
    snprintf(buf, size, "%.3g elements, %.3g bytes", n, n * (double)cge_dtype_size(dtype));
    return buf;
}
