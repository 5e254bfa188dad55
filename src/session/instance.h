/* A compiled graph for one input signature: its plan (one arena, prepared
 * kernel contexts) or, when shapes depend on run-time values, the compiler's
 * prepared graph run node by node with a buffer per value. */
#ifndef CGE_SESSION_INSTANCE_H
#define CGE_SESSION_INSTANCE_H

#include "cge/compiler.h"
#include "cge/graph.h"
#include "cge/op.h"
#include "cge/runtime.h"
#include "cge/session.h"

typedef struct cge__instance cge__instance;

/* Compiles `g` (the session's graph, which must outlive the instance) for
 * the concrete `input_shapes`; `copts` (may be NULL) is how. Kernels find
 * constant data prepared by other instances in `shared` (may be NULL; it
 * must outlive the instance). */
typedef struct cge__arena_source {
    /* The arena for a plan needing `bytes`: memory the caller owns, shared
     * with other instances whose runs it orders (cge__instance_after). */
    cge_status (*get)(void *user, size_t bytes, void **arena);
    void *user;
} cge__arena_source;

cge_status cge__instance_create(cge_device *dev, const cge_graph *g, const cge_shape *input_shapes,
                               const cge_compile_options *copts, cge_kernel_cache *shared,
                               const cge__arena_source *arena, cge__instance **out);
/* The plan's arena moved from `from` (a block of `from_bytes`) to `to` (the
 * same bytes, a larger block): every address into it follows, and a recording is dropped (it
 * holds the old addresses; the next replay captures again). No run of the
 * instance may be in flight. */
void cge__instance_relocate(cge__instance *inst, const void *from, size_t from_bytes, void *to);
/* Wait until the instance's last run has ended (on whatever stream). */
void cge__instance_wait(const cge__instance *inst);
/* The next run of `inst` starts after the last run of `prev` ends (they
 * share an arena); NULL or `inst` itself: no extra wait. */
void cge__instance_after(cge__instance *inst, const cge__instance *prev);
void cge__instance_destroy(cge__instance *inst);
/* As cge__instance_create, for a graph that nothing compiles again (a
 * static session graph's one plan): each constant that only kernels which
 * packed it read (their prepare called cge__kernel_input_packed) goes once
 * the last of them has packed it, from the plan's graph and from `g`; the
 * shared cache forgets it. A later compile of `g` fails cleanly ([graph]
 * constant released) instead of reading nothing. */
cge_status cge__instance_create_releasing(cge_device *dev, cge_graph *g,
                                         const cge_shape *input_shapes,
                                         const cge_compile_options *copts,
                                         cge_kernel_cache *shared, const cge__arena_source *arena,
                                         cge__instance **out);
/* Bytes of constants released so far (cge__instance_create_releasing). */
size_t cge__instance_released_bytes(const cge__instance *inst);
/* A weight whose pages went once packed (cge__retire_request). */
typedef struct cge__retired_weight {
    void *data;
    size_t bytes;
} cge__retired_weight;
/* For the first instance planned from a symbolic plan (whose steps every
 * signature's instance shares), given to cge__instance_create_planned: each
 * constant that only steps whose prepare packed it for any shape read
 * (cge__kernel_input_packed_any_shape: FusedMatMul's B), whose packed
 * copies can write it back, and whose block only the graphs in `holders`
 * hold, gives its pages back as soon as its last reader has packed it; its
 * address stays reserved and retired in the shared cache, so that later
 * signatures' prepares find the packed copies by it. Each is appended to
 * *list (*num of them, the caller's to free); `freed` adds their bytes. A
 * caller that must read them again (a signature that compiles) revives them
 * first: cge__block_restore_pages, then cge__kernel_cache_revive. */
typedef struct cge__retire_request {
    const cge_graph *const *holders;
    int32_t num_holders;
    cge__retired_weight **list;
    int32_t *num;
    size_t freed;
} cge__retire_request;
/* A value-dependent instance's node-by-node runs so far: kernel prepares,
 * buffer allocations, and the bytes its buffers hold now (values, the pool,
 * workspaces; constants read in place not counted). Zeros for a plan. */
void cge__instance_eager_counts(const cge__instance *inst, int64_t *prepares, int64_t *allocs,
                                size_t *buffer_bytes);
bool cge__instance_matches(const cge__instance *inst, const cge_shape *input_shapes, int32_t n);
/* Some shape is known only once values are computed: only EAGER can run it. */
bool cge__instance_value_dependent(const cge__instance *inst);
/* Release the instance's recording (after the replays in flight); it runs
 * as a plan until captured again. */
void cge__instance_drop_capture(cge__instance *inst);
/* Whether the instance holds a replay instance (captured earlier). */
bool cge__instance_captured(const cge__instance *inst);
/* Record the plan's launches into a replay instance (on `stream`). On
 * failure the instance stays usable in PLAN mode. */
cge_status cge__instance_capture(cge__instance *inst, cge_stream *stream);
/* Inputs/outputs already bound: in_pos[i] is the graph input position of
 * inputs[i] (likewise for outputs). Checks output buffers before enqueueing.
 * `mode` is EAGER, PLAN or REPLAY (REPLAY needs a capture). */
cge_status cge__instance_run(cge__instance *inst, cge_stream *stream, const cge_tensor *inputs,
                            const int32_t *in_pos, int32_t num_inputs, cge_tensor *outputs,
                            const int32_t *out_pos, int32_t num_outputs, cge_run_mode mode,
                            bool sync);

/* The caller's buffers stand in for the graph inputs and outputs of the
 * next run (bind) where the plan allows (see binding_table), so kernels
 * read and write them with no copy; the others, and every one without
 * bind, are the plan's own and copied. A change of addresses drops the
 * recording (captured again at the next replay). */
void cge__instance_bind_buffers(cge__instance *inst, const cge_tensor *inputs,
                                const int32_t *in_pos, int32_t num_inputs,
                                const cge_tensor *outputs, const int32_t *out_pos,
                                int32_t num_outputs, bool bind);

/* The compiled graph this instance runs (its plan's). */
const cge_graph *cge__instance_graph(const cge__instance *inst);
/* Dtype and shape of graph output `pos` as this instance last computed it. */
cge_status cge__instance_output_desc(const cge__instance *inst, int32_t pos, cge_tensor_desc *out);

/* An instance over `plan`, a symbolic plan's specialisation for
 * `input_shapes` (cge_plan_specialize), which it owns from now on (also on
 * failure); `g` runs its EAGER runs, as for cge__instance_create.
 * `consts`: the constants' host blob (a loaded model's weights, which must
 * outlive the instance), or NULL: the plan's graph holds them. `retire`:
 * NULL, or weights to give back as they are packed (above). */
cge_status cge__instance_create_planned(cge_device *dev, const cge_graph *g,
                                      const cge_shape *input_shapes, cge_plan *plan,
                                      const void *consts, cge_kernel_cache *shared,
                                      const cge__arena_source *arena,
                                      cge__retire_request *retire, cge__instance **out);
/* EAGER runs of this instance run its plan's steps (as a loaded model's):
 * the unoptimised graph's nodes would read retired weights (set already on
 * the instance whose creation retired them). */
void cge__instance_eager_by_steps(cge__instance *inst);
/* The instance (one made by cge__instance_create_planned) serves
 * `input_shapes` from now on: its plan rewritten in place by `sp` (the
 * symbolic plan's shape program), its steps' tensors and workspaces bound
 * again, and only the kernels whose shapes changed prepared again (counted
 * in *counts); after a delta run of `sp` (cge_shape_program_last_changes)
 * only the steps that touch a changed value are bound again. Its recording
 * is dropped. Waits for its runs in flight. On
 * error the instance must be destroyed. */
typedef struct cge__rebind_counts {
    int64_t prepares;        /* kernels prepared again */
    int64_t deltas;          /* rebinds of the changed steps only */
    int64_t steps_rebound;   /* steps whose tensors were bound again */
} cge__rebind_counts;
cge_status cge__instance_respecialize(cge__instance *inst, cge_shape_program *sp,
                                      const cge_shape *input_shapes,
                                      const cge__arena_source *arena, cge__rebind_counts *counts);
/* An instance over a plan made elsewhere (a loaded model file): `plan` (its
 * graph included) and `constants` (host memory of cge_plan_constant_bytes(),
 * used in place on the CPU device) stay the caller's and must outlive it.
 * `shared` (or NULL: none) is the kernel cache its prepares look in. */
cge_status cge__instance_create_prebuilt(cge_device *dev, const cge_plan *plan,
                                        const void *constants, cge_kernel_cache *shared,
                                        cge__instance **out);
/* Report every step and copy of the following runs to `fn` (NULL: stop). */
void cge__instance_set_profile(cge__instance *inst, cge_profile_fn fn, void *user);

#endif
