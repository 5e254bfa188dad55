/* The CLI's distributed runs: --tp N or --pp N under mpirun makes the session's
 * communicator from the environment, only rank 0 writes to stdout, and
 * bench adds each rank's latency and the bytes its collectives sent. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

void cli_dist_session_options(const cli_opts *o, cge_session_options *so)
{
    int rank, size;
    cge_dist_env_rank(&rank, &size);
    if (o->tp > 1 || o->pp > 1 || size > 1) {
        so->dist = CGE_DIST_FROM_ENV;
        so->dist_tp = o->tp;
        so->dist_pp = o->pp;
        so->dist_micro_batches = o->micro_batches;
    }
}

int cli_dist_rank(cge_session *s) { return cge_dist_comm_rank(cge_session_dist_comm(s)); }

void cli_dist_quiet_others(cge_session *s)
{
    cge_dist_comm *c = cge_session_dist_comm(s);
    if (!c)
        return;
    /* Every rank computes the same outputs; one copy of them is printed. */
    if (cge_dist_comm_rank(c) != 0 && !freopen("/dev/null", "w", stdout))
        fprintf(stderr, "cge: rank %d: cannot silence stdout\n", cge_dist_comm_rank(c));
}

static double pct(const double *v, long n, double q)
{
    long k = (long)(q * (double)n + 0.999999) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

void cli_dist_bench_report(cge_session *s, const double *lat, long n, long runs)
{
    cge_dist_comm *c = cge_session_dist_comm(s);
    if (!c || n <= 0)
        return;
    int rank = cge_dist_comm_rank(c), size = cge_dist_comm_size(c);
    double per_run = runs > 0 ? (double)cge_dist_comm_bytes_sent(c) / (double)runs : 0;
    /* Each rank's own line on stderr (mpirun merges them); the collectives
     * synchronise the ranks every run, so rank 0's latency is the
     * end-to-end one. */
    fprintf(stderr, "  [rank %d of %d] latency p50 %.3f  p90 %.3f  min %.3f ms; "
            "collectives sent %.1f KiB per run\n", rank, size, pct(lat, n, 0.5), pct(lat, n, 0.9),
            lat[0], per_run / 1024.0);
    if (rank == 0)
        printf("  distributed: %d ranks; end-to-end latency p50 %.3f ms (rank 0; every run ends "
               "in collectives over all ranks); %.1f KiB sent per run by this rank\n",
               size, pct(lat, n, 0.5), per_run / 1024.0);
    cge_dist_comm_barrier(c);
}
