/* The grouped channels-last convolution kernel (conv_grouped.c): the packed
 * AVX-512 tiles and the plain loop against a reference written here, at the
 * zoo's group widths (4 to 128 channels per group) and odd shapes (channels
 * per group not a multiple of 16, more outputs than inputs per group, prime
 * sizes, stride 2, dilation, asymmetric pads, images narrower than the
 * window, 1-D, batch 3), then through FusedConv (channels_last) with its
 * bias, residual and activations, beside oneDNN's primitive. */
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
#include "ops/conv_grouped.h"
#include "base/cpu_isa.h"

/* Whether this machine (under CGE_CPU_ISA's cap) runs the grouped kernel:
 * AVX-512, or AVX2 + FMA for the wide-group tiles. */
static bool gconv_isa(void)
{
    return cge__cpu_has(CGE_CPU_AVX512F) || cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA);
}

typedef struct gcase {
    const char *name;
    int64_t N, C, M, G, H, W, KH, KW, SH, SW, DH, DW, PT, PL, PB, PR;
} gcase;

static const gcase cases[] = {
    /* resnext50_32x4d's first stage (4 per group) and its stride-2 block (8) */
    {"resnext_s1_gw4", 1, 128, 128, 32, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"resnext_s2_gw8_stride2", 1, 256, 256, 32, 56, 56, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    /* regnet group widths 16, 24 (a masked vector), 48 (3 vectors) */
    {"regnet_gw16", 1, 160, 160, 10, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"regnet_gw24", 1, 216, 216, 9, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"regnet_gw48_stride2", 1, 192, 192, 4, 29, 29, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {"regnet_gw16_stride2", 1, 128, 128, 8, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    /* 112 (4 + 3 vectors) and 128 (4 + 4), weights over 1 MiB: group-major */
    {"regnet_gw112", 1, 448, 448, 4, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"regnet_gw128", 1, 512, 512, 4, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    /* odd: 4 in, 8 out per group, batch 3, prime sizes, asymmetric pads */
    {"gw4_to_8_batch3", 3, 12, 24, 3, 13, 11, 3, 3, 2, 2, 1, 1, 1, 0, 2, 1},
    {"gw2_to_3_dil2", 1, 10, 15, 5, 7, 5, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
    {"gw17_batch3", 3, 34, 34, 2, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"gw16_to_32_1x1", 1, 64, 128, 4, 9, 9, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
    {"narrower_than_window", 2, 8, 8, 2, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"k5_stride2", 1, 40, 40, 2, 9, 11, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
    {"conv1d", 2, 6, 6, 3, 1, 17, 1, 5, 1, 1, 1, 1, 0, 2, 0, 2},
    /* narrow groups (2, 4, 8 in and out, whole groups in a vector): an odd
     * vector count, batch 3 with stride 2 and asymmetric pads, images
     * narrower than the window, 1-D */
    {"narrow_gw8_3vectors", 1, 48, 48, 6, 10, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"narrow_gw2_batch3_stride2", 3, 48, 48, 24, 11, 13, 3, 3, 2, 2, 1, 1, 1, 0, 0, 1},
    {"narrow_gw4_tiny", 2, 32, 32, 8, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"narrow_gw4_dil2_conv1d", 1, 64, 64, 16, 1, 23, 1, 3, 1, 1, 1, 2, 0, 2, 0, 2},
};
#define NUM_CASES ((int)(sizeof cases / sizeof cases[0]))

static int64_t out_h(const gcase *c)
{
    return (c->H + c->PT + c->PB - ((c->KH - 1) * c->DH + 1)) / c->SH + 1;
}

static int64_t out_w(const gcase *c)
{
    return (c->W + c->PL + c->PR - ((c->KW - 1) * c->DW + 1)) / c->SW + 1;
}

enum { A_NONE, A_RELU, A_SILU, A_CLIP };

/* NHWC X, ONNX W [M, C/G, KH, KW], NHWC Y, in double. */
static void reference(const gcase *c, const float *x, const float *w, const float *b,
                      const float *z, int act, float *y)
{
    int64_t OH = out_h(c), OW = out_w(c), cpg = c->C / c->G, mpg = c->M / c->G;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t o = 0; o < c->M; o++) {
                    int64_t g = o / mpg;
                    double acc = b ? b[o] : 0.0;
                    for (int64_t ci = 0; ci < cpg; ci++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                int64_t ih = oh * c->SH - c->PT + kh * c->DH;
                                int64_t iw = ow * c->SW - c->PL + kw * c->DW;
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
                                    continue;
                                acc += (double)x[((n * c->H + ih) * c->W + iw) * c->C + g * cpg +
                                                 ci] *
                                       w[((o * cpg + ci) * c->KH + kh) * c->KW + kw];
                            }
                    int64_t yo = ((n * OH + oh) * OW + ow) * c->M + o;
                    if (z)
                        acc += z[yo];
                    if (act == A_RELU)
                        acc = acc < 0.0 ? 0.0 : acc;
                    else if (act == A_SILU)
                        acc = acc / (1.0 + exp(-acc));
                    else if (act == A_CLIP)
                        acc = acc < -0.5 ? -0.5 : acc > 0.75 ? 0.75 : acc;
                    y[yo] = (float)acc;
                }
}

/* |got - want| within float32 rounding of a sum of `depth` products. */
static void assert_near(const char *what, const gcase *c, const float *got, const float *want,
                        int64_t n)
{
    double tol = 2e-6 * (double)(c->C / c->G * c->KH * c->KW + 2);
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs((double)want[i]))))
            fail_msg("%s %s: element %lld is %.9g, expected %.9g", c->name, what, (long long)i,
                     (double)got[i], (double)want[i]);
}

static bool init_case(const gcase *c, cge__gconv *gc)
{
    /* cge__gconv_init takes the start pads; the end pads follow from the
     * output size */
    const int64_t in[2] = {c->H, c->W}, out[2] = {out_h(c), out_w(c)}, k[2] = {c->KH, c->KW},
                  s[2] = {c->SH, c->SW}, d[2] = {c->DH, c->DW}, pb[2] = {c->PT, c->PL};
    return cge__gconv_init(gc, c->N, c->C, c->M, c->G, in, out, k, s, d, pb);
}

/* The packed tiles and the plain loop, every item, against the reference,
 * with and without bias, residual and ReLU. */
static void test_kernel_matches_reference(void **state)
{
    (void)state;
    if (!gconv_isa())
        skip();
    int narrow = 0, group_major = 0;
    for (int ci = 0; ci < NUM_CASES; ci++) {
        const gcase *c = &cases[ci];
        cge__gconv gc;
        assert_true(init_case(c, &gc));
        narrow += gc.narrow;
        /* the AVX2 tiles exactly where AVX-512 is absent or capped off */
        assert_int_equal(gc.avx2, !cge__cpu_has(CGE_CPU_AVX512F));
        group_major += gc.group_major;
        int64_t nx = c->N * c->H * c->W * c->C, ny = c->N * out_h(c) * out_w(c) * c->M;
        int64_t nw = c->M * (c->C / c->G) * c->KH * c->KW;
        float *x = op_random_floats(nx, 1 + ci), *w = op_random_floats(nw, 100 + ci);
        float *b = op_random_floats(c->M, 200 + ci), *z = op_random_floats(ny, 300 + ci);
        float *wp = aligned_alloc(64, (size_t)(cge__gconv_packed_floats(&gc) * 4 + 64) / 64 * 64);
        float *y = malloc((size_t)ny * sizeof(float)), *want = malloc((size_t)ny * sizeof(float));
        assert_non_null(wp);
        assert_non_null(y);
        assert_non_null(want);
        cge__gconv_pack(&gc, w, wp);
        for (int variant = 0; variant < 3; variant++) {
            const float *bv = variant == 1 ? NULL : b, *zv = variant == 2 ? z : NULL;
            bool relu = variant != 1;
            reference(c, x, w, bv, zv, relu ? A_RELU : A_NONE, want);
            for (int64_t i = 0; i < ny; i++)
                y[i] = NAN;
            /* in two halves, as two blocks of a launch would */
            int64_t items = cge__gconv_items(&gc);
            cge__gconv_run(&gc, wp, x, bv, zv, y, relu, 0, items / 2);
            cge__gconv_run(&gc, wp, x, bv, zv, y, relu, items / 2, items);
            assert_near("packed", c, y, want, ny);
            for (int64_t i = 0; i < ny; i++)
                y[i] = NAN;
            cge__gconv_run_ref(&gc, w, x, bv, zv, y, relu, 0, items);
            assert_near("plain loop", c, y, want, ny);
        }
        free(x), free(w), free(b), free(z), free(wp), free(y), free(want);
    }
    /* both layouts and both item orders were covered */
    /* narrow groups have tiles of their own on AVX-512 only */
    if (cge__cpu_has(CGE_CPU_AVX512F))
        assert_true(narrow >= 5 && narrow <= NUM_CASES - 5);
    else
        assert_int_equal(narrow, 0);
    assert_true(group_major >= 2);
}

/* FusedConv's shapes are the logical NCHW ones, its bytes channels-last
 * (as the layout pass leaves them): the reference's NHWC arrays as they are. */
static cge_status run_fused(const gcase *c, const float *x, const float *w, const float *b,
                            const float *z, const char *act, cge_tensor *out)
{
    int64_t OH = out_h(c), OW = out_w(c);
    bool one_d = c->H == 1 && c->KH == 1;
    cge_shape xs = one_d ? CGE_SHAPE(c->N, c->C, c->W) : CGE_SHAPE(c->N, c->C, c->H, c->W);
    cge_shape ws = one_d ? CGE_SHAPE(c->M, c->C / c->G, c->KW)
                         : CGE_SHAPE(c->M, c->C / c->G, c->KH, c->KW);
    cge_shape ys = one_d ? CGE_SHAPE(c->N, c->M, OW) : CGE_SHAPE(c->N, c->M, OH, OW);
    cge_tensor in[4] = {op_tensor(CGE_F32, xs, x), op_tensor(CGE_F32, ws, w),
                        op_tensor(CGE_F32, CGE_SHAPE(c->M), b),
                        z ? op_tensor(CGE_F32, ys, z) : op_absent()};
    const int64_t pads2[4] = {c->PT, c->PL, c->PB, c->PR}, pads1[2] = {c->PL, c->PR};
    const int64_t st2[2] = {c->SH, c->SW}, dl2[2] = {c->DH, c->DW};
    cge_attr at[] = {
        CGE_ATTR_I("group", c->G),
        CGE_ATTR_INTS("pads", one_d ? pads1 : pads2, one_d ? 2 : 4),
        CGE_ATTR_INTS("strides", one_d ? st2 + 1 : st2, one_d ? 1 : 2),
        CGE_ATTR_INTS("dilations", one_d ? dl2 + 1 : dl2, one_d ? 1 : 2),
        CGE_ATTR_S("activation", act),
        CGE_ATTR_F("min", -0.5f),
        CGE_ATTR_F("max", 0.75f),
        CGE_ATTR_I("channels_last", 1),
        CGE_ATTR_I("w_const", 1),
    };
    return op_run_domain(CGE_DOMAIN_FUSED, "FusedConv", in, z ? 4 : 3, at,
                         (int32_t)(sizeof at / sizeof at[0]), out, 1);
}

/* FusedConv with channels_last: the grouped kernel is chosen (it packs W at
 * prepare) and gives the reference's result with each activation (ReLU in
 * its tiles, the others after them) and a residual; oneDNN's primitive
 * ($CGE_GROUPED_CONV=0) agrees. */
static void test_fused_conv_channels_last(void **state)
{
    (void)state;
    if (!cge_fused_conv_channels_last_available() && !gconv_isa())
        skip();
    static const struct {
        const char *name;
        int act;
    } acts[] = {{"relu", A_RELU}, {"silu", A_SILU}, {"clip", A_CLIP}, {"none", A_NONE}};
    for (int ci = 0; ci < NUM_CASES; ci++) {
        const gcase *c = &cases[ci];
        int64_t nx = c->N * c->H * c->W * c->C, ny = c->N * out_h(c) * out_w(c) * c->M;
        int64_t nw = c->M * (c->C / c->G) * c->KH * c->KW;
        float *x = op_random_floats(nx, 11 + ci), *w = op_random_floats(nw, 111 + ci);
        float *b = op_random_floats(c->M, 211 + ci), *z = op_random_floats(ny, 311 + ci);
        float *want = malloc((size_t)ny * sizeof(float));
        assert_non_null(want);
        for (int a = 0; a < 4; a++) {
            const float *zv = a == 3 || ci % 2 ? z : NULL;
            reference(c, x, w, b, zv, acts[a].act, want);
            for (int path = 0; path < 2; path++) {
                if (path == 1 && !cge_fused_conv_channels_last_available())
                    continue;
                /* path 0: every shape on this kernel ("all"); path 1: oneDNN */
                setenv("CGE_GROUPED_CONV", path ? "0" : "all", 1);
                int64_t packs = cge__gconv_pack_count();
                cge_tensor out[1];
                cge_status st = run_fused(c, x, w, b, zv, acts[a].name, out);
                if (st)
                    fail_msg("%s %s: %s", c->name, acts[a].name, cge_last_error());
                if (path == 0 && gconv_isa())
                    assert_int_equal(cge__gconv_pack_count(), packs + 1);
                else
                    assert_int_equal(cge__gconv_pack_count(), packs);
                assert_near(path ? "oneDNN" : "grouped kernel", c, out[0].data, want, ny);
                op_free_outputs(out, 1);
            }
        }
        unsetenv("CGE_GROUPED_CONV");
        free(x), free(w), free(b), free(z), free(want);
    }
}

/* By default only the preferred class (narrow groups of 2 or 4, on
 * AVX-512) leaves oneDNN: a 4-per-group node packs for this kernel, a
 * 16-per-group one does not. */
static void test_default_selection(void **state)
{
    (void)state;
    if (!cge_fused_conv_channels_last_available() || !gconv_isa())
        skip();
    unsetenv("CGE_GROUPED_CONV");
    static const gcase pick[2] = {
        {"gw4", 1, 64, 64, 16, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
        {"gw16", 1, 64, 64, 4, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    };
    for (int i = 0; i < 2; i++) {
        const gcase *c = &pick[i];
        cge__gconv gc;
        assert_true(init_case(c, &gc));
        /* on AVX2 every grouped node stays on oneDNN by default (docs/guide.md,
         * "AVX2 depthwise and grouped kernels") */
        bool picked = i == 0 && cge__cpu_has(CGE_CPU_AVX512F);
        assert_int_equal(cge__gconv_preferred(&gc), picked);
        int64_t nx = c->N * c->H * c->W * c->C, ny = c->N * out_h(c) * out_w(c) * c->M;
        float *x = op_random_floats(nx, 5), *w = op_random_floats(c->M * (c->C / c->G) * 9, 6);
        float *b = op_random_floats(c->M, 7), *want = malloc((size_t)ny * sizeof(float));
        assert_non_null(want);
        reference(c, x, w, b, NULL, A_RELU, want);
        int64_t packs = cge__gconv_pack_count();
        cge_tensor out[1];
        assert_int_equal(run_fused(c, x, w, b, NULL, "relu", out), CGE_OK);
        assert_int_equal(cge__gconv_pack_count(), packs + picked);
        assert_near("default", c, out[0].data, want, ny);
        op_free_outputs(out, 1);
        free(x), free(w), free(b), free(want);
    }
}

/* Shapes the kernel refuses: one input channel per group (depthwise), no
 * groups, channels that do not split. */
static void test_refused_shapes(void **state)
{
    (void)state;
    cge__gconv gc;
    const int64_t in[2] = {8, 8}, out[2] = {8, 8}, k[2] = {3, 3}, s[2] = {1, 1}, d[2] = {1, 1},
                  pb[2] = {1, 1};
    assert_false(cge__gconv_init(&gc, 1, 32, 32, 32, in, out, k, s, d, pb));
    assert_false(cge__gconv_init(&gc, 1, 32, 32, 1, in, out, k, s, d, pb));
    assert_false(cge__gconv_init(&gc, 1, 30, 32, 4, in, out, k, s, d, pb));
    assert_int_equal(cge__gconv_init(&gc, 1, 32, 32, 4, in, out, k, s, d, pb),
                     gconv_isa() != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_matches_reference),
        cmocka_unit_test(test_fused_conv_channels_last),
        cmocka_unit_test(test_default_selection),
        cmocka_unit_test(test_refused_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
