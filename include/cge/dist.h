/* Distribution over processes: communicators (Open MPI underneath), the
 * collective operators of the `cge.dist` domain, and the tensor-parallel
 * graph rewrite. See docs/distributed.md. */
#ifndef CGE_DIST_H
#define CGE_DIST_H

#include "cge/graph.h"
#include "cge/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CGE_DOMAIN_DIST "cge.dist"

/* Where a session's communicator comes from (cge_session_options.dist). */
typedef enum cge_dist_source {
    CGE_DIST_NONE = 0,     /* one process: collectives act on a world of one */
    /* MPI_COMM_WORLD of the processes mpirun started. cge calls
     * MPI_Init_thread(MPI_THREAD_MULTIPLE) if the program has not initialised
     * MPI itself, and then MPI_Finalize at exit (atexit); a program that
     * initialised MPI keeps the duty to finalize it. */
    CGE_DIST_FROM_ENV = 1,
    /* The caller's communicator: cge_session_options.dist_mpi_comm points at
     * an MPI_Comm (MPI initialised with MPI_THREAD_MULTIPLE by the caller). */
    CGE_DIST_MPI_COMM = 2
} cge_dist_source;

/* A communicator: a duplicate of the source one, so that cge's messages never
 * meet the caller's. */
typedef struct cge_dist_comm cge_dist_comm;

/* Whether this build of cge has MPI (otherwise only CGE_DIST_NONE works,
 * and a world of one). */
bool cge_dist_available(void);
/* mpi_comm: NULL with CGE_DIST_FROM_ENV, else the address of an MPI_Comm.
 * timeout_ms (0: 30000) bounds every collective: past it, the operator
 * fails with a [runtime] CGE_ERR_TIMEOUT error naming the node and ranks
 * instead of waiting for a peer that died or runs another collective. */
cge_status cge_dist_comm_create(cge_dist_source source, const void *mpi_comm, int timeout_ms,
                                cge_dist_comm **out);
/* After every plan that uses it is gone. NULL is a no-op. */
void cge_dist_comm_destroy(cge_dist_comm *c);
int cge_dist_comm_rank(const cge_dist_comm *c);   /* 0 for NULL */
int cge_dist_comm_size(const cge_dist_comm *c);   /* 1 for NULL */
int cge_dist_comm_timeout_ms(const cge_dist_comm *c);
/* A barrier, bounded by the communicator's timeout. */
cge_status cge_dist_comm_barrier(cge_dist_comm *c);
/* Bytes this process's collectives have sent so far (what the operators
 * hand MPI, not the wire traffic of MPI's algorithms). */
int64_t cge_dist_comm_bytes_sent(const cge_dist_comm *c);

/* The rank and size of the environment's world before any communicator is
 * made (from mpirun's variables, without initialising MPI): 0 and 1 outside
 * mpirun. For tools that must know the rank early (who prints). */
void cge_dist_env_rank(int *rank, int *size);

/* Registers the cge.dist operators (AllReduce, AllGather, ReduceScatter,
 * Broadcast, AllToAll, Send, Recv). Idempotent and thread-safe; creating a
 * session and the parallel rewrites call it. (`cge op-check` without a
 * session does not list them: Send and Recv need a peer, which a world of
 * one has not.) */
cge_status cge_dist_register_ops(void);

/* Tensor parallelism, Megatron-style: *out gets `g` rewritten for rank
 * `rank` of `tp`: column-parallel Q/K/V and first MLP MatMuls (their weight
 * columns and bias split by heads), row-parallel attention output and second
 * MLP MatMuls (weight rows split, bias on rank 0 only) with an AllReduce
 * after each, Reshape targets and Slice bounds adjusted to the local heads.
 * The graph is first normalised as the compiler's exact level does
 * (constants folded, so the shapes torch.onnx computes become constants).
 * Blocks it does not recognise (dynamic shapes, masks it cannot split, a
 * head count not divisible by tp) stay replicated; with none recognised *out
 * is a plain copy of `g`. Weights not this rank's are not in *out.
 * *num_sharded (may be NULL) gets the number of regions rewritten. */
cge_status cge_dist_tensor_parallel(const cge_graph *g, int tp, int rank, cge_graph **out,
                                    int32_t *num_sharded);

/* Pipeline parallelism: *out gets stage `rank` of `pp` of `g` (normalised
 * as above; static shapes needed): the nodes in topological order cut into
 * pp runs of balanced estimated cost (multiply-adds of MatMul, Gemm and Conv;
 * elements written by the rest). Values crossing a cut are received from the
 * previous rank and sent to the next (forwarded when a later stage reads
 * them); the last stage sends the graph outputs to every other rank, so
 * every rank's graph has the original inputs and outputs. A graph with
 * dynamic shapes is returned unchanged (every rank computes everything).
 * *num_stages (may be NULL) gets pp, or 1 when unchanged; *sent_bytes (may
 * be NULL) the bytes this rank's stage sends per run. */
cge_status cge_dist_pipeline_parallel(const cge_graph *g, int pp, int rank, cge_graph **out,
                                      int32_t *num_stages, int64_t *sent_bytes);

/* Pipeline parallelism with micro-batches (GPipe): every input's axis 0 is
 * split into `micro_batches` equal parts, the stage is instantiated once per
 * part with Send/Recv tags of its own, so that while this rank works on
 * part i the rank before works on part i+1; the last rank concatenates the
 * outputs along axis 0 and sends them to the others. A static batch that
 * micro_batches does not divide, or an output without the batch on axis 0,
 * is a [graph] error. micro_batches <= 1: cge_dist_pipeline_parallel. */
cge_status cge_dist_pipeline_parallel_micro(const cge_graph *g, int pp, int rank, int micro_batches,
                                            cge_graph **out, int32_t *num_stages,
                                            int64_t *sent_bytes);

#ifdef __cplusplus
}
#endif
#endif
