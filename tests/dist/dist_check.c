/* The cge.dist collectives under mpirun: every operator against a reference
 * each rank computes for all ranks (inputs are a formula of rank and index),
 * several dtypes and sizes (empty, odd, off axis 0), plan and replay runs,
 * point to point in a chain, and a rank that leaves early. Run as
 *   mpirun -np N dist_check collectives | early-exit
 * Exit 0 on success; each failure is printed with its rank. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cge/cge.h"
#include "cge/dist.h"
#include "cge/onnx.h"

static int rank, world, failures;

#define FAIL(...)                                                        \
    do {                                                                 \
        fprintf(stderr, "[rank %d] FAIL: ", rank);                       \
        fprintf(stderr, __VA_ARGS__);                                    \
        fprintf(stderr, "\n");                                           \
        failures++;                                                      \
    } while (0)

/* Small integers 1..3: exact in every dtype (float16 and bfloat16 too), and
 * products of 3 ranks fit u8. */
static double val(int r, int64_t i) { return (double)(1 + (r + i) % 3); }

static void put(cge_dtype t, void *p, int64_t i, double v)
{
    switch (t) {
    case CGE_F32: ((float *)p)[i] = (float)v; break;
    case CGE_F64: ((double *)p)[i] = v; break;
    case CGE_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case CGE_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case CGE_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case CGE_F16: ((uint16_t *)p)[i] = cge_f32_to_f16((float)v); break;
    case CGE_BF16: ((uint16_t *)p)[i] = cge_f32_to_bf16((float)v); break;
    default: memset((char *)p + i * (int64_t)cge_dtype_size(t), 0, cge_dtype_size(t));
    }
}

static double get(cge_dtype t, const void *p, int64_t i)
{
    switch (t) {
    case CGE_F32: return ((const float *)p)[i];
    case CGE_F64: return ((const double *)p)[i];
    case CGE_I32: return ((const int32_t *)p)[i];
    case CGE_I64: return (double)((const int64_t *)p)[i];
    case CGE_U8: return ((const uint8_t *)p)[i];
    case CGE_F16: return cge_f16_to_f32(((const uint16_t *)p)[i]);
    case CGE_BF16: return cge_bf16_to_f32(((const uint16_t *)p)[i]);
    default: abort();
    }
}

static double reduce(const char *red, double a, double b)
{
    if (!red) return a + b;
    if (!strcmp(red, "max")) return a > b ? a : b;
    if (!strcmp(red, "min")) return a < b ? a : b;
    if (!strcmp(red, "prod")) return a * b;
    return a + b;
}

static double reduced(const char *red, int64_t i)
{
    double acc = val(0, i);
    for (int r = 1; r < world; r++)
        acc = reduce(red, acc, val(r, i));
    return acc;
}

static cge_session *open_session(int timeout_ms)
{
    cge_session_options o = {.dist = CGE_DIST_FROM_ENV, .dist_timeout_ms = timeout_ms,
                             .num_threads = 1, .dist_world_size = world, .dist_rank = rank};
    cge_session *s = NULL;
    if (cge_session_create(&o, &s)) {
        fprintf(stderr, "[rank %d] session: %s\n", rank, cge_last_error());
        exit(2);
    }
    return s;
}

/* One node `op` over input shape `in`; returns the status of compile+run and
 * leaves the output in *out (malloc'd). */
static cge_status run_one(cge_session *s, uint32_t id, const char *op, const char *red, int64_t axis,
                          int64_t root, cge_dtype t, cge_shape in, cge_run_mode mode,
                          void **out, cge_shape *out_shape, int repeats)
{
    cge_graph *g = NULL;
    cge_graph_create("dist", &g);
    cge_graph_add_input(g, "x", t, &in);
    const char *ins[] = {"x"}, *outs[] = {"y"};
    cge_node *n = NULL;
    cge_graph_add_node(g, op, CGE_DOMAIN_DIST, "coll0", ins, 1, outs, 1, &n);
    cge_graph_add_output(g, "y");
    if (red)
        cge_node_set_string(n, "reduction", red);
    if (strcmp(op, "AllReduce") && strcmp(op, "Broadcast"))
        cge_node_set_int(n, "axis", axis);
    if (!strcmp(op, "Broadcast"))
        cge_node_set_int(n, "root", root);
    cge_node_set_int(n, "world_size", world);
    cge_status st = cge_session_add_graph(s, id, g);
    cge_graph_destroy(g);
    if (!st)
        st = cge_session_compile_graph(s, id);
    int64_t numel = cge_shape_numel(&in);
    size_t es = cge_dtype_size(t);
    void *x = calloc((size_t)numel + 1, es);
    for (int64_t i = 0; i < numel; i++)
        put(t, x, i, val(rank, i));
    size_t ob = (size_t)(numel * world + 1) * es;
    *out = calloc(1, ob);
    for (int k = 0; !st && k < repeats; k++) {
        cge_tensor ti = {.name = "x", .dtype = t, .shape = in, .data = x, .bytes = (size_t)numel * es};
        cge_tensor to = {.name = "y", .data = *out, .bytes = ob};
        memset(*out, 0xff, ob);
        cge_run_options ro = {.mode = mode};
        st = cge_session_run(s, id, &ti, 1, &to, 1, &ro);
        *out_shape = to.shape;
    }
    if (!st && mode == CGE_RUN_REPLAY) {
        cge_run_mode used;
        cge_session_last_run_mode(s, id, &used);
        if (used != CGE_RUN_REPLAY)
            FAIL("%s ran as %s, not replay", op, cge_run_mode_name(used));
    }
    cge_session_remove_graph(s, id);
    free(x);
    return st;
}

static void check_case(cge_session *s, uint32_t id, const char *op, const char *red, int64_t axis,
                       int64_t root, cge_dtype t, cge_shape in, cge_run_mode mode)
{
    void *y = NULL;
    cge_shape ys;
    cge_status st = run_one(s, id, op, red, axis, root, t, in, mode, &y, &ys, mode == CGE_RUN_REPLAY ? 3 : 1);
    char sh[CGE_SHAPE_STR_MAX];
    cge_shape_str(&in, sh, sizeof sh);
    if (st) {
        FAIL("%s %s %s %s axis %lld: %s", op, red ? red : "", cge_dtype_name(t), sh,
             (long long)axis, cge_last_error());
        free(y);
        return;
    }
    int32_t a = (int32_t)axis;
    int64_t outer = 1, inner = 1;
    for (int32_t d = 0; d < a; d++)
        outer *= in.dims[d];
    for (int32_t d = a; d < in.rank; d++)
        inner *= in.dims[d];
    int64_t n = cge_shape_numel(&ys), bad = 0;
    for (int64_t k = 0; k < n; k++) {
        double want;
        if (!strcmp(op, "AllReduce")) {
            want = reduced(red, k);
        } else if (!strcmp(op, "Broadcast")) {
            want = val((int)root, k);
        } else if (!strcmp(op, "AllGather")) {
            int64_t o = k / (inner * world), p = (k / inner) % world, c = k % inner;
            want = val((int)p, o * inner + c);
        } else if (!strcmp(op, "ReduceScatter")) {
            int64_t chunk = inner / world, o = k / chunk, c = k % chunk;
            want = reduced(red, o * inner + rank * chunk + c);
        } else { /* AllToAll */
            int64_t chunk = inner / world, o = k / inner, p = (k / chunk) % world, c = k % chunk;
            want = val((int)p, o * inner + rank * chunk + c);
        }
        double got = get(t, y, k);
        if (got != want && bad++ < 3)
            FAIL("%s %s %s %s axis %lld (%s): y[%lld] = %g, want %g", op, red ? red : "",
                 cge_dtype_name(t), sh, (long long)axis, cge_run_mode_name(mode), (long long)k,
                 got, want);
    }
    free(y);
}

static int collectives(void)
{
    cge_session *s = open_session(20000);
    const cge_dtype dtypes[] = {CGE_F32, CGE_F64, CGE_I32, CGE_I64, CGE_U8, CGE_F16, CGE_BF16};
    const char *reds[] = {"sum", "max", "min", "prod"};
    int P = world;
    /* AllReduce and Broadcast: any size, empty and odd ones included. */
    const cge_shape any_shapes[] = {CGE_SHAPE(0), CGE_SHAPE(1), CGE_SHAPE(7), CGE_SHAPE(3, 5),
                                    CGE_SHAPE(1000, 33)};
    /* Split ops: axis dims multiples of P; off-axis dims odd. */
    const cge_shape split_shapes[] = {CGE_SHAPE(0, P), CGE_SHAPE(P), CGE_SHAPE(3 * P, 5),
                                      CGE_SHAPE(3, 2 * P, 5)};
    uint32_t id = 1;
    for (size_t d = 0; d < sizeof dtypes / sizeof *dtypes; d++) {
        for (size_t k = 0; k < sizeof any_shapes / sizeof *any_shapes; k++) {
            for (size_t r = 0; r < 4; r++)
                check_case(s, id++, "AllReduce", reds[r], 0, 0, dtypes[d], any_shapes[k], CGE_RUN_PLAN);
            check_case(s, id++, "Broadcast", NULL, 0, P - 1, dtypes[d], any_shapes[k], CGE_RUN_PLAN);
            check_case(s, id++, "AllGather", NULL, 0, 0, dtypes[d], any_shapes[k], CGE_RUN_PLAN);
        }
        for (size_t k = 0; k < sizeof split_shapes / sizeof *split_shapes; k++) {
            int64_t axis = split_shapes[k].rank == 3 ? 1 : 0;
            check_case(s, id++, "ReduceScatter", "sum", axis, 0, dtypes[d], split_shapes[k], CGE_RUN_PLAN);
            check_case(s, id++, "ReduceScatter", "max", axis, 0, dtypes[d], split_shapes[k], CGE_RUN_PLAN);
            check_case(s, id++, "AllToAll", NULL, axis, 0, dtypes[d], split_shapes[k], CGE_RUN_PLAN);
            check_case(s, id++, "AllGather", NULL, axis, 0, dtypes[d], split_shapes[k], CGE_RUN_PLAN);
        }
    }
    /* Captured once, replayed with every run (three runs each). */
    check_case(s, id++, "AllReduce", "sum", 0, 0, CGE_F32, CGE_SHAPE(64, 3), CGE_RUN_REPLAY);
    check_case(s, id++, "AllGather", NULL, 1, 0, CGE_F32, CGE_SHAPE(2, P, 3), CGE_RUN_REPLAY);
    check_case(s, id++, "AllToAll", NULL, 1, 0, CGE_I64, CGE_SHAPE(2, P, 3), CGE_RUN_REPLAY);
    check_case(s, id++, "ReduceScatter", "sum", 0, 0, CGE_F64, CGE_SHAPE(P * 4), CGE_RUN_REPLAY);
    check_case(s, id++, "Broadcast", NULL, 0, 0, CGE_U8, CGE_SHAPE(9), CGE_RUN_EAGER);

    /* A size not divisible by the world: a [meta] error naming it, on every rank alike. */
    if (P > 1) {
        void *y = NULL;
        cge_shape ys;
        cge_status st = run_one(s, id++, "ReduceScatter", "sum", 0, 0, CGE_F32, CGE_SHAPE(P + 1),
                                CGE_RUN_PLAN, &y, &ys, 1);
        if (!st || !strstr(cge_last_error(), "[meta]") || !strstr(cge_last_error(), "not divisible"))
            FAIL("ReduceScatter of %d over %d ranks: want a [meta] error, got %s", P + 1, P,
                 st ? cge_last_error() : "success");
        free(y);
        /* bool sums: refused at meta, not silently wrong. */
        st = run_one(s, id++, "AllReduce", "sum", 0, 0, CGE_BOOL, CGE_SHAPE(4), CGE_RUN_PLAN, &y, &ys, 1);
        free(y);
        if (!st || !strstr(cge_last_error(), "[meta]"))
            FAIL("bool AllReduce: want a [meta] error, got %s", st ? cge_last_error() : "success");
    }

    /* Mismatched graphs: rank 0's AllReduce has 16 elements, the others 8:
     * every rank fails at prepare, naming the node and the other ranks. */
    if (P > 1) {
        void *y = NULL;
        cge_shape ys;
        cge_status st = run_one(s, id++, "AllReduce", "sum", 0, 0, CGE_F32,
                                rank == 0 ? CGE_SHAPE(16) : CGE_SHAPE(8), CGE_RUN_PLAN, &y, &ys, 1);
        free(y);
        const char *m = st ? cge_last_error() : "";
        if (!st || !strstr(m, "[runtime]") || !strstr(m, "mismatched collective") ||
            !strstr(m, "AllReduce 'coll0'") || !strstr(m, rank == 0 ? "rank(s) 1" : "rank(s) 0"))
            FAIL("mismatched AllReduce: want a [runtime] mismatch naming the ranks, got %s",
                 st ? m : "success");
    }

    /* Point to point along a chain 0 -> 1 -> ... -> P-1 (a pipeline's
     * pattern): rank r receives from r-1, adds 1, sends to r+1. */
    {
        cge_graph *g = NULL;
        cge_graph_create("chain", &g);
        cge_shape sh = CGE_SHAPE(5, 3);
        const char *cur = "x";
        cge_graph_add_input(g, "x", CGE_F32, &sh);
        cge_node *n;
        if (rank > 0) {
            const char *ri[] = {"x"}, *ro[] = {"r"};
            cge_graph_add_node(g, "Recv", CGE_DOMAIN_DIST, "recv", ri, 1, ro, 1, &n);
            cge_node_set_int(n, "peer", rank - 1);
            cge_node_set_int(n, "tag", 11);
            cge_node_set_ints(n, "shape", sh.dims, sh.rank);
            float one = 1;
            cge_graph_add_constant(g, "one", CGE_F32, &CGE_SCALAR, &one, sizeof one);
            const char *ai[] = {"r", "one"}, *ao[] = {"a"};
            cge_graph_add_node(g, "Add", NULL, "add", ai, 2, ao, 1, NULL);
            cur = "a";
        }
        const char *si[] = {cur}, *so[] = {"y"};
        if (rank < P - 1) {
            cge_graph_add_node(g, "Send", CGE_DOMAIN_DIST, "send", si, 1, so, 1, &n);
            cge_node_set_int(n, "peer", rank + 1);
            cge_node_set_int(n, "tag", 11);
        } else {
            cge_graph_add_node(g, "Identity", NULL, "id", si, 1, so, 1, NULL);
        }
        cge_graph_add_output(g, "y");
        cge_status st = cge_session_add_graph(s, 999, g);
        cge_graph_destroy(g);
        float x[15], y[15];
        for (int i = 0; i < 15; i++)
            x[i] = (float)i;
        for (int rep = 0; !st && rep < 3; rep++) {
            cge_tensor ti = {.name = "x", .dtype = CGE_F32, .shape = sh, .data = x, .bytes = sizeof x};
            cge_tensor to = {.name = "y", .data = y, .bytes = sizeof y};
            cge_run_options ro = {.mode = rep ? CGE_RUN_REPLAY : CGE_RUN_PLAN};
            st = cge_session_run(s, 999, &ti, 1, &to, 1, &ro);
            for (int i = 0; !st && i < 15; i++)
                if (y[i] != (float)(i + rank)) {
                    FAIL("chain: y[%d] = %g, want %d", i, y[i], i + rank);
                    break;
                }
        }
        if (st)
            FAIL("chain: %s", cge_last_error());
    }
    cge_session_destroy(s);
    printf("[rank %d of %d] collectives: %d failure(s)\n", rank, world, failures);
    return failures ? 1 : 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The last rank leaves (after a first run that every rank makes, or right
 * after creating its session); the others' AllReduce must fail with a
 * [runtime] timeout naming the operator and the ranks, at run time or at
 * prepare. */
static cge_status allreduce_graph(cge_session *s, uint32_t id)
{
    cge_graph *g = NULL;
    cge_shape sh = CGE_SHAPE(16);
    cge_graph_create("ar", &g);
    cge_graph_add_input(g, "x", CGE_F32, &sh);
    const char *ins[] = {"x"}, *outs[] = {"y"};
    cge_graph_add_node(g, "AllReduce", CGE_DOMAIN_DIST, "coll0", ins, 1, outs, 1, NULL);
    cge_graph_add_output(g, "y");
    cge_status st = cge_session_add_graph(s, id, g);
    cge_graph_destroy(g);
    return st;
}

static cge_status run_allreduce(cge_session *s, uint32_t id)
{
    float x[16] = {1}, y[16];
    cge_tensor ti = {.name = "x", .dtype = CGE_F32, .shape = CGE_SHAPE(16), .data = x, .bytes = sizeof x};
    cge_tensor to = {.name = "y", .data = y, .bytes = sizeof y};
    return cge_session_run_graph(s, id, &ti, 1, &to, 1);
}

static void expect_timeout(cge_status st, const char *when, double dt)
{
    const char *msg = st ? cge_last_error() : "";
    if (st != CGE_ERR_TIMEOUT || !strstr(msg, "[runtime]") || !strstr(msg, "AllReduce 'coll0'") ||
        !strstr(msg, "ranks 0-"))
        FAIL("%s: want a [runtime] timeout naming AllReduce 'coll0' and the ranks, got %s (%s)",
             when, cge_status_name(st), st ? msg : "success");
    /* A guard against a hang, not a timing check: the bound is 3 s. */
    if (dt > 20)
        FAIL("%s: the failure took %.1f s", when, dt);
    printf("[rank %d of %d] %s: got \"%s\" after %.2f s\n", rank, world, when, msg, dt);
}

static int early_exit(void)
{
    cge_session *s = open_session(3000);
    cge_status st = allreduce_graph(s, 1);
    if (!st)
        st = run_allreduce(s, 1);
    if (st)
        FAIL("first run: %s", cge_last_error());
    if (rank == world - 1) {
        cge_session_destroy(s);
        printf("[rank %d of %d] leaving early\n", rank, world);
        return failures ? 1 : 0;
    }
    double t0 = now_s();
    st = run_allreduce(s, 1);
    expect_timeout(st, "run after a peer left", now_s() - t0);
    /* The communicator is now broken: a new collective fails at once, saying why. */
    st = allreduce_graph(s, 2);
    if (!st)
        st = cge_session_compile_graph(s, 2);
    if (!st || !strstr(cge_last_error(), "unusable after an earlier failure"))
        FAIL("after the timeout: want 'unusable after an earlier failure', got %s",
             st ? cge_last_error() : "success");
    cge_session_destroy(s);
    return failures ? 1 : 0;
}

/* The last rank leaves right after creating its session: the others fail
 * at the collective's prepare. */
static int early_exit_prepare(void)
{
    cge_session *s = open_session(3000);
    if (rank == world - 1) {
        cge_session_destroy(s);
        return 0;
    }
    double t0 = now_s();
    cge_status st = allreduce_graph(s, 1);
    if (!st)
        st = run_allreduce(s, 1);
    expect_timeout(st, "prepare after a peer left", now_s() - t0);
    cge_session_destroy(s);
    return failures ? 1 : 0;
}

/* Tensor (or pipeline) parallelism on an ONNX encoder: the session's output
 * equals a single-process session's within 1e-5 (relative to the output's
 * scale), in plan and replay runs, and each rank holds about 1/tp of the
 * sharded weights (pp: its stage's weights). With a head count tp does not
 * divide, the graph stays replicated and still matches. */
static size_t constant_bytes(const cge_graph *g)
{
    size_t b = 0;
    for (int32_t i = 0; i < cge_graph_num_constants(g); i++)
        b += cge_graph_constant(g, cge_graph_constant_name(g, i))->bytes;
    return b;
}

/* micro > 1: pipeline stages with that many micro-batches over the input's
 * batch, fixed at 4 (the model has a dynamic batch axis); first, a count
 * that 4 does not divide must be refused, naming the input. */
static int tensor_parallel(const char *path, int expect_sharded, bool pipeline, int micro)
{
    cge_graph *g = NULL;
    if (cge_onnx_import_file(path, NULL, &g)) {
        FAIL("%s: %s", path, cge_last_error());
        return 1;
    }
    if (micro > 1) {
        cge_tensor_desc in;
        cge_graph_get_desc(g, cge_graph_input(g, 0), &in);
        in.shape.dims[0] = 4;
        if (cge_graph_set_desc(g, cge_graph_input(g, 0), in.dtype, &in.shape))
            FAIL("set batch 4: %s", cge_last_error());
        cge_graph *bad = NULL;
        if (cge_dist_pipeline_parallel_micro(g, world, rank, 3, &bad, NULL, NULL) == CGE_OK)
            FAIL("3 micro-batches of a batch of 4 were accepted");
        else if (!strstr(cge_last_error(), "micro-batches") || !strstr(cge_last_error(), "input"))
            FAIL("3 micro-batches of 4: unclear error '%s'", cge_last_error());
        cge_graph_destroy(bad);
    }
    cge_graph *sharded = NULL;
    int32_t regions = 0;
    int64_t sent = 0;
    if (pipeline ? cge_dist_pipeline_parallel_micro(g, world, rank, micro, &sharded, &regions, &sent)
                 : cge_dist_tensor_parallel(g, world, rank, &sharded, &regions))
        FAIL("%s: %s", pipeline ? "pipeline_parallel" : "tensor_parallel", cge_last_error());
    /* A cut happened: every stage but the last sends its activations on. */
    if (pipeline && expect_sharded && rank < world - 1 && sent <= 0)
        FAIL("pp: stage %d of %d sends %lld bytes per run; want its activations", rank, world,
             (long long)sent);
    if (pipeline)
        regions = regions == world ? 2 * world : 0; /* stages, counted as the tp test wants */
    if (expect_sharded && regions < 2)
        FAIL("%s: %d region(s) sharded, want attention and MLP of every layer", path, (int)regions);
    if (!expect_sharded && regions)
        FAIL("%s: %d region(s) sharded over %d ranks, want none", path, (int)regions, world);
    size_t full = constant_bytes(g), mine = sharded ? constant_bytes(sharded) : full;
    if (pipeline) {
        /* A stage keeps the weights of its layers as the compiler holds them
         * (folded, one copy per layer): compare with all of those. */
        cge_compile_options co = {.opt_level = CGE_OPT_EXACT};
        cge_plan *p = NULL;
        if (!cge_compile(g, NULL, 0, &co, &p))
            full = constant_bytes(cge_plan_graph(p));
        cge_plan_destroy(p);
    }
    if (expect_sharded && (double)mine > (pipeline ? 1.5 / world : 0.6) * (double)full)
        FAIL("rank %d holds %zu of %zu weight bytes; want about 1/%d", rank, mine, full, world);
    cge_graph_destroy(sharded);
    cge_tensor_desc d;
    cge_graph_get_desc(g, cge_graph_input(g, 0), &d);
    int64_t n = cge_shape_numel(&d.shape);
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    cge_session_options one = {.num_threads = 1};
    cge_session_options tp = {.num_threads = 1, .dist = CGE_DIST_FROM_ENV,
                              .dist_tp = pipeline ? 0 : world, .dist_pp = pipeline ? world : 0,
                              .dist_timeout_ms = 20000, .dist_micro_batches = micro};
    cge_session *s1 = NULL, *s2 = NULL;
    float *y1 = NULL, *y2 = NULL;
    size_t yb = 0;
    cge_status st = cge_session_create(&one, &s1);
    if (!st)
        st = cge_session_create(&tp, &s2);
    if (!st)
        st = cge_session_add_graph(s1, 1, g);
    if (!st)
        st = cge_session_add_graph(s2, 1, g);
    cge_tensor_desc od;
    if (!st)
        st = cge_session_output_desc(s1, 1, 0, &od);
    if (!st && !cge_shape_is_static(&od.shape))
        od.shape = d.shape; /* the declared output's batch is symbolic; an encoder's is its input's */
    if (!st) {
        yb = cge_tensor_nbytes(od.dtype, &od.shape);
        y1 = malloc(yb);
        y2 = malloc(yb);
    }
    for (int k = 0; !st && k < 3; k++) {
        cge_tensor ti = {.name = d.name, .dtype = CGE_F32, .shape = d.shape, .data = x,
                         .bytes = sizeof(float) * (size_t)n};
        cge_tensor t1 = {.data = y1, .bytes = yb}, t2 = {.data = y2, .bytes = yb};
        cge_run_options ro = {.mode = k ? CGE_RUN_REPLAY : CGE_RUN_PLAN};
        st = cge_session_run(s1, 1, &ti, 1, &t1, 1, &ro);
        if (!st)
            st = cge_session_run(s2, 1, &ti, 1, &t2, 1, &ro);
        if (st)
            break;
        double scale = 0, worst = 0;
        int64_t m = cge_shape_numel(&od.shape);
        for (int64_t i = 0; i < m; i++)
            scale = fmax(scale, fabs(y1[i]));
        for (int64_t i = 0; i < m; i++)
            worst = fmax(worst, fabs(y1[i] - y2[i]) / (scale > 0 ? scale : 1));
        if (!(worst <= 1e-5))
            FAIL("%s: tp=%d output differs from one process by %.3g (relative to %.3g)", path,
                 world, worst, scale);
        if (k == 2)
            printf("[rank %d of %d] %s: %d regions, %zu of %zu weight bytes here, max relative "
                   "difference %.2g%s\n", rank, world, pipeline ? "pp" : "tp", (int)regions, mine,
                   full, worst, pipeline ? " (stages: regions / 2)" : "");
    }
    if (st)
        FAIL("%s: %s", path, cge_last_error());
    free(x);
    free(y1);
    free(y2);
    cge_session_destroy(s1);
    cge_session_destroy(s2);
    cge_graph_destroy(g);
    return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (!cge_dist_available()) {
        printf("skipped: cge was built without MPI\n");
        return 77;
    }
    cge_dist_env_rank(&rank, &world);
    const char *what = argc > 1 ? argv[1] : "collectives";
    if (!strcmp(what, "collectives"))
        return collectives();
    if (!strcmp(what, "early-exit"))
        return early_exit();
    if (!strcmp(what, "early-exit-prepare"))
        return early_exit_prepare();
    if ((!strcmp(what, "tp") || !strcmp(what, "pp")) && argc > 2) {
        char path[4096];
        const char *dir = getenv("CGE_MODEL_DIR");
        snprintf(path, sizeof path, "%s/%s", dir ? dir : ".", argv[2]);
        return tensor_parallel(path, argc > 3 ? atoi(argv[3]) : 1, !strcmp(what, "pp"),
                               argc > 4 ? atoi(argv[4]) : 0);
    }
    fprintf(stderr, "usage: dist_check collectives | early-exit\n");
    return 2;
}
