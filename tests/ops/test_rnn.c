/* RNN, GRU and LSTM: every ONNX 1.12 node case plus numpy-referenced cases
 * (rnn_fixtures.h: directions, layouts, sequence_lens, activations, clip,
 * peepholes, input_forget, linear_before_reset), and meta errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rnn_fixtures.h"

static void test_rnn_node_cases(void **state)
{
    nc_run_all(rnn_cases, NUM_RNN_CASES);
}

static void test_rnn_meta_errors(void **state)
{
    cge_tensor_desc in[3] = {
        {.dtype = CGE_F32, .shape = CGE_SHAPE(5, 2, 3)},
        {.dtype = CGE_F32, .shape = CGE_SHAPE(1, 16, 3)},
        {.dtype = CGE_F32, .shape = CGE_SHAPE(1, 16, 4)},
    };
    cge_tensor_desc out[3];
    cge_attr h = CGE_ATTR_I("hidden_size", 4);
    assert_int_equal(op_infer("LSTM", in, NULL, 3, &h, 1, out, 3), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(5, 1, 2, 4)));
    assert_true(cge_shape_equal(&out[2].shape, &CGE_SHAPE(1, 2, 4)));
    cge_attr lay[2] = {h, CGE_ATTR_I("layout", 1)};
    assert_int_equal(op_infer("LSTM", in, NULL, 3, lay, 2, out, 2), CGE_OK);
    assert_true(cge_shape_equal(&out[0].shape, &CGE_SHAPE(5, 2, 1, 4)));
    assert_true(cge_shape_equal(&out[1].shape, &CGE_SHAPE(5, 1, 4)));
    /* GRU wants 3 gates: W with 16 rows does not fit hidden 4 */
    op_assert_error(op_infer("GRU", in, NULL, 3, &h, 1, out, 2), "[meta]", "W");
    cge_attr dir[2] = {h, CGE_ATTR_S("direction", "sideways")};
    op_assert_error(op_infer("LSTM", in, NULL, 3, dir, 2, out, 2), "[meta]", "sideways");
    cge_attr bid[2] = {h, CGE_ATTR_S("direction", "bidirectional")};
    op_assert_error(op_infer("LSTM", in, NULL, 3, bid, 2, out, 2), "[meta]", "W");
    const char *names[1] = {"Swish"};
    cge_attr acts[2] = {h, {.name = "activations", .kind = CGE_ATTR_STRINGS, .n = 1,
                            .strings = names}};
    op_assert_error(op_infer("RNN", in, NULL, 3, acts, 2, out, 2), "[meta]", "Swish");
    in[0].dtype = in[1].dtype = in[2].dtype = CGE_F64;
    op_assert_error(op_infer("LSTM", in, NULL, 3, &h, 1, out, 2), "[meta]", "float32");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rnn_node_cases),
        cmocka_unit_test(test_rnn_meta_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
