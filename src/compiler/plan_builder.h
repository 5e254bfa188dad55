/* The one builder of plans: the memory planner (build/plan_memory) and the
 * model loader lay a plan out through these calls alone, and nothing else
 * writes a plan's fields (their layout is private to compiler/plan.c). */
#ifndef CGE_COMPILER_PLAN_BUILDER_H
#define CGE_COMPILER_PLAN_BUILDER_H

#include "cge/compiler.h"

/* An empty plan: no graph, no steps. */
cge_status cge__plan_create(cge_plan **out);
/* The graph the steps point into; the plan owns it from now on. */
void cge__plan_set_graph(cge_plan *p, cge_graph *g);
cge_graph *cge__plan_graph(cge_plan *p);
/* The graph of another plan (a symbolic plan's, for its specialisations),
 * which must outlive this one; not destroyed with it. */
void cge__plan_borrow_graph(cge_plan *p, const cge_graph *g);

/* Room for the layout, each array sized once: `num_steps` steps whose
 * inputs, outputs and waits add up to `num_step_ios`, up to `max_values`
 * values over the graph's value ids, and the graph's inputs and outputs. */
cge_status cge__plan_reserve(cge_plan *p, int32_t num_steps, int32_t max_values,
                             int32_t num_inputs, int32_t num_outputs, size_t num_step_ios);

/* Appends the value of graph value `id`; *index is its plan index. A value
 * id can have one plan value only (CGE_ERR_EXISTS otherwise, no error text:
 * the caller names the problem in its own layer). */
cge_status cge__plan_add_value(cge_plan *p, int32_t id, const cge_plan_value *v, int32_t *index);
/* Plan value of graph value `id`, or -1. */
int32_t cge__plan_value_of_id(const cge_plan *p, int32_t id);
/* The values and steps, writable while the plan is being built. */
cge_plan_value *cge__plan_values_mut(cge_plan *p);
cge_plan_step *cge__plan_steps_mut(cge_plan *p);
/* Graph input/output `pos` is plan value `value`. */
void cge__plan_set_io(cge_plan *p, bool output, int32_t pos, int32_t value);

/* Step t's slices of the io storage: `ni` inputs, `no` outputs, `nw` waits,
 * taken in step order (CGE_ERR_INTERNAL past the reserved room); *io points
 * at the ni + no + nw entries, all -1, for the caller to fill. */
cge_status cge__plan_step_io(cge_plan *p, int32_t t, int32_t ni, int32_t no, int32_t nw,
                             int32_t **io);
/* The last step (issue order) during which step t's workspace is in use
 * (read back with cge_plan_workspace_last_step). */
void cge__plan_set_workspace_last(cge_plan *p, int32_t t, int32_t last);

/* A copy of `src`'s layout (steps, values, io, workspace lifetimes, sizes
 * and statistics but the per-pass ones) over its graph, borrowed: what a
 * symbolic plan's specialisation fills in with its sizes. */
cge_status cge__plan_clone_layout(const cge_plan *src, cge_plan **out);
/* The same with its tables in one block of `warm`'s memory (the device's
 * warm store: pages already in, so a first run at a new size does not fault
 * them in); NULL: the C heap. */
struct cge__warm;
cge_status cge__plan_clone_layout_in(const cge_plan *src, struct cge__warm *warm, cge_plan **out);

/* The CGE_STORAGE_HOST values' bytes (malloc'ed; the plan frees them). */
void cge__plan_set_host_data(cge_plan *p, void *blob);
/* The host values' blob, at least `bytes` (64-byte aligned; what it held is
 * not kept when it grows, by half at least); NULL when out of memory. */
void *cge__plan_host_room(cge_plan *p, size_t bytes);
/* Per value, then per step (its workspace): the bytes its offset was planned
 * for (zero until the shape program plans them), kept with the plan so that
 * a later size that fits reuses the offsets; NULL when out of memory. */
size_t *cge__plan_reserved(cge_plan *p);
/* The mark the shape program that wrote the plan last left in it (0: none),
 * so that it knows a plan holding its last results from any other. */
uint64_t cge__plan_stamp(const cge_plan *p);
void cge__plan_set_stamp(cge_plan *p, uint64_t stamp);

void cge__plan_set_sizes(cge_plan *p, size_t arena_bytes, size_t constant_bytes,
                         int32_t num_streams, int32_t num_events);
cge_plan_stats *cge__plan_stats_mut(cge_plan *p);
cge_status cge__plan_add_pass_stats(cge_plan *p, const cge_plan_pass_stats *s);

#endif
