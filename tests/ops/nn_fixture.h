/* The case format of the CNN operator fixtures (gen_nn_fixtures.py) and the
 * runner that checks one case through op_run: every output against its
 * expected values, with the case's name in the failure message. */
#ifndef CGE_TEST_NN_FIXTURE_H
#define CGE_TEST_NN_FIXTURE_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/op.h"
#include "op_runner.h"
#include "ops/kernel_util.h"

typedef struct nn_fx_tensor {
    int present;
    cge_dtype dtype;
    int32_t rank;
    int64_t dims[CGE_MAX_RANK];
    const void *data;
} nn_fx_tensor;

typedef struct nn_fx_case {
    const char *name;
    const char *op;
    int32_t num_attrs;
    const cge_attr *attrs;
    int32_t num_inputs;
    const nn_fx_tensor *inputs;
    int32_t num_outputs;
    const nn_fx_tensor *outputs;
} nn_fx_case;

static inline cge_shape nn_fx_shape(const nn_fx_tensor *t)
{
    cge_shape s = {.rank = t->rank};
    memcpy(s.dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
    return s;
}

/* Runs case `c` and compares outputs: floats with |got - want| <= atol +
 * rtol * |want|, integers exactly. Fails the test naming the case. */
static inline void nn_fx_check(const nn_fx_case *c, double rtol, double atol)
{
    cge_tensor in[8], out[4];
    for (int32_t i = 0; i < c->num_inputs; i++)
        in[i] = c->inputs[i].present
                    ? op_tensor(c->inputs[i].dtype, nn_fx_shape(&c->inputs[i]), c->inputs[i].data)
                    : op_absent();
    cge_status st = op_run(c->op, in, c->num_inputs, c->attrs, c->num_attrs, out, c->num_outputs);
    if (st != CGE_OK)
        fail_msg("%s: %s", c->name, cge_last_error());
    for (int32_t o = 0; o < c->num_outputs; o++) {
        const nn_fx_tensor *w = &c->outputs[o];
        cge_shape ws = nn_fx_shape(w);
        if (out[o].dtype != w->dtype || !cge_shape_equal(&out[o].shape, &ws)) {
            char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
            fail_msg("%s: output %d is %s %s, expected %s %s", c->name, (int)o,
                     cge_dtype_name(out[o].dtype), cge_shape_str(&out[o].shape, a, sizeof a),
                     cge_dtype_name(w->dtype), cge_shape_str(&ws, b, sizeof b));
        }
        int64_t n = cge_shape_numel(&ws);
        bool flt = cge_dtype_is_float(w->dtype);
        for (int64_t i = 0; i < n; i++) {
            double g = cge__load_as_double(w->dtype, out[o].data, i);
            double e = cge__load_as_double(w->dtype, w->data, i);
            bool ok = flt ? (isnan(e) ? isnan(g) : fabs(g - e) <= atol + rtol * fabs(e)) : g == e;
            if (!ok)
                fail_msg("%s: output %d element %lld is %.9g, expected %.9g", c->name, (int)o,
                         (long long)i, g, e);
        }
    }
    op_free_outputs(out, c->num_outputs);
}

static inline void nn_fx_test(void **state)
{
    nn_fx_check(*state, 1e-4, 1e-5);
}

/* Runs every case as its own cmocka test, then the `extra` hand-written tests. */
static inline int nn_fx_run_all(const char *group, const nn_fx_case *cases, int n,
                                const struct CMUnitTest *extra, int n_extra)
{
    struct CMUnitTest *t = calloc((size_t)(n + n_extra), sizeof *t);
    if (!t)
        return 1;
    for (int i = 0; i < n; i++) {
        t[i].name = cases[i].name;
        t[i].test_func = nn_fx_test;
        t[i].initial_state = (void *)&cases[i];
    }
    for (int i = 0; i < n_extra; i++)
        t[n + i] = extra[i];
    int rc = _cmocka_run_group_tests(group, t, (size_t)(n + n_extra), NULL, NULL);
    free(t);
    return rc;
}

#endif
