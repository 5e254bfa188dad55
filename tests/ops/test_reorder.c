/* The cpu engine's cge Reorder (plain NCHW <-> channels-last NHWC): bit-exact
 * against a direct index transpose at the zoo's shapes and odd ones (C and HW
 * off every tile size, prime HW, batch 3, rank 3 and 5), element sizes 1, 2,
 * 4 and 8, both directions; random bytes, so float NaN payloads must survive. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cge/fused_ops.h"
#include "op_runner.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static unsigned char next_byte(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned char)(rng >> 24);
}

/* Runs one Reorder of `shape` (dims[0] batch, dims[1] channels, the rest
 * spatial) and compares it byte for byte with the index transpose. */
static void check_reorder(cge_dtype dt, cge_shape shape, int to_nhwc)
{
    size_t es = cge_dtype_size(dt);
    int64_t n = shape.dims[0], c = shape.dims[1], hw = 1;
    for (int32_t d = 2; d < shape.rank; d++)
        hw *= shape.dims[d];
    size_t total = (size_t)(n * c * hw);
    unsigned char *x = malloc(total * es), *ref = malloc(total * es);
    assert_non_null(x);
    assert_non_null(ref);
    for (size_t i = 0; i < total * es; i++)
        x[i] = next_byte();
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t s = 0; s < hw; s++) {
                size_t plain = (size_t)((b * c + ch) * hw + s), nhwc = (size_t)((b * hw + s) * c + ch);
                if (to_nhwc)
                    memcpy(ref + nhwc * es, x + plain * es, es);
                else
                    memcpy(ref + plain * es, x + nhwc * es, es);
            }
    cge_attr attrs[2] = {
        {.name = "from", .kind = CGE_ATTR_INT, .i = to_nhwc ? CGE_FORMAT_PLAIN : CGE_FORMAT_NHWC},
        {.name = "to", .kind = CGE_ATTR_INT, .i = to_nhwc ? CGE_FORMAT_NHWC : CGE_FORMAT_PLAIN}};
    cge_tensor in = op_tensor(dt, shape, x), out;
    assert_int_equal(op_run_domain(CGE_DOMAIN_CONVERSION, "Reorder", &in, 1, attrs, 2, &out, 1),
                     CGE_OK);
    assert_int_equal(out.shape.rank, shape.rank);
    for (size_t i = 0; i < total * es; i++)
        if (((unsigned char *)out.data)[i] != ref[i])
            fail_msg("es %zu n %lld c %lld hw %lld %s: byte %zu differs", es, (long long)n,
                     (long long)c, (long long)hw, to_nhwc ? "to nhwc" : "to plain", i);
    op_free_outputs(&out, 1);
    free(x);
    free(ref);
}

static void test_reorder_shapes(void **state)
{
    (void)state;
    static const int64_t cs[] = {1, 3, 5, 16, 17, 24, 33, 64, 96, 256, 1280};
    static const int64_t sides[] = {1, 7, 13, 14, 31, 56, 112}; /* HW = side x side */
    static const cge_dtype dts[] = {CGE_U8, CGE_F16, CGE_F32, CGE_F64};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
            for (size_t j = 0; j < sizeof sides / sizeof sides[0]; j++)
                for (int64_t n = 1; n <= 3; n++) {
                    int64_t side = sides[j];
                    /* the big combinations once per dtype and direction, batch 1 */
                    if (cs[i] * side * side * n > (1 << 20) || (n > 1 && cs[i] * side * side > 200000))
                        continue;
                    for (int dir = 0; dir < 2; dir++)
                        check_reorder(dts[d], CGE_SHAPE(n, cs[i], side, side), dir);
                }
}

static void test_reorder_odd_ranks(void **state)
{
    (void)state;
    static const cge_dtype dts[] = {CGE_I8, CGE_I16, CGE_I32, CGE_I64};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (int dir = 0; dir < 2; dir++) {
            check_reorder(dts[d], CGE_SHAPE(3, 17, 31), dir);          /* rank 3, prime HW */
            check_reorder(dts[d], CGE_SHAPE(2, 33, 97), dir);
            check_reorder(dts[d], CGE_SHAPE(1, 1280, 7), dir);
            check_reorder(dts[d], CGE_SHAPE(3, 5, 3, 5, 7), dir);      /* rank 5 */
            check_reorder(dts[d], CGE_SHAPE(2, 24, 4, 7, 11), dir);
            check_reorder(dts[d], CGE_SHAPE(1, 16, 2, 8, 8), dir);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reorder_shapes),
        cmocka_unit_test(test_reorder_odd_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
