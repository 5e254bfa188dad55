/* Load time of a model, in-process and repeated (median and min): for a .cgm,
 * cge_model_load alone ("load") and everything until it can run ("ready":
 * session, load, add, kernels prepared); for an .onnx, import plus the
 * session's compile ("ready"); and the first run after that (zeroed inputs).
 * bench/load.py compares these with ONNX Runtime's session creation. Prints
 * one JSON line.
 * Usage: bench_load MODEL [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cge/cge.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One run on zeroed inputs: what the first run adds (lazy kernel set-up,
 * the weights' first read). */
static cge_status first_run(cge_session *s, double *ms)
{
    int32_t ni = 0, no = 0;
    cge_status st = cge_session_num_io(s, 1, &ni, &no);
    cge_tensor in[16], out[16];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    if (!st && (ni > 16 || no > 16))
        return CGE_OK;
    for (int32_t i = 0; !st && i < ni + no; i++) {
        cge_tensor_desc d;
        st = i < ni ? cge_session_input_desc(s, 1, i, &d) : cge_session_output_desc(s, 1, i - ni, &d);
        size_t nb = st ? 0 : cge_tensor_nbytes(d.dtype, &d.shape);
        cge_tensor *t = i < ni ? &in[i] : &out[i - ni];
        *t = (cge_tensor){.dtype = d.dtype, .shape = d.shape, .data = calloc(1, nb + 1),
                          .bytes = nb};
    }
    double t0 = cge_profile_clock_ms();
    if (!st)
        st = cge_session_run_graph(s, 1, in, ni, out, no);
    *ms = cge_profile_clock_ms() - t0;
    for (int32_t i = 0; i < 16; i++) {
        free(in[i].data);
        free(out[i].data);
    }
    return st;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_load MODEL [repeats]\n");
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (reps < 1)
        reps = 1;
    size_t n = strlen(argv[1]);
    bool cgm = n > 4 && !strcmp(argv[1] + n - 4, ".cgm");
    double *load = calloc((size_t)reps, sizeof(double)), *ready = calloc((size_t)reps, sizeof(double));
    double *first = calloc((size_t)reps, sizeof(double));
    size_t weights = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = cge_profile_clock_ms(), t1;
        cge_session *s = NULL;
        cge_status st = cge_session_create(NULL, &s);
        if (cgm) {
            cge_model *m = NULL;
            double l0 = cge_profile_clock_ms();
            if (!st)
                st = cge_model_load(argv[1], NULL, &m);
            load[r] = cge_profile_clock_ms() - l0;
            if (!st) {
                weights = cge_model_weight_bytes(m);
                st = cge_session_add_model(s, 1, m);
            }
            cge_model_destroy(m);
        } else {
            cge_graph *g = NULL;
            double l0 = cge_profile_clock_ms();
            if (!st)
                st = cge_onnx_import_file(argv[1], NULL, &g);
            load[r] = cge_profile_clock_ms() - l0;
            if (!st)
                st = cge_session_add_graph(s, 1, g);
            cge_graph_destroy(g);
        }
        if (!st)
            st = cge_session_compile_graph(s, 1);
        t1 = cge_profile_clock_ms();
        ready[r] = t1 - t0;
        if (!st)
            st = first_run(s, &first[r]);
        cge_session_destroy(s);
        if (st) {
            fprintf(stderr, "bench_load: %s\n", cge_last_error());
            return 1;
        }
    }
    qsort(load, (size_t)reps, sizeof(double), cmp);
    qsort(ready, (size_t)reps, sizeof(double), cmp);
    qsort(first, (size_t)reps, sizeof(double), cmp);
    printf("{\"model\": \"%s\", \"kind\": \"%s\", \"repeats\": %d, \"load_ms\": %.4f, "
           "\"load_min_ms\": %.4f, \"ready_ms\": %.4f, \"ready_min_ms\": %.4f, "
           "\"first_run_ms\": %.4f, \"weight_bytes\": %zu}\n",
           argv[1], cgm ? "cgm" : "onnx", reps, load[reps / 2], load[0], ready[reps / 2],
           ready[0], first[reps / 2], weights);
    free(load);
    free(ready);
    free(first);
    return 0;
}
