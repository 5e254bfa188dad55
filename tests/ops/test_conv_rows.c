/* The channels-last 1-D convolution as one GEMM over overlapping windows
 * (conv_rows.c): the kernel against a reference written here, at a
 * wav2vec-like front end's shapes and odd ones (one input channel, fewer
 * than 16 outputs, prime sizes, a stride longer than the window, pads at
 * both ends, an input shorter than the window, windows only in the padding,
 * batch 3, a one-tap window), in two halves of its tiles as two blocks
 * would run them; then through FusedConv (channels_last) with its bias,
 * residual and activations, where it packs W once (where it is preferred:
 * AVX-512), and beside oneDNN's primitive ($CGE_CONV_ROWS=0); the shapes it
 * leaves to oneDNN. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/fused_ops.h"
#include "op_runner.h"
#include "ops/conv_rows.h"

typedef struct rcase {
    const char *name;
    int64_t N, C, M, W, K, S, PL, PR;
} rcase;

static const rcase cases[] = {
    {"wav2vec_first", 1, 1, 64, 16000, 10, 5, 0, 0},
    {"wav2vec_second", 1, 64, 128, 3199, 3, 2, 0, 0},
    {"k2_s2_256", 1, 128, 256, 799, 2, 2, 0, 0},
    {"odd_pads", 1, 3, 5, 17, 4, 3, 2, 1},
    {"stride_over_window", 2, 7, 37, 41, 2, 4, 1, 1},
    {"same_pad_batch3", 3, 16, 33, 29, 3, 1, 1, 1},
    {"shorter_than_window", 1, 5, 19, 2, 5, 1, 2, 2},
    {"pads_only_windows", 2, 4, 16, 1, 3, 1, 2, 2},
    {"one_tap", 1, 24, 40, 13, 1, 1, 0, 0},
    {"wide_pads_stride2", 1, 9, 48, 31, 7, 2, 3, 3},
};
#define NUM_CASES ((int)(sizeof cases / sizeof cases[0]))

static int64_t out_w(const rcase *c)
{
    return (c->W + c->PL + c->PR - c->K) / c->S + 1;
}

enum { A_NONE, A_RELU, A_SILU, A_CLIP, A_GELU };

/* X [N, W, C], W [M, C, K], Y [N, OW, M], in double. */
static void reference(const rcase *c, const float *x, const float *w, const float *b,
                      const float *z, int act, float *y)
{
    int64_t OW = out_w(c);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t t = 0; t < OW; t++)
            for (int64_t m = 0; m < c->M; m++) {
                double acc = b ? b[m] : 0.0;
                for (int64_t ci = 0; ci < c->C; ci++)
                    for (int64_t k = 0; k < c->K; k++) {
                        int64_t pos = t * c->S - c->PL + k;
                        if (pos >= 0 && pos < c->W)
                            acc += (double)x[(n * c->W + pos) * c->C + ci] *
                                   w[(m * c->C + ci) * c->K + k];
                    }
                int64_t yo = (n * OW + t) * c->M + m;
                if (z)
                    acc += z[yo];
                if (act == A_RELU)
                    acc = acc < 0.0 ? 0.0 : acc;
                else if (act == A_SILU)
                    acc = acc / (1.0 + exp(-acc));
                else if (act == A_CLIP)
                    acc = acc < -0.5 ? -0.5 : acc > 0.75 ? 0.75 : acc;
                else if (act == A_GELU)
                    acc = 0.5 * acc * erfc(-acc / sqrt(2.0));
                y[yo] = (float)acc;
            }
}

static void assert_near(const char *what, const rcase *c, const float *got, const float *want,
                        int64_t n)
{
    double tol = 2e-6 * (double)(c->C * c->K + 2);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs((double)want[i]))))
            fail_msg("%s %s: element %lld is %.9g, expected %.9g", c->name, what, (long long)i,
                     (double)got[i], (double)want[i]);
}

static bool init_case(const rcase *c, cge__conv_rows *g)
{
    return cge__conv_rows_init(g, c->N, c->C, c->M, c->W, out_w(c), c->K, c->S, 1, c->PL, c->PR);
}

/* The packed product over every image, in two halves of its rows and in
 * column tiles of 16, with and without the bias. */
static void test_kernel_matches_reference(void **state)
{
    (void)state;
    for (int ci = 0; ci < NUM_CASES; ci++) {
        const rcase *c = &cases[ci];
        cge__conv_rows g;
        assert_true(init_case(c, &g));
        int64_t OW = out_w(c), nx = c->N * c->W * c->C, ny = c->N * OW * c->M;
        float *x = op_random_floats(nx, 1 + ci), *w = op_random_floats(c->M * c->C * c->K, 100 + ci);
        float *b = op_random_floats(c->M, 200 + ci);
        float *wp = malloc((size_t)cge__conv_rows_packed_floats(&g) * sizeof(float));
        int64_t npad = cge__conv_rows_pad_floats(&g);
        float *pads = npad ? malloc((size_t)npad * sizeof(float)) : NULL;
        float *y = malloc((size_t)ny * sizeof(float)), *want = malloc((size_t)ny * sizeof(float));
        assert_non_null(wp);
        assert_non_null(y);
        assert_non_null(want);
        assert_true(cge__conv_rows_pack(&g, w, wp));
        for (int64_t n = 0; n < c->N; n++)
            cge__conv_rows_fill_pads(&g, x, n, pads);
        for (int variant = 0; variant < 2; variant++) {
            const float *bv = variant ? NULL : b;
            reference(c, x, w, bv, NULL, A_NONE, want);
            for (int64_t i = 0; i < ny; i++)
                y[i] = NAN;
            for (int64_t n = 0; n < c->N; n++)
                for (int64_t j0 = 0; j0 < c->M; j0 += 16) {
                    cge__conv_rows_tile(&g, wp, x, pads, bv, y, n, 0, OW / 2, j0, j0 + 16,
                                        cge__gemm_isa_best());
                    cge__conv_rows_tile(&g, wp, x, pads, bv, y, n, OW / 2, OW, j0, j0 + 16,
                                        cge__gemm_isa_best());
                }
            assert_near("kernel", c, y, want, ny);
        }
        free(x), free(w), free(b), free(wp), free(pads), free(y), free(want);
    }
}

/* FusedConv's shapes are the logical NCW ones, its bytes channels-last. */
static cge_status run_fused(const rcase *c, const float *x, const float *w, const float *b,
                            const float *z, const char *act, int64_t dilation, cge_tensor *out)
{
    int64_t OW = (c->W + c->PL + c->PR - ((c->K - 1) * dilation + 1)) / c->S + 1;
    cge_shape ys = CGE_SHAPE(c->N, c->M, OW);
    cge_tensor in[4] = {op_tensor(CGE_F32, CGE_SHAPE(c->N, c->C, c->W), x),
                        op_tensor(CGE_F32, CGE_SHAPE(c->M, c->C, c->K), w),
                        op_tensor(CGE_F32, CGE_SHAPE(c->M), b),
                        z ? op_tensor(CGE_F32, ys, z) : op_absent()};
    const int64_t pads[2] = {c->PL, c->PR}, st[1] = {c->S}, dl[1] = {dilation};
    cge_attr at[] = {
        CGE_ATTR_INTS("pads", pads, 2),
        CGE_ATTR_INTS("strides", st, 1),
        CGE_ATTR_INTS("dilations", dl, 1),
        CGE_ATTR_S("activation", act),
        CGE_ATTR_F("min", -0.5f),
        CGE_ATTR_F("max", 0.75f),
        CGE_ATTR_I("channels_last", 1),
        CGE_ATTR_I("w_const", 1),
    };
    return op_run_domain(CGE_DOMAIN_FUSED, "FusedConv", in, z ? 4 : 3, at,
                         (int32_t)(sizeof at / sizeof at[0]), out, 1);
}

/* FusedConv with channels_last: this path is chosen (W packed once, at
 * prepare) and gives the reference's result with each activation and a
 * residual; oneDNN's primitive ($CGE_CONV_ROWS=0) agrees. */
static void test_fused_conv_channels_last(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int act;
    } acts[] = {{"relu", A_RELU}, {"silu", A_SILU}, {"clip", A_CLIP}, {"gelu", A_GELU},
                {"none", A_NONE}};
    for (int ci = 0; ci < NUM_CASES; ci++) {
        const rcase *c = &cases[ci];
        int64_t ny = c->N * out_w(c) * c->M;
        float *x = op_random_floats(c->N * c->W * c->C, 11 + ci);
        float *w = op_random_floats(c->M * c->C * c->K, 111 + ci);
        float *b = op_random_floats(c->M, 211 + ci), *z = op_random_floats(ny, 311 + ci);
        float *want = malloc((size_t)ny * sizeof(float));
        assert_non_null(want);
        for (int a = 0; a < 5; a++) {
            const float *zv = a == 4 || ci % 2 ? z : NULL;
            reference(c, x, w, b, zv, acts[a].act, want);
            for (int path = 0; path < 2; path++) {
                if (path == 1 && !cge_fused_conv_channels_last_available())
                    continue;
                if (path)
                    setenv("CGE_CONV_ROWS", "0", 1);
                int64_t packs = cge__conv_rows_pack_count();
                cge_tensor out[1];
                cge_status st = run_fused(c, x, w, b, zv, acts[a].name, 1, out);
                unsetenv("CGE_CONV_ROWS");
                if (st)
                    fail_msg("%s %s: %s", c->name, acts[a].name, cge_last_error());
                bool rows = path == 0 && cge__conv_rows_preferred();
                assert_int_equal(cge__conv_rows_pack_count(), packs + rows);
                assert_near(rows ? "rows" : "oneDNN", c, out[0].data, want, ny);
                op_free_outputs(out, 1);
            }
        }
        free(x), free(w), free(b), free(z), free(want);
    }
}

/* Dilation stays on oneDNN (the window is not contiguous), as do groups;
 * geometry the kernel refuses. */
static void test_refused_shapes(void **state)
{
    (void)state;
    cge__conv_rows g;
    assert_false(cge__conv_rows_init(&g, 1, 8, 8, 20, 16, 3, 1, 2, 0, 0)); /* dilation 2 */
    assert_false(cge__conv_rows_init(&g, 1, 8, 8, 20, 17, 3, 1, 1, 0, 0)); /* wrong OW */
    assert_false(cge__conv_rows_init(&g, 0, 8, 8, 20, 18, 3, 1, 1, 0, 0));
    /* padded windows past the buffer's bound: nearly an im2col */
    assert_false(cge__conv_rows_init(&g, 64, 512, 8, 4, 2052, 1, 1, 1, 1024, 1024));
    if (!cge_fused_conv_channels_last_available())
        skip();
    const rcase c = {"dilated", 1, 8, 16, 20, 3, 1, 0, 0};
    float *x = op_random_floats(20 * 8, 3), *w = op_random_floats(16 * 8 * 3, 4), *b = op_random_floats(16, 5);
    int64_t packs = cge__conv_rows_pack_count();
    cge_tensor out[1];
    assert_int_equal(run_fused(&c, x, w, b, NULL, "none", 2, out), CGE_OK);
    assert_int_equal(cge__conv_rows_pack_count(), packs);
    op_free_outputs(out, 1);
    free(x), free(w), free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_matches_reference),
        cmocka_unit_test(test_fused_conv_channels_last),
        cmocka_unit_test(test_refused_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
