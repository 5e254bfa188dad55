/* A greedy decode loop in C, for instruction counts and one-thread CPU time
 * of the host work per step (valgrind --tool=callgrind, CGE_NUM_THREADS=1):
 *
 *   bench_decode_steps concat MODEL.onnx [STEPS] [GENERATIONS]
 *       the concat form (bench/dynamic.py (c), decoder_dyn.onnx): inputs
 *       input_ids [1, seq] and past_key_i/past_value_i [1, H, past_len, D],
 *       every step a new length; the presents become the next pasts
 *       (two buffers per cache, taken in turns).
 *   bench_decode_steps static MODEL.onnx [STEPS] [GENERATIONS]
 *       the static form (decoder_static.onnx): ids [1, seq], pos [1] and
 *       [1, H, max_len, D] caches, each cache one buffer bound as its past
 *       and its present (bind_buffers), every step the same shapes.
 *   bench_decode_steps static_run MODEL.onnx [STEPS] [GENERATIONS]
 *       the static form without binding (a plain run, as InferenceSession.run):
 *       the presents go to a second buffer per cache, the next step's pasts.
 *
 * Prints per generation the steps' median and mean CPU time (ms, this
 * thread's), the session's new-length counters per step, and the tokens'
 * checksum (equal between builds means equal tokens). Not a test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "cge/onnx.h"

enum { PROMPT = 16, MAXIO = 32 };

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int argmax_last(const float *logits, int64_t rows, int64_t vocab)
{
    const float *r = logits + (rows - 1) * vocab;
    int best = 0;
    for (int64_t i = 1; i < vocab; i++)
        if (r[i] > r[best])
            best = (int)i;
    return best;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s concat|static|static_run MODEL.onnx [STEPS] [GENERATIONS]\n", argv[0]);
        return 2;
    }
    bool stat = !strncmp(argv[1], "static", 6), bound = !strcmp(argv[1], "static");
    int steps = argc > 3 ? atoi(argv[3]) : 64, gens = argc > 4 ? atoi(argv[4]) : 2;
    cge_graph *g = NULL;
    CHECK(cge_onnx_import_file(argv[2], NULL, &g));
    cge_session *s = NULL;
    cge_session_options so = {0};
    CHECK(cge_session_create(&so, &s));
    CHECK(cge_session_add_graph(s, 0, g));
    int32_t ni = 0, no = 0;
    CHECK(cge_session_num_io(s, 0, &ni, &no));
    if (ni > MAXIO || no > MAXIO)
        return 2;
    cge_tensor_desc ind[MAXIO], outd[MAXIO];
    for (int32_t i = 0; i < ni; i++)
        CHECK(cge_session_input_desc(s, 0, i, &ind[i]));
    for (int32_t i = 0; i < no; i++)
        CHECK(cge_session_output_desc(s, 0, i, &outd[i]));
    int ncache = stat ? ni - 2 : ni - 1, first = stat ? 2 : 1;
    int64_t heads = ind[first].shape.dims[1], hd = ind[first].shape.dims[3];
    int64_t maxl = stat ? ind[first].shape.dims[2] : PROMPT + steps + 1, vocab = 1000;
    size_t cache_bytes = sizeof(float) * (size_t)(heads * maxl * hd);
    float *cache[2][MAXIO];
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < ncache; c++)
            cache[k][c] = calloc(1, cache_bytes);
    float *logits = malloc(sizeof(float) * (size_t)(PROMPT * vocab));
    int64_t ids[PROMPT], pos[1];
    cge_run_options ro = {.bind_buffers = bound};
    for (int gen = 0; gen < gens; gen++) {
        double *t = malloc(sizeof(double) * (size_t)steps), *w = malloc(sizeof(double) * (size_t)steps);
        cge_session_graph_stats st0, st1;
        unsigned long sum = 0;
        int64_t past = 0, seq = PROMPT;
        for (int i = 0; i < PROMPT; i++)
            ids[i] = (i * 37 + 11) % vocab;
        for (int k = 0; k < 2; k++)
            for (int c = 0; c < ncache; c++)
                memset(cache[k][c], 0, cache_bytes);
        int cur = 0;
        cge_tensor in[MAXIO], out[MAXIO];
        for (int step = -1; step < steps; step++) {
            if (step == 0)
                CHECK(cge_session_get_graph_stats(s, 0, &st0));
            int64_t cl = stat ? maxl : past, ol = stat ? maxl : past + seq;
            in[0] = (cge_tensor){.name = ind[0].name, .dtype = CGE_I64, .shape = CGE_SHAPE(1, seq),
                                 .data = ids, .bytes = sizeof(int64_t) * (size_t)seq};
            if (stat) {
                pos[0] = past;
                in[1] = (cge_tensor){.name = ind[1].name, .dtype = CGE_I64, .shape = CGE_SHAPE(1),
                                     .data = pos, .bytes = sizeof pos};
            }
            out[0] = (cge_tensor){.name = outd[0].name, .dtype = CGE_F32,
                                  .shape = CGE_SHAPE(1, seq, vocab), .data = logits,
                                  .bytes = sizeof(float) * (size_t)(seq * vocab)};
            for (int c = 0; c < ncache; c++) {
                float *pb = cache[cur][c], *ob = bound ? cache[cur][c] : cache[!cur][c];
                in[first + c] = (cge_tensor){.name = ind[first + c].name, .dtype = CGE_F32,
                                             .shape = CGE_SHAPE(1, heads, cl, hd), .data = pb,
                                             .bytes = sizeof(float) * (size_t)(heads * cl * hd)};
                out[1 + c] = (cge_tensor){.name = outd[1 + c].name, .dtype = CGE_F32,
                                          .shape = CGE_SHAPE(1, heads, ol, hd), .data = ob,
                                          .bytes = sizeof(float) * (size_t)(heads * ol * hd)};
            }
            double t0 = cpu_ms(), w0 = bench_now_us();
            CHECK(cge_session_run(s, 0, in, ni, out, no, &ro));
            if (step >= 0) {
                t[step] = cpu_ms() - t0;
                w[step] = (bench_now_us() - w0) / 1e3;
            }
            int tok = argmax_last(logits, seq, vocab);
            sum = sum * 31 + (unsigned long)tok;
            past += seq;
            seq = 1;
            ids[0] = tok;
            if (!bound)
                cur = !cur;
        }
        CHECK(cge_session_get_graph_stats(s, 0, &st1));
        /* The last step again at its shapes: a step with no per-shape work
         * (the inputs point at the last step's buffers; the ids are the
         * token it chose, so nothing is compared). */
        enum { SEEN = 21 };
        double seen[SEEN], seen_w[SEEN];
        for (int r = 0; r < SEEN; r++) {
            double t0 = cpu_ms(), w0 = bench_now_us();
            CHECK(cge_session_run(s, 0, in, ni, out, no, &ro));
            seen[r] = cpu_ms() - t0;
            seen_w[r] = (bench_now_us() - w0) / 1e3;
        }
        double seen_med = bench_median(seen, SEEN), seen_wmed = bench_median(seen_w, SEEN);
        double mean = 0;
        for (int i = 0; i < steps; i++)
            mean += t[i] / steps;
        double med = bench_median(t, steps);
        double n = steps;
        printf("gen %d: %d steps, cpu ms/step median %.3f mean %.3f, seen-shape step %.3f; wall ms/step "
               "median %.3f, seen-shape %.3f; per step: "
               "respecializations %.2f delta_rebinds %.2f steps_rebound %.1f shape_metas %.1f "
               "kernel_prepares %.2f shape_allocations %.2f arena_replans %.2f compiles %.2f; "
               "tokens %lx\n",
               gen + 1, steps, med, mean, seen_med, bench_median(w, steps), seen_wmed, (st1.respecializations - st0.respecializations) / n,
               (st1.delta_rebinds - st0.delta_rebinds) / n,
               (st1.steps_rebound - st0.steps_rebound) / n, (st1.shape_metas - st0.shape_metas) / n,
               (st1.kernel_prepares - st0.kernel_prepares) / n,
               (st1.shape_allocations - st0.shape_allocations) / n,
               (st1.arena_replans - st0.arena_replans) / n, (st1.compiles - st0.compiles) / n, sum);
        free(t);
        free(w);
    }
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < ncache; c++)
            free(cache[k][c]);
    free(logits);
    cge_session_destroy(s);
    cge_graph_destroy(g);
    return 0;
}
