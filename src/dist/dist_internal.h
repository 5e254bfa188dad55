/* Inside the dist layer: the transport the collective kernels call (one
 * blocking-with-deadline exchange per launch, MPI non-blocking underneath)
 * and the per-node communicators their prepare makes. */
#ifndef CGE_DIST_INTERNAL_H
#define CGE_DIST_INTERNAL_H

#include "cge/dist.h"
#include "cge/graph.h"
#include "cge/types.h"

typedef enum cge__dist_kind {
    CGE__DIST_ALLREDUCE,
    CGE__DIST_ALLGATHER,
    CGE__DIST_REDUCE_SCATTER,
    CGE__DIST_BROADCAST,
    CGE__DIST_ALLTOALL,
    CGE__DIST_SEND,
    CGE__DIST_RECV
} cge__dist_kind;

typedef enum cge__dist_red { CGE__RED_SUM, CGE__RED_MAX, CGE__RED_MIN, CGE__RED_PROD } cge__dist_red;

/* One exchange. count: elements of `send` for AllReduce, Broadcast, Send;
 * of one rank's block for AllGather (input), ReduceScatter (output),
 * AllToAll (each block); of `recv` for Recv. */
typedef struct cge__dist_xfer {
    cge__dist_kind kind;
    cge__dist_red red;
    int peer;                  /* Broadcast: root; Send/Recv: the other rank */
    int tag;
    cge_dtype dtype;
    int64_t count;
    const void *send;
    void *recv;
    const char *op_type, *node_name;
} cge__dist_xfer;

/* A communicator of one graph node (a duplicate of the session's, made at
 * the node's prepare), so that collectives of different nodes never match
 * each other whatever order streams issue them in. */
typedef struct cge__dist_node_comm cge__dist_node_comm;

/* Collective over `c` (all ranks prepare the same plan in the same order):
 * duplicates it and checks that every rank's node has the same `signature`
 * (op, dtype, sizes), so that a mismatched graph fails here, by name. */
cge_status cge__dist_node_comm_create(cge_dist_comm *c, const char *op_type,
                                      const char *node_name, uint64_t signature,
                                      cge__dist_node_comm **out);
void cge__dist_node_comm_destroy(cge__dist_node_comm *nc);
int cge__dist_node_comm_rank(const cge__dist_node_comm *nc);
int cge__dist_node_comm_size(const cge__dist_node_comm *nc);

/* Posts the exchange and progresses it until done or the communicator's
 * deadline. On failure `msg` says what (node, ranks) and the status is
 * CGE_ERR_TIMEOUT (deadline) or CGE_ERR_STATE (MPI reported an error). */
cge_status cge__dist_exchange(cge__dist_node_comm *nc, const cge__dist_xfer *x, char *msg,
                              size_t msg_size);

/* `g` prepared and folded at the compiler's exact level (shapes that
 * torch.onnx computes become constants), inferred: what the parallel
 * rewrites read. */
cge_status cge__dist_normalised(const cge_graph *g, cge_graph **out);

#endif
