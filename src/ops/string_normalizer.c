/* StringNormalizer (opset 10): drop stopwords from a [C] or [1, C] string
 * tensor, then lower- or uppercase the rest, as en_US maps case over UTF-8
 * (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic); other locales refused. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/strings.h"
#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"

enum { SN_NONE, SN_LOWER, SN_UPPER };

/* ---- case mapping ------------------------------------------------------------------ */

static uint32_t to_lower(uint32_t c)
{
    if (c < 0x80)
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    if (c >= 0xC0 && c <= 0xDE && c != 0xD7)
        return c + 32;
    if (c == 0x178)
        return 0xFF;
    if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
        return c | 1;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E))
        return (c & 1) ? c + 1 : c;
    if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2)
        return c + 32;
    if (c >= 0x410 && c <= 0x42F)
        return c + 32;
    if (c >= 0x400 && c <= 0x40F)
        return c + 80;
    return c;
}

static uint32_t to_upper(uint32_t c)
{
    if (c < 0x80)
        return c >= 'a' && c <= 'z' ? c - 32 : c;
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7)
        return c - 32;
    if (c == 0xFF)
        return 0x178;
    if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
        return c & ~(uint32_t)1;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E))
        return (c & 1) ? c : c - 1;
    if (c == 0x3C2)
        return 0x3A3; /* final sigma */
    if (c >= 0x3B1 && c <= 0x3C9)
        return c - 32;
    if (c >= 0x430 && c <= 0x44F)
        return c - 32;
    if (c >= 0x450 && c <= 0x45F)
        return c - 80;
    return c;
}

/* The code point at s[*i] (advancing *i); a byte that does not start a
 * valid sequence comes back as itself with *raw set, written back as is. */
static uint32_t utf8_next(const unsigned char *s, int64_t n, int64_t *i, bool *raw)
{
    unsigned char b = s[*i];
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    *raw = false;
    if (len == 1 || len == 0 || *i + len > n) {
        *raw = len != 1;
        (*i)++;
        return b;
    }
    uint32_t c = b & (0x7F >> len);
    for (int k = 1; k < len; k++) {
        if ((s[*i + k] & 0xC0) != 0x80) {
            *raw = true;
            (*i)++;
            return b;
        }
        c = c << 6 | (s[*i + k] & 0x3F);
    }
    *i += len;
    return c;
}

static int utf8_put(uint32_t c, char *out)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | c >> 6);
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | c >> 12);
        out[1] = (char)(0x80 | (c >> 6 & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | c >> 18);
    out[1] = (char)(0x80 | (c >> 12 & 0x3F));
    out[2] = (char)(0x80 | (c >> 6 & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* `s` case-mapped into `out` (room for 2 * n bytes: the mapped ranges
 * never grow a character by more than one byte); returns its length. */
static int64_t map_case(const char *s, int64_t n, int action, char *out)
{
    int64_t o = 0;
    for (int64_t i = 0; i < n;) {
        bool raw;
        uint32_t c = utf8_next((const unsigned char *)s, n, &i, &raw);
        if (raw) {
            out[o++] = (char)c;
            continue;
        }
        o += utf8_put(action == SN_LOWER ? to_lower(c) : to_upper(c), out + o);
    }
    return o;
}

/* ---- configuration --------------------------------------------------------------- */

typedef struct sn_cfg {
    int action;
    bool case_sensitive;
} sn_cfg;

static bool locale_supported(const char *loc)
{
    static const char *const ok[] = {"", "en_US", "en_US.UTF-8", "en_US.utf8", "C", "C.UTF-8",
                                     "POSIX"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(loc, ok[i]))
            return true;
    return false;
}

/* NULL if the attributes are valid, else why not. */
static const char *sn_config(const cge_attrs *attrs, sn_cfg *c)
{
    const char *act = cge_attrs_get_string(attrs, "case_change_action", "NONE");
    c->action = !strcmp(act, "NONE") ? SN_NONE : !strcmp(act, "LOWER") ? SN_LOWER
              : !strcmp(act, "UPPER") ? SN_UPPER : -1;
    if (c->action < 0)
        return "case_change_action must be NONE, LOWER or UPPER";
    c->case_sensitive = cge_attrs_get_int(attrs, "is_case_sensitive", 0) != 0;
    if (!locale_supported(cge_attrs_get_string(attrs, "locale", "")))
        return "locale is not supported: cge maps case as en_US does (en_US, C, POSIX, or "
               "none); a locale with other rules (tr_TR's dotted i) would be silently wrong";
    return NULL;
}

/* The stopwords as the comparison sees them (lowercased when case does not
 * matter), sorted for binary search: one block the kernel state owns. */
typedef struct sn_stops {
    int64_t n;
    cge_string *words;    /* into `bytes` */
    char *bytes;
} sn_stops;

static int cmp_str(const void *a, const void *b)
{
    const cge_string *x = a, *y = b;
    int64_t m = x->size < y->size ? x->size : y->size;
    int r = m ? memcmp(x->data, y->data, (size_t)m) : 0;
    return r ? r : (x->size > y->size) - (x->size < y->size);
}

static bool stops_make(const cge_attrs *attrs, bool case_sensitive, sn_stops *st)
{
    memset(st, 0, sizeof *st);
    const cge_attr *a = cge_attrs_find(attrs, "stopwords");
    if (!a || a->kind != CGE_ATTR_STRINGS || a->n <= 0)
        return true;
    size_t total = 0;
    for (int64_t i = 0; i < a->n; i++)
        total += 2 * strlen(a->strings[i]);
    st->words = malloc(sizeof(cge_string) * (size_t)a->n);
    st->bytes = malloc(total ? total : 1);
    if (!st->words || !st->bytes) {
        free(st->words);
        free(st->bytes);
        return false;
    }
    char *p = st->bytes;
    for (int64_t i = 0; i < a->n; i++) {
        int64_t len = (int64_t)strlen(a->strings[i]);
        if (case_sensitive) {
            memcpy(p, a->strings[i], (size_t)len);
        } else {
            len = map_case(a->strings[i], len, SN_LOWER, p);
        }
        st->words[i] = (cge_string){.data = p, .size = len};
        p += len;
    }
    st->n = a->n;
    qsort(st->words, (size_t)st->n, sizeof(cge_string), cmp_str);
    return true;
}

static void stops_free(sn_stops *st)
{
    free(st->words);
    free(st->bytes);
}

/* Whether x is a stopword; `scratch` (2 * x.size bytes) takes x lowercased
 * when case does not matter. */
static bool is_stop(const sn_stops *st, bool case_sensitive, cge_string x, char *scratch)
{
    if (!st->n)
        return false;
    if (!case_sensitive) {
        x.size = map_case(x.data, x.size, SN_LOWER, scratch);
        x.data = scratch;
    }
    return bsearch(&x, st->words, (size_t)st->n, sizeof(cge_string), cmp_str) != NULL;
}

/* ---- meta -------------------------------------------------------------------------- */

static cge_status sn_infer(cge_infer_ctx *ctx)
{
    CGE__CHECK_COUNTS(ctx, cge_meta_error, 1, 1, 1, 1, "1 input and 1 output");
    const cge_tensor_desc *x = &ctx->inputs[0];
    if (x->dtype != CGE_STRING)
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "input is %s; StringNormalizer takes strings",
                              cge_dtype_name(x->dtype));
    bool two = x->shape.rank == 2;
    if (!(x->shape.rank == 1 || (two && cge_dim_may_equal(x->shape.dims[0], 1)))) {
        char s[CGE_SHAPE_STR_MAX];
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "input is %s; it must be [C] or [1, C]",
                              cge_shape_str(&x->shape, s, sizeof s));
    }
    sn_cfg cfg;
    const char *why = sn_config(ctx->attrs, &cfg);
    if (why)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "%s", why);
    int64_t c = x->shape.dims[two ? 1 : 0];
    int64_t kept = CGE_DIM_DYNAMIC;
    const cge_string *v = cge__meta_input_value(ctx, 0);
    const cge_attr *sw = cge_attrs_find(ctx->attrs, "stopwords");
    bool has_stops = sw && sw->kind == CGE_ATTR_STRINGS && sw->n > 0;
    if (!has_stops && c >= 0) {
        kept = c;
    } else if (v && c >= 0) {
        /* The output's length depends on the values: known here when they are. */
        sn_stops st;
        if (!stops_make(ctx->attrs, cfg.case_sensitive, &st))
            return cge_meta_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
        kept = 0;
        for (int64_t i = 0; i < c; i++) {
            char *scratch = malloc((size_t)v[i].size * 2 + 1);
            if (!scratch) {
                stops_free(&st);
                return cge_meta_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
            }
            kept += !is_stop(&st, cfg.case_sensitive, v[i], scratch);
            free(scratch);
        }
        stops_free(&st);
    }
    if (kept == 0)
        kept = 1; /* everything removed: one empty string */
    ctx->outputs[0].dtype = CGE_STRING;
    ctx->outputs[0].shape = two ? CGE_SHAPE(1, kept) : CGE_SHAPE(kept);
    return CGE_OK;
}

/* ---- kernel ------------------------------------------------------------------------ */

typedef struct sn_state {
    sn_cfg cfg;
    sn_stops stops;
    cge__strstore *store;      /* the output's bytes, when case changes */
    char *scratch;             /* a lowercased element, for comparison */
    size_t scratch_cap;
} sn_state;

static void sn_release(void *p)
{
    sn_state *s = p;
    if (!s)
        return;
    stops_free(&s->stops);
    cge__strstore_destroy(s->store);
    free(s->scratch);
    free(s);
}

static cge_status sn_prepare(const cge_kernel_ctx *ctx, void **state)
{
    sn_state *s = calloc(1, sizeof *s);
    if (!s)
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    const char *why = sn_config(ctx->attrs, &s->cfg);
    if (why) {
        free(s);
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "%s", why);
    }
    if (!stops_make(ctx->attrs, s->cfg.case_sensitive, &s->stops) ||
        (s->cfg.action != SN_NONE && !(s->store = cge__strstore_create()))) {
        sn_release(s);
        return cge_kernel_error(ctx, CGE_ERR_NO_MEMORY, "out of memory");
    }
    *state = s;
    return CGE_OK;
}

typedef struct sn_args {
    const cge_string *x;
    cge_string *y;
    int64_t c, cap;              /* input elements, output elements */
    sn_state *s;
    char label[128];
} sn_args;

static char *scratch_for(sn_state *s, int64_t size)
{
    size_t need = (size_t)size * 2 + 1;
    if (need > s->scratch_cap) {
        char *p = realloc(s->scratch, need);
        if (!p)
            return NULL;
        s->scratch = p;
        s->scratch_cap = need;
    }
    return s->scratch;
}

static void sn_block(int64_t b, int64_t nb, void *p)
{
    (void)b;
    (void)nb;
    const sn_args *a = p;
    sn_state *s = a->s;
    if (s->store)
        cge__strstore_reset(s->store);
    int64_t o = 0;
    for (int64_t i = 0; i < a->c; i++) {
        cge_string x = a->x[i];
        char *scratch = scratch_for(s, x.size);
        if (!scratch) {
            cge_kernel_fail(CGE_ERR_NO_MEMORY, "%s: out of memory", a->label);
            return;
        }
        if (is_stop(&s->stops, s->cfg.case_sensitive, x, scratch))
            continue;
        if (o >= a->cap) {
            o++; /* counted for the message below; not written */
            continue;
        }
        if (s->cfg.action != SN_NONE) {
            char *dst = cge__strstore_alloc(s->store, (size_t)x.size * 2, NULL);
            if (!dst) {
                cge_kernel_fail(CGE_ERR_NO_MEMORY, "%s: out of memory writing strings", a->label);
                return;
            }
            x.size = map_case(x.data, x.size, s->cfg.action, dst);
            x.data = dst;
        }
        a->y[o++] = x;
    }
    if (o == 0 && a->cap == 1) {
        a->y[0] = (cge_string){.data = NULL, .size = 0};
        return;
    }
    if (o != a->cap)
        cge_kernel_fail(CGE_ERR_SHAPE, "%s: %lld strings remain; the output holds %lld",
                        a->label, (long long)o, (long long)a->cap);
}

static cge_status sn_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    CGE__CHECK_COUNTS(ctx, cge_kernel_error, 1, 1, 1, 1, "1 input and 1 output");
    const cge_tensor *x = &ctx->inputs[0];
    cge_tensor *y = &ctx->outputs[0];
    if (x->dtype != CGE_STRING || y->dtype != CGE_STRING)
        return cge_kernel_error(ctx, CGE_ERR_DTYPE, "no StringNormalizer kernel for %s -> %s",
                                cge_dtype_name(x->dtype), cge_dtype_name(y->dtype));
    if (!ctx->state)
        return cge_kernel_error(ctx, CGE_ERR_STATE, "launched without its prepared state");
    cge_status st = cge__kernel_check_buffer(ctx, x, "input");
    if (!st)
        st = cge__kernel_check_buffer(ctx, y, "output");
    if (st)
        return st;
    int32_t r = x->shape.rank;
    if ((r != 1 && r != 2) || (r == 2 && x->shape.dims[0] != 1) || y->shape.rank != r)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input must be [C] or [1, C] and the output "
                                                    "of the same rank");
    sn_args a = {.x = x->data, .y = y->data, .c = x->shape.dims[r - 1],
                 .cap = cge_shape_numel(&y->shape), .s = ctx->state};
    cge__kernel_label(ctx, a.label, sizeof a.label);
    return cge_launch(stream, sn_block, 1, &a, sizeof a);
}

/* ---- definition --------------------------------------------------------------------- */

static const cge_kernel_def k_sn[] = {
    {.engine = "cpu", .dtypes = CGE_DT_STRING, .launch = sn_launch, .prepare = sn_prepare,
     .release = sn_release, .inplace_input = -1}};
static const cge_arg_def sn_in[] = {{"X", 0, CGE_DT_STRING, "strings, [C] or [1, C]"}};
static const cge_arg_def sn_out[] = {
    {"Y", 0, CGE_DT_STRING, "the strings kept, case-changed ([1] or [1, 1] empty if none)"}};
static const cge_attr_def sn_attrs[] = {
    {"case_change_action", CGE_ATTR_STRING, false, 0, 0.0f, "NONE", "NONE, LOWER or UPPER"},
    {"is_case_sensitive", CGE_ATTR_INT, false, 0, 0.0f, NULL,
     "whether stopwords match case-sensitively (0)"},
    {"locale", CGE_ATTR_STRING, false, 0, 0.0f, "", "en_US (or C, POSIX); others are refused"},
    {"stopwords", CGE_ATTR_STRINGS, false, 0, 0.0f, NULL, "strings removed from X"},
};

static const cge_op_def string_normalizer_ops[] = {
    CGE__OPDEF("StringNormalizer", 10, sn_in, 1, sn_out, 1, sn_attrs, CGE__NATTR(sn_attrs),
               sn_infer, k_sn, "drop stopwords, then change case (en_US rules over UTF-8)"),
};

const cge_op_def *cge__ops_string_normalizer(int32_t *count)
{
    *count = (int32_t)(sizeof string_normalizer_ops / sizeof string_normalizer_ops[0]);
    return string_normalizer_ops;
}
