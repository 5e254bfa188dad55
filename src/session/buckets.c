/* Shape buckets (see buckets.h): rounding a run's symbolic sizes up to the
 * declared buckets, and the box copies that pad inputs and cut outputs. */
#include "session/buckets.h"

#include <stdlib.h>
#include <string.h>

typedef struct bucket_dim {
    char *name;
    int64_t *sizes;     /* ascending, distinct */
    int32_t n;
} bucket_dim;

struct cge__buckets {
    bucket_dim *dims;
    int32_t n;
};

void cge__buckets_destroy(cge__buckets *b)
{
    if (!b)
        return;
    for (int32_t i = 0; i < b->n; i++) {
        free(b->dims[i].name);
        free(b->dims[i].sizes);
    }
    free(b->dims);
    free(b);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

cge_status cge__buckets_create(const cge_dim_buckets *specs, int32_t n, cge__buckets **out)
{
    *out = NULL;
    if (n <= 0)
        return CGE_OK;
    if (!specs)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "session options: num_buckets is %d but buckets is NULL", (int)n);
    cge__buckets *b = calloc(1, sizeof *b);
    if (!b || !(b->dims = calloc((size_t)n, sizeof *b->dims))) {
        free(b);
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "session options: out of memory");
    }
    for (int32_t i = 0; i < n; i++) {
        const cge_dim_buckets *s = &specs[i];
        if (!s->dim || !s->dim[0] || s->num_sizes <= 0 || !s->sizes) {
            cge__buckets_destroy(b);
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                             "session options: bucket %d needs a dim name and at least one size",
                             (int)i);
        }
        for (int32_t k = 0; k < s->num_sizes; k++)
            if (s->sizes[k] < 1) {
                cge__buckets_destroy(b);
                return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                                 "session options: bucket size %lld of dim '%s' is not positive",
                                 (long long)s->sizes[k], s->dim);
            }
        bucket_dim *d = &b->dims[b->n++];
        d->name = strdup(s->dim);
        d->sizes = malloc(sizeof(int64_t) * (size_t)s->num_sizes);
        if (!d->name || !d->sizes) {
            cge__buckets_destroy(b);
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "session options: out of memory");
        }
        memcpy(d->sizes, s->sizes, sizeof(int64_t) * (size_t)s->num_sizes);
        qsort(d->sizes, (size_t)s->num_sizes, sizeof(int64_t), cmp_i64);
        for (int32_t k = 0; k < s->num_sizes; k++)
            if (!d->n || d->sizes[d->n - 1] != d->sizes[k])
                d->sizes[d->n++] = d->sizes[k];
    }
    *out = b;
    return CGE_OK;
}

/* Symbol `dim`'s bucket list, or NULL. */
static const bucket_dim *find(const cge__buckets *b, const cge_graph *g, int64_t dim)
{
    const char *name = cge_graph_dim_symbol_name(g, dim);
    for (int32_t i = 0; name && i < b->n; i++)
        if (!strcmp(b->dims[i].name, name))
            return &b->dims[i];
    return NULL;
}

/* Whether every output of `g` carries symbol `dim` (by name) in its shape. */
static bool every_output_carries(const cge_graph *g, const char *name)
{
    for (int32_t o = 0; o < cge_graph_num_outputs(g); o++) {
        cge_tensor_desc d;
        if (cge_graph_get_desc(g, cge_graph_output(g, o), &d))
            return false;
        bool has = false;
        /* A dim computed from the symbol (2*batch) could not be cut back. */
        for (int32_t k = 0; k < d.shape.rank; k++)
            if (d.shape.dims[k] == CGE_DIM_DYNAMIC || cge_dim_is_derived(d.shape.dims[k]))
                return false;
        for (int32_t k = 0; k < d.shape.rank && !has; k++) {
            const char *n = cge_dim_is_symbol(d.shape.dims[k])
                                ? cge_graph_dim_symbol_name(g, d.shape.dims[k])
                                : NULL;
            has = n && !strcmp(n, name);
        }
        if (!has)
            return false;
    }
    return true;
}

/* An input axis that rounds up to bucket dim `bd`, and an output axis that
 * takes back the size of input `in`'s axis `in_axis`. */
typedef struct pad_in {
    int32_t input, axis;
    const bucket_dim *bd;
} pad_in;

typedef struct pad_out {
    int32_t output, axis, in, in_axis;
} pad_out;

struct cge__pad_plan {
    pad_in *ins;
    int32_t num_ins;
    pad_out *outs;
    int32_t num_outs;
};

void cge__pad_plan_destroy(cge__pad_plan *p)
{
    if (!p)
        return;
    free(p->ins);
    free(p->outs);
    free(p);
}

cge_status cge__pad_plan_create(const cge__buckets *b, const cge_graph *g,
                                const cge_graph *out_graph, cge__pad_plan **out)
{
    *out = NULL;
    if (!b)
        return CGE_OK;
    int32_t ni = cge_graph_num_inputs(g), no = cge_graph_num_outputs(out_graph);
    cge__pad_plan *p = calloc(1, sizeof *p);
    if (p) {
        p->ins = calloc((size_t)ni * CGE_MAX_RANK + 1, sizeof *p->ins);
        p->outs = calloc((size_t)no * CGE_MAX_RANK + 1, sizeof *p->outs);
    }
    if (!p || !p->ins || !p->outs) {
        cge__pad_plan_destroy(p);
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "shape buckets: out of memory");
    }
    for (int32_t i = 0; i < ni; i++) {
        cge_tensor_desc d;
        if (cge_graph_get_desc(g, cge_graph_input(g, i), &d))
            continue;
        for (int32_t k = 0; k < d.shape.rank; k++) {
            const bucket_dim *bd = cge_dim_is_symbol(d.shape.dims[k]) ? find(b, g, d.shape.dims[k])
                                                                       : NULL;
            if (bd && every_output_carries(out_graph, bd->name))
                p->ins[p->num_ins++] = (pad_in){i, k, bd};
        }
    }
    /* Each output axis of a padded symbol takes the size of the first input
     * axis declared with it. */
    for (int32_t o = 0; o < no && p->num_ins; o++) {
        cge_tensor_desc d;
        if (cge_graph_get_desc(out_graph, cge_graph_output(out_graph, o), &d))
            continue;
        for (int32_t k = 0; k < d.shape.rank; k++) {
            for (int32_t q = 0; q < p->num_ins; q++) {
                cge_tensor_desc id;
                cge_graph_get_desc(g, cge_graph_input(g, p->ins[q].input), &id);
                if (id.shape.dims[p->ins[q].axis] == d.shape.dims[k]) {
                    p->outs[p->num_outs++] = (pad_out){o, k, p->ins[q].input, p->ins[q].axis};
                    break;
                }
            }
        }
    }
    if (!p->num_ins) {
        cge__pad_plan_destroy(p);
        p = NULL;
    }
    *out = p;
    return CGE_OK;
}

bool cge__pad_round(const cge__pad_plan *p, const cge_shape *shapes, int32_t ni,
                    cge_shape *padded)
{
    for (int32_t i = 0; i < ni; i++)
        padded[i] = shapes[i];
    bool changed = false;
    for (int32_t q = 0; p && q < p->num_ins; q++) {
        const pad_in *a = &p->ins[q];
        if (a->input >= ni || a->axis >= shapes[a->input].rank)
            continue;
        int64_t n = shapes[a->input].dims[a->axis];
        for (int32_t s = 0; s < a->bd->n; s++)
            if (a->bd->sizes[s] >= n) {
                changed |= a->bd->sizes[s] != n;
                padded[a->input].dims[a->axis] = a->bd->sizes[s];
                break;
            }
    }
    return changed;
}

void cge__pad_cut_shape(const cge__pad_plan *p, int32_t output, const cge_shape *shapes,
                        cge_shape *shape)
{
    for (int32_t q = 0; p && q < p->num_outs; q++) {
        const pad_out *c = &p->outs[q];
        if (c->output == output && c->axis < shape->rank)
            shape->dims[c->axis] = shapes[c->in].dims[c->in_axis];
    }
}

/* dst/src strides in elements for the box walk. */
static void box(char *dst, const cge_shape *ds, const char *src, const cge_shape *ss, size_t elem,
                int32_t axis, size_t dstride, size_t sstride)
{
    int64_t n = ds->dims[axis] < ss->dims[axis] ? ds->dims[axis] : ss->dims[axis];
    size_t dsub = dstride / (size_t)(ds->dims[axis] ? ds->dims[axis] : 1);
    size_t ssub = sstride / (size_t)(ss->dims[axis] ? ss->dims[axis] : 1);
    if (axis == ds->rank - 1) {
        memcpy(dst, src, (size_t)n * elem);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        box(dst + (size_t)i * dsub * elem, ds, src + (size_t)i * ssub * elem, ss, elem, axis + 1,
            dsub, ssub);
}

void cge__copy_box(void *dst, const cge_shape *dst_shape, const void *src,
                   const cge_shape *src_shape, size_t elem)
{
    size_t dn = (size_t)cge_shape_numel(dst_shape), sn = (size_t)cge_shape_numel(src_shape);
    if (dn > 0 && !cge_shape_equal(dst_shape, src_shape))
        memset(dst, 0, dn * elem);
    if (!dn || !sn)
        return;
    if (dst_shape->rank == 0) {
        memcpy(dst, src, elem);
        return;
    }
    box(dst, dst_shape, src, src_shape, elem, 0, dn, sn);
}
