/* A session's distribution options turned into its communicator, checked
 * against what the launcher started (world size, rank, tp degree). */
#include "session/session_dist.h"

cge_status cge__session_dist_open(const cge_session_options *opts, cge_dist_comm **comm, int *tp,
                                  bool *pp)
{
    *comm = NULL;
    *tp = 1;
    *pp = false;
    cge_status st = cge_dist_register_ops();
    if (st || !opts)
        return st;
    if (opts->dist_tp > 1 && opts->dist_pp > 1)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_UNSUPPORTED,
                         "session_create: dist_tp %d with dist_pp %d: tensor and pipeline "
                         "parallelism are not combined yet; choose one", opts->dist_tp, opts->dist_pp);
    if (opts->dist_micro_batches > 1 && opts->dist_pp <= 1)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "session_create: dist_micro_batches %d without dist_pp: micro-batches "
                         "flow through pipeline stages (set dist_pp)", opts->dist_micro_batches);
    if (opts->dist_micro_batches < 0)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "session_create: dist_micro_batches %d is negative", opts->dist_micro_batches);
    bool want_pp = opts->dist_pp > 1;
    int want_tp = want_pp ? opts->dist_pp : opts->dist_tp > 1 ? opts->dist_tp : 1;
    if (opts->dist == CGE_DIST_NONE) {
        if (want_tp > 1 || opts->dist_world_size > 1)
            return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                             "session_create: dist_tp %d / dist_pp %d / dist_world_size %d need a "
                             "communicator (set dist to CGE_DIST_FROM_ENV and start under mpirun)",
                             opts->dist_tp, opts->dist_pp, opts->dist_world_size);
        return CGE_OK;
    }
    st = cge_dist_comm_create(opts->dist, opts->dist_mpi_comm, opts->dist_timeout_ms, comm);
    if (st)
        return st;
    int size = cge_dist_comm_size(*comm), rank = cge_dist_comm_rank(*comm);
    if (opts->dist_world_size > 0 && (opts->dist_world_size != size || opts->dist_rank != rank))
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                       "session_create: expected rank %d of %d, but the communicator has this "
                       "process as rank %d of %d", opts->dist_rank, opts->dist_world_size, rank, size);
    else if (want_tp > 1 && want_tp != size)
        st = cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                       "session_create: %s %d, but the world has %d rank(s); it spans the whole "
                       "world (run mpirun -np %d)", want_pp ? "dist_pp" : "dist_tp", want_tp, size,
                       want_tp);
    if (st) {
        cge_dist_comm_destroy(*comm);
        *comm = NULL;
        return st;
    }
    *tp = want_tp;
    *pp = want_pp;
    return CGE_OK;
}
