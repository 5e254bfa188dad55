/* The plan: accessors, text and statistics output, the memory verifier over
 * a whole plan (blocks, views, in-place writes, lifetimes covering every use)
 * and the plan cache keyed by input shapes. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

void cge_plan_destroy(cge_plan *p)
{
    if (!p)
        return;
    cge_graph_destroy(p->g);
    free(p->steps);
    free(p->step_ios);
    free(p->values);
    free(p->value_of_id);
    free(p->input_values);
    free(p->output_values);
    free(p->pass_stats);
    free(p->ws_last);
    free(p);
}

const cge_graph *cge_plan_graph(const cge_plan *p) { return p ? p->g : NULL; }
int32_t cge_plan_num_steps(const cge_plan *p) { return p ? p->num_steps : 0; }
const cge_plan_step *cge_plan_steps(const cge_plan *p) { return p ? p->steps : NULL; }
int32_t cge_plan_num_values(const cge_plan *p) { return p ? p->num_values : 0; }
const cge_plan_value *cge_plan_values(const cge_plan *p) { return p ? p->values : NULL; }
size_t cge_plan_arena_bytes(const cge_plan *p) { return p ? p->arena_bytes : 0; }
size_t cge_plan_constant_bytes(const cge_plan *p) { return p ? p->constant_bytes : 0; }
int32_t cge_plan_num_streams(const cge_plan *p) { return p ? p->num_streams : 0; }
int32_t cge_plan_num_events(const cge_plan *p) { return p ? p->num_events : 0; }
const cge_plan_stats *cge_plan_get_stats(const cge_plan *p) { return p ? &p->stats : NULL; }

int32_t cge_plan_input_value(const cge_plan *p, int32_t i)
{
    return p && i >= 0 && i < p->num_inputs ? p->input_values[i] : -1;
}

int32_t cge_plan_output_value(const cge_plan *p, int32_t i)
{
    return p && i >= 0 && i < p->num_outputs ? p->output_values[i] : -1;
}

int32_t cge_plan_find_value(const cge_plan *p, const char *name)
{
    if (!p || !name)
        return -1;
    int32_t id = cge_graph_value_id(p->g, name);
    return id >= 0 && id < p->num_ids ? p->value_of_id[id] : -1;
}

void cge_plan_write_constants(const cge_plan *p, void *blob)
{
    if (!p || !blob)
        return;
    memset(blob, 0, p->constant_bytes);
    for (int32_t v = 0; v < p->num_values; v++) {
        const cge_plan_value *pv = &p->values[v];
        if (pv->storage != CGE_STORAGE_CONSTANT || pv->alias_of >= 0)
            continue;
        const cge_tensor *t = cge_graph_constant(p->g, pv->name);
        if (t && t->bytes)
            memcpy((char *)blob + pv->offset, t->data, t->bytes);
    }
}

static const char *storage_name(cge_plan_storage s)
{
    return s == CGE_STORAGE_ARENA ? "arena" : s == CGE_STORAGE_CONSTANT ? "const" : "none";
}

cge_status cge_plan_write_text(const cge_plan *p, FILE *f)
{
    if (!p || !f)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "plan_write_text: NULL argument");
    fprintf(f, "plan of '%s': %d steps, arena %zu bytes, constants %zu bytes, %d stream(s), %d "
               "event(s)\n",
            cge_graph_name(p->g), (int)p->num_steps, p->arena_bytes, p->constant_bytes,
            (int)p->num_streams, (int)p->num_events);
    char sh[CGE_SHAPE_STR_MAX];
    for (int32_t t = 0; t < p->num_steps; t++) {
        const cge_plan_step *s = &p->steps[t];
        fprintf(f, "%4d s%d %-5s %s%s%s '%s' (", (int)t, (int)s->stream, s->engine,
                cge_node_domain(s->node), cge_node_domain(s->node)[0] ? "." : "",
                cge_node_op_type(s->node), cge_node_name(s->node));
        for (int32_t k = 0; k < s->num_inputs; k++) {
            if (s->inputs[k] < 0) {
                fprintf(f, "%s-", k ? ", " : "");
                continue;
            }
            const cge_plan_value *v = &p->values[s->inputs[k]];
            fprintf(f, "%s%s@%s+%zu", k ? ", " : "", v->name, storage_name(v->storage), v->offset);
        }
        fprintf(f, ") -> ");
        for (int32_t k = 0; k < s->num_outputs; k++) {
            const cge_plan_value *v = &p->values[s->outputs[k]];
            fprintf(f, "%s%s %s %s@%s+%zu%s", k ? ", " : "", v->name, cge_dtype_name(v->dtype),
                    cge_shape_str(&v->shape, sh, sizeof sh), storage_name(v->storage), v->offset,
                    v->alias_of >= 0 ? " (shared)" : "");
        }
        if (s->workspace_bytes)
            fprintf(f, " ws %zu@%zu", s->workspace_bytes, s->workspace_offset);
        for (int32_t w = 0; w < s->num_waits; w++)
            fprintf(f, " wait e%d", (int)s->waits[w]);
        if (s->record >= 0)
            fprintf(f, " record e%d", (int)s->record);
        fputc('\n', f);
    }
    return CGE_OK;
}

cge_status cge_plan_write_stats(const cge_plan *p, FILE *f)
{
    if (!p || !f)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "plan_write_stats: NULL argument");
    const cge_plan_stats *s = &p->stats;
    fprintf(f, "compile: %.3f ms (prepare %.3f, optimize %.3f, partition %.3f, build %.3f)\n",
            s->compile_ms, s->stage_ms[0], s->stage_ms[1], s->stage_ms[2], s->stage_ms[3]);
    fprintf(f, "nodes: %d in, %d steps out; %d subgraph(s), %d conversion(s)\n", (int)s->nodes_in,
            (int)s->nodes_out, (int)s->num_subgraphs, (int)s->num_conversions);
    double lb = s->lower_bound_bytes ? (double)s->lower_bound_bytes : 1.0;
    fprintf(f, "memory: arena %zu bytes = %.3f x lower bound %zu, %.3f x naive %zu; constants %zu\n",
            s->arena_bytes, (double)s->arena_bytes / lb, s->lower_bound_bytes,
            s->naive_bytes ? (double)s->arena_bytes / (double)s->naive_bytes : 0.0, s->naive_bytes,
            s->constant_bytes);
    fprintf(f, "streams: %d, events: %d\n", (int)s->num_streams, (int)s->num_events);
    if (s->num_passes)
        fprintf(f, "%-10s %-22s %10s %7s %7s %7s %7s %7s\n", "stage", "pass", "ms", "before",
                "after", "removed", "fused", "added");
    for (int32_t i = 0; i < s->num_passes; i++) {
        const cge_plan_pass_stats *q = &s->passes[i];
        fprintf(f, "%-10s %-22s %10.3f %7d %7d %7d %7d %7d\n", q->stage, q->name, q->ms,
                (int)q->nodes_before, (int)q->nodes_after, (int)q->removed, (int)q->fused,
                (int)q->added);
    }
    return CGE_OK;
}

/* ---- verification --------------------------------------------------------- */

static cge_status bad(const cge_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cge_status bad(const cge_plan *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "plan of '%s': %s", cge_graph_name(p->g), msg);
}

typedef struct member {
    int32_t root, prod, value;
} member;

static int member_cmp(const void *x, const void *y)
{
    const member *a = x, *b = y;
    if (a->root != b->root)
        return a->root < b->root ? -1 : 1;
    if (a->prod != b->prod)
        return a->prod < b->prod ? -1 : 1;
    return (a->value > b->value) - (a->value < b->value);
}

static int32_t root_of(const cge_plan *p, int32_t v)
{
    int guard = 0;
    while (p->values[v].alias_of >= 0 && guard++ < 1 << 20)
        v = p->values[v].alias_of;
    return v;
}

/* ---- stream order -------------------------------------------------------------
 * With several streams, issue order is not run order: step b runs after step a
 * only through stream order and events. vc[t][s] is the last position on
 * stream s known done before step t starts (events are recorded after their
 * step, waits come before it, as sessions launch them). */
typedef struct stream_order {
    int32_t S, n;
    int32_t *pos;           /* position of each step in its stream */
    int32_t *vc;            /* [n][S] */
    int32_t **steps_of;     /* per stream, its steps in issue order */
    int32_t *len;
} stream_order;

static void stream_order_free(stream_order *o)
{
    free(o->pos);
    free(o->vc);
    for (int32_t s = 0; o->steps_of && s < o->S; s++)
        free(o->steps_of[s]);
    free(o->steps_of);
    free(o->len);
}

static cge_status stream_order_build(const cge_plan *p, stream_order *o)
{
    int32_t S = p->num_streams, n = p->num_steps, E = p->num_events;
    *o = (stream_order){.S = S, .n = n};
    o->pos = malloc(sizeof(int32_t) * ((size_t)n + 1));
    o->vc = malloc(sizeof(int32_t) * ((size_t)n * (size_t)S + 1));
    o->steps_of = calloc((size_t)S, sizeof *o->steps_of);
    o->len = calloc((size_t)S, sizeof *o->len);
    int32_t *cur = malloc(sizeof(int32_t) * (size_t)S * (size_t)S);
    int32_t *ev = malloc(sizeof(int32_t) * ((size_t)E * (size_t)S + 1));
    bool *recorded = calloc((size_t)E + 1, sizeof *recorded);
    cge_status st = CGE_OK;
    for (int32_t s = 0; o->steps_of && s < S; s++)
        if (!(o->steps_of[s] = malloc(sizeof(int32_t) * ((size_t)n + 1))))
            st = CGE_ERR_NO_MEMORY;
    if (st || !o->pos || !o->vc || !o->steps_of || !o->len || !cur || !ev || !recorded) {
        free(cur), free(ev), free(recorded);
        stream_order_free(o);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "plan_verify: out of memory");
    }
    for (int32_t i = 0; i < S * S; i++)
        cur[i] = -1;
    for (int32_t t = 0; !st && t < n; t++) {
        const cge_plan_step *step = &p->steps[t];
        int32_t s = step->stream;
        if (s < 0 || s >= S) {
            st = bad(p, "step %d is on stream %d of %d", (int)t, (int)s, (int)S);
            break;
        }
        int32_t *c = cur + (size_t)s * (size_t)S;
        for (int32_t w = 0; !st && w < step->num_waits; w++) {
            int32_t e = step->waits[w];
            if (e < 0 || e >= E || !recorded[e]) {
                st = bad(p, "step %d waits for event %d, which no earlier step records", (int)t,
                         (int)e);
                break;
            }
            for (int32_t k = 0; k < S; k++)
                if (ev[(size_t)e * (size_t)S + (size_t)k] > c[k])
                    c[k] = ev[(size_t)e * (size_t)S + (size_t)k];
        }
        memcpy(o->vc + (size_t)t * (size_t)S, c, sizeof(int32_t) * (size_t)S);
        o->pos[t] = o->len[s];
        o->steps_of[s][o->len[s]++] = t;
        c[s] = o->pos[t];
        if (!st && step->record >= 0) {
            if (step->record >= E) {
                st = bad(p, "step %d records event %d of %d", (int)t, (int)step->record, (int)E);
                break;
            }
            memcpy(ev + (size_t)step->record * (size_t)S, c, sizeof(int32_t) * (size_t)S);
            recorded[step->record] = true;
        }
    }
    free(cur), free(ev), free(recorded);
    if (st)
        stream_order_free(o);
    return st;
}

/* Whether step a is done before step b starts. */
static bool runs_before(const cge_plan *p, const stream_order *o, int32_t a, int32_t b)
{
    int32_t sa = p->steps[a].stream;
    if (sa == p->steps[b].stream)
        return a < b;
    return o->vc[(size_t)b * (size_t)o->S + (size_t)sa] >= o->pos[a];
}

/* Memory used by `users` (steps) until issue step `last` may be reused by any
 * later step: so the first step after `last` on every stream must run after
 * all of them (steps later on a stream run later still). */
static cge_status check_release(const cge_plan *p, const stream_order *o, const int32_t *users,
                                int32_t k, int32_t last, const char *what)
{
    for (int32_t s = 0; s < o->S; s++) {
        int32_t lo = 0, hi = o->len[s];
        while (lo < hi) {
            int32_t mid = (lo + hi) / 2;
            if (o->steps_of[s][mid] > last)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (lo == o->len[s])
            continue;
        int32_t next = o->steps_of[s][lo];
        for (int32_t i = 0; i < k; i++)
            if (users[i] != next && !runs_before(p, o, users[i], next))
                return bad(p, "the memory of %s (used by step %d) is free after step %d, but step "
                              "%d on stream %d may run before that use ends",
                           what, (int)users[i], (int)last, (int)next, (int)s);
    }
    return CGE_OK;
}

static int32_t root_of(const cge_plan *p, int32_t v);

/* Every read runs after its value's producer; memory is reused only after
 * every step using it is done. */
static cge_status verify_streams(const cge_plan *p, const int32_t *prod)
{
    stream_order o;
    cge_status st = stream_order_build(p, &o);
    if (st)
        return st;
    int32_t n = p->num_steps, nv = p->num_values;
    for (int32_t t = 0; !st && t < n; t++)
        for (int32_t k = 0; !st && k < p->steps[t].num_inputs; k++) {
            int32_t v = p->steps[t].inputs[k];
            if (v >= 0 && prod[v] >= 0 && prod[v] != t && !runs_before(p, &o, prod[v], t))
                st = bad(p, "step %d reads '%s' on stream %d, but its producer (step %d, stream "
                            "%d) is not ordered before it",
                         (int)t, p->values[v].name, (int)p->steps[t].stream, (int)prod[v],
                         (int)p->steps[prod[v]].stream);
        }
    /* Steps using each root's memory, as CSR over roots. */
    int32_t *start = calloc((size_t)nv + 2, sizeof(int32_t));
    int32_t total = 0;
    for (int32_t t = 0; t < n; t++)
        total += p->steps[t].num_inputs + p->steps[t].num_outputs;
    int32_t *users = malloc(sizeof(int32_t) * ((size_t)total + 1));
    int32_t *fill = calloc((size_t)nv + 1, sizeof(int32_t));
    if (!st && (!start || !users || !fill))
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "plan_verify: out of memory");
    for (int pass = 0; !st && pass < 2; pass++) {
        for (int32_t t = 0; t < n; t++) {
            const cge_plan_step *s = &p->steps[t];
            for (int32_t k = 0; k < s->num_inputs + s->num_outputs; k++) {
                int32_t v = k < s->num_inputs ? s->inputs[k] : s->outputs[k - s->num_inputs];
                if (v < 0 || p->values[v].storage != CGE_STORAGE_ARENA)
                    continue;
                int32_t r = root_of(p, v);
                if (pass == 0)
                    start[r + 1]++;
                else
                    users[start[r] + fill[r]++] = t;
            }
        }
        if (pass == 0)
            for (int32_t r = 0; r < nv; r++)
                start[r + 1] += start[r];
    }
    for (int32_t r = 0; !st && r < nv; r++) {
        const cge_plan_value *v = &p->values[r];
        if (v->storage != CGE_STORAGE_ARENA || v->alias_of >= 0 || v->last_step >= n)
            continue;
        char what[160];
        snprintf(what, sizeof what, "'%s'", v->name);
        st = check_release(p, &o, users + start[r], start[r + 1] - start[r], v->last_step, what);
    }
    for (int32_t t = 0; !st && t < n; t++)
        if (p->steps[t].workspace_bytes && p->ws_last) {
            char what[160];
            snprintf(what, sizeof what, "the workspace of step %d", (int)t);
            st = check_release(p, &o, &t, 1, p->ws_last[t], what);
        }
    free(start), free(users), free(fill);
    stream_order_free(&o);
    return st;
}

cge_status cge_plan_verify(const cge_plan *p)
{
    if (!p)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "plan_verify: plan is NULL");
    int32_t nv = p->num_values, n = p->num_steps;
    cge_mem_block *blocks = malloc(sizeof(cge_mem_block) * ((size_t)nv + (size_t)n + 1));
    int32_t *prod = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    int32_t *lastread = malloc(sizeof(int32_t) * ((size_t)nv + 1));
    if (!blocks || !prod || !lastread) {
        free(blocks);
        free(prod);
        free(lastread);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "plan_verify: out of memory");
    }
    cge_status st = CGE_OK;
    for (int32_t v = 0; v < nv; v++) {
        prod[v] = -1;
        lastread[v] = -1;
    }
    for (int32_t t = 0; t < n; t++) {
        const cge_plan_step *s = &p->steps[t];
        for (int32_t k = 0; k < s->num_outputs; k++)
            prod[s->outputs[k]] = t;
        for (int32_t k = 0; k < s->num_inputs; k++)
            if (s->inputs[k] >= 0)
                lastread[s->inputs[k]] = t;
    }
    int32_t nb = 0;
    for (int32_t v = 0; !st && v < nv; v++) {
        const cge_plan_value *pv = &p->values[v];
        int32_t r = root_of(p, v);
        const cge_plan_value *rv = &p->values[r];
        /* Every use lies within the lifetime of the memory. */
        if (pv->storage == CGE_STORAGE_ARENA &&
            (rv->first_step > (prod[v] >= 0 ? prod[v] : -1) || rv->last_step < lastread[v] ||
             (pv->output_index >= 0 && rv->last_step < n)))
            st = bad(p, "value '%s' (memory of '%s') is used at steps %d..%d outside its lifetime",
                     pv->name, rv->name, (int)prod[v], (int)lastread[v]);
        if (!st && pv->alias_of >= 0 &&
            (pv->storage != rv->storage || pv->offset < rv->offset ||
             pv->offset + pv->bytes > rv->offset + rv->bytes))
            st = bad(p, "value '%s' lies outside the memory of '%s' it shares", pv->name, rv->name);
        if (!st && pv->storage == CGE_STORAGE_CONSTANT && pv->offset + pv->bytes > p->constant_bytes)
            st = bad(p, "constant '%s' lies outside the constant blob", pv->name);
        if (!st && pv->storage == CGE_STORAGE_ARENA && pv->alias_of < 0 && pv->bytes)
            blocks[nb++] = (cge_mem_block){pv->bytes, pv->first_step, pv->last_step, pv->offset};
    }
    /* An in-place write (a shared output whose step is no view) must come
     * after every read of the memory it overwrites: members of each group in
     * production order, with the latest read of the earlier ones carried. */
    member *ms = st ? NULL : malloc(sizeof(member) * ((size_t)nv + 1));
    if (!st && !ms)
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "plan_verify: out of memory");
    int32_t nm = 0;
    for (int32_t v = 0; !st && v < nv; v++)
        if (p->values[v].storage == CGE_STORAGE_ARENA)
            ms[nm++] = (member){root_of(p, v), prod[v], v};
    if (!st)
        qsort(ms, (size_t)nm, sizeof(member), member_cmp);
    for (int32_t i = 0; !st && i < nm;) {
        int32_t j = i, latest = -1, reader = -1;
        bool out = false;
        while (!st && j < nm && ms[j].root == ms[i].root) {
            /* Members made at one step are written together: compare with the
             * earlier steps only. */
            int32_t k = j;
            while (k < nm && ms[k].root == ms[i].root && ms[k].prod == ms[j].prod)
                k++;
            for (int32_t q = j; !st && q < k; q++) {
                int32_t v = ms[q].value, t = ms[q].prod;
                if (p->values[v].alias_of < 0 || t < 0 || cc_is_view_op(p->steps[t].node))
                    continue;
                if (latest > t || out)
                    st = bad(p, "step %d writes '%s' in place over '%s', which is still read at "
                                "step %d or leaves the graph",
                             (int)t, p->values[v].name, p->values[reader].name, (int)latest);
            }
            for (int32_t q = j; q < k; q++) {
                int32_t v = ms[q].value;
                if (lastread[v] > latest) {
                    latest = lastread[v];
                    reader = v;
                }
                out |= p->values[v].output_index >= 0;
                if (reader < 0)
                    reader = v;
            }
            j = k;
        }
        i = j;
    }
    free(ms);
    for (int32_t t = 0; !st && t < n; t++)
        if (p->steps[t].workspace_bytes)
            blocks[nb++] = (cge_mem_block){p->steps[t].workspace_bytes, t,
                                           p->ws_last ? p->ws_last[t] : t,
                                           p->steps[t].workspace_offset};
    if (!st)
        st = cge_memplan_verify(blocks, nb, p->arena_bytes);
    if (!st && p->num_streams > 1)
        st = verify_streams(p, prod);
    free(blocks);
    free(prod);
    free(lastread);
    return st;
}

/* ---- plan cache ------------------------------------------------------------ */

typedef struct cache_entry {
    cge_shape *shapes;
    int32_t n;
    cge_plan *plan;
    uint64_t used;
} cache_entry;

struct cge_plan_cache {
    cache_entry *items;
    int32_t count, capacity;
    uint64_t clock;
};

cge_status cge_plan_cache_create(int32_t capacity, cge_plan_cache **out)
{
    if (!out || capacity <= 0)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "plan_cache_create: out is NULL or capacity %d is not positive",
                         (int)capacity);
    cge_plan_cache *c = calloc(1, sizeof *c);
    if (c)
        c->items = calloc((size_t)capacity, sizeof(cache_entry));
    if (!c || !c->items) {
        free(c);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "plan_cache_create: out of memory");
    }
    c->capacity = capacity;
    *out = c;
    return CGE_OK;
}

void cge_plan_cache_destroy(cge_plan_cache *c)
{
    if (!c)
        return;
    for (int32_t i = 0; i < c->count; i++) {
        cge_plan_destroy(c->items[i].plan);
        free(c->items[i].shapes);
    }
    free(c->items);
    free(c);
}

int32_t cge_plan_cache_size(const cge_plan_cache *c) { return c ? c->count : 0; }

cge_status cge_plan_cache_get(cge_plan_cache *c, const cge_graph *g, const cge_shape *input_shapes,
                              int32_t num_inputs, const cge_compile_options *opts,
                              const cge_plan **out, bool *hit)
{
    if (!c || !g || !out || (num_inputs && !input_shapes))
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "plan_cache_get: NULL argument");
    if (hit)
        *hit = false;
    for (int32_t i = 0; i < c->count; i++) {
        cache_entry *e = &c->items[i];
        bool same = e->n == num_inputs;
        for (int32_t k = 0; same && k < num_inputs; k++)
            same = cge_shape_equal(&e->shapes[k], &input_shapes[k]);
        if (same) {
            e->used = ++c->clock;
            *out = e->plan;
            if (hit)
                *hit = true;
            return CGE_OK;
        }
    }
    cge_plan *p = NULL;
    cge_status st = cge_compile(g, input_shapes, num_inputs, opts, &p);
    if (st)
        return st;
    cge_shape *shapes = malloc(sizeof(cge_shape) * ((size_t)num_inputs + 1));
    if (!shapes) {
        cge_plan_destroy(p);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "plan_cache_get: out of memory");
    }
    if (num_inputs)
        memcpy(shapes, input_shapes, sizeof(cge_shape) * (size_t)num_inputs);
    int32_t slot = c->count;
    if (c->count == c->capacity) {
        slot = 0;
        for (int32_t i = 1; i < c->count; i++)
            if (c->items[i].used < c->items[slot].used)
                slot = i;
        cge_plan_destroy(c->items[slot].plan);
        free(c->items[slot].shapes);
    } else {
        c->count++;
    }
    c->items[slot] = (cache_entry){shapes, num_inputs, p, ++c->clock};
    *out = p;
    return CGE_OK;
}
