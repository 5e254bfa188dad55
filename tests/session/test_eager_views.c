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

enum { R = 4, C = 6, N = R * C };

static const void *probe_in[8];
static void *probe_out[8];
static int probes;

typedef struct probe_args {
    const float *x;
    float *y;
    int64_t n;
    int k;
} probe_args;

static void probe_block(int64_t b, int64_t nb, void *p)
{
    (void)b;
    (void)nb;
    const probe_args *a = p;
    for (int64_t i = 0; i < a->n; i++)
        a->y[i] = a->x[i] * 2.0f;
}

static cge_status probe_launch(const cge_kernel_ctx *ctx, cge_stream *s)
{
    probe_args a = {ctx->inputs[0].data, ctx->outputs[0].data,
                    cge_shape_numel(&ctx->inputs[0].shape), probes};
    if (probes < 8) {
        probe_in[probes] = a.x;
        probe_out[probes] = a.y;
    }
    probes++;
    return cge_launch(s, probe_block, 1, &a, sizeof a);
}

static cge_status same_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static const cge_arg_def io_in[] = {{"X", 0, CGE_DT(CGE_F32), "input"}};
static const cge_arg_def io_out[] = {{"Y", 0, CGE_DT(CGE_F32), "2 X"}};
static const cge_kernel_def probe_kernels[] = {
    {.engine = "cpu", .dtypes = CGE_DT(CGE_F32), .launch = probe_launch, .inplace_input = -1},
};
static const cge_op_def probe_ops[] = {
    {.name = "AddressProbe", .domain = "eager_views", .since_version = 1, .inputs = io_in,
     .num_inputs = 1, .outputs = io_out, .num_outputs = 1, .infer = same_infer,
     .kernels = probe_kernels, .num_kernels = 1, .doc = "2 X, noting its buffers"},
};
static const cge_op_library probe_lib = {.api_version = CGE_OP_API_VERSION,
                                         .name = "eager_views_probe", .ops = probe_ops,
                                         .num_ops = 1};

static int setup(void **state)
{
    (void)state;
    return cge_op_register_library(&probe_lib) == CGE_OK ? 0 : -1;
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
    add(g, "AddressProbe", "eager_views", x, 1, "p");
    add(g, "Flatten", "", p, 1, "f");
    add(g, "Reshape", "", fs, 2, "s");
    add(g, "Neg", "", x, 1, "t");
    add(g, "AddressProbe", "eager_views", s, 1, "q");
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
    probes = 0;
    if (cge_session_run_graph(s, 1, &in, 1, out, 3))
        fail_msg("%s", cge_last_error());
    assert_int_equal(probes, 2);
    /* the second probe reads the buffer the first wrote: the views copied nothing */
    assert_ptr_equal(probe_in[1], probe_out[0]);
    int64_t count = 0;
    for (int i = 0; i < N; i++) {
        assert_true(y[i] == 4.0f * x[i] - x[i]);
        assert_true(v[i] == 2.0f * x[i]);
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
    cge_session_options so = {.num_threads = 2};
    cge_session *s = NULL;
    assert_int_equal(cge_session_create(&so, &s), CGE_OK);
    assert_int_equal(cge_session_add_graph(s, 1, g), CGE_OK);
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
