/* Allocation failures: a scenario using every allocating IR call runs once
 * per allocation with that allocation failing; each run must return a
 * [graph] CGE_ERR_NO_MEMORY error and free everything it took. The allocator
 * is replaced in this executable, so sanitizer builds (which own malloc) skip. */
#include <stdlib.h>
#include <string.h>

#include "ir_test_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OOM_SKIP 1
#else
#define OOM_SKIP 0

/* glibc's own entry points, so that the replacements below can forward. */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);

static int armed;
static long calls, fail_at = -1, live;

static int inject(void) { return armed && calls++ == fail_at; }

void *malloc(size_t n)
{
    if (inject())
        return NULL;
    void *p = __libc_malloc(n);
    live += armed && p;
    return p;
}

void *calloc(size_t n, size_t size)
{
    if (inject())
        return NULL;
    void *p = __libc_calloc(n, size);
    live += armed && p;
    return p;
}

void *realloc(void *old, size_t n)
{
    if (inject())
        return NULL;
    void *p = __libc_realloc(old, n);
    live += armed && p && !old;
    return p;
}

void *aligned_alloc(size_t align, size_t n)
{
    if (inject())
        return NULL;
    void *p = __libc_memalign(align, n);
    live += armed && p;
    return p;
}

void free(void *p)
{
    live -= armed && p;
    __libc_free(p);
}

#define TRY(x)                      \
    do {                            \
        if ((st = (x)) != CGE_OK)   \
            goto out;               \
    } while (0)

static cge_status scenario(FILE *sink)
{
    cge_graph *g = NULL, *sub = NULL, *c = NULL;
    int32_t *order = NULL;
    cge_status st;
    TRY(cge_graph_create("oom", &g));
    TRY(cge_graph_create("sub", &sub));
    cge_shape s = CGE_SHAPE(2, 3);
    TRY(cge_graph_add_input(sub, "a", CGE_F32, &s));
    const char *sin[] = {"a"}, *sout[] = {"b"};
    TRY(cge_graph_add_node(sub, "Relu", NULL, NULL, sin, 1, sout, 1, NULL));
    TRY(cge_graph_add_output(sub, "b"));

    TRY(cge_graph_add_input(g, "x", CGE_F32, &s));
    float w[6] = {1, 2, 3, 4, 5, 6};
    TRY(cge_graph_add_constant(g, "w", CGE_F32, &s, w, sizeof w));
    /* Enough nodes to make the tables grow a few times. */
    char in[16], out[16];
    const char *ins[] = {in, "w"}, *outs[] = {out};
    for (int i = 0; i < 40; i++) {
        snprintf(in, sizeof in, i ? "v%d" : "x", i - 1);
        snprintf(out, sizeof out, "v%d", i);
        TRY(cge_graph_add_node(g, i % 2 ? "Add" : "Mul", i % 3 ? NULL : "dom", NULL, ins, 2,
                               outs, 1, NULL));
    }
    cge_node *n = cge_graph_node(g, 3);
    const int64_t ints[] = {1, 2, 3};
    const float floats[] = {0.5f};
    const char *strs[] = {"p", "q"};
    cge_tensor t = {.name = "t", .dtype = CGE_F32, .shape = s, .data = w, .bytes = sizeof w};
    const cge_graph *graphs[] = {sub, sub};
    TRY(cge_node_set_int(n, "i", 1));
    TRY(cge_node_set_string(n, "s", "str"));
    TRY(cge_node_set_ints(n, "is", ints, 3));
    TRY(cge_node_set_floats(n, "fs", floats, 1));
    cge_attr ss = {.name = "ss", .kind = CGE_ATTR_STRINGS, .strings = strs, .n = 2};
    TRY(cge_attrs_set(cge_node_attrs(n), &ss));
    TRY(cge_node_set_tensor(n, "t", &t));
    TRY(cge_attrs_set(cge_node_attrs(n),
                      &(cge_attr){.name = "ts", .kind = CGE_ATTR_TENSORS, .tensors = &t, .n = 1}));
    TRY(cge_node_set_graph(n, "g", sub));
    cge_attr gs = {.name = "gs", .kind = CGE_ATTR_GRAPHS, .graphs = graphs, .n = 2};
    TRY(cge_attrs_set(cge_node_attrs(n), &gs));
    TRY(cge_graph_add_output(g, "v39"));
    TRY(cge_graph_verify_structure(g));
    order = malloc(40 * sizeof *order);
    if (!order) {
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "test: out of memory");
        goto out;
    }
    TRY(cge_graph_topo_order(g, order));
    TRY(cge_graph_clone(g, &c));
    TRY(cge_graph_verify_structure(c));
    TRY(cge_graph_write_dot(c, sink));
    TRY(cge_graph_write_text(c, sink));
out:
    free(order);
    cge_graph_destroy(c);
    cge_graph_destroy(sub);
    cge_graph_destroy(g);
    return st;
}

#endif /* !OOM_SKIP */

static void test_every_allocation_fails_once(void **state)
{
    (void)state;
#if OOM_SKIP
    print_message("skipped: this build's sanitizer owns malloc, which the test must replace\n");
    skip();
#else
    /* A caller-provided buffer: stdio allocates nothing inside the runs. */
    static char buf[1 << 16];
    FILE *sink = fopen("/dev/null", "w");
    assert_non_null(sink);
    assert_int_equal(setvbuf(sink, buf, _IOFBF, sizeof buf), 0);
    long runs = 0;
    for (long k = 0;; k++) {
        calls = 0;
        live = 0;
        fail_at = k;
        armed = 1;
        cge_status st = scenario(sink);
        armed = 0;
        if (live != 0)
            fail_msg("failing allocation %ld: %ld blocks leaked", k, live);
        if (calls <= k) {
            /* No allocation left to fail: the scenario ran through. */
            assert_int_equal(st, CGE_OK);
            break;
        }
        runs++;
        if (st != CGE_ERR_NO_MEMORY || strncmp(cge_last_error(), "[graph] ", 8) != 0)
            fail_msg("failing allocation %ld: got %s: %s", k, cge_status_name(st),
                     cge_last_error());
    }
    assert_true(runs > 100);
    fclose(sink);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_allocation_fails_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
