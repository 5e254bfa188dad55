/* Window geometry shared by the convolution and pooling families: kernel,
 * strides, dilations, explicit or automatic pads and output sizes, from ONNX
 * attributes. */
#ifndef CGE_OPS_NN_SPATIAL_H
#define CGE_OPS_NN_SPATIAL_H

#include <stdio.h>
#include <string.h>

#include "cge/op.h"

/* Up to three spatial dims; fewer are padded to three at the front with size-1
 * dims so that one set of loops serves 1-D, 2-D and 3-D. */

#define NN_MAX_SP 3

typedef struct nn_geom {
    int32_t nsp;                 /* spatial dims of the node (1..3) */
    /* Always three entries, the real dims last. */
    int64_t in[NN_MAX_SP], out[NN_MAX_SP], k[NN_MAX_SP], s[NN_MAX_SP], d[NN_MAX_SP];
    int64_t pb[NN_MAX_SP], pe[NN_MAX_SP];
} nn_geom;

/* An ints attribute of exactly `n` entries, or absent (returns 0 and leaves
 * `out` alone); -1 when present with another length. */
static inline int nn_ints_attr(const cge_attrs *a, const char *name, int32_t n, int64_t *out)
{
    const int64_t *v = NULL;
    int64_t cnt = cge_attrs_get_ints(a, name, &v);
    if (!cge_attrs_find(a, name))
        return 0;
    if (cnt != n)
        return -1;
    for (int32_t i = 0; i < n; i++)
        out[i] = v[i];
    return 1;
}

/* The output size of a window for a symbolic input size `in` (stride s,
 * extent ext, pads summing to `pads`, auto_pad `mode`): the same symbol where
 * it is provably the input's ('same' padding at stride 1), else a derived
 * symbol floor((in + add) / s) (cge_dim_derive), which equal arithmetic on
 * the same symbol gives again, so residual branches stay provably equal.
 * CGE_DIM_DYNAMIC where the rule is not of that form. */
static inline int64_t nn_symbolic_out(int64_t in, int64_t s, int64_t ext, int64_t pads, int mode,
                                      bool ceil_mode)
{
    if (mode >= 2) /* SAME_*: ceil(in / s) */
        return cge_dim_derive(in, s - 1, s);
    /* floor(span / s) + 1, span = in + pads - ext */
    if (!ceil_mode)
        return cge_dim_derive(in, pads - ext + s, s);
    /* ceil(span / s) + 1, less one where that last window would start in the
     * end padding: (out-1)*s >= in + pb. With ceil(span/s)*s < span + s, that
     * never happens when pe + s <= ext, nor at stride 1 when pe < ext. Pads
     * here are their sum, so the proof takes the end pad as all of it. */
    if (pads + s <= ext || (s == 1 && pads < ext))
        return cge_dim_derive(in, pads - ext + 2 * s - 1, s);
    return CGE_DIM_DYNAMIC;
}

/* Fill `g` for `nsp` spatial input dims `in` (symbolic allowed: outputs then
 * symbolic, nn_symbolic_out, or dynamic). `kernel` gives the window when the op takes it from a weight (NULL:
 * the kernel_shape attribute is required). `transpose` selects ConvTranspose
 * output sizes. Writes a reason into err and returns false when the
 * attributes are invalid. */
static inline bool nn_geom_make(const cge_attrs *a, int32_t nsp, const int64_t *in,
                                const int64_t *kernel, bool ceil_mode, nn_geom *g, char *err,
                                size_t errsz)
{
    memset(g, 0, sizeof *g);
    if (nsp < 1 || nsp > NN_MAX_SP) {
        snprintf(err, errsz, "%d spatial dims; this kernel supports 1 to 3", (int)nsp);
        return false;
    }
    g->nsp = nsp;
    int64_t k[NN_MAX_SP], s[NN_MAX_SP], d[NN_MAX_SP], p[2 * NN_MAX_SP];
    for (int i = 0; i < nsp; i++) {
        s[i] = 1;
        d[i] = 1;
        p[i] = p[nsp + i] = 0;
        k[i] = kernel ? kernel[i] : -1;
    }
    int rk = nn_ints_attr(a, "kernel_shape", nsp, k);
    if (rk < 0 || nn_ints_attr(a, "strides", nsp, s) < 0 ||
        nn_ints_attr(a, "dilations", nsp, d) < 0 || nn_ints_attr(a, "pads", 2 * nsp, p) < 0) {
        snprintf(err, errsz,
                 "kernel_shape, strides and dilations need %d entries and pads %d (one per "
                 "spatial dim)",
                 (int)nsp, (int)(2 * nsp));
        return false;
    }
    if (!kernel && rk == 0) {
        snprintf(err, errsz, "attribute kernel_shape is required");
        return false;
    }
    for (int i = 0; i < nsp; i++) {
        if (kernel && kernel[i] >= 0 && k[i] != kernel[i]) {
            snprintf(err, errsz, "kernel_shape %lld disagrees with the weight's %lld",
                     (long long)k[i], (long long)kernel[i]);
            return false;
        }
        if (k[i] < 1 || s[i] < 1 || d[i] < 1 || p[i] < 0 || p[nsp + i] < 0) {
            snprintf(err, errsz,
                     "kernel sizes, strides and dilations must be >= 1 and pads >= 0");
            return false;
        }
    }
    const char *ap = cge_attrs_get_string(a, "auto_pad", "NOTSET");
    int mode = !strcmp(ap, "NOTSET") ? 0 : !strcmp(ap, "VALID") ? 1
             : !strcmp(ap, "SAME_UPPER") ? 2 : !strcmp(ap, "SAME_LOWER") ? 3 : -1;
    if (mode < 0) {
        snprintf(err, errsz, "auto_pad '%s' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER", ap);
        return false;
    }
    int off = NN_MAX_SP - nsp;
    for (int i = 0; i < NN_MAX_SP; i++) {
        g->in[i] = g->out[i] = g->k[i] = g->s[i] = g->d[i] = 1;
        g->pb[i] = g->pe[i] = 0;
    }
    for (int i = 0; i < nsp; i++) {
        int j = off + i;
        g->in[j] = in[i];
        g->k[j] = k[i];
        g->s[j] = s[i];
        g->d[j] = d[i];
        int64_t ext = (k[i] - 1) * d[i] + 1;
        if (mode == 0) {
            g->pb[j] = p[i];
            g->pe[j] = p[nsp + i];
        }
        if (in[i] < 0) {
            g->out[j] = nn_symbolic_out(in[i], s[i], ext, g->pb[j] + g->pe[j], mode, ceil_mode);
            continue;
        }
        if (mode >= 2) {
            int64_t o = (in[i] + s[i] - 1) / s[i];
            int64_t tot = (o - 1) * s[i] + ext - in[i];
            if (tot < 0)
                tot = 0;
            g->pb[j] = mode == 2 ? tot / 2 : tot - tot / 2;
            g->pe[j] = tot - g->pb[j];
            g->out[j] = o;
            continue;
        }
        int64_t span = in[i] + g->pb[j] + g->pe[j] - ext;
        if (span < 0) {
            snprintf(err, errsz, "the window (extent %lld) is larger than the padded input (%lld)",
                     (long long)ext, (long long)(in[i] + g->pb[j] + g->pe[j]));
            return false;
        }
        g->out[j] = (ceil_mode ? (span + s[i] - 1) / s[i] : span / s[i]) + 1;
        /* ceil_mode: a last window that would start in the end padding is
         * dropped, as ONNX Runtime and PyTorch do. */
        if (ceil_mode && (g->out[j] - 1) * s[i] >= in[i] + g->pb[j])
            g->out[j]--;
    }
    return true;
}

/* The range [k0, k1) of window taps along one dim that land inside the input
 * for output position o. */
static inline void nn_tap_range(const nn_geom *g, int j, int64_t o, int64_t *k0, int64_t *k1)
{
    int64_t start = o * g->s[j] - g->pb[j];
    int64_t a = 0, b = g->k[j];
    if (start < 0)
        a = (-start + g->d[j] - 1) / g->d[j];
    int64_t lim = g->in[j] - start; /* tap t valid while t*d < lim */
    if (lim <= 0)
        b = 0;
    else if ((lim - 1) / g->d[j] + 1 < b)
        b = (lim - 1) / g->d[j] + 1;
    if (a > b)
        a = b;
    *k0 = a;
    *k1 = b;
}

/* Taps t in [0, k) whose padded position o*s + t*d stays below in + pb + pe:
 * the divisor of an average when padding counts. */
static inline int64_t nn_padded_taps(const nn_geom *g, int j, int64_t o)
{
    int64_t lim = g->in[j] + g->pb[j] + g->pe[j] - o * g->s[j];
    if (lim <= 0)
        return 0;
    int64_t c = (lim - 1) / g->d[j] + 1;
    return c < g->k[j] ? c : g->k[j];
}

/* Output positions [o0, o1) along one dim whose whole window is inside the
 * input (possibly empty). */
static inline void nn_inner_range(const nn_geom *g, int j, int64_t *o0, int64_t *o1)
{
    int64_t ext = (g->k[j] - 1) * g->d[j] + 1;
    int64_t a = (g->pb[j] + g->s[j] - 1) / g->s[j];
    int64_t last = g->in[j] - ext + g->pb[j]; /* o*s <= last */
    int64_t b = last < 0 ? 0 : last / g->s[j] + 1;
    if (b > g->out[j])
        b = g->out[j];
    if (a > b)
        a = b;
    *o0 = a;
    *o1 = b;
}

#endif
