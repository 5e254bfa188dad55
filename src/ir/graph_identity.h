/* A graph's identity for caches kept outside it: addresses are reused once a
 * graph is destroyed, so a key made of pointers alone can match a new graph. */
#ifndef CGE_IR_GRAPH_IDENTITY_H
#define CGE_IR_GRAPH_IDENTITY_H

#include <stdint.h>

#include "cge/graph.h"

/* A number no other graph of this process has had (clones get their own), or
 * 0 for NULL. */
uint64_t cge__graph_uid(const cge_graph *g);

/* Bumped by every change to a node or a value's descriptor: a cache entry made
 * at another revision of the same graph may describe a graph that is gone. */
uint64_t cge__graph_revision(const cge_graph *g);

#endif
