/* The plan: its layout (private to this file: the builder calls below are
 * the only way to write it, for the memory planner and the model loader),
 * accessors, and text and statistics output. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/plan_builder.h"
#include "runtime/warm_memory.h"

struct cge_plan {
    cge_graph *g;                 /* the optimised graph the steps point into */
    bool graph_borrowed;          /* g is a symbolic plan's (cge_plan_specialize) */
    int32_t num_steps;
    cge_plan_step *steps;
    int32_t *step_ios;            /* inputs/outputs/waits of every step, one array */
    size_t num_step_ios, used_step_ios;
    int32_t num_values, max_values;
    cge_plan_value *values;
    int32_t *value_of_id;         /* graph value id -> plan value, -1 if none */
    int32_t num_ids;
    int32_t num_inputs, num_outputs;
    int32_t *input_values, *output_values;
    size_t arena_bytes, constant_bytes;
    int32_t num_streams, num_events;
    cge_plan_stats stats;
    cge_plan_pass_stats *pass_stats;
    int32_t num_pass_stats, cap_pass_stats;
    int32_t *ws_last;             /* last step each step's workspace is live */
    void *host_data;              /* CGE_STORAGE_HOST values' bytes */
    size_t host_room;             /* bytes host_data holds (0: not known) */
    /* The shape program's: bytes each value's and step workspace's offset
     * was planned for, so that a new size that fits keeps the offsets. */
    size_t *reserved;
    uint64_t stamp;               /* the shape program's mark of its last write */
    /* A clone's tables (steps .. ws_last, and `reserved`) lie in blocks of
     * warm memory (runtime/warm_memory.h): freed there, not to the heap. */
    void *tables;
    bool reserved_warm;
    cge__warm *warm;
};

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "plan: out of memory");
}

/* ---- building ------------------------------------------------------------- */

cge_status cge__plan_create(cge_plan **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? CGE_OK : oom();
}

void cge__plan_set_graph(cge_plan *p, cge_graph *g)
{
    if (p->g != g && !p->graph_borrowed)
        cge_graph_destroy(p->g);
    p->g = g;
    p->graph_borrowed = false;
}

void cge__plan_borrow_graph(cge_plan *p, const cge_graph *g)
{
    cge__plan_set_graph(p, NULL);
    p->g = (cge_graph *)g;
    p->graph_borrowed = true;
}

cge_graph *cge__plan_graph(cge_plan *p) { return p->g; }

cge_status cge__plan_reserve(cge_plan *p, int32_t num_steps, int32_t max_values,
                             int32_t num_inputs, int32_t num_outputs, size_t num_step_ios)
{
    if (p->steps || p->values || !p->g || num_steps < 0 || max_values < 0 || num_inputs < 0 ||
        num_outputs < 0)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "plan: reserved twice or without a graph");
    p->num_ids = cge_graph_num_values(p->g);
    p->steps = calloc((size_t)num_steps + 1, sizeof *p->steps);
    p->step_ios = malloc(sizeof(int32_t) * (num_step_ios + 1));
    p->values = calloc((size_t)max_values + 1, sizeof *p->values);
    p->value_of_id = malloc(sizeof(int32_t) * ((size_t)p->num_ids + 1));
    p->input_values = malloc(sizeof(int32_t) * ((size_t)num_inputs + 1));
    p->output_values = malloc(sizeof(int32_t) * ((size_t)num_outputs + 1));
    p->ws_last = malloc(sizeof(int32_t) * ((size_t)num_steps + 1));
    if (!p->steps || !p->step_ios || !p->values || !p->value_of_id || !p->input_values ||
        !p->output_values || !p->ws_last)
        return oom();
    for (int32_t i = 0; i < p->num_ids; i++)
        p->value_of_id[i] = -1;
    for (int32_t i = 0; i < num_inputs; i++)
        p->input_values[i] = -1;
    for (int32_t i = 0; i < num_outputs; i++)
        p->output_values[i] = -1;
    for (int32_t t = 0; t < num_steps; t++) {
        p->ws_last[t] = t;
        p->steps[t].record = -1;
    }
    p->num_steps = num_steps;
    p->max_values = max_values;
    p->num_inputs = num_inputs;
    p->num_outputs = num_outputs;
    p->num_step_ios = num_step_ios;
    return CGE_OK;
}

cge_status cge__plan_add_value(cge_plan *p, int32_t id, const cge_plan_value *v, int32_t *index)
{
    if (id < 0 || id >= p->num_ids || p->value_of_id[id] >= 0 || p->num_values >= p->max_values)
        return CGE_ERR_EXISTS;
    int32_t k = p->num_values++;
    p->values[k] = *v;
    p->values[k].name = cge_graph_value_name(p->g, id);
    p->value_of_id[id] = k;
    if (index)
        *index = k;
    return CGE_OK;
}

int32_t cge__plan_value_of_id(const cge_plan *p, int32_t id)
{
    return id >= 0 && id < p->num_ids ? p->value_of_id[id] : -1;
}

cge_plan_value *cge__plan_values_mut(cge_plan *p) { return p->values; }
cge_plan_step *cge__plan_steps_mut(cge_plan *p) { return p->steps; }

void cge__plan_set_io(cge_plan *p, bool output, int32_t pos, int32_t value)
{
    if (output && pos >= 0 && pos < p->num_outputs)
        p->output_values[pos] = value;
    else if (!output && pos >= 0 && pos < p->num_inputs)
        p->input_values[pos] = value;
}

cge_status cge__plan_step_io(cge_plan *p, int32_t t, int32_t ni, int32_t no, int32_t nw,
                             int32_t **out)
{
    size_t need = (size_t)ni + (size_t)no + (size_t)nw;
    if (t < 0 || t >= p->num_steps || ni < 0 || no < 0 || nw < 0 ||
        need > p->num_step_ios - p->used_step_ios)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL,
                         "plan: step %d's inputs, outputs and waits exceed the room reserved",
                         (int)t);
    cge_plan_step *s = &p->steps[t];
    int32_t *io = p->step_ios + p->used_step_ios;
    for (size_t i = 0; i < need; i++)
        io[i] = -1;
    s->num_inputs = ni;
    s->num_outputs = no;
    s->num_waits = nw;
    s->inputs = io;
    s->outputs = io + ni;
    s->waits = io + ni + no;
    p->used_step_ios += need;
    *out = io;
    return CGE_OK;
}

void cge__plan_set_workspace_last(cge_plan *p, int32_t t, int32_t last)
{
    if (t >= 0 && t < p->num_steps)
        p->ws_last[t] = last;
}


void cge__plan_set_sizes(cge_plan *p, size_t arena_bytes, size_t constant_bytes,
                         int32_t num_streams, int32_t num_events)
{
    p->arena_bytes = arena_bytes;
    p->constant_bytes = constant_bytes;
    p->num_streams = num_streams;
    p->num_events = num_events;
}

cge_plan_stats *cge__plan_stats_mut(cge_plan *p) { return &p->stats; }

cge_status cge__plan_add_pass_stats(cge_plan *p, const cge_plan_pass_stats *s)
{
    if (p->num_pass_stats == p->cap_pass_stats) {
        int32_t nc = p->cap_pass_stats ? p->cap_pass_stats * 2 : 32;
        void *q = realloc(p->pass_stats, sizeof *p->pass_stats * (size_t)nc);
        if (!q)
            return oom();
        p->pass_stats = q;
        p->cap_pass_stats = nc;
    }
    p->pass_stats[p->num_pass_stats++] = *s;
    p->stats.passes = p->pass_stats;
    p->stats.num_passes = p->num_pass_stats;
    return CGE_OK;
}

/* One block for all of a clone's tables, in 64-byte-aligned parts: a new
 * signature's plan is made at its first run, and its pages should be in. */
static size_t part(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

cge_status cge__plan_clone_layout_in(const cge_plan *src, cge__warm *warm, cge_plan **out)
{
    cge_plan *p = NULL;
    cge_status st = cge__plan_create(&p);
    if (st)
        return st;
    cge__plan_borrow_graph(p, src->g);
    p->num_ids = src->num_ids;
    size_t b_steps = part(sizeof *p->steps * ((size_t)src->num_steps + 1));
    size_t b_ios = part(sizeof(int32_t) * (src->num_step_ios + 1));
    size_t b_values = part(sizeof *p->values * ((size_t)src->max_values + 1));
    size_t b_ids = part(sizeof(int32_t) * ((size_t)src->num_ids + 1));
    size_t b_in = part(sizeof(int32_t) * ((size_t)src->num_inputs + 1));
    size_t b_out = part(sizeof(int32_t) * ((size_t)src->num_outputs + 1));
    size_t b_ws = part(sizeof(int32_t) * ((size_t)src->num_steps + 1));
    char *t = cge__warm_calloc(warm, 1, b_steps + b_ios + b_values + b_ids + b_in + b_out + b_ws);
    if (!t) {
        cge_plan_destroy(p);
        return oom();
    }
    p->tables = t;
    p->warm = warm;
    p->steps = (cge_plan_step *)t;
    p->step_ios = (int32_t *)(t += b_steps);
    p->values = (cge_plan_value *)(t += b_ios);
    p->value_of_id = (int32_t *)(t += b_values);
    p->input_values = (int32_t *)(t += b_ids);
    p->output_values = (int32_t *)(t += b_in);
    p->ws_last = (int32_t *)(t += b_out);
    memcpy(p->steps, src->steps, sizeof *p->steps * (size_t)src->num_steps);
    memcpy(p->step_ios, src->step_ios, sizeof(int32_t) * src->num_step_ios);
    memcpy(p->values, src->values, sizeof *p->values * (size_t)src->num_values);
    memcpy(p->value_of_id, src->value_of_id, sizeof(int32_t) * (size_t)src->num_ids);
    memcpy(p->input_values, src->input_values, sizeof(int32_t) * (size_t)src->num_inputs);
    memcpy(p->output_values, src->output_values, sizeof(int32_t) * (size_t)src->num_outputs);
    memcpy(p->ws_last, src->ws_last, sizeof(int32_t) * (size_t)src->num_steps);
    /* The steps' slices point into this plan's own io storage. */
    for (int32_t t = 0; t < src->num_steps; t++) {
        cge_plan_step *s = &p->steps[t];
        const cge_plan_step *o = &src->steps[t];
        s->inputs = o->inputs ? p->step_ios + (o->inputs - src->step_ios) : NULL;
        s->outputs = o->outputs ? p->step_ios + (o->outputs - src->step_ios) : NULL;
        s->waits = o->waits ? p->step_ios + (o->waits - src->step_ios) : NULL;
    }
    p->num_steps = src->num_steps;
    p->num_step_ios = p->used_step_ios = src->num_step_ios;
    p->num_values = src->num_values;
    p->max_values = src->max_values;
    p->num_inputs = src->num_inputs;
    p->num_outputs = src->num_outputs;
    p->arena_bytes = src->arena_bytes;
    p->constant_bytes = src->constant_bytes;
    p->num_streams = src->num_streams;
    p->num_events = src->num_events;
    p->stats = src->stats;
    p->stats.passes = NULL;
    p->stats.num_passes = 0;
    p->stats.symbolic = false;
    p->stats.incomplete = false;
    *out = p;
    return CGE_OK;
}

cge_status cge__plan_clone_layout(const cge_plan *src, cge_plan **out)
{
    return cge__plan_clone_layout_in(src, NULL, out);
}

/* ---- reading -------------------------------------------------------------- */

void cge_plan_destroy(cge_plan *p)
{
    if (!p)
        return;
    if (!p->graph_borrowed)
        cge_graph_destroy(p->g);
    if (p->tables) {
        cge__warm_free(p->tables);
    } else {
        free(p->steps);
        free(p->step_ios);
        free(p->values);
        free(p->value_of_id);
        free(p->input_values);
        free(p->output_values);
        free(p->ws_last);
    }
    free(p->pass_stats);
    free(p->host_data);
    if (p->reserved_warm)
        cge__warm_free(p->reserved);
    else
        free(p->reserved);
    free(p);
}

const cge_graph *cge_plan_graph(const cge_plan *p) { return p ? p->g : NULL; }
int32_t cge_plan_workspace_last_step(const cge_plan *p, int32_t t)
{
    if (!p)
        return -1;
    return p->ws_last && t >= 0 && t < p->num_steps ? p->ws_last[t] : t;
}
bool cge_plan_is_complete(const cge_plan *p) { return p && !p->stats.incomplete; }
bool cge_plan_is_symbolic(const cge_plan *p) { return p && p->stats.symbolic; }
int32_t cge_plan_num_steps(const cge_plan *p) { return p ? p->num_steps : 0; }
const cge_plan_step *cge_plan_steps(const cge_plan *p) { return p ? p->steps : NULL; }
int32_t cge_plan_num_values(const cge_plan *p) { return p ? p->num_values : 0; }
const cge_plan_value *cge_plan_values(const cge_plan *p) { return p ? p->values : NULL; }
size_t cge_plan_arena_bytes(const cge_plan *p) { return p ? p->arena_bytes : 0; }
const void *cge_plan_host_data(const cge_plan *p) { return p ? p->host_data : NULL; }

void cge__plan_set_host_data(cge_plan *p, void *blob)
{
    free(p->host_data);
    p->host_data = blob;
    p->host_room = 0;
}

void *cge__plan_host_room(cge_plan *p, size_t bytes)
{
    if (p->host_data && bytes <= p->host_room)
        return p->host_data;
    size_t room = (bytes + bytes / 2 + 63) & ~(size_t)63;
    void *blob = aligned_alloc(64, room ? room : 64);
    if (!blob)
        return NULL;
    free(p->host_data);
    p->host_data = blob;
    p->host_room = room;
    return blob;
}

uint64_t cge__plan_stamp(const cge_plan *p) { return p ? p->stamp : 0; }
void cge__plan_set_stamp(cge_plan *p, uint64_t stamp) { p->stamp = stamp; }

size_t *cge__plan_reserved(cge_plan *p)
{
    if (!p->reserved) {
        size_t n = (size_t)p->num_values + (size_t)p->num_steps + 1;
        p->reserved_warm = p->tables != NULL;
        p->reserved = p->reserved_warm ? cge__warm_calloc(p->warm, n, sizeof(size_t))
                                       : calloc(n, sizeof(size_t));
    }
    return p->reserved;
}
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

int32_t cge_plan_root_value(const cge_plan *p, int32_t v)
{
    if (!p || v < 0 || v >= p->num_values)
        return -1;
    /* Alias chains point at earlier-planned owners; bounded against a cycle
     * in a corrupt plan. */
    for (int32_t hops = 0; p->values[v].alias_of >= 0 && hops < p->num_values; hops++)
        v = p->values[v].alias_of;
    return v;
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
    return s == CGE_STORAGE_ARENA      ? "arena"
           : s == CGE_STORAGE_CONSTANT ? "const"
           : s == CGE_STORAGE_HOST     ? "host"
                                       : "none";
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
        if (s->folded)
            fprintf(f, " (folded)");
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

