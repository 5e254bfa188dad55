/* Test helper: run one operator outside any graph, the way a session does it:
 * meta (with every input's value), kernel lookup for the "cpu" engine, launch
 * on a stream, synchronize. Also numeric comparison helpers for op tests. */
#ifndef CGE_TEST_OP_RUNNER_H
#define CGE_TEST_OP_RUNNER_H

#include "cge/op.h"

/* A host tensor view (no copy). */
cge_tensor op_tensor(cge_dtype dtype, cge_shape shape, const void *data);
/* An absent optional input. */
cge_tensor op_absent(void);

/* Run `op_type` (default domain unless `domain` given via op_run_domain).
 * `outputs[i]` are filled with freshly malloc'ed host buffers (free them with
 * op_free_outputs); dtype and shape come from meta. On error the outputs are
 * zeroed and the layered error is in cge_last_error(). Output buffers are
 * surrounded by guard bytes; a kernel that writes outside its outputs makes
 * op_run fail with a [kernel] error. */
cge_status op_run(const char *op_type, const cge_tensor *inputs, int32_t num_inputs,
                  const cge_attr *attrs, int32_t num_attrs, cge_tensor *outputs,
                  int32_t num_outputs);
cge_status op_run_domain(const char *domain, const char *op_type, const cge_tensor *inputs,
                         int32_t num_inputs, const cge_attr *attrs, int32_t num_attrs,
                         cge_tensor *outputs, int32_t num_outputs);
void op_free_outputs(cge_tensor *outputs, int32_t num_outputs);

/* Meta only: infer output descriptors from input descriptors (values may be
 * NULL or an array with NULL entries). */
cge_status op_infer(const char *op_type, const cge_tensor_desc *inputs,
                    const void *const *input_values, int32_t num_inputs,
                    const cge_attr *attrs, int32_t num_attrs, cge_tensor_desc *outputs,
                    int32_t num_outputs);

/* Assertions (cmocka fail_msg on mismatch, printing the first bad index).
 * Element values are compared after conversion to double; NaN equals NaN. */
void op_assert_shape(const cge_tensor *t, cge_shape expected);
void op_assert_close(const cge_tensor *t, cge_dtype dtype, cge_shape shape,
                     const void *expected, double rtol, double atol);
void op_assert_equal(const cge_tensor *t, cge_dtype dtype, cge_shape shape,
                     const void *expected);
/* Assert the last error names `layer` (e.g. "[meta]") and contains `needle`. */
void op_assert_error(cge_status st, const char *layer, const char *needle);
/* n floats in [-1, 1) from `seed` (malloc'ed; the caller frees them). */
float *op_random_floats(int64_t n, unsigned seed);

#endif
