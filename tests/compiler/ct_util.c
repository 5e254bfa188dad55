/* Test helpers for the compiler (see ct_util.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ct_util.h"

cge_compile_options ct_opts(cge_opt_level level)
{
    return (cge_compile_options){.opt_level = level, .collect_stats = true};
}

void ct_free_outputs(cge_tensor *outputs, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        free(outputs[i].data);
        outputs[i].data = NULL;
    }
}

#define MAX_T 64

cge_status ct_run_plan(const cge_plan *p, const cge_tensor *inputs, int32_t num_inputs,
                       cge_tensor *outputs, int32_t num_outputs)
{
    cge_device *dev = NULL;
    cge_device_options dopt = {0};
    cge_status st = cge_device_create_cpu(&dopt, &dev);
    if (st)
        return st;
    int32_t ns = cge_plan_num_streams(p), ne = cge_plan_num_events(p);
    cge_stream *streams[16] = {0};
    cge_event **events = calloc((size_t)ne + 1, sizeof(cge_event *));
    cge_event *fork = NULL, *joins[16] = {0};
    void *arena = NULL, *blob = NULL;
    for (int32_t s = 0; !st && s < ns; s++)
        st = cge_stream_create(dev, &streams[s]);
    for (int32_t e = 0; !st && e < ne; e++)
        st = cge_event_create(dev, &events[e]);
    if (!st)
        st = cge_event_create(dev, &fork);
    for (int32_t s = 0; !st && s < ns; s++)
        st = cge_event_create(dev, &joins[s]);
    if (!st)
        st = cge_mem_alloc(dev, cge_plan_arena_bytes(p), &arena);
    if (!st)
        st = cge_mem_alloc(dev, cge_plan_constant_bytes(p), &blob);
    if (!st)
        cge_plan_write_constants(p, blob);
    const cge_plan_value *vals = cge_plan_values(p);
    for (int32_t i = 0; !st && i < num_inputs; i++) {
        const cge_plan_value *v = &vals[cge_plan_input_value(p, i)];
        if (inputs[i].bytes < v->bytes)
            st = CGE_ERR_INVALID_ARG;
        else if (v->bytes)
            memcpy((char *)arena + v->offset, inputs[i].data, v->bytes);
    }
    if (!st)
        st = cge_event_record(fork, streams[0]);
    for (int32_t s = 1; !st && s < ns; s++)
        st = cge_stream_wait_event(streams[s], fork);
    const cge_plan_step *steps = cge_plan_steps(p);
    for (int32_t t = 0; !st && t < cge_plan_num_steps(p); t++) {
        const cge_plan_step *s = &steps[t];
        cge_tensor ins[MAX_T], outs[MAX_T];
        for (int32_t k = 0; k < s->num_inputs; k++) {
            memset(&ins[k], 0, sizeof ins[k]);
            if (s->inputs[k] < 0)
                continue;
            const cge_plan_value *v = &vals[s->inputs[k]];
            char *base = v->storage == CGE_STORAGE_CONSTANT ? blob : arena;
            ins[k] = (cge_tensor){v->name, v->dtype, v->shape, base + v->offset, v->bytes};
        }
        for (int32_t k = 0; k < s->num_outputs; k++) {
            const cge_plan_value *v = &vals[s->outputs[k]];
            char *base = v->storage == CGE_STORAGE_CONSTANT ? blob : arena;
            outs[k] = (cge_tensor){v->name, v->dtype, v->shape, base + v->offset, v->bytes};
        }
        cge_kernel_ctx kc = {.op_type = cge_node_op_type(s->node), .node_name = cge_node_name(s->node),
                             .num_inputs = s->num_inputs, .inputs = ins,
                             .num_outputs = s->num_outputs, .outputs = outs,
                             .attrs = cge_node_attrs_const(s->node),
                             .workspace = (char *)arena + s->workspace_offset,
                             .workspace_size = s->workspace_bytes, .device = dev,
                             .num_threads = cge_device_num_threads(dev)};
        for (int32_t w = 0; !st && w < s->num_waits; w++)
            st = cge_stream_wait_event(streams[s->stream], events[s->waits[w]]);
        if (!st && s->kernel->prepare)
            st = s->kernel->prepare(&kc, &kc.state);
        if (!st)
            st = s->kernel->launch(&kc, streams[s->stream]);
        if (!st && s->record >= 0)
            st = cge_event_record(events[s->record], streams[s->stream]);
        /* State must outlive the launch: wait before releasing it. */
        if (s->kernel->release && kc.state) {
            cge_device_synchronize(dev);
            s->kernel->release(kc.state);
        }
    }
    for (int32_t s = 1; !st && s < ns; s++) {
        st = cge_event_record(joins[s], streams[s]);
        if (!st)
            st = cge_stream_wait_event(streams[0], joins[s]);
    }
    cge_status s2 = cge_device_synchronize(dev);
    if (!st)
        st = s2;
    for (int32_t i = 0; !st && i < num_outputs; i++) {
        const cge_plan_value *v = &vals[cge_plan_output_value(p, i)];
        char *base = v->storage == CGE_STORAGE_CONSTANT ? blob : arena;
        outputs[i] = (cge_tensor){v->name, v->dtype, v->shape, malloc(v->bytes ? v->bytes : 1), v->bytes};
        memcpy(outputs[i].data, base + v->offset, v->bytes);
    }
    cge_mem_free(dev, arena);
    cge_mem_free(dev, blob);
    for (int32_t e = 0; e < ne; e++)
        cge_event_destroy(events[e]);
    free(events);
    cge_event_destroy(fork);
    for (int32_t s = 0; s < 16; s++) {
        cge_event_destroy(joins[s]);
        cge_stream_destroy(streams[s]);
    }
    cge_device_destroy(dev);
    return st;
}

cge_status ct_compile_run(const cge_graph *g, const cge_compile_options *opts,
                          const cge_tensor *inputs, int32_t num_inputs, cge_tensor *outputs,
                          int32_t num_outputs, cge_plan **plan_out)
{
    cge_shape shapes[MAX_T];
    for (int32_t i = 0; i < num_inputs; i++)
        shapes[i] = inputs[i].shape;
    cge_plan *p = NULL;
    cge_status st = cge_compile(g, shapes, num_inputs, opts, &p);
    if (!st)
        st = ct_run_plan(p, inputs, num_inputs, outputs, num_outputs);
    if (plan_out && !st)
        *plan_out = p;
    else
        cge_plan_destroy(p);
    return st;
}

void ct_random_inputs(const cge_graph *g, uint32_t seed, cge_tensor *inputs)
{
    uint32_t x = seed * 2654435761u + 12345u;
    for (int32_t i = 0; i < cge_graph_num_inputs(g); i++) {
        cge_tensor_desc d;
        assert_int_equal(cge_graph_get_desc(g, cge_graph_input(g, i), &d), CGE_OK);
        size_t bytes = cge_tensor_nbytes(d.dtype, &d.shape);
        inputs[i] = (cge_tensor){d.name, d.dtype, d.shape, malloc(bytes ? bytes : 1), bytes};
        int64_t n = cge_shape_numel(&d.shape);
        for (int64_t k = 0; k < n; k++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            float v = (float)((double)(x % 20001) / 5000.0 - 2.0);
            if (d.dtype == CGE_F32)
                ((float *)inputs[i].data)[k] = v;
            else if (d.dtype == CGE_I64)
                ((int64_t *)inputs[i].data)[k] = (int64_t)(x % 7);
        }
    }
}

static int64_t ulp_dist(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0)
        ia = (int32_t)0x80000000 - ia;
    if (ib < 0)
        ib = (int32_t)0x80000000 - ib;
    int64_t d = (int64_t)ia - (int64_t)ib;
    return d < 0 ? -d : d;
}

int32_t ct_assert_equivalent(const cge_graph *g, const cge_compile_options *opts, int max_ulps,
                             double atol)
{
    int32_t ni = cge_graph_num_inputs(g), no = cge_graph_num_outputs(g);
    cge_tensor in[MAX_T], ref[MAX_T], got[MAX_T];
    ct_random_inputs(g, 7, in);
    cge_compile_options none = ct_opts(CGE_OPT_NONE);
    cge_plan *p = NULL;
    cge_status st = ct_compile_run(g, &none, in, ni, ref, no, NULL);
    if (st)
        fail_msg("reference run failed: %s", cge_last_error());
    st = ct_compile_run(g, opts, in, ni, got, no, &p);
    if (st)
        fail_msg("optimised run failed: %s", cge_last_error());
    for (int32_t o = 0; o < no; o++) {
        assert_int_equal(ref[o].dtype, got[o].dtype);
        assert_true(cge_shape_equal(&ref[o].shape, &got[o].shape));
        assert_int_equal(ref[o].bytes, got[o].bytes);
        if (ref[o].dtype != CGE_F32 || max_ulps == 0) {
            if (memcmp(ref[o].data, got[o].data, ref[o].bytes)) {
                for (size_t b = 0; b < ref[o].bytes / 4; b++)
                    if (((uint32_t *)ref[o].data)[b] != ((uint32_t *)got[o].data)[b])
                        fail_msg("output %d differs at element %zu: %.9g vs %.9g", (int)o, b,
                                 (double)((float *)ref[o].data)[b], (double)((float *)got[o].data)[b]);
                fail_msg("output %d differs", (int)o);
            }
            continue;
        }
        const float *a = ref[o].data, *b = got[o].data;
        for (size_t k = 0; k < ref[o].bytes / 4; k++)
            if (ulp_dist(a[k], b[k]) > max_ulps && fabs((double)a[k] - (double)b[k]) > atol)
                fail_msg("output %d element %zu: %.9g vs %.9g", (int)o, k, (double)a[k], (double)b[k]);
    }
    int32_t steps = cge_plan_num_steps(p);
    cge_plan_destroy(p);
    ct_free_outputs(in, ni);
    ct_free_outputs(ref, no);
    ct_free_outputs(got, no);
    return steps;
}

int32_t ct_count_op(const cge_plan *p, const char *op)
{
    int32_t n = 0;
    for (int32_t t = 0; t < cge_plan_num_steps(p); t++)
        n += !strcmp(cge_node_op_type(cge_plan_steps(p)[t].node), op);
    return n;
}

cge_graph *ct_graph(const char *name)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create(name, &g), CGE_OK);
    return g;
}

void ct_input(cge_graph *g, const char *name, cge_shape shape)
{
    assert_int_equal(cge_graph_add_input(g, name, CGE_F32, &shape), CGE_OK);
}

void ct_const_f32(cge_graph *g, const char *name, cge_shape shape, const float *data)
{
    assert_int_equal(cge_graph_add_constant(g, name, CGE_F32, &shape, data,
                                            cge_tensor_nbytes(CGE_F32, &shape)),
                     CGE_OK);
}

void ct_const_scalar(cge_graph *g, const char *name, float v)
{
    cge_shape s = CGE_SCALAR;
    assert_int_equal(cge_graph_add_constant(g, name, CGE_F32, &s, &v, sizeof v), CGE_OK);
}

void ct_const_i64(cge_graph *g, const char *name, const int64_t *v, int64_t n)
{
    cge_shape s = CGE_SHAPE(n);
    assert_int_equal(cge_graph_add_constant(g, name, CGE_I64, &s, v, sizeof(int64_t) * (size_t)n),
                     CGE_OK);
}

cge_node *ct_node(cge_graph *g, const char *op, const char *in0, const char *in1, const char *out)
{
    const char *ins[2] = {in0, in1};
    return ct_node_n(g, op, "", ins, in1 ? 2 : 1, &out, 1);
}

cge_node *ct_node_n(cge_graph *g, const char *op, const char *domain, const char *const *ins,
                    int32_t ni, const char *const *outs, int32_t no)
{
    cge_node *n = NULL;
    cge_status st = cge_graph_add_node(g, op, domain, NULL, ins, ni, outs, no, &n);
    if (st)
        fail_msg("add_node %s: %s", op, cge_last_error());
    return n;
}

void ct_output(cge_graph *g, const char *name)
{
    assert_int_equal(cge_graph_add_output(g, name), CGE_OK);
}
