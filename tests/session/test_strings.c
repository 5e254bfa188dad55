/* String tensors through the C API: Cast to and from strings in every run
 * mode and over repeated runs (each run's strings, not the last one's),
 * StringNormalizer with its value-dependent output length, string constants
 * (copied in, moved by Gather/Concat/Slice/Reshape/Identity, merged by
 * content), and the errors: arithmetic on strings, text that is not a
 * number, malformed elements, unknown locales. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"

static void ok(cge_status st)
{
    if (st != CGE_OK)
        fail_msg("%s", cge_last_error());
}

static cge_string str(const char *s) { return (cge_string){.data = s, .size = (int64_t)strlen(s)}; }

static void assert_str(cge_string got, const char *want)
{
    if (got.size != (int64_t)strlen(want) || (got.size && memcmp(got.data, want, strlen(want))))
        fail_msg("got \"%.*s\", expected \"%s\"", (int)got.size, got.data ? got.data : "", want);
}

static void node(cge_graph *g, const char *op, const char *name, const char *const *ins, int ni,
                 const char *const *outs, int no, cge_node **out)
{
    ok(cge_graph_add_node(g, op, NULL, name, ins, ni, outs, no, out));
}

/* x float [n] -> Cast(to string) -> s -> Cast(to float) -> y */
static cge_graph *cast_graph(int64_t n)
{
    cge_graph *g = NULL;
    ok(cge_graph_create("cast_strings", &g));
    ok(cge_graph_add_input(g, "x", CGE_F32, &CGE_SHAPE(n)));
    cge_node *a = NULL, *b = NULL;
    node(g, "Cast", "to_str", (const char *[]){"x"}, 1, (const char *[]){"s"}, 1, &a);
    ok(cge_node_set_int(a, "to", CGE_STRING));
    node(g, "Cast", "to_f32", (const char *[]){"s"}, 1, (const char *[]){"y"}, 1, &b);
    ok(cge_node_set_int(b, "to", CGE_F32));
    ok(cge_graph_add_output(g, "s"));
    ok(cge_graph_add_output(g, "y"));
    return g;
}

static void test_cast_every_mode(void **state)
{
    (void)state;
    const cge_run_mode modes[] = {CGE_RUN_EAGER, CGE_RUN_PLAN, CGE_RUN_REPLAY, CGE_RUN_DEFAULT};
    const float vals[2][5] = {{0.5f, 100.0f, -INFINITY, 0.039187793f, 1e-5f},
                              {-2.5f, 1e16f, NAN, 16777216.0f, 0.0f}};
    const char *texts[2][5] = {{"0.5", "100.0", "-inf", "0.039187793", "1e-05"},
                               {"-2.5", "1e+16", "nan", "16777216.0", "0.0"}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        cge_graph *g = cast_graph(5);
        cge_session *s = NULL;
        ok(cge_session_create(NULL, &s));
        ok(cge_session_add_graph(s, 1, g));
        cge_graph_destroy(g);
        /* Runs alternate between two inputs: each run's strings are its own
         * (the node's string store is reset and reused, never stale). */
        for (int run = 0; run < 6; run++) {
            int k = run % 2;
            cge_tensor in = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(5),
                             .data = (void *)vals[k], .bytes = sizeof vals[k]};
            cge_string sv[5];
            float y[5];
            cge_tensor out[2] = {{.name = "s", .data = sv, .bytes = sizeof sv},
                                 {.name = "y", .data = y, .bytes = sizeof y}};
            cge_run_options o = {.mode = modes[m]};
            ok(cge_session_run(s, 1, &in, 1, out, 2, &o));
            assert_int_equal(out[0].dtype, CGE_STRING);
            for (int i = 0; i < 5; i++) {
                assert_str(sv[i], texts[k][i]);
                if (isnan(vals[k][i]))
                    assert_true(isnan(y[i]));
                else
                    assert_true(y[i] == vals[k][i]);
            }
        }
        cge_session_destroy(s);
    }
}

/* Integers and bools both ways; text with spaces and signs; numpy's spellings. */
static void test_cast_ints_and_bools(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    ok(cge_graph_create("ints", &g));
    ok(cge_graph_add_input(g, "t", CGE_STRING, &CGE_SHAPE(4)));
    cge_node *a = NULL, *b = NULL, *c = NULL;
    node(g, "Cast", "to_i8", (const char *[]){"t"}, 1, (const char *[]){"i"}, 1, &a);
    ok(cge_node_set_int(a, "to", CGE_I8));
    node(g, "Cast", "back", (const char *[]){"i"}, 1, (const char *[]){"u"}, 1, &b);
    ok(cge_node_set_int(b, "to", CGE_STRING));
    node(g, "Cast", "to_bool", (const char *[]){"i"}, 1, (const char *[]){"bb"}, 1, &c);
    ok(cge_node_set_int(c, "to", CGE_BOOL));
    cge_node *d = NULL;
    node(g, "Cast", "bool_str", (const char *[]){"bb"}, 1, (const char *[]){"bs"}, 1, &d);
    ok(cge_node_set_int(d, "to", CGE_STRING));
    ok(cge_graph_add_output(g, "i"));
    ok(cge_graph_add_output(g, "u"));
    ok(cge_graph_add_output(g, "bs"));
    cge_session *s = NULL;
    ok(cge_session_create(NULL, &s));
    ok(cge_session_add_graph(s, 1, g));
    cge_string in_v[4] = {str(" 12"), str("-128"), str("+7 "), str("0")};
    cge_tensor in = {.name = "t", .dtype = CGE_STRING, .shape = CGE_SHAPE(4), .data = in_v,
                     .bytes = sizeof in_v};
    int8_t iv[4];
    cge_string uv[4], bv[4];
    cge_tensor out[3] = {{.name = "i", .data = iv, .bytes = sizeof iv},
                         {.name = "u", .data = uv, .bytes = sizeof uv},
                         {.name = "bs", .data = bv, .bytes = sizeof bv}};
    ok(cge_session_run_graph(s, 1, &in, 1, out, 3));
    assert_int_equal(iv[0], 12);
    assert_int_equal(iv[1], -128);
    assert_int_equal(iv[2], 7);
    assert_str(uv[1], "-128");
    assert_str(uv[2], "7");
    assert_str(bv[0], "True");
    assert_str(bv[3], "False");
    /* 300 does not fit int8, "1.5" is not an integer: [kernel] errors
     * naming the element, and the outputs are left alone. */
    in_v[1] = str("300");
    iv[1] = 42;
    assert_int_not_equal(cge_session_run_graph(s, 1, &in, 1, out, 3), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "[kernel]"));
    assert_non_null(strstr(cge_last_error(), "element 1 (\"300\") is not a int8 value"));
    in_v[1] = str("1.5");
    assert_int_not_equal(cge_session_run_graph(s, 1, &in, 1, out, 3), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "\"1.5\""));
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static void test_parse_special_values(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    ok(cge_graph_create("parse", &g));
    ok(cge_graph_add_input(g, "t", CGE_STRING, &CGE_SHAPE(5)));
    cge_node *a = NULL;
    node(g, "Cast", "to_f64", (const char *[]){"t"}, 1, (const char *[]){"f"}, 1, &a);
    ok(cge_node_set_int(a, "to", CGE_F64));
    ok(cge_graph_add_output(g, "f"));
    cge_session *s = NULL;
    ok(cge_session_create(NULL, &s));
    ok(cge_session_add_graph(s, 1, g));
    cge_string in_v[5] = {str("NaN"), str("INF"), str("+INF"), str("-INF"), str("0.47892547")};
    cge_tensor in = {.name = "t", .dtype = CGE_STRING, .shape = CGE_SHAPE(5), .data = in_v,
                     .bytes = sizeof in_v};
    double f[5];
    cge_tensor out = {.name = "f", .data = f, .bytes = sizeof f};
    ok(cge_session_run_graph(s, 1, &in, 1, &out, 1));
    assert_true(isnan(f[0]));
    assert_true(isinf(f[1]) && f[1] > 0 && isinf(f[2]) && f[2] > 0);
    assert_true(isinf(f[3]) && f[3] < 0);
    assert_true(f[4] == 0.47892547);
    /* not a number; an embedded NUL is not read past */
    in_v[2] = str("abc");
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1) != CGE_OK, true);
    assert_non_null(strstr(cge_last_error(), "element 2 (\"abc\") is not a float64 value"));
    in_v[2] = (cge_string){.data = "1\0" "5", .size = 3};
    assert_int_equal(cge_session_run_graph(s, 1, &in, 1, &out, 1) != CGE_OK, true);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

static cge_graph *normalizer_graph(int32_t rank, const char *action, int case_sensitive,
                                   const char *locale)
{
    cge_graph *g = NULL;
    ok(cge_graph_create("normalize", &g));
    cge_shape sh = rank == 1 ? CGE_SHAPE(4) : CGE_SHAPE(1, 4);
    ok(cge_graph_add_input(g, "x", CGE_STRING, &sh));
    cge_node *n = NULL;
    node(g, "StringNormalizer", "norm", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1, &n);
    ok(cge_node_set_string(n, "case_change_action", action));
    ok(cge_node_set_int(n, "is_case_sensitive", case_sensitive));
    if (locale)
        ok(cge_node_set_string(n, "locale", locale));
    const char *stops[] = {"monday", "Straße"};
    cge_attr sw = {.name = "stopwords", .kind = CGE_ATTR_STRINGS, .strings = stops, .n = 2};
    ok(cge_attrs_set(cge_node_attrs(n), &sw));
    ok(cge_graph_add_output(g, "y"));
    return g;
}

static int64_t run_normalizer(cge_session *s, int32_t rank, const cge_string *x, cge_string *y,
                              size_t ycap, cge_shape *shape)
{
    cge_tensor in = {.name = "x", .dtype = CGE_STRING,
                     .shape = rank == 1 ? CGE_SHAPE(4) : CGE_SHAPE(1, 4), .data = (void *)x,
                     .bytes = 4 * sizeof(cge_string)};
    cge_tensor out = {.name = "y", .data = y, .bytes = ycap * sizeof(cge_string)};
    ok(cge_session_run_graph(s, 1, &in, 1, &out, 1));
    *shape = out.shape;
    return cge_shape_numel(&out.shape);
}

static void test_normalizer(void **state)
{
    (void)state;
    cge_string y[8];
    cge_shape sh;
    /* case-insensitive stopwords, upper case, [1, C] */
    cge_graph *g = normalizer_graph(2, "UPPER", 0, NULL);
    cge_session *s = NULL;
    ok(cge_session_create(NULL, &s));
    ok(cge_session_add_graph(s, 1, g));
    cge_graph_destroy(g);
    cge_string x1[4] = {str("Monday"), str("tuesday"), str("STRASSE"), str("wednesday é")};
    assert_int_equal(run_normalizer(s, 2, x1, y, 8, &sh), 3);
    assert_int_equal(sh.rank, 2);
    assert_int_equal(sh.dims[0], 1);
    assert_str(y[0], "TUESDAY");
    assert_str(y[1], "STRASSE");
    assert_str(y[2], "WEDNESDAY É");
    /* another length at the next run; "STRAßE" matches "Straße" without case */
    cge_string x2[4] = {str("monday"), str("STRAßE"), str("MONDAY"), str("friday")};
    assert_int_equal(run_normalizer(s, 2, x2, y, 8, &sh), 1);
    assert_str(y[0], "FRIDAY");
    /* all removed: one empty string, [1, 1] */
    cge_string x3[4] = {str("monday"), str("Monday"), str("MONDAY"), str("straße")};
    assert_int_equal(run_normalizer(s, 2, x3, y, 8, &sh), 1);
    assert_int_equal(sh.rank, 2);
    assert_int_equal(sh.dims[1], 1);
    assert_int_equal(y[0].size, 0);
    cge_session_destroy(s);

    /* case-sensitive, lower case, [C]: "Monday" stays; NONE keeps the bytes */
    g = normalizer_graph(1, "LOWER", 1, "en_US");
    ok(cge_session_create(NULL, &s));
    ok(cge_session_add_graph(s, 1, g));
    cge_graph_destroy(g);
    assert_int_equal(run_normalizer(s, 1, x1, y, 8, &sh), 4);
    assert_int_equal(sh.rank, 1);
    assert_str(y[0], "monday");
    assert_str(y[3], "wednesday é");
    assert_int_equal(run_normalizer(s, 1, x3, y, 8, &sh), 3);
    assert_int_equal(sh.rank, 1);
    cge_session_destroy(s);

    /* an unknown locale is refused at meta, naming the node */
    g = normalizer_graph(1, "LOWER", 0, "tr_TR");
    ok(cge_session_create(NULL, &s));
    ok(cge_session_add_graph(s, 1, g));
    assert_int_not_equal(cge_session_compile_graph(s, 1), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "[meta]"));
    assert_non_null(strstr(cge_last_error(), "locale"));
    cge_session_destroy(s);
    cge_graph_destroy(g);
    /* a bad case_change_action too */
    g = normalizer_graph(1, "TITLE", 0, NULL);
    ok(cge_session_create(NULL, &s));
    ok(cge_session_add_graph(s, 1, g));
    assert_int_not_equal(cge_session_compile_graph(s, 1), CGE_OK);
    assert_non_null(strstr(cge_last_error(), "case_change_action"));
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

/* String constants own their bytes (the caller's buffer may go at once);
 * ops that move elements take them; CSE merges two equal constants by
 * content; folding makes new string constants from them. */
static void test_constants_and_moves(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    ok(cge_graph_create("moves", &g));
    char *heap = strdup("abcdef");
    cge_string c1[4] = {{heap, 1}, {heap + 1, 2}, {heap + 3, 3}, {NULL, 0}};
    ok(cge_graph_add_constant(g, "c1", CGE_STRING, &CGE_SHAPE(2, 2), c1, sizeof c1));
    memset(heap, 'x', 6);
    free(heap);
    cge_string c2[2] = {str("b"), str("cd")};
    ok(cge_graph_add_constant(g, "c2", CGE_STRING, &CGE_SHAPE(1, 2), c2, sizeof c2));
    cge_string c3[2] = {str("b"), str("cd")};
    ok(cge_graph_add_constant(g, "c3", CGE_STRING, &CGE_SHAPE(1, 2), c3, sizeof c3));
    int64_t idx[1] = {1}, shp[1] = {-1}, st[1] = {1}, en[1] = {3};
    ok(cge_graph_add_constant(g, "idx", CGE_I64, &CGE_SHAPE(1), idx, sizeof idx));
    ok(cge_graph_add_constant(g, "shp", CGE_I64, &CGE_SHAPE(1), shp, sizeof shp));
    ok(cge_graph_add_constant(g, "st", CGE_I64, &CGE_SHAPE(1), st, sizeof st));
    ok(cge_graph_add_constant(g, "en", CGE_I64, &CGE_SHAPE(1), en, sizeof en));
    ok(cge_graph_add_input(g, "x", CGE_STRING, &CGE_SHAPE(1, 2)));
    cge_node *n = NULL;
    node(g, "Gather", "gather", (const char *[]){"c1", "idx"}, 2, (const char *[]){"row"}, 1, &n);
    node(g, "Concat", "cat", (const char *[]){"row", "c2", "x", "c3"}, 4,
         (const char *[]){"all"}, 1, &n);
    ok(cge_node_set_int(n, "axis", 0));
    node(g, "Reshape", "flat", (const char *[]){"all", "shp"}, 2, (const char *[]){"f"}, 1, &n);
    node(g, "Slice", "mid", (const char *[]){"f", "st", "en"}, 3, (const char *[]){"m"}, 1, &n);
    node(g, "Identity", "id", (const char *[]){"m"}, 1, (const char *[]){"y"}, 1, &n);
    node(g, "Identity", "id2", (const char *[]){"f"}, 1, (const char *[]){"z"}, 1, &n);
    ok(cge_graph_add_output(g, "y"));
    ok(cge_graph_add_output(g, "z"));
    /* CSE: c2 and c3 hold the same strings (at other addresses), so the
     * compiled Concat reads one constant twice. */
    cge_plan *p = NULL;
    ok(cge_compile(g, NULL, 0, NULL, &p));
    const cge_graph *pg = cge_plan_graph(p);
    const cge_node *cat = NULL;
    for (int32_t i = 0; i < cge_graph_num_nodes(pg); i++)
        if (!cge_node_is_removed(cge_graph_node(pg, i)) &&
            !strcmp(cge_node_op_type(cge_graph_node(pg, i)), "Concat"))
            cat = cge_graph_node(pg, i);
    assert_non_null(cat);
    assert_int_equal(cge_node_num_inputs(cat), 4);
    assert_string_equal(cge_node_input(cat, 1), cge_node_input(cat, 3));
    cge_plan_destroy(p);
    const cge_run_mode modes[] = {CGE_RUN_EAGER, CGE_RUN_PLAN, CGE_RUN_REPLAY};
    for (size_t m = 0; m < 3; m++) {
        cge_session *s = NULL;
        ok(cge_session_create(NULL, &s));
        ok(cge_session_add_graph(s, 1, g));
        cge_string xv[2] = {str("in0"), str("in1")};
        cge_tensor in = {.name = "x", .dtype = CGE_STRING, .shape = CGE_SHAPE(1, 2), .data = xv,
                         .bytes = sizeof xv};
        cge_string y[2], z[8];
        cge_tensor out[2] = {{.name = "y", .data = y, .bytes = sizeof y},
                             {.name = "z", .data = z, .bytes = sizeof z}};
        cge_run_options o = {.mode = modes[m]};
        ok(cge_session_run(s, 1, &in, 1, out, 2, &o));
        const char *want[8] = {"def", "", "b", "cd", "in0", "in1", "b", "cd"};
        assert_int_equal(cge_shape_numel(&out[1].shape), 8);
        for (int i = 0; i < 8; i++)
            assert_str(z[i], want[i]);
        assert_str(y[0], "");
        assert_str(y[1], "b");
        cge_session_destroy(s);
    }
    /* A constant string element with NULL data and a size is malformed. */
    cge_string bad[1] = {{NULL, 3}};
    assert_int_equal(cge_graph_add_constant(g, "bad", CGE_STRING, &CGE_SCALAR, bad, sizeof bad),
                     CGE_ERR_INVALID_ARG);
    assert_non_null(strstr(cge_last_error(), "negative size or NULL data"));
    cge_graph_destroy(g);
}

/* Cast of a string constant folds at compile time into a float constant,
 * and a cast to string of a float constant into a string constant that
 * owns its bytes (the kernel's store is gone by then). */
static void test_folding(void **state)
{
    (void)state;
    cge_graph *g = NULL;
    ok(cge_graph_create("fold", &g));
    float c[3] = {1.5f, -0.25f, 3.0f};
    ok(cge_graph_add_constant(g, "c", CGE_F32, &CGE_SHAPE(3), c, sizeof c));
    ok(cge_graph_add_input(g, "x", CGE_STRING, &CGE_SHAPE(3)));
    cge_node *n = NULL;
    node(g, "Cast", "cs", (const char *[]){"c"}, 1, (const char *[]){"cstr"}, 1, &n);
    ok(cge_node_set_int(n, "to", CGE_STRING));
    node(g, "Concat", "cat", (const char *[]){"cstr", "x"}, 2, (const char *[]){"y"}, 1, &n);
    ok(cge_node_set_int(n, "axis", 0));
    ok(cge_graph_add_output(g, "y"));
    cge_plan *p = NULL;
    ok(cge_compile(g, NULL, 0, NULL, &p));
    /* The Cast is gone: its output became a constant. */
    const cge_graph *pg = cge_plan_graph(p);
    bool has_cast = false;
    for (int32_t i = 0; i < cge_graph_num_nodes(pg); i++)
        has_cast |= !strcmp(cge_node_op_type(cge_graph_node(pg, i)), "Cast");
    assert_false(has_cast);
    /* (That a model file refuses such a plan is python/tests/test_strings.py's.) */
    cge_plan_destroy(p);
    cge_session *s = NULL;
    ok(cge_session_create(NULL, &s));
    ok(cge_session_add_graph(s, 1, g));
    cge_string xv[3] = {str("a"), str("b"), str("c")};
    cge_tensor in = {.name = "x", .dtype = CGE_STRING, .shape = CGE_SHAPE(3), .data = xv,
                     .bytes = sizeof xv};
    cge_string y[6];
    cge_tensor out = {.name = "y", .data = y, .bytes = sizeof y};
    ok(cge_session_run_graph(s, 1, &in, 1, &out, 1));
    assert_str(y[0], "1.5");
    assert_str(y[1], "-0.25");
    assert_str(y[2], "3.0");
    assert_str(y[5], "c");
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

/* Ops that compute refuse strings, naming the node; so does Transpose
 * (its tiles move at most 8 bytes an element). */
static void test_refused(void **state)
{
    (void)state;
    const char *ops[] = {"Add", "Transpose", "Relu", "ReduceSum", "Less"};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        cge_graph *g = NULL;
        ok(cge_graph_create("refuse", &g));
        ok(cge_graph_add_input(g, "a", CGE_STRING, &CGE_SHAPE(2, 2)));
        bool binary = !strcmp(ops[k], "Add") || !strcmp(ops[k], "Less");
        node(g, ops[k], "op", (const char *[]){"a", "a"}, binary ? 2 : 1,
             (const char *[]){"y"}, 1, NULL);
        ok(cge_graph_add_output(g, "y"));
        cge_session *s = NULL;
        ok(cge_session_create(NULL, &s));
        ok(cge_session_add_graph(s, 1, g));
        cge_status st = cge_session_compile_graph(s, 1);
        if (st == CGE_OK)
            fail_msg("%s accepted a string input", ops[k]);
        assert_non_null(strstr(cge_last_error(), "string"));
        assert_non_null(strstr(cge_last_error(), "'op'"));
        cge_session_destroy(s);
        cge_graph_destroy(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cast_every_mode),
        cmocka_unit_test(test_cast_ints_and_bools),
        cmocka_unit_test(test_parse_special_values),
        cmocka_unit_test(test_normalizer),
        cmocka_unit_test(test_constants_and_moves),
        cmocka_unit_test(test_folding),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
