/* Memory plans: arena bytes against the lower bound (largest sum of live
 * tensors at one step) and against the naive sum (a buffer per value), for
 * graphs made with the functional builder (an MLP, a small CNN, a transformer
 * block) and for ONNX models given on the command line, at levels 0 and 2.
 * Target: arena <= 1.05 x lower bound.
 * Usage: bench_memplan [model.onnx ...] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cge/cge.h"

static void check(cge_status st, const char *what)
{
    if (st) {
        fprintf(stderr, "bench_memplan: %s: %s\n", what, cge_last_error());
        exit(1);
    }
}

static float *weights(int64_t n, uint32_t seed)
{
    float *w = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        w[i] = (float)((seed >> 9) % 2001) / 10000.0f - 0.1f;
    }
    return w;
}

static cge_t constant(cge_builder *b, cge_shape s, uint32_t seed)
{
    float *w = weights(cge_shape_numel(&s), seed);
    cge_t t = cge_es_constant(b, NULL, CGE_F32, s, w);
    free(w);
    return t;
}

static cge_graph *finish(cge_builder *b)
{
    cge_graph *g = NULL;
    check(cge_builder_finish(b, &g), cge_builder_error_message(b));
    cge_builder_destroy(b);
    return g;
}

static cge_graph *mlp(void)
{
    cge_builder *b = cge_builder_create("mlp");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(64, 512));
    int64_t dims[6] = {512, 1024, 2048, 1024, 512, 10};
    for (int l = 0; l < 5; l++) {
        cge_t w = constant(b, CGE_SHAPE(dims[l], dims[l + 1]), (uint32_t)l + 1);
        cge_t bias = constant(b, CGE_SHAPE(dims[l + 1]), (uint32_t)l + 100);
        x = cge_es_add(b, cge_es_mat_mul(b, x, w), bias);
        if (l < 4)
            x = cge_es_relu(b, x);
    }
    cge_es_output(b, cge_es_softmax(b, x, 1), "y");
    return finish(b);
}

static cge_graph *cnn(void)
{
    if (!cge_op_find("", "Conv", 0)) {
        cge_clear_error();
        return NULL;
    }
    cge_builder *b = cge_builder_create("cnn");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(1, 3, 64, 64));
    int64_t ch[5] = {3, 16, 32, 64, 64};
    int64_t pads[4] = {1, 1, 1, 1}, strides[2] = {2, 2};
    for (int l = 0; l < 4; l++) {
        cge_t w = constant(b, CGE_SHAPE(ch[l + 1], ch[l], 3, 3), (uint32_t)l + 7);
        cge_t bias = constant(b, CGE_SHAPE(ch[l + 1]), (uint32_t)l + 70);
        cge_attr at[2] = {CGE_ATTR_INTS("pads", pads, 4), CGE_ATTR_INTS("strides", strides, 2)};
        cge_t in[3] = {x, w, bias};
        cge_t c = cge_es_op1(b, "Conv", "", in, 3, at, l % 2 ? 2 : 1);
        cge_t r = cge_es_relu(b, c);
        /* A residual branch where the shape allows it. */
        x = l % 2 ? r : cge_es_add(b, r, cge_es_sigmoid(b, r));
    }
    cge_es_output(b, x, "y");
    return finish(b);
}

static cge_t layer_norm(cge_builder *b, cge_t x, int64_t d, uint32_t seed)
{
    int64_t axes[1] = {-1};
    cge_t ax = cge_es_vector_i64(b, axes, 1);
    cge_t in1[2] = {x, ax};
    cge_t m = cge_es_op1(b, "ReduceMean", "", in1, 2, NULL, 0);
    cge_t c = cge_es_sub(b, x, m);
    cge_t v = cge_es_mul(b, c, c);
    cge_t in2[2] = {v, ax};
    cge_t var = cge_es_op1(b, "ReduceMean", "", in2, 2, NULL, 0);
    cge_t sd = cge_es_sqrt(b, cge_es_add(b, var, cge_es_scalar_f32(b, 1e-5f)));
    cge_t n = cge_es_div(b, c, sd);
    return cge_es_add(b, cge_es_mul(b, n, constant(b, CGE_SHAPE(d), seed)),
                      constant(b, CGE_SHAPE(d), seed + 1));
}

static cge_graph *transformer(void)
{
    const int64_t T = 128, D = 256, F = 1024;
    cge_builder *b = cge_builder_create("transformer_block");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(T, D));
    for (int layer = 0; layer < 2; layer++) {
        uint32_t s = (uint32_t)layer * 100;
        cge_t q = cge_es_mat_mul(b, x, constant(b, CGE_SHAPE(D, D), s + 1));
        cge_t k = cge_es_mat_mul(b, x, constant(b, CGE_SHAPE(D, D), s + 2));
        cge_t v = cge_es_mat_mul(b, x, constant(b, CGE_SHAPE(D, D), s + 3));
        int64_t perm[2] = {1, 0};
        cge_attr pa = CGE_ATTR_INTS("perm", perm, 2);
        cge_t kt = cge_es_op1(b, "Transpose", "", &k, 1, &pa, 1);
        cge_t sc = cge_es_mul(b, cge_es_mat_mul(b, q, kt), cge_es_scalar_f32(b, 0.0625f));
        cge_t att = cge_es_mat_mul(b, cge_es_softmax(b, sc, -1), v);
        cge_t o = cge_es_mat_mul(b, att, constant(b, CGE_SHAPE(D, D), s + 4));
        x = layer_norm(b, cge_es_add(b, x, o), D, s + 5);
        cge_t h = cge_es_add(b, cge_es_mat_mul(b, x, constant(b, CGE_SHAPE(D, F), s + 7)),
                             constant(b, CGE_SHAPE(F), s + 8));
        h = cge_es_gelu(b, h, NULL);
        h = cge_es_mat_mul(b, h, constant(b, CGE_SHAPE(F, D), s + 9));
        x = layer_norm(b, cge_es_add(b, x, h), D, s + 10);
    }
    cge_es_output(b, x, "y");
    return finish(b);
}

static void report(const char *name, const cge_graph *g)
{
    /* levels 0, 2 and 3 (the default: channels-last convolutions) */
    static const cge_opt_level levels[] = {CGE_OPT_NONE, CGE_OPT_FUSE, CGE_OPT_LAYOUT};
    for (int i = 0; i < 3; i++) {
        int lvl = (int)levels[i] - 1;
        cge_compile_options o = {.opt_level = levels[i]};
        cge_plan *p = NULL;
        if (cge_compile(g, NULL, 0, &o, &p)) {
            printf("%-24s %-4d (no plan: %.100s)\n", name, lvl, cge_last_error());
            continue;
        }
        const cge_plan_stats *s = cge_plan_get_stats(p);
        double lb = s->lower_bound_bytes ? (double)s->lower_bound_bytes : 1.0;
        printf("%-24s %-4d %6d %12zu %12zu %12zu %8.3f %8.3f %9.1f\n", name, lvl,
               (int)cge_plan_num_steps(p), s->arena_bytes, s->lower_bound_bytes, s->naive_bytes,
               (double)s->arena_bytes / lb,
               s->naive_bytes ? (double)s->arena_bytes / (double)s->naive_bytes : 0.0,
               s->compile_ms);
        cge_plan_destroy(p);
    }
}

int main(int argc, char **argv)
{
    printf("%-24s %-4s %6s %12s %12s %12s %8s %8s %9s\n", "graph", "lvl", "steps", "arena",
           "lower_bound", "naive", "arena/lb", "arena/nv", "compile_ms");
    cge_graph *(*makers[3])(void) = {mlp, cnn, transformer};
    const char *names[3] = {"mlp", "cnn", "transformer_block"};
    for (int i = 0; i < 3; i++) {
        cge_graph *g = makers[i]();
        if (!g) {
            printf("%-24s (skipped: operators missing)\n", names[i]);
            continue;
        }
        report(names[i], g);
        cge_graph_destroy(g);
    }
    for (int i = 1; i < argc; i++) {
        cge_graph *g = NULL;
        check(cge_onnx_import_file(argv[i], NULL, &g), argv[i]);
        const char *base = strrchr(argv[i], '/');
        report(base ? base + 1 : argv[i], g);
        cge_graph_destroy(g);
    }
    return 0;
}
