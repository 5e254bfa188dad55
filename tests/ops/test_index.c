/* Tests of GatherElements, GatherND, ScatterND, ScatterElements, OneHot,
 * NonZero, TopK, CumSum, Trilu and Compress: every ONNX 1.12 node test case
 * (index_fixtures.h), then large shapes (several blocks) against naive loops,
 * negative indices, out-of-range indices ([kernel] errors naming the node,
 * index and range; OneHot's "off" rows), dtypes, and meta without values. */
#include "index_fixtures.h"
#include "onnx_node_case.h"
#include "op_runner.h"

static cge_device *g_dev;
static cge_stream *g_stream;

static int setup(void **state)
{
    if (cge_device_create_cpu(NULL, &g_dev) != CGE_OK)
        return -1;
    return cge_stream_create(g_dev, &g_stream) == CGE_OK ? 0 : -1;
}

static int teardown(void **state)
{
    cge_stream_destroy(g_stream);
    cge_device_destroy(g_dev);
    return 0;
}

static void test_onnx_cases(void **state)
{
    size_t n = sizeof index_cases / sizeof index_cases[0];
    assert_true(n >= 50);
    for (size_t i = 0; i < n; i++)
        fx_run_case(&index_cases[i], g_dev, g_stream, 1e-6, 1e-7);
}

static fx_tensor fxt(cge_dtype dt, cge_shape s, const void *data)
{
    fx_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = s.rank;
    for (int i = 0; i < s.rank; i++)
        t.dims[i] = s.dims[i];
    t.data = data;
    return t;
}

static fx_attr fxa_i(const char *name, int64_t v)
{
    return (fx_attr){.name = name, .kind = CGE_ATTR_INT, .i = v};
}

static fx_attr fxa_s(const char *name, const char *v)
{
    return (fx_attr){.name = name, .kind = CGE_ATTR_STRING, .s = v};
}

static void run(const char *op, int opset, int nin, const fx_tensor *in, int nout,
                const fx_tensor *out, int nattr, const fx_attr *attrs)
{
    fx_case c;
    memset(&c, 0, sizeof c);
    c.name = op;
    c.op = op;
    c.opset = opset;
    c.nin = nin;
    c.nout = nout;
    c.nattr = nattr;
    for (int i = 0; i < nin; i++)
        c.in[i] = in[i];
    for (int i = 0; i < nout; i++)
        c.out[i] = out[i];
    for (int i = 0; i < nattr; i++)
        c.attrs[i] = attrs[i];
    fx_run_case(&c, g_dev, g_stream, 1e-6, 1e-6);
}

static float *seq_f32(int64_t n, int seed)
{
    float *d = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        d[i] = (float)((i * 37 + seed * 101) % 211) - 100.0f;
    return d;
}

/* ---- gathers ------------------------------------------------------------------------- */

static void test_gather_elements_large_and_negative(void **state)
{
    enum { A = 40, B = 50, C = 30, BI = 70 };
    float *x = seq_f32(A * B * C, 1);
    int32_t *idx = malloc(sizeof(int32_t) * A * BI * C);
    float *want = malloc(sizeof(float) * A * BI * C);
    for (int a = 0; a < A; a++)
        for (int j = 0; j < BI; j++)
            for (int c = 0; c < C; c++) {
                int e = (a * BI + j) * C + c;
                int k = (e * 7) % (2 * B) - B; /* [-B, B-1] */
                idx[e] = k;
                int kk = k < 0 ? k + B : k;
                want[e] = x[(a * B + kk) * C + c];
            }
    fx_tensor in[2] = {fxt(CGE_F32, CGE_SHAPE(A, B, C), x), fxt(CGE_I32, CGE_SHAPE(A, BI, C), idx)};
    fx_tensor out[1] = {fxt(CGE_F32, CGE_SHAPE(A, BI, C), want)};
    fx_attr at[1] = {fxa_i("axis", 1)};
    run("GatherElements", 13, 2, in, 1, out, 1, at);
    free(x);
    free(idx);
    free(want);
}

static void test_gather_nd_batch_and_negative(void **state)
{
    /* data [2,3,4,5], batch_dims 1, tuples of 2 -> slices of 5 */
    float *x = seq_f32(120, 2);
    int64_t idx[2 * 3 * 2] = {0, 1, 2, 3, -1, -1, /* batch 1: */ 1, 0, -3, 0, 0, -4};
    float want[2 * 3 * 5];
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 3; t++) {
            int64_t i0 = idx[(b * 3 + t) * 2], i1 = idx[(b * 3 + t) * 2 + 1];
            i0 = i0 < 0 ? i0 + 3 : i0;
            i1 = i1 < 0 ? i1 + 4 : i1;
            for (int e = 0; e < 5; e++)
                want[(b * 3 + t) * 5 + e] = x[((b * 3 + i0) * 4 + i1) * 5 + e];
        }
    fx_tensor in[2] = {fxt(CGE_F32, CGE_SHAPE(2, 3, 4, 5), x),
                       fxt(CGE_I64, CGE_SHAPE(2, 3, 2), idx)};
    fx_tensor out[1] = {fxt(CGE_F32, CGE_SHAPE(2, 3, 5), want)};
    fx_attr at[1] = {fxa_i("batch_dims", 1)};
    run("GatherND", 13, 2, in, 1, out, 1, at);
    free(x);
}

/* ---- scatters ------------------------------------------------------------------------ */

static void test_scatter_nd_large_duplicates(void **state)
{
    enum { R = 6, S = 40000, U = 5 };
    float *x = seq_f32(R * S, 3), *upd = seq_f32(U * S, 4);
    float *want = malloc(sizeof(float) * R * S);
    int64_t idx[U] = {2, -1, 2, -6, 0}; /* duplicates (2, and -6 is 0), a negative */
    static const char *const reds[] = {"add", "mul", "max", "none"};
    for (int r = 0; r < 4; r++) {
        memcpy(want, x, sizeof(float) * R * S);
        for (int u = 0; u < U; u++) {
            int64_t k = idx[u] < 0 ? idx[u] + R : idx[u];
            for (int e = 0; e < S; e++) {
                float *d = &want[k * S + e], v = upd[u * S + e];
                *d = r == 0 ? *d + v : r == 1 ? *d * v : r == 2 ? (v > *d ? v : *d) : v;
            }
        }
        fx_tensor in[3] = {fxt(CGE_F32, CGE_SHAPE(R, S), x), fxt(CGE_I64, CGE_SHAPE(U, 1), idx),
                           fxt(CGE_F32, CGE_SHAPE(U, S), upd)};
        fx_tensor out[1] = {fxt(CGE_F32, CGE_SHAPE(R, S), want)};
        fx_attr at[1] = {fxa_s("reduction", reds[r])};
        run("ScatterND", 16, 3, in, 1, out, 1, at);
    }
    free(x);
    free(upd);
    free(want);
}

static void test_scatter_elements_dtypes(void **state)
{
    /* int32 add along axis 1 with duplicates, large enough for several blocks */
    enum { A = 300, B = 20, BI = 30 };
    int32_t *x = malloc(sizeof(int32_t) * A * B), *want = malloc(sizeof(int32_t) * A * B);
    int64_t *idx = malloc(sizeof(int64_t) * A * BI);
    int32_t *upd = malloc(sizeof(int32_t) * A * BI);
    for (int i = 0; i < A * B; i++)
        x[i] = want[i] = i % 97;
    for (int a = 0; a < A; a++)
        for (int j = 0; j < BI; j++) {
            int e = a * BI + j;
            idx[e] = (e * 13) % (B + 4) - 4; /* -4..B-1 */
            upd[e] = e % 11 - 5;
            int64_t k = idx[e] < 0 ? idx[e] + B : idx[e];
            want[a * B + k] += upd[e];
        }
    fx_tensor in[3] = {fxt(CGE_I32, CGE_SHAPE(A, B), x), fxt(CGE_I64, CGE_SHAPE(A, BI), idx),
                       fxt(CGE_I32, CGE_SHAPE(A, BI), upd)};
    fx_tensor out[1] = {fxt(CGE_I32, CGE_SHAPE(A, B), want)};
    fx_attr at[2] = {fxa_i("axis", 1), fxa_s("reduction", "add")};
    run("ScatterElements", 16, 3, in, 1, out, 2, at);
    /* float16 mul along axis 0, indices smaller than data in the other dim */
    uint16_t hx[6], hu[2], hw[6];
    float fx[6] = {1, 2, 3, 4, 5, 6};
    for (int i = 0; i < 6; i++)
        hx[i] = hw[i] = cge_f32_to_f16(fx[i]);
    hu[0] = cge_f32_to_f16(0.5f);
    hu[1] = cge_f32_to_f16(-2.0f);
    int32_t hi[2] = {2, 2}; /* both to row 2, column 0: 5 * 0.5 * -2 = -5 */
    hw[4] = cge_f32_to_f16(-5.0f);
    fx_tensor in2[3] = {fxt(CGE_F16, CGE_SHAPE(3, 2), hx), fxt(CGE_I32, CGE_SHAPE(2, 1), hi),
                        fxt(CGE_F16, CGE_SHAPE(2, 1), hu)};
    fx_tensor out2[1] = {fxt(CGE_F16, CGE_SHAPE(3, 2), hw)};
    fx_attr at2[1] = {fxa_s("reduction", "mul")};
    run("ScatterElements", 16, 3, in2, 1, out2, 1, at2);
    /* float32 add along axis 0 with indices as wide as data (the rows of
     * Faster R-CNN's RoiAlign merge): the kernel walks rows, not columns;
     * duplicates still add in order, over several blocks */
    enum { R = 40, C = 96, N = 150 };
    float *fd = malloc(sizeof(float) * R * C), *fw = malloc(sizeof(float) * R * C);
    float *fu = malloc(sizeof(float) * N * C);
    int64_t *fi = malloc(sizeof(int64_t) * N * C);
    for (int i = 0; i < R * C; i++)
        fd[i] = fw[i] = (float)(i % 13);
    for (int j = 0; j < N; j++)
        for (int c = 0; c < C; c++) {
            int e = j * C + c;
            fi[e] = (j * 7 + c) % (R + 5) - 5; /* -5..R-1 */
            fu[e] = (float)(e % 9) - 4.0f;
            int64_t k = fi[e] < 0 ? fi[e] + R : fi[e];
            fw[k * C + c] += fu[e];
        }
    fx_tensor in3[3] = {fxt(CGE_F32, CGE_SHAPE(R, C), fd), fxt(CGE_I64, CGE_SHAPE(N, C), fi),
                        fxt(CGE_F32, CGE_SHAPE(N, C), fu)};
    fx_tensor out3[1] = {fxt(CGE_F32, CGE_SHAPE(R, C), fw)};
    fx_attr at3[2] = {fxa_i("axis", 0), fxa_s("reduction", "add")};
    run("ScatterElements", 16, 3, in3, 1, out3, 2, at3);
    /* the same rows assigned (reduction none, the 4-byte store path): where
     * indices repeat, the last update in order wins */
    for (int i = 0; i < R * C; i++)
        fw[i] = fd[i];
    for (int j = 0; j < N; j++)
        for (int c = 0; c < C; c++) {
            int e = j * C + c;
            int64_t k = fi[e] < 0 ? fi[e] + R : fi[e];
            fw[k * C + c] = fu[e];
        }
    run("ScatterElements", 16, 3, in3, 1, out3, 1, at3);
    free(fd);
    free(fw);
    free(fu);
    free(fi);
    free(x);
    free(want);
    free(idx);
    free(upd);
}

/* ScatterElements along axis 2 of data [1, 2, 8, 4] (a key/value cache's
 * slots), launched on a capturing stream with the output in data's buffer
 * (in place, as the planner or a caller's I/O binding arranges it) or
 * apart: `tasks` gets the recording's task count. */
static void scatter_el_captured(float *data, float *out, const int64_t *idx, const float *upd,
                                int32_t *tasks)
{
    const cge_op_def *def = cge_op_find("", "ScatterElements", 16);
    assert_non_null(def);
    const cge_kernel_def *k = cge_op_find_kernel(def, "cpu", CGE_F32);
    assert_non_null(k);
    assert_int_equal(k->inplace_input, 0);
    cge_graph *g = NULL;
    cge_node *node = NULL;
    const char *ins[3] = {"d", "i", "u"}, *outs[1] = {"y"};
    assert_int_equal(cge_graph_create("scatter", &g), CGE_OK);
    assert_int_equal(cge_graph_add_node(g, "ScatterElements", "", "se0", ins, 3, outs, 1, &node),
                     CGE_OK);
    cge_attr axis = CGE_ATTR_I("axis", 2);
    assert_int_equal(cge_attrs_set(cge_node_attrs(node), &axis), CGE_OK);
    cge_tensor in[3] = {op_tensor(CGE_F32, CGE_SHAPE(1, 2, 8, 4), data),
                        op_tensor(CGE_I64, CGE_SHAPE(1, 2, 1, 4), idx),
                        op_tensor(CGE_F32, CGE_SHAPE(1, 2, 1, 4), upd)};
    cge_tensor y = op_tensor(CGE_F32, CGE_SHAPE(1, 2, 8, 4), out);
    cge_kernel_ctx ctx = {.op_type = "ScatterElements", .node_name = "se0", .num_inputs = 3,
                          .inputs = in, .num_outputs = 1, .outputs = &y,
                          .attrs = cge_node_attrs_const(node), .device = g_dev, .num_threads = 2};
    assert_int_equal(cge_stream_begin_capture(g_stream, CGE_CAPTURE_THREAD_LOCAL), CGE_OK);
    cge_status st = k->launch(&ctx, g_stream);
    cge_ri *ri = NULL;
    assert_int_equal(cge_stream_end_capture(g_stream, &ri), CGE_OK);
    assert_int_equal(st, CGE_OK);
    *tasks = cge_ri_num_tasks(ri);
    assert_int_equal(cge_ri_execute(ri, -1), CGE_OK);
    cge_ri_destroy(ri);
    cge_graph_destroy(g);
}

/* In place, the kernel writes only the updated slots (one task, no copy of
 * the data); apart, it copies data into the output first (two tasks). The
 * results are the same bits. */
static void test_scatter_elements_in_place_skips_the_copy(void **state)
{
    (void)state;
    enum { NUMEL = 2 * 8 * 4 };
    float data[NUMEL], apart[NUMEL], upd[8];
    int64_t idx[8];
    for (int i = 0; i < NUMEL; i++)
        data[i] = (float)i * 0.25f - 3.0f;
    for (int i = 0; i < 8; i++) {
        idx[i] = i < 4 ? 5 : -1;   /* head 0 slot 5, head 1 the last slot */
        upd[i] = 100.0f + (float)i;
    }
    memset(apart, 0, sizeof apart);
    int32_t tasks_apart = 0, tasks_in_place = 0;
    scatter_el_captured(data, apart, idx, upd, &tasks_apart);
    scatter_el_captured(data, data, idx, upd, &tasks_in_place);
    assert_int_equal(tasks_apart, 2);
    assert_int_equal(tasks_in_place, 1);
    assert_memory_equal(data, apart, sizeof data);
    assert_true(apart[5 * 4] == 100.0f && apart[8 * 4 + 7 * 4 + 3] == 107.0f);
}

/* An index outside [-dim, dim) is a [kernel] error naming the node, the
 * index, its position and the range, as in ONNX Runtime (these gave zeros or
 * skipped the update before); both signs, int32 and int64 indices. */
static void test_out_of_range_indices_are_errors(void **state)
{
    float x[3 * 4] = {0};
    cge_tensor y;
    cge_attr ax1 = CGE_ATTR_I("axis", 1);
    /* GatherElements on axis 1 (size 4) */
    int64_t ge_hi[3 * 2] = {0, 1, 2, 3, 4, 0}, ge_lo[3 * 2] = {0, -5, 0, 0, 0, 0};
    cge_tensor gin[2] = {op_tensor(CGE_F32, CGE_SHAPE(3, 4), x),
                         op_tensor(CGE_I64, CGE_SHAPE(3, 2), ge_hi)};
    cge_status st = op_run("GatherElements", gin, 2, &ax1, 1, &y, 1);
    op_assert_error(st, "[kernel]", "GatherElements 'node0': index 4 (position 4) is out of "
                                    "range [-4, 4) on axis 1");
    gin[1] = op_tensor(CGE_I64, CGE_SHAPE(3, 2), ge_lo);
    op_assert_error(op_run("GatherElements", gin, 2, &ax1, 1, &y, 1), "[kernel]",
                    "index -5 (position 1) is out of range [-4, 4)");
    /* GatherND: tuples of 2 into [3, 4]; component 1 of tuple 1 is bad */
    int32_t nd[2 * 2] = {2, 3, 1, -5};
    cge_tensor nin[2] = {op_tensor(CGE_F32, CGE_SHAPE(3, 4), x),
                         op_tensor(CGE_I32, CGE_SHAPE(2, 2), nd)};
    op_assert_error(op_run("GatherND", nin, 2, NULL, 0, &y, 1), "[kernel]",
                    "GatherND 'node0': index -5 (position 3) is out of range [-4, 4) on axis 1");
    nd[3] = 0;
    nd[0] = 3;
    op_assert_error(op_run("GatherND", nin, 2, NULL, 0, &y, 1), "[kernel]",
                    "index 3 (position 0) is out of range [-3, 3) on axis 0");
    /* ScatterND: rows of [3, 4] */
    int64_t sn[2] = {1, 7};
    float upd[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8};
    cge_tensor sin[3] = {op_tensor(CGE_F32, CGE_SHAPE(3, 4), x),
                         op_tensor(CGE_I64, CGE_SHAPE(2, 1), sn),
                         op_tensor(CGE_F32, CGE_SHAPE(2, 4), upd)};
    op_assert_error(op_run("ScatterND", sin, 3, NULL, 0, &y, 1), "[kernel]",
                    "ScatterND 'node0': index 7 (position 1) is out of range [-3, 3) on axis 0");
    /* ScatterElements on axis 1 */
    int32_t se[3 * 2] = {0, 1, 2, -4, -9, 3};
    float supd[3 * 2] = {1, 2, 3, 4, 5, 6};
    cge_tensor ein[3] = {op_tensor(CGE_F32, CGE_SHAPE(3, 4), x),
                         op_tensor(CGE_I32, CGE_SHAPE(3, 2), se),
                         op_tensor(CGE_F32, CGE_SHAPE(3, 2), supd)};
    op_assert_error(op_run("ScatterElements", ein, 3, &ax1, 1, &y, 1), "[kernel]",
                    "ScatterElements 'node0': index -9 (position 4) is out of range [-4, 4) on "
                    "axis 1");
    /* the same inputs with every index in range run */
    se[4] = -1;
    assert_int_equal(op_run("ScatterElements", ein, 3, &ax1, 1, &y, 1), CGE_OK);
    op_free_outputs(&y, 1);
}

/* ---- OneHot, NonZero ----------------------------------------------------------------- */

static void test_onehot_axis0_and_out_of_range(void **state)
{
    float idx[4] = {1.0f, -1.0f, 7.5f, -4.0f}; /* depth 3: 1, 2, off, off */
    int32_t depth[1] = {3};
    int64_t vals[2] = {-7, 9};
    int64_t want[3 * 4] = {-7, -7, -7, -7, /* class 0 */ 9, -7, -7, -7, /* 1 */ -7, 9, -7, -7};
    fx_tensor in[3] = {fxt(CGE_F32, CGE_SHAPE(4), idx), fxt(CGE_I32, CGE_SHAPE(1), depth),
                       fxt(CGE_I64, CGE_SHAPE(2), vals)};
    fx_tensor out[1] = {fxt(CGE_I64, CGE_SHAPE(3, 4), want)};
    fx_attr at[1] = {fxa_i("axis", 0)};
    run("OneHot", 11, 3, in, 1, out, 1, at);
}

static void test_nonzero_large_and_dtypes(void **state)
{
    enum { A = 300, B = 401 };
    float *x = malloc(sizeof(float) * A * B);
    int64_t count = 0;
    for (int i = 0; i < A * B; i++) {
        x[i] = (i * 7) % 5 == 0 ? ((i % 2) ? -0.0f : 0.0f) : (float)i;
        count += x[i] != 0.0f;
    }
    int64_t *want = malloc(sizeof(int64_t) * 2 * (size_t)count), p = 0;
    for (int i = 0; i < A * B; i++)
        if (x[i] != 0.0f) {
            want[p] = i / B;
            want[count + p] = i % B;
            p++;
        }
    fx_tensor in[1] = {fxt(CGE_F32, CGE_SHAPE(A, B), x)};
    fx_tensor out[1] = {fxt(CGE_I64, CGE_SHAPE(2, count), want)};
    run("NonZero", 13, 1, in, 1, out, 0, NULL);
    /* float16 -0 is zero; a scalar counts as [1] */
    uint16_t h[4] = {0x8000, 0x3c00, 0x0000, 0x0001};
    int64_t hw[2] = {1, 3};
    fx_tensor hin[1] = {fxt(CGE_F16, CGE_SHAPE(4), h)};
    fx_tensor hout[1] = {fxt(CGE_I64, CGE_SHAPE(1, 2), hw)};
    run("NonZero", 13, 1, hin, 1, hout, 0, NULL);
    int32_t s[1] = {5};
    int64_t sw[1] = {0};
    fx_tensor sin[1] = {fxt(CGE_I32, CGE_SCALAR, s)};
    fx_tensor sout[1] = {fxt(CGE_I64, CGE_SHAPE(1, 1), sw)};
    run("NonZero", 13, 1, sin, 1, sout, 0, NULL);
    free(x);
    free(want);
}

/* Sparse bool masks (thresholded scores): zero 8-byte words are skipped,
 * across dims shorter than a word (3x5x7) and over many blocks. */
static void test_nonzero_sparse_bool(void **state)
{
    static const int64_t dims[2][3] = {{3, 5, 7}, {7, 301, 509}};
    for (int c = 0; c < 2; c++) {
        int64_t d0 = dims[c][0], d1 = dims[c][1], d2 = dims[c][2], n = d0 * d1 * d2;
        uint8_t *x = calloc((size_t)n, 1);
        int64_t count = 0;
        for (int64_t i = 0; i < n; i++)
            if ((i * 2654435761u) % 97 == 3 || i == n - 1 || i == 9) {
                x[i] = 1;
                count++;
            }
        int64_t *want = malloc(sizeof(int64_t) * 3 * (size_t)count), p = 0;
        for (int64_t i = 0; i < n; i++)
            if (x[i]) {
                want[p] = i / (d1 * d2);
                want[count + p] = i / d2 % d1;
                want[2 * count + p] = i % d2;
                p++;
            }
        fx_tensor in[1] = {fxt(CGE_BOOL, CGE_SHAPE(d0, d1, d2), x)};
        fx_tensor out[1] = {fxt(CGE_I64, CGE_SHAPE(3, count), want)};
        run("NonZero", 13, 1, in, 1, out, 0, NULL);
        free(x);
        free(want);
    }
}

/* ---- TopK ---------------------------------------------------------------------------- */

/* Naive stable selection: repeatedly the best remaining, lowest index first. */
static void naive_topk(const float *x, int64_t n, int64_t stride, int64_t k, bool largest,
                       float *v, int64_t *ix, int64_t ostride)
{
    bool *used = calloc((size_t)n, 1);
    for (int64_t s = 0; s < k; s++) {
        int64_t best = -1;
        for (int64_t j = 0; j < n; j++) {
            if (used[j])
                continue;
            float a = x[j * stride];
            if (best < 0 || (largest ? a > x[best * stride] : a < x[best * stride]))
                best = j;
        }
        used[best] = true;
        v[s * ostride] = x[best * stride];
        ix[s * ostride] = best;
    }
    free(used);
}

static void test_topk_large_ties(void **state)
{
    enum { A = 17, N = 1000, I = 3, K = 25 };
    float *x = malloc(sizeof(float) * A * N * I);
    for (int i = 0; i < A * N * I; i++)
        x[i] = (float)((i * 31) % 23); /* many ties */
    float *v = malloc(sizeof(float) * A * K * I);
    int64_t *ix = malloc(sizeof(int64_t) * A * K * I), kk[1] = {K};
    for (int lg = 0; lg < 2; lg++) {
        for (int a = 0; a < A; a++)
            for (int i = 0; i < I; i++)
                naive_topk(x + a * N * I + i, N, I, K, lg, v + a * K * I + i,
                           ix + a * K * I + i, I);
        fx_tensor in[2] = {fxt(CGE_F32, CGE_SHAPE(A, N, I), x), fxt(CGE_I64, CGE_SHAPE(1), kk)};
        fx_tensor out[2] = {fxt(CGE_F32, CGE_SHAPE(A, K, I), v),
                            fxt(CGE_I64, CGE_SHAPE(A, K, I), ix)};
        fx_attr at[2] = {fxa_i("axis", 1), fxa_i("largest", lg)};
        run("TopK", 11, 2, in, 2, out, 2, at);
    }
    /* int64 beyond double precision; k = 0 gives empty outputs */
    int64_t xi[4] = {INT64_MAX - 1, 3, INT64_MAX, INT64_MAX - 1}, k2[1] = {2};
    int64_t wv[2] = {INT64_MAX, INT64_MAX - 1}, wi[2] = {2, 0};
    fx_tensor in2[2] = {fxt(CGE_I64, CGE_SHAPE(4), xi), fxt(CGE_I64, CGE_SHAPE(1), k2)};
    fx_tensor out2[2] = {fxt(CGE_I64, CGE_SHAPE(2), wv), fxt(CGE_I64, CGE_SHAPE(2), wi)};
    run("TopK", 11, 2, in2, 2, out2, 0, NULL);
    k2[0] = 0;
    out2[0].dims[0] = out2[1].dims[0] = 0;
    run("TopK", 11, 2, in2, 2, out2, 0, NULL);
    free(x);
    free(v);
    free(ix);
}

/* ---- CumSum, Trilu, Compress --------------------------------------------------------- */

static void test_cumsum_axes_and_ints(void **state)
{
    enum { A = 7, B = 300, C = 130 };
    int32_t *x = malloc(sizeof(int32_t) * A * B * C), *want = malloc(sizeof(int32_t) * A * B * C);
    for (int i = 0; i < A * B * C; i++)
        x[i] = i % 13 - 6;
    int32_t ax[1] = {-2};
    for (int mode = 0; mode < 4; mode++) {
        bool excl = mode & 1, rev = mode & 2;
        for (int a = 0; a < A; a++)
            for (int c = 0; c < C; c++) {
                int32_t acc = 0;
                for (int s = 0; s < B; s++) {
                    int b = rev ? B - 1 - s : s;
                    int e = (a * B + b) * C + c;
                    if (excl) {
                        want[e] = acc;
                        acc += x[e];
                    } else {
                        acc += x[e];
                        want[e] = acc;
                    }
                }
            }
        fx_tensor in[2] = {fxt(CGE_I32, CGE_SHAPE(A, B, C), x), fxt(CGE_I32, CGE_SCALAR, ax)};
        fx_tensor out[1] = {fxt(CGE_I32, CGE_SHAPE(A, B, C), want)};
        fx_attr at[2] = {fxa_i("exclusive", excl), fxa_i("reverse", rev)};
        run("CumSum", 14, 2, in, 1, out, 2, at);
    }
    free(x);
    free(want);
}

static void test_trilu_extreme_k_and_bool(void **state)
{
    uint8_t x[2 * 3 * 4], up[2 * 3 * 4], lo[2 * 3 * 4];
    for (int i = 0; i < 24; i++)
        x[i] = 1;
    int64_t ks[3] = {INT64_MAX, INT64_MIN, -1};
    for (int t = 0; t < 3; t++) {
        for (int b = 0; b < 2; b++)
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 4; j++) {
                    int e = (b * 3 + i) * 4 + j;
                    __int128 d = (__int128)j - i;
                    up[e] = d >= ks[t];
                    lo[e] = d <= ks[t];
                }
        fx_tensor in[2] = {fxt(CGE_BOOL, CGE_SHAPE(2, 3, 4), x), fxt(CGE_I64, CGE_SCALAR, &ks[t])};
        fx_tensor out[1] = {fxt(CGE_BOOL, CGE_SHAPE(2, 3, 4), up)};
        fx_attr at[1] = {fxa_i("upper", 1)};
        run("Trilu", 14, 2, in, 1, out, 1, at);
        out[0] = fxt(CGE_BOOL, CGE_SHAPE(2, 3, 4), lo);
        at[0] = fxa_i("upper", 0);
        run("Trilu", 14, 2, in, 1, out, 1, at);
    }
}

static void test_compress_large(void **state)
{
    enum { A = 50, B = 700, C = 9 };
    float *x = seq_f32(A * B * C, 5);
    uint8_t cond[B - 3]; /* shorter than the axis: the rest is dropped */
    int64_t cnt = 0;
    for (int j = 0; j < B - 3; j++)
        cnt += cond[j] = (j % 3 == 1);
    float *want = malloc(sizeof(float) * A * (size_t)cnt * C);
    for (int a = 0, p = 0; a < A; a++)
        for (int j = 0; j < B - 3; j++)
            if (cond[j])
                for (int c = 0; c < C; c++)
                    want[p++] = x[(a * B + j) * C + c];
    fx_tensor in[2] = {fxt(CGE_F32, CGE_SHAPE(A, B, C), x), fxt(CGE_BOOL, CGE_SHAPE(B - 3), cond)};
    fx_tensor out[1] = {fxt(CGE_F32, CGE_SHAPE(A, cnt, C), want)};
    fx_attr at[1] = {fxa_i("axis", -2)};
    run("Compress", 11, 2, in, 1, out, 1, at);
    free(x);
    free(want);
}

/* ---- meta ---------------------------------------------------------------------------- */

static void test_meta_dynamic_and_errors(void **state)
{
    cge_tensor_desc out[2] = {{.name = ""}, {.name = ""}};
    cge_tensor_desc nz = {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(3, 4)};
    assert_int_equal(op_infer("NonZero", &nz, NULL, 1, NULL, 0, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape}, CGE_SHAPE(2, CGE_DIM_DYNAMIC));
    cge_tensor_desc tk[2] = {{.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(3, 4)},
                             {.name = "", .dtype = CGE_I64, .shape = CGE_SHAPE(1)}};
    assert_int_equal(op_infer("TopK", tk, NULL, 2, NULL, 0, out, 2), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[1].shape}, CGE_SHAPE(3, CGE_DIM_DYNAMIC));
    int64_t k5[1] = {5};
    const void *vals[2] = {NULL, k5};
    op_assert_error(op_infer("TopK", tk, vals, 2, NULL, 0, out, 2), "[meta]", "K = 5");
    cge_tensor_desc oh[3] = {{.name = "", .dtype = CGE_I64, .shape = CGE_SHAPE(2)},
                             {.name = "", .dtype = CGE_I64, .shape = CGE_SCALAR},
                             {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(2)}};
    assert_int_equal(op_infer("OneHot", oh, NULL, 3, NULL, 0, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape}, CGE_SHAPE(2, CGE_DIM_DYNAMIC));
    cge_tensor_desc cp[2] = {{.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(3, 4)},
                             {.name = "", .dtype = CGE_BOOL, .shape = CGE_SHAPE(4)}};
    cge_attr ax1 = CGE_ATTR_I("axis", 1);
    assert_int_equal(op_infer("Compress", cp, NULL, 2, &ax1, 1, out, 1), CGE_OK);
    op_assert_shape(&(cge_tensor){.shape = out[0].shape}, CGE_SHAPE(3, CGE_DIM_DYNAMIC));
    cge_attr ax0 = CGE_ATTR_I("axis", 0);
    op_assert_error(op_infer("Compress", cp, NULL, 2, &ax0, 1, out, 1), "[meta]",
                    "condition has 4 entries");
    cge_tensor_desc ge[2] = {{.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(3, 4)},
                             {.name = "", .dtype = CGE_I64, .shape = CGE_SHAPE(5, 2)}};
    op_assert_error(op_infer("GatherElements", ge, NULL, 2, &ax1, 1, out, 1), "[meta]",
                    "larger than data");
    cge_tensor_desc sn[3] = {{.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(4, 5)},
                             {.name = "", .dtype = CGE_I64, .shape = CGE_SHAPE(2, 1)},
                             {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(2, 4)}};
    op_assert_error(op_infer("ScatterND", sn, NULL, 3, NULL, 0, out, 1), "[meta]", "updates");
    cge_attr bad = CGE_ATTR_S("reduction", "avg");
    sn[2].shape = CGE_SHAPE(2, 5);
    op_assert_error(op_infer("ScatterND", sn, NULL, 3, &bad, 1, out, 1), "[meta]", "avg");
    cge_tensor_desc tr = {.name = "", .dtype = CGE_F32, .shape = CGE_SHAPE(4)};
    op_assert_error(op_infer("Trilu", &tr, NULL, 1, NULL, 0, out, 1), "[meta]", "rank >= 2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onnx_cases),
        cmocka_unit_test(test_gather_elements_large_and_negative),
        cmocka_unit_test(test_gather_nd_batch_and_negative),
        cmocka_unit_test(test_out_of_range_indices_are_errors),
        cmocka_unit_test(test_scatter_nd_large_duplicates),
        cmocka_unit_test(test_scatter_elements_dtypes),
        cmocka_unit_test(test_onehot_axis0_and_out_of_range),
        cmocka_unit_test(test_nonzero_large_and_dtypes),
        cmocka_unit_test(test_nonzero_sparse_bool),
        cmocka_unit_test(test_topk_large_ties),
        cmocka_unit_test(test_cumsum_axes_and_ints),
        cmocka_unit_test(test_trilu_extreme_k_and_bool),
        cmocka_unit_test(test_compress_large),
        cmocka_unit_test(test_scatter_elements_in_place_skips_the_copy),
        cmocka_unit_test(test_meta_dynamic_and_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
