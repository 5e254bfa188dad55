/* Communicators over MPI: the session's (a duplicate of the world or of the
 * caller's), one per collective node, and the exchange every kernel makes:
 * a non-blocking MPI call progressed until done or a deadline. Built without
 * MPI, only the world of one exists. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/dist_internal.h"
#include "cge/runtime.h"

#ifdef CGE_HAVE_MPI
#include <mpi.h>
#endif

#define DEFAULT_TIMEOUT_MS 30000

struct cge_dist_comm {
#ifdef CGE_HAVE_MPI
    MPI_Comm comm;
#endif
    int rank, size, timeout_ms;
    pthread_mutex_t lock;          /* node communicators are made one at a time */
    atomic_int_fast64_t bytes_sent;
    /* Set once an exchange timed out: MPI cannot take back a collective
     * posted and never matched, so every later one on this communicator
     * would pair with the wrong peer call. They fail at once instead. */
    atomic_bool broken;
    char broken_by[160];
};

struct cge__dist_node_comm {
    cge_dist_comm *parent;
#ifdef CGE_HAVE_MPI
    MPI_Comm comm;
    bool owned;
#endif
};

bool cge_dist_available(void)
{
#ifdef CGE_HAVE_MPI
    return true;
#else
    return false;
#endif
}

void cge_dist_env_rank(int *rank, int *size)
{
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    *rank = 0;
    *size = 1;
    for (size_t i = 0; i < sizeof rank_vars / sizeof *rank_vars; i++)
        if (getenv(rank_vars[i])) {
            *rank = atoi(getenv(rank_vars[i]));
            break;
        }
    for (size_t i = 0; i < sizeof size_vars / sizeof *size_vars; i++)
        if (getenv(size_vars[i])) {
            *size = atoi(getenv(size_vars[i]));
            break;
        }
}

int cge_dist_comm_rank(const cge_dist_comm *c) { return c ? c->rank : 0; }
int cge_dist_comm_size(const cge_dist_comm *c) { return c ? c->size : 1; }
int cge_dist_comm_timeout_ms(const cge_dist_comm *c) { return c ? c->timeout_ms : DEFAULT_TIMEOUT_MS; }
int64_t cge_dist_comm_bytes_sent(const cge_dist_comm *c) { return c ? (int64_t)atomic_load(&c->bytes_sent) : 0; }
int cge__dist_node_comm_rank(const cge__dist_node_comm *nc) { return nc ? nc->parent->rank : 0; }
int cge__dist_node_comm_size(const cge__dist_node_comm *nc) { return nc ? nc->parent->size : 1; }

#ifdef CGE_HAVE_MPI

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void finalize_at_exit(void)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin)
        MPI_Finalize();
}

static cge_status init_mpi(void)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) {
        int provided = 0;
        MPI_Query_thread(&provided);
        if (provided < MPI_THREAD_MULTIPLE)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                             "dist: MPI was initialised without MPI_THREAD_MULTIPLE; cge's "
                             "collectives run on its streams' threads and need it");
        return CGE_OK;
    }
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE, "dist: MPI_Init_thread failed");
    atexit(finalize_at_exit);
    if (provided < MPI_THREAD_MULTIPLE)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "dist: this MPI provides thread level %d, not MPI_THREAD_MULTIPLE", provided);
    return CGE_OK;
}

static void mpi_message(int code, char *buf, size_t n)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof s, "MPI error %d", code);
    snprintf(buf, n, "%s", s);
}

/* Progress one request until done, the deadline, or a cancelled run:
 * spin briefly (a collective between ranks on one host completes in
 * microseconds), then yield the core in short sleeps so that compute on the
 * other streams keeps it. */
static cge_status wait_request(MPI_Request *req, int timeout_ms, int *mpi_err)
{
    double deadline = now_ms() + timeout_ms;
    *mpi_err = MPI_SUCCESS;
    for (long it = 0;; it++) {
        int done = 0;
        int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            *mpi_err = rc;
            return CGE_ERR_STATE;
        }
        if (done)
            return CGE_OK;
        if (cge_cancel_check() != CGE_OK)
            return CGE_ERR_CANCELLED;
        if (it > 2000) {
            if (now_ms() > deadline)
                return CGE_ERR_TIMEOUT;
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

cge_status cge_dist_comm_create(cge_dist_source source, const void *mpi_comm, int timeout_ms,
                                cge_dist_comm **out)
{
    *out = NULL;
    if (source != CGE_DIST_FROM_ENV && source != CGE_DIST_MPI_COMM)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "dist: unknown source %d", (int)source);
    if (source == CGE_DIST_MPI_COMM && !mpi_comm)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "dist: CGE_DIST_MPI_COMM needs dist_mpi_comm (the address of an MPI_Comm)");
    cge_status st = init_mpi();
    if (st)
        return st;
    cge_dist_comm *c = calloc(1, sizeof *c);
    if (!c)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "dist: out of memory");
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : DEFAULT_TIMEOUT_MS;
    MPI_Comm src = source == CGE_DIST_FROM_ENV ? MPI_COMM_WORLD : *(const MPI_Comm *)mpi_comm;
    MPI_Request req;
    int err = MPI_Comm_idup(src, &c->comm, &req);
    if (err == MPI_SUCCESS) {
        int merr = 0;
        cge_status w = wait_request(&req, c->timeout_ms, &merr);
        if (w == CGE_ERR_TIMEOUT) {
            free(c);
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_TIMEOUT,
                             "dist: duplicating the communicator did not complete within %d ms "
                             "(is every rank creating its session?)", timeout_ms);
        }
        if (w)
            err = merr ? merr : MPI_ERR_OTHER;
    }
    if (err != MPI_SUCCESS) {
        char m[MPI_MAX_ERROR_STRING];
        mpi_message(err, m, sizeof m);
        free(c);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE, "dist: MPI_Comm_idup: %s", m);
    }
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return CGE_OK;
}

void cge_dist_comm_destroy(cge_dist_comm *c)
{
    if (!c)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && !atomic_load(&c->broken))
        MPI_Comm_free(&c->comm);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static cge_status broken_error(const cge_dist_comm *c, const char *op, const char *node, char *msg,
                               size_t n)
{
    snprintf(msg, n, "%s '%s' on rank %d of %d: the communicator is unusable after an earlier "
             "failure (%s)", op, node, c->rank, c->size, c->broken_by);
    return CGE_ERR_STATE;
}

static void mark_broken(cge_dist_comm *c, const char *op, const char *node)
{
    bool expected = false;
    if (atomic_compare_exchange_strong(&c->broken, &expected, true))
        snprintf(c->broken_by, sizeof c->broken_by, "%s '%s' timed out", op, node);
}

cge_status cge_dist_comm_barrier(cge_dist_comm *c)
{
    if (!c || c->size == 1)
        return CGE_OK;
    MPI_Request req;
    int merr = MPI_Ibarrier(c->comm, &req);
    cge_status st = merr == MPI_SUCCESS ? wait_request(&req, c->timeout_ms, &merr) : CGE_ERR_STATE;
    if (st == CGE_ERR_TIMEOUT) {
        mark_broken(c, "Barrier", "barrier");
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_TIMEOUT,
                         "dist: barrier on rank %d of %d did not complete within %d ms "
                         "(a peer exited or is stuck)", c->rank, c->size, c->timeout_ms);
    }
    if (st)
        return cge_error(CGE_LAYER_RUNTIME, st, "dist: barrier failed (MPI error %d)", merr);
    return CGE_OK;
}

cge_status cge__dist_node_comm_create(cge_dist_comm *c, const char *op_type,
                                      const char *node_name, uint64_t signature,
                                      cge__dist_node_comm **out)
{
    *out = NULL;
    cge__dist_node_comm *nc = calloc(1, sizeof *nc);
    if (!nc)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "dist: out of memory");
    nc->parent = c;
    nc->comm = c->comm;
    if (signature == 0) { /* point to point: tags on the session's communicator */
        *out = nc;
        return CGE_OK;
    }
    char msg[512] = "";
    if (atomic_load(&c->broken)) {
        broken_error(c, op_type, node_name, msg, sizeof msg);
        free(nc);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE, "%s", msg);
    }
    uint64_t *sigs = calloc((size_t)c->size, sizeof *sigs);
    if (!sigs) {
        free(nc);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "dist: out of memory");
    }
    pthread_mutex_lock(&c->lock);
    MPI_Request req[2];
    int merr = MPI_Comm_idup(c->comm, &nc->comm, &req[0]);
    cge_status st = merr == MPI_SUCCESS ? wait_request(&req[0], c->timeout_ms, &merr) : CGE_ERR_STATE;
    if (!st) {
        nc->owned = true;
        MPI_Comm_set_errhandler(nc->comm, MPI_ERRORS_RETURN);
        merr = MPI_Iallgather(&signature, 1, MPI_UINT64_T, sigs, 1, MPI_UINT64_T, nc->comm, &req[1]);
        st = merr == MPI_SUCCESS ? wait_request(&req[1], c->timeout_ms, &merr) : CGE_ERR_STATE;
    }
    if (st == CGE_ERR_TIMEOUT)
        mark_broken(c, op_type, node_name);
    pthread_mutex_unlock(&c->lock);
    if (st == CGE_ERR_TIMEOUT) {
        snprintf(msg, sizeof msg, "%s '%s' on rank %d of %d: preparing the collective with ranks "
                 "0-%d did not complete within %d ms (a peer exited, or its graph has fewer "
                 "collectives)", op_type, node_name, c->rank, c->size, c->size - 1, c->timeout_ms);
    } else if (st) {
        char m[MPI_MAX_ERROR_STRING];
        mpi_message(merr, m, sizeof m);
        snprintf(msg, sizeof msg, "%s '%s' on rank %d of %d: %s", op_type, node_name, c->rank,
                 c->size, m);
    } else {
        char ranks[160] = "";
        size_t len = 0;
        for (int r = 0; r < c->size && len + 12 < sizeof ranks; r++)
            if (sigs[r] != signature)
                len += (size_t)snprintf(ranks + len, sizeof ranks - len, "%s%d", len ? ", " : "", r);
        if (len) {
            st = CGE_ERR_STATE;
            snprintf(msg, sizeof msg, "%s '%s' on rank %d of %d: mismatched collective: rank(s) %s "
                     "run a different operator, dtype or size at this point of the graph",
                     op_type, node_name, c->rank, c->size, ranks);
        }
    }
    free(sigs);
    if (st) {
        if (nc->owned && st != CGE_ERR_TIMEOUT)
            MPI_Comm_free(&nc->comm);
        free(nc);
        return cge_error(CGE_LAYER_RUNTIME, st, "%s", msg);
    }
    *out = nc;
    return CGE_OK;
}

void cge__dist_node_comm_destroy(cge__dist_node_comm *nc)
{
    if (!nc)
        return;
    int fin = 0;
    MPI_Finalized(&fin);
    if (nc->owned && !fin && !atomic_load(&nc->parent->broken))
        MPI_Comm_free(&nc->comm);
    free(nc);
}

/* float16 and bfloat16: MPI has no arithmetic on them, so each is a derived
 * 16-bit type of its own and each reduction a user operation that widens to
 * float32, combines, and rounds back (to nearest even): a ring over P ranks
 * rounds P - 1 times, as reducing in the type itself does elsewhere. The
 * types and operations are made once, after MPI is initialised. */
static MPI_Datatype half_types[2]; /* [0] float16, [1] bfloat16 */
static MPI_Op half_ops[4];          /* by cge__dist_red */
static pthread_once_t half_once = PTHREAD_ONCE_INIT;
static int half_ready;

static float half_get(bool bf16, uint16_t v) { return bf16 ? cge_bf16_to_f32(v) : cge_f16_to_f32(v); }
static uint16_t half_put(bool bf16, float f) { return bf16 ? cge_f32_to_bf16(f) : cge_f32_to_f16(f); }

static void half_reduce(void *in, void *inout, int *len, MPI_Datatype *dt, cge__dist_red red)
{
    bool bf16 = *dt == half_types[1];
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) {
        float x = half_get(bf16, a[i]), y = half_get(bf16, b[i]);
        float r = red == CGE__RED_MAX ? (x > y || x != x ? x : y)
                  : red == CGE__RED_MIN ? (x < y || x != x ? x : y)
                  : red == CGE__RED_PROD ? x * y : x + y;
        b[i] = half_put(bf16, r);
    }
}

static void half_sum(void *a, void *b, int *n, MPI_Datatype *t) { half_reduce(a, b, n, t, CGE__RED_SUM); }
static void half_max(void *a, void *b, int *n, MPI_Datatype *t) { half_reduce(a, b, n, t, CGE__RED_MAX); }
static void half_min(void *a, void *b, int *n, MPI_Datatype *t) { half_reduce(a, b, n, t, CGE__RED_MIN); }
static void half_prod(void *a, void *b, int *n, MPI_Datatype *t) { half_reduce(a, b, n, t, CGE__RED_PROD); }

static void half_init(void)
{
    MPI_User_function *fns[4] = {[CGE__RED_SUM] = half_sum, [CGE__RED_MAX] = half_max,
                                 [CGE__RED_MIN] = half_min, [CGE__RED_PROD] = half_prod};
    for (int k = 0; k < 2; k++)
        if (MPI_Type_contiguous(1, MPI_UINT16_T, &half_types[k]) != MPI_SUCCESS ||
            MPI_Type_commit(&half_types[k]) != MPI_SUCCESS)
            return;
    for (int r = 0; r < 4; r++)
        if (MPI_Op_create(fns[r], 1, &half_ops[r]) != MPI_SUCCESS)
            return;
    half_ready = 1;
}

static MPI_Datatype mpi_type(cge_dtype t)
{
    switch (t) {
    case CGE_F32: return MPI_FLOAT;
    case CGE_F64: return MPI_DOUBLE;
    case CGE_I8: return MPI_INT8_T;
    case CGE_U8: return MPI_UINT8_T;
    case CGE_I16: return MPI_INT16_T;
    case CGE_U16: return MPI_UINT16_T;
    case CGE_I32: return MPI_INT32_T;
    case CGE_U32: return MPI_UINT32_T;
    case CGE_I64: return MPI_INT64_T;
    case CGE_U64: return MPI_UINT64_T;
    case CGE_BOOL: return MPI_UINT8_T;
    case CGE_F16: return half_types[0];
    case CGE_BF16: return half_types[1];
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op mpi_op(cge__dist_red r, cge_dtype t)
{
    if (t == CGE_F16 || t == CGE_BF16)
        return half_ops[r];
    switch (r) {
    case CGE__RED_MAX: return MPI_MAX;
    case CGE__RED_MIN: return MPI_MIN;
    case CGE__RED_PROD: return MPI_PROD;
    default: return MPI_SUM;
    }
}

cge_status cge__dist_exchange(cge__dist_node_comm *nc, const cge__dist_xfer *x, char *msg,
                              size_t msg_size)
{
    cge_dist_comm *c = nc->parent;
    if (atomic_load(&c->broken))
        return broken_error(c, x->op_type, x->node_name, msg, msg_size);
    if (x->count > INT32_MAX) {
        snprintf(msg, msg_size, "%s '%s': %" PRId64 " elements per exchange; MPI counts stop at %d",
                 x->op_type, x->node_name, x->count, INT32_MAX);
        return CGE_ERR_UNSUPPORTED;
    }
    if (x->dtype == CGE_F16 || x->dtype == CGE_BF16) {
        pthread_once(&half_once, half_init);
        if (!half_ready) {
            snprintf(msg, msg_size, "%s '%s': MPI refused the %s type or its reductions",
                     x->op_type, x->node_name, cge_dtype_name(x->dtype));
            return CGE_ERR_STATE;
        }
    }
    int n = (int)x->count, P = c->size;
    MPI_Datatype dt = mpi_type(x->dtype);
    size_t esz = cge_dtype_size(x->dtype);
    const void *sendbuf = x->send == x->recv ? MPI_IN_PLACE : x->send;
    MPI_Request req = MPI_REQUEST_NULL;
    int64_t sent = 0;
    int rc;
    switch (x->kind) {
    case CGE__DIST_ALLREDUCE:
        rc = MPI_Iallreduce(sendbuf, x->recv, n, dt, mpi_op(x->red, x->dtype), nc->comm, &req);
        sent = x->count;
        break;
    case CGE__DIST_ALLGATHER:
        rc = MPI_Iallgather(x->send, n, dt, x->recv, n, dt, nc->comm, &req);
        sent = x->count;
        break;
    case CGE__DIST_REDUCE_SCATTER:
        rc = MPI_Ireduce_scatter_block(x->send, x->recv, n, dt, mpi_op(x->red, x->dtype), nc->comm, &req);
        sent = x->count * P;
        break;
    case CGE__DIST_BROADCAST:
        /* Broadcast works in place on recv (the kernel copied send there). */
        rc = MPI_Ibcast(x->recv, n, dt, x->peer, nc->comm, &req);
        sent = c->rank == x->peer ? x->count : 0;
        break;
    case CGE__DIST_ALLTOALL:
        rc = MPI_Ialltoall(x->send, n, dt, x->recv, n, dt, nc->comm, &req);
        sent = x->count * P;
        break;
    case CGE__DIST_SEND:
        rc = MPI_Isend(x->send, n, dt, x->peer, x->tag, nc->comm, &req);
        sent = x->count;
        break;
    case CGE__DIST_RECV:
        rc = MPI_Irecv(x->recv, n, dt, x->peer, x->tag, nc->comm, &req);
        break;
    default:
        rc = MPI_ERR_OTHER;
    }
    int merr = rc;
    cge_status st = rc == MPI_SUCCESS ? wait_request(&req, c->timeout_ms, &merr) : CGE_ERR_STATE;
    if (st == CGE_OK) {
        atomic_fetch_add(&c->bytes_sent, sent * (int64_t)esz);
        return CGE_OK;
    }
    char who[96];
    if (x->kind == CGE__DIST_SEND || x->kind == CGE__DIST_RECV)
        snprintf(who, sizeof who, "%s rank %d (tag %d)", x->kind == CGE__DIST_SEND ? "to" : "from",
                 x->peer, x->tag);
    else
        snprintf(who, sizeof who, "with ranks 0-%d", P - 1);
    if (st == CGE_ERR_TIMEOUT) {
        if (x->kind != CGE__DIST_SEND && x->kind != CGE__DIST_RECV)
            mark_broken(c, x->op_type, x->node_name);
        snprintf(msg, msg_size, "%s '%s' on rank %d of %d %s did not complete within %d ms "
                 "(a peer exited, is stuck, or runs a different collective)", x->op_type,
                 x->node_name, c->rank, P, who, c->timeout_ms);
    } else if (st == CGE_ERR_CANCELLED) {
        mark_broken(c, x->op_type, x->node_name);
        snprintf(msg, msg_size, "%s '%s' on rank %d of %d cancelled", x->op_type, x->node_name,
                 c->rank, P);
    } else {
        char m[MPI_MAX_ERROR_STRING];
        mpi_message(merr, m, sizeof m);
        snprintf(msg, msg_size, "%s '%s' on rank %d of %d %s: %s", x->op_type, x->node_name,
                 c->rank, P, who, m);
    }
    return st;
}

#else /* no MPI */

cge_status cge_dist_comm_create(cge_dist_source source, const void *mpi_comm, int timeout_ms,
                                cge_dist_comm **out)
{
    *out = NULL;
    return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_UNSUPPORTED,
                     "dist: this cge was built without MPI (install libopenmpi-dev and rebuild)");
}

void cge_dist_comm_destroy(cge_dist_comm *c) { (void)c; }
cge_status cge_dist_comm_barrier(cge_dist_comm *c) { return CGE_OK; }

cge_status cge__dist_node_comm_create(cge_dist_comm *c, const char *op_type,
                                      const char *node_name, uint64_t signature,
                                      cge__dist_node_comm **out)
{
    *out = NULL;
    return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_UNSUPPORTED, "dist: built without MPI");
}

void cge__dist_node_comm_destroy(cge__dist_node_comm *nc) { (void)nc; }

cge_status cge__dist_exchange(cge__dist_node_comm *nc, const cge__dist_xfer *x, char *msg,
                              size_t msg_size)
{
    snprintf(msg, msg_size, "%s '%s': built without MPI", x->op_type, x->node_name);
    return CGE_ERR_UNSUPPORTED;
}

#endif
