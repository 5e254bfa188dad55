/* Helpers for the model file tests (mf_util.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mf_util.h"
#include "model_file/format.h"

static cge_graph *finish(cge_builder *b)
{
    cge_graph *g = NULL;
    if (cge_builder_finish(b, &g) != CGE_OK)
        fail_msg("%s", cge_last_error());
    cge_builder_destroy(b);
    return g;
}

cge_graph *mf_mixed_graph(int64_t rows)
{
    float w[4 * 3], bias[3];
    for (int i = 0; i < 12; i++)
        w[i] = (float)((i * 7) % 5) * 0.3f - 0.6f;
    for (int i = 0; i < 3; i++)
        bias[i] = 0.1f * (float)i;
    cge_builder *b = cge_builder_create("mixed");
    cge_t x = cge_es_input(b, "x", CGE_F32, CGE_SHAPE(rows, 4));
    cge_t h = cge_es_relu(b, cge_es_add(b, cge_es_mat_mul(b, x, cge_es_constant(b, "W", CGE_F32, CGE_SHAPE(4, 3), w)),
                                        cge_es_constant(b, "b", CGE_F32, CGE_SHAPE(3), bias)));
    int64_t perm[2] = {1, 0};
    cge_t t = cge_es_mul(b, cge_es_transpose(b, h, perm, 2), cge_es_scalar_f32(b, 0.5f));
    cge_es_output(b, cge_es_softmax(b, t, -1), "y");
    int64_t axes[1] = {1};
    cge_es_output(b, cge_es_reduce_sum(b, x, cge_es_vector_i64(b, axes, 1), 1, 0), "s");
    return finish(b);
}

cge_graph *mf_attr_graph(void)
{
    float w[4 * 2 * 3 * 3], bias[4];
    for (int i = 0; i < 72; i++)
        w[i] = (float)((i * 5) % 11) * 0.05f - 0.25f;
    for (int i = 0; i < 4; i++)
        bias[i] = 0.05f * (float)i;
    cge_builder *b = cge_builder_create("attrs");
    cge_t x = cge_es_input(b, "img", CGE_F32, CGE_SHAPE(1, 2, 6, 6));
    cge_t ids = cge_es_input(b, "ids", CGE_I64, CGE_SHAPE(3));
    int64_t k[2] = {3, 3}, pads[4] = {1, 1, 1, 1}, strides[2] = {1, 1}, dil[2] = {1, 1};
    cge_t c = cge_es_conv(b, x, cge_es_constant(b, "cw", CGE_F32, CGE_SHAPE(4, 2, 3, 3), w),
                          cge_es_constant(b, "cb", CGE_F32, CGE_SHAPE(4), bias), "NOTSET", dil, 2,
                          1, k, 2, pads, 4, strides, 2);
    cge_t r = cge_es_relu(b, c);
    int64_t s1[2] = {4, 36}, s2[3] = {1, 4, 36};
    cge_t v = cge_es_reshape(b, cge_es_reshape(b, r, cge_es_vector_i64(b, s1, 2), 0),
                             cge_es_vector_i64(b, s2, 3), 0);
    /* A second branch from the input: Sigmoid of the flattened image. */
    cge_t f = cge_es_sigmoid(b, cge_es_reshape(b, x, cge_es_vector_i64(b, (int64_t[]){1, 2, 36}, 3), 0));
    cge_t cat = cge_es_concat(b, (cge_t[]){v, f}, 2, 1);
    int64_t pv[6] = {0, 1, 0, 0, 1, 0};
    cge_t p = cge_es_pad(b, cat, cge_es_vector_i64(b, pv, 6), CGE_NONE, CGE_NONE, "reflect");
    cge_es_output(b, p, "padded");
    float table[5 * 2];
    for (int i = 0; i < 10; i++)
        table[i] = (float)i * 1.5f;
    cge_t gth = cge_es_gather(b, cge_es_constant(b, "table", CGE_F32, CGE_SHAPE(5, 2), table),
                              ids, 0);
    cge_es_output(b, cge_es_cast(b, gth, CGE_F64), "gathered");
    return finish(b);
}

static uint32_t next(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

cge_status mf_run(cge_session *s, uint32_t id, cge_run_mode mode, uint32_t seed, mf_outputs *out)
{
    int32_t ni = 0, no = 0;
    cge_status st = cge_session_num_io(s, id, &ni, &no);
    if (st)
        return st;
    assert_true(ni <= 16 && no <= 16);
    cge_tensor in[16];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof *out);
    for (int32_t i = 0; !st && i < ni; i++) {
        cge_tensor_desc d;
        st = cge_session_input_desc(s, id, i, &d);
        if (st)
            break;
        for (int32_t r = 0; r < d.shape.rank; r++)
            if (d.shape.dims[r] < 0)
                d.shape.dims[r] = 2;   /* a symbolic model's dims: one size */
        size_t nb = cge_tensor_nbytes(d.dtype, &d.shape);
        in[i] = (cge_tensor){.name = d.name, .dtype = d.dtype, .shape = d.shape,
                             .data = calloc(1, nb + 1), .bytes = nb};
        size_t es = cge_dtype_size(d.dtype), n = es ? nb / es : 0;
        for (size_t k = 0; k < n; k++) {
            uint32_t r = next(&seed);
            if (d.dtype == CGE_F32)
                ((float *)in[i].data)[k] = (float)(r % 2001) / 500.0f - 2.0f;
            else if (d.dtype == CGE_I64)
                ((int64_t *)in[i].data)[k] = (int64_t)(r % 5);
            else
                memset((char *)in[i].data + k * es, (int)(r % 3), es);
        }
    }
    out->n = no;
    for (int32_t i = 0; !st && i < no; i++) {
        cge_tensor_desc d;
        st = cge_session_output_desc(s, id, i, &d);
        size_t nb = st ? 0 : cge_shape_is_static(&d.shape) ? cge_tensor_nbytes(d.dtype, &d.shape)
                                                           : (size_t)1 << 16;
        out->t[i] = (cge_tensor){.name = d.name, .data = calloc(1, nb + 1), .bytes = nb};
    }
    cge_run_options o = {.mode = mode};
    if (!st)
        st = cge_session_run(s, id, in, ni, out->t, no, &o);
    for (int32_t i = 0; i < ni; i++)
        free(in[i].data);
    return st;
}

void mf_outputs_free(mf_outputs *o)
{
    for (int32_t i = 0; i < o->n; i++)
        free(o->t[i].data);
    o->n = 0;
}

void mf_assert_same(const mf_outputs *a, const mf_outputs *b)
{
    assert_int_equal(a->n, b->n);
    for (int32_t i = 0; i < a->n; i++) {
        assert_int_equal(a->t[i].dtype, b->t[i].dtype);
        assert_true(cge_shape_equal(&a->t[i].shape, &b->t[i].shape));
        size_t nb = cge_tensor_nbytes(a->t[i].dtype, &a->t[i].shape);
        assert_int_equal(nb, a->t[i].bytes);
        if (memcmp(a->t[i].data, b->t[i].data, nb))
            fail_msg("output %d ('%s') differs", (int)i, a->t[i].name);
    }
}

static void sym_node(cge_graph *g, const char *op, const char *name, const char **in, int32_t ni,
                 const char **out, cge_node **n)
{
    assert_int_equal(cge_graph_add_node(g, op, "", name, in, ni, out, 1, n), CGE_OK);
}

/* x [batch, seq, 8] -> MatMul(W [8,8]) + b -> Softmax -> Reshape to
 * Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]): y [batch, seq*8]. The
 * Reshape's shape is a computation on sizes that reads constants, which the
 * shape program evaluates at each new size (from the model's weights once
 * loaded). batch, seq <= 0: symbolic. */
cge_graph *mf_symbolic_graph(int64_t batch, int64_t seq)
{
    cge_graph *g = NULL;
    assert_int_equal(cge_graph_create("symbolic_model", &g), CGE_OK);
    int64_t b = batch > 0 ? batch : cge_graph_dim_symbol(g, "batch");
    int64_t s = seq > 0 ? seq : cge_graph_dim_symbol(g, "seq");
    cge_shape xs = CGE_SHAPE(b, s, MF_SYM_D), ws = CGE_SHAPE(MF_SYM_D, MF_SYM_D), bs = CGE_SHAPE(MF_SYM_D);
    static float w[MF_SYM_D * MF_SYM_D], bias[MF_SYM_D];
    for (int i = 0; i < MF_SYM_D * MF_SYM_D; i++)
        w[i] = (float)((i * 7) % 13) * 0.1f - 0.6f;
    for (int i = 0; i < MF_SYM_D; i++)
        bias[i] = 0.05f * (float)i;
    static const int64_t zero = 0, axes[1] = {0}, minus1[1] = {-1};
    cge_shape scalar = {.rank = 0}, one = CGE_SHAPE(1);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &xs), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "w", CGE_F32, &ws, w, sizeof w), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "b", CGE_F32, &bs, bias, sizeof bias), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "zero", CGE_I64, &scalar, &zero, sizeof zero),
                     CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "axes", CGE_I64, &one, axes, sizeof axes), CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "m1", CGE_I64, &one, minus1, sizeof minus1),
                     CGE_OK);
    const char *mm[] = {"x", "w"}, *ad[] = {"m", "b"}, *sm[] = {"a"}, *sh[] = {"x"};
    const char *ga[] = {"shp", "zero"}, *un[] = {"n", "axes"}, *cc[] = {"n1", "m1"},
               *rs[] = {"p", "shape"};
    const char *om[] = {"m"}, *oa[] = {"a"}, *op[] = {"p"}, *osh[] = {"shp"}, *on[] = {"n"},
               *on1[] = {"n1"}, *oshape[] = {"shape"}, *oy[] = {"y"};
    cge_node *n = NULL;
    sym_node(g, "MatMul", "mm", mm, 2, om, NULL);
    sym_node(g, "Add", "add", ad, 2, oa, NULL);
    sym_node(g, "Softmax", "softmax", sm, 1, op, &n);
    assert_int_equal(cge_node_set_int(n, "axis", -1), CGE_OK);
    sym_node(g, "Shape", "shape_x", sh, 1, osh, NULL);
    sym_node(g, "Gather", "batch_of", ga, 2, on, NULL);
    sym_node(g, "Unsqueeze", "unsq", un, 2, on1, NULL);
    sym_node(g, "Concat", "concat", cc, 2, oshape, &n);
    assert_int_equal(cge_node_set_int(n, "axis", 0), CGE_OK);
    sym_node(g, "Reshape", "reshape", rs, 2, oy, NULL);
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    return g;
}

/* The symbolic plan as a session makes it: prepared with the dims
 * symbolic, then built with them symbolic. */
cge_plan *mf_compile_symbolic(const cge_graph *g)
{
    cge_compile_options co = {.allow_incomplete = true};
    cge_plan *prep = NULL, *p = NULL;
    assert_int_equal(cge_compile(g, NULL, 0, &co, &prep), CGE_OK);
    co.symbolic_plan = true;
    assert_int_equal(cge_compile(cge_plan_graph(prep), NULL, 0, &co, &p), CGE_OK);
    cge_plan_destroy(prep);
    assert_true(cge_plan_is_symbolic(p));
    return p;
}

cge_plan *mf_compile(const cge_graph *g, int streams, cge_opt_level level)
{
    cge_compile_options o = {.opt_level = level, .num_streams = streams};
    cge_plan *p = NULL;
    if (cge_compile(g, NULL, 0, &o, &p) != CGE_OK)
        fail_msg("compile: %s", cge_last_error());
    return p;
}

void mf_temp_path(char *buf, size_t size, const char *suffix)
{
    static int counter;
    const char *dir = getenv("TMPDIR");
    snprintf(buf, size, "%s/cge_mf_%ld_%d%s", dir && dir[0] ? dir : "/tmp", (long)getpid(),
             counter++, suffix);
}

int mf_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, size, f);
    return fclose(f) == 0 && w == size ? 0 : -1;
}

void mf_fix_crc(void *data, size_t size)
{
    cgm_header h;
    if (size < sizeof h)
        return;
    memcpy(&h, data, sizeof h);
    if (h.meta_end < sizeof h || h.meta_end > size)
        return;
    h.meta_crc32 = cgm_meta_crc(data, h.meta_end);
    memcpy((char *)data + offsetof(cgm_header, meta_crc32), &h.meta_crc32, 4);
}

void mf_perturb_words(const char *data, size_t size, size_t lo, size_t hi,
                      void (*try_fn)(const void *variant, size_t size, void *user), void *user)
{
    static const uint32_t patterns[] = {1, 0x80000000u, 0xffffffffu, 0x100};
    char *copy = malloc(size);
    assert_non_null(copy);
    for (size_t off = lo; off + 4 <= hi; off += 4)
        for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++) {
            memcpy(copy, data, size);
            uint32_t w;
            memcpy(&w, copy + off, 4);
            w ^= patterns[k];
            memcpy(copy + off, &w, 4);
            mf_fix_crc(copy, size);
            try_fn(copy, size, user);
        }
    free(copy);
}

static void cf_node(cge_graph *g, const char *op, const char *const *ins, int32_t ni,
                    const char *const *outs, int32_t no, cge_node **n)
{
    assert_int_equal(cge_graph_add_node(g, op, NULL, NULL, ins, ni, outs, no, n), CGE_OK);
}

/* then: Identity(v), else: Neg(v), of the outer `v`; the condition is
 * ReduceSum(v) > 0 under the name `cond`, made in `g`. */
static void cf_sign_if(cge_graph *g, const char *v, const char *cond, const char *out,
                       const char *then_op, const char *else_op)
{
    char sum[64];
    snprintf(sum, sizeof sum, "%s_sum", v);
    cf_node(g, "ReduceSum", (const char *[]){v}, 1, (const char *[]){sum}, 1, NULL);
    float zero = 0.0f;
    char zname[64];
    snprintf(zname, sizeof zname, "%s_zero", v);
    assert_int_equal(cge_graph_add_constant(g, zname, CGE_F32, &CGE_SCALAR, &zero, sizeof zero),
                     CGE_OK);
    cf_node(g, "Greater", (const char *[]){sum, zname}, 2, (const char *[]){cond}, 1, NULL);
    cge_graph *t = NULL, *e = NULL;
    assert_int_equal(cge_graph_create("then", &t), CGE_OK);
    assert_int_equal(cge_graph_create("else", &e), CGE_OK);
    cf_node(t, then_op, (const char *[]){v}, 1, (const char *[]){"o"}, 1, NULL);
    cf_node(e, else_op, (const char *[]){v}, 1, (const char *[]){"o"}, 1, NULL);
    assert_int_equal(cge_graph_add_output(t, "o"), CGE_OK);
    assert_int_equal(cge_graph_add_output(e, "o"), CGE_OK);
    cge_node *n = NULL;
    cf_node(g, "If", (const char *[]){cond, v}, 2, (const char *[]){out}, 1, &n);
    const char *outer[] = {v};
    cge_attr at[] = {{.name = "then_branch", .kind = CGE_ATTR_GRAPH, .g = t},
                     {.name = "else_branch", .kind = CGE_ATTR_GRAPH, .g = e},
                     {.name = "outer_names", .kind = CGE_ATTR_STRINGS, .strings = outer, .n = 1}};
    for (int k = 0; k < 3; k++)
        assert_int_equal(cge_attrs_set(cge_node_attrs(n), &at[k]), CGE_OK);
    cge_graph_destroy(t);
    cge_graph_destroy(e);
}

cge_graph *mf_control_graph(void)
{
    cge_graph *g = NULL, *b = NULL;
    assert_int_equal(cge_graph_create("control", &g), CGE_OK);
    assert_int_equal(cge_graph_add_input(g, "x", CGE_F32, &CGE_SHAPE(3, 4)), CGE_OK);
    float bias[4] = {0.1f, -0.2f, 0.3f, -0.4f}, w[16];
    for (int k = 0; k < 16; k++)
        w[k] = (float)((k * 7) % 11) / 11.0f - 0.45f;
    assert_int_equal(cge_graph_add_constant(g, "bias", CGE_F32, &CGE_SHAPE(4), bias, sizeof bias),
                     CGE_OK);
    int64_t trips = 3;
    uint8_t yes = 1;
    assert_int_equal(cge_graph_add_constant(g, "M", CGE_I64, &CGE_SCALAR, &trips, sizeof trips),
                     CGE_OK);
    assert_int_equal(cge_graph_add_constant(g, "c0", CGE_BOOL, &CGE_SCALAR, &yes, 1), CGE_OK);
    assert_int_equal(cge_graph_create("body", &b), CGE_OK);
    assert_int_equal(cge_graph_add_input(b, "i", CGE_I64, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(b, "c", CGE_BOOL, &CGE_SCALAR), CGE_OK);
    assert_int_equal(cge_graph_add_input(b, "a", CGE_F32, &CGE_SHAPE(3, 4)), CGE_OK);
    assert_int_equal(cge_graph_add_constant(b, "W", CGE_F32, &CGE_SHAPE(4, 4), w, sizeof w),
                     CGE_OK);
    cf_node(b, "MatMul", (const char *[]){"a", "W"}, 2, (const char *[]){"mm"}, 1, NULL);
    cf_node(b, "Add", (const char *[]){"mm", "bias"}, 2, (const char *[]){"pre"}, 1, NULL);
    cf_node(b, "Tanh", (const char *[]){"pre"}, 1, (const char *[]){"a2"}, 1, NULL);
    cf_node(b, "Identity", (const char *[]){"c"}, 1, (const char *[]){"c2"}, 1, NULL);
    cf_sign_if(b, "a2", "pos", "signed", "Identity", "Neg");
    assert_int_equal(cge_graph_add_output(b, "c2"), CGE_OK);
    assert_int_equal(cge_graph_add_output(b, "a2"), CGE_OK);
    assert_int_equal(cge_graph_add_output(b, "signed"), CGE_OK);
    cge_node *loop = NULL;
    cf_node(g, "Loop", (const char *[]){"M", "c0", "x", "bias"}, 4,
            (const char *[]){"y", "scan"}, 2, &loop);
    const char *outer[] = {"bias"};
    cge_attr at[] = {{.name = "body", .kind = CGE_ATTR_GRAPH, .g = b},
                     {.name = "outer_names", .kind = CGE_ATTR_STRINGS, .strings = outer, .n = 1}};
    for (int k = 0; k < 2; k++)
        assert_int_equal(cge_attrs_set(cge_node_attrs(loop), &at[k]), CGE_OK);
    cge_graph_destroy(b);
    cf_sign_if(g, "y", "ypos", "z", "Relu", "Sigmoid");
    assert_int_equal(cge_graph_add_output(g, "y"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "scan"), CGE_OK);
    assert_int_equal(cge_graph_add_output(g, "z"), CGE_OK);
    /* declared, as an importer declares graph outputs */
    assert_int_equal(cge_graph_set_desc(g, "y", CGE_F32, &CGE_SHAPE(3, 4)), CGE_OK);
    assert_int_equal(cge_graph_set_desc(g, "scan", CGE_F32, &CGE_SHAPE(3, 3, 4)), CGE_OK);
    assert_int_equal(cge_graph_set_desc(g, "z", CGE_F32, &CGE_SHAPE(3, 4)), CGE_OK);
    return g;
}
