/* depthwise_nhwc: the channels-last depthwise kernel against a double
 * reference at the zoo's shapes and odd ones (1x1 inputs, prime sizes,
 * channels not a multiple of 16, stride 2 over odd sizes, every padding
 * form, inputs smaller than the window, 1-D), with every epilogue; each
 * fused epilogue gives the bits of the unfused one applied to the kernel's
 * plain output; any cut of the work into blocks gives the same bits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/cpu_isa.h"
#include "ops/depthwise_nhwc.h"
#include "ops/fast_math.h"

typedef struct dw_case {
    int64_t n, c, h, w;
    int kh, kw, sh, sw, pt, pl, pb, pr;
} dw_case;

static const dw_case cases[] = {
    /* the zoo's kinds (smaller where the reference would be slow) */
    {1, 32, 56, 56, 3, 3, 1, 1, 1, 1, 1, 1},      /* mobilenet_v2's first, at half size */
    {1, 96, 28, 28, 3, 3, 2, 2, 1, 1, 1, 1},      /* stride 2, even input */
    {1, 144, 28, 28, 3, 3, 2, 2, 0, 0, 1, 1},     /* TF-style SAME: pads at the end */
    {1, 240, 14, 14, 5, 5, 1, 1, 2, 2, 2, 2},     /* mnasnet / efficientnet 5x5 */
    {1, 72, 28, 28, 5, 5, 2, 2, 2, 2, 2, 2},      /* mobilenet_v3 5x5 stride 2 */
    {1, 96, 28, 28, 7, 7, 1, 1, 3, 3, 3, 3},      /* convnext */
    {1, 768, 7, 7, 7, 7, 1, 1, 3, 3, 3, 3},       /* convnext's last stage */
    {1, 576, 7, 7, 5, 5, 1, 1, 2, 2, 2, 2},
    {1, 960, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1},
    /* odd ones */
    {1, 24, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1},        /* 1x1 input */
    {1, 16, 1, 1, 7, 7, 2, 2, 3, 3, 3, 3},
    {2, 37, 13, 11, 3, 3, 1, 1, 1, 1, 1, 1},      /* primes, batch 2, channel tail */
    {1, 19, 17, 23, 5, 5, 2, 2, 1, 2, 2, 1},      /* stride 2, odd sizes, uneven pads */
    {1, 16, 9, 9, 3, 3, 1, 1, 0, 0, 0, 0},        /* no padding */
    {1, 40, 10, 12, 3, 3, 2, 2, 0, 0, 1, 1},      /* pads at the end only */
    {1, 33, 11, 12, 3, 3, 2, 2, 1, 1, 0, 0},      /* pads at the start only */
    {1, 20, 3, 4, 7, 7, 1, 1, 3, 3, 3, 3},        /* input smaller than the window */
    {1, 17, 5, 3, 5, 5, 2, 2, 2, 2, 2, 2},
    {1, 1, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1},         /* one channel */
    {1, 15, 8, 31, 7, 7, 2, 2, 3, 3, 3, 3},
    {1, 48, 6, 29, 3, 3, 1, 2, 1, 1, 1, 1},       /* strides differ */
    {1, 24, 1, 50, 1, 5, 1, 1, 0, 2, 0, 2},       /* 1-D */
    {1, 32, 1, 41, 1, 7, 1, 2, 0, 3, 0, 3},
    {1, 64, 19, 19, 3, 5, 1, 1, 1, 2, 1, 2},      /* 3x5 */
    {3, 24, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1},        /* batch 3; 16 + 8 channels */
    {3, 12, 5, 6, 5, 5, 1, 1, 2, 2, 2, 2},        /* batch 3; a tail of 4 only */
    {1, 8, 13, 2, 3, 3, 2, 1, 1, 1, 1, 1},        /* one 8-lane vector, 2 wide */
};

enum { N_ACTS = 10 };

static float *rnd(size_t n, unsigned seed)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    unsigned s = seed * 2654435761u + 7;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

static int64_t out_size(int64_t in, int k, int s, int pb, int pe)
{
    return (in + pb + pe - k) / s + 1;
}

/* The unfused activation on one float, as conv.c's epilogue writes it. */
static float act_ref(int act, float v, const cge__dw_nhwc *a)
{
    switch (act) {
    case CGE__DW_ACT_RELU: return v < 0.0f ? 0.0f : v;
    case CGE__DW_ACT_LEAKY: return v < 0.0f ? a->alpha * v : v;
    case CGE__DW_ACT_CLIP: {
        float t = v < a->lo ? a->lo : v;
        return t > a->hi ? a->hi : t;
    }
    case CGE__DW_ACT_HSIGMOID:
    case CGE__DW_ACT_HSWISH: {
        float t = a->alpha * v + a->beta;
        t = t < 0.0f ? 0.0f : t;
        t = t > 1.0f ? 1.0f : t;
        return act == CGE__DW_ACT_HSWISH ? v * t : t;
    }
    case CGE__DW_ACT_SIGMOID: cge__sigmoid_f32_row(&v, &v, 1); return v;
    case CGE__DW_ACT_TANH: return (float)tanh((double)v);
    case CGE__DW_ACT_SILU: cge__silu_f32_row(&v, &v, 1); return v;
    case CGE__DW_ACT_GELU: cge__gelu_f32_row(&v, &v, 1); return v;
    default: return v;
    }
}

static void run(cge__dw_nhwc *a, int64_t nblk)
{
    for (int64_t b = 0; b < nblk; b++)
        cge__dw_nhwc_fn(b, nblk, a);
}

static void check_case(const dw_case *c, int act, bool with_z)
{
    int64_t OH = out_size(c->h, c->kh, c->sh, c->pt, c->pb);
    int64_t OW = out_size(c->w, c->kw, c->sw, c->pl, c->pr);
    int64_t kv = c->kh * c->kw, C = c->c;
    size_t nx = (size_t)(c->n * c->h * c->w * C), ny = (size_t)(c->n * OH * OW * C);
    float *x = rnd(nx, 1), *w = rnd((size_t)(C * kv), 2), *b = rnd((size_t)C, 3),
          *z = rnd(ny, 4), *y = rnd(ny, 5), *y2 = rnd(ny, 6), *plain = rnd(ny, 7);
    float *wp = aligned_alloc(64, (size_t)cge__dw_nhwc_packed_floats(C, kv) * sizeof(float));
    assert_non_null(wp);
    cge__dw_nhwc_pack(w, C, kv, wp);
    cge__dw_nhwc a = {.x = x, .w = wp, .b = b, .z = with_z ? z : NULL, .y = y, .N = c->n,
                      .C = C, .IH = c->h, .IW = c->w, .OH = OH, .OW = OW,
                      .cp = (C + 15) / 16 * 16, .kh = c->kh, .kw = c->kw, .sh = c->sh,
                      .sw = c->sw, .pt = c->pt, .pl = c->pl, .act = act, .alpha = 0.1f,
                      .beta = 0.5f, .lo = -0.4f, .hi = 0.6f};
    if (act == CGE__DW_ACT_HSWISH || act == CGE__DW_ACT_HSIGMOID)
        a.alpha = 1.0f / 6.0f;
    run(&a, 1);
    /* the reference: sums in double, the activation in float on the sum */
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t ch = 0; ch < C; ch++) {
                    double s = b[ch], mag = fabs(b[ch]);
                    for (int ky = 0; ky < c->kh; ky++)
                        for (int kx = 0; kx < c->kw; kx++) {
                            int64_t ih = oh * c->sh - c->pt + ky, iw = ow * c->sw - c->pl + kx;
                            if (ih < 0 || ih >= c->h || iw < 0 || iw >= c->w)
                                continue;
                            double t = (double)x[((n * c->h + ih) * c->w + iw) * C + ch] *
                                       w[ch * kv + ky * c->kw + kx];
                            s += t;
                            mag += fabs(t);
                        }
                    size_t o = (size_t)(((n * OH + oh) * OW + ow) * C + ch);
                    if (with_z) {
                        s += z[o];
                        mag += fabs(z[o]);
                    }
                    float want = act_ref(act, (float)s, &a);
                    double tol = 1e-6 * mag + 1e-6;
                    if (!(fabs((double)y[o] - want) <= tol))
                        fail_msg("case %lldx%lldx%lldx%lld k%dx%d s%d%d act %d z %d: y[%lld,%lld,"
                                 "%lld,%lld] = %.9g, want %.9g",
                                 (long long)c->n, (long long)C, (long long)c->h, (long long)c->w,
                                 c->kh, c->kw, c->sh, c->sw, act, (int)with_z, (long long)n,
                                 (long long)oh, (long long)ow, (long long)ch, (double)y[o],
                                 (double)want);
                }
    /* any cut into blocks: the same bits */
    a.y = y2;
    run(&a, 7);
    assert_memory_equal(y, y2, ny * sizeof(float));
    /* the fused epilogue = the unfused one on the plain output */
    a.y = plain;
    a.act = CGE__DW_ACT_NONE;
    a.z = NULL;
    run(&a, 3);
    for (size_t i = 0; i < ny; i++) {
        float v = with_z ? plain[i] + z[i] : plain[i];
        v = act_ref(act, v, &a);
        if (memcmp(&v, &y[i], sizeof v) != 0)
            fail_msg("act %d z %d: fused %.9g, unfused %.9g at %zu", act, (int)with_z,
                     (double)y[i], (double)v, i);
    }
    free(x), free(w), free(b), free(z), free(y), free(y2), free(plain), free(wp);
}

static void test_shapes(void **state)
{
    (void)state;
    if (!cge__dw_nhwc_available())
        skip();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const dw_case *c = &cases[i];
        assert_true(cge__dw_nhwc_takes(c->kh, c->kw, c->sh, c->sw, 1, 1, c->pt, c->pl, c->pb,
                                       c->pr));
        check_case(c, (int)(i % N_ACTS), i % 3 == 1);
    }
}

/* Every activation, with and without the addend, on shapes with a channel
 * tail, borders on every side and both strides. */
static void test_epilogues(void **state)
{
    (void)state;
    if (!cge__dw_nhwc_available())
        skip();
    static const dw_case small[] = {
        {1, 37, 9, 13, 3, 3, 1, 1, 1, 1, 1, 1},
        {1, 48, 11, 10, 5, 5, 2, 2, 2, 2, 2, 2},
        {1, 21, 9, 9, 7, 7, 1, 1, 3, 3, 3, 3},
    };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        for (int act = 0; act < N_ACTS; act++) {
            check_case(&small[i], act, false);
            check_case(&small[i], act, true);
        }
}

static void test_takes(void **state)
{
    (void)state;
    assert_true(cge__dw_nhwc_takes(3, 3, 1, 1, 1, 1, 1, 1, 1, 1));
    assert_true(cge__dw_nhwc_takes(7, 7, 2, 2, 1, 1, 3, 3, 3, 3));
    assert_false(cge__dw_nhwc_takes(3, 3, 1, 1, 2, 2, 2, 2, 2, 2)); /* dilation */
    assert_false(cge__dw_nhwc_takes(3, 3, 3, 3, 1, 1, 1, 1, 1, 1)); /* stride 3 */
    assert_false(cge__dw_nhwc_takes(9, 9, 1, 1, 1, 1, 4, 4, 4, 4)); /* 9x9 */
    assert_false(cge__dw_nhwc_takes(3, 1, 1, 1, 1, 1, 1, 0, 1, 0)); /* width 1 */
    assert_false(cge__dw_nhwc_takes(3, 3, 1, 1, 1, 1, 3, 1, 1, 1)); /* a pad row of pads only */
    float w[2 * 9], p[16 * 9];
    for (int i = 0; i < 18; i++)
        w[i] = (float)i;
    assert_int_equal(cge__dw_nhwc_packed_floats(2, 9), 16 * 9);
    cge__dw_nhwc_pack(w, 2, 9, p);
    for (int t = 0; t < 9; t++) {
        assert_true(p[t * 16] == w[t] && p[t * 16 + 1] == w[9 + t]);
        for (int c = 2; c < 16; c++)
            assert_true(p[t * 16 + c] == 0.0f);
    }
}

/* The path taken is the one CGE_CPU_ISA leaves (the AVX2 one under
 * CGE_CPU_ISA=avx2, none under generic), and it counts its launches; an
 * empty batch writes nothing. */
static void test_path_counted(void **state)
{
    (void)state;
    int isa = cge__dw_nhwc_isa();
    assert_int_equal(isa, cge__cpu_has(CGE_CPU_AVX512F)                ? 512
                          : cge__cpu_has(CGE_CPU_AVX2 | CGE_CPU_FMA) ? 256
                                                                     : 0);
    assert_int_equal(cge__dw_nhwc_available(), isa != 0);
    if (!isa)
        skip();
    int64_t runs = cge__dw_nhwc_runs(), avx2 = cge__dw_nhwc_runs_avx2();
    check_case(&cases[11], CGE__DW_ACT_RELU, false);
    /* check_case launches 3 times */
    assert_int_equal(cge__dw_nhwc_runs(), runs + 3);
    assert_int_equal(cge__dw_nhwc_runs_avx2(), avx2 + (isa == 256 ? 3 : 0));
    float x = 1.0f, wp[16 * 9] = {0}, y = 42.0f;
    cge__dw_nhwc a = {.x = &x, .w = wp, .y = &y, .N = 0, .C = 1, .IH = 3, .IW = 3, .OH = 3,
                      .OW = 3, .cp = 16, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .pt = 1, .pl = 1};
    run(&a, 2);
    assert_true(y == 42.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_takes),
        cmocka_unit_test(test_path_counted),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_epilogues),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
