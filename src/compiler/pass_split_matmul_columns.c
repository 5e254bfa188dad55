/* optimize/split_matmul_columns: a product with a constant B whose result is
 * read only through Slices/Splits of its last axis (nn.MultiheadAttention's
 * packed in_proj: q, k and v cut out of one [.., 3d] product), or through
 * Gathers of a Reshape/Transpose that splits it into [.., 3, heads, d]
 * (swin's), becomes one product per piece, on the matching columns of B, so
 * no piece is copied out of the packed result. */
#include <stdlib.h>
#include <string.h>

#include "cge/fused_ops.h"
#include "compiler/compiler_internal.h"

/* The pattern:
 *   Y = MatMul(A, B) [+ bias]        B a float32 constant [K, N], bias [N]
 *   (or Gemm(A, B, bias) with transA 0, alpha = beta = 1, B [K, N] or
 *   [N, K] with transB)
 *   P_i = Slice(Y, s_i, e_i, axes = last, steps 1) or Split(Y, last axis)
 * or (the second form, where rest = heads x d and S x rest = N)
 *   R = Reshape(Y, [.., S, rest..]), T = Transpose(R, p),
 *   P_i = Gather(T, i, axis g) with p[g] the S axis,
 * with Y (and the product under the bias) read by nothing else (readers
 * nothing reads, a Shape whose value folding took, go with it). With the
 * fusions on each P_i becomes FusedMatMul(A, B, bias) with b_cols
 * [s_i, e_i]: its columns of the one weight, packed once at prepare, so B is
 * never copied and is freed when the last piece has packed it. At the exact
 * level it becomes MatMul(A, B[:, s_i:e_i]) [+ bias[s_i:e_i]] on sliced
 * copies (a Gemm keeps its attributes). Every output
 * element is the same sum of the same products in the same order (the GEMM
 * computes each column alone; a piece keeps at least 2 columns so that no
 * piece falls to the row kernel kept for N = 1), and the bias is added as
 * before: the same bits as the unsplit product and its Slices. In the second
 * form each piece is reshaped to [.., rest..] and transposed by p without its
 * g-th entry: one pass over a piece where the Transpose and the Gathers made
 * two over all of Y (and fuse_attention, which runs later, takes such a
 * Transpose into its operand's permutation: no pass at all). Pieces may
 * leave columns out (they are then never computed) but not overlap (each
 * column would be computed twice). */

#define MAX_PIECES 16

typedef struct piece {
    int64_t lo, hi;
    int32_t out;        /* the value the piece's reader produced */
} piece;

/* The second form's reshape of each piece and transpose after it. */
typedef struct post_op {
    bool on;
    int32_t rank;                  /* of the reshaped piece */
    int64_t shape[CGE_MAX_RANK];   /* 0 copies the product's dim */
    int64_t perm[CGE_MAX_RANK];
} post_op;

/* Whether node `n` is dead: no output of it is read or a graph output (a
 * Shape whose value folding took, before dce runs). */
static bool dead_node(const cc_uses *u, const cge_graph *g, const cge_node *n)
{
    for (int32_t o = 0; o < cge_node_num_outputs(n); o++) {
        int32_t id = cge_node_output_id(n, o);
        if (id >= 0 && cc_value_used(u, g, id))
            return false;
    }
    return true;
}

/* The live readers of `id` (slot and node; each node once) into live[], the
 * dead ones appended to dead[] (*nd counts them) for the rewrite to remove.
 * -1 if there are more than `max` of either kind. */
static int32_t live_readers(const cc_uses *u, const cge_graph *g, int32_t id, cc_use *live,
                            int32_t max, cge_node **dead, int32_t *nd, int32_t max_dead)
{
    int32_t n = cc_uses_count(u, id);
    if (n > 2 * MAX_PIECES)
        return -1;
    cc_use all[2 * MAX_PIECES];
    cc_uses_list(u, id, all, n);
    int32_t nl = 0;
    for (int32_t k = 0; k < n; k++) {
        bool seen = false;
        for (int32_t j = 0; j < k; j++)
            seen |= all[j].node == all[k].node;
        if (seen)
            return -1; /* one node reading it twice: not a reader we know */
        if (dead_node(u, g, all[k].node)) {
            if (*nd == max_dead)
                return -1;
            dead[(*nd)++] = all[k].node;
        } else {
            if (nl == max)
                return -1;
            live[nl++] = all[k];
        }
    }
    return nl;
}

static bool int_const(const cge_tensor *t, int64_t numel)
{
    return t && (t->dtype == CGE_I64 || t->dtype == CGE_I32) && cge_shape_numel(&t->shape) == numel;
}

/* A Slice of Y's last axis (rank r, n columns), constant bounds, step 1:
 * its column range, clamped as Slice clamps. */
static bool last_axis_slice(const cge_graph *g, const cge_node *s, int32_t r, int64_t n,
                            piece *p)
{
    int32_t ni = cge_node_num_inputs(s);
    if (ni < 3 || cge_node_num_outputs(s) != 1 || cge_node_input_id(s, 1) < 0 ||
        cge_node_input_id(s, 2) < 0)
        return false;
    const cge_tensor *st = cc_input_const(g, s, 1), *en = cc_input_const(g, s, 2);
    bool has_axes = ni > 3 && cge_node_input_id(s, 3) >= 0;
    bool has_steps = ni > 4 && cge_node_input_id(s, 4) >= 0;
    const cge_tensor *ax = has_axes ? cc_input_const(g, s, 3) : NULL;
    const cge_tensor *sp = has_steps ? cc_input_const(g, s, 4) : NULL;
    if (!int_const(st, 1) || !int_const(en, 1) || (has_axes && !int_const(ax, 1)) ||
        (has_steps && !int_const(sp, 1)))
        return false;
    /* Without axes a Slice cuts from axis 0: the last only for rank 1. */
    int64_t a = has_axes ? cc_int_at(ax, 0) : 0;
    if ((a != r - 1 && a != -1) || (sp && cc_int_at(sp, 0) != 1))
        return false;
    int64_t b = cc_int_at(st, 0), e = cc_int_at(en, 0);
    b = b < 0 ? b + n : b;
    e = e < 0 ? e + n : e;
    p->lo = b < 0 ? 0 : b > n ? n : b;
    p->hi = e < 0 ? 0 : e > n ? n : e;
    p->out = cge_node_output_id(s, 0);
    return true;
}

/* A Split of Y's last axis into pieces of sizes known now (the split input,
 * the opset < 13 attribute, or equal parts). Returns the pieces written, -1
 * if it does not qualify. */
static int32_t last_axis_split(const cge_graph *g, const cge_node *s, int32_t r, int64_t n,
                               piece *p, int32_t room)
{
    const cge_attrs *at = cge_node_attrs_const(s);
    int64_t axis = cge_attrs_get_int(at, "axis", 0);
    int32_t no = cge_node_num_outputs(s);
    if ((axis != r - 1 && axis != -1) || no < 1 || no > room)
        return -1;
    int64_t sizes[MAX_PIECES];
    const cge_tensor *sp = cge_node_num_inputs(s) > 1 && cge_node_input_id(s, 1) >= 0
                               ? cc_input_const(g, s, 1)
                               : NULL;
    const int64_t *as = NULL;
    int64_t na = cge_attrs_get_ints(at, "split", &as);
    if (cge_node_num_inputs(s) > 1 && cge_node_input_id(s, 1) >= 0) {
        if (!int_const(sp, no))
            return -1;
        for (int32_t k = 0; k < no; k++)
            sizes[k] = cc_int_at(sp, k);
    } else if (na > 0) {
        if (na != no)
            return -1;
        memcpy(sizes, as, sizeof(int64_t) * (size_t)no);
    } else {
        /* Equal parts, the last smaller (opset 18's num_outputs rounds up). */
        int64_t each = (n + no - 1) / no;
        for (int32_t k = 0; k < no; k++)
            sizes[k] = n - k * each < each ? n - k * each : each;
    }
    int64_t at0 = 0;
    for (int32_t k = 0; k < no; k++) {
        if (sizes[k] < 0)
            return -1;
        p[k] = (piece){at0, at0 + sizes[k], cge_node_output_id(s, k)};
        at0 += sizes[k];
    }
    return at0 == n ? no : -1;
}

/* The second form from Y's only reader `rs`: Reshape(Y, constant) splitting
 * the last axis (n) into S x rest, one Transpose reading it, Gathers of
 * constant scalar indices on the S axis reading that. Fills the pieces (one
 * per Gather, columns i*W .. (i+1)*W), the nodes to remove and `post`. */
static int32_t gather_form(const cc_uses *u, const cge_graph *g, cge_node *rs, int32_t r,
                           int64_t n, piece *p, cge_node **gone, int32_t *ngone,
                           cge_node **dead, int32_t *nd, post_op *post)
{
    const cge_tensor *shp = cc_input_const(g, rs, 1);
    cge_tensor_desc rd = cc_out_desc(g, rs, 0), yd = cc_in_desc(g, rs, 0);
    int32_t rr = rd.shape.rank;
    if (!shp || rr < r + 1 || rr > CGE_MAX_RANK || rd.dtype != CGE_F32 ||
        cge_node_num_outputs(rs) != 1)
        return -1;
    /* The leading dims stay (equal, known or the same symbol), the last
     * becomes S x rest, all known. */
    for (int32_t d = 0; d < r - 1; d++)
        if (rd.shape.dims[d] != yd.shape.dims[d])
            return -1;
    int64_t S = rd.shape.dims[r - 1], rest = 1;
    for (int32_t d = r; d < rr; d++) {
        if (!cge_dim_is_known(rd.shape.dims[d]) || rd.shape.dims[d] <= 0)
            return -1;
        rest *= rd.shape.dims[d];
    }
    if (!cge_dim_is_known(S) || S < 1 || S * rest != n || S > MAX_PIECES)
        return -1;
    cc_use l1[1];
    int32_t got = live_readers(u, g, cge_node_output_id(rs, 0), l1, 1, dead, nd, 4 * MAX_PIECES);
    if (got != 1 || !cc_is_op(l1[0].node, "Transpose") || cge_graph_value_is_output(g, cge_node_output_id(rs, 0)))
        return -1;
    cge_node *tr = l1[0].node;
    const int64_t *perm = NULL;
    if (cge_attrs_get_ints(cge_node_attrs_const(tr), "perm", &perm) != rr ||
        cge_graph_value_is_output(g, cge_node_output_id(tr, 0)))
        return -1;
    int32_t ax = -1; /* where the S axis went */
    for (int32_t d = 0; d < rr; d++)
        if (perm[d] == r - 1)
            ax = d;
    if (ax < 0)
        return -1;
    cc_use gs[MAX_PIECES];
    int32_t ng = live_readers(u, g, cge_node_output_id(tr, 0), gs, MAX_PIECES, dead, nd,
                              4 * MAX_PIECES);
    if (ng < 1)
        return -1;
    bool taken[MAX_PIECES] = {false};
    int64_t W = n / S;
    for (int32_t k = 0; k < ng; k++) {
        cge_node *ga = gs[k].node;
        const cge_tensor *ix = cge_node_num_inputs(ga) == 2 ? cc_input_const(g, ga, 1) : NULL;
        int64_t axis = cge_attrs_get_int(cge_node_attrs_const(ga), "axis", 0);
        if (!cc_is_op(ga, "Gather") || gs[k].slot != 0 || !ix || ix->shape.rank != 0 ||
            !int_const(ix, 1) || (axis != ax && axis != ax - rr) ||
            cge_node_num_outputs(ga) != 1)
            return -1;
        int64_t i = cc_int_at(ix, 0);
        i = i < 0 ? i + S : i;
        if (i < 0 || i >= S || taken[i])
            return -1;
        taken[i] = true;
        p[k] = (piece){i * W, (i + 1) * W, cge_node_output_id(ga, 0)};
        gone[(*ngone)++] = ga;
    }
    gone[(*ngone)++] = tr;
    gone[(*ngone)++] = rs;
    /* Each piece [.., W] -> [.., rest..] (leading dims copied by 0), then
     * the permutation without the S axis. */
    post->on = true;
    post->rank = rr - 1;
    for (int32_t d = 0; d < r - 1; d++)
        post->shape[d] = 0;
    for (int32_t d = r; d < rr; d++)
        post->shape[d - 1] = rd.shape.dims[d];
    int32_t q = 0;
    for (int32_t d = 0; d < rr; d++)
        if (d != ax)
            post->perm[q++] = perm[d] > r - 1 ? perm[d] - 1 : perm[d];
    return ng;
}

static int piece_cmp(const void *a, const void *b)
{
    const piece *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Columns [lo, hi) of B (K x N, or N x K with trans_b) as a new constant. */
static cge_status slice_b(cc_ctx *ctx, cge_graph *g, const cge_tensor *b, bool trans_b,
                          int64_t lo, int64_t hi, char *name, size_t size)
{
    int64_t K = b->shape.dims[trans_b ? 1 : 0], N = b->shape.dims[trans_b ? 0 : 1], w = hi - lo;
    const float *src = b->data;
    float *d = malloc(sizeof(float) * (size_t)(K * w > 0 ? K * w : 1));
    if (!d)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "split_matmul_columns: out of memory");
    cge_shape s;
    if (trans_b) { /* rows lo..hi of [N, K]: contiguous */
        memcpy(d, src + lo * K, sizeof(float) * (size_t)(K * w));
        s = CGE_SHAPE(w, K);
    } else {
        for (int64_t k = 0; k < K; k++)
            memcpy(d + k * w, src + k * N + lo, sizeof(float) * (size_t)w);
        s = CGE_SHAPE(K, w);
    }
    cge_status st = cc_add_const(ctx, g, "mm_cols", CGE_F32, &s, d, name, size);
    free(d);
    return st;
}

static cge_status slice_bias(cc_ctx *ctx, cge_graph *g, const cge_tensor *bias, int64_t lo,
                             int64_t hi, char *name, size_t size)
{
    cge_shape s = CGE_SHAPE(hi - lo);
    return cc_add_const(ctx, g, "mm_bias_cols", CGE_F32, &s, (const float *)bias->data + lo, name,
                        size);
}

/* A float32 bias of N elements along the last axis only ([N], [1, .., N]). */
static const cge_tensor *bias_const(const cge_graph *g, int32_t id, int64_t n)
{
    const cge_tensor *t = cge_graph_value_constant(g, id);
    if (!t || t->dtype != CGE_F32 || t->shape.rank < 1 || cge_shape_numel(&t->shape) != n ||
        t->shape.dims[t->shape.rank - 1] != n)
        return NULL;
    return t;
}

static cge_status try_split(cc_ctx *ctx, cc_uses *u, cge_graph *g, cge_node *mm)
{
    bool gemm = cc_is_op(mm, "Gemm");
    int32_t ni = cge_node_num_inputs(mm);
    if (ni < 2 || cge_node_num_outputs(mm) != 1)
        return CGE_OK;
    int32_t a = cge_node_input_id(mm, 0), y0 = cge_node_output_id(mm, 0);
    const cge_tensor *b = cge_graph_value_constant(g, cge_node_input_id(mm, 1));
    cge_tensor_desc ad, yd;
    if (!b || b->dtype != CGE_F32 || b->shape.rank != 2 || a < 0 ||
        cge_graph_value_desc(g, a, &ad) || ad.dtype != CGE_F32 || ad.shape.rank < 1 ||
        cge_graph_value_desc(g, y0, &yd) || yd.dtype != CGE_F32 || yd.shape.rank < 1)
        return CGE_OK;
    bool trans_b = false;
    const cge_tensor *bias = NULL;
    cge_node *add = NULL;
    if (gemm) {
        const cge_attrs *at = cge_node_attrs_const(mm);
        if (cge_attrs_get_int(at, "transA", 0) || cge_attrs_get_float(at, "alpha", 1.0f) != 1.0f ||
            cge_attrs_get_float(at, "beta", 1.0f) != 1.0f)
            return CGE_OK;
        trans_b = cge_attrs_get_int(at, "transB", 0) != 0;
    } else if (ad.shape.rank < 2) {
        return CGE_OK; /* a vector A drops the row axis: keep it simple */
    }
    int64_t n = b->shape.dims[trans_b ? 0 : 1];
    int32_t r = yd.shape.rank;
    if (yd.shape.dims[r - 1] != n || n < 4)
        return CGE_OK;
    if (gemm && ni > 2 && cge_node_input_id(mm, 2) >= 0 &&
        !(bias = bias_const(g, cge_node_input_id(mm, 2), n)))
        return CGE_OK; /* a C of [M, N] (or run-time) stays whole */
    int32_t y = y0;
    cge_node *dead[4 * MAX_PIECES], *gone[2 * MAX_PIECES + 4];
    int32_t nd = 0, ngone = 0;
    if (!gemm) {
        cc_use l0[1];
        int32_t n0 = live_readers(u, g, y0, l0, 1, dead, &nd, 4 * MAX_PIECES);
        cge_node *nx = n0 == 1 && !cge_graph_value_is_output(g, y0) ? l0[0].node : NULL;
        int32_t o = nx ? cc_other_input(nx, y0) : -1;
        cge_tensor_desc sd;
        if (nx && cc_is_op(nx, "Add") && cge_node_num_inputs(nx) == 2 && o >= 0 && o != y0 &&
            (bias = bias_const(g, o, n)) && !cge_graph_value_desc(g, cge_node_output_id(nx, 0), &sd) &&
            sd.dtype == CGE_F32 && cge_shape_equal(&sd.shape, &yd.shape)) {
            add = nx;
            y = cge_node_output_id(nx, 0);
        } else {
            bias = NULL;
            nd = 0; /* y0's readers are looked at again below */
        }
    }
    /* Every live reader of Y a last-axis Slice or Split, or the second form. */
    if (cge_graph_value_is_output(g, y))
        return CGE_OK;
    cc_use uses[MAX_PIECES];
    int32_t nu = live_readers(u, g, y, uses, MAX_PIECES, dead, &nd, 4 * MAX_PIECES);
    if (nu < 1)
        return CGE_OK;
    piece p[MAX_PIECES];
    post_op post = {0};
    int32_t np = 0;
    if (nu == 1 && cc_is_op(uses[0].node, "Reshape") && uses[0].slot == 0) {
        np = gather_form(u, g, uses[0].node, r, n, p, gone, &ngone, dead, &nd, &post);
        if (np < 1)
            return CGE_OK;
    } else {
        for (int32_t k = 0; k < nu; k++) {
            cge_node *s = uses[k].node;
            if (uses[k].slot != 0)
                return CGE_OK;
            gone[ngone++] = s;
            if (cc_is_op(s, "Slice")) {
                if (np == MAX_PIECES || !last_axis_slice(g, s, r, n, &p[np]))
                    return CGE_OK;
                np++;
            } else if (cc_is_op(s, "Split")) {
                int32_t got = last_axis_split(g, s, r, n, p + np, MAX_PIECES - np);
                if (got < 0)
                    return CGE_OK;
                np += got;
            } else {
                return CGE_OK;
            }
        }
    }
    qsort(p, (size_t)np, sizeof *p, piece_cmp);
    for (int32_t k = 0; k < np; k++) {
        /* A piece of one column (or none) would leave the GEMM; overlapping
         * pieces would compute columns twice. */
        if (p[k].hi - p[k].lo < 2 || (k && p[k].lo < p[k - 1].hi))
            return CGE_OK;
        cge_tensor_desc od;
        if (p[k].out < 0 || cge_graph_value_desc(g, p[k].out, &od) || od.dtype != CGE_F32 ||
            od.shape.rank != (post.on ? post.rank : r))
            return CGE_OK;
    }
    /* The rewrite: readers and the product go, one product per piece comes
     * (its output under the reader's name, so later readers are untouched). */
    char a_name[256], pname[MAX_PIECES][256];
    cge_tensor_desc pdesc[MAX_PIECES];
    snprintf(a_name, sizeof a_name, "%s", cge_graph_value_name(g, a));
    for (int32_t k = 0; k < np; k++) {
        snprintf(pname[k], sizeof pname[k], "%s", cge_graph_value_name(g, p[k].out));
        cge_graph_value_desc(g, p[k].out, &pdesc[k]);
    }
    /* What each product makes: Y's shape with its piece's width. */
    cge_shape prod_shape = yd.shape;
    bool bias_first = add && cge_node_input_id(add, 0) != y0;
    /* With the fusions on, each piece is a FusedMatMul reading its columns
     * of the original B and bias in place (b_cols): no copy of the weight,
     * which is freed once every piece has packed its columns. At the exact
     * level, and under precision bf16 (MatMulBF16 has no window), the
     * pieces get sliced copies of B instead. */
    bool window = ctx->level >= CGE_OPT_FUSE && ctx->opts.precision != CGE_PRECISION_BF16;
    char w_name[256], bias_name[256] = "";
    snprintf(w_name, sizeof w_name, "%s", cge_graph_value_name(g, cge_node_input_id(mm, 1)));
    if (bias)
        snprintf(bias_name, sizeof bias_name, "%s",
                 cge_graph_value_name(g, gemm ? cge_node_input_id(mm, 2)
                                              : cc_other_input(add, y0)));
    char base[256];
    snprintf(base, sizeof base, "%s", cge_node_name(mm));
    cge_node *gemm_src = gemm ? mm : NULL;
    /* Gemm's attributes are copied from the old node, so it goes last. */
    cge_status st = CGE_OK;
    int32_t removed = 0;
    for (int32_t k = 0; k < ngone && !st; k++, removed++)
        st = cge_graph_remove_node(g, gone[k]);
    for (int32_t k = 0; k < nd && !st; k++) {
        /* a dead reader may be listed twice (it read two of the values) */
        if (!cge_node_is_removed(dead[k])) {
            st = cge_graph_remove_node(g, dead[k]);
            removed++;
        }
    }
    if (!st && add) {
        st = cge_graph_remove_node(g, add);
        removed++;
    }
    for (int32_t k = 0; k < np && !st; k++) {
        char bn[256], cn[256], mid[256], name[256];
        if (!window) {
            st = slice_b(ctx, g, b, trans_b, p[k].lo, p[k].hi, bn, sizeof bn);
            if (!st && bias)
                st = slice_bias(ctx, g, bias, p[k].lo, p[k].hi, cn, sizeof cn);
            if (st)
                break;
        }
        /* the product's value: the reader's, or a fresh one the second
         * form's Reshape and Transpose carry to the reader's */
        char pout_buf[256], rname[256], nn[256];
        const char *pout = pname[k];
        if (post.on)
            pout = cc_fresh_name(ctx, g, pname[k], pout_buf, sizeof pout_buf);
        cge_shape ps = prod_shape;
        ps.dims[ps.rank - 1] = p[k].hi - p[k].lo;
        cge_node *nm = NULL;
        if (window) {
            const char *ins[3] = {a_name, w_name, bias_name};
            int64_t cols[2] = {p[k].lo, p[k].hi};
            st = cge_graph_add_node(g, "FusedMatMul", CGE_DOMAIN_FUSED,
                                    cc_fresh_name(ctx, g, base, name, sizeof name), ins,
                                    bias ? 3 : 2, &pout, 1, &nm);
            if (!st)
                st = cge_node_set_ints(nm, "b_cols", cols, 2);
            if (!st)
                st = cge_node_set_int(nm, "b_const", 1);
            if (!st && trans_b)
                st = cge_node_set_int(nm, "trans_b", 1);
            if (!st)
                st = cc_uses_add_node(u, nm);
        } else if (gemm) {
            const char *ins[3] = {a_name, bn, bias ? cn : ""};
            st = cge_graph_add_node(g, "Gemm", "", cc_fresh_name(ctx, g, base, name, sizeof name),
                                    ins, bias ? 3 : 2, &pout, 1, &nm);
            if (!st)
                st = cc_copy_attrs(nm, gemm_src);
            if (!st)
                st = cc_uses_add_node(u, nm);
        } else {
            const char *ins[2] = {a_name, bn};
            const char *prod = pout;
            if (bias)
                prod = cc_fresh_name(ctx, g, pout, mid, sizeof mid);
            st = cge_graph_add_node(g, "MatMul", "", cc_fresh_name(ctx, g, base, name, sizeof name),
                                    ins, 2, &prod, 1, &nm);
            if (!st)
                st = cge_graph_set_desc(g, prod, CGE_F32, &ps);
            if (!st)
                st = cc_uses_add_node(u, nm);
            if (!st && bias) {
                const char *ai[2] = {bias_first ? cn : prod, bias_first ? prod : cn};
                st = cge_graph_add_node(g, "Add", "", cc_fresh_name(ctx, g, base, nn, sizeof nn),
                                        ai, 2, &pout, 1, &nm);
                if (!st)
                    st = cc_uses_add_node(u, nm);
            }
        }
        if (!st)
            st = cge_graph_set_desc(g, pout, CGE_F32, &ps);
        if (!st && post.on) {
            char sn[256];
            cge_shape s1 = CGE_SHAPE(post.rank), rsd = {.rank = post.rank};
            for (int32_t d = 0; d < post.rank; d++)
                rsd.dims[d] = post.shape[d] ? post.shape[d] : ps.dims[d];
            st = cc_add_const(ctx, g, "split_shape", CGE_I64, &s1, post.shape, sn, sizeof sn);
            const char *ri[2] = {pout, sn}, *ro = cc_fresh_name(ctx, g, pname[k], rname, sizeof rname);
            if (!st)
                st = cge_graph_add_node(g, "Reshape", "", cc_fresh_name(ctx, g, base, nn, sizeof nn),
                                        ri, 2, &ro, 1, &nm);
            if (!st)
                st = cge_graph_set_desc(g, ro, CGE_F32, &rsd);
            if (!st)
                st = cc_uses_add_node(u, nm);
            const char *to = pname[k];
            if (!st)
                st = cge_graph_add_node(g, "Transpose", "", cc_fresh_name(ctx, g, base, nn, sizeof nn),
                                        &ro, 1, &to, 1, &nm);
            if (!st)
                st = cge_node_set_ints(nm, "perm", post.perm, post.rank);
            if (!st)
                st = cc_uses_add_node(u, nm);
            ctx->added += 2;
        }
        if (!st)
            st = cge_graph_set_desc(g, pname[k], CGE_F32, &pdesc[k].shape);
        ctx->added += bias && !gemm && !window ? 2 : 1;
    }
    if (!st) {
        st = cge_graph_remove_node(g, mm);
        removed++;
    }
    ctx->removed += removed;
    return st;
}

cge_status cc_pass_split_matmul_columns(cc_ctx *ctx, cge_graph *g)
{
    cc_uses u;
    cge_status st = cc_uses_build(&u, g);
    int32_t nn = cge_graph_num_nodes(g);
    for (int32_t i = 0; !st && i < nn; i++) {
        cge_node *n = cge_graph_node(g, i);
        if (n && !cge_node_is_removed(n) && (cc_is_op(n, "MatMul") || cc_is_op(n, "Gemm")))
            st = try_split(ctx, &u, g, n);
    }
    cc_uses_free(&u);
    return st;
}
