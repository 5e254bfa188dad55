/* Evaluating one node at compile time with its CPU kernel, on host copies of
 * its inputs: what constant folding and value propagation during inference
 * share. */
#include <stdlib.h>
#include <string.h>

#include "compiler/compiler_internal.h"

#define MAX_IO 16

static cge_status ensure_device(cc_ctx *ctx)
{
    if (!ctx->dev) {
        cge_device_options o = {.num_threads = 1};
        cge_status st = cge_device_create_cpu(&o, &ctx->dev);
        if (st)
            return st;
        ctx->own_dev = true;
    }
    /* Immediate: each fold runs on this thread as it is launched, with no
     * worker to wake and wait for per node (folding a graph's shape
     * computations is hundreds of tiny kernels). */
    if (!ctx->stream)
        return cge_stream_create_immediate(ctx->dev, &ctx->stream);
    return CGE_OK;
}

cge_status cc_evaluate_node(cc_ctx *ctx, const cge_node *n, const cge_kernel_def *k,
                            const cge_tensor *in_host, const cge_tensor_desc *out_desc,
                            void **host_out)
{
    int32_t ni = cge_node_num_inputs(n), no = cge_node_num_outputs(n);
    if (ni > MAX_IO || no > MAX_IO)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_UNSUPPORTED, "evaluate: too many inputs or outputs");
    cge_tensor ins[MAX_IO], outs[MAX_IO];
    memset(ins, 0, sizeof ins);
    memset(outs, 0, sizeof outs);
    void *ws = NULL;
    cge_status st = ensure_device(ctx);
    for (int32_t i = 0; !st && i < ni; i++) {
        if (in_host[i].dtype == CGE_DTYPE_UNDEFINED)
            continue;
        ins[i] = in_host[i];
        ins[i].data = NULL;
        ins[i].bytes = cge_tensor_nbytes(in_host[i].dtype, &in_host[i].shape);
        st = cge_mem_alloc(ctx->dev, ins[i].bytes, &ins[i].data);
        if (!st && ins[i].bytes)
            st = cge_memcpy(ctx->dev, ins[i].data, in_host[i].data, ins[i].bytes,
                            CGE_MEMCPY_HOST_TO_DEVICE);
    }
    for (int32_t i = 0; !st && i < no; i++) {
        outs[i] = (cge_tensor){.name = out_desc[i].name, .dtype = out_desc[i].dtype,
                               .shape = out_desc[i].shape,
                               .bytes = cge_tensor_nbytes(out_desc[i].dtype, &out_desc[i].shape)};
        st = cge_mem_alloc(ctx->dev, outs[i].bytes, &outs[i].data);
    }
    cge_kernel_ctx kc = {
        .op_type = cge_node_op_type(n), .node_name = cge_node_name(n), .num_inputs = ni,
        .inputs = ins, .num_outputs = no, .outputs = outs, .attrs = cge_node_attrs_const(n),
        .device = ctx->dev, .num_threads = ctx->dev ? cge_device_num_threads(ctx->dev) : 1};
    if (!st && k->workspace_size) {
        kc.workspace_size = k->workspace_size(&kc);
        st = cge_mem_alloc(ctx->dev, kc.workspace_size, &ws);
        kc.workspace = ws;
    }
    if (!st && k->prepare)
        st = k->prepare(&kc, &kc.state);
    if (!st)
        st = k->launch(&kc, ctx->stream);
    if (ctx->stream) {
        cge_status s2 = cge_stream_synchronize(ctx->stream);
        if (!st)
            st = s2;
    }
    if (k->release && kc.state)
        k->release(kc.state);
    for (int32_t i = 0; !st && i < no; i++) {
        host_out[i] = malloc(outs[i].bytes ? outs[i].bytes : 1);
        if (!host_out[i])
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "evaluate: out of memory");
        else if (outs[i].bytes)
            st = cge_memcpy(ctx->dev, host_out[i], outs[i].data, outs[i].bytes,
                            CGE_MEMCPY_DEVICE_TO_HOST);
    }
    if (st)
        for (int32_t i = 0; i < no; i++) {
            free(host_out[i]);
            host_out[i] = NULL;
        }
    for (int32_t i = 0; ctx->dev && i < ni; i++)
        cge_mem_free(ctx->dev, ins[i].data);
    for (int32_t i = 0; ctx->dev && i < no; i++)
        cge_mem_free(ctx->dev, outs[i].data);
    if (ctx->dev)
        cge_mem_free(ctx->dev, ws);
    return st;
}
