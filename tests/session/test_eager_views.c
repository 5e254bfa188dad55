/* In a graph that runs node by node (a shape follows values: NonZero), a
 * view (Reshape, Flatten, Squeeze, Unsqueeze, Identity) launches nothing:
 * its output is its input's bytes, as in a plan. Checked with a probe
 * operator that records the addresses it reads and writes: the node after
 * a chain of views reads the very buffer the node before it wrote; that
 * buffer stays the views' while a node between them takes a buffer of the
 * same size (the shared buffer lives until the views' last reader); the
 * results are the reference's over several runs and value-dependent sizes,
 * and a view that is a graph output keeps a buffer of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/cge.h"
#include "probe_op.h"

enum { R = 4, C = 6, N = R * C };

static int setup(void **state)
{
    (void)state;
    return probe_register() == CGE_OK ? 0 : -1;
}

static void add(cge_graph *g, const char *op, const char *domain, const char **ins, int32_t ni,
                const char *out)
{
    const char *outs[] = {out};
    assert_int_equal(cge_graph_add_node(g, op, domain, NULL, ins, ni, outs, 1, NULL), CGE_OK);
}

/* p = probe(x) [R, C]; f = Flatten(p) [1, N]; s = Reshape(f, [N]);
 * t = Neg(x) (a buffer of p's size, taken while the views live);
 * q = probe(s); y = q + Reshape(t, [N]); nz = NonZero(x); v = Unsqueeze(p, 0)
 * ([1, R, C]) is a graph output too. */
static cge_graph *build(void)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("eager_views", &g), CGE_OK);
    cge_shape xs = CGE_SHAPE(R, C), one = CGE_SHAPE(1);
    static const int64_t flat = N, axis0 = 0;
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "n", CGE_I64, &one, &flat, sizeof flat), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "ax", CGE_I64, &one, &axis0, sizeof axis0), CGE_OK);
    const char *x[] = {"x"}, *p[] = {"p"}, *fs[] = {"f", "n"}, *s[] = {"s"}, *tn[] = {"t", "n"},
               *qy[] = {"q", "tf"}, *pv[] = {"p", "ax"};
    add(g, "Probe", "session_probe", x, 1, "p");
    add(g, "Flatten", "", p, 1, "f");
    add(g, "Reshape", "", fs, 2, "s");
    add(g, "Neg", "", x, 1, "t");
    add(g, "Probe", "session_probe", s, 1, "q");
    add(g, "Reshape", "", tn, 2, "tf");
    add(g, "Add", "", qy, 2, "y");
    add(g, "NonZero", "", x, 1, "nz");
    add(g, "Unsqueeze", "", pv, 2, "v");
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "nz"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "v"), CGE_OK);
    return g;
}

static void run(cge_session *s, const float *x)
{
    float y[N], v[N];
    int64_t nz[2 * N];
    cge_tensor in = {.dtype = CGE_F32, .shape = CGE_SHAPE(R, C), .data = (void *)x,
                     .bytes = sizeof(float) * N};
    cge_tensor out[3] = {{.data = y, .bytes = sizeof y}, {.data = nz, .bytes = sizeof nz},
                         {.data = v, .bytes = sizeof v}};
    probe_reset();
    if (cge_session_run_graph(s, 1, &in, 1, out, 3))
        fail_msg("%s", cge_last_error());
    assert_int_equal(atomic_load(&probe_calls), 2);
    /* the second probe reads the buffer the first wrote: the views copied nothing */
    assert_ptr_equal(probe_in[1], probe_out[0]);
    int64_t count = 0;
    for (int i = 0; i < N; i++) {
        assert_true(y[i] == (x[i] - 1.0f - 1.0f) - x[i]);
        assert_true(v[i] == x[i] - 1.0f);
        count += x[i] != 0.0f;
    }
    assert_int_equal(out[1].shape.dims[1], count);
    /* a view that is a graph output has bytes of its own */
    assert_ptr_not_equal(v, probe_out[0]);
}

static void test_views_share_their_input(void **state)
{
    (void)state;
    cge_graph *g = build();
    cge_session *s = probe_session(g);
    assert_non_null(s);
    float x1[N], x2[N];
    for (int i = 0; i < N; i++) {
        x1[i] = (float)(i % 5) - 1.0f;
        x2[i] = (float)(i % 3);
    }
    run(s, x1);
    run(s, x2); /* another count of positions */
    run(s, x1);
    cge_session_destroy(s);
    cge_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_views_share_their_input),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
