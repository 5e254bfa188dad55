/* The cge.dist operators: AllReduce, AllGather, ReduceScatter, Broadcast,
 * AllToAll, Send and Recv. Each kernel's prepare takes the session's
 * communicator (through the kernel cache) and makes the node's own; each
 * launch enqueues one task that posts the MPI call and progresses it, so a
 * collective waits on its stream only and replays like any task. Without a
 * communicator they act on a world of one. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "dist/dist_internal.h"
#include "cge/op.h"
#include "ops/kernel_cache.h"
#include "runtime/device.h"

typedef struct coll_state {
    cge__dist_node_comm *nc;   /* NULL: a world of one */
    cge__dist_red red;         /* the node's attributes, read once at prepare */
    int peer, tag;
    int64_t axis;
} coll_state;

/* What the task needs, copied by cge_launch. Reorders move rank blocks
 * between [outer][P][chunk] (the tensor's layout along `axis`) and
 * [P][outer][chunk] (MPI's, rank-major). */
typedef struct coll_args {
    cge__dist_xfer x;
    cge__dist_node_comm *nc;
    int world;
    const void *in;
    void *out;
    size_t in_bytes, out_bytes;
    char *ws;                  /* workspace (AllGather/ReduceScatter/AllToAll off axis 0) */
    int64_t outer;
    size_t chunk;              /* bytes of one rank's block per outer index */
    char label[128];
} coll_args;

/* ---- attributes and meta ------------------------------------------------------ */

static int parse_reduction(const char *s)
{
    if (!s || !strcmp(s, "sum"))
        return CGE__RED_SUM;
    if (!strcmp(s, "max"))
        return CGE__RED_MAX;
    if (!strcmp(s, "min"))
        return CGE__RED_MIN;
    if (!strcmp(s, "prod"))
        return CGE__RED_PROD;
    return -1;
}

static cge_status check_reduction(cge_infer_ctx *ctx)
{
    const char *r = cge_attrs_get_string(ctx->attrs, "reduction", "sum");
    if (parse_reduction(r) < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "reduction '%s' is not one of sum, max, min, prod", r);
    cge_dtype t = ctx->inputs[0].dtype;
    if (t == CGE_BOOL)
        return cge_meta_error(ctx, CGE_ERR_DTYPE,
                              "input is bool; reductions over ranks take floating-point and "
                              "integer types");
    return CGE_OK;
}

static cge_status world_attr(cge_infer_ctx *ctx, bool required, int64_t *world)
{
    *world = cge_attrs_get_int(ctx->attrs, "world_size", 0);
    if (*world < 0 || (required && *world < 1))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG,
                              "world_size is %lld; this operator's output shape depends on it, "
                              "so it must be set (>= 1)", (long long)*world);
    return CGE_OK;
}

static cge_status axis_attr(cge_infer_ctx *ctx, int32_t *axis)
{
    int64_t a = cge_attrs_get_int(ctx->attrs, "axis", 0);
    int32_t r = ctx->inputs[0].shape.rank;
    if (a < 0)
        a += r;
    if (r == 0 || a < 0 || a >= r)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "axis %lld is outside a rank-%d input",
                              (long long)cge_attrs_get_int(ctx->attrs, "axis", 0), (int)r);
    *axis = (int32_t)a;
    return CGE_OK;
}

static cge_status same_infer(cge_infer_ctx *ctx)
{
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape = ctx->inputs[0].shape;
    return CGE_OK;
}

static cge_status allreduce_infer(cge_infer_ctx *ctx)
{
    int64_t w;
    cge_status st = check_reduction(ctx);
    if (!st)
        st = world_attr(ctx, false, &w);
    return st ? st : same_infer(ctx);
}

static cge_status broadcast_infer(cge_infer_ctx *ctx)
{
    int64_t w, root = cge_attrs_get_int(ctx->attrs, "root", 0);
    cge_status st = world_attr(ctx, false, &w);
    if (st)
        return st;
    if (root < 0 || (w > 0 && root >= w))
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "root %lld is not a rank of a world of %lld",
                              (long long)root, (long long)w);
    return same_infer(ctx);
}

static cge_status allgather_infer(cge_infer_ctx *ctx)
{
    int64_t w;
    int32_t axis = 0;
    cge_status st = world_attr(ctx, true, &w);
    if (!st)
        st = axis_attr(ctx, &axis);
    if (st)
        return st;
    st = same_infer(ctx);
    int64_t *d = &ctx->outputs[0].shape.dims[axis];
    if (*d >= 0)
        *d *= w;
    else if (w != 1)
        *d = CGE_DIM_DYNAMIC;
    return st;
}

/* ReduceScatter and AllToAll split `axis` into world_size equal blocks. */
static cge_status split_infer(cge_infer_ctx *ctx, bool shrink)
{
    int64_t w;
    int32_t axis = 0;
    cge_status st = world_attr(ctx, true, &w);
    if (!st)
        st = axis_attr(ctx, &axis);
    if (!st && shrink)
        st = check_reduction(ctx);
    if (st)
        return st;
    int64_t d = ctx->inputs[0].shape.dims[axis];
    if (d >= 0 && d % w)
        return cge_meta_error(ctx, CGE_ERR_SHAPE,
                              "axis %d has size %lld, not divisible by world_size %lld: every rank "
                              "must get an equal block", (int)axis, (long long)d, (long long)w);
    st = same_infer(ctx);
    if (shrink)
        ctx->outputs[0].shape.dims[axis] = d >= 0 ? d / w : (w == 1 ? d : CGE_DIM_DYNAMIC);
    return st;
}

static cge_status reduce_scatter_infer(cge_infer_ctx *ctx) { return split_infer(ctx, true); }
static cge_status alltoall_infer(cge_infer_ctx *ctx) { return split_infer(ctx, false); }

static cge_status p2p_peer(cge_infer_ctx *ctx)
{
    int64_t peer = cge_attrs_get_int(ctx->attrs, "peer", -1);
    int64_t w = cge_attrs_get_int(ctx->attrs, "world_size", 0);
    if (peer < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "peer (the other rank) must be set, >= 0");
    /* Without world_size the world is the session's, known at prepare. */
    if (w > 0 && peer >= w)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "peer %lld is not a rank of a world of %lld",
                              (long long)peer, (long long)w);
    return CGE_OK;
}

static cge_status send_infer(cge_infer_ctx *ctx)
{
    cge_status st = p2p_peer(ctx);
    return st ? st : same_infer(ctx);
}

static cge_status recv_infer(cge_infer_ctx *ctx)
{
    cge_status st = p2p_peer(ctx);
    if (st)
        return st;
    int64_t dt = cge_attrs_get_int(ctx->attrs, "dtype", CGE_F32);
    if (!cge_dtype_size((cge_dtype)dt))
        return cge_meta_error(ctx, CGE_ERR_DTYPE, "dtype %lld is not a cge dtype", (long long)dt);
    const int64_t *dims = NULL;
    int64_t rank = cge_attrs_get_ints(ctx->attrs, "shape", &dims);
    if (rank < 0)
        return cge_meta_error(ctx, CGE_ERR_INVALID_ARG, "shape (the received tensor's) must be set");
    if (rank > CGE_MAX_RANK)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "shape has rank %lld (at most %d)", (long long)rank,
                              CGE_MAX_RANK);
    ctx->outputs[0].dtype = (cge_dtype)dt;
    ctx->outputs[0].shape.rank = (int32_t)rank;
    for (int64_t i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return cge_meta_error(ctx, CGE_ERR_SHAPE, "shape dim %lld is %lld; Recv needs static sizes",
                                  (long long)i, (long long)dims[i]);
        ctx->outputs[0].shape.dims[i] = dims[i];
    }
    return CGE_OK;
}

/* ---- kernels ------------------------------------------------------------------ */

/* What every rank's node must agree on: op, dtype, sizes, attributes. */
static uint64_t node_signature(const cge_kernel_ctx *ctx)
{
    uint64_t h = cge__fnv1a(CGE__FNV1A_SEED, ctx->op_type, strlen(ctx->op_type));
    const cge_tensor *in = &ctx->inputs[0];
    int64_t v[6] = {in->dtype, cge_shape_numel(&in->shape), cge_shape_numel(&ctx->outputs[0].shape),
                    parse_reduction(cge_attrs_get_string(ctx->attrs, "reduction", "sum")),
                    cge_attrs_get_int(ctx->attrs, "axis", 0), cge_attrs_get_int(ctx->attrs, "root", 0)};
    h = cge__fnv1a(h, v, sizeof v);
    return h | 1;
}

static cge__dist_kind kind_of(const char *op)
{
    if (!strcmp(op, "AllReduce")) return CGE__DIST_ALLREDUCE;
    if (!strcmp(op, "AllGather")) return CGE__DIST_ALLGATHER;
    if (!strcmp(op, "ReduceScatter")) return CGE__DIST_REDUCE_SCATTER;
    if (!strcmp(op, "Broadcast")) return CGE__DIST_BROADCAST;
    if (!strcmp(op, "AllToAll")) return CGE__DIST_ALLTOALL;
    if (!strcmp(op, "Send")) return CGE__DIST_SEND;
    return CGE__DIST_RECV;
}

static bool is_p2p(const char *op) { return !strcmp(op, "Send") || !strcmp(op, "Recv"); }

static cge_status coll_prepare(const cge_kernel_ctx *ctx, void **state)
{
    cge_dist_comm *comm = cge__kernel_ctx_comm(ctx);
    int world = cge_dist_comm_size(comm);
    int64_t want = cge_attrs_get_int(ctx->attrs, "world_size", 0);
    if (want > 0 && want != world)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "%s '%s': compiled for world_size %lld, but the session's world has %d "
                         "rank(s)%s", ctx->op_type, ctx->node_name, (long long)want, world,
                         comm ? "" : " (no communicator: set cge_session_options.dist)");
    if (is_p2p(ctx->op_type)) {
        int64_t peer = cge_attrs_get_int(ctx->attrs, "peer", -1);
        if (peer >= world || peer == cge_dist_comm_rank(comm))
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                             "%s '%s': peer %lld is not another rank of this world of %d (rank %d)",
                             ctx->op_type, ctx->node_name, (long long)peer, world,
                             cge_dist_comm_rank(comm));
    }
    if (!strcmp(ctx->op_type, "Broadcast") && cge_attrs_get_int(ctx->attrs, "root", 0) >= world)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE, "Broadcast '%s': root %lld, world of %d",
                         ctx->node_name, (long long)cge_attrs_get_int(ctx->attrs, "root", 0), world);
    coll_state *s = calloc(1, sizeof *s);
    if (!s)
        return cge_error(CGE_LAYER_KERNEL, CGE_ERR_NO_MEMORY, "%s: out of memory", ctx->op_type);
    s->red = (cge__dist_red)parse_reduction(cge_attrs_get_string(ctx->attrs, "reduction", "sum"));
    s->peer = (int)cge_attrs_get_int(ctx->attrs,
                                     kind_of(ctx->op_type) == CGE__DIST_BROADCAST ? "root" : "peer", 0);
    s->tag = (int)cge_attrs_get_int(ctx->attrs, "tag", 0);
    s->axis = cge_attrs_get_int(ctx->attrs, "axis", 0);
    if (comm) {
        cge_status st = cge__dist_node_comm_create(comm, ctx->op_type, ctx->node_name,
                                                   is_p2p(ctx->op_type) ? 0 : node_signature(ctx),
                                                   &s->nc);
        if (st) {
            free(s);
            return st;
        }
    }
    *state = s;
    return CGE_OK;
}

static void coll_release(void *state)
{
    coll_state *s = state;
    if (!s)
        return;
    cge__dist_node_comm_destroy(s->nc);
    free(s);
}

/* [outer][P][chunk] <-> [P][outer][chunk] */
static void to_rank_major(char *dst, const char *src, int64_t outer, int P, size_t chunk)
{
    for (int64_t o = 0; o < outer; o++)
        for (int r = 0; r < P; r++)
            memcpy(dst + ((size_t)r * (size_t)outer + (size_t)o) * chunk,
                   src + ((size_t)o * (size_t)P + (size_t)r) * chunk, chunk);
}

static void from_rank_major(char *dst, const char *src, int64_t outer, int P, size_t chunk)
{
    for (int64_t o = 0; o < outer; o++)
        for (int r = 0; r < P; r++)
            memcpy(dst + ((size_t)o * (size_t)P + (size_t)r) * chunk,
                   src + ((size_t)r * (size_t)outer + (size_t)o) * chunk, chunk);
}

static void coll_task(int64_t blk, int64_t nblk, void *p)
{
    coll_args *a = p;
    cge__dist_xfer x = a->x;
    int P = a->world;
    bool reorder = a->outer > 1 && P > 1;
    /* A world of one: every collective is a copy. */
    if (!a->nc) {
        if (a->out != a->in && a->out_bytes)
            memcpy(a->out, a->in, a->out_bytes);
        return;
    }
    switch (x.kind) {
    case CGE__DIST_ALLREDUCE:
        x.send = a->in;
        x.recv = a->out;
        break;
    case CGE__DIST_BROADCAST:
        if (a->out != a->in && a->out_bytes)
            memcpy(a->out, a->in, a->out_bytes);
        x.recv = a->out;
        break;
    case CGE__DIST_ALLGATHER:
        x.send = a->in;
        x.recv = reorder ? a->ws : a->out;
        break;
    case CGE__DIST_REDUCE_SCATTER:
        if (reorder)
            to_rank_major(a->ws, a->in, a->outer, P, a->chunk);
        x.send = reorder ? a->ws : a->in;
        x.recv = a->out;
        break;
    case CGE__DIST_ALLTOALL:
        if (reorder)
            to_rank_major(a->ws, a->in, a->outer, P, a->chunk);
        x.send = reorder ? a->ws : a->in;
        x.recv = reorder ? a->ws + a->in_bytes : a->out;
        break;
    case CGE__DIST_SEND:
        x.send = a->in;
        if (a->out != a->in && a->out_bytes)
            memcpy(a->out, a->in, a->out_bytes);
        break;
    case CGE__DIST_RECV:
        x.recv = a->out;
        break;
    }
    if (x.count > 0) {
        char msg[512];
        cge_status st = cge__dist_exchange(a->nc, &x, msg, sizeof msg);
        if (st) {
            rt_stream_fail(rt_current_stream, CGE_LAYER_RUNTIME, st, "%s", msg);
            return;
        }
    }
    if (reorder && x.kind == CGE__DIST_ALLGATHER)
        from_rank_major(a->out, a->ws, a->outer, P, a->chunk);
    if (reorder && x.kind == CGE__DIST_ALLTOALL)
        from_rank_major(a->out, a->ws + a->in_bytes, a->outer, P, a->chunk);
}

/* Outer count and per-rank chunk bytes along `axis` of `t` split into P. */
static void split_dims(const cge_tensor *t, int64_t axis_attr, int P, int64_t *outer, size_t *chunk)
{
    int32_t r = t->shape.rank, axis = (int32_t)(axis_attr < 0 ? axis_attr + r : axis_attr);
    int64_t o = 1, inner = 1;
    for (int32_t d = 0; d < axis; d++)
        o *= t->shape.dims[d];
    for (int32_t d = axis; d < r; d++)
        inner *= t->shape.dims[d];
    *outer = o;
    *chunk = (size_t)(inner / (P > 0 ? P : 1)) * cge_dtype_size(t->dtype);
}

static size_t coll_workspace(const cge_kernel_ctx *ctx)
{
    cge__dist_kind k = kind_of(ctx->op_type);
    if (k != CGE__DIST_ALLGATHER && k != CGE__DIST_REDUCE_SCATTER && k != CGE__DIST_ALLTOALL)
        return 0;
    if (cge_attrs_get_int(ctx->attrs, "axis", 0) == 0)
        return 0;
    size_t in = cge_tensor_nbytes(ctx->inputs[0].dtype, &ctx->inputs[0].shape);
    size_t out = cge_tensor_nbytes(ctx->outputs[0].dtype, &ctx->outputs[0].shape);
    return k == CGE__DIST_ALLGATHER ? out : k == CGE__DIST_ALLTOALL ? 2 * in : in;
}

static cge_status coll_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const coll_state *s = ctx->state;
    if (!s)
        return cge_kernel_error(ctx, CGE_ERR_STATE, "not prepared (no communicator state)");
    cge__dist_kind k = kind_of(ctx->op_type);
    int P = cge__dist_node_comm_size(s->nc);
    bool has_in = ctx->num_inputs > 0 && ctx->inputs[0].dtype != CGE_DTYPE_UNDEFINED;
    const cge_tensor *in = has_in ? &ctx->inputs[0] : NULL;
    coll_args a = {.nc = s->nc, .world = P, .out = ctx->outputs[0].data,
                   .out_bytes = cge_tensor_nbytes(ctx->outputs[0].dtype, &ctx->outputs[0].shape),
                   .ws = ctx->workspace};
    a.x = (cge__dist_xfer){
        .kind = k, .red = s->red, .peer = s->peer, .tag = s->tag,
        .dtype = ctx->outputs[0].dtype, .op_type = ctx->op_type, .node_name = ctx->node_name};
    if (k == CGE__DIST_RECV) {
        a.in = a.out;
        a.x.count = cge_shape_numel(&ctx->outputs[0].shape);
        if (!s->nc)
            return cge_kernel_error(ctx, CGE_ERR_STATE, "no peer in a world of one");
    } else {
        a.in = in->data;
        a.in_bytes = cge_tensor_nbytes(in->dtype, &in->shape);
        int64_t n = cge_shape_numel(&in->shape);
        a.x.count = n;
        if (k == CGE__DIST_REDUCE_SCATTER || k == CGE__DIST_ALLTOALL) {
            a.x.count = n / P;
            split_dims(in, s->axis, P, &a.outer, &a.chunk);
        } else if (k == CGE__DIST_ALLGATHER) {
            split_dims(&ctx->outputs[0], s->axis, P, &a.outer, &a.chunk);
        }
        if (!s->nc && a.in_bytes != a.out_bytes)
            return cge_kernel_error(ctx, CGE_ERR_STATE, "world_size does not match a world of one");
        if (a.outer > 1 && P > 1 && !a.ws)
            return cge_kernel_error(ctx, CGE_ERR_INTERNAL, "no workspace for the rank reorder");
    }
    snprintf(a.label, sizeof a.label, "%s '%s'", ctx->op_type, ctx->node_name);
    return cge_launch(stream, coll_task, 1, &a, sizeof a);
}

/* ---- registration ------------------------------------------------------------- */

#define NUMERIC (CGE_DT_NUMERIC | CGE_DT(CGE_BOOL))

static const cge_arg_def x_in[] = {{"input", 0, NUMERIC, "this rank's tensor"}};
static const cge_arg_def y_out[] = {{"output", 0, NUMERIC, "the result on this rank"}};
static const cge_arg_def send_in[] = {
    {"input", 0, NUMERIC, "this rank's tensor"},
    {"after", CGE_ARG_OPTIONAL | CGE_ARG_VARIADIC, 0,
     "any values: the send waits until they exist (micro-batches: sends in order)"}};
static const cge_arg_def recv_in[] = {
    {"after", CGE_ARG_OPTIONAL | CGE_ARG_VARIADIC, 0,
     "any values: the receive waits until they exist (ordering after this rank's sends)"}};

#define ATTR_WORLD {.name = "world_size", .kind = CGE_ATTR_INT, .default_i = 0, \
                    .doc = "ranks the graph was made for (0: any; checked at prepare)"}
#define ATTR_RED {.name = "reduction", .kind = CGE_ATTR_STRING, .default_s = "sum", \
                  .doc = "sum | max | min | prod"}
#define ATTR_AXIS {.name = "axis", .kind = CGE_ATTR_INT, .default_i = 0, .doc = "the axis split or joined"}

static const cge_attr_def allreduce_attrs[] = {ATTR_RED, ATTR_WORLD};
static const cge_attr_def gather_attrs[] = {ATTR_AXIS, ATTR_WORLD};
static const cge_attr_def rs_attrs[] = {ATTR_RED, ATTR_AXIS, ATTR_WORLD};
static const cge_attr_def bcast_attrs[] = {
    {.name = "root", .kind = CGE_ATTR_INT, .default_i = 0, .doc = "the rank whose tensor every rank gets"},
    ATTR_WORLD};
static const cge_attr_def send_attrs[] = {
    {.name = "peer", .kind = CGE_ATTR_INT, .required = true, .doc = "the receiving rank"},
    {.name = "tag", .kind = CGE_ATTR_INT, .default_i = 0, .doc = "matches the Recv's tag"},
    ATTR_WORLD};
static const cge_attr_def recv_attrs[] = {
    {.name = "peer", .kind = CGE_ATTR_INT, .required = true, .doc = "the sending rank"},
    {.name = "tag", .kind = CGE_ATTR_INT, .default_i = 0, .doc = "matches the Send's tag"},
    {.name = "dtype", .kind = CGE_ATTR_INT, .default_i = CGE_F32, .doc = "cge_dtype received"},
    {.name = "shape", .kind = CGE_ATTR_INTS, .required = true, .doc = "static shape received"},
    ATTR_WORLD};

#define KDEF(INPLACE) {{.engine = "cpu", .launch = coll_launch, .workspace_size = coll_workspace, \
                        .prepare = coll_prepare, .release = coll_release, .inplace_input = INPLACE}}
static const cge_kernel_def k_inplace[] = KDEF(0);
static const cge_kernel_def k_apart[] = KDEF(-1);

#define OP(NAME, IN, NIN, ATTRS, INFER, K, DOC)                                              \
    {.name = NAME, .domain = CGE_DOMAIN_DIST, .since_version = 1, .inputs = IN, .num_inputs = NIN, \
     .outputs = y_out, .num_outputs = 1, .attrs = ATTRS,                                     \
     .num_attrs = (int32_t)(sizeof ATTRS / sizeof ATTRS[0]), .infer = INFER, .kernels = K,   \
     .num_kernels = 1, .doc = DOC}

static const cge_op_def dist_ops[] = {
    OP("AllReduce", x_in, 1, allreduce_attrs, allreduce_infer, k_inplace,
       "Every rank gets the elementwise reduction (sum, max, min, prod) of all ranks' inputs"),
    OP("AllGather", x_in, 1, gather_attrs, allgather_infer, k_apart,
       "Every rank gets the ranks' inputs concatenated along axis, in rank order"),
    OP("ReduceScatter", x_in, 1, rs_attrs, reduce_scatter_infer, k_apart,
       "The reduction of all ranks' inputs, split along axis: rank r keeps block r"),
    OP("Broadcast", x_in, 1, bcast_attrs, broadcast_infer, k_inplace,
       "Every rank gets root's input"),
    OP("AllToAll", x_in, 1, gather_attrs, alltoall_infer, k_apart,
       "Block j of rank i's input (split along axis) becomes block i of rank j's output"),
    OP("Send", send_in, 2, send_attrs, send_infer, k_inplace,
       "Sends the input to rank peer (tagged) and passes it through, so the graph keeps it"),
    OP("Recv", recv_in, 1, recv_attrs, recv_infer, k_apart,
       "Receives a tensor of dtype and shape from rank peer (tagged)"),
};

static const cge_op_library dist_library = {
    .api_version = CGE_OP_API_VERSION,
    .name = "cge.dist",
    .ops = dist_ops,
    .num_ops = (int32_t)(sizeof dist_ops / sizeof dist_ops[0]),
};

static pthread_once_t register_once = PTHREAD_ONCE_INIT;
static cge_status register_status;

static void register_ops(void) { register_status = cge_op_register_library(&dist_library); }

cge_status cge_dist_register_ops(void)
{
    pthread_once(&register_once, register_ops);
    return register_status;
}
