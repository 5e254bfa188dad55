/* Shape buckets: sizes of symbolic dims declared paddable, to which a run's
 * size is rounded up (its inputs padded with zeros, its outputs cut back),
 * so that a few compiled and captured signatures serve every size. */
#ifndef CGE_SESSION_BUCKETS_H
#define CGE_SESSION_BUCKETS_H

#include "cge/graph.h"
#include "cge/session.h"

typedef struct cge__buckets cge__buckets;

/* A private copy of `specs` (each dim's sizes sorted); NULL *out for none.
 * A spec without a name or sizes, or a size < 1, is an [session] error. */
cge_status cge__buckets_create(const cge_dim_buckets *specs, int32_t n, cge__buckets **out);
void cge__buckets_destroy(cge__buckets *b);

/* The input shapes a run of `g` at `shapes` takes: every dim that is a
 * bucketed symbol in `g`'s declared inputs rounded up to its bucket (sizes
 * past the largest stay). Symbols that some output of `out_graph` (the graph
 * whose output descriptors say where symbols land) does not carry, or where
 * an output has a dim computed from others, are never padded: padded rows
 * could reach such an output. Returns whether any dim changed. */
bool cge__buckets_round(const cge__buckets *b, const cge_graph *g, const cge_graph *out_graph,
                        const cge_shape *shapes, cge_shape *padded);

/* Copy the common box of two tensors of one element size: dst gets src's
 * elements where both shapes have them; dst's others are zeroed. */
void cge__copy_box(void *dst, const cge_shape *dst_shape, const void *src,
                   const cge_shape *src_shape, size_t elem);

#endif
