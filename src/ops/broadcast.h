/* Numpy-broadcast iteration for elementwise kernels (binary ops, Where,
 * Expand): per-input element strides against an output shape, dimension
 * collapsing so common cases become one flat loop, and a row iterator. */
#ifndef CGE_OPS_BROADCAST_H
#define CGE_OPS_BROADCAST_H

#include "cge/types.h"

/* Most inputs one broadcast describes (Where has 3). */
#define CGE_BCAST_MAX_INPUTS 4

/* Element strides of a dense row-major tensor of shape `in` viewed at the
 * output shape `out` (shapes aligned at the right, as numpy does): strides[d]
 * for d < out->rank; 0 where `in` is broadcast (its dim is 1 or absent).
 * Returns false if `in` does not broadcast to `out` (unidirectionally: every
 * dim of `in` is 1 or equal to out's) or either shape is dynamic. */
bool cge__broadcast_strides(const cge_shape *in, const cge_shape *out,
                           int64_t strides[CGE_MAX_RANK]);

/* An output shape with its inputs' strides, collapsed: output dims of size 1
 * are dropped and neighbouring dims merged wherever every input is laid out
 * the same way across them. So same-shape inputs become rank 1 with stride 1,
 * a scalar operand rank 1 with stride 0, and [N,C] + [C] rank 2 with strides
 * (C,1) and (0,1). After collapsing, rank >= 1 and the innermost stride of a
 * dense input is 0 or 1. Plain data: it can be copied into launch args. */
typedef struct cge__bcast {
    int32_t rank;                                        /* 1 .. CGE_MAX_RANK */
    int32_t num_inputs;
    int64_t numel;                                       /* output elements (may be 0) */
    int64_t dims[CGE_MAX_RANK];                          /* collapsed output dims */
    int64_t strides[CGE_BCAST_MAX_INPUTS][CGE_MAX_RANK]; /* element strides, 0 = broadcast */
} cge__bcast;

/* Describe iterating the static shape `out` over `n` (1..CGE_BCAST_MAX_INPUTS)
 * inputs of shapes ins[0..n). CGE_ERR_SHAPE if an input does not broadcast to
 * `out`, CGE_ERR_INVALID_ARG for a bad count or a dynamic shape; no message
 * is recorded (the caller names the node). */
cge_status cge__bcast_init(cge__bcast *bc, const cge_shape *out, const cge_shape *const *ins,
                          int32_t n);

/* Input i is read in output order, element for element (no broadcast). */
static inline bool cge__bcast_is_dense(const cge__bcast *bc, int32_t i)
{
    return bc->rank == 1 && (bc->strides[i][0] == 1 || bc->numel <= 1);
}

/* Input i is a single element repeated over the whole output. */
static inline bool cge__bcast_is_scalar(const cge__bcast *bc, int32_t i)
{
    for (int32_t d = 0; d < bc->rank; d++)
        if (bc->strides[i][d] != 0 && bc->dims[d] != 1)
            return false;
    return true;
}

/* Walks the output in rows along the innermost collapsed dim. Typical use
 * over a block's range [begin, end) of output elements:
 *
 *     cge__bcast_iter it;
 *     cge__bcast_iter_init(&bc, begin, &it);
 *     while (it.pos < end) {
 *         int64_t n = cge__bcast_iter_run(&bc, &it, end);
 *         row(out + it.pos, a + it.off[0], bc.strides[0][bc.rank - 1],
 *             b + it.off[1], bc.strides[1][bc.rank - 1], n);
 *         cge__bcast_iter_advance(&bc, &it, n);
 *     }
 *
 * Within a row, input i advances by its innermost stride (0 or 1). */
typedef struct cge__bcast_iter {
    int64_t pos;                          /* linear output index */
    int64_t idx[CGE_MAX_RANK];            /* its multi-index in bc->dims */
    int64_t off[CGE_BCAST_MAX_INPUTS];    /* element offset of each input */
} cge__bcast_iter;

/* Position the iterator at output element `start` (0 <= start <= numel). */
void cge__bcast_iter_init(const cge__bcast *bc, int64_t start, cge__bcast_iter *it);

/* Elements from it->pos to the end of its row, but not past output index
 * `end`. */
static inline int64_t cge__bcast_iter_run(const cge__bcast *bc, const cge__bcast_iter *it,
                                         int64_t end)
{
    int64_t last = bc->rank - 1;
    int64_t n = bc->dims[last] - it->idx[last];
    return n < end - it->pos ? n : end - it->pos;
}

/* Move forward by `n` elements, n at most the current run's length. */
void cge__bcast_iter_advance(const cge__bcast *bc, cge__bcast_iter *it, int64_t n);

/* One run of a two-input elementwise op: n outputs at o, operands a and b
 * advancing by sa, sb elements (each 0 or 1). `user` is the caller's. */
typedef void (*cge__bcast_row2_fn)(const void *user, void *o, const void *a, int64_t sa,
                                  const void *b, int64_t sb, int64_t n);
/* Output elements [begin, end) of a two-input broadcast (inputs 0 and 1 of
 * `bc`) as rows: row() once per run of the innermost dim, with pointers
 * offset by the element sizes. Same shapes or a scalar operand (rank 1 after
 * collapsing) are one call, with no iterator. The body of every broadcasting
 * binary kernel block. */
void cge__bcast_rows2(const cge__bcast *bc, int64_t begin, int64_t end, void *out, size_t size_out,
                     const void *a, size_t size_a, const void *b, size_t size_b,
                     cge__bcast_row2_fn row, const void *user);

/* Gather input `input` (dense data at `src`, elements of `elem_size` bytes)
 * into the dense output range [begin, end) at `dst`: the body of Expand, or of
 * materialising a broadcast operand. Typed loops for sizes 1, 2, 4, 8. */
void cge__bcast_copy(const cge__bcast *bc, int32_t input, size_t elem_size, const void *src,
                    void *dst, int64_t begin, int64_t end);

#endif
