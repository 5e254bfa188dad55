/* Linear algebra on batches of matrices: Det (determinants by LU
 * decomposition with partial pivoting, in double whatever the dtype). */
#include <math.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"

/* ---- Det ------------------------------------------------------------------------------ */

static cge_status det_infer(cge_infer_ctx *ctx)
{
    const cge_shape *s = &ctx->inputs[0].shape;
    cge_status st = cge__meta_need_float(ctx, 0, "X");
    if (st)
        return st;
    if (s->rank < 2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X has rank %d; it must be [*, M, M]",
                              (int)s->rank);
    int64_t m1 = s->dims[s->rank - 2], m2 = s->dims[s->rank - 1];
    if (cge_dim_is_known(m1) && cge_dim_is_known(m2) && m1 != m2)
        return cge_meta_error(ctx, CGE_ERR_SHAPE, "X's last two dims are %lld and %lld; the "
                              "matrices must be square", (long long)m1, (long long)m2);
    ctx->outputs[0].dtype = ctx->inputs[0].dtype;
    ctx->outputs[0].shape = (cge_shape){.rank = s->rank - 2};
    memcpy(ctx->outputs[0].shape.dims, s->dims, sizeof(int64_t) * (size_t)(s->rank - 2));
    return CGE_OK;
}

typedef struct det_args {
    const void *x;
    void *y;
    cge_dtype dt;
    int64_t batch, m;
    double *scratch;                /* [nb][m * m] */
} det_args;

static int64_t det_blocks(const cge_kernel_ctx *ctx)
{
    const cge_shape *s = &ctx->inputs[0].shape;
    int64_t m = s->rank >= 2 ? s->dims[s->rank - 1] : 1, batch = 1;
    for (int32_t i = 0; i + 2 < s->rank; i++)
        batch *= s->dims[i];
    int64_t work = m * m * m > 0 ? m * m * m : 1;
    int64_t nb = cge__blocks_for(batch, work >= CGE__MIN_BLOCK ? 1 : CGE__MIN_BLOCK / work,
                                ctx->num_threads);
    return nb > batch && batch > 0 ? batch : nb;
}

static size_t det_workspace(const cge_kernel_ctx *ctx)
{
    const cge_shape *s = &ctx->inputs[0].shape;
    int64_t m = s->rank >= 2 ? s->dims[s->rank - 1] : 1;
    return (size_t)det_blocks(ctx) * (size_t)(m * m > 0 ? m * m : 1) * sizeof(double);
}

/* LU decomposition with partial pivoting, in double. */
static void det_block(int64_t b, int64_t nb, void *p)
{
    const det_args *a = p;
    int64_t lo, hi, m = a->m;
    double *w = a->scratch + b * m * m;
    cge__block_range(a->batch, b, nb, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) {
        for (int64_t i = 0; i < m * m; i++)
            w[i] = cge__load_as_double(a->dt, a->x, k * m * m + i);
        double det = 1.0;
        for (int64_t c = 0; c < m && det != 0.0; c++) {
            int64_t piv = c;
            for (int64_t r = c + 1; r < m; r++)
                if (fabs(w[r * m + c]) > fabs(w[piv * m + c]))
                    piv = r;
            if (w[piv * m + c] == 0.0) {
                det = 0.0;
                break;
            }
            if (piv != c) {
                for (int64_t j = 0; j < m; j++) {
                    double t = w[c * m + j];
                    w[c * m + j] = w[piv * m + j];
                    w[piv * m + j] = t;
                }
                det = -det;
            }
            double d = w[c * m + c];
            det *= d;
            for (int64_t r = c + 1; r < m; r++) {
                double f = w[r * m + c] / d;
                for (int64_t j = c + 1; j < m; j++)
                    w[r * m + j] -= f * w[c * m + j];
            }
        }
        cge__store_from_double(a->dt, a->y, k, det);
    }
}

static cge_status det_launch(const cge_kernel_ctx *ctx, cge_stream *stream)
{
    const cge_tensor *x = &ctx->inputs[0];
    const cge_shape *s = &x->shape;
    if (s->rank < 2 || s->dims[s->rank - 1] != s->dims[s->rank - 2] ||
        !cge_dtype_is_float(x->dtype))
        return cge_kernel_error(ctx, CGE_ERR_SHAPE, "X must be float [*, M, M]");
    det_args a = {.x = x->data, .y = ctx->outputs[0].data, .dt = x->dtype,
                  .m = s->dims[s->rank - 1], .batch = 1};
    for (int32_t i = 0; i + 2 < s->rank; i++)
        a.batch *= s->dims[i];
    if (a.batch == 0)
        return CGE_OK;
    if (a.m == 0) {
        /* the determinant of an empty matrix is 1 */
        for (int64_t k = 0; k < a.batch; k++)
            cge__store_from_double(a.dt, a.y, k, 1.0);
        return CGE_OK;
    }
    int64_t nb = det_blocks(ctx);
    if (!ctx->workspace || ctx->workspace_size < (size_t)(nb * a.m * a.m) * sizeof(double) ||
        !a.x || !a.y)
        return cge_kernel_error(ctx, CGE_ERR_INVALID_ARG, "missing buffer or workspace");
    a.scratch = ctx->workspace;
    return cge_launch(stream, det_block, nb, &a, sizeof a);
}

/* ---- definitions ---------------------------------------------------------------------- */

static const cge_kernel_def k_det[] = CGE__KDEF(CGE_DT_FLOAT, det_launch, det_workspace, -1);

static const cge_arg_def det_in[] = {{"X", 0, CGE_DT_FLOAT, "float tensor"}};
static const cge_arg_def det_out[] = {{"Y", 0, CGE_DT_FLOAT, "determinants [*]"}};

static const cge_op_def linalg_ops[] = {
    CGE__OPDEF("Det", 11, det_in, 1, det_out, 1, NULL, 0, det_infer, k_det,
               "Determinants of square matrices [*, M, M] (LU with partial pivoting)."),
};

const cge_op_def *cge__ops_linalg(int32_t *count)
{
    *count = (int32_t)(sizeof linalg_ops / sizeof linalg_ops[0]);
    return linalg_ops;
}
