/* Evaluating one node at compile time with its CPU kernel, on host copies of
 * its inputs: what constant folding, value propagation during inference and
 * the shape program share; and a plan step's workspace asked of its kernel. */
#include <stdlib.h>
#include <string.h>

#include "base/strings.h"
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

bool cc_shape_values(const cge_node *n, const cge_shape *in, const cge_shape *out, int64_t *dst)
{
    if (!cge_shape_is_static(in))
        return false;
    if (cc_is_op(n, "Size")) {
        dst[0] = cge_shape_numel(in);
        return true;
    }
    if (!cc_is_op(n, "Shape") || out->rank != 1 || out->dims[0] < 0)
        return false;
    int64_t r = in->rank;
    int64_t a = cge_attrs_get_int(cge_node_attrs_const(n), "start", 0);
    a = a < 0 ? a + r : a;
    a = a < 0 ? 0 : (a > r ? r : a);
    int64_t cnt = out->dims[0];
    if (a + cnt > r)
        return false;
    memcpy(dst, in->dims + a, sizeof *dst * (size_t)cnt);
    return true;
}

/* `keep`: the kernel's state is handed back in *kept instead of released
 * (a string output's bytes live in it until the caller has copied them). */
static cge_status launch_on_host(cge_device *dev, cge_stream *imm, const cge_node *n,
                                 const cge_kernel_def *k, cge_tensor *ins, int32_t ni,
                                 cge_tensor *outs, int32_t no, cc_scratch *ws, void **kept)
{
    cge_kernel_ctx kc = {
        .op_type = cge_node_op_type(n), .node_name = cge_node_name(n), .num_inputs = ni,
        .inputs = ins, .num_outputs = no, .outputs = outs, .attrs = cge_node_attrs_const(n),
        .device = dev, .num_threads = dev ? cge_device_num_threads(dev) : 1};
    cge_status st = CGE_OK;
    if (k->workspace_size) {
        kc.workspace_size = k->workspace_size(&kc);
        if (kc.workspace_size > ws->bytes) {
            void *grown = malloc(kc.workspace_size);
            if (!grown)
                return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "evaluate: out of memory");
            free(ws->data);
            ws->data = grown;
            ws->bytes = kc.workspace_size;
        }
        kc.workspace = kc.workspace_size ? ws->data : NULL;
    }
    if (k->prepare)
        st = k->prepare(&kc, &kc.state);
    if (!st)
        st = k->launch(&kc, imm);
    cge_status s2 = cge_stream_synchronize(imm);
    if (!st)
        st = s2;
    if (kept)
        *kept = kc.state;
    else if (k->release && kc.state)
        k->release(kc.state);
    return st;
}

cge_status cc_launch_on_host(cge_device *dev, cge_stream *imm, const cge_node *n,
                             const cge_kernel_def *k, cge_tensor *ins, int32_t ni,
                             cge_tensor *outs, int32_t no, cc_scratch *ws)
{
    return launch_on_host(dev, imm, n, k, ins, ni, outs, no, ws, NULL);
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
    cc_scratch ws = {0};
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
    void *state = NULL;
    if (!st)
        st = launch_on_host(ctx->dev, ctx->stream, n, k, ins, ni, outs, no, &ws, &state);
    free(ws.data);
    for (int32_t i = 0; !st && i < no; i++) {
        if (outs[i].dtype == CGE_STRING) {
            /* The elements with their bytes, packed before the kernel's state
             * (where a kernel keeps the strings it writes) goes; the CPU
             * device's memory is host memory. */
            host_out[i] = cge__strings_pack_dup(outs[i].data, cge_shape_numel(&outs[i].shape),
                                                NULL);
            if (!host_out[i])
                st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "evaluate: out of memory");
            continue;
        }
        host_out[i] = malloc(outs[i].bytes ? outs[i].bytes : 1);
        if (!host_out[i])
            st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "evaluate: out of memory");
        else if (outs[i].bytes)
            st = cge_memcpy(ctx->dev, host_out[i], outs[i].data, outs[i].bytes,
                            CGE_MEMCPY_DEVICE_TO_HOST);
    }
    if (k && k->release && state)
        k->release(state);
    if (st)
        for (int32_t i = 0; i < no; i++) {
            free(host_out[i]);
            host_out[i] = NULL;
        }
    for (int32_t i = 0; ctx->dev && i < ni; i++)
        cge_mem_free(ctx->dev, ins[i].data);
    for (int32_t i = 0; ctx->dev && i < no; i++)
        cge_mem_free(ctx->dev, outs[i].data);
    return st;
}

size_t cc_step_workspace(const cge_plan_step *s, const cge_plan_value *vals, const cge_shape *shapes,
                         const size_t *bytes, int32_t num_threads)
{
    cge_tensor ins[CC_STEP_MAX_IO], outs[CC_STEP_MAX_IO];
    if (!s->kernel->workspace_size || s->num_inputs > CC_STEP_MAX_IO ||
        s->num_outputs > CC_STEP_MAX_IO)
        return 0;
    for (int32_t k = 0; k < s->num_inputs + s->num_outputs; k++) {
        bool in = k < s->num_inputs;
        int32_t v = in ? s->inputs[k] : s->outputs[k - s->num_inputs];
        cge_tensor t = {.dtype = CGE_DTYPE_UNDEFINED};
        if (v >= 0)
            t = (cge_tensor){.name = vals[v].name, .dtype = vals[v].dtype,
                             .shape = shapes ? shapes[v] : vals[v].shape,
                             .bytes = bytes ? bytes[v] : vals[v].bytes};
        if (in)
            ins[k] = t;
        else
            outs[k - s->num_inputs] = t;
    }
    cge_kernel_ctx kc = {.op_type = cge_node_op_type(s->node), .node_name = cge_node_name(s->node),
                         .num_inputs = s->num_inputs, .inputs = ins,
                         .num_outputs = s->num_outputs, .outputs = outs,
                         .attrs = cge_node_attrs_const(s->node), .num_threads = num_threads};
    return s->kernel->workspace_size(&kc);
}
