/* `cge compile`, `cge inspect` and `cge dot`: the commands that look at a
 * plan (compiled here from ONNX, or read from a .cgm) rather than run it. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char compile_help[] =
    "usage: cge compile MODEL.onnx -o MODEL.cgm [options]\n"
    "\n"
    "Compile an ONNX model for fixed input shapes and write the offline model.\n"
    "\n"
    "  -o FILE                    the .cgm to write (required); it also holds the\n"
    "                             weights packed for their kernels (a load on a\n"
    "                             machine with the same CPU features uses them as\n"
    "                             they are; CGE_CGM_PACKED=0 leaves them out)\n"
    "  --input-shape NAME:D0,D1   set an input's shape (repeatable; needed for\n"
    "                             dynamic dimensions). A dim may be a name\n"
    "                             (ids:1,batch): a symbolic dim, which the .cgm\n"
    "                             keeps (one plan and its shape program serve\n"
    "                             every size; cge run/bench --input-shape sets it)\n"
    "  --opt-level 0-3            0: as written, 1: exact rewrites, 2: + fusions,\n"
    "                             3: + layout changes (default)\n"
    "  --disable-pass NAME        skip a compiler pass (repeatable)\n"
    "  --custom-op-lib LIB.so     load a custom operator library first (repeatable);\n"
    "                             the model records it by name\n"
    "  --streams N                streams the plan may use (default 1)\n"
    "  --precision fp32|bf16      bf16: Conv/MatMul/Gemm run in bfloat16 (the file\n"
    "                             keeps it; default fp32)\n"
    "  --dump DIR                 write the graph after every pass into DIR\n"
    "  --kv-cache-max-len N       rewrite a concat-form KV cache export to the static\n"
    "                             form (N slots, input cache_position; docs/guide.md)\n";

static const char inspect_help[] =
    "usage: cge inspect MODEL [--json] [options]\n"
    "\n"
    "Inputs, outputs, op histogram, engines and subgraphs, streams, weight and\n"
    "arena bytes, the memory planner's lower bound and the naive total. An .onnx\n"
    "model is compiled first (with the compile options below).\n"
    "\n"
    "  --json                     one JSON object (keys: inputs, outputs, nodes, ops,\n"
    "                             engines, streams, weight_bytes, arena_bytes,\n"
    "                             lower_bound_bytes, naive_bytes, ...)\n"
    "  --verify                   .cgm: check the weights' checksum even where\n"
    "                             CGE_VERIFY_WEIGHTS=0 (it is checked by default)\n"
    "  --input-shape NAME:D0,D1   (.onnx) set an input's shape (a dim may be a name)\n"
    "  --opt-level 0-3, --disable-pass NAME, --streams N, --custom-op-lib LIB.so\n";

static const char dot_help[] =
    "usage: cge dot MODEL -o FILE.dot [--after PASS] [options]\n"
    "\n"
    "Write the graph for Graphviz (dot -Tsvg FILE.dot > graph.svg): the compiled\n"
    "graph, or (.onnx only) the graph right after compiler pass PASS (its last run\n"
    "when a pass runs twice; 'import' is the graph as imported).\n"
    "\n"
    "  -o FILE                    the .dot to write (required)\n"
    "  --after PASS               verify, infer, normalize, fold_constants, cse, ...\n"
    "  --input-shape NAME:D0,D1, --opt-level 0-3, --disable-pass NAME, --streams N,\n"
    "  --custom-op-lib LIB.so\n";

static void opts_free(cli_opts *o) { cli_opts_free(o); }

/* The plan of the model: compiled (owned, *own set) or the .cgm's. */
static int get_plan(const char *cmd, const cli_opts *o, cli_model *m, cge_plan **own,
                    const cge_plan **plan, double *compile_ms)
{
    *own = NULL;
    if (m->is_cgm) {
        *plan = cge_model_plan(m->model);
        if (compile_ms)
            *compile_ms = 0;
        return CLI_OK;
    }
    char dis[1024];
    cge_compile_options co = cli_compile_options(o, dis, sizeof dis);
    double t0 = cli_now_ms();
    if (cge_compile(m->graph, NULL, 0, &co, own)) {
        char sym[1024];
        cli_symbolic_inputs(m->graph, sym, sizeof sym);
        if (!sym[0] || !strcmp(cmd, "compile"))
            return cli_fail_last(cmd, NULL);
        char e[2048];
        snprintf(e, sizeof e, "%s", cge_last_error());
        return cli_fail(cmd, "%s\n(inputs with dims that are not sizes: %s; give them sizes "
                             "with --input-shape NAME:D0,D1,...)", e, sym);
    }
    if (compile_ms)
        *compile_ms = cli_now_ms() - t0;
    *plan = *own;
    return CLI_OK;
}

static void human(size_t b, char *buf, size_t n)
{
    if (b >= ((size_t)1 << 20))
        snprintf(buf, n, "%.1f MiB", (double)b / 1048576.0);
    else if (b >= 1024)
        snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else
        snprintf(buf, n, "%zu B", b);
}

/* The plan of a graph with symbolic input dims, as a session makes it:
 * prepared and optimised once with the dims symbolic, then partitioned and
 * built with them symbolic (compile option symbolic_plan). */
static int symbolic_plan(const cli_opts *o, cli_model *m, cge_plan **out, double *ms,
                         const char *sym)
{
    char dis[1024];
    cge_compile_options co = cli_compile_options(o, dis, sizeof dis);
    co.allow_incomplete = true;
    double t0 = cli_now_ms();
    cge_plan *prep = NULL, *p = NULL;
    if (cge_compile(m->graph, NULL, 0, &co, &prep))
        return cli_fail_last("compile", NULL);
    co.symbolic_plan = true;
    cge_status st = cge_compile(cge_plan_graph(prep), NULL, 0, &co, &p);
    cge_plan_destroy(prep);
    if (!st && !cge_plan_is_symbolic(p)) {
        cge_plan_destroy(p);
        return cli_fail("compile",
                        "[io] %s: the inputs keep dims that are not sizes (%s), and shapes in "
                        "the graph depend on values computed at run time (or control flow), "
                        "which a shape program does not follow: give every dim a size "
                        "(--input-shape NAME:D0,D1,...; one .cgm per shape), or run the .onnx "
                        "itself", o->model, sym);
    }
    if (st)
        return cli_fail_last("compile", NULL);
    *ms = cli_now_ms() - t0;
    *out = p;
    return CLI_OK;
}

int cmd_compile(int argc, char **argv)
{
    cli_opts o;
    bool done;
    int rc = cli_parse("compile", argc, argv,
                       "o,input-shape,opt-level,disable-pass,custom-op-lib,dump,streams,precision,"
                       "kv-cache-max-len",
                       compile_help, &o, &done);
    if (rc || done) {
        opts_free(&o);
        return rc;
    }
    if (!o.out) {
        opts_free(&o);
        return cli_usage("compile", "no output file: give -o MODEL.cgm");
    }
    cli_model m;
    rc = cli_open("compile", &o, &m);
    if (!rc && m.is_cgm)
        rc = cli_usage("compile", "'%s' is already a compiled model (.cgm); give an .onnx",
                       o.model);
    cge_plan *p = NULL;
    const cge_plan *cp = NULL;
    double ms = 0;
    /* Inputs with symbolic dims keep them: the .cgm holds the symbolic plan
     * and its shape program (format 2), which serve every size, as a
     * session does with the .onnx. */
    char sym[1024] = "";
    if (!rc)
        cli_symbolic_inputs(m.graph, sym, sizeof sym);
    if (!rc && sym[0])
        rc = symbolic_plan(&o, &m, &p, &ms, sym);
    else if (!rc)
        rc = get_plan("compile", &o, &m, &p, &cp, &ms);
    if (!rc) {
        /* Packed weights too (format 3), unless $CGE_CGM_PACKED=0: a load on
         * a machine like this one maps them instead of packing. */
        const char *pk = getenv("CGE_CGM_PACKED");
        cge_model_save_options so = {.op_libraries = o.libs, .num_op_libraries = o.num_libs,
                                     .opt_level = cge_plan_get_stats(p)->opt_level,
                                     .pack_weights = !(pk && !strcmp(pk, "0"))};
        if (cge_model_save(p, o.out, &so))
            rc = cli_fail_last("compile", NULL);
    }
    if (!rc) {
        const cge_plan_stats *st = cge_plan_get_stats(p);
        char a[32], w[32];
        human(cge_plan_arena_bytes(p), a, sizeof a);
        if (cge_plan_is_symbolic(p))
            snprintf(a, sizeof a, "per size");
        human(cge_plan_constant_bytes(p), w, sizeof w);
        printf("compiled %s -> %s: %d steps from %d nodes, arena %s, weights %s, %d stream(s); "
               "import %.1f ms, compile %.1f ms\n",
               o.model, o.out, (int)cge_plan_num_steps(p), (int)st->nodes_in, a, w,
               (int)cge_plan_num_streams(p), m.open_ms, ms);
    }
    cge_plan_destroy(p);
    cli_close(&m);
    opts_free(&o);
    return rc;
}

/* ---- inspect ------------------------------------------------------------------ */

typedef struct count {
    const char *key;
    int n;
} count;

static void bump(count *c, int *n, const char *key)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(c[i].key, key)) {
            c[i].n++;
            return;
        }
    c[(*n)++] = (count){key, 1};
}

static void io_list(FILE *f, const cge_plan *p, bool inputs, bool json)
{
    const cge_graph *g = cge_plan_graph(p);
    int32_t n = inputs ? cge_graph_num_inputs(g) : cge_graph_num_outputs(g);
    char sh[CGE_SHAPE_STR_MAX];
    for (int32_t i = 0; i < n; i++) {
        int32_t v = inputs ? cge_plan_input_value(p, i) : cge_plan_output_value(p, i);
        const cge_plan_value *pv = &cge_plan_values(p)[v];
        if (json) {
            fprintf(f, "%s{\"name\": ", i ? ", " : "");
            cli_json_str(f, pv->name);
            fprintf(f, ", \"dtype\": \"%s\", \"shape\": [", cge_dtype_name(pv->dtype));
            for (int32_t k = 0; k < pv->shape.rank; k++)
                fprintf(f, "%s%lld", k ? ", " : "", (long long)pv->shape.dims[k]);
            fprintf(f, "]}");
        } else {
            fprintf(f, "  %-24s %-8s %s\n", pv->name, cge_dtype_name(pv->dtype),
                    cge_graph_shape_str(g, &pv->shape, sh, sizeof sh));
        }
    }
}

int cmd_inspect(int argc, char **argv)
{
    cli_opts o;
    bool done;
    int rc = cli_parse("inspect", argc, argv,
                       "json,verify,input-shape,opt-level,disable-pass,custom-op-lib,streams,precision",
                       inspect_help, &o, &done);
    if (rc || done) {
        opts_free(&o);
        return rc;
    }
    cli_model m;
    rc = cli_open("inspect", &o, &m);
    cge_plan *own = NULL;
    const cge_plan *p = NULL;
    double compile_ms = 0;
    if (!rc)
        rc = get_plan("inspect", &o, &m, &own, &p, &compile_ms);
    if (rc) {
        cli_close(&m);
        opts_free(&o);
        return rc;
    }
    int32_t ns = cge_plan_num_steps(p);
    count *ops = calloc((size_t)ns + 1, sizeof *ops), *engines = calloc((size_t)ns + 1, sizeof *engines);
    char **keys = calloc((size_t)ns + 1, sizeof *keys);
    int nops = 0, neng = 0;
    for (int32_t t = 0; t < ns; t++) {
        const cge_plan_step *s = &cge_plan_steps(p)[t];
        const char *dom = cge_node_domain(s->node);
        size_t len = strlen(dom) + strlen(cge_node_op_type(s->node)) + 2;
        keys[t] = malloc(len);
        snprintf(keys[t], len, "%s%s%s", dom, dom[0] ? "." : "", cge_node_op_type(s->node));
        bump(ops, &nops, keys[t]);
        bump(engines, &neng, s->engine);
    }
    const cge_plan_stats *st = cge_plan_get_stats(p);
    cge_model_info info = {0};
    if (m.is_cgm)
        cge_model_get_info(m.model, &info);
    FILE *f = stdout;
    if (o.json) {
        fprintf(f, "{\"model\": ");
        cli_json_str(f, o.model);
        fprintf(f, ", \"format\": \"%s\", \"graph\": ", m.is_cgm ? "cgm" : "onnx");
        cli_json_str(f, cge_graph_name(cge_plan_graph(p)));
        fprintf(f, ", \"inputs\": [");
        io_list(f, p, true, true);
        fprintf(f, "], \"outputs\": [");
        io_list(f, p, false, true);
        fprintf(f, "], \"nodes\": %d, \"nodes_in\": %d, \"ops\": {", (int)ns, (int)st->nodes_in);
        for (int i = 0; i < nops; i++) {
            fprintf(f, "%s", i ? ", " : "");
            cli_json_str(f, ops[i].key);
            fprintf(f, ": %d", ops[i].n);
        }
        fprintf(f, "}, \"engines\": {");
        for (int i = 0; i < neng; i++) {
            fprintf(f, "%s", i ? ", " : "");
            cli_json_str(f, engines[i].key);
            fprintf(f, ": %d", engines[i].n);
        }
        fprintf(f, "}, \"subgraphs\": %d, \"conversions\": %d, \"streams\": %d, \"events\": %d, "
                   "\"weight_bytes\": %zu, \"arena_bytes\": %zu, \"lower_bound_bytes\": %zu, "
                   "\"naive_bytes\": %zu",
                (int)st->num_subgraphs, (int)st->num_conversions, (int)cge_plan_num_streams(p),
                (int)cge_plan_num_events(p), cge_plan_constant_bytes(p), cge_plan_arena_bytes(p),
                st->lower_bound_bytes, st->naive_bytes);
        if (m.is_cgm) {
            char req[256], on[256];
            fprintf(f, ", \"format_version\": %u, \"engine_version\": \"%u.%u.%u\", "
                       "\"file_bytes\": %llu, \"opt_level\": %d, \"cpu_required\": \"%s\", "
                       "\"cpu_compiled_on\": \"%s\", \"load_ms\": %.3f, \"op_libraries\": [",
                    info.format_version, info.engine_version >> 16,
                    info.engine_version >> 8 & 0xff, info.engine_version & 0xff,
                    (unsigned long long)info.file_bytes, info.opt_level ? info.opt_level - 1 : -1,
                    cge_cpu_features_str(info.cpu_required, req, sizeof req),
                    cge_cpu_features_str(info.cpu_compiled_on, on, sizeof on), info.load_ms);
            const char *ln, *lp;
            for (int32_t i = 0; cge_model_op_library(m.model, i, &ln, &lp); i++) {
                fprintf(f, "%s{\"name\": ", i ? ", " : "");
                cli_json_str(f, ln);
                fprintf(f, ", \"path\": ");
                cli_json_str(f, lp);
                fprintf(f, "}");
            }
            fprintf(f, "]");
        } else {
            fprintf(f, ", \"compile_ms\": %.3f, \"import_ms\": %.3f", compile_ms, m.open_ms);
        }
        fprintf(f, "}\n");
    } else {
        char a[32], w[32], lb[32], nv[32];
        human(cge_plan_arena_bytes(p), a, sizeof a);
        if (cge_plan_is_symbolic(p))
            snprintf(a, sizeof a, "per size");
        human(cge_plan_constant_bytes(p), w, sizeof w);
        human(st->lower_bound_bytes, lb, sizeof lb);
        human(st->naive_bytes, nv, sizeof nv);
        fprintf(f, "model %s (%s, graph '%s')\n", o.model, m.is_cgm ? "compiled .cgm" : "ONNX",
                cge_graph_name(cge_plan_graph(p)));
        if (m.is_cgm) {
            char req[256];
            fprintf(f, "format %u, cge %u.%u.%u, %llu bytes, needs CPU %s, loaded in %.2f ms\n",
                    info.format_version, info.engine_version >> 16,
                    info.engine_version >> 8 & 0xff, info.engine_version & 0xff,
                    (unsigned long long)info.file_bytes,
                    cge_cpu_features_str(info.cpu_required, req, sizeof req), info.load_ms);
            const char *ln, *lp;
            for (int32_t i = 0; cge_model_op_library(m.model, i, &ln, &lp); i++)
                fprintf(f, "custom operator library '%s'%s%s\n", ln, lp[0] ? " from " : "", lp);
        } else {
            fprintf(f, "imported in %.1f ms, compiled in %.1f ms\n", m.open_ms, compile_ms);
        }
        fprintf(f, "inputs:\n");
        io_list(f, p, true, false);
        fprintf(f, "outputs:\n");
        io_list(f, p, false, false);
        fprintf(f, "nodes: %d steps (from %d nodes)\nops:\n", (int)ns, (int)st->nodes_in);
        for (int i = 0; i < nops; i++)
            fprintf(f, "  %-32s %d\n", ops[i].key, ops[i].n);
        fprintf(f, "engines:");
        for (int i = 0; i < neng; i++)
            fprintf(f, " %s (%d steps)", engines[i].key, engines[i].n);
        fprintf(f, "; %d subgraph(s), %d conversion(s)\n", (int)st->num_subgraphs,
                (int)st->num_conversions);
        fprintf(f, "streams: %d, events: %d\n", (int)cge_plan_num_streams(p),
                (int)cge_plan_num_events(p));
        fprintf(f, "weights: %s (%zu bytes)\n", w, cge_plan_constant_bytes(p));
        fprintf(f, "arena: %s (%zu bytes); lower bound %s, naive %s\n", a,
                cge_plan_arena_bytes(p), lb, nv);
    }
    for (int32_t t = 0; t < ns; t++)
        free(keys[t]);
    free(keys);
    free(ops);
    free(engines);
    cge_plan_destroy(own);
    cli_close(&m);
    opts_free(&o);
    return CLI_OK;
}

/* ---- dot --------------------------------------------------------------------- */

static int write_dot(const char *path, const cge_graph *g)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return cli_fail("dot", "[io] %s: cannot write: %s", path, strerror(errno));
    cge_status st = cge_graph_write_dot(g, f);
    if (fclose(f) && !st)
        return cli_fail("dot", "[io] %s: write failed: %s", path, strerror(errno));
    return st ? cli_fail_last("dot", NULL) : CLI_OK;
}

static int copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    int rc = CLI_OK;
    if (!a || !b) {
        rc = cli_fail("dot", "[io] %s: cannot %s: %s", a ? to : from, a ? "write" : "read",
                      strerror(errno));
    } else {
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, a)) > 0)
            if (fwrite(buf, 1, n, b) != n)
                rc = cli_fail("dot", "[io] %s: write failed", to);
    }
    if (a)
        fclose(a);
    if (b && fclose(b) && !rc)
        rc = cli_fail("dot", "[io] %s: write failed", to);
    return rc;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* The graph after pass `after`: compile with dumps into a temporary folder
 * and take the last dump of that pass. */
static int dot_after(const cli_opts *o, cli_model *m)
{
    const char *stage = NULL, *pn;
    for (int32_t k = 0; cge_compiler_pass_info(k, &stage, &pn, NULL); k++)
        if (!strcmp(pn, o->after))
            break;
    if (!strcmp(o->after, "import"))
        return write_dot(o->out, m->graph);
    char tmpl[] = "/tmp/cge_dot_XXXXXX";
    if (!mkdtemp(tmpl))
        return cli_fail("dot", "[io] cannot make a temporary folder: %s", strerror(errno));
    cli_opts oo = *o;
    oo.dump_dir = tmpl;
    char dis[1024];
    cge_compile_options co = cli_compile_options(&oo, dis, sizeof dis);
    cge_plan *p = NULL;
    int rc = CLI_OK;
    if (cge_compile(m->graph, NULL, 0, &co, &p))
        rc = cli_fail_last("dot", NULL);
    char found[4096] = "";
    DIR *d = rc ? NULL : opendir(tmpl);
    struct dirent *e;
    char suffix[128];
    snprintf(suffix, sizeof suffix, "_%s.dot", o->after);
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name), k = strlen(suffix);
        /* NN_<stage>_<pass>.dot; names sort by NN, keep the last. */
        if (n > k && !strcmp(e->d_name + n - k, suffix) && strcmp(e->d_name, found) > 0)
            snprintf(found, sizeof found, "%s", e->d_name);
    }
    if (d)
        closedir(d);
    if (!rc && !found[0] && stage && !strcmp(stage, "build")) {
        /* Build passes schedule and place; the graph is the final one. */
        rc = write_dot(o->out, cge_plan_graph(p));
    } else if (!rc && !found[0]) {
        rc = cli_fail("dot", "[graph] pass '%s' did not run at this optimisation level (or was "
                             "disabled)", o->after);
    } else if (!rc) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", tmpl, found);
        rc = copy_file(path, o->out);
    }
    cge_plan_destroy(p);
    remove_dir(tmpl);
    return rc;
}

int cmd_dot(int argc, char **argv)
{
    cli_opts o;
    bool done;
    int rc = cli_parse("dot", argc, argv,
                       "o,after,input-shape,opt-level,disable-pass,custom-op-lib,streams,precision",
                       dot_help, &o, &done);
    if (rc || done) {
        opts_free(&o);
        return rc;
    }
    if (!o.out) {
        opts_free(&o);
        return cli_usage("dot", "no output file: give -o FILE.dot");
    }
    if (o.after && strcmp(o.after, "import")) {
        bool known = false;
        const char *pn;
        for (int32_t k = 0; cge_compiler_pass_info(k, NULL, &pn, NULL); k++)
            known |= !strcmp(pn, o.after);
        if (!known) {
            char list[1024];
            size_t n = 0;
            for (int32_t k = 0; cge_compiler_pass_info(k, NULL, &pn, NULL) && n < sizeof list; k++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", pn);
            opts_free(&o);
            return cli_usage("dot", "--after '%s': no such pass (passes: import, %s)", o.after,
                             list);
        }
    }
    cli_model m;
    rc = cli_open("dot", &o, &m);
    if (!rc && o.after && m.is_cgm)
        rc = cli_usage("dot", "--after needs an .onnx model: a .cgm holds only the compiled "
                              "graph");
    if (!rc && o.after) {
        rc = dot_after(&o, &m);
    } else if (!rc) {
        cge_plan *own = NULL;
        const cge_plan *p = NULL;
        rc = get_plan("dot", &o, &m, &own, &p, NULL);
        if (!rc)
            rc = write_dot(o.out, cge_plan_graph(p));
        cge_plan_destroy(own);
    }
    if (!rc)
        printf("wrote %s\n", o.out);
    cli_close(&m);
    opts_free(&o);
    return rc;
}
