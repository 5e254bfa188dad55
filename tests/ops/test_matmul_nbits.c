/* Tests of com.microsoft MatMulNBits against a float64 loop over its formula
 * (W = (code - zero point) * scale per block of K): 4 and 8 bits, packed,
 * float and default zero points, K not a multiple of the block, odd N, one
 * and several rows, bias; and the meta errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"

typedef struct nb_case {
    int64_t M, K, N, bs;
    int bits;
    int zp;       /* 0 none, 1 uint8 packed, 2 float32 */
    int bias;
} nb_case;

static uint32_t rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static void run_case(const nb_case *c)
{
    int64_t nb = (c->K + c->bs - 1) / c->bs, blob = c->bs * c->bits / 8;
    int64_t zbytes = c->bits == 8 ? nb : (nb + 1) / 2;
    uint32_t seed = (uint32_t)(c->K * 31 + c->N * 7 + c->bits + c->zp * 3 + c->M);
    uint8_t *b = malloc((size_t)(c->N * nb * blob));
    float *sc = malloc(sizeof(float) * (size_t)(c->N * nb));
    uint8_t *zu = calloc((size_t)(c->N * zbytes), 1);
    float *zf = malloc(sizeof(float) * (size_t)(c->N * nb));
    float *a = malloc(sizeof(float) * (size_t)(c->M * c->K));
    float *bias = malloc(sizeof(float) * (size_t)c->N);
    double *ref = calloc((size_t)(c->M * c->N), sizeof(double));
    int qmax = (1 << c->bits) - 1;
    for (int64_t i = 0; i < c->N * nb * blob; i++)
        b[i] = (uint8_t)rnd(&seed);
    for (int64_t i = 0; i < c->N * nb; i++) {
        sc[i] = (float)(rnd(&seed) % 1000) / 1000.0f + 0.01f;
        zf[i] = (float)(rnd(&seed) % (uint32_t)(qmax + 1));
    }
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t k = 0; k < nb; k++) {
            uint8_t z = (uint8_t)zf[n * nb + k];
            if (c->bits == 8)
                zu[n * zbytes + k] = z;
            else
                zu[n * zbytes + k / 2] |= (uint8_t)(k & 1 ? z << 4 : z);
        }
    for (int64_t i = 0; i < c->M * c->K; i++)
        a[i] = (float)((int)(rnd(&seed) % 2001) - 1000) / 500.0f;
    for (int64_t n = 0; n < c->N; n++)
        bias[n] = (float)n * 0.25f - 1.0f;
    for (int64_t m = 0; m < c->M; m++)
        for (int64_t n = 0; n < c->N; n++) {
            double s = c->bias ? bias[n] : 0.0;
            for (int64_t k = 0; k < c->K; k++) {
                int64_t blk = k / c->bs, j = k % c->bs;
                const uint8_t *q = b + (n * nb + blk) * blob;
                int code = c->bits == 8 ? q[j] : (j & 1 ? q[j / 2] >> 4 : q[j / 2] & 15);
                double z = c->zp ? zf[n * nb + blk] : (double)(1 << (c->bits - 1));
                s += (double)a[m * c->K + k] * (code - z) * sc[n * nb + blk];
            }
            ref[m * c->N + n] = s;
        }
    cge_tensor in[6] = {
        op_tensor(CGE_F32, CGE_SHAPE(c->M, c->K), a),
        op_tensor(CGE_U8, CGE_SHAPE(c->N, nb, blob), b),
        op_tensor(CGE_F32, CGE_SHAPE(c->N * nb), sc),
        c->zp == 1   ? op_tensor(CGE_U8, CGE_SHAPE(c->N * zbytes), zu)
        : c->zp == 2 ? op_tensor(CGE_F32, CGE_SHAPE(c->N * nb), zf)
                     : op_absent(),
        op_absent(),
        c->bias ? op_tensor(CGE_F32, CGE_SHAPE(c->N), bias) : op_absent(),
    };
    cge_attr at[4] = {CGE_ATTR_I("K", c->K), CGE_ATTR_I("N", c->N), CGE_ATTR_I("bits", c->bits),
                      CGE_ATTR_I("block_size", c->bs)};
    cge_tensor out[1];
    cge_status st = op_run_domain("com.microsoft", "MatMulNBits", in, 6, at, 4, out, 1);
    if (st)
        fail_msg("%s", cge_last_error());
    double *expect = ref;
    float *ef = malloc(sizeof(float) * (size_t)(c->M * c->N));
    double amax = 0;
    for (int64_t i = 0; i < c->M * c->N; i++) {
        ef[i] = (float)expect[i];
        amax = fmax(amax, fabs(expect[i]));
    }
    op_assert_close(&out[0], CGE_F32, CGE_SHAPE(c->M, c->N), ef, 1e-4, 1e-5 * amax);
    op_free_outputs(out, 1);
    free(ef), free(b), free(sc), free(zu), free(zf), free(a), free(bias), free(ref);
}

static void test_nbits_cases(void **state)
{
    (void)state;
    static const nb_case cases[] = {
        {1, 100, 37, 32, 4, 1, 0}, {1, 100, 37, 32, 4, 0, 0}, {3, 64, 33, 16, 4, 2, 1},
        {5, 256, 48, 64, 4, 1, 1}, {1, 100, 37, 32, 8, 1, 0}, {2, 96, 17, 32, 8, 0, 1},
        {6, 130, 19, 128, 8, 2, 0}, {33, 64, 20, 32, 4, 1, 1}, {1, 16, 1, 16, 4, 1, 0},
        {20, 96, 17, 32, 8, 2, 1}, {17, 200, 50, 64, 4, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}

static void test_nbits_errors(void **state)
{
    (void)state;
    float a[64] = {0}, sc[4] = {1, 1, 1, 1};
    uint8_t b[64] = {0};
    cge_tensor in[3] = {op_tensor(CGE_F32, CGE_SHAPE(1, 64), a),
                        op_tensor(CGE_U8, CGE_SHAPE(2, 2, 16), b),
                        op_tensor(CGE_F32, CGE_SHAPE(4), sc)};
    cge_tensor out[1];
    cge_attr bad_bits[4] = {CGE_ATTR_I("K", 64), CGE_ATTR_I("N", 2), CGE_ATTR_I("bits", 2),
                            CGE_ATTR_I("block_size", 32)};
    op_assert_error(op_run_domain("com.microsoft", "MatMulNBits", in, 3, bad_bits, 4, out, 1),
                    "[meta]", "bits 4 or 8");
    cge_attr bad_n[4] = {CGE_ATTR_I("K", 64), CGE_ATTR_I("N", 3), CGE_ATTR_I("bits", 4),
                         CGE_ATTR_I("block_size", 32)};
    op_assert_error(op_run_domain("com.microsoft", "MatMulNBits", in, 3, bad_n, 4, out, 1),
                    "[meta]", "B must be uint8");
    cge_attr bad_k[4] = {CGE_ATTR_I("K", 60), CGE_ATTR_I("N", 2), CGE_ATTR_I("bits", 4),
                         CGE_ATTR_I("block_size", 32)};
    op_assert_error(op_run_domain("com.microsoft", "MatMulNBits", in, 3, bad_k, 4, out, 1),
                    "[meta]", "last dim must be K");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nbits_cases),
        cmocka_unit_test(test_nbits_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
