/* Text: TfIdfVectorizer, n-gram counts (TF, IDF or TFIDF) of integer token
 * sequences; string pools (string n-grams) are refused at meta. */
#include <stdio.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"

/* ---- TfIdfVectorizer ------------------------------------------------------------------ */

enum { TFIDF_TF, TFIDF_IDF, TFIDF_TFIDF };

typedef struct tfidf_cfg {
    int mode;
    int64_t min_n, max_n, max_skip;
    const int64_t *counts, *indexes, *pool;
    int64_t ncounts, nindexes, npool;
    const float *weights;
    int64_t nweights;
    int64_t out_dim;
} tfidf_cfg;

/* Checks the attributes; on error writes why into msg and returns false. */
static bool tfidf_config(const cge_attrs *attrs, tfidf_cfg *c, char *msg, size_t size)
{
    memset(c, 0, sizeof *c);
    const char *mode = cge_attrs_get_string(attrs, "mode", "");
    c->mode = !strcmp(mode, "TF") ? TFIDF_TF : !strcmp(mode, "IDF") ? TFIDF_IDF
              : !strcmp(mode, "TFIDF") ? TFIDF_TFIDF : -1;
    c->min_n = cge_attrs_get_int(attrs, "min_gram_length", 0);
    c->max_n = cge_attrs_get_int(attrs, "max_gram_length", 0);
    c->max_skip = cge_attrs_get_int(attrs, "max_skip_count", 0);
    c->ncounts = cge_attrs_get_ints(attrs, "ngram_counts", &c->counts);
    c->nindexes = cge_attrs_get_ints(attrs, "ngram_indexes", &c->indexes);
    c->npool = cge_attrs_get_ints(attrs, "pool_int64s", &c->pool);
    c->nweights = cge_attrs_get_floats(attrs, "weights", &c->weights);
    if (cge_attrs_find(attrs, "pool_strings")) {
        snprintf(msg, size, "pool_strings (string n-grams) is not supported; only int32/int64 "
                            "input with pool_int64s");
        return false;
    }
    if (c->mode < 0) {
        snprintf(msg, size, "mode is '%s'; it must be TF, IDF or TFIDF", mode);
        return false;
    }
    if (c->min_n < 1 || c->max_n < c->min_n || c->max_skip < 0 || c->ncounts < c->max_n ||
        c->nindexes < 0 || c->npool < 0) {
        snprintf(msg, size, "needs 1 <= min_gram_length <= max_gram_length <= len(ngram_counts), "
                            "max_skip_count >= 0, ngram_indexes and pool_int64s");
        return false;
    }
    /* n-grams of length n + 1 start at counts[n] in the pool */
    int64_t total = 0;
    for (int64_t n = 0; n < c->ncounts; n++) {
        int64_t start = c->counts[n], end = n + 1 < c->ncounts ? c->counts[n + 1] : c->npool;
        if (start < 0 || end < start || end > c->npool || (end - start) % (n + 1)) {
            snprintf(msg, size, "ngram_counts[%lld] = %lld does not split pool_int64s into "
                                "%lld-grams", (long long)n, (long long)start, (long long)(n + 1));
            return false;
        }
        total += (end - start) / (n + 1);
    }
    if (total != c->nindexes || (c->nweights >= 0 && c->nweights != c->nindexes)) {
        snprintf(msg, size, "the pool holds %lld n-grams; ngram_indexes has %lld and weights %lld",
                 (long long)total, (long long)c->nindexes, (long long)c->nweights);
        return false;
    }
    c->out_dim = 0;
    for (int64_t i = 0; i < c->nindexes; i++) {
        if (c->indexes[i] < 0) {
            snprintf(msg, size, "ngram_indexes[%lld] is negative", (long long)i);
            return false;
        }
        if (c->indexes[i] + 1 > c->out_dim)
            c->out_dim = c->indexes[i] + 1;
    }
    return true;
}

static cge_status tfidf_infer(cge_infer_ctx *ctx)
{
    const cge_tensor_desc *x = &ctx->inputs[0];
    tfidf_cfg c;
    char msg[256];
    if (!tfidf_config(ctx->attrs, &c, msg, sizeof msg))
        return cge_meta_error(ctx, CGE_ERR_UNSUPPORTED, "%s", msg);
    if (!(CGE__IDX_DT & CGE_DT(x->dtype)))
        return cge_meta_error(ctx, CGE_ERR_DTYPE,
                              "X is %s; only int32 and int64 input is supported (no strings)",
                              cge_dtype_name(x->dtype));
    if (x->shape.rank != 1 && x->shape.rank != 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X has rank %d; it must be [C] or [N, C]",
                              (int)x->shape.rank);
    ctx->outputs[0].dtype = CGE_F32;
    ctx->outputs[0].shape = x->shape.rank == 1 ? CGE_SHAPE(c.out_dim)
                                                : CGE_SHAPE(x->shape.dims[0], c.out_dim);
    return CGE_OK;
}

typedef struct tfidf_args {
    tfidf_cfg c;
    const void *x;
    cge_dtype dt;
    float *y;
    int64_t rows, len;
} tfidf_args;

static void tfidf_block(int64_t b, int64_t nb, void *p)
{
    const tfidf_args *a = p;
    const tfidf_cfg *c = &a->c;
    int64_t lo, hi;
    cge__block_range(a->rows, b, nb, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        float *out = a->y + r * c->out_dim;
        memset(out, 0, sizeof *out * (size_t)c->out_dim);
        int64_t base = r * a->len, id0 = 0;
        for (int64_t n = 1; n <= c->max_n; n++) {
            int64_t start = c->counts[n - 1], end = n < c->ncounts ? c->counts[n] : c->npool;
            int64_t count = (end - start) / n;
            if (n >= c->min_n && count > 0) {
                /* unigrams are counted once; longer n-grams once per skip */
                int64_t skips = n == 1 ? 1 : c->max_skip + 1;
                for (int64_t s = 1; s <= skips; s++)
                    for (int64_t i = 0; i + (n - 1) * s < a->len; i++)
                        for (int64_t g = 0; g < count; g++) {
                            const int64_t *gram = c->pool + start + g * n;
                            int64_t k = 0;
                            while (k < n &&
                                   cge__load_as_i64(a->dt, a->x, base + i + k * s) == gram[k])
                                k++;
                            if (k == n) {
                                out[c->indexes[id0 + g]] += 1.0f;
                                break;
                            }
                        }
            }
            id0 += count;
        }
        if (c->mode == TFIDF_TF)
            continue;
        for (int64_t id = 0; id < c->nindexes; id++) {
            float w = c->nweights >= 0 ? c->weights[id] : 1.0f, *o = out + c->indexes[id];
            *o = c->mode == TFIDF_IDF ? (*o > 0.0f ? w : 0.0f) : *o * w;
        }
    }
}

static cge_status tfidf_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    tfidf_args a;
    char msg[256];
    memset(&a, 0, sizeof a);
    if (!tfidf_config(ctx->attrs, &a.c, msg, sizeof msg))
        return cge_kernel_error(ctx, CGE_ERR_UNSUPPORTED, "%s", msg);
    if (!(CGE__IDX_DT & CGE_DT(x->dtype)) || (x->shape.rank != 1 && x->shape.rank != 2) ||
        ctx->outputs[0].dtype != CGE_F32)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "input the meta did not accept");
    a.rows = x->shape.rank == 1 ? 1 : x->shape.dims[0];
    a.len = x->shape.dims[x->shape.rank - 1];
    a.x = x->data;
    a.dt = x->dtype;
    a.y = ctx->outputs[0].data;
    if (a.rows * a.c.out_dim == 0)
        return CGE_OK;
    if (!a.y || (a.len > 0 && !a.x))
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing input or output buffer");
    int64_t per = (a.len + 1) * (a.c.nindexes + 1);
    return cge_launch(stream, tfidf_block,
                      cge__blocks_for(a.rows, per >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / per,
                                     ctx->num_threads),
                      &a, sizeof a);
}

/* ---- definitions ---------------------------------------------------------------------- */

static const cge_kernel_def k_tfidf[] = CGE__KDEF(CGE__IDX_DT, tfidf_launch, NULL, -1);

static const cge_arg_def tfidf_in[] = {{"X", 0, CGE__IDX_DT, "[C] or [N, C] token ids"}};
static const cge_arg_def tfidf_out[] = {{"Y", 0, CGE_DT(CGE_F32), "[O] or [N, O] n-gram scores"}};

static const cge_attr_def tfidf_attrs[] = {
    {"max_gram_length", CGE_ATTR_INT, true, 0, 0.0f, NULL, "longest n-gram"},
    {"max_skip_count", CGE_ATTR_INT, true, 0, 0.0f, NULL, "most items skipped between two"},
    {"min_gram_length", CGE_ATTR_INT, true, 0, 0.0f, NULL, "shortest n-gram"},
    {"mode", CGE_ATTR_STRING, true, 0, 0.0f, NULL, "TF, IDF or TFIDF"},
    {"ngram_counts", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "pool start of each n-gram length"},
    {"ngram_indexes", CGE_ATTR_INTS, true, 0, 0.0f, NULL, "output position of each n-gram"},
    {"pool_int64s", CGE_ATTR_INTS, false, 0, 0.0f, NULL, "the n-grams, by length"},
    {"pool_strings", CGE_ATTR_STRINGS, false, 0, 0.0f, NULL, "string n-grams: unsupported"},
    {"weights", CGE_ATTR_FLOATS, false, 0, 0.0f, NULL, "weight of each n-gram (default 1)"},
};

static const cge_op_def text_ops[] = {
    CGE__OPDEF("TfIdfVectorizer", 9, tfidf_in, 1, tfidf_out, 1, tfidf_attrs,
               CGE__NATTR(tfidf_attrs), tfidf_infer, k_tfidf,
               "N-gram counts (TF, IDF or TFIDF) of integer token sequences."),
};

const cge_op_def *cge__ops_text(int32_t *count)
{
    *count = (int32_t)(sizeof text_ops / sizeof text_ops[0]);
    return text_ops;
}
