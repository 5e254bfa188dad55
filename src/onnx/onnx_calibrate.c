/* Calibration for the quantizer: the float model runs through cge's public
 * session API with the tensors to be quantized made extra graph outputs;
 * min/max come from one pass, a histogram of |x| from a second (entropy,
 * percentile), and each method turns them into a range. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cge/session.h"
#include "onnx/onnx_quant.h"

#define HIST_BINS 2048
#define ENTROPY_TARGET_BINS 128   /* int8's magnitudes, as TensorRT and ONNX Runtime use */

static cge_status oom(void)
{
    return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "quantize: calibration: out of memory");
}

/* TensorRT's entropy calibration: the threshold whose int8 rendering of the
 * clipped distribution loses the least information (KL divergence). */
static double entropy_threshold(const uint64_t *hist, int bins, double width)
{
    const int T = ENTROPY_TARGET_BINS;
    if (bins <= T)
        return bins * width;
    double *p = malloc(sizeof(double) * (size_t)bins * 2);
    if (!p)
        return bins * width;
    double *q = p + bins;
    double best_kl = INFINITY;
    int best = bins;
    uint64_t tail = 0;
    for (int k = T; k < bins; k++)
        tail += hist[k];
    for (int i = T; i <= bins; i++) {
        /* p: the first i bins, what lies beyond folded into the last one. */
        double total = 0;
        for (int k = 0; k < i; k++)
            total += (double)(p[k] = (double)hist[k]);
        p[i - 1] += (double)tail;
        total += (double)tail;
        if (i < bins)
            tail -= hist[i];
        if (total <= 0)
            continue;
        /* q: the same bins merged into T levels, each level's mass spread
         * back over the bins where p is not empty. */
        for (int j = 0; j < T; j++) {
            int s = (int)((int64_t)j * i / T), e = (int)((int64_t)(j + 1) * i / T);
            double mass = 0;
            int nz = 0;
            for (int k = s; k < e; k++) {
                mass += (double)hist[k];
                nz += p[k] > 0;
            }
            for (int k = s; k < e; k++)
                q[k] = (p[k] > 0 && nz) ? mass / nz : 0;
        }
        double qtotal = 0;
        for (int k = 0; k < i; k++)
            qtotal += q[k];
        if (qtotal <= 0)
            continue;
        double kl = 0;
        for (int k = 0; k < i; k++) {
            if (p[k] <= 0)
                continue;
            double pk = p[k] / total;
            /* A level with no mass where p has some: smoothed, not infinite. */
            double qk = q[k] > 0 ? q[k] / qtotal : 1e-4 / i;
            kl += pk * log(pk / qk);
        }
        if (kl < best_kl) {
            best_kl = kl;
            best = i;
        }
    }
    free(p);
    return (best + 0.5) * width < bins * width ? (best + 0.5) * width : bins * width;
}

double cge__calib_threshold(const uint64_t *hist, int bins, double width, cge_quant_method m,
                            double percentile)
{
    if (m == CGE_QUANT_ENTROPY)
        return entropy_threshold(hist, bins, width);
    double total = 0;
    for (int k = 0; k < bins; k++)
        total += (double)hist[k];
    double want = total * (percentile > 0 ? percentile : 99.999) / 100.0, acc = 0;
    for (int k = 0; k < bins; k++) {
        acc += (double)hist[k];
        if (acc >= want)
            return (k + 1) * width;
    }
    return bins * width;
}

typedef struct tstat {
    double min, max;
    uint64_t *hist;   /* HIST_BINS over [0, amax] of |x| */
    double amax;
} tstat;

static void add_minmax(tstat *s, const float *x, size_t n)
{
    double lo = s->min, hi = s->max;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        if (!isfinite(v))
            continue;   /* an inf/nan says nothing about the range worth keeping */
        if (v < lo)
            lo = v;
        if (v > hi)
            hi = v;
    }
    s->min = lo;
    s->max = hi;
}

static void add_hist(tstat *s, const float *x, size_t n)
{
    if (!s->hist || s->amax <= 0)
        return;
    double inv = HIST_BINS / s->amax;
    for (size_t i = 0; i < n; i++) {
        float v = fabsf(x[i]);
        if (!isfinite(v))
            continue;
        int64_t b = (int64_t)(v * inv);
        s->hist[b >= HIST_BINS ? HIST_BINS - 1 : b]++;
    }
}

const cge_tensor *cge__quant_sample(const cge_quantize_options *o, int32_t k, const char *name)
{
    for (int32_t i = 0; i < o->inputs_per_sample; i++) {
        const cge_tensor *t = &o->samples[(size_t)k * o->inputs_per_sample + i];
        if (t->name && !strcmp(t->name, name))
            return t;
    }
    return NULL;
}

typedef struct calib {
    const cge_quantize_options *o;
    cge_session *s;
    int32_t n_out;
    cge_tensor *outs;        /* one buffer per graph output, reused by every run */
    int32_t n;               /* requested names */
    const char *const *names;
    int32_t *out_index;      /* names[i] -> graph output, -1: graph input or absent */
    bool *is_input;
    tstat *st;
} calib;

/* Run sample k; output buffers grow when a run reports larger shapes. */
static cge_status run_sample(calib *c, int32_t k)
{
    const cge_tensor *in = &c->o->samples[(size_t)k * c->o->inputs_per_sample];
    for (int attempt = 0;; attempt++) {
        cge_status st = cge_session_run_graph(c->s, 1, in, c->o->inputs_per_sample, c->outs,
                                              c->n_out);
        if (!st || attempt)
            return st;
        bool grew = false;
        for (int32_t j = 0; j < c->n_out; j++) {
            cge_tensor_desc d;
            if (cge_session_last_output_desc(c->s, 1, j, &d))
                return st;
            size_t need = cge_tensor_nbytes(d.dtype, &d.shape);
            if (need > c->outs[j].bytes) {
                void *p = realloc(c->outs[j].data, need);
                if (!p)
                    return oom();
                c->outs[j].data = p;
                c->outs[j].bytes = need;
                grew = true;
            }
        }
        if (!grew)
            return st;
        cge_clear_error();
    }
}

/* Pass over every sample; `hist` false: min/max, true: histograms. */
static cge_status pass(calib *c, bool hist)
{
    for (int32_t k = 0; k < c->o->num_samples; k++) {
        cge_status st = c->n_out ? run_sample(c, k) : CGE_OK;
        if (st)
            return st;
        for (int32_t i = 0; i < c->n; i++) {
            const cge_tensor *t = NULL;
            if (c->is_input[i])
                t = cge__quant_sample(c->o, k, c->names[i]);
            else if (c->out_index[i] >= 0)
                t = &c->outs[c->out_index[i]];
            if (!t || t->dtype != CGE_F32 || !t->data)
                continue;
            size_t cnt = cge_tensor_nbytes(t->dtype, &t->shape) / sizeof(float);
            if (hist)
                add_hist(&c->st[i], t->data, cnt);
            else
                add_minmax(&c->st[i], t->data, cnt);
        }
    }
    return CGE_OK;
}

static void calib_free(calib *c)
{
    for (int32_t j = 0; j < c->n_out; j++)
        free(c->outs ? c->outs[j].data : NULL);
    free(c->outs);
    for (int32_t i = 0; c->st && i < c->n; i++)
        free(c->st[i].hist);
    free(c->st);
    free(c->out_index);
    free(c->is_input);
    cge_session_destroy(c->s);
}

cge_status cge__onnx_calibrate(const void *model, size_t size, const char *base_dir,
                              const cge_quantize_options *o, const char *const *names,
                              int32_t n, cge__qrange *out)
{
    calib c = {.o = o, .n = n, .names = names};
    cge_graph *g = NULL;
    cge_onnx_input_shape *shapes = calloc((size_t)o->inputs_per_sample + 1, sizeof *shapes);
    if (!shapes)
        return oom();
    for (int32_t i = 0; i < o->inputs_per_sample; i++)
        shapes[i] = (cge_onnx_input_shape){o->samples[i].name, o->samples[i].shape};
    cge_onnx_options io = {.input_shapes = shapes, .num_input_shapes = o->inputs_per_sample};
    cge_status st = cge_onnx_import_buffer(model, size, base_dir, &io, &g);
    free(shapes);
    if (st)
        return st;
    c.out_index = malloc(sizeof(int32_t) * (size_t)(n + 1));
    c.is_input = calloc((size_t)n + 1, sizeof(bool));
    c.st = calloc((size_t)n + 1, sizeof(tstat));
    if (!c.out_index || !c.is_input || !c.st) {
        st = oom();
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        c.out_index[i] = -1;
        c.st[i].min = INFINITY;
        c.st[i].max = -INFINITY;
        int32_t id = cge_graph_value_id(g, names[i]);
        cge_value_kind kind = id >= 0 ? cge_graph_value_kind(g, id) : CGE_VALUE_UNDEFINED;
        if (kind == CGE_VALUE_INPUT)
            c.is_input[i] = true;
        else if (kind == CGE_VALUE_NODE && !cge_graph_value_is_output(g, id) &&
                 (st = cge_graph_add_output(g, names[i])))
            goto done;
    }
    /* Outputs by name: the graph's own plus the ones added above. */
    cge_session_options so = {.num_threads = o->num_threads};
    if ((st = cge_session_create(&so, &c.s)) || (st = cge_session_add_graph(c.s, 1, g)) ||
        (st = cge_session_compile_graph(c.s, 1)))
        goto done;
    int32_t n_in = 0;
    if ((st = cge_session_num_io(c.s, 1, &n_in, &c.n_out)))
        goto done;
    c.outs = calloc((size_t)c.n_out + 1, sizeof *c.outs);
    if (!c.outs) {
        st = oom();
        goto done;
    }
    for (int32_t j = 0; j < c.n_out; j++) {
        cge_tensor_desc d;
        if ((st = cge_session_output_desc(c.s, 1, j, &d)))
            goto done;
        size_t bytes = cge_tensor_nbytes(d.dtype, &d.shape);
        c.outs[j].data = malloc(bytes ? bytes : 1);
        c.outs[j].bytes = bytes;
        if (!c.outs[j].data) {
            st = oom();
            goto done;
        }
        for (int32_t i = 0; i < n; i++)
            if (!c.is_input[i] && d.name && !strcmp(d.name, names[i]))
                c.out_index[i] = j;
    }
    if ((st = pass(&c, false)))
        goto done;
    if (o->method != CGE_QUANT_MINMAX) {
        for (int32_t i = 0; i < n; i++) {
            tstat *s = &c.st[i];
            if (!(s->min <= s->max))
                continue;
            s->amax = fmax(fabs(s->min), fabs(s->max));
            if (s->amax > 0 && !(s->hist = calloc(HIST_BINS, sizeof(uint64_t)))) {
                st = oom();
                goto done;
            }
        }
        if ((st = pass(&c, true)))
            goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        tstat *s = &c.st[i];
        cge__qrange *r = &out[i];
        memset(r, 0, sizeof *r);
        r->found = s->min <= s->max;
        if (!r->found)
            continue;
        r->min = (float)s->min;
        r->max = (float)s->max;
        double lo = s->min, hi = s->max;
        if (s->hist) {
            double t = cge__calib_threshold(s->hist, HIST_BINS, s->amax / HIST_BINS, o->method,
                                            o->percentile);
            lo = fmax(lo, -t);
            hi = fmin(hi, t);
        }
        r->rmin = (float)lo;
        r->rmax = (float)hi;
    }
done:
    calib_free(&c);
    cge_graph_destroy(g);
    return st;
}
