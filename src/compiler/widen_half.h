/* The widen_half pass's pieces shared by its two files: the pass over a
 * graph's own nodes (pass_widen_half.c) and the rewrite of the bodies of its
 * control flow (widen_half_bodies.c). Internal to the compiler. */
#ifndef CGE_COMPILER_WIDEN_HALF_H
#define CGE_COMPILER_WIDEN_HALF_H

#include "compiler/compiler_internal.h"

static inline bool cc_is_half(cge_dtype d) { return d == CGE_F16 || d == CGE_BF16; }

/* A Cast node reading `in` and making `out` of dtype `to` (shape given). */
cge_status cc_widen_cast(cc_ctx *ctx, cge_graph *g, const char *in, const char *out,
                         cge_dtype to, const cge_shape *shape);
/* A float32 copy of half constant `t` (named `name` in `g`), added to `g`
 * under a fresh name written into buf. */
cge_status cc_widen_constant(cc_ctx *ctx, cge_graph *g, const char *name, const cge_tensor *t,
                             char *buf, size_t size);

/* If, Loop or Scan node `n` of `g` whose half values its bodies compute:
 * the bodies are rewritten to compute in float32 between Casts at their own
 * inputs and outputs (their interface keeps its half dtypes, so what the
 * node reads and makes does not change), and the half values they read
 * from the outer scope are read in float32 (`outer_f32`, called for each
 * such input slot, names the float32 form of the slot's value and may add
 * it to `g`). *done is false, and nothing changed, when a body holds a node
 * the rewrite cannot keep exact to the model's types (below) or the node's
 * meta refuses the rewritten bodies. */
typedef cge_status (*cc_outer_f32_fn)(void *user, int32_t slot, const char **name);
cge_status cc_widen_half_bodies(cc_ctx *ctx, cge_graph *g, cge_node *n, cc_outer_f32_fn outer_f32,
                                void *user, bool *done);

#endif
