/* Test helpers for the compiler: build small graphs, run a plan the way a
 * session does (one arena, one constant blob, streams and events), compare
 * the outputs of two compiles, count node kinds. */
#ifndef CGE_TEST_CT_UTIL_H
#define CGE_TEST_CT_UTIL_H

#include "cge/compiler.h"

/* Options at a level with everything else default (stats on). */
cge_compile_options ct_opts(cge_opt_level level);

/* Run a compiled plan on host tensors; outputs are malloc'ed (free with
 * ct_free_outputs). */
cge_status ct_run_plan(const cge_plan *p, const cge_tensor *inputs, int32_t num_inputs,
                       cge_tensor *outputs, int32_t num_outputs);
void ct_free_outputs(cge_tensor *outputs, int32_t n);

/* Compile `g` with `opts` and run it on `inputs` (shapes from the tensors). */
cge_status ct_compile_run(const cge_graph *g, const cge_compile_options *opts,
                          const cge_tensor *inputs, int32_t num_inputs, cge_tensor *outputs,
                          int32_t num_outputs, cge_plan **plan_out);

/* Random float32 inputs for every graph input (static shapes), deterministic
 * per seed; free with ct_free_outputs. */
void ct_random_inputs(const cge_graph *g, uint32_t seed, cge_tensor *inputs);

/* Compile at CGE_OPT_NONE and with `opts`, run both on random inputs and
 * assert every output agrees: bit for bit when `max_ulps` is 0, else within
 * max_ulps units in the last place or `atol`. Returns the optimised plan's
 * step count. */
int32_t ct_assert_equivalent(const cge_graph *g, const cge_compile_options *opts, int max_ulps,
                             double atol);

/* Steps of a plan whose op type is `op` (any domain). */
int32_t ct_count_op(const cge_plan *p, const char *op);

/* Graph building shorthands (assert on failure). */
cge_graph *ct_graph(const char *name);
void ct_input(cge_graph *g, const char *name, cge_shape shape);
void ct_const_f32(cge_graph *g, const char *name, cge_shape shape, const float *data);
void ct_const_scalar(cge_graph *g, const char *name, float v);
void ct_const_i64(cge_graph *g, const char *name, const int64_t *v, int64_t n);
cge_node *ct_node(cge_graph *g, const char *op, const char *in0, const char *in1, const char *out);
cge_node *ct_node_n(cge_graph *g, const char *op, const char *domain, const char *const *ins,
                    int32_t ni, const char *const *outs, int32_t no);
void ct_output(cge_graph *g, const char *name);

#endif
