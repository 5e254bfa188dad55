/* Kernel choices: cge's own kernels (packed GEMM, pooling, LayerNorm, Softmax)
 * timed beside oneDNN's primitives for the same problems at the benchmark
 * models' shapes, so that each choice rests on a measurement. Not a test. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cge/cge.h"

/* The header gives oneDNN's types; its functions are looked up at run time
 * because bench targets link only libcge (which links oneDNN privately). */
#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#include "bench_common.h"
#define HAVE_DNNL 1
#else
#define HAVE_DNNL 0
#endif

/* Samples per method per (case, threads): ROUNDS blocks of BLOCK runs, the
 * methods alternating block by block so that a noisy spell on the shared
 * machine hits all of them alike. */
enum { WARMUP = 20, ROUNDS = 4, BLOCK = 60, SAMPLES = ROUNDS * BLOCK, MAX_THREADS = 4, CHAIN = 9 };

static float *fill(size_t n, unsigned seed)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    unsigned s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

typedef enum { K_MATMUL, K_BMM, K_HEAD, K_MAXPOOL, K_GAP, K_LAYERNORM, K_SOFTMAX } kind;

typedef struct bench_case {
    const char *name;
    kind k;
    int64_t d[4]; /* MATMUL/HEAD: M K N; BMM: batch M K N; pools: N C H W; LN: rows cols; SM: a b c */
    int nhwc;     /* pools: cge's ChannelsLastPool (reached through a Conv) vs oneDNN nhwc */
} bench_case;

/* ---- cge side ------------------------------------------------------------ */

typedef struct cge_side {
    cge_session *s;
    uint32_t id;
    cge_tensor in[2];
    int nin;
    cge_tensor out;
    const char *only_op; /* profile: time only steps of this op type (NULL: all) */
    double kernel_us;    /* summed by the profile callback */
    char ops[96];        /* op types of the timed steps, recorded once */
    int record_ops;
} cge_side;

static void on_profile(const cge_profile_event *ev, void *user)
{
    cge_side *c = user;
    if (ev->kind != CGE_PROFILE_KERNEL || (c->only_op && strcmp(ev->op_type, c->only_op)))
        return;
    c->kernel_us += (ev->end_ms - ev->launch_begin_ms) * 1e3;
    if (c->record_ops && strlen(c->ops) + strlen(ev->op_type) + 2 < sizeof c->ops) {
        if (c->ops[0])
            strcat(c->ops, "+");
        strcat(c->ops, ev->op_type);
    }
}

static double cge_profiled_run(cge_side *c)
{
    cge_run_options o = {.mode = CGE_RUN_PLAN, .profile = on_profile, .profile_user = c};
    c->kernel_us = 0;
    CHECK(cge_session_run(c->s, c->id, c->in, c->nin, &c->out, 1, &o));
    return c->kernel_us;
}

static double cge_plan_run(cge_side *c)
{
    cge_run_options o = {.mode = getenv("KC_REPLAY") ? CGE_RUN_REPLAY : CGE_RUN_PLAN};
    double t0 = bench_now_us();
    CHECK(cge_session_run(c->s, c->id, c->in, c->nin, &c->out, 1, &o));
    return bench_now_us() - t0;
}

static cge_tensor host_tensor(const char *name, cge_shape shape, float *data)
{
    return (cge_tensor){.name = name, .dtype = CGE_F32, .shape = shape, .data = data,
                        .bytes = (size_t)cge_shape_numel(&shape) * sizeof(float)};
}

/* One-node graph (a Conv in front for the channels-last pools) over the
 * case's data: x (and y for batched products) are inputs; weights constant.
 * The channels-last MaxPool is timed as the difference of two graphs:
 * Conv -> P -> Add(P, P) and (twin) Conv -> P, P' -> Add(P, P'), where P'
 * pads the same amount differently (SAME_UPPER) so that CSE keeps both.
 * `reps` > 1 chains that many copies of a shape-preserving op (LayerNorm,
 * Softmax, a square MatMul): inside a run, pool workers stay awake from one
 * step to the next, as they do in a model. */
static void cge_build(cge_side *c, cge_session *s, uint32_t id, const bench_case *bc, float **data,
                      float *out, int twin, int reps)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->id = id;
    cge_builder *b = cge_builder_create(bc->name);
    const int64_t *d = bc->d;
    cge_t y = CGE_INVALID;
    cge_shape out_shape = {0};
    switch (bc->k) {
    case K_MATMUL: {
        cge_shape xs = CGE_SHAPE(d[0], d[1]);
        c->in[c->nin++] = host_tensor("x", xs, data[0]);
        cge_t x = cge_es_input(b, "x", CGE_F32, xs);
        cge_t w = cge_es_constant(b, "w", CGE_F32, CGE_SHAPE(d[1], d[2]), data[1]);
        cge_t bias = cge_es_constant(b, "bias", CGE_F32, CGE_SHAPE(d[2]), data[2]);
        y = x;
        for (int r = 0; r < reps; r++)
            y = cge_es_add(b, cge_es_mat_mul(b, y, w), bias);
        out_shape = CGE_SHAPE(d[0], d[2]);
        break;
    }
    case K_HEAD: {
        cge_shape xs = CGE_SHAPE(d[0], d[1]);
        c->in[c->nin++] = host_tensor("x", xs, data[0]);
        cge_t x = cge_es_input(b, "x", CGE_F32, xs);
        cge_t w = cge_es_constant(b, "w", CGE_F32, CGE_SHAPE(d[2], d[1]), data[1]);
        cge_t bias = cge_es_constant(b, "bias", CGE_F32, CGE_SHAPE(d[2]), data[2]);
        y = cge_es_gemm(b, x, w, bias, 1.0f, 1.0f, 0, 1);
        out_shape = CGE_SHAPE(d[0], d[2]);
        break;
    }
    case K_BMM: {
        cge_shape as = CGE_SHAPE(d[0], d[1], d[2]), bs = CGE_SHAPE(d[0], d[2], d[3]);
        c->in[c->nin++] = host_tensor("a", as, data[0]);
        c->in[c->nin++] = host_tensor("b", bs, data[1]);
        y = cge_es_mat_mul(b, cge_es_input(b, "a", CGE_F32, as), cge_es_input(b, "b", CGE_F32, bs));
        out_shape = CGE_SHAPE(d[0], d[1], d[3]);
        break;
    }
    case K_MAXPOOL:
    case K_GAP: {
        cge_shape xs = CGE_SHAPE(d[0], d[1], d[2], d[3]);
        cge_t x;
        if (bc->nhwc) {
            /* A 1x1 Conv with constant W in front: at level 3 it runs
             * channels-last and the pool after it becomes ChannelsLastPool. */
            enum { CIN = 8 };
            cge_shape cs = CGE_SHAPE(d[0], CIN, d[2], d[3]);
            c->in[c->nin++] = host_tensor("x", cs, data[3]);
            cge_t w = cge_es_constant(b, "w", CGE_F32, CGE_SHAPE(d[1], CIN, 1, 1), data[1]);
            const int64_t k1[2] = {1, 1};
            x = cge_es_conv(b, cge_es_input(b, "x", CGE_F32, cs), w, CGE_NONE, NULL, NULL, 0, 1,
                            k1, 2, NULL, 0, NULL, 0);
            c->only_op = "ChannelsLastPool";
        } else {
            c->in[c->nin++] = host_tensor("x", xs, data[0]);
            x = cge_es_input(b, "x", CGE_F32, xs);
        }
        if (bc->k == K_GAP) {
            y = cge_es_global_average_pool(b, x);
            out_shape = CGE_SHAPE(d[0], d[1], 1, 1);
        } else {
            const int64_t k[2] = {3, 3}, st[2] = {2, 2}, p[4] = {1, 1, 1, 1};
            CHECK(cge_es_max_pool(b, x, NULL, 0, NULL, 0, k, 2, p, 4, 0, st, 2, &y, 1));
            if (bc->nhwc) {
                cge_t y2 = y;
                if (twin)
                    CHECK(cge_es_max_pool(b, x, "SAME_UPPER", 0, NULL, 0, k, 2, NULL, 0, 0, st, 2,
                                          &y2, 1));
                y = cge_es_add(b, y, y2);
            }
            out_shape = CGE_SHAPE(d[0], d[1], (d[2] + 1) / 2, (d[3] + 1) / 2);
        }
        break;
    }
    case K_LAYERNORM: {
        cge_shape xs = CGE_SHAPE(d[0], d[1]);
        c->in[c->nin++] = host_tensor("x", xs, data[0]);
        cge_t x = cge_es_input(b, "x", CGE_F32, xs);
        cge_t sc = cge_es_constant(b, "scale", CGE_F32, CGE_SHAPE(d[1]), data[1]);
        cge_t sh = cge_es_constant(b, "shift", CGE_F32, CGE_SHAPE(d[1]), data[2]);
        y = x;
        for (int r = 0; r < reps; r++)
            CHECK(cge_es_layer_normalization(b, y, sc, sh, -1, 1e-5f, 1, &y, 1));
        out_shape = xs;
        break;
    }
    case K_SOFTMAX: {
        cge_shape xs = CGE_SHAPE(d[0], d[1], d[2]);
        c->in[c->nin++] = host_tensor("x", xs, data[0]);
        y = cge_es_input(b, "x", CGE_F32, xs);
        for (int r = 0; r < reps; r++)
            y = cge_es_softmax(b, y, -1);
        out_shape = xs;
        break;
    }
    }
    cge_es_output(b, y, "y");
    cge_graph *g = NULL;
    if (cge_builder_finish(b, &g) != CGE_OK) {
        fprintf(stderr, "%s: %s\n", bc->name, cge_builder_error_message(b));
        exit(1);
    }
    cge_builder_destroy(b);
    CHECK(cge_session_add_graph(s, id, g));
    cge_graph_destroy(g);
    CHECK(cge_session_compile_graph(s, id));
    c->out = host_tensor("y", out_shape, out);
    c->record_ops = 1;
    cge_profiled_run(c);
    c->record_ops = 0;
}

/* ---- oneDNN side --------------------------------------------------------- */

#if HAVE_DNNL
#define DNNL_FNS(X)                                                                          \
    X(engine_create) X(engine_destroy) X(stream_create) X(stream_destroy) X(stream_wait)     \
    X(memory_desc_init_by_tag) X(memory_desc_get_size) X(memory_desc_equal)                  \
    X(memory_create) X(memory_destroy) X(primitive_desc_create) X(primitive_desc_destroy)    \
    X(primitive_desc_query) X(primitive_desc_query_md) X(primitive_create)                   \
    X(primitive_destroy) X(primitive_execute) X(reorder_primitive_desc_create)               \
    X(matmul_desc_init) X(pooling_v2_forward_desc_init)                                      \
    X(layer_normalization_forward_desc_init) X(softmax_forward_desc_init)

typedef struct dnnl_api {
#define DECL(n) __typeof__(&dnnl_##n) n;
    DNNL_FNS(DECL)
#undef DECL
    void (*omp_set_num_threads)(int);
    dnnl_engine_t engine;
    dnnl_stream_t stream;
} dnnl_api;

static int dnnl_load(dnnl_api *a)
{
    memset(a, 0, sizeof *a);
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        return 0;
#define LOOK(n)                                                                  \
    if (!(*(void **)&a->n = dlsym(h, "dnnl_" #n)))                               \
        return 0;
    DNNL_FNS(LOOK)
#undef LOOK
    /* libgomp comes with oneDNN; its OpenMP team serves the calling thread */
    *(void **)&a->omp_set_num_threads = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    return a->engine_create(&a->engine, dnnl_cpu, 0) == dnnl_success &&
           a->stream_create(&a->stream, a->engine, dnnl_stream_default_flags) == dnnl_success;
}

enum { MAX_ARGS = 10 };

typedef struct dnnl_side {
    const dnnl_api *a;
    dnnl_primitive_t prim;
    dnnl_exec_arg_t args[MAX_ARGS];
    int nargs;
    dnnl_memory_t mems[MAX_ARGS + 2];
    int nmems;
    void *own[MAX_ARGS + 2];
    int nown;
    char impl[48];
} dnnl_side;

#define DN(call)                                                                 \
    do {                                                                         \
        dnnl_status_t s_ = (call);                                               \
        if (s_ != dnnl_success) {                                                \
            fprintf(stderr, "%s: oneDNN status %d\n", #call, (int)s_);           \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static dnnl_memory_t dn_mem(dnnl_side *o, const dnnl_memory_desc_t *md, void *data)
{
    dnnl_memory_t m;
    if (!data) {
        size_t n = o->a->memory_desc_get_size(md);
        data = aligned_alloc(64, (n + 63) / 64 * 64 + 64);
        o->own[o->nown++] = data;
    }
    DN(o->a->memory_create(&m, md, o->a->engine, data));
    o->mems[o->nmems++] = m;
    return m;
}

static void dn_arg(dnnl_side *o, int arg, dnnl_memory_t m)
{
    o->args[o->nargs++] = (dnnl_exec_arg_t){.arg = arg, .memory = m};
}

static void dn_execute(const dnnl_side *o)
{
    DN(o->a->primitive_execute(o->prim, o->a->stream, o->nargs, o->args));
    DN(o->a->stream_wait(o->a->stream));
}

/* The primitive, and memories for whatever else it asks for (statistics,
 * workspace) beyond the arguments already bound. */
static void dn_finish(dnnl_side *o, dnnl_primitive_desc_t pd)
{
    static const int extra[] = {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_WORKSPACE,
                                DNNL_ARG_SCRATCHPAD};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        const dnnl_memory_desc_t *md = o->a->primitive_desc_query_md(pd, dnnl_query_exec_arg_md, extra[i]);
        if (md && o->a->memory_desc_get_size(md) > 0)
            dn_arg(o, extra[i], dn_mem(o, md, NULL));
    }
    const char *impl = NULL;
    if (o->a->primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(o->impl, sizeof o->impl, "%s", impl);
    DN(o->a->primitive_create(&o->prim, pd));
    DN(o->a->primitive_desc_destroy(pd));
}

static void dn_md(const dnnl_api *a, dnnl_memory_desc_t *md, int nd, const int64_t *dims,
                  dnnl_format_tag_t tag)
{
    dnnl_dims_t dd = {0};
    for (int i = 0; i < nd; i++)
        dd[i] = dims[i];
    DN(a->memory_desc_init_by_tag(md, nd, dd, dnnl_f32, tag));
}

/* Constant weights in the layout the primitive prefers, reordered once. */
static dnnl_memory_t dn_weights(dnnl_side *o, dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *plain,
                                float *data)
{
    const dnnl_api *a = o->a;
    const dnnl_memory_desc_t *want = a->primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (a->memory_desc_equal(want, plain))
        return dn_mem(o, plain, data);
    dnnl_memory_t user, packed = dn_mem(o, want, NULL);
    DN(a->memory_create(&user, plain, a->engine, data));
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    DN(a->reorder_primitive_desc_create(&rpd, plain, a->engine, want, a->engine, NULL));
    DN(a->primitive_create(&r, rpd));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, packed}};
    DN(a->primitive_execute(r, a->stream, 2, args));
    DN(a->stream_wait(a->stream));
    a->primitive_destroy(r);
    a->primitive_desc_destroy(rpd);
    a->memory_destroy(user);
    return packed;
}

/* data: [0] x, [1] weights / second operand, [2] bias / shift ... as for cge;
 * pools in nhwc read data[4], the input in that layout. */
static void dnnl_build(dnnl_side *o, const dnnl_api *a, const bench_case *bc, float **data, float *out)
{
    memset(o, 0, sizeof *o);
    o->a = a;
    const int64_t *d = bc->d;
    dnnl_memory_desc_t src, wei, bias, dst;
    dnnl_primitive_desc_t pd;
    switch (bc->k) {
    case K_MATMUL:
    case K_HEAD: {
        int64_t s[2] = {d[0], d[1]}, w[2] = {d[1], d[2]}, b[2] = {1, d[2]}, y[2] = {d[0], d[2]};
        dnnl_memory_desc_t wplain;
        dn_md(a, &src, 2, s, dnnl_ab);
        dn_md(a, &wei, 2, w, dnnl_format_tag_any);
        /* Gemm's B is [N, K] (transB), MatMul's [K, N] */
        dn_md(a, &wplain, 2, w, bc->k == K_HEAD ? dnnl_ba : dnnl_ab);
        dn_md(a, &bias, 2, b, dnnl_ab);
        dn_md(a, &dst, 2, y, dnnl_ab);
        dnnl_matmul_desc_t md;
        DN(a->matmul_desc_init(&md, &src, &wei, &bias, &dst));
        DN(a->primitive_desc_create(&pd, &md, NULL, a->engine, NULL));
        dn_arg(o, DNNL_ARG_SRC, dn_mem(o, &src, data[0]));
        dn_arg(o, DNNL_ARG_WEIGHTS, dn_weights(o, pd, &wplain, data[1]));
        dn_arg(o, DNNL_ARG_BIAS, dn_mem(o, &bias, data[2]));
        dn_arg(o, DNNL_ARG_DST, dn_mem(o, &dst, out));
        break;
    }
    case K_BMM: {
        int64_t s[3] = {d[0], d[1], d[2]}, w[3] = {d[0], d[2], d[3]}, y[3] = {d[0], d[1], d[3]};
        dn_md(a, &src, 3, s, dnnl_abc);
        dn_md(a, &wei, 3, w, dnnl_abc);
        dn_md(a, &dst, 3, y, dnnl_abc);
        dnnl_matmul_desc_t md;
        DN(a->matmul_desc_init(&md, &src, &wei, NULL, &dst));
        DN(a->primitive_desc_create(&pd, &md, NULL, a->engine, NULL));
        dn_arg(o, DNNL_ARG_SRC, dn_mem(o, &src, data[0]));
        dn_arg(o, DNNL_ARG_WEIGHTS, dn_mem(o, &wei, data[1]));
        dn_arg(o, DNNL_ARG_DST, dn_mem(o, &dst, out));
        break;
    }
    case K_MAXPOOL:
    case K_GAP: {
        int gap = bc->k == K_GAP;
        int64_t y[4] = {d[0], d[1], gap ? 1 : (d[2] + 1) / 2, gap ? 1 : (d[3] + 1) / 2};
        dnnl_format_tag_t tag = bc->nhwc ? dnnl_nhwc : dnnl_nchw;
        dn_md(a, &src, 4, d, tag);
        dn_md(a, &dst, 4, y, tag);
        dnnl_dims_t st = {2, 2}, k = {3, 3}, dil = {0, 0}, pl = {1, 1}, pr = {1, 1};
        if (gap) {
            st[0] = st[1] = 1;
            k[0] = d[2], k[1] = d[3];
            pl[0] = pl[1] = pr[0] = pr[1] = 0;
        }
        dnnl_pooling_v2_desc_t pdesc;
        DN(a->pooling_v2_forward_desc_init(&pdesc, dnnl_forward_inference,
                                           gap ? dnnl_pooling_avg_exclude_padding : dnnl_pooling_max,
                                           &src, &dst, st, k, dil, pl, pr));
        DN(a->primitive_desc_create(&pd, &pdesc, NULL, a->engine, NULL));
        dn_arg(o, DNNL_ARG_SRC, dn_mem(o, &src, bc->nhwc ? data[4] : data[0]));
        dn_arg(o, DNNL_ARG_DST, dn_mem(o, &dst, out));
        break;
    }
    case K_LAYERNORM: {
        int64_t c[1] = {d[1]};
        dnnl_memory_desc_t sc;
        dn_md(a, &src, 2, d, dnnl_ab);
        dn_md(a, &sc, 1, c, dnnl_a);
        dnnl_layer_normalization_desc_t ld;
        DN(a->layer_normalization_forward_desc_init(&ld, dnnl_forward_inference, &src, NULL, 1e-5f,
                                                    dnnl_use_scale | dnnl_use_shift));
        DN(a->primitive_desc_create(&pd, &ld, NULL, a->engine, NULL));
        dn_arg(o, DNNL_ARG_SRC, dn_mem(o, &src, data[0]));
        dn_arg(o, DNNL_ARG_SCALE, dn_mem(o, &sc, data[1]));
        dn_arg(o, DNNL_ARG_SHIFT, dn_mem(o, &sc, data[2]));
        dn_arg(o, DNNL_ARG_DST, dn_mem(o, &src, out));
        break;
    }
    case K_SOFTMAX: {
        dn_md(a, &src, 3, d, dnnl_abc);
        dnnl_softmax_desc_t sd;
        DN(a->softmax_forward_desc_init(&sd, dnnl_forward_inference, &src, 2));
        DN(a->primitive_desc_create(&pd, &sd, NULL, a->engine, NULL));
        dn_arg(o, DNNL_ARG_SRC, dn_mem(o, &src, data[0]));
        dn_arg(o, DNNL_ARG_DST, dn_mem(o, &src, out));
        break;
    }
    }
    dn_finish(o, pd);
}

static void dnnl_release(dnnl_side *o)
{
    o->a->primitive_destroy(o->prim);
    for (int i = 0; i < o->nmems; i++)
        o->a->memory_destroy(o->mems[i]);
    for (int i = 0; i < o->nown; i++)
        free(o->own[i]);
}
#endif

/* ---- the cases ----------------------------------------------------------- */

static const bench_case cases[] = {
    {"MatMul+bias [128,256]x[256,768]", K_MATMUL, {128, 256, 768}, 0},
    {"MatMul+bias [128,256]x[256,1024]", K_MATMUL, {128, 256, 1024}, 0},
    {"MatMul+bias [128,1024]x[1024,256]", K_MATMUL, {128, 1024, 256}, 0},
    {"MatMul+bias [128,256]x[256,256]", K_MATMUL, {128, 256, 256}, 0},
    {"MatMul [4,128,64]x[4,64,128]", K_BMM, {4, 128, 64, 128}, 0},
    {"MatMul [4,128,128]x[4,128,64]", K_BMM, {4, 128, 128, 64}, 0},
    /* Decoding (M = 1: a GEMV streaming the packed weight) and short prompts
     * or encoder rows (M = 16, 64) at the zoo's widths d = 256..1024, MLPs
     * up to 4d and vocabulary heads. */
    {"MatMul+bias [1,256]x[256,256]", K_MATMUL, {1, 256, 256}, 0},
    {"MatMul+bias [1,256]x[256,768]", K_MATMUL, {1, 256, 768}, 0},
    {"MatMul+bias [1,256]x[256,1024]", K_MATMUL, {1, 256, 1024}, 0},
    {"MatMul+bias [1,1024]x[1024,256]", K_MATMUL, {1, 1024, 256}, 0},
    {"MatMul+bias [1,512]x[512,512]", K_MATMUL, {1, 512, 512}, 0},
    {"MatMul+bias [1,768]x[768,768]", K_MATMUL, {1, 768, 768}, 0},
    {"MatMul+bias [1,768]x[768,3072]", K_MATMUL, {1, 768, 3072}, 0},
    {"MatMul+bias [1,3072]x[3072,768]", K_MATMUL, {1, 3072, 768}, 0},
    {"MatMul+bias [1,1024]x[1024,4096]", K_MATMUL, {1, 1024, 4096}, 0},
    {"Gemm tB [1,256]x[1000,256]'", K_HEAD, {1, 256, 1000}, 0},
    {"MatMul+bias [16,256]x[256,256]", K_MATMUL, {16, 256, 256}, 0},
    {"MatMul+bias [16,256]x[256,1024]", K_MATMUL, {16, 256, 1024}, 0},
    {"MatMul+bias [16,1024]x[1024,1024]", K_MATMUL, {16, 1024, 1024}, 0},
    {"MatMul+bias [64,768]x[768,768]", K_MATMUL, {64, 768, 768}, 0},
    {"MatMul+bias [64,768]x[768,3072]", K_MATMUL, {64, 768, 3072}, 0},
    /* vit_b_16's MLP (197 tokens) and the widest decoder GEMV. */
    {"MatMul+bias [197,768]x[768,3072]", K_MATMUL, {197, 768, 3072}, 0},
    {"MatMul+bias [197,3072]x[3072,768]", K_MATMUL, {197, 3072, 768}, 0},
    {"MatMul+bias [1,4096]x[4096,4096]", K_MATMUL, {1, 4096, 4096}, 0},
    {"Gemm tB [1,512]x[1000,512]'", K_HEAD, {1, 512, 1000}, 0},
    {"Gemm tB [1,1280]x[1000,1280]'", K_HEAD, {1, 1280, 1000}, 0},
    {"MaxPool 3x3/2 [1,64,112,112] nchw", K_MAXPOOL, {1, 64, 112, 112}, 0},
    {"MaxPool 3x3/2 [1,64,112,112] nhwc", K_MAXPOOL, {1, 64, 112, 112}, 1},
    {"GlobalAvgPool [1,1280,7,7] nchw", K_GAP, {1, 1280, 7, 7}, 0},
    {"GlobalAvgPool [1,1280,7,7] nhwc", K_GAP, {1, 1280, 7, 7}, 1},
    {"GlobalAvgPool [1,512,7,7] nchw", K_GAP, {1, 512, 7, 7}, 0},
    {"GlobalAvgPool [1,512,7,7] nhwc", K_GAP, {1, 512, 7, 7}, 1},
    {"LayerNorm [128,256] axis -1", K_LAYERNORM, {128, 256}, 0},
    {"Softmax [4,128,128] axis -1", K_SOFTMAX, {4, 128, 128}, 0},
};

static size_t numel(const int64_t *d, int n)
{
    size_t v = 1;
    for (int i = 0; i < n; i++)
        v *= (size_t)d[i];
    return v;
}

/* Largest |cge - oneDNN| over the output. */
static double max_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double e = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        if (e > m)
            m = e;
    }
    return m;
}

/* A graph whose one step does next to nothing (y = x + c on 16 floats): its
 * profiled step time is what the profiler adds to any step (the launch on
 * the session's stream, a worker waking, the synchronize). */
static void build_trivial(cge_side *c, cge_session *s, uint32_t id, float *x, float *y)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->id = id;
    cge_builder *b = cge_builder_create("trivial");
    cge_t in = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(1, 16));
    cge_es_output(b, cge_es_add(b, in, cge_es_constant(b, "c", CGE_F32, CGE_SHAPE(1, 16), x)), "y");
    cge_graph *g = NULL;
    CHECK(cge_builder_finish(b, &g));
    cge_builder_destroy(b);
    CHECK(cge_session_add_graph(s, id, g));
    cge_graph_destroy(g);
    CHECK(cge_session_compile_graph(s, id));
    c->in[c->nin++] = host_tensor("x", CGE_SHAPE(1, 16), x);
    c->out = host_tensor("y", CGE_SHAPE(1, 16), y);
}

typedef struct measured {
    double cge;    /* the kernel's time, estimated as the method says */
    double run;    /* a whole plan run; -1 where it includes other steps */
    double copies; /* the run's input and output copies, as memcpy */
    double dnnl;   /* -1 without oneDNN */
    double diff;   /* largest |cge - oneDNN| over the output; -1 if not compared */
} measured;

/* How cge's kernel time is separated from what surrounds it:
 * COPIES   a plan run less the memcpy of its inputs and outputs (what the
 *          session copies around the plan), timed alongside;
 * TWIN     plan runs of `base` (the graph without the pool) subtracted from
 *          plan runs of the graph with it;
 * PROFILED the step's time from the profiler, less the profiler's own cost
 *          (a profiled step runs on the session's stream: a worker wakes and
 *          the host waits), measured on `base`, a trivial graph. */
typedef enum { M_COPIES, M_TWIN, M_PROFILED } method;

static double copy_once(const cge_side *c, void *const *scratch)
{
    double t0 = bench_now_us();
    for (int i = 0; i < c->nin; i++)
        memcpy(scratch[i], c->in[i].data, c->in[i].bytes);
    memcpy(c->out.data, scratch[2], c->out.bytes);
    return bench_now_us() - t0;
}

static double time_cge(cge_side *c, method how, int is_base, void *const *scratch)
{
    if (how == M_PROFILED)
        return cge_profiled_run(c);
    if (how == M_COPIES && is_base)
        return copy_once(c, scratch);
    return cge_plan_run(c);
}

/* One case at one thread count; the methods alternate block by block. */
static measured measure(cge_side *cs, cge_side *base, method how, void *dn_side, int threads,
                        void (*dn_run)(void *), void (*set_threads)(int), size_t ny, double *buf)
{
    double *rc = buf, *dn = buf + SAMPLES, *tr = buf + 2 * SAMPLES;
    cge_side *b = how == M_COPIES ? cs : base;
    void *scratch[3];
    for (int i = 0; i < cs->nin; i++)
        scratch[i] = malloc(cs->in[i].bytes);
    scratch[2] = calloc(1, cs->out.bytes);
    if (set_threads)
        set_threads(threads);
    for (int w = 0; w < WARMUP; w++) {
        time_cge(cs, how, 0, scratch);
        time_cge(b, how, 1, scratch);
        if (dn_run)
            dn_run(dn_side);
    }
    measured m = {.dnnl = -1, .diff = -1, .run = -1};
    if (dn_run && how == M_COPIES) {
        /* oneDNN ran last in the warm-up, into cge's output buffer: keep its
         * result, run cge and compare */
        float *y = malloc(cs->out.bytes);
        memcpy(y, cs->out.data, cs->out.bytes);
        cge_plan_run(cs);
        m.diff = max_diff(y, cs->out.data, ny);
        free(y);
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BLOCK; i++)
            rc[r * BLOCK + i] = time_cge(cs, how, 0, scratch);
        if (dn_run) {
            /* cge's Conv (the nhwc cases) sets the team size itself */
            if (set_threads)
                set_threads(threads);
            for (int i = 0; i < BLOCK; i++) {
                double t0 = bench_now_us();
                dn_run(dn_side);
                dn[r * BLOCK + i] = bench_now_us() - t0;
            }
        }
        for (int i = 0; i < BLOCK; i++)
            tr[r * BLOCK + i] = time_cge(b, how, 1, scratch);
    }
    double a = bench_median(rc, SAMPLES), c = bench_median(tr, SAMPLES);
    m.cge = a - c;
    if (how == M_COPIES) {
        m.run = a;
        m.copies = c;
    }
    if (dn_run)
        m.dnnl = bench_median(dn, SAMPLES);
    for (int i = 0; i < cs->nin; i++)
        free(scratch[i]);
    free(scratch[2]);
    return m;
}

#if HAVE_DNNL
static void dn_run_cb(void *p) { dn_execute(p); }
#endif

/* bench_kernel_choices [-c case-substring] [threads ...] (default 1 2).
 * KC_REPLAY=1 times replay runs instead of plan runs; KC_PROFILE=1 times every
 * case the way the channels-last global pools are timed (to check that method). */
int main(int argc, char **argv)
{
    int threads[MAX_THREADS] = {1, 2}, nthreads = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc)
            only = argv[++i];
        else if (nthreads < MAX_THREADS)
            threads[nthreads++] = atoi(argv[i]) > 0 ? atoi(argv[i]) : 1;
    }
    if (!nthreads)
        nthreads = 2;
    void (*set_threads)(int) = NULL;
#if HAVE_DNNL
    dnnl_api api;
    int have_dnnl = dnnl_load(&api);
    if (have_dnnl)
        set_threads = api.omp_set_num_threads;
#else
    int have_dnnl = 0;
#endif
    if (!have_dnnl)
        fprintf(stderr, "oneDNN (libdnnl.so.2) not available: timing cge only\n");

    cge_device *dev[MAX_THREADS];
    cge_session *ses[MAX_THREADS];
    cge_side trivial[MAX_THREADS];
    float tx[16] = {0}, ty[16];
    uint32_t next_id = 1;
    for (int t = 0; t < nthreads; t++) {
        cge_device_options dopt = {.num_threads = threads[t]};
        CHECK(cge_device_create_cpu(&dopt, &dev[t]));
        cge_session_options so = {.device = dev[t]};
        CHECK(cge_session_create(&so, &ses[t]));
        build_trivial(&trivial[t], ses[t], next_id++, tx, ty);
    }
    printf("medians of %d runs (%d blocks alternating, after %d warm-up runs), microseconds.\n"
           "cge = a plan run less its input/output copies (memcpy, timed alongside); for the\n"
           "channels-last MaxPool, plan runs of Conv->P,P'->Add less Conv->P->Add; ~ = the\n"
           "channels-last global pools: profiled step less the profiler's cost (+-3 us).\n"
           "in chain = cge's op as one of %d chained copies (workers awake between steps).\n\n",
           SAMPLES, ROUNDS, WARMUP, CHAIN);
    printf("products: GF/s = 2MKN / cge's time, GB/s = the weight's bytes (4KN, what an M = 1\n"
           "product streams) / cge's time; the in-chain time where there is one.\n\n");
    printf("%-35s %3s %9s %9s %7s %8s %9s %8s %7s %7s  %-20s %s\n", "case", "thr", "cge", "oneDNN",
           "cge/dnn", "in chain", "cge run", "copies", "GF/s", "GB/s", "cge step", "oneDNN impl");
    double *buf = malloc(sizeof(double) * 3 * SAMPLES);
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const bench_case *bc = &cases[ci];
        if (only && !strstr(bc->name, only))
            continue;
        const int64_t *d = bc->d;
        /* data[0] x, [1] weights or second operand or scale, [2] bias or
         * shift, [3] the Conv input of nhwc pools, [4] x in NHWC */
        size_t nx = 0, nw = 1, nb = 1, ny = 0;
        switch (bc->k) {
        case K_MATMUL:
        case K_HEAD:
            nx = numel(d, 2), nw = (size_t)(d[1] * d[2]), nb = (size_t)d[2];
            ny = (size_t)(d[0] * d[2]);
            break;
        case K_BMM:
            nx = (size_t)(d[0] * d[1] * d[2]), nw = (size_t)(d[0] * d[2] * d[3]);
            ny = (size_t)(d[0] * d[1] * d[3]);
            break;
        case K_MAXPOOL:
            nx = numel(d, 4), nw = (size_t)d[1] * 8;
            ny = (size_t)(d[0] * d[1] * ((d[2] + 1) / 2) * ((d[3] + 1) / 2));
            break;
        case K_GAP: nx = numel(d, 4), nw = (size_t)d[1] * 8, ny = (size_t)(d[0] * d[1]); break;
        case K_LAYERNORM: nx = numel(d, 2), nw = nb = (size_t)d[1], ny = nx; break;
        case K_SOFTMAX: nx = ny = numel(d, 3); break;
        }
        float *data[5] = {fill(nx, 1), fill(nw, 2), fill(nb, 3),
                          fill(bc->nhwc ? (size_t)(d[0] * 8 * d[2] * d[3]) : 1, 4), fill(nx, 1)};
        if (bc->nhwc) /* the same values as data[0], in NHWC order */
            for (int64_t c = 0; c < d[1]; c++)
                for (int64_t hw = 0; hw < d[2] * d[3]; hw++)
                    data[4][hw * d[1] + c] = data[0][c * d[2] * d[3] + hw];
        float *ycge = fill(ny, 5);
        for (int t = 0; t < nthreads; t++) {
            cge_side cs, twin;
            method how = !bc->nhwc ? M_COPIES : bc->k == K_MAXPOOL ? M_TWIN : M_PROFILED;
            if (getenv("KC_PROFILE"))
                how = M_PROFILED;
            cge_build(&cs, ses[t], next_id++, bc, data, ycge, how == M_TWIN, 1);
            if (how == M_TWIN)
                cge_build(&twin, ses[t], next_id++, bc, data, ycge, 0, 1);
            void *dside = NULL;
            void (*drun)(void *) = NULL;
            const char *impl = "";
#if HAVE_DNNL
            dnnl_side ds;
            if (have_dnnl) {
                set_threads(threads[t]); /* before the primitive: it may size its work by it */
                /* oneDNN writes into cge's output buffer: measure() keeps
                 * its result from the warm-up and compares cge's with it */
                dnnl_build(&ds, &api, bc, data, ycge);
                dside = &ds, drun = dn_run_cb, impl = ds.impl;
            }
#endif
            measured m = measure(&cs, how == M_TWIN ? &twin : &trivial[t], how, dside, threads[t],
                                 drun, set_threads, ny, buf);
            char chain_s[16] = "-";
            double chain_us = -1;
            if (bc->k == K_LAYERNORM || bc->k == K_SOFTMAX || (bc->k == K_MATMUL && d[1] == d[2])) {
                /* the same op inside a chain of CHAIN: (T(chain) - T(one)) / (CHAIN - 1) */
                cge_side chain;
                cge_build(&chain, ses[t], next_id++, bc, data, ycge, 0, CHAIN);
                measured mc = measure(&chain, &cs, M_TWIN, NULL, threads[t], NULL, NULL, ny, buf);
                chain_us = mc.cge / (CHAIN - 1);
                snprintf(chain_s, sizeof chain_s, "%.1f", chain_us);
                CHECK(cge_session_remove_graph(ses[t], chain.id));
            }
            char cge_s[16], o_s[16] = "-", ratio_s[16] = "-", run_s[16] = "-", cp_s[16] = "-";
            snprintf(cge_s, sizeof cge_s, "%s%.1f", how == M_PROFILED ? "~" : "", m.cge);
            if (m.dnnl >= 0)
                snprintf(o_s, sizeof o_s, "%.1f", m.dnnl);
            /* a profiled estimate is within a few microseconds at best: no ratio */
            if (m.dnnl > 0 && how != M_PROFILED)
                snprintf(ratio_s, sizeof ratio_s, "%.2f", m.cge / m.dnnl);
            if (m.run >= 0) {
                snprintf(run_s, sizeof run_s, "%.1f", m.run);
                snprintf(cp_s, sizeof cp_s, "%.1f", m.copies);
            }
            char gf_s[16] = "-", gb_s[16] = "-";
            double us = chain_us > 0 ? chain_us : m.cge;
            if ((bc->k == K_MATMUL || bc->k == K_HEAD) && us > 0) {
                snprintf(gf_s, sizeof gf_s, "%.1f", 2.0 * (double)(d[0] * d[1] * d[2]) / us / 1e3);
                snprintf(gb_s, sizeof gb_s, "%.1f", 4.0 * (double)(d[1] * d[2]) / us / 1e3);
            }
            printf("%-35s %3d %9s %9s %7s %8s %9s %8s %7s %7s  %-20s %s", bc->name, threads[t], cge_s,
                   o_s, ratio_s, chain_s, run_s, cp_s, gf_s, gb_s, cs.ops, impl);
            if (m.diff > 1e-3)
                printf("  [outputs differ by %.3g]", m.diff);
            printf("\n");
            fflush(stdout);
            CHECK(cge_session_remove_graph(ses[t], cs.id));
            if (how == M_TWIN)
                CHECK(cge_session_remove_graph(ses[t], twin.id));
#if HAVE_DNNL
            if (have_dnnl)
                dnnl_release(&ds);
#endif
        }
        for (int i = 0; i < 5; i++)
            free(data[i]);
        free(ycge);
    }
    free(buf);
    for (int t = 0; t < nthreads; t++) {
        cge_session_destroy(ses[t]);
        cge_device_destroy(dev[t]);
    }
#if HAVE_DNNL
    if (have_dnnl) {
        api.stream_destroy(api.stream);
        api.engine_destroy(api.engine);
    }
#endif
    return 0;
}
