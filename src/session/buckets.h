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

/* Where a session graph pads, worked out once: the input axes declared with
 * a bucketed symbol (rounded up per run) and, per output axis carrying one,
 * the input axis whose size it takes back. Symbols that some output of
 * `out_graph` (the graph whose output descriptors say where symbols land)
 * does not carry, or where an output has a dim computed from others, are
 * never padded: padded rows could reach such an output. *out is NULL when
 * nothing pads. */
typedef struct cge__pad_plan cge__pad_plan;
cge_status cge__pad_plan_create(const cge__buckets *b, const cge_graph *g,
                                const cge_graph *out_graph, cge__pad_plan **out);
void cge__pad_plan_destroy(cge__pad_plan *p);
/* The shapes a run at `shapes` takes (each padded axis at its bucket; sizes
 * past the largest stay); whether any changed. */
bool cge__pad_round(const cge__pad_plan *p, const cge_shape *shapes, int32_t ni,
                    cge_shape *padded);
/* Output `output`'s padded `shape` back at the sizes `shapes` (the run's
 * real input shapes) give. */
void cge__pad_cut_shape(const cge__pad_plan *p, int32_t output, const cge_shape *shapes,
                        cge_shape *shape);

/* Copy the common box of two tensors of one element size: dst gets src's
 * elements where both shapes have them; dst's others are zeroed. */
void cge__copy_box(void *dst, const cge_shape *dst_shape, const void *src,
                   const cge_shape *src_shape, size_t elem);

#endif
