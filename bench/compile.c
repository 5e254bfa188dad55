/* Compile time for generated graphs (a chain, a wide DAG, a random DAG) of
 * 1k, 10k and 100k nodes: cge_compile's total and stages, and what a session
 * user pays (add + compile), at the default level and 0. Usage: bench_compile [max_nodes] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cge/cge.h"

static const char *const unary[] = {"Relu", "Exp", "Neg", "Tanh", "Sigmoid", "Abs"};
static const char *const binary[] = {"Add", "Mul", "Sub", "Add"};

static uint32_t rng(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void check(cge_status st)
{
    if (st) {
        fprintf(stderr, "bench_compile: %s\n", cge_last_error());
        exit(1);
    }
}

/* kind 0: chain, 1: wide DAG (layers of 64), 2: random DAG. */
static cge_graph *make(int kind, int32_t n)
{
    cge_graph *g = NULL;
    cge_shape s = CGE_SHAPE(16);
    check(cge_graph_create("bench", &g));
    check(cge_graph_add_input(g, "x", CGE_F32, &s));
    char (*names)[24] = malloc(sizeof *names * ((size_t)n + 1));
    strcpy(names[0], "x");
    uint32_t seed = 12345u + (uint32_t)kind;
    const int32_t width = 64;
    for (int32_t i = 1; i <= n; i++) {
        snprintf(names[i], sizeof names[i], "v%d", (int)i);
        const char *out = names[i];
        const char *ins[2];
        int32_t a, b;
        if (kind == 0) {
            a = i - 1;
            b = i > 2 ? i - 2 : 0;
        } else if (kind == 1) {
            int32_t layer = (i - 1) / width, prev0 = layer ? (layer - 1) * width + 1 : 0;
            int32_t span = layer ? width : 1;
            a = prev0 + (int32_t)(rng(&seed) % (uint32_t)span);
            b = prev0 + (int32_t)(rng(&seed) % (uint32_t)span);
        } else {
            a = i - 1 - (int32_t)(rng(&seed) % (uint32_t)(i < 8 ? i : 8));
            b = (int32_t)(rng(&seed) % (uint32_t)i);
        }
        ins[0] = names[a];
        ins[1] = names[b];
        bool bin = rng(&seed) % 3 == 0;
        const char *op = bin ? binary[rng(&seed) % 4] : unary[rng(&seed) % 6];
        check(cge_graph_add_node(g, op, "", NULL, ins, bin ? 2 : 1, &out, 1, NULL));
    }
    /* Outputs: the last value, plus (for DAGs) the last layer's values. */
    int32_t outs = kind == 1 ? width : 1;
    for (int32_t k = 0; k < outs && k < n; k++)
        check(cge_graph_add_output(g, names[n - k]));
    free(names);
    return g;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* cge_session_add_graph + cge_session_compile_graph: the graph handed to a
 * session and compiled, as a user does it. */
static double session_ms(const cge_graph *g, cge_opt_level level)
{
    cge_session_options so = {.opt_level = level, .num_threads = 1};
    cge_session *s = NULL;
    check(cge_session_create(&so, &s));
    double t0 = now_ms();
    check(cge_session_add_graph(s, 1, g));
    check(cge_session_compile_graph(s, 1));
    double ms = now_ms() - t0;
    cge_session_destroy(s);
    return ms;
}

int main(int argc, char **argv)
{
    int32_t max_n = argc > 1 ? atoi(argv[1]) : 100000;
    const char *kinds[3] = {"chain", "wide", "random"};
    printf("%-7s %-4s %8s %8s %10s %10s %10s %10s %10s %7s %6s %10s\n", "graph", "lvl", "nodes",
           "steps", "total_ms", "prepare", "optimize", "partition", "build", "growth", "arena/lb",
           "session_ms");
    for (int kind = 0; kind < 3; kind++) {
        for (int lvl = 0; lvl < 2; lvl++) {
            double prev = 0;
            for (int32_t n = 1000; n <= max_n; n *= 10) {
                cge_graph *g = make(kind, n);
                cge_compile_options o = {.opt_level = lvl ? CGE_OPT_NONE : CGE_OPT_DEFAULT};
                cge_plan *p = NULL;
                check(cge_compile(g, NULL, 0, &o, &p));
                const cge_plan_stats *s = cge_plan_get_stats(p);
                double lb = s->lower_bound_bytes ? (double)s->lower_bound_bytes : 1;
                printf("%-7s %-4s %8d %8d %10.1f %10.1f %10.1f %10.1f %10.1f %7s %6.3f %10.1f\n",
                       kinds[kind], lvl ? "0" : "dflt", (int)n, (int)cge_plan_num_steps(p),
                       s->compile_ms, s->stage_ms[0], s->stage_ms[1], s->stage_ms[2],
                       s->stage_ms[3], "", (double)s->arena_bytes / lb, session_ms(g, o.opt_level));
                if (prev > 0)
                    printf("%-7s %-4s %8s %8s %10s %49s x%-6.1f\n", "", "", "", "", "", "",
                           s->compile_ms / prev);
                prev = s->compile_ms;
                cge_plan_destroy(p);
                cge_graph_destroy(g);
            }
        }
    }
    return 0;
}
