/* The operator registry and contract: builtin ops present, lookups, duplicate
 * registration refused naming both libraries, custom libraries loaded (and a
 * wrong API version refused), converters, and the schema / meta / engine /
 * kernel error layers, each naming the node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cge/fused_ops.h"
#include "op_runner.h"

static const char *const builtin_names[] = {
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Exp", "Log", "Sqrt", "Reciprocal",
    "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "Gelu", "Softmax", "LogSoftmax", "MatMul",
    "Gemm", "Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "Squeeze",
    "Unsqueeze", "Flatten", "Expand", "Where", "Equal", "Less", "Greater", "ReduceSum",
    "ReduceMean", "ReduceMax", "Cast", "Identity", "Constant", "Shape",
};

static void test_builtins_registered(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof builtin_names / sizeof builtin_names[0]; i++) {
        const cge_op_def *d = cge_op_find("", builtin_names[i], 0);
        if (!d)
            fail_msg("builtin op %s missing: %s", builtin_names[i], cge_last_error());
        assert_string_equal(cge_op_origin(d), "builtin");
        assert_non_null(d->infer);
        assert_true(d->num_kernels >= 1);
        assert_non_null(cge_op_find_kernel(d, "cpu", CGE_F32));
    }
    assert_true(cge_op_count() >= (int32_t)(sizeof builtin_names / sizeof builtin_names[0]));
}

/* cge's own operators (the compiler's fusions and conversions) are builtins
 * of the ops layer: this test links no compiler, and they are there and run. */
static void test_fused_ops_registered(void **state)
{
    (void)state;
    static const char *const own[][2] = {
        {CGE_DOMAIN_FUSED, "ElementwiseChain"}, {CGE_DOMAIN_FUSED, "FusedMatMul"},
        {CGE_DOMAIN_FUSED, "FusedConv"}, {CGE_DOMAIN_FUSED, "ChannelsLastPool"},
        {CGE_DOMAIN_FUSED, "ChannelsLastConcat"}, {CGE_DOMAIN_FUSED, "ChannelsLastSplit"},
        {CGE_DOMAIN_FUSED, "ChannelsLastAffine"}, {CGE_DOMAIN_FUSED, "ChannelsLastScale"},
        {CGE_DOMAIN_FUSED, "ChannelsLastResize"}, {CGE_DOMAIN_FUSED, "LayoutView"},
        {CGE_DOMAIN_FUSED, "ChannelsLastGroupNorm"},
        {CGE_DOMAIN_CONVERSION, "Copy"}, {CGE_DOMAIN_CONVERSION, "Reorder"},
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        const cge_op_def *d = cge_op_find(own[i][0], own[i][1], 0);
        if (!d)
            fail_msg("%s %s missing: %s", own[i][0], own[i][1], cge_last_error());
        assert_string_equal(cge_op_origin(d), "builtin");
        assert_non_null(cge_op_find_kernel(d, "cpu", CGE_F32));
    }

    /* relu(x * y) + x in ElementwiseChain's bytecode: registers 0, 1 are the
     * inputs, instruction k writes register 2 + k. */
    float x[4] = {1, -2, 3, -4}, y[4] = {2, 2, -1, 0.5f}, want[4] = {3, -2, 3, -4};
    const int64_t prog[] = {CGE_EW_MUL, 2, 0, 1, CGE_EW_RELU, 3, 2, 0, CGE_EW_ADD, 4, 3, 0};
    const int64_t out_reg = 4;
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(4), x), op_tensor(CGE_F32, CGE_SHAPE(4), y)};
    cge_tensor out;
    cge_attr attrs[2] = {CGE_ATTR_INTS("program", prog, 12), CGE_ATTR_INTS("out_regs", &out_reg, 1)};
    assert_int_equal(op_run_domain(CGE_DOMAIN_FUSED, "ElementwiseChain", in, 2, attrs, 2, &out, 1),
                     CGE_OK);
    op_assert_close(&out, CGE_F32, CGE_SHAPE(4), want, 0, 0);
    op_free_outputs(&out, 1);
}

static void test_unknown_op_is_schema_error(void **state)
{
    (void)state;
    assert_null(cge_op_find("custom", "AddCustom", 0));
    assert_string_equal(cge_last_error(),
                        "[schema] no operator 'AddCustom' in domain 'custom' (is its library loaded?)");
    const cge_op_def *add = cge_op_find("", "Add", 0);
    assert_non_null(add);
    assert_null(cge_op_find("", "Add", add->since_version - 1));
    op_assert_error(CGE_ERR_NOT_FOUND, "[schema]", "has no definition for version");
    assert_ptr_equal(cge_op_find("", "Add", add->since_version), add);
}

static cge_status dummy_infer(cge_infer_ctx *ctx)
{
    (void)ctx;
    return CGE_OK;
}

static void test_duplicate_registration_names_both(void **state)
{
    (void)state;
    static const cge_op_def clash[] = {
        {.name = "Add", .domain = "", .since_version = 1, .infer = dummy_infer},
    };
    static const cge_op_library lib = {.api_version = CGE_OP_API_VERSION, .name = "intruder",
                                       .ops = clash, .num_ops = 1};
    int32_t before = cge_op_count();
    cge_status st = cge_op_register_library(&lib);
    op_assert_error(st, "[schema]", "already registered by library 'builtin'");
    assert_non_null(strstr(cge_last_error(), "library 'intruder'"));
    assert_int_equal(cge_op_count(), before);

    /* Within one library too, and all-or-nothing: the good op is not kept. */
    static const cge_op_def twice[] = {
        {.name = "Fresh", .domain = "dup", .since_version = 1, .infer = dummy_infer},
        {.name = "Twice", .domain = "dup", .since_version = 1, .infer = dummy_infer},
        {.name = "Twice", .domain = "dup", .since_version = 3, .infer = dummy_infer},
    };
    static const cge_op_library lib2 = {.api_version = CGE_OP_API_VERSION, .name = "dup_lib",
                                        .ops = twice, .num_ops = 3};
    op_assert_error(cge_op_register_library(&lib2), "[schema]", "'Twice'");
    assert_null(cge_op_find("dup", "Fresh", 0));

    /* Disjoint version ranges of one op are fine. */
    static const cge_op_def ranged[] = {
        {.name = "Ranged", .domain = "dup", .since_version = 1, .end_version = 5, .infer = dummy_infer},
        {.name = "Ranged", .domain = "dup", .since_version = 6, .infer = dummy_infer},
    };
    static const cge_op_library lib3 = {.api_version = CGE_OP_API_VERSION, .name = "ranged_lib",
                                        .ops = ranged, .num_ops = 2};
    assert_int_equal(cge_op_register_library(&lib3), CGE_OK);
    assert_ptr_equal(cge_op_find("dup", "Ranged", 3), &ranged[0]);
    assert_ptr_equal(cge_op_find("dup", "Ranged", 9), &ranged[1]);
    assert_ptr_equal(cge_op_find("dup", "Ranged", 0), &ranged[1]);
}

static void test_invalid_definitions_refused(void **state)
{
    (void)state;
    static const cge_op_def no_infer[] = {{.name = "NoInfer", .domain = "bad", .since_version = 1}};
    static const cge_op_library lib = {.api_version = CGE_OP_API_VERSION, .name = "bad_lib",
                                       .ops = no_infer, .num_ops = 1};
    op_assert_error(cge_op_register_library(&lib), "[schema]", "no meta");
    static const cge_op_library wrong = {.api_version = 7, .name = "old_lib"};
    op_assert_error(cge_op_register_library(&wrong), "[schema]", "operator API version 7");
    op_assert_error(cge_op_register_library(NULL), "[schema]", "NULL");
}

static void test_load_library(void **state)
{
    (void)state;
    assert_int_equal(cge_load_op_library(TEST_OPLIB_PATH), CGE_OK);
    const cge_op_def *d = cge_op_find("test", "TestScale", 0);
    assert_non_null(d);
    assert_string_equal(cge_op_origin(d), "test_oplib");

    float x[4] = {1, 2, 3, -4}, want[4] = {2.5f, 5, 7.5f, -10};
    cge_tensor in = op_tensor(CGE_F32, CGE_SHAPE(4), x), out;
    cge_attr scale = CGE_ATTR_F("scale", 2.5f);
    assert_int_equal(op_run_domain("test", "TestScale", &in, 1, &scale, 1, &out, 1), CGE_OK);
    op_assert_close(&out, CGE_F32, CGE_SHAPE(4), want, 0, 0);
    op_free_outputs(&out, 1);

    /* Loading it twice: both registrations named. */
    cge_status st = cge_load_op_library(TEST_OPLIB_PATH);
    op_assert_error(st, "[schema]", "already registered by library 'test_oplib'");
}

static void test_load_library_errors(void **state)
{
    (void)state;
    op_assert_error(cge_load_op_library(TEST_OPLIB_BADVERSION_PATH), "[schema]",
                    "built for operator API version 99");
    op_assert_error(cge_load_op_library("/nonexistent/libnothing.so"), "[io]",
                    "cannot load operator library '/nonexistent/libnothing.so'");
    /* A file that is not a shared object at all. */
    char path[] = "/tmp/cge_not_a_library_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "garbage\n", 8), 8);
    close(fd);
    op_assert_error(cge_load_op_library(path), "[io]", path);
    unlink(path);
    op_assert_error(cge_load_op_library("libc.so.6"), "[schema]", "no 'cge_op_library_entry'");
    op_assert_error(cge_load_op_library(NULL), "[schema]", "no path");
}

static void test_engine_and_kernel_errors(void **state)
{
    (void)state;
    if (!cge_op_find("test", "TestScale", 0))
        assert_int_equal(cge_load_op_library(TEST_OPLIB_PATH), CGE_OK);
    double x[2] = {1, 2};
    cge_tensor in = op_tensor(CGE_F64, CGE_SHAPE(2), x), out;
    op_assert_error(op_run_domain("test", "TestScale", &in, 1, NULL, 0, &out, 1), "[engine]",
                    "'TestScale' with dtype float64");
    float xf[2] = {1, 2};
    cge_tensor inf = op_tensor(CGE_F32, CGE_SHAPE(2), xf);
    op_assert_error(op_run_domain("test", "TestFail", &inf, 1, NULL, 0, &out, 1), "[kernel]",
                    "TestFail 'node0': this kernel refuses every input");
}

static void test_meta_error_names_node(void **state)
{
    (void)state;
    float a[6] = {0}, b[4] = {0};
    cge_tensor in[2] = {op_tensor(CGE_F32, CGE_SHAPE(2, 3), a), op_tensor(CGE_F32, CGE_SHAPE(4), b)};
    cge_tensor out;
    op_assert_error(op_run("Add", in, 2, NULL, 0, &out, 1), "[meta]", "Add 'node0'");
    /* Generic dtype-set check before the op's own meta. */
    uint8_t flags[2] = {1, 0};
    cge_tensor bad = op_tensor(CGE_BOOL, CGE_SHAPE(2), flags);
    op_assert_error(op_run("Exp", &bad, 1, NULL, 0, &out, 1), "[meta]", "is bool");
}

static void test_converters(void **state)
{
    (void)state;
    const cge_converter_def *c = cge_converter_find("onnx", "", "Add", 14);
    assert_non_null(c);
    assert_string_equal(c->target_op, "Add");
    assert_null(cge_converter_find("onnx", "", "Foo", 13));
    op_assert_error(CGE_ERR_UNSUPPORTED, "[converter]", "op 'Foo'");
    assert_non_null(strstr(cge_last_error(), "opset 13"));

    /* The 1:1 mapping copies inputs, outputs and attributes. */
    cge_graph *src = NULL, *dst = NULL;
    cge_node *n = NULL;
    const char *ins[] = {"x"}, *outs[] = {"y"};
    assert_int_equal(cge_graph_create("src", &src), CGE_OK);
    assert_int_equal(cge_graph_create("dst", &dst), CGE_OK);
    assert_int_equal(cge_graph_add_node(src, "Softmax", "", "sm", ins, 1, outs, 1, &n), CGE_OK);
    assert_int_equal(cge_node_set_int(n, "axis", 0), CGE_OK);
    c = cge_converter_find("onnx", "", "Softmax", 13);
    assert_non_null(c);
    assert_int_equal(cge_converter_apply(c, n, 13, dst), CGE_OK);
    cge_node *m = cge_graph_find_node(dst, "sm");
    assert_non_null(m);
    assert_string_equal(cge_node_op_type(m), "Softmax");
    assert_string_equal(cge_node_input(m, 0), "x");
    assert_string_equal(cge_node_output(m, 0), "y");
    assert_int_equal(cge_attrs_get_int(cge_node_attrs_const(m), "axis", -1), 0);
    cge_graph_destroy(src);
    cge_graph_destroy(dst);
}

static void test_graph_verify_schema(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    cge_shape s = CGE_SHAPE(2);
    const char *one[] = {"x"}, *two[] = {"x", "x"}, *outs[] = {"y"};
    assert_int_equal(cge_graph_create("g", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "lonely_add", one, 1, outs, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    op_assert_error(cge_graph_verify(g), "[schema]", "Add 'lonely_add': 1 inputs given");
    cge_graph_destroy(g);

    cge_node *n = NULL;
    assert_int_equal(cge_graph_create("g", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "typo", two, 2, outs, 1, &n), CGE_OK);
    assert_int_equal(cge_node_set_int(n, "axsi", 1), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    op_assert_error(cge_graph_verify(g), "[schema]", "unknown attribute 'axsi'");
    cge_graph_destroy(g);

    assert_int_equal(cge_graph_create("g", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Cast", "", "cast_no_to", one, 1, outs, 1, &n), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    op_assert_error(cge_graph_verify(g), "[schema]", "required attribute 'to'");
    cge_graph_destroy(g);

    assert_int_equal(cge_graph_create("g", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &s), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Frobnicate", "acme", "f1", one, 1, outs, 1, &n), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    op_assert_error(cge_graph_verify(g), "[schema]", "node 'f1': no operator 'Frobnicate' in domain 'acme'");
    cge_graph_destroy(g);
}

static void test_graph_infer(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    cge_shape sx = CGE_SHAPE(CGE_DIM_DYNAMIC, 3), sy = CGE_SHAPE(3), sbad = CGE_SHAPE(4);
    const char *a_in[] = {"x", "y"}, *a_out[] = {"s"}, *b_in[] = {"s", "w"}, *b_out[] = {"t"};
    assert_int_equal(cge_graph_create("g", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &sx), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "y", CGE_F32, &sy), CGE_OK);
    float w[4] = {0};
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &sbad, w, sizeof w), CGE_OK);
    /* Added out of order on purpose: infer walks the topological order. */
    assert_int_equal(cge_graph_add_node(g, "Mul", "", "mul_bad", b_in, 2, b_out, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "Add", "", "add_ok", a_in, 2, a_out, 1, NULL), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "t"), CGE_OK);
    op_assert_error(cge_graph_infer(g), "[meta]", "Mul 'mul_bad'");
    cge_tensor_desc d;
    assert_int_equal(cge_graph_get_desc(g, "s", &d), CGE_OK);
    assert_int_equal(d.dtype, CGE_F32);
    cge_shape want = CGE_SHAPE(CGE_DIM_DYNAMIC, 3);
    assert_true(cge_shape_equal(&d.shape, &want));
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins_registered),
        cmocka_unit_test(test_fused_ops_registered),
        cmocka_unit_test(test_unknown_op_is_schema_error),
        cmocka_unit_test(test_duplicate_registration_names_both),
        cmocka_unit_test(test_invalid_definitions_refused),
        cmocka_unit_test(test_load_library),
        cmocka_unit_test(test_load_library_errors),
        cmocka_unit_test(test_engine_and_kernel_errors),
        cmocka_unit_test(test_meta_error_names_node),
        cmocka_unit_test(test_converters),
        cmocka_unit_test(test_graph_verify_schema),
        cmocka_unit_test(test_graph_infer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
