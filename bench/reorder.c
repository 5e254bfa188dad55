/* The cpu engine's cge Reorder (plain NCHW <-> NHWC) at the zoo's shapes: the
 * kernel as it was before the AVX-512 tiles (reorder_before.h) against the
 * current one, alternating in one process, in GB/s (read + write) and CPU
 * time. Includes src/ops/copy.c to reach its blocks. Not a test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define cge__ops_copy bench_reorder_ops_copy_unused
#include "ops/copy.c"
#include "reorder_before.h"

enum { ROUNDS = 7 };

static double now_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct timing {
    double wall, cpu; /* seconds per call: min over rounds of the round's mean */
} timing;

/* The launch as reorder_launch did it before (blocks over 16-wide strips). */
static cge_status before_enqueue(cge_stream *stream, const before_reorder_args *a, int threads)
{
    int64_t strips = a->n * ((a->hw + BEFORE_REORDER_TILE - 1) / BEFORE_REORDER_TILE);
    int64_t per = a->c * BEFORE_REORDER_TILE;
    return cge_launch(stream, before_reorder_block,
                      cge__blocks_for(strips, per >= 16384 ? 1 : 16384 / per, threads), a,
                      sizeof *a);
}

/* One round of `reps` calls of the old (`b`) or the new (`a`) kernel. */
static void run_round(cge_stream *st, const before_reorder_args *b, const reorder_args *a,
                      int threads, int reps, timing *t)
{
    double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int r = 0; r < reps; r++)
        if ((b ? before_enqueue(st, b, threads) : reorder_enqueue(st, a, threads)) != CGE_OK ||
            cge_stream_synchronize(st) != CGE_OK) {
            fprintf(stderr, "bench_reorder: %s\n", cge_last_error());
            exit(1);
        }
    double w = (now_s(CLOCK_MONOTONIC) - w0) / reps, c = (now_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / reps;
    if (w < t->wall)
        t->wall = w;
    if (c < t->cpu)
        t->cpu = c;
}

int main(int argc, char **argv)
{
    /* bench_reorder [element-bytes [N C H W]]: the zoo's shapes, or one */
    size_t es = argc > 1 ? (size_t)atoi(argv[1]) : 4;
    int64_t one[4] = {0};
    for (int i = 0; i < 4 && argc == 6; i++)
        one[i] = atoll(argv[2 + i]);
    cge_device *dev = NULL;
    cge_stream *st = NULL;
    if (cge_device_create_cpu(NULL, &dev) != CGE_OK || cge_stream_create(dev, &st) != CGE_OK) {
        fprintf(stderr, "bench_reorder: %s\n", cge_last_error());
        return 1;
    }
    int threads = cge_device_num_threads(dev);
    int simd = 0, narrow = 0;
#if REORDER_X86
    simd = __builtin_cpu_supports("avx512f");
    narrow = simd && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#endif
    if (!simd)
        printf("note: no AVX-512 on this cpu: the new column runs the portable tiles\n");
    static const int64_t cs[] = {3, 16, 24, 64, 96, 256, 1280};
    static const int64_t sides[] = {7, 14, 28, 56, 112};
    printf("element %zu bytes, %d threads; GB/s = (read + write) / min over %d rounds\n", es,
           threads, ROUNDS);
    printf("%-22s %-9s %9s %9s %7s %11s %11s %7s\n", "shape", "to", "old GB/s", "new GB/s",
           "new/old", "old cpu us", "new cpu us", "cpu o/n");
    double geo = 0, geo_cpu = 0;
    int cases = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (size_t j = 0; j < sizeof sides / sizeof sides[0]; j++)
            for (int64_t nn = 1; nn <= 2; nn++) {
                int64_t n = nn, c = cs[i], hw = sides[j] * sides[j], side = sides[j];
                if (one[0]) {
                    if (i || j || nn > 1)
                        continue;
                    n = one[0], c = one[1], hw = one[2] * one[3], side = one[2];
                } else if (c * hw > (1 << 20)) /* 1280 x 56 x 56 and above: not zoo shapes */
                    continue;
                size_t bytes = (size_t)(n * c * hw) * es;
                char *x = aligned_alloc(64, (bytes + 63) / 64 * 64),
                     *y = aligned_alloc(64, (bytes + 63) / 64 * 64),
                     *y2 = aligned_alloc(64, (bytes + 63) / 64 * 64);
                for (size_t b = 0; b < bytes; b++)
                    x[b] = (char)(b * 131 + 7);
                int reps = (int)(2000000 / bytes) + 1;
                for (int dir = 0; dir < 2; dir++) {
                    before_reorder_args a_old = {x, y, n, c, hw, es, dir};
                    reorder_args a_new = {x, y2, n, c, hw, es, dir, simd, narrow};
                    timing t_old = {1e9, 1e9}, t_new = {1e9, 1e9};
                    for (int r = 0; r < ROUNDS; r++) {
                        run_round(st, &a_old, NULL, threads, reps, &t_old);
                        run_round(st, NULL, &a_new, threads, reps, &t_new);
                    }
                    if (memcmp(y, y2, bytes)) {
                        fprintf(stderr, "bench_reorder: outputs differ at %lldx%lldx%lld\n",
                                (long long)n, (long long)c, (long long)hw);
                        return 1;
                    }
                    char shape[64];
                    snprintf(shape, sizeof shape, "%lldx%lldx%lldx%lld", (long long)n, (long long)c,
                             (long long)side, (long long)(hw / side));
                    double go = 2.0 * bytes / t_old.wall * 1e-9, gn = 2.0 * bytes / t_new.wall * 1e-9;
                    printf("%-22s %-9s %9.1f %9.1f %7.2f %11.1f %11.1f %7.2f\n", shape,
                           dir ? "nhwc" : "nchw", go, gn, gn / go, t_old.cpu * 1e6, t_new.cpu * 1e6,
                           t_old.cpu / t_new.cpu);
                    geo += log(gn / go);
                    geo_cpu += log(t_old.cpu / t_new.cpu);
                    cases++;
                }
                free(x);
                free(y);
                free(y2);
            }
    printf("geomean speedup new/old: wall %.2fx, cpu time %.2fx over %d cases\n",
           exp(geo / cases), exp(geo_cpu / cases), cases);
    cge_stream_destroy(st);
    cge_device_destroy(dev);
    return 0;
}
