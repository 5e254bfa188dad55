/* A session's distribution: the communicator its options ask for and the
 * tensor-parallel degree its graphs are sharded for. */
#ifndef CGE_SESSION_DIST_H
#define CGE_SESSION_DIST_H

#include "cge/session.h"

/* Registers the cge.dist operators; with opts->dist set, makes the
 * communicator and checks world size, rank and tp/pp against it. *tp gets
 * the degree graphs are split for (1: none), *pp whether as pipeline stages
 * rather than tensor shards. */
cge_status cge__session_dist_open(const cge_session_options *opts, cge_dist_comm **comm, int *tp,
                                  bool *pp);

#endif
