/* What the C benches share: CHECK (a failing cge call prints the library's
 * error and exits), a monotonic clock in microseconds and the median of a
 * sample array (sorted in place). */
#ifndef CGE_BENCH_COMMON_H
#define CGE_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cge/cge.h"

#define CHECK(call)                                                              \
    do {                                                                         \
        cge_status st_ = (call);                                                 \
        if (st_ != CGE_OK) {                                                     \
            fprintf(stderr, "%s: %s\n", #call, cge_last_error());                \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static inline double bench_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

#endif
