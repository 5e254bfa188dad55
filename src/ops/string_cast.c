/* Cast to and from string tensors (unary.c's Cast and CastLike hand these
 * over): numbers written as numpy's astype(str) writes them (the ONNX
 * reference's outputs), text parsed back with "NaN", "INF", "-INF" understood. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/strings.h"
#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"
#include "ops/string_util.h"

/* ---- numbers as text -------------------------------------------------------------- */

/* Whether `text` reads back as v in dtype t (v is exact in t). */
static bool reads_back(cge_dtype t, double v, const char *text)
{
    double r = strtod(text, NULL);
    switch (t) {
    case CGE_F32: return (float)r == (float)v;
    case CGE_F16: return cge_f32_to_f16((float)r) == cge_f32_to_f16((float)v);
    case CGE_BF16: return cge_f32_to_bf16((float)r) == cge_f32_to_bf16((float)v);
    default: return r == v;
    }
}

static int format_float(cge_dtype t, double v, char *buf)
{
    if (v != v)
        return sprintf(buf, "nan");
    if (isinf(v))
        return sprintf(buf, v < 0 ? "-inf" : "inf");
    int n = 0;
    if (signbit(v)) {
        buf[n++] = '-';
        v = -v;
    }
    if (v == 0.0)
        return n + sprintf(buf + n, "0.0");
    /* The shortest %e precision that reads back; its digits and exponent. */
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (reads_back(t, v, e))
            break;
    }
    char digits[24];
    int nd = 0;
    const char *c = e;
    for (; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9')
            digits[nd++] = *c;
    int exp10 = atoi(c + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    /* numpy's bounds, compared in double whatever the dtype (float32's
     * nearest to 1e-4 is below it, so it prints as "1e-04"). */
    bool positional = v >= 1e-4 && v < 1e16;
    if (!positional) {
        buf[n++] = digits[0];
        if (nd > 1) {
            buf[n++] = '.';
            memcpy(buf + n, digits + 1, (size_t)nd - 1);
            n += nd - 1;
        }
        return n + sprintf(buf + n, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
    if (exp10 < 0) {
        buf[n++] = '0';
        buf[n++] = '.';
        for (int k = 0; k < -exp10 - 1; k++)
            buf[n++] = '0';
        memcpy(buf + n, digits, (size_t)nd);
        n += nd;
    } else {
        for (int k = 0; k <= exp10; k++)
            buf[n++] = k < nd ? digits[k] : '0';
        buf[n++] = '.';
        if (nd > exp10 + 1) {
            memcpy(buf + n, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
            n += nd - exp10 - 1;
        } else {
            buf[n++] = '0';
        }
    }
    buf[n] = '\0';
    return n;
}

int cge__format_number(cge_dtype dtype, const void *data, int64_t i, char *buf)
{
    switch (dtype) {
    case CGE_F32: case CGE_F64: case CGE_F16: case CGE_BF16:
        return format_float(dtype, cge__load_as_double(dtype, data, i), buf);
    case CGE_BOOL: return sprintf(buf, ((const uint8_t *)data)[i] ? "True" : "False");
    case CGE_U64: return sprintf(buf, "%llu", (unsigned long long)((const uint64_t *)data)[i]);
    default: return sprintf(buf, "%lld", (long long)cge__load_as_i64(dtype, data, i));
    }
}

/* ---- text as numbers ---------------------------------------------------------------- */

static bool all_space(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    return !*s;
}

/* Parse `s` (NUL-terminated) into element i of `data`; false if it is not a
 * value of `t` (not a number, or out of an integer type's range). */
static bool parse_into(cge_dtype t, const char *s, void *data, int64_t i)
{
    char *end = NULL;
    errno = 0;
    if (cge_dtype_is_float(t)) {
        double v = strtod(s, &end);
        if (end == s || !all_space(end))
            return false;
        cge__store_from_double(t, data, i, v);
        return true;
    }
    if (t == CGE_BOOL) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!strncasecmp(s, "true", 4) && all_space(s + 4)) {
            ((uint8_t *)data)[i] = 1;
            return true;
        }
        if (!strncasecmp(s, "false", 5) && all_space(s + 5)) {
            ((uint8_t *)data)[i] = 0;
            return true;
        }
        double v = strtod(s, &end);
        if (end == s || !all_space(end) || v != v)
            return false;
        ((uint8_t *)data)[i] = v != 0.0;
        return true;
    }
    if (t == CGE_U64 || t == CGE_U32 || t == CGE_U16 || t == CGE_U8) {
        const char *p = s;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '-')
            return false;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || !all_space(end) || errno == ERANGE)
            return false;
        uint64_t max = t == CGE_U8 ? UINT8_MAX : t == CGE_U16 ? UINT16_MAX
                     : t == CGE_U32 ? UINT32_MAX : UINT64_MAX;
        if (v > max)
            return false;
        if (t == CGE_U64)
            ((uint64_t *)data)[i] = v;
        else
            cge__store_from_double(t, data, i, (double)v);
        return true;
    }
    long long v = strtoll(s, &end, 10);
    if (end == s || !all_space(end) || errno == ERANGE)
        return false;
    int64_t lo = t == CGE_I8 ? INT8_MIN : t == CGE_I16 ? INT16_MIN : t == CGE_I32 ? INT32_MIN
               : INT64_MIN;
    int64_t hi = t == CGE_I8 ? INT8_MAX : t == CGE_I16 ? INT16_MAX : t == CGE_I32 ? INT32_MAX
               : INT64_MAX;
    if (v < lo || v > hi)
        return false;
    if (t == CGE_I64)
        ((int64_t *)data)[i] = v;
    else
        cge__store_from_double(t, data, i, (double)v);
    return true;
}

/* ---- the kernel ---------------------------------------------------------------------- */

typedef struct scast_args {
    const void *x;
    void *y;
    int64_t numel;
    cge_dtype from, to;
    cge__strstore *store;
    char label[128];
} scast_args;

static void to_string_block(int64_t b, int64_t nb, void *p)
{
    (void)b;
    (void)nb;
    const scast_args *a = p;
    cge_string *y = a->y;
    /* The node's strings from its previous run are dead now: its output
     * buffer (and every copy of its elements) belongs to this run. */
    cge__strstore_reset(a->store);
    char buf[64];
    for (int64_t i = 0; i < a->numel; i++) {
        int n = cge__format_number(a->from, a->x, i, buf);
        char *s = cge__strstore_alloc(a->store, (size_t)n, buf);
        if (!s) {
            cge_kernel_fail(CGE_ERR_NO_MEMORY, "%s: out of memory writing strings", a->label);
            return;
        }
        y[i] = (cge_string){.data = s, .size = n};
    }
}

static void from_string_block(int64_t b, int64_t nb, void *p)
{
    (void)b;
    (void)nb;
    const scast_args *a = p;
    const cge_string *x = a->x;
    char local[256];
    for (int64_t i = 0; i < a->numel; i++) {
        size_t n = (size_t)x[i].size;
        char *s = n < sizeof local ? local : malloc(n + 1);
        if (!s) {
            cge_kernel_fail(CGE_ERR_NO_MEMORY, "%s: out of memory", a->label);
            return;
        }
        if (n)
            memcpy(s, x[i].data, n);
        s[n] = '\0';
        bool ok = strlen(s) == n && parse_into(a->to, s, a->y, i);
        if (s != local)
            free(s);
        if (!ok) {
            cge_kernel_fail(CGE_ERR_INVALID_ARG, "%s: element %lld (\"%.*s\") is not a %s value",
                            a->label, (long long)i, x[i].size > 40 ? 40 : (int)x[i].size,
                            x[i].data ? x[i].data : "", cge_dtype_name(a->to));
            return;
        }
    }
}

cge_status cge__cast_string_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    if (!cge_shape_is_static(&x->shape) || !cge_shape_equal(&x->shape, &y->shape))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input and output must have one static shape");
    cge_status st = cge__kernel_check_buffer(ctx, x, "input");
    if (!st)
        st = cge__kernel_check_buffer(ctx, y, "output");
    if (st)
        return st;
    scast_args a = {.x = x->data, .y = y->data, .numel = cge_shape_numel(&x->shape),
                    .from = x->dtype, .to = y->dtype, .store = ctx->state};
    cge__kernel_label(ctx, a.label, sizeof a.label);
    if (a.numel == 0)
        return CGE_OK;
    if (x->dtype == CGE_STRING && y->dtype == CGE_STRING)
        /* The same strings: the elements are copied, the bytes stay where
         * they are (they outlive this output as they outlive the input). */
        return cge__launch_copy_bytes(stream, y->data, x->data,
                                      a.numel * (int64_t)sizeof(cge_string), INT64_MAX, 1);
    if (y->dtype == CGE_STRING) {
        if (!cge_dtype_valid(x->dtype))
            return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no Cast from %s to string",
                                    cge_dtype_name(x->dtype));
        if (!a.store)
            return cge_kernel_error(ctx, CGE_ERR_STATE,
                                    "a cast to string was launched without its string store "
                                    "(the kernel's prepare makes it)");
        return cge_launch(stream, to_string_block, 1, &a, sizeof a);
    }
    if (!cge_dtype_valid(y->dtype))
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no Cast from string to %s",
                                cge_dtype_name(y->dtype));
    return cge_launch(stream, from_string_block, 1, &a, sizeof a);
}

cge_status cge__cast_string_prepare(const cge_kernel_ctx *ctx, void **state)
{
    *state = NULL;
    if (ctx->num_outputs < 1 || ctx->outputs[0].dtype != CGE_STRING ||
        (ctx->num_inputs >= 1 && ctx->inputs[0].dtype == CGE_STRING))
        return CGE_OK;
    *state = cge__strstore_create();
    return *state ? CGE_OK
                  : cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory for a string store");
}

void cge__cast_string_release(void *state) { cge__strstore_destroy(state); }
