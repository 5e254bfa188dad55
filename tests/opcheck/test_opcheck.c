/* The contract checker: the example AddCustom passes, its deliberately broken
 * variant is caught (writes past its outputs, leaves outputs unwritten, runs
 * on inputs meta refuses), each kind of finding from an op built to have it,
 * every builtin operator checked, options and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "cge/opcheck.h"

static int32_t count_kind(const cge_opcheck_report *r, cge_opcheck_kind kind, const char *op)
{
    int32_t n = 0;
    for (int32_t i = 0; i < cge_opcheck_num_findings(r); i++) {
        const cge_opcheck_finding *f = cge_opcheck_finding_at(r, i);
        n += f->kind == kind && (!op || !strcmp(f->op, op));
    }
    return n;
}

static void dump(const cge_opcheck_report *r)
{
    cge_opcheck_write(r, stderr, false);
}

static void test_example_library_passes(void **state)
{
    (void)state;
    const char *libs[] = {ADD_CUSTOM_PATH};
    cge_opcheck_options o = {.libraries = libs, .num_libraries = 1};
    cge_opcheck_report *r = NULL;
    if (cge_op_check(&o, &r) != CGE_OK)
        fail_msg("%s", cge_last_error());
    assert_int_equal(cge_opcheck_num_ops(r), 1);
    const cge_opcheck_op_result *res = cge_opcheck_op(r, 0);
    assert_string_equal(res->op, "AddCustom");
    assert_string_equal(res->domain, "custom");
    assert_string_equal(res->origin, "add_custom");
    assert_null(res->skipped);
    assert_true(res->cases_accepted >= 1);
    /* Shapes next to [8,2048] and other dtypes: meta refuses them, and the
     * kernel (constraint checks are on for custom libraries) refuses too. */
    assert_true(res->cases_refused >= 6);
    assert_true(res->kernel_runs > res->cases_accepted * 2);
    if (cge_opcheck_num_findings(r))
        dump(r);
    assert_int_equal(cge_opcheck_num_findings(r), 0);
    cge_opcheck_report_destroy(r);
}

static void test_broken_variant_caught(void **state)
{
    (void)state;
    const char *libs[] = {ADD_CUSTOM_BROKEN_PATH};
    cge_opcheck_options o = {.libraries = libs, .num_libraries = 1};
    cge_opcheck_report *r = NULL;
    if (cge_op_check(&o, &r) != CGE_OK)
        fail_msg("%s", cge_last_error());
    assert_int_equal(cge_opcheck_num_ops(r), 1);
    assert_string_equal(cge_opcheck_op(r, 0)->domain, "custom_broken");
    /* [8,2047] and smaller: the kernel's 16,384 elements run past output 0. */
    assert_true(count_kind(r, CGE_OPCHECK_OUT_OF_BOUNDS, "AddCustom") >= 1);
    /* [9,2048] and larger: the tail of output 0 is never written. */
    assert_true(count_kind(r, CGE_OPCHECK_UNWRITTEN, "AddCustom") >= 1);
    /* x and y of different shapes: meta refuses, the kernel does not check. */
    assert_true(count_kind(r, CGE_OPCHECK_KERNEL_UNCHECKED, "AddCustom") >= 1);
    bool named = false;
    for (int32_t i = 0; i < cge_opcheck_num_findings(r); i++) {
        const char *m = cge_opcheck_finding_at(r, i)->message;
        if (strstr(m, "AddCustom (custom_broken)") && strstr(m, "outside output 0"))
            named = true;
    }
    assert_true(named);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(cge_opcheck_write(r, f, true), CGE_OK);
    fclose(f);
    assert_non_null(strstr(text, "FINDING [out-of-bounds] AddCustom (custom_broken)"));
    assert_non_null(strstr(text, "findings in 1 operators"));
    free(text);
    cge_opcheck_report_destroy(r);

    /* With kernel constraint checks off, only the meta-accepted damage stays. */
    o = (cge_opcheck_options){.op = "AddCustom", .domain = "custom_broken", .kernel_constraints = 2};
    assert_int_equal(cge_op_check(&o, &r), CGE_OK);
    assert_int_equal(count_kind(r, CGE_OPCHECK_KERNEL_UNCHECKED, NULL), 0);
    assert_true(count_kind(r, CGE_OPCHECK_OUT_OF_BOUNDS, NULL) >= 1);
    cge_opcheck_report_destroy(r);
}

/* ---- ops built to break one rule each ---------------------------------- */

typedef struct fill_args {
    float *y;
    int64_t n;
    float v;
} fill_args;

static void fill_block(int64_t b, int64_t nb, void *p)
{
    fill_args *a = p;
    if (b == 0)
        for (int64_t i = 0; i < a->n; i++)
            a->y[i] = a->v;
}

static cge_status same_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static atomic_int launches;

/* A different value on every launch. */
static cge_status nondet_launch(const cge_kernel_ctx *ctx, cge_stream *s)
{
    fill_args a = {ctx->outputs[0].data, cge_shape_numel(&ctx->outputs[0].shape),
                   (float)atomic_fetch_add(&launches, 1)};
    return cge_launch(s, fill_block, 1, &a, sizeof a);
}

/* Writes only the first half of its output. */
static cge_status lazy_launch(const cge_kernel_ctx *ctx, cge_stream *s)
{
    fill_args a = {ctx->outputs[0].data, cge_shape_numel(&ctx->outputs[0].shape) / 2, 1.0f};
    return cge_launch(s, fill_block, 1, &a, sizeof a);
}

/* Writes its output, then claims another shape for it. */
static cge_status reshape_launch(const cge_kernel_ctx *ctx, cge_stream *s)
{
    fill_args a = {ctx->outputs[0].data, cge_shape_numel(&ctx->outputs[0].shape), 2.0f};
    ctx->outputs[0].shape = CGE_SHAPE(cge_shape_numel(&ctx->outputs[0].shape));
    return cge_launch(s, fill_block, 1, &a, sizeof a);
}

/* Refuses at launch what meta promised (any shape but a leading 2). */
static cge_status picky_launch(const cge_kernel_ctx *ctx, cge_stream *s)
{
    if (ctx->inputs[0].shape.rank == 0 || ctx->inputs[0].shape.dims[0] != 2)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "only a leading dimension of 2");
    fill_args a = {ctx->outputs[0].data, cge_shape_numel(&ctx->outputs[0].shape), 3.0f};
    return cge_launch(s, fill_block, 1, &a, sizeof a);
}

/* Meta accepts only [3,7] (and the kernel checks it). */
static cge_status tiled_infer(cge_infer_ctx *ctx)
{
    const cge_shape *s = &ctx->inputs[0].shape;
    if (s->rank != 2 || s->dims[0] != 3 || s->dims[1] != 7)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "only [3,7]");
    return same_infer(ctx);
}

static cge_status tiled_launch(const cge_kernel_ctx *ctx, cge_stream *s)
{
    const cge_shape *sh = &ctx->inputs[0].shape;
    if (sh->rank != 2 || sh->dims[0] != 3 || sh->dims[1] != 7)
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "only [3,7]");
    fill_args a = {ctx->outputs[0].data, 21, 4.0f};
    return cge_launch(s, fill_block, 1, &a, sizeof a);
}

static const cge_arg_def f32_in[] = {{.name = "x", .dtypes = CGE_DT(CGE_F32)}};
static const cge_arg_def wide_in[] = {{.name = "x", .dtypes = CGE_DT(CGE_F32) | CGE_DT(CGE_F64)}};
static const cge_arg_def y_out[] = {{.name = "y"}};
#define KERNEL(fn) \
    (const cge_kernel_def[]){{.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = fn, .inplace_input = -1}}
#define OP(nm, ins, fn) \
    {.name = nm, .domain = "octest", .since_version = 1, .inputs = ins, .num_inputs = 1, \
     .outputs = y_out, .num_outputs = 1, .infer = same_infer, .kernels = KERNEL(fn), .num_kernels = 1}
static const cge_op_def bad_ops[] = {
    OP("Nondet", f32_in, nondet_launch),
    OP("Lazy", f32_in, lazy_launch),
    OP("Reshaper", f32_in, reshape_launch),
    OP("Wide", wide_in, nondet_launch),
    OP("Picky", f32_in, picky_launch),
    {.name = "Tiled", .domain = "octest", .since_version = 1, .inputs = f32_in, .num_inputs = 1,
     .outputs = y_out, .num_outputs = 1, .infer = tiled_infer, .kernels = KERNEL(tiled_launch),
     .num_kernels = 1},
};
static const cge_converter_def bad_converters[] = {
    {.front_end = "onnx", .source_op = "Lazy", .source_domain = "octest", .since_version = 1,
     .target_op = "Missing", .target_domain = "octest"},
};
static const cge_op_library bad_lib = {
    .api_version = CGE_OP_API_VERSION, .name = "octest", .ops = bad_ops, .num_ops = 6,
    .converters = bad_converters, .num_converters = 1,
};

static int register_bad(void **state)
{
    (void)state;
    return cge_op_register_library(&bad_lib) == CGE_OK ? 0 : -1;
}

static cge_opcheck_report *check_one(const char *op)
{
    cge_opcheck_options o = {.op = op, .domain = "octest"};
    cge_opcheck_report *r = NULL;
    if (cge_op_check(&o, &r) != CGE_OK)
        fail_msg("%s", cge_last_error());
    return r;
}

static void test_each_kind(void **state)
{
    (void)state;
    static const struct {
        const char *op;
        cge_opcheck_kind kind;
    } want[] = {
        {"Nondet", CGE_OPCHECK_NONDETERMINISTIC}, {"Lazy", CGE_OPCHECK_UNWRITTEN},
        {"Lazy", CGE_OPCHECK_CONVERTER},          {"Reshaper", CGE_OPCHECK_OUTPUT_DESC},
        {"Wide", CGE_OPCHECK_NO_KERNEL},          {"Picky", CGE_OPCHECK_KERNEL_FAILED},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        cge_opcheck_report *r = check_one(want[i].op);
        if (count_kind(r, want[i].kind, want[i].op) < 1) {
            dump(r);
            fail_msg("%s: no %s finding", want[i].op, cge_opcheck_kind_name(want[i].kind));
        }
        cge_opcheck_report_destroy(r);
    }
    /* The findings name what went wrong. */
    cge_opcheck_report *r = check_one("Wide");
    bool seen = false;
    for (int32_t i = 0; i < cge_opcheck_num_findings(r); i++)
        seen |= strstr(cge_opcheck_finding_at(r, i)->message, "float64") != NULL;
    assert_true(seen);
    cge_opcheck_report_destroy(r);
    r = check_one("Lazy");
    seen = false;
    for (int32_t i = 0; i < cge_opcheck_num_findings(r); i++)
        seen |= strstr(cge_opcheck_finding_at(r, i)->message, "'Missing'") != NULL;
    assert_true(seen);
    cge_opcheck_report_destroy(r);
}

/* Every builtin operator, each with an input case meta accepts, and no
 * disagreement between any op's meta and its kernel. (Known disagreements
 * would be listed here with the reason until fixed: none now.) */
static void test_builtins(void **state)
{
    (void)state;
    static const char *const known[] = {NULL};
    cge_opcheck_options o = {.origin = "builtin"};
    cge_opcheck_report *r = NULL;
    if (cge_op_check(&o, &r) != CGE_OK)
        fail_msg("%s", cge_last_error());
    assert_true(cge_opcheck_num_ops(r) >= 150);
    int32_t runs = 0;
    for (int32_t i = 0; i < cge_opcheck_num_ops(r); i++) {
        const cge_opcheck_op_result *res = cge_opcheck_op(r, i);
        assert_string_equal(res->origin, "builtin");
        /* Control flow runs bodies (graph attributes), which opcheck cannot
         * make up: tests/ops/test_control_flow.c and the conformance cases
         * check those. Any other skip is a failure. */
        bool body_op = !strcmp(res->op, "If") || !strcmp(res->op, "Loop") ||
                       !strcmp(res->op, "Scan") || !strcmp(res->op, "SequenceMap");
        if (res->skipped && body_op && strstr(res->skipped, "subgraph"))
            continue;
        /* Sequence and optional values are host objects its tensor cases
         * cannot be: python/tests/test_sequences.py and the conformance
         * cases check those ops. */
        bool seq_op = !strncmp(res->op, "Sequence", 8) || !strncmp(res->op, "Optional", 8) ||
                      !strcmp(res->op, "SplitToSequence") ||
                      !strcmp(res->op, "ConcatFromSequence");
        if (res->skipped && seq_op && strstr(res->skipped, "sequences or optionals"))
            continue;
        /* String tensors: its cases are numbers (tests/session/test_strings.c). */
        if (res->skipped && !strcmp(res->op, "StringNormalizer") &&
            strstr(res->skipped, "string tensors only"))
            continue;
        if (res->skipped)
            fail_msg("builtin %s skipped: %s", res->op, res->skipped);
        if (res->cases_accepted < 1)
            fail_msg("builtin %s: no accepted case", res->op);
        runs += res->kernel_runs;
    }
    assert_true(runs > 3 * cge_opcheck_num_ops(r));
    for (int32_t i = 0; i < cge_opcheck_num_findings(r); i++) {
        const cge_opcheck_finding *f = cge_opcheck_finding_at(r, i);
        bool expected = false;
        for (size_t k = 0; known[k]; k++)
            expected |= !strcmp(f->op, known[k]);
        if (!expected) {
            dump(r);
            fail_msg("unexpected finding: %s", f->message);
        }
    }
    cge_opcheck_report_destroy(r);
}

static void test_options_and_errors(void **state)
{
    (void)state;
    cge_opcheck_report *r = NULL;
    cge_opcheck_options o = {.op = "Add", .origin = "builtin"};
    assert_int_equal(cge_op_check(&o, &r), CGE_OK);
    assert_int_equal(cge_opcheck_num_ops(r), 1);
    int32_t accepted = cge_opcheck_op(r, 0)->cases_accepted;
    cge_opcheck_report_destroy(r);

    /* An op whose only valid shape the generator cannot guess is skipped,
     * saying why; a user case for it gets it checked. */
    o = (cge_opcheck_options){.op = "Tiled", .domain = "octest"};
    assert_int_equal(cge_op_check(&o, &r), CGE_OK);
    assert_int_equal(cge_opcheck_num_skipped(r), 1);
    assert_non_null(strstr(cge_opcheck_op(r, 0)->skipped, "only [3,7]"));
    cge_opcheck_report_destroy(r);
    const char *cases[] = {"Tiled@octest: f32[3,7]", "Add: f32[3,7]; f32[3,7]"};
    o.cases = cases;
    o.num_cases = 2;
    assert_int_equal(cge_op_check(&o, &r), CGE_OK);
    assert_int_equal(cge_opcheck_num_skipped(r), 0);
    assert_int_equal(cge_opcheck_op(r, 0)->cases_accepted, 1);
    assert_true(cge_opcheck_op(r, 0)->cases_refused >= 4);
    assert_int_equal(cge_opcheck_num_findings(r), 0);
    cge_opcheck_report_destroy(r);
    (void)accepted;

    const char *bad_case[] = {"Add: f99[4]; f32[4]"};
    o = (cge_opcheck_options){.op = "Add", .origin = "builtin"};
    o.cases = bad_case;
    o.num_cases = 1;
    assert_int_not_equal(cge_op_check(&o, &r), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "unknown dtype"));
    assert_null(r);

    o = (cge_opcheck_options){.op = "NoSuchOp"};
    assert_int_equal(cge_op_check(&o, &r), CGE_ERR_NOT_FOUND);
    assert_non_null(strstr(cge_last_error(), "no operator matches name NoSuchOp"));
    const char *libs[] = {"/nonexistent/libx.so"};
    o = (cge_opcheck_options){.libraries = libs, .num_libraries = 1};
    assert_int_not_equal(cge_op_check(&o, &r), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "[io]"));
    assert_int_equal(cge_op_check(NULL, NULL), CGE_ERR_INVALID_ARG);
    assert_string_equal(cge_opcheck_kind_name(CGE_OPCHECK_OUT_OF_BOUNDS), "out-of-bounds");
    assert_int_equal(cge_opcheck_num_findings(NULL), 0);
    cge_opcheck_report_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_library_passes),
        cmocka_unit_test(test_broken_variant_caught),
        cmocka_unit_test(test_each_kind),
        cmocka_unit_test(test_builtins),
        cmocka_unit_test(test_options_and_errors),
    };
    return cmocka_run_group_tests(tests, register_bad, NULL);
}
