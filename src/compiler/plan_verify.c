/* cge_plan_verify: the memory verifier over a whole plan (blocks, views,
 * in-place writes, lifetimes covering every use) and, with several streams,
 * the ordering of every read and every reuse of memory by streams and events. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"
#include "compiler/plan_builder.h"

/* The plan as the verifier reads it, through the plan's accessors. */
typedef struct plan_view {
    const cge_graph *g;
    int32_t num_steps, num_values, num_streams, num_events;
    const cge_plan_step *steps;
    const cge_plan_value *values;
    size_t arena_bytes, constant_bytes;
    const cge_plan *plan;
} plan_view;

static int32_t ws_last_of(const plan_view *p, int32_t t)
{
    return cge_plan_workspace_last_step(p->plan, t);
}

/* ---- verification --------------------------------------------------------- */

static cge_status bad(const plan_view *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cge_status bad(const plan_view *p, const char *fmt, ...)
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

static int32_t root_of(const plan_view *p, int32_t v)
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

static cge_status stream_order_build(const plan_view *p, stream_order *o)
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
static bool runs_before(const plan_view *p, const stream_order *o, int32_t a, int32_t b)
{
    int32_t sa = p->steps[a].stream;
    if (sa == p->steps[b].stream)
        return a < b;
    return o->vc[(size_t)b * (size_t)o->S + (size_t)sa] >= o->pos[a];
}

/* Memory used by `users` (steps) until issue step `last` may be reused by any
 * later step: so the first step after `last` on every stream must run after
 * all of them (steps later on a stream run later still). */
static cge_status check_release(const plan_view *p, const stream_order *o, const int32_t *users,
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

/* Every read runs after its value's producer; memory is reused only after
 * every step using it is done. */
static cge_status verify_streams(const plan_view *p, const int32_t *prod)
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
        if (p->steps[t].workspace_bytes) {
            char what[160];
            snprintf(what, sizeof what, "the workspace of step %d", (int)t);
            st = check_release(p, &o, &t, 1, ws_last_of(p, t), what);
        }
    free(start), free(users), free(fill);
    stream_order_free(&o);
    return st;
}

static cge_status verify(const plan_view *p)
{
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
                                           ws_last_of(p, t),
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

cge_status cge_plan_verify(const cge_plan *plan)
{
    if (!plan)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "plan_verify: plan is NULL");
    plan_view v = {.g = cge_plan_graph(plan), .num_steps = cge_plan_num_steps(plan),
                   .num_values = cge_plan_num_values(plan),
                   .num_streams = cge_plan_num_streams(plan),
                   .num_events = cge_plan_num_events(plan), .steps = cge_plan_steps(plan),
                   .values = cge_plan_values(plan), .arena_bytes = cge_plan_arena_bytes(plan),
                   .constant_bytes = cge_plan_constant_bytes(plan), .plan = plan};
    return verify(&v);
}
