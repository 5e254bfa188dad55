/* Every builtin operator's meta against symbolic dimensions: on each input
 * case the contract checker knows, sizes >= 2 are replaced by symbols
 * (size v -> CGE_DIM_SYMBOL(v), so equal sizes share a symbol, as a real
 * binding would) and, for comparison, by anonymous -1. Meta must accept the
 * symbolic inputs whenever it accepts the anonymous ones, keep every dim the
 * anonymous run knows, and never claim a size the concrete run contradicts:
 * a known dim equals the concrete one, a symbol s<v> stands where the
 * concrete size is v. This is how the audit of "d != -1 means known" is
 * kept honest across ~200 meta functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "ops/meta.h"
#include "opcheck/opcheck_internal.h"

#define MAX_GENERIC 6
#define MAX_REPORTS 400

typedef struct sym_stats {
    int32_t cases, compared, failures;
} sym_stats;

static void report(sym_stats *s, const cge_op_def *def, const oc_case *c, const char *fmt, ...)
{
    if (s->failures++ >= MAX_REPORTS)
        return;
    char cs[512], msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s (%s): %s\n", def->name, oc_case_str(c, def, cs, sizeof cs), msg);
}

static cge_status meta(const cge_op_def *def, const oc_case *c, const cge_shape *shapes,
                       const bool *keep_value, cge_tensor_desc *out)
{
    cge_tensor_desc in[OC_MAX_ARGS];
    const void *vals[OC_MAX_ARGS];
    for (int32_t i = 0; i < c->num_inputs; i++) {
        in[i] = (cge_tensor_desc){.name = "",
                                  .dtype = c->present[i] ? c->dtype[i] : CGE_DTYPE_UNDEFINED,
                                  .shape = shapes[i]};
        vals[i] = c->present[i] && keep_value[i] ? c->values[i] : NULL;
    }
    for (int32_t i = 0; i < c->num_outputs; i++)
        out[i] = (cge_tensor_desc){.name = ""};
    cge_status st = cge__op_check_attrs(def, "sym", oc_case_attrs(c));
    if (!st)
        st = cge__op_infer_node(def, "sym", oc_case_attrs(c), in, vals, c->num_inputs, out,
                               c->num_outputs);
    return st;
}

/* Variant 0: float inputs become symbolic (their values dropped), the rest
 * keep shapes and values (indices, shape tensors). Variant 1: every input
 * symbolic, no values at all. Variant 2: only input 0 (the activations, as
 * in a model whose weights are constants). */
static void check_variant(sym_stats *s, const cge_op_def *def, const oc_case *c,
                          const cge_tensor_desc *conc, int variant)
{
    cge_shape sym[OC_MAX_ARGS], anon[OC_MAX_ARGS];
    bool keep[OC_MAX_ARGS];
    bool any = false;
    for (int32_t i = 0; i < c->num_inputs; i++) {
        sym[i] = anon[i] = c->shape[i];
        bool symbolic = c->present[i] && (variant == 1 || (variant == 2 && i == 0) ||
                                          (variant == 0 && cge_dtype_is_float(c->dtype[i])));
        keep[i] = !symbolic;
        for (int32_t d = 0; symbolic && d < c->shape[i].rank; d++) {
            int64_t v = c->shape[i].dims[d];
            if (v >= 2 && v < CGE_DIM_MAX_SYMBOLS) {
                sym[i].dims[d] = CGE_DIM_SYMBOL(v);
                anon[i].dims[d] = CGE_DIM_DYNAMIC;
                any = true;
            }
        }
    }
    if (!any) {
        if (getenv("CGE_SYM_VERBOSE"))
            fprintf(stderr, "  %s variant %d: no dim to make symbolic\n", def->name, variant);
        return;
    }
    cge_tensor_desc oa[OC_MAX_ARGS], os[OC_MAX_ARGS];
    cge_status sa = meta(def, c, anon, keep, oa);
    cge_clear_error();
    cge_status ss = meta(def, c, sym, keep, os);
    if (ss) {
        if (getenv("CGE_SYM_VERBOSE"))
            fprintf(stderr, "  %s variant %d refused: %s\n", def->name, variant, cge_last_error());
        if (!sa)
            report(s, def, c, "variant %d: meta accepts -1 dims but refuses symbols: %s",
                   variant, cge_last_error());
        cge_clear_error();
        return;
    }
    s->compared++;
    for (int32_t o = 0; o < c->num_outputs; o++) {
        const cge_shape *ps = &os[o].shape, *pa = &oa[o].shape, *pc = &conc[o].shape;
        if (ps->rank < 0 || ps->rank > CGE_MAX_RANK) {
            report(s, def, c, "variant %d output %d: rank %d", variant, o, (int)ps->rank);
            continue;
        }
        if (sa) {
            /* -1 refused: hold the symbolic run to the concrete one only */
            oa[o] = (cge_tensor_desc){.dtype = os[o].dtype, .shape = {.rank = -1}};
        }
        if (os[o].dtype != oa[o].dtype) {
            report(s, def, c, "variant %d output %d: dtype %d with symbols, %d with -1", variant,
                   o, (int)os[o].dtype, (int)oa[o].dtype);
            continue;
        }
        if (ps->rank != pc->rank) {
            if (pa->rank == pc->rank || sa)
                report(s, def, c, "variant %d output %d: rank %d with symbols, %d concrete",
                       variant, o, (int)ps->rank, (int)pc->rank);
            continue;
        }
        char bs[CGE_SHAPE_STR_MAX], ba[CGE_SHAPE_STR_MAX], bc[CGE_SHAPE_STR_MAX];
        for (int32_t d = 0; d < ps->rank; d++) {
            int64_t ds = ps->dims[d], dc = pc->dims[d];
            int64_t da = pa->rank == ps->rank ? pa->dims[d] : CGE_DIM_DYNAMIC;
            /* a derived symbol floor((s<k>+a)/b): its value where s<k> is k */
            int64_t base, add, div, dv = cge_dim_symbol_id(ds);
            if (cge_dim_derived_parts(ds, &base, &add, &div))
                dv = cge_dim_derive(cge_dim_symbol_id(base), add, div);
            bool bad = !cge_dim_valid(ds) || (ds >= 0 && ds != dc) ||
                       (cge_dim_is_symbol(ds) && dv != dc) ||
                       (da >= 0 && ds != da);
            if (bad) {
                report(s, def, c, "variant %d output %d dim %d: symbols give %s, -1 gives %s, "
                       "concrete %s", variant, o, (int)d, cge_shape_str(ps, bs, sizeof bs),
                       cge_shape_str(pa, ba, sizeof ba), cge_shape_str(pc, bc, sizeof bc));
                break;
            }
        }
    }
}

static void check_case(sym_stats *s, const cge_op_def *def, const oc_case *c)
{
    if (c->num_outputs > OC_MAX_ARGS)
        return;
    cge_tensor_desc conc[OC_MAX_ARGS];
    bool keep[OC_MAX_ARGS];
    for (int32_t i = 0; i < OC_MAX_ARGS; i++)
        keep[i] = true;
    if (meta(def, c, c->shape, keep, conc)) {
        if (getenv("CGE_SYM_VERBOSE"))
            fprintf(stderr, "  %s concrete refused: %s\n", def->name, cge_last_error());
        cge_clear_error();
        return;
    }
    for (int32_t o = 0; o < c->num_outputs; o++)
        if (!cge_shape_is_static(&conc[o].shape))
            return;
    s->cases++;
    check_variant(s, def, c, conc, 0);
    check_variant(s, def, c, conc, 1);
    check_variant(s, def, c, conc, 2);
}

/* Cases the checker's generator does not reach (it pairs equal shapes). */
static const struct {
    const char *op, *spec;
} extra_cases[] = {
    {"MatMul", "f32[2,3]; f32[3,4]"},
    {"MatMul", "f32[5,2,3]; f32[3,4]"},
    {"MatMul", "f32[2,1,2,3]; f32[3,2,3,4]"},
    {"MatMul", "f32[3]; f32[2,3,4]"},
    {"Gemm", "f32[2,3]; f32[4,3]; f32[4] | transB=1"},
    {"Conv", "f32[2,3,5,5]; f32[4,3,1,1]"},
    {"Conv", "f32[2,4,7,6]; f32[4,1,3,3]; f32[4] | group=4 pads=1,1,1,1"},
    {"ConvTranspose", "f32[2,3,4,4]; f32[3,2,3,3] | strides=2,2"},
    {"MaxPool", "f32[2,3,6,6] | kernel_shape=2,2 strides=2,2"},
    {"Concat", "f32[2,3]; f32[2,5] | axis=1"},
    {"Concat", "f32[2,3]; f32[4,3] | axis=0"},
    {"Transpose", "f32[2,3,4] | perm=2,0,1"},
    {"Reshape", "f32[2,3,4]; i64[3]={0,-1,2}"},
    {"Reshape", "f32[2,3,4]; i64[2]={6,4}"},
    {"Flatten", "f32[2,3,4] | axis=1"},
    {"Gather", "f32[5,3]; i64[2,4] | axis=0"},
    {"Softmax", "f32[2,3] | axis=-1"},
    {"LayerNormalization", "f32[2,3,4]; f32[4]; f32[4]"},
    {"Expand", "f32[3,1]; i64[2]={3,4}"},
    {"Where", "bool[2,1]; f32[2,3]; f32[1,3]"},
    {"Add", "f32[2,3]; f32[3]"},
    {"Add", "f32[2,1]; f32[1,3]"},
    {"Squeeze", "f32[2,1,3]; i64[1]={1}"},
    {"Unsqueeze", "f32[2,3]; i64[1]={0}"},
    {"Slice", "f32[4,6]; i64[1]={1}; i64[1]={3}; i64[1]={1}"},
    {"Split", "f32[4,6]; i64[2]={2,4} | axis=1"},
};

static void check_op(sym_stats *s, const cge_op_def *def)
{
    oc_case c;
    for (size_t i = 0; i < sizeof extra_cases / sizeof extra_cases[0]; i++) {
        if (strcmp(extra_cases[i].op, def->name))
            continue;
        if (oc_case_parse(def, extra_cases[i].spec, &c)) {
            fprintf(stderr, "bad extra case %s: %s\n", def->name, cge_last_error());
            fail();
        }
        check_case(s, def, &c);
        oc_case_free(&c);
    }
    const char *const *specs = oc_builtin_cases(def->name);
    for (int32_t i = 0; specs && specs[i]; i++) {
        if (oc_case_parse(def, specs[i], &c)) {
            cge_clear_error();
            continue;
        }
        check_case(s, def, &c);
        oc_case_free(&c);
    }
    cge_dtype_set set = def->num_inputs ? def->inputs[0].dtypes : CGE_DT(CGE_F32);
    cge_dtype t = CGE_F32;
    for (int k = 1; !(set & CGE_DT(t)) && k < CGE_DTYPE_MAX; k++)
        t = (cge_dtype)k;
    for (int32_t k = 0; k < MAX_GENERIC; k++) {
        cge_status st = oc_generic_case(def, k, t, &c);
        if (st == CGE_ERR_NOT_FOUND)
            break;
        if (st) {
            cge_clear_error();
            continue;
        }
        check_case(s, def, &c);
        oc_case_free(&c);
    }
}

static void test_builtin_meta_keeps_symbols(void **state)
{
    (void)state;
    sym_stats s = {0};
    int32_t n = cge_op_count();
    assert_true(n > 100);
    for (int32_t i = 0; i < n; i++) {
        const cge_op_def *def = cge_op_at(i);
        if (strcmp(cge_op_origin(def), "builtin") || oc_builtin_skip(def->name))
            continue;
        int32_t before = s.compared;
        check_op(&s, def);
        if (getenv("CGE_SYM_VERBOSE") && s.compared == before)
            fprintf(stderr, "not compared: %s\n", def->name);
    }
    fprintf(stderr, "symbolic meta: %d cases, %d symbolic runs compared, %d failures\n", s.cases,
            s.compared, s.failures);
    assert_true(s.compared > 200);
    assert_int_equal(s.failures, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_meta_keeps_symbols),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
