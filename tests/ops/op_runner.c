/* Runs one operator outside any graph (meta, kernel lookup, launch, sync)
 * with guard bytes around outputs, and compares results for op tests. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "op_runner.h"
#include "ops/kernel_util.h"
#include "ops/meta.h"

#define GUARD 64
#define GUARD_BYTE 0xA5

static cge_device *g_dev;
static cge_stream *g_stream;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void close_device(void)
{
    cge_stream_destroy(g_stream);
    cge_device_destroy(g_dev);
}

static void open_device(void)
{
    if (cge_device_create_cpu(NULL, &g_dev) == CGE_OK &&
        cge_stream_create(g_dev, &g_stream) == CGE_OK)
        atexit(close_device);
}

cge_tensor op_tensor(cge_dtype dtype, cge_shape shape, const void *data)
{
    cge_tensor t = {.dtype = dtype, .shape = shape, .data = (void *)data};
    t.bytes = cge_tensor_nbytes(dtype, &shape);
    return t;
}

cge_tensor op_absent(void)
{
    cge_tensor t;
    memset(&t, 0, sizeof t);
    return t;
}

/* A throwaway graph whose single node carries the attributes and the name. */
static cge_status make_node(const char *domain, const char *op_type, int32_t num_inputs,
                            const cge_tensor *inputs, const cge_attr *attrs, int32_t num_attrs,
                            int32_t num_outputs, cge_graph **g, cge_node **node)
{
    char in_names[32][16], out_names[32][16];
    const char *ins[32], *outs[32];
    if (num_inputs > 32 || num_outputs > 32)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "op_runner: too many arguments");
    for (int32_t i = 0; i < num_inputs; i++) {
        snprintf(in_names[i], sizeof in_names[i], "in%d", i);
        ins[i] = inputs && inputs[i].dtype == CGE_DTYPE_UNDEFINED ? "" : in_names[i];
    }
    for (int32_t i = 0; i < num_outputs; i++) {
        snprintf(out_names[i], sizeof out_names[i], "out%d", i);
        outs[i] = out_names[i];
    }
    cge_status st = cge_graph_create("op_runner", g);
    if (!st)
        st = cge_graph_add_node(*g, op_type, domain, "node0", ins, num_inputs, outs, num_outputs,
                                node);
    for (int32_t i = 0; !st && i < num_attrs; i++)
        st = cge_attrs_set(cge_node_attrs(*node), &attrs[i]);
    return st;
}

cge_status op_infer(const char *op_type, const cge_tensor_desc *inputs,
                    const void *const *input_values, int32_t num_inputs, const cge_attr *attrs,
                    int32_t num_attrs, cge_tensor_desc *outputs, int32_t num_outputs)
{
    const cge_op_def *def = cge_op_find("", op_type, 0);
    if (!def)
        return cge_last_error_status();
    cge_graph *g = NULL;
    cge_node *node = NULL;
    cge_tensor fake[32];
    for (int32_t i = 0; i < num_inputs && i < 32; i++)
        fake[i] = (cge_tensor){.dtype = inputs[i].dtype};
    cge_status st = make_node("", op_type, num_inputs, fake, attrs, num_attrs, num_outputs, &g, &node);
    bool present[32];
    for (int32_t i = 0; i < num_inputs && i < 32; i++)
        present[i] = inputs[i].dtype != CGE_DTYPE_UNDEFINED;
    if (!st)
        st = cge__op_check_arity(def, "node0", present, num_inputs, num_outputs);
    if (!st)
        st = cge__op_check_attrs(def, "node0", cge_node_attrs_const(node));
    if (!st)
        st = cge__op_infer_node(def, "node0", cge_node_attrs_const(node), inputs, input_values,
                               num_inputs, outputs, num_outputs);
    cge_graph_destroy(g);
    return st;
}

cge_status op_run(const char *op_type, const cge_tensor *inputs, int32_t num_inputs,
                  const cge_attr *attrs, int32_t num_attrs, cge_tensor *outputs,
                  int32_t num_outputs)
{
    return op_run_domain("", op_type, inputs, num_inputs, attrs, num_attrs, outputs, num_outputs);
}

cge_status op_run_domain(const char *domain, const char *op_type, const cge_tensor *inputs,
                         int32_t num_inputs, const cge_attr *attrs, int32_t num_attrs,
                         cge_tensor *outputs, int32_t num_outputs)
{
    memset(outputs, 0, sizeof *outputs * (size_t)num_outputs);
    pthread_once(&g_once, open_device);
    if (!g_stream)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE, "op_runner: no device");
    if (num_inputs > 32 || num_outputs > 32)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "op_runner: too many arguments");
    const cge_op_def *def = cge_op_find(domain, op_type, 0);
    if (!def)
        return cge_last_error_status();

    cge_graph *g = NULL;
    cge_node *node = NULL;
    cge_status st = make_node(domain, op_type, num_inputs, inputs, attrs, num_attrs, num_outputs,
                              &g, &node);
    bool present[32];
    cge_tensor_desc in_desc[32], out_desc[32];
    const void *values[32];
    for (int32_t i = 0; i < num_inputs; i++) {
        present[i] = inputs[i].dtype != CGE_DTYPE_UNDEFINED;
        in_desc[i] = (cge_tensor_desc){.name = "", .dtype = inputs[i].dtype, .shape = inputs[i].shape};
        values[i] = inputs[i].data;
    }
    for (int32_t i = 0; i < num_outputs; i++)
        out_desc[i] = (cge_tensor_desc){.name = ""};
    if (!st)
        st = cge__op_check_arity(def, "node0", present, num_inputs, num_outputs);
    if (!st)
        st = cge__op_check_attrs(def, "node0", cge_node_attrs_const(node));
    if (!st)
        st = cge__op_infer_node(def, "node0", cge_node_attrs_const(node), in_desc, values,
                               num_inputs, out_desc, num_outputs);
    for (int32_t i = 0; !st && i < num_outputs; i++)
        if (!cge_shape_is_static(&out_desc[i].shape))
            st = cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                           "%s 'node0': output %d has a dynamic shape with all inputs known",
                           op_type, i);
    const cge_kernel_def *k = NULL;
    if (!st) {
        cge_dtype kt = num_inputs > 0 ? inputs[0].dtype : CGE_DTYPE_UNDEFINED;
        k = cge_op_find_kernel(def, "cpu", kt);
        if (!k)
            st = cge_last_error_status();
    }

    cge_tensor dev_in[32], dev_out[32];
    unsigned char *raw_out[32] = {0};
    memset(dev_in, 0, sizeof dev_in);
    memset(dev_out, 0, sizeof dev_out);
    for (int32_t i = 0; !st && i < num_inputs; i++) {
        dev_in[i] = inputs[i];
        if (!present[i]) {
            dev_in[i].data = NULL;
            continue;
        }
        size_t nb = cge_tensor_nbytes(inputs[i].dtype, &inputs[i].shape);
        st = cge_mem_alloc(g_dev, nb, &dev_in[i].data);
        if (!st && nb)
            memcpy(dev_in[i].data, inputs[i].data, nb);
        dev_in[i].bytes = nb;
    }
    for (int32_t i = 0; !st && i < num_outputs; i++) {
        size_t nb = cge_tensor_nbytes(out_desc[i].dtype, &out_desc[i].shape);
        void *p = NULL;
        st = cge_mem_alloc(g_dev, nb + 2 * GUARD, &p);
        if (st)
            break;
        raw_out[i] = p;
        memset(raw_out[i], GUARD_BYTE, nb + 2 * GUARD);
        dev_out[i] = (cge_tensor){.name = out_desc[i].name, .dtype = out_desc[i].dtype,
                                  .shape = out_desc[i].shape, .data = raw_out[i] + GUARD,
                                  .bytes = nb};
    }
    cge_kernel_ctx ctx = {
        .op_type = def->name, .node_name = "node0",
        .num_inputs = num_inputs, .inputs = dev_in,
        .num_outputs = num_outputs, .outputs = dev_out,
        .attrs = node ? cge_node_attrs_const(node) : NULL,
        .device = g_dev, .num_threads = cge_device_num_threads(g_dev),
    };
    void *ws = NULL;
    if (!st && k->workspace_size) {
        ctx.workspace_size = k->workspace_size(&ctx);
        st = cge_mem_alloc(g_dev, ctx.workspace_size, &ws);
        ctx.workspace = ws;
    }
    if (!st && k->prepare)
        st = k->prepare(&ctx, &ctx.state);
    if (!st)
        st = k->launch(&ctx, g_stream);
    cge_status sync = cge_stream_synchronize(g_stream);
    if (!st)
        st = sync;
    if (k && k->release && ctx.state)
        k->release(ctx.state);
    for (int32_t i = 0; !st && i < num_outputs; i++) {
        size_t nb = dev_out[i].bytes;
        for (size_t b = 0; b < GUARD; b++)
            if (raw_out[i][b] != GUARD_BYTE || raw_out[i][GUARD + nb + b] != GUARD_BYTE) {
                st = cge_error(CGE_LAYER_KERNEL, CGE_ERR_INTERNAL,
                               "%s 'node0': kernel wrote outside output %d", op_type, i);
                break;
            }
    }
    for (int32_t i = 0; !st && i < num_outputs; i++) {
        outputs[i] = dev_out[i];
        outputs[i].name = NULL;
        outputs[i].data = malloc(dev_out[i].bytes ? dev_out[i].bytes : 1);
        if (!outputs[i].data)
            st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "op_runner: out of memory");
        else if (dev_out[i].bytes)
            memcpy(outputs[i].data, dev_out[i].data, dev_out[i].bytes);
    }
    if (st) {
        for (int32_t i = 0; i < num_outputs; i++)
            free(outputs[i].data);
        memset(outputs, 0, sizeof *outputs * (size_t)num_outputs);
    }
    cge_mem_free(g_dev, ws);
    for (int32_t i = 0; i < num_inputs; i++)
        cge_mem_free(g_dev, dev_in[i].data);
    for (int32_t i = 0; i < num_outputs; i++)
        cge_mem_free(g_dev, raw_out[i]);
    cge_graph_destroy(g);
    return st;
}

void op_free_outputs(cge_tensor *outputs, int32_t num_outputs)
{
    for (int32_t i = 0; i < num_outputs; i++) {
        free(outputs[i].data);
        outputs[i].data = NULL;
    }
}

void op_assert_shape(const cge_tensor *t, cge_shape expected)
{
    if (!cge_shape_equal(&t->shape, &expected)) {
        char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
        fail_msg("shape %s, expected %s", cge_shape_str(&t->shape, a, sizeof a),
                 cge_shape_str(&expected, b, sizeof b));
    }
}

static void compare(const cge_tensor *t, cge_dtype dtype, cge_shape shape, const void *expected,
                    double rtol, double atol)
{
    if (t->dtype != dtype)
        fail_msg("dtype %s, expected %s", cge_dtype_name(t->dtype), cge_dtype_name(dtype));
    op_assert_shape(t, shape);
    int64_t n = cge_shape_numel(&shape);
    for (int64_t i = 0; i < n; i++) {
        double got = cge__load_as_double(dtype, t->data, i);
        double want = cge__load_as_double(dtype, expected, i);
        if (isnan(want) && isnan(got))
            continue;
        if (isinf(want) && got == want)
            continue;
        if (!(fabs(got - want) <= atol + rtol * fabs(want)))
            fail_msg("element %lld: got %.9g, expected %.9g (rtol %g, atol %g)", (long long)i,
                     got, want, rtol, atol);
    }
}

void op_assert_close(const cge_tensor *t, cge_dtype dtype, cge_shape shape, const void *expected,
                     double rtol, double atol)
{
    compare(t, dtype, shape, expected, rtol, atol);
}

void op_assert_equal(const cge_tensor *t, cge_dtype dtype, cge_shape shape, const void *expected)
{
    if (t->dtype != dtype)
        fail_msg("dtype %s, expected %s", cge_dtype_name(t->dtype), cge_dtype_name(dtype));
    op_assert_shape(t, shape);
    size_t nb = cge_tensor_nbytes(dtype, &shape);
    if (nb && memcmp(t->data, expected, nb) != 0)
        compare(t, dtype, shape, expected, 0, 0); /* names the first differing element */
    if (nb && memcmp(t->data, expected, nb) != 0)
        fail_msg("bytes differ (values compare equal: signed zero or NaN payload)");
}

void op_assert_error(cge_status st, const char *layer, const char *needle)
{
    if (st == CGE_OK)
        fail_msg("expected an error %s containing '%s', got CGE_OK", layer, needle);
    const char *msg = cge_last_error();
    if (strncmp(msg, layer, strlen(layer)) != 0)
        fail_msg("error '%s' does not start with %s", msg, layer);
    if (needle && !strstr(msg, needle))
        fail_msg("error '%s' does not contain '%s'", msg, needle);
}

float *op_random_floats(int64_t n, unsigned seed)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(p);
    unsigned s = seed * 2654435761u + 7;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}
