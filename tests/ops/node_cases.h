/* Table-driven node cases (written by gen_seq_fixtures.py): one operator, its
 * inputs, attributes and expected outputs, run through op_run and compared.
 * Used by test_rnn.c, test_quant.c, test_spectral.c and test_einsum.c. */
#ifndef CGE_TEST_NODE_CASES_H
#define CGE_TEST_NODE_CASES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "op_runner.h"
#include "ops/kernel_util.h"

/* dtype 0 marks an absent input, or an output that is not checked. */
typedef struct nc_tensor {
    int32_t dtype;
    int32_t rank;
    int64_t dims[CGE_MAX_RANK];
    const void *data;
} nc_tensor;

typedef struct nc_attr {
    const char *name;
    int32_t kind;   /* cge_attr_kind */
    int64_t i;
    float f;
    const char *s;
    int64_t n;
    const int64_t *ints;
    const float *floats;
    const char *const *strings;
} nc_attr;

typedef struct nc_case {
    const char *name;
    const char *op;
    int32_t num_inputs;
    const nc_tensor *inputs;
    int32_t num_attrs;
    const nc_attr *attrs;
    int32_t num_outputs;
    const nc_tensor *outputs;
    double rtol, atol;
} nc_case;

static inline cge_shape nc_shape(const nc_tensor *t)
{
    cge_shape s = {.rank = t->rank};
    for (int32_t d = 0; d < t->rank; d++)
        s.dims[d] = t->dims[d];
    return s;
}

/* Runs one case; returns 0 on success, or writes what failed into msg. */
static inline int nc_run(const nc_case *c, char *msg, size_t size)
{
    cge_tensor ins[16], outs[8];
    cge_attr attrs[16];
    if (c->num_inputs > 16 || c->num_outputs > 8 || c->num_attrs > 16) {
        snprintf(msg, size, "%s: too many arguments for the runner", c->name);
        return 1;
    }
    for (int32_t i = 0; i < c->num_inputs; i++)
        ins[i] = c->inputs[i].dtype ? op_tensor((cge_dtype)c->inputs[i].dtype,
                                                nc_shape(&c->inputs[i]), c->inputs[i].data)
                                    : op_absent();
    for (int32_t i = 0; i < c->num_attrs; i++) {
        const nc_attr *a = &c->attrs[i];
        attrs[i] = (cge_attr){.name = a->name, .kind = (cge_attr_kind)a->kind, .i = a->i,
                              .f = a->f, .s = a->s, .n = a->n, .ints = a->ints,
                              .floats = a->floats, .strings = a->strings};
    }
    cge_status st = op_run(c->op, ins, c->num_inputs, attrs, c->num_attrs, outs, c->num_outputs);
    if (st != CGE_OK) {
        snprintf(msg, size, "%s: %s failed: %s", c->name, c->op, cge_last_error());
        return 1;
    }
    int bad = 0;
    for (int32_t o = 0; o < c->num_outputs && !bad; o++) {
        const nc_tensor *e = &c->outputs[o];
        if (!e->dtype)
            continue;
        cge_shape s = nc_shape(e);
        char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
        if (outs[o].dtype != (cge_dtype)e->dtype || !cge_shape_equal(&outs[o].shape, &s)) {
            snprintf(msg, size, "%s: output %d is %s %s, expected %s %s", c->name, o,
                     cge_dtype_name(outs[o].dtype), cge_shape_str(&outs[o].shape, a, sizeof a),
                     cge_dtype_name((cge_dtype)e->dtype), cge_shape_str(&s, b, sizeof b));
            bad = 1;
            break;
        }
        int64_t n = cge_shape_numel(&s);
        for (int64_t i = 0; i < n; i++) {
            double got = cge__load_as_double(outs[o].dtype, outs[o].data, i);
            double want = cge__load_as_double(outs[o].dtype, e->data, i);
            if (got == want || (want != want && got != got))
                continue;
            if (!(fabs(got - want) <= c->atol + c->rtol * fabs(want))) {
                snprintf(msg, size, "%s: output %d element %lld: got %.9g, expected %.9g",
                         c->name, o, (long long)i, got, want);
                bad = 1;
                break;
            }
        }
    }
    op_free_outputs(outs, c->num_outputs);
    return bad;
}

/* Runs every case of a table; fails the test naming each failing case. */
static inline void nc_run_all(const nc_case *cases, int32_t n)
{
    int failed = 0;
    char msg[1024];
    for (int32_t i = 0; i < n; i++)
        if (nc_run(&cases[i], msg, sizeof msg)) {
            print_error("%s\n", msg);
            failed++;
        }
    if (failed)
        fail_msg("%d of %d node cases failed", failed, n);
}

#endif
