/* Numpy-broadcast strides, dimension collapsing and the row iterator shared
 * by the elementwise kernels (see broadcast.h). */
#include <string.h>

#include "ops/broadcast.h"

bool cge__broadcast_strides(const cge_shape *in, const cge_shape *out,
                           int64_t strides[CGE_MAX_RANK])
{
    if (in->rank < 0 || in->rank > out->rank || out->rank > CGE_MAX_RANK)
        return false;
    int32_t lead = out->rank - in->rank;
    int64_t s = 1;
    for (int32_t d = out->rank - 1; d >= 0; d--) {
        int64_t od = out->dims[d];
        if (od < 0)
            return false;
        if (d < lead) {
            strides[d] = 0;
            continue;
        }
        int64_t id = in->dims[d - lead];
        if (id < 0 || (id != od && id != 1))
            return false;
        strides[d] = (id == 1 && od != 1) ? 0 : s;
        s *= id;
    }
    return true;
}

cge_status cge__bcast_init(cge__bcast *bc, const cge_shape *out, const cge_shape *const *ins,
                          int32_t n)
{
    memset(bc, 0, sizeof *bc);
    if (n < 1 || n > CGE_BCAST_MAX_INPUTS || !cge_shape_is_static(out))
        return CGE_ERR_INVALID_ARG;
    int64_t full[CGE_BCAST_MAX_INPUTS][CGE_MAX_RANK];
    for (int32_t i = 0; i < n; i++) {
        if (!cge_shape_is_static(ins[i]))
            return CGE_ERR_INVALID_ARG;
        if (!cge__broadcast_strides(ins[i], out, full[i]))
            return CGE_ERR_SHAPE;
    }
    bc->num_inputs = n;
    bc->numel = cge_shape_numel(out);
    if (bc->numel == 0) {
        /* Nothing to iterate; keep a well-formed rank-1 description. */
        bc->rank = 1;
        bc->dims[0] = 0;
        return CGE_OK;
    }

    /* Drop size-1 dims (every input is size 1 there too), then merge a dim
     * into the one outside it when each input's strides chain across both. */
    int32_t r = 0;
    for (int32_t d = 0; d < out->rank; d++) {
        if (out->dims[d] == 1)
            continue;
        bool merge = r > 0;
        for (int32_t i = 0; i < n && merge; i++)
            merge = bc->strides[i][r - 1] == full[i][d] * out->dims[d];
        if (merge) {
            bc->dims[r - 1] *= out->dims[d];
            for (int32_t i = 0; i < n; i++)
                bc->strides[i][r - 1] = full[i][d];
        } else {
            bc->dims[r] = out->dims[d];
            for (int32_t i = 0; i < n; i++)
                bc->strides[i][r] = full[i][d];
            r++;
        }
    }
    if (r == 0) {
        /* A single element: every input is read at offset 0. */
        bc->dims[0] = 1;
        for (int32_t i = 0; i < n; i++)
            bc->strides[i][0] = 0;
        r = 1;
    }
    bc->rank = r;
    return CGE_OK;
}

void cge__bcast_iter_init(const cge__bcast *bc, int64_t start, cge__bcast_iter *it)
{
    memset(it, 0, sizeof *it);
    it->pos = start;
    if (bc->numel == 0)
        return;
    int64_t rem = start;
    for (int32_t d = bc->rank - 1; d >= 0; d--) {
        int64_t q = rem / bc->dims[d];
        it->idx[d] = rem - q * bc->dims[d];
        rem = q;
        for (int32_t i = 0; i < bc->num_inputs; i++)
            it->off[i] += it->idx[d] * bc->strides[i][d];
    }
    /* start == numel leaves idx wrapped to 0 in every dim; rem then counts
     * the overflow, and pos alone marks the end. */
}

void cge__bcast_iter_advance(const cge__bcast *bc, cge__bcast_iter *it, int64_t n)
{
    int32_t d = bc->rank - 1;
    it->pos += n;
    it->idx[d] += n;
    for (int32_t i = 0; i < bc->num_inputs; i++)
        it->off[i] += n * bc->strides[i][d];
    while (d > 0 && it->idx[d] == bc->dims[d]) {
        it->idx[d] = 0;
        it->idx[d - 1]++;
        for (int32_t i = 0; i < bc->num_inputs; i++)
            it->off[i] += bc->strides[i][d - 1] - bc->dims[d] * bc->strides[i][d];
        d--;
    }
}

/* One gather loop per element size; s is the row's input stride (0 or 1). */
#define DEF_COPY_ROW(NAME, T)                                                          \
    static void NAME(T *dst, const T *src, int64_t s, int64_t n)                       \
    {                                                                                  \
        if (s == 1) {                                                                  \
            memcpy(dst, src, (size_t)n * sizeof(T));                                   \
        } else if (s == 0) {                                                           \
            T v = src[0];                                                              \
            for (int64_t k = 0; k < n; k++)                                            \
                dst[k] = v;                                                            \
        } else {                                                                       \
            for (int64_t k = 0; k < n; k++)                                            \
                dst[k] = src[k * s];                                                   \
        }                                                                              \
    }
DEF_COPY_ROW(copy_row8, uint8_t)
DEF_COPY_ROW(copy_row16, uint16_t)
DEF_COPY_ROW(copy_row32, uint32_t)
DEF_COPY_ROW(copy_row64, uint64_t)

void cge__bcast_copy(const cge__bcast *bc, int32_t input, size_t elem_size, const void *src,
                    void *dst, int64_t begin, int64_t end)
{
    if (begin >= end || bc->numel == 0)
        return;
    const char *s = src;
    char *o = dst;
    int64_t st = bc->strides[input][bc->rank - 1];
    cge__bcast_iter it;
    cge__bcast_iter_init(bc, begin, &it);
    while (it.pos < end) {
        int64_t n = cge__bcast_iter_run(bc, &it, end);
        const char *from = s + (size_t)it.off[input] * elem_size;
        char *to = o + (size_t)it.pos * elem_size;
        switch (elem_size) {
        case 1: copy_row8((uint8_t *)to, (const uint8_t *)from, st, n); break;
        case 2: copy_row16((uint16_t *)to, (const uint16_t *)from, st, n); break;
        case 4: copy_row32((uint32_t *)to, (const uint32_t *)from, st, n); break;
        case 8: copy_row64((uint64_t *)to, (const uint64_t *)from, st, n); break;
        default:
            for (int64_t k = 0; k < n; k++)
                memcpy(to + (size_t)k * elem_size, from + (size_t)(k * st) * elem_size,
                       elem_size);
            break;
        }
        cge__bcast_iter_advance(bc, &it, n);
    }
}

void cge__bcast_rows2(const cge__bcast *bc, int64_t begin, int64_t end, void *out, size_t size_out,
                     const void *a, size_t size_a, const void *b, size_t size_b,
                     cge__bcast_row2_fn row, const void *user)
{
    int32_t last = bc->rank - 1;
    int64_t sa = bc->strides[0][last], sb = bc->strides[1][last];
    char *O = out;
    const char *A = a, *B = b;
    if (bc->rank == 1) {
        row(user, O + (size_t)begin * size_out, A + (size_t)(begin * sa) * size_a, sa,
            B + (size_t)(begin * sb) * size_b, sb, end - begin);
        return;
    }
    cge__bcast_iter it;
    cge__bcast_iter_init(bc, begin, &it);
    while (it.pos < end) {
        int64_t n = cge__bcast_iter_run(bc, &it, end);
        row(user, O + (size_t)it.pos * size_out, A + (size_t)it.off[0] * size_a, sa,
            B + (size_t)it.off[1] * size_b, sb, n);
        cge__bcast_iter_advance(bc, &it, n);
    }
}
