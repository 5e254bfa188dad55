/* Tensor parallelism as a graph rewrite (Megatron-style). From each MatMul
 * with a constant weight, a "sharded region" grows forward: values whose one
 * axis is cut into [outer][tp][block] and of which this rank keeps slice
 * `rank` (the heads of attention, a slice of the MLP's hidden units). The
 * region passes through ops that act on each slice alone and ends at
 * MatMul/Gemm nodes that contract over the sharded axis (row-parallel), whose
 * partial sums an AllReduce adds. A region meeting anything else is left
 * replicated; every rewrite is checked by inferring the graph again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "cge/compiler.h"
#include "cge/dist.h"
#include "cge/op.h"
#include "dist/dist_internal.h"

#define MAX_REGION 256
#define MAX_EDITS 64
#define MAX_EXITS 8

/* How a value is sharded: axis `ax` of the original is [outer][P][block]. */
typedef struct shard {
    int32_t id;
    int32_t ax;
    int64_t block;
} shard;

/* A constant input of a node replaced by this rank's part (or a new value). */
typedef struct edit {
    cge_node *node;
    int32_t input;
    cge_tensor t;          /* data malloc'd */
    /* Nonempty for a weight's part: the new constant's name, from the
     * weight's content, so that layers with equal weights (torch's cloned
     * layers) share one part as their full weights were shared. */
    char key[80];
} edit;

typedef struct region {
    const cge_graph *g;
    int P, r;
    shard vals[MAX_REGION];
    int32_t nvals;
    cge_node *done[MAX_REGION];
    int32_t ndone;
    edit edits[MAX_EDITS];
    int32_t nedits;
    cge_node *exits[MAX_EXITS];
    int32_t nexits;
    bool fail;
    char why[160];
} region;

static void reject(region *R, const char *fmt, const char *what)
{
    if (!R->fail)
        snprintf(R->why, sizeof R->why, fmt, what);
    R->fail = true;
}

static const shard *find(const region *R, int32_t id)
{
    for (int32_t i = 0; i < R->nvals; i++)
        if (R->vals[i].id == id)
            return &R->vals[i];
    return NULL;
}

static bool is_done(const region *R, const cge_node *n)
{
    for (int32_t i = 0; i < R->ndone; i++)
        if (R->done[i] == n)
            return true;
    return false;
}

static bool desc_of(const cge_graph *g, int32_t id, cge_tensor_desc *d)
{
    return id >= 0 && !cge_graph_value_desc(g, id, d) && cge_shape_is_static(&d->shape) &&
           cge_dtype_size(d->dtype);
}

static void add_val(region *R, int32_t id, int32_t ax, int64_t block)
{
    if (find(R, id))
        return;
    if (R->nvals == MAX_REGION) {
        reject(R, "%s", "region too large");
        return;
    }
    R->vals[R->nvals++] = (shard){id, ax, block};
}

/* This rank's part of `t` along `axis` cut as [outer][P][block]. */
static bool shard_const(const cge_tensor *t, int32_t axis, int64_t block, int P, int r, cge_tensor *out)
{
    int64_t n = t->shape.dims[axis];
    if (block <= 0 || n % (P * block))
        return false;
    int64_t outer = n / (P * block), pre = 1, post = 1;
    for (int32_t d = 0; d < axis; d++)
        pre *= t->shape.dims[d];
    for (int32_t d = axis + 1; d < t->shape.rank; d++)
        post *= t->shape.dims[d];
    size_t es = cge_dtype_size(t->dtype), row = (size_t)(block * post) * es;
    *out = *t;
    out->shape.dims[axis] = n / P;
    out->bytes = t->bytes / (size_t)P;
    out->data = malloc(out->bytes + 1);
    if (!out->data)
        return false;
    char *dst = out->data;
    const char *src = t->data;
    for (int64_t a = 0; a < pre; a++)
        for (int64_t o = 0; o < outer; o++) {
            size_t from = (size_t)(((a * outer + o) * P + r) * block * post) * es;
            memcpy(dst, src + from, row);
            dst += row;
        }
    return true;
}

static const cge_tensor *const_in(const cge_graph *g, const cge_node *n, int32_t i)
{
    return i < cge_node_num_inputs(n) ? cge_graph_value_constant(g, cge_node_input_id(n, i)) : NULL;
}

static void add_edit_keyed(region *R, cge_node *n, int32_t input, cge_tensor t, const char *key)
{
    if (R->nedits == MAX_EDITS) {
        free(t.data);
        reject(R, "%s", "too many edits");
        return;
    }
    R->edits[R->nedits] = (edit){n, input, t, ""};
    snprintf(R->edits[R->nedits].key, sizeof R->edits[R->nedits].key, "%s", key ? key : "");
    R->nedits++;
}

static void add_edit(region *R, cge_node *n, int32_t input, cge_tensor t)
{
    add_edit_keyed(R, n, input, t, NULL);
}

/* A weight's part along `axis`: keyed by rank, axis and block. */
static bool add_part(region *R, cge_node *n, int32_t input, int32_t axis, int64_t block)
{
    const cge_tensor *c = const_in(R->g, n, input);
    cge_tensor part;
    char key[80];
    if (!c || !shard_const(c, axis, block, R->P, R->r, &part))
        return false;
    uint64_t h = cge__fnv1a(CGE__FNV1A_SEED, c->data, c->bytes);
    h ^= (uint64_t)c->shape.dims[0] * 31 + (uint64_t)c->shape.rank;
    snprintf(key, sizeof key, "tp%d/%016llx/a%d_b%lld", R->r, (unsigned long long)h, (int)axis,
             (long long)block);
    add_edit_keyed(R, n, input, part, key);
    return true;
}

static int64_t *ints_copy(const cge_tensor *t)
{
    int64_t n = cge_shape_numel(&t->shape);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n + 1));
    for (int64_t i = 0; v && i < n; i++)
        v[i] = t->dtype == CGE_I64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    return v;
}

static cge_tensor ints_tensor(const cge_tensor *like, const int64_t *v, int64_t n)
{
    cge_tensor t = {.dtype = CGE_I64, .shape = {.rank = 1, .dims = {n}}};
    (void)like;
    t.bytes = (size_t)n * sizeof(int64_t);
    t.data = malloc(t.bytes + 1);
    if (t.data)
        memcpy(t.data, v, t.bytes);
    return t;
}

static const char *const ELEMENTWISE_UNARY[] = {
    "Relu", "Gelu", "Erf", "Tanh", "Sigmoid", "Exp", "Neg", "Sqrt", "Identity", "Cast",
    "LeakyRelu", "Elu", "Selu", "Softplus", "HardSigmoid", "Abs", "Reciprocal", NULL};

static bool in_list(const char *op, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(op, *list))
            return true;
    return false;
}

/* Whether constant `c`, broadcast against a rank-`rank` value, has size 1
 * (or no dim) at axis `ax`: every slice of that axis reads the same data. */
static bool broadcasts_over(const cge_tensor *c, int32_t rank, int32_t ax)
{
    int32_t k = ax - (rank - c->shape.rank);
    return c->shape.rank <= rank && (k < 0 || c->shape.dims[k] == 1);
}

/* One node reading region values: its outputs join the region, it becomes
 * an exit, or the region is rejected. Returns false to wait for another
 * region input that is not known yet. */
static bool visit(region *R, cge_node *n)
{
    const cge_graph *g = R->g;
    const char *op = cge_node_op_type(n), *dom = cge_node_domain(n);
    int32_t ni = cge_node_num_inputs(n);
    int32_t out = cge_node_num_outputs(n) > 0 ? cge_node_output_id(n, 0) : -1;
    const shard *s0 = NULL;
    int32_t k0 = -1, nreg = 0, ndyn = 0;
    for (int32_t i = 0; i < ni; i++) {
        int32_t id = cge_node_input_id(n, i);
        if (id < 0)
            continue;
        const shard *s = find(R, id);
        if (s) {
            nreg++;
            if (!s0) {
                s0 = s;
                k0 = i;
            }
        } else if (!cge_graph_value_constant(g, id)) {
            ndyn++;
        }
    }
    cge_tensor_desc xd, od;
    if (!s0 || !desc_of(g, s0->id, &xd) || out < 0 || !desc_of(g, out, &od)) {
        reject(R, "%s: shapes not static", cge_node_name(n));
        return true;
    }
    if (dom && dom[0]) {
        reject(R, "%s: not a default-domain op", op);
        return true;
    }
    int32_t rank = xd.shape.rank, ax = s0->ax;
    int64_t block = s0->block;
    if (ndyn) /* a replicated input, or a region one not known yet: wait */
        return false;
    /* A row-parallel end's output is whole again after its AllReduce (which
     * takes over the output's name), so it may be a graph output. */
    bool may_end = nreg == 1 && ((!strcmp(op, "MatMul") && const_in(g, n, 1)) || !strcmp(op, "Gemm"));
    if (cge_graph_value_is_output(g, out) && !may_end) {
        reject(R, "%s: a graph output would be sharded", cge_node_name(n));
        return true;
    }
    if (in_list(op, ELEMENTWISE_UNARY) && nreg == 1 && ndyn == 0 && ni == 1) {
        add_val(R, out, ax, block);
        return true;
    }
    if (!strcmp(op, "Add") || !strcmp(op, "Sub") || !strcmp(op, "Mul") || !strcmp(op, "Div") ||
        !strcmp(op, "Pow")) {
        if (ni != 2)
            goto bad;
        if (nreg == 2) {
            const shard *a = find(R, cge_node_input_id(n, 0)), *b = find(R, cge_node_input_id(n, 1));
            cge_tensor_desc ad, bd;
            if (!a || !b) /* the same value twice */
                a = b = s0;
            if (!desc_of(g, a->id, &ad) || !desc_of(g, b->id, &bd) ||
                !cge_shape_equal(&ad.shape, &bd.shape) || a->ax != b->ax || a->block != b->block)
                goto bad;
            add_val(R, out, ax, block);
            return true;
        }
        if (ndyn)
            goto bad;
        const cge_tensor *c = const_in(g, n, 1 - k0);
        if (!c || !cge_shape_equal(&od.shape, &xd.shape))
            goto bad;
        if (cge_shape_numel(&c->shape) == 1 || broadcasts_over(c, rank, ax)) {
            add_val(R, out, ax, block);
            return true;
        }
        /* A bias along the sharded last axis: this rank's part of it. */
        int64_t sz = xd.shape.dims[ax];
        bool vec = ax == rank - 1 && c->shape.rank >= 1 && c->shape.dims[c->shape.rank - 1] == sz &&
                   cge_shape_numel(&c->shape) == sz;
        if (!vec || !add_part(R, n, 1 - k0, c->shape.rank - 1, block))
            goto bad;
        add_val(R, out, ax, block);
        return true;
    }
    if (!strcmp(op, "Where") && ni == 3 && k0 >= 1) {
        /* A mask that is the same for every slice (the causal mask: size 1
         * on the heads axis), and values that are region ones or scalars. */
        const cge_tensor *cond = const_in(g, n, 0);
        if (!cond || !broadcasts_over(cond, rank, ax))
            goto bad;
        for (int32_t i = 1; i < 3; i++) {
            const shard *v = find(R, cge_node_input_id(n, i));
            const cge_tensor *c = const_in(g, n, i);
            if (v ? (v->ax != ax || v->block != block)
                  : !(c && (cge_shape_numel(&c->shape) == 1 || broadcasts_over(c, rank, ax))))
                goto bad;
        }
        add_val(R, out, ax, block);
        return true;
    }
    if (!strcmp(op, "Concat")) {
        /* Joined along another axis; constant parts (an empty cache) are cut
         * as the region values are. */
        int64_t a = cge_attrs_get_int(cge_node_attrs_const(n), "axis", 0);
        if (a < 0)
            a += rank;
        if (a == ax)
            goto bad;
        for (int32_t i = 0; i < ni; i++) {
            const shard *v = find(R, cge_node_input_id(n, i));
            if (v) {
                if (v->ax != ax || v->block != block)
                    goto bad;
                continue;
            }
            const cge_tensor *c = const_in(g, n, i);
            if (!c || c->shape.rank != rank || c->shape.dims[ax] != xd.shape.dims[ax] ||
                !add_part(R, n, i, ax, block))
                goto bad;
        }
        add_val(R, out, ax, block);
        return true;
    }
    if (!strcmp(op, "Transpose") && nreg == 1) {
        const int64_t *perm = NULL;
        int64_t np = cge_attrs_get_ints(cge_node_attrs_const(n), "perm", &perm);
        if (np != rank)
            goto bad;
        for (int32_t j = 0; j < rank; j++)
            if (perm[j] == ax) {
                add_val(R, out, j, block);
                return true;
            }
        goto bad;
    }
    if ((!strcmp(op, "Softmax") || !strcmp(op, "LogSoftmax")) && nreg == 1 && ni == 1) {
        int64_t a = cge_attrs_get_int(cge_node_attrs_const(n), "axis", -1);
        if (a < 0)
            a += rank;
        if (a == ax)
            goto bad;
        add_val(R, out, ax, block);
        return true;
    }
    if (!strcmp(op, "Slice") && k0 == 0 && nreg == 1 && ndyn == 0) {
        const cge_tensor *st = const_in(g, n, 1), *en = const_in(g, n, 2), *axs = const_in(g, n, 3),
                         *sp = const_in(g, n, 4);
        if (!st || !en)
            goto bad;
        int64_t cnt = cge_shape_numel(&st->shape);
        int64_t *sv = ints_copy(st), *ev = ints_copy(en), *av = axs ? ints_copy(axs) : NULL,
                *pv = sp ? ints_copy(sp) : NULL;
        bool ok = sv && ev && (!axs || av) && (!sp || pv), touched = false;
        int64_t span = R->P * block, sz = xd.shape.dims[ax];
        for (int64_t i = 0; ok && i < cnt; i++) {
            int64_t a = av ? av[i] : i;
            if (a < 0)
                a += rank;
            if (a != ax)
                continue;
            int64_t b = sv[i] < 0 ? sv[i] + sz : sv[i], e = ev[i] < 0 ? ev[i] + sz : ev[i];
            b = b < 0 ? 0 : b > sz ? sz : b;
            e = e < 0 ? 0 : e > sz ? sz : e;
            ok = (!pv || pv[i] == 1) && b % span == 0 && e % span == 0;
            sv[i] = b / R->P;
            ev[i] = e / R->P;
            touched = true;
        }
        if (ok && touched) {
            add_edit(R, n, 1, ints_tensor(st, sv, cnt));
            add_edit(R, n, 2, ints_tensor(en, ev, cnt));
        }
        free(sv);
        free(ev);
        free(av);
        free(pv);
        if (!ok)
            goto bad;
        add_val(R, out, ax, block);
        return true;
    }
    if (!strcmp(op, "Reshape") && k0 == 0 && nreg == 1 && ndyn == 0) {
        /* The [P] factor's place in the flat order, found again in the output. */
        int64_t sP = block;
        for (int32_t d = ax + 1; d < rank; d++)
            sP *= xd.shape.dims[d];
        int64_t span = sP * R->P, stride = 1;
        for (int32_t k = od.shape.rank - 1; k >= 0; k--) {
            int64_t size = od.shape.dims[k];
            if (stride <= sP && sP % stride == 0 && span <= stride * size && (stride * size) % span == 0) {
                int64_t target[CGE_MAX_RANK];
                for (int32_t j = 0; j < od.shape.rank; j++)
                    target[j] = od.shape.dims[j];
                target[k] /= R->P;
                add_edit(R, n, 1, ints_tensor(NULL, target, od.shape.rank));
                add_val(R, out, k, sP / stride);
                return true;
            }
            stride *= size;
        }
        goto bad;
    }
    if (!strcmp(op, "MatMul") && ni == 2) {
        if (nreg == 2) { /* attention: batched over the sharded axis */
            const shard *a = find(R, cge_node_input_id(n, 0)), *b = find(R, cge_node_input_id(n, 1));
            cge_tensor_desc bd;
            if (!a || !b || !desc_of(g, b->id, &bd) || bd.shape.rank != rank || a->ax != b->ax ||
                a->block != b->block || a->ax >= rank - 2)
                goto bad;
            add_val(R, out, ax, block);
            return true;
        }
        const cge_tensor *w = const_in(g, n, 1);
        if (k0 == 0 && ndyn == 0 && w && w->shape.rank == 2 && ax == rank - 1) {
            if (!add_part(R, n, 1, 0, block))
                goto bad;
            if (R->nexits == MAX_EXITS)
                goto bad;
            R->exits[R->nexits++] = n;
            return true;
        }
        goto bad;
    }
    if (!strcmp(op, "Gemm") && k0 == 0 && nreg == 1 && ndyn == 0 && rank == 2 && ax == 1 &&
        !cge_attrs_get_int(cge_node_attrs_const(n), "transA", 0)) {
        const cge_tensor *w = const_in(g, n, 1), *c = const_in(g, n, 2);
        bool tb = cge_attrs_get_int(cge_node_attrs_const(n), "transB", 0) != 0;
        if (!w || w->shape.rank != 2 || !add_part(R, n, 1, tb ? 1 : 0, block))
            goto bad;
        if (c && R->r != 0) { /* the bias is added once, by rank 0 */
            cge_tensor z = *c;
            z.data = calloc(1, c->bytes + 1);
            if (!z.data)
                goto bad;
            char zk[48];
            snprintf(zk, sizeof zk, "tp/zero%zu", c->bytes);
            add_edit_keyed(R, n, 2, z, zk);
        }
        if (R->nexits == MAX_EXITS)
            goto bad;
        R->exits[R->nexits++] = n;
        return true;
    }
bad:
    reject(R, "%s: not a shardable use", cge_node_name(n));
    return true;
}

/* Grows the region from `start` (MatMul, constant [K, N] weight) with
 * `outer` groups along N. */
static void grow(region *R, cge_node *start, int64_t outer)
{
    const cge_graph *g = R->g;
    const cge_tensor *w = const_in(g, start, 1);
    cge_tensor_desc od;
    int32_t out = cge_node_output_id(start, 0);
    if (!w || !desc_of(g, out, &od)) {
        reject(R, "%s", "start without a constant weight");
        return;
    }
    /* Gemm (torch's addmm after cge.torch): B may be [N, K] (transB), and
     * a bias of N values is split like the columns. */
    bool gemm = !strcmp(cge_node_op_type(start), "Gemm");
    bool tb = gemm && cge_attrs_get_int(cge_node_attrs_const(start), "transB", 0) != 0;
    if (gemm && cge_attrs_get_int(cge_node_attrs_const(start), "transA", 0)) {
        reject(R, "%s", "Gemm with transA");
        return;
    }
    int64_t n = w->shape.dims[tb ? 0 : 1];
    int64_t block = n / (outer * R->P);
    if (n % (outer * R->P) || !add_part(R, start, 1, tb ? 0 : 1, block)) {
        reject(R, "%s", "weight not divisible");
        return;
    }
    if (gemm && cge_node_num_inputs(start) > 2 && cge_node_input(start, 2)[0]) {
        const cge_tensor *c = const_in(g, start, 2);
        int64_t cn = c ? cge_shape_numel(&c->shape) : -1;
        if (!c || (cn != 1 && (cn != n || c->shape.dims[c->shape.rank - 1] != n ||
                               !add_part(R, start, 2, c->shape.rank - 1, block)))) {
            reject(R, "%s", "Gemm bias neither a constant of N values nor a scalar");
            return;
        }
    }
    R->done[R->ndone++] = start;
    add_val(R, out, od.shape.rank - 1, block);
    /* Siblings: other MatMuls with constant weights reading the same input
     * (separate q, k and v projections) start the region too, so that
     * attention meets all three sharded alike. */
    int32_t in0 = cge_node_input_id(start, 0);
    for (int32_t i = 0; i < cge_graph_num_nodes(g) && !R->fail; i++) {
        cge_node *m = cge_graph_node(g, i);
        const cge_tensor *mw;
        cge_tensor_desc md;
        if (m == start || cge_node_is_removed(m) || strcmp(cge_node_op_type(m), "MatMul") ||
            cge_node_domain(m)[0] || cge_node_input_id(m, 0) != in0 ||
            !(mw = const_in(g, m, 1)) || mw->shape.rank != 2 ||
            !desc_of(g, cge_node_output_id(m, 0), &md) || mw->shape.dims[1] % (outer * R->P))
            continue;
        int64_t mb = mw->shape.dims[1] / (outer * R->P);
        if (!add_part(R, m, 1, 1, mb))
            continue;
        R->done[R->ndone++] = m;
        add_val(R, cge_node_output_id(m, 0), md.shape.rank - 1, mb);
    }
    /* Visit every node reading a region value until nothing changes. */
    for (bool changed = true; changed && !R->fail;) {
        changed = false;
        for (int32_t i = 0; i < cge_graph_num_nodes(g) && !R->fail; i++) {
            cge_node *c = cge_graph_node(g, i);
            if (cge_node_is_removed(c) || is_done(R, c))
                continue;
            bool reads = false;
            for (int32_t k = 0; k < cge_node_num_inputs(c); k++)
                reads |= find(R, cge_node_input_id(c, k)) != NULL;
            if (!reads)
                continue;
            if (visit(R, c)) {
                if (R->ndone == MAX_REGION) {
                    reject(R, "%s", "region too large");
                    break;
                }
                R->done[R->ndone++] = c;
                changed = true;
            }
        }
    }
    if (!R->fail && R->nexits == 0)
        reject(R, "%s", "no row-parallel MatMul ends the region");
    /* Nodes left waiting for a second region input never got it. */
    for (int32_t i = 0; i < cge_graph_num_nodes(g) && !R->fail; i++) {
        cge_node *c = cge_graph_node(g, i);
        if (cge_node_is_removed(c) || is_done(R, c))
            continue;
        for (int32_t k = 0; k < cge_node_num_inputs(c); k++)
            if (find(R, cge_node_input_id(c, k)))
                reject(R, "%s: mixes sharded and replicated values", cge_node_name(c));
    }
    if (cge_graph_value_is_output(g, out))
        reject(R, "%s", "start output is a graph output");
}

static void region_free(region *R)
{
    for (int32_t i = 0; i < R->nedits; i++)
        free(R->edits[i].t.data);
    R->nedits = 0;
}

/* Applies R's edits to `g` (a clone of R->g, same value ids and nodes in
 * the same order) and adds the AllReduces. */
static cge_status apply(region *R, cge_graph *g, int32_t serial)
{
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < R->nedits; i++) {
        edit *e = &R->edits[i];
        cge_node *n = cge_graph_find_node(g, cge_node_name(e->node));
        char name[600];
        if (e->key[0])
            snprintf(name, sizeof name, "%s", e->key);
        else
            snprintf(name, sizeof name, "%s.tp%d_%d_%d", cge_node_input(n, e->input), R->r,
                     (int)serial, (int)i);
        if (!e->key[0] || !cge_graph_constant(g, name))
            st = cge_graph_add_constant(g, name, e->t.dtype, &e->t.shape, e->t.data, e->t.bytes);
        if (!st)
            st = cge_node_set_input(n, e->input, name);
    }
    for (int32_t i = 0; !st && i < R->nexits; i++) {
        cge_node *n = cge_graph_find_node(g, cge_node_name(R->exits[i]));
        char partial[600], y[512], nm[600];
        snprintf(y, sizeof y, "%s", cge_node_output(n, 0));
        snprintf(partial, sizeof partial, "%s/tp_partial", y);
        snprintf(nm, sizeof nm, "%s/tp_allreduce", cge_node_name(n));
        st = cge_node_set_output(n, 0, partial);
        const char *ins[] = {partial}, *outs[] = {y};
        cge_node *ar = NULL;
        if (!st)
            st = cge_graph_add_node(g, "AllReduce", CGE_DOMAIN_DIST, nm, ins, 1, outs, 1, &ar);
        if (!st)
            st = cge_node_set_int(ar, "world_size", R->P);
    }
    return st;
}

/* Constants no node reads any more (the full weights) leave the graph. */
static cge_status drop_unused_constants(cge_graph *g)
{
    int32_t nv = cge_graph_num_values(g);
    bool *used = calloc((size_t)nv + 1, 1);
    if (!used)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "tensor_parallel: out of memory");
    for (int32_t i = 0; i < cge_graph_num_nodes(g); i++) {
        cge_node *n = cge_graph_node(g, i);
        for (int32_t k = 0; k < cge_node_num_inputs(n); k++) {
            int32_t id = cge_node_input_id(n, k);
            if (id >= 0)
                used[id] = true;
        }
    }
    cge_status st = CGE_OK;
    for (int32_t id = 0; !st && id < nv; id++)
        if (!used[id] && cge_graph_value_constant(g, id) && !cge_graph_value_is_output(g, id))
            st = cge_graph_remove_constant(g, cge_graph_value_name(g, id));
    free(used);
    return st ? st : cge_graph_compact(g);
}

/* Every graph output keeps its shape, and every node still infers. */
static bool same_outputs(const cge_graph *a, cge_graph *b)
{
    if (cge_graph_infer_values(b)) {
        cge_clear_error();
        return false;
    }
    for (int32_t i = 0; i < cge_graph_num_outputs(a); i++) {
        cge_tensor_desc x, y;
        if (cge_graph_get_desc(a, cge_graph_output(a, i), &x) ||
            cge_graph_get_desc(b, cge_graph_output(b, i), &y) || x.dtype != y.dtype ||
            !cge_shape_equal(&x.shape, &y.shape))
            return false;
    }
    return true;
}

/* The graph the rewrite reads: prepared and folded at the exact level, so
 * that shapes computed with Shape/Gather are constants. */
cge_status cge__dist_normalised(const cge_graph *g, cge_graph **out)
{
    cge_compile_options o = {.opt_level = CGE_OPT_EXACT, .allow_incomplete = true};
    cge_plan *p = NULL;
    cge_status st = cge_compile(g, NULL, 0, &o, &p);
    if (!st)
        st = cge_graph_clone(cge_plan_graph(p), out);
    cge_plan_destroy(p);
    if (!st && cge_graph_infer_values(*out)) {
        cge_graph_destroy(*out);
        *out = NULL;
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_STATE, "tensor_parallel: inference failed");
    }
    return st;
}

cge_status cge_dist_tensor_parallel(const cge_graph *g, int tp, int rank, cge_graph **out,
                                    int32_t *num_sharded)
{
    if (num_sharded)
        *num_sharded = 0;
    if (!g || !out)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "tensor_parallel: NULL graph or out");
    *out = NULL;
    if (tp < 1 || rank < 0 || rank >= tp)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "tensor_parallel: rank %d of tp %d", rank, tp);
    cge_status st = cge_dist_register_ops();
    if (st || tp == 1)
        return st ? st : cge_graph_clone(g, out);
    cge_graph *cur = NULL;
    if (cge__dist_normalised(g, &cur)) {
        cge_clear_error(); /* not compilable as is: the session reports why */
        return cge_graph_clone(g, out);
    }
    int32_t done = 0;
    region *R = calloc(1, sizeof *R);
    if (!R) {
        cge_graph_destroy(cur);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "tensor_parallel: out of memory");
    }
    const bool verbose = getenv("CGE_TP_VERBOSE") != NULL;
    /* Each MatMul with a constant [K, N] weight may start a region; nodes
     * are revisited in order, and a rewritten graph is taken only when it
     * still infers to the same outputs. */
    for (int32_t i = 0; !st && i < cge_graph_num_nodes(cur); i++) {
        cge_node *n = cge_graph_node(cur, i);
        const cge_tensor *w;
        if (cge_node_is_removed(n) ||
            (strcmp(cge_node_op_type(n), "MatMul") && strcmp(cge_node_op_type(n), "Gemm")) ||
            cge_node_domain(n)[0] || !(w = const_in(cur, n, 1)) || w->shape.rank != 2)
            continue;
        if (!strncmp(cge_node_input(n, 1), "tp", 2) && strchr(cge_node_input(n, 1), '/'))
            continue; /* already this rank's part */
        for (int64_t outer = 1; outer <= 4; outer++) {
            memset(R, 0, sizeof *R);
            R->g = cur;
            R->P = tp;
            R->r = rank;
            grow(R, n, outer);
            if (R->fail) {
                if (verbose)
                    fprintf(stderr, "cge tp: %s (outer %lld): %s\n", cge_node_name(n),
                            (long long)outer, R->why);
                region_free(R);
                continue;
            }
            cge_graph *next = NULL;
            st = cge_graph_clone(cur, &next);
            if (!st)
                st = apply(R, next, done);
            region_free(R);
            if (!st && same_outputs(cur, next)) {
                if (verbose)
                    fprintf(stderr, "cge tp: sharded the region from %s (outer %lld)\n",
                            cge_node_name(n), (long long)outer);
                cge_graph_destroy(cur);
                cur = next;
                done++;
                break;
            }
            cge_graph_destroy(next);
            if (st)
                break;
        }
    }
    free(R);
    if (!st && done)
        st = drop_unused_constants(cur);
    if (st || !done) {
        cge_graph_destroy(cur);
        if (st)
            return st;
        return cge_graph_clone(g, out);
    }
    if (num_sharded)
        *num_sharded = done;
    *out = cur;
    return CGE_OK;
}
