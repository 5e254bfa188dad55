/* The cpu engine's cge Reorder (plain NCHW <-> NHWC) at the zoo's shapes, in
 * GB/s (read + write) and CPU time, each output checked against a plain
 * transpose; bench/reorder_ort.py puts it beside ONNX Runtime. Includes
 * src/ops/copy.c to reach its blocks. Not a test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define cge__ops_copy bench_reorder_ops_copy_unused
#include "ops/copy.c"

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

/* One round of `reps` calls of the kernel. */
static void run_round(cge_stream *st, const reorder_args *a, int threads, int reps, timing *t)
{
    double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    for (int r = 0; r < reps; r++)
        if (reorder_enqueue(st, a, threads) != CGE_OK ||
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
        printf("note: no AVX-512 on this cpu: the portable tiles run\n");
    static const int64_t cs[] = {3, 16, 24, 64, 96, 256, 1280};
    static const int64_t sides[] = {7, 14, 28, 56, 112};
    printf("element %zu bytes, %d threads; GB/s = (read + write) / min over %d rounds\n", es,
           threads, ROUNDS);
    printf("%-22s %-9s %9s %11s\n", "shape", "to", "GB/s", "cpu us");
    double geo = 0;
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
                     *want = aligned_alloc(64, (bytes + 63) / 64 * 64);
                for (size_t b = 0; b < bytes; b++)
                    x[b] = (char)(b * 131 + 7);
                int reps = (int)(2000000 / bytes) + 1;
                for (int dir = 0; dir < 2; dir++) {
                    reorder_args a = {x, y, n, c, hw, es, dir, simd, narrow};
                    timing t = {1e9, 1e9};
                    for (int r = 0; r < ROUNDS; r++)
                        run_round(st, &a, threads, reps, &t);
                    /* the reference: element (b, ch, s) of NCHW is (b, s, ch) of NHWC */
                    for (int64_t b = 0; b < n; b++)
                        for (int64_t ch = 0; ch < c; ch++)
                            for (int64_t q = 0; q < hw; q++) {
                                size_t plain = (size_t)((b * c + ch) * hw + q) * es;
                                size_t nhwc = (size_t)((b * hw + q) * c + ch) * es;
                                memcpy(want + (dir ? nhwc : plain), x + (dir ? plain : nhwc), es);
                            }
                    if (memcmp(y, want, bytes)) {
                        fprintf(stderr, "bench_reorder: wrong output at %lldx%lldx%lld\n",
                                (long long)n, (long long)c, (long long)hw);
                        return 1;
                    }
                    char shape[64];
                    snprintf(shape, sizeof shape, "%lldx%lldx%lldx%lld", (long long)n, (long long)c,
                             (long long)side, (long long)(hw / side));
                    double gb = 2.0 * bytes / t.wall * 1e-9;
                    printf("%-22s %-9s %9.1f %11.1f\n", shape, dir ? "nhwc" : "nchw", gb,
                           t.cpu * 1e6);
                    geo += log(gb);
                    cases++;
                }
                free(x);
                free(y);
                free(want);
            }
    printf("geomean %.1f GB/s over %d cases\n", exp(geo / cases), cases);
    cge_stream_destroy(st);
    cge_device_destroy(dev);
    return 0;
}
