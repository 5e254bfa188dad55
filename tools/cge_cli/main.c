/* `cge`: the command-line tool's entry, help, option parsing and what the
 * subcommands share: opening .onnx/.cgm models, sessions, inputs (from .npy
 * or random with a fixed seed) and output buffers. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "cli.h"

double cli_now_ms(void) { return cge_profile_clock_ms(); }

int cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cge %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_FAIL;
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cge %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n(see 'cge %s --help')\n", cmd);
    va_end(ap);
    return CLI_USAGE;
}

int cli_fail_last(const char *cmd, const char *context)
{
    const char *e = cge_last_error();
    if (context)
        return cli_fail(cmd, "%s: %s", context, e[0] ? e : "failed");
    return cli_fail(cmd, "%s", e[0] ? e : "failed");
}

void cli_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* ---- options ----------------------------------------------------------------- */

static bool allowed_opt(const char *allowed, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = allowed; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, name, n))
            return true;
        p += len + (e ? 1 : 0);
    }
    return false;
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!s[0] || *end || errno || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* "name:d0,d1,...": each d a size, or a name (a symbolic dim: "ids:1,batch"). */
static int parse_shape(const char *cmd, const char *arg, cli_opts *o)
{
    const char *colon = strrchr(arg, ':');
    if (!colon || colon == arg)
        return cli_usage(cmd, "--input-shape '%s': want NAME:D0,D1,... (e.g. input:1,3,224,224)",
                         arg);
    if (o->num_shapes == CLI_MAX_LIST)
        return cli_usage(cmd, "too many --input-shape options");
    int k = o->num_shapes;
    cge_shape s = {0};
    const char *p = colon + 1;
    if (*p) {
        for (;;) {
            const char *end;
            if (s.rank == CGE_MAX_RANK)
                return cli_usage(cmd, "--input-shape '%s': at most %d dimensions", arg,
                                 CGE_MAX_RANK);
            if (is_ident_start(*p)) {
                end = p;
                while (is_ident_char(*end))
                    end++;
                o->shape_syms[k][s.rank] = strndup(p, (size_t)(end - p));
                o->shape_symbolic[k] = true;
                s.dims[s.rank++] = CGE_DIM_DYNAMIC;
            } else {
                char *e;
                errno = 0;
                long long d = strtoll(p, &e, 10);
                end = e;
                if (end == p || d < 0 || errno)
                    return cli_usage(cmd, "--input-shape '%s': each dimension is an integer >= 0 "
                                          "or a name (a symbolic dim, e.g. ids:1,batch)", arg);
                s.dims[s.rank++] = d;
            }
            if (*end == '\0')
                break;
            if (*end != ',')
                return cli_usage(cmd, "--input-shape '%s': separate dimensions with ','", arg);
            p = end + 1;
        }
    }
    char *name = strndup(arg, (size_t)(colon - arg));
    o->shape_names[k] = name;
    o->shapes[k] = (cge_onnx_input_shape){.name = name, .shape = s};
    o->num_shapes++;
    return CLI_OK;
}

void cli_opts_free(cli_opts *o)
{
    for (int i = 0; i < CLI_MAX_LIST; i++) {
        if (i < o->num_shapes)
            free(o->shape_names[i]);
        for (int r = 0; r < CGE_MAX_RANK; r++) {
            free(o->shape_syms[i][r]);
            o->shape_syms[i][r] = NULL;
        }
    }
    o->num_shapes = 0;
}

static int add_list(const char *cmd, const char *opt, const char **list, int *n, const char *v)
{
    if (*n == CLI_MAX_LIST)
        return cli_usage(cmd, "too many --%s options", opt);
    list[(*n)++] = v;
    return CLI_OK;
}

int cli_parse(const char *cmd, int argc, char **argv, const char *allowed, const char *help,
              cli_opts *o, bool *done)
{
    memset(o, 0, sizeof *o);
    o->opt_level = -1;
    o->iterations = o->warmup = -1;
    *done = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            *done = true;
            return CLI_OK;
        }
        if (a[0] != '-' || !a[1]) {
            if (o->model)
                return cli_usage(cmd, "unexpected argument '%s' (one MODEL only)", a);
            o->model = a;
            continue;
        }
        char name[64];
        const char *val = NULL;
        if (!strcmp(a, "-o")) {
            snprintf(name, sizeof name, "o");
        } else if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            if (len >= sizeof name)
                return cli_usage(cmd, "unknown option '%s'", a);
            memcpy(name, a + 2, len);
            name[len] = '\0';
            if (eq)
                val = eq + 1;
        } else {
            return cli_usage(cmd, "unknown option '%s'", a);
        }
        if (!allowed_opt(allowed, name))
            return cli_usage(cmd, "unknown option '%s'", a);
        bool flag = !strcmp(name, "json") || !strcmp(name, "verify") ||
                    !strcmp(name, "compare-precision");
        if (flag) {
            if (val)
                return cli_usage(cmd, "--%s takes no value", name);
            if (!strcmp(name, "json"))
                o->json = true;
            else if (!strcmp(name, "verify"))
                o->verify = true;
            else
                o->compare_precision = true;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc)
                return cli_usage(cmd, "%s needs a value", a);
            val = argv[++i];
        }
        long n;
        int rc = CLI_OK;
        if (!strcmp(name, "o") || !strcmp(name, "output")) {
            o->out = val;
        } else if (!strcmp(name, "input-shape")) {
            rc = parse_shape(cmd, val, o);
        } else if (!strcmp(name, "shapes")) {
            rc = add_list(cmd, name, o->sweeps, &o->num_sweeps, val);
        } else if (!strcmp(name, "opt-level")) {
            if (!parse_long(val, 0, 3, &n))
                return cli_usage(cmd, "--opt-level '%s': want 0, 1, 2 or 3", val);
            o->opt_level = (int)n;
        } else if (!strcmp(name, "kv-cache-max-len")) {
            if (!parse_long(val, 1, 1L << 30, &n))
                return cli_usage(cmd, "--kv-cache-max-len '%s': want a positive length", val);
            o->kv_cache_max_len = n;
        } else if (!strcmp(name, "precision")) {
            int p = cge_precision_from_name(val);
            if (p < 0)
                return cli_usage(cmd, "--precision '%s': want fp32 or bf16", val);
            o->precision = (cge_precision)p;
        } else if (!strcmp(name, "disable-pass")) {
            bool known = false;
            const char *pn;
            for (int32_t k = 0; cge_compiler_pass_info(k, NULL, &pn, NULL); k++)
                known |= !strcmp(pn, val);
            if (!known)
                return cli_usage(cmd, "--disable-pass '%s': no such pass (cge inspect --help "
                                      "lists them)", val);
            rc = add_list(cmd, name, o->disable, &o->num_disable, val);
        } else if (!strcmp(name, "custom-op-lib")) {
            rc = add_list(cmd, name, o->libs, &o->num_libs, val);
        } else if (!strcmp(name, "dump")) {
            o->dump_dir = val;
        } else if (!strcmp(name, "input")) {
            const char *eq = strchr(val, '=');
            if (!eq || eq == val || !eq[1])
                return cli_usage(cmd, "--input '%s': want NAME=FILE.npy", val);
            rc = add_list(cmd, name, o->inputs, &o->num_inputs, val);
        } else if (!strcmp(name, "output-dir")) {
            o->output_dir = val;
        } else if (!strcmp(name, "mode")) {
            int m = cge_run_mode_from_name(val);
            if (m < 0)
                return cli_usage(cmd, "--mode '%s': want eager, plan or replay", val);
            o->mode = (cge_run_mode)m;
        } else if (!strcmp(name, "threads")) {
            if (!parse_long(val, 1, 4096, &n))
                return cli_usage(cmd, "--threads '%s': want a positive number", val);
            o->threads = (int)n;
        } else if (!strcmp(name, "streams")) {
            if (!parse_long(val, 1, 16, &n))
                return cli_usage(cmd, "--streams '%s': want 1 to 16", val);
            o->streams = (int)n;
        } else if (!strcmp(name, "iterations")) {
            if (!parse_long(val, 1, 100000000, &n))
                return cli_usage(cmd, "--iterations '%s': want a positive number", val);
            o->iterations = n;
        } else if (!strcmp(name, "warmup")) {
            if (!parse_long(val, 0, 100000000, &n))
                return cli_usage(cmd, "--warmup '%s': want a number >= 0", val);
            o->warmup = n;
        } else if (!strcmp(name, "duration")) {
            char *end;
            double d = strtod(val, &end);
            if (!val[0] || *end || !(d > 0) || d > 86400)
                return cli_usage(cmd, "--duration '%s': want seconds > 0", val);
            o->duration_s = d;
        } else if (!strcmp(name, "after")) {
            o->after = val;
        } else if (!strcmp(name, "tp")) {
            if (!parse_long(val, 1, 1024, &n))
                return cli_usage(cmd, "--tp '%s': want a positive number (run under mpirun -np N)", val);
            o->tp = (int)n;
        } else if (!strcmp(name, "pp")) {
            if (!parse_long(val, 1, 1024, &n))
                return cli_usage(cmd, "--pp '%s': want a positive number (run under mpirun -np N)", val);
            o->pp = (int)n;
        } else if (!strcmp(name, "micro-batches")) {
            if (!parse_long(val, 1, 16, &n))
                return cli_usage(cmd, "--micro-batches '%s': want 1 to 16 (with --pp; the batch "
                                 "must divide by it)", val);
            o->micro_batches = (int)n;
        } else if (!strcmp(name, "seed")) {
            if (!parse_long(val, 0, UINT32_MAX, &n))
                return cli_usage(cmd, "--seed '%s': want a number >= 0", val);
            o->seed = (unsigned)n;
        } else {
            return cli_usage(cmd, "unknown option '%s'", a);
        }
        if (rc)
            return rc;
    }
    if (!o->model)
        return cli_usage(cmd, "no MODEL given");
    return CLI_OK;
}

/* ---- models and sessions --------------------------------------------------------- */

static bool is_cgm_file(const char *path)
{
    const char *why = NULL;
    FILE *f = cge__fopen_regular(path, NULL, &why);
    char magic[8] = {0};
    bool yes = f && fread(magic, 1, 8, f) == 8 && !memcmp(magic, "CGEMODEL", 8);
    if (f)
        fclose(f);
    size_t n = strlen(path);
    return yes || (!f && n > 4 && !strcmp(path + n - 4, ".cgm"));
}

int cli_open(const char *cmd, const cli_opts *o, cli_model *m)
{
    memset(m, 0, sizeof *m);
    for (int i = 0; i < o->num_libs; i++)
        if (cge_load_op_library(o->libs[i]))
            return cli_fail_last(cmd, NULL);
    m->is_cgm = is_cgm_file(o->model);
    double t0 = cli_now_ms();
    if (m->is_cgm) {
        cge_model_load_options lo = {.weights_check = o->verify ? CGE_WEIGHTS_CHECK_VERIFY
                                                                : CGE_WEIGHTS_CHECK_DEFAULT};
        if (cge_model_load(o->model, &lo, &m->model))
            return cli_fail_last(cmd, NULL);
        /* A .cgm with symbolic dims (format 2) takes sizes for them; one
         * compiled for fixed shapes has none to set. */
        if (o->num_shapes && !cge_plan_is_symbolic(cge_model_plan(m->model))) {
            cge_model_destroy(m->model);
            m->model = NULL;
            return cli_usage(cmd, "--input-shape applies to .onnx models and .cgm models with "
                                  "symbolic dims; '%s' was compiled for fixed input shapes",
                             o->model);
        }
    } else {
        /* Sizes go to the importer; shapes with named dims are set after the
         * import, where the names become the graph's symbols (the model's
         * own dim_param of that name, or a new one). */
        cge_onnx_input_shape fixed[CLI_MAX_LIST];
        int nf = 0;
        for (int i = 0; i < o->num_shapes; i++)
            if (!o->shape_symbolic[i])
                fixed[nf++] = o->shapes[i];
        cge_onnx_options oo = {.input_shapes = fixed, .num_input_shapes = nf};
        if (cge_onnx_import_file(o->model, &oo, &m->graph))
            return cli_fail_last(cmd, NULL);
        for (int i = 0; i < o->num_shapes; i++) {
            if (!o->shape_symbolic[i])
                continue;
            const char *name = o->shapes[i].name;
            cge_tensor_desc d;
            bool is_input = false;
            for (int32_t k = 0; k < cge_graph_num_inputs(m->graph); k++)
                is_input |= !strcmp(cge_graph_input(m->graph, k), name);
            if (!is_input || cge_graph_get_desc(m->graph, name, &d)) {
                cge_clear_error();
                cli_close(m);
                return cli_fail(cmd, "[io] %s: --input-shape names '%s', which is not an input "
                                     "of the model", o->model, name);
            }
            cge_shape sh = o->shapes[i].shape;
            for (int32_t r = 0; r < sh.rank; r++)
                if (o->shape_syms[i][r])
                    sh.dims[r] = cge_graph_dim_symbol(m->graph, o->shape_syms[i][r]);
            if (cge_graph_set_desc(m->graph, name, d.dtype, &sh)) {
                int rc = cli_fail_last(cmd, NULL);
                cli_close(m);
                return rc;
            }
        }
    }
    if (o->kv_cache_max_len > 0 && m->model) {
        cli_close(m);
        return cli_usage(cmd, "--kv-cache-max-len applies to .onnx models ('%s' is compiled)",
                         o->model);
    }
    /* The static cache form changes the interface: before any session or
     * compile reads it. */
    if (o->kv_cache_max_len > 0 && cge_graph_kv_cache_static(m->graph, o->kv_cache_max_len)) {
        int rc = cli_fail_last(cmd, NULL);
        cli_close(m);
        return rc;
    }
    m->open_ms = cli_now_ms() - t0;
    return CLI_OK;
}

void cli_symbolic_inputs(const cge_graph *g, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int32_t i = 0; g && i < cge_graph_num_inputs(g); i++) {
        cge_tensor_desc d;
        const char *name = cge_graph_input(g, i);
        if (cge_graph_get_desc(g, name, &d) || cge_shape_is_static(&d.shape))
            continue;
        char sh[CGE_SHAPE_STR_MAX];
        cge_graph_shape_str(g, &d.shape, sh, sizeof sh);
        if (k < size)
            k += (size_t)snprintf(buf + k, size - k, "%s'%s' %s", k ? ", " : "", name, sh);
    }
}

void cli_close(cli_model *m)
{
    cge_graph_destroy(m->graph);
    cge_model_destroy(m->model);
    memset(m, 0, sizeof *m);
}

cge_compile_options cli_compile_options(const cli_opts *o, char *buf, size_t size)
{
    cge_compile_options c = {.opt_level = o->opt_level < 0 ? CGE_OPT_DEFAULT
                                                           : (cge_opt_level)(o->opt_level + 1),
                             .dump_dir = o->dump_dir, .collect_stats = true,
                             .num_streams = o->streams, .precision = o->precision};
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < o->num_disable && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? "," : "", o->disable[i]);
    c.disable = k ? buf : NULL;
    return c;
}

int cli_session(const char *cmd, const cli_opts *o, cli_model *m, cge_session **out,
                double *prepare_ms)
{
    cge_session_options so = {.num_threads = o->threads,
                              .opt_level = o->opt_level < 0 ? CGE_OPT_DEFAULT
                                                            : (cge_opt_level)(o->opt_level + 1),
                              .num_streams = o->streams, .precision = o->precision};
    cli_dist_session_options(o, &so);
    cge_session *s = NULL;
    if (cge_session_create(&so, &s))
        return cli_fail_last(cmd, NULL);
    double t0 = cli_now_ms();
    cge_status st = m->is_cgm ? cge_session_add_model(s, 1, m->model)
                              : cge_session_add_graph(s, 1, m->graph);
    if (!st)
        st = cge_session_compile_graph(s, 1);
    if (prepare_ms)
        *prepare_ms = cli_now_ms() - t0;
    if (st) {
        int rc = cli_fail_last(cmd, NULL);
        cge_session_destroy(s);
        return rc;
    }
    *out = s;
    return CLI_OK;
}

void cli_tensors_free(cli_tensors *t)
{
    for (int i = 0; i < t->n; i++) {
        free(t->t[i].data);
        free(t->names[i]);
    }
    memset(t, 0, sizeof *t);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random values by dtype: floats in [-1, 1), integers in [0, 4) (small
 * enough to be valid indices and ids), booleans; strings are those
 * integers' text (static bytes: a string element points at them). */
static void fill_random(cge_tensor *t, uint64_t *rng)
{
    static const char *const texts[4] = {"0", "1", "2", "3"};
    size_t es = cge_dtype_size(t->dtype), n = es ? t->bytes / es : 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng_next(rng);
        double u = (double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        int64_t k = (int64_t)(r % 4);
        void *p = (char *)t->data + i * es;
        switch (t->dtype) {
        case CGE_F32: *(float *)p = (float)u; break;
        case CGE_F64: *(double *)p = u; break;
        case CGE_F16: *(uint16_t *)p = cge_f32_to_f16((float)u); break;
        case CGE_BF16: *(uint16_t *)p = cge_f32_to_bf16((float)u); break;
        case CGE_BOOL: *(uint8_t *)p = (uint8_t)(r & 1); break;
        case CGE_I8: case CGE_U8: *(uint8_t *)p = (uint8_t)k; break;
        case CGE_I16: case CGE_U16: *(uint16_t *)p = (uint16_t)k; break;
        case CGE_I32: case CGE_U32: *(uint32_t *)p = (uint32_t)k; break;
        case CGE_STRING: *(cge_string *)p = (cge_string){.data = texts[k], .size = 1}; break;
        default: *(uint64_t *)p = (uint64_t)k; break;
        }
    }
}

int cli_make_inputs(const char *cmd, const cli_opts *o, cge_session *s, cli_tensors *in)
{
    return cli_make_inputs_at(cmd, o, s, NULL, in);
}

int cli_make_inputs_at(const char *cmd, const cli_opts *o, cge_session *s,
                       const cge_shape *shapes, cli_tensors *in)
{
    memset(in, 0, sizeof *in);
    int32_t ni = 0, no = 0;
    if (cge_session_num_io(s, 1, &ni, &no))
        return cli_fail_last(cmd, NULL);
    if (ni > CLI_MAX_LIST)
        return cli_fail(cmd, "the model has %d inputs; this tool handles %d", ni, CLI_MAX_LIST);
    cge_tensor_desc d[CLI_MAX_LIST];
    char list[1024];
    size_t k = 0;
    list[0] = '\0';
    for (int32_t i = 0; i < ni; i++) {
        if (cge_session_input_desc(s, 1, i, &d[i]))
            return cli_fail_last(cmd, NULL);
        if (k < sizeof list)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s'%s'", i ? ", " : "", d[i].name);
    }
    /* Every --input names an input of the model. */
    int given[CLI_MAX_LIST];
    for (int j = 0; j < o->num_inputs; j++) {
        const char *eq = strchr(o->inputs[j], '=');
        size_t len = (size_t)(eq - o->inputs[j]);
        given[j] = -1;
        for (int32_t i = 0; i < ni; i++)
            if (strlen(d[i].name) == len && !strncmp(d[i].name, o->inputs[j], len))
                given[j] = i;
        if (given[j] < 0)
            return cli_usage(cmd, "--input '%s': the model has no input named '%.*s' (its "
                                  "inputs: %s)", o->inputs[j], (int)len, o->inputs[j], list);
        for (int q = 0; q < j; q++)
            if (given[q] == given[j])
                return cli_usage(cmd, "--input: '%s' is given twice", d[given[j]].name);
    }
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ ((uint64_t)o->seed * 0xBF58476D1CE4E5B9ull);
    if (!rng)
        rng = 1;
    in->n = ni;
    for (int32_t i = 0; i < ni; i++) {
        cge_tensor *t = &in->t[i];
        in->names[i] = strdup(d[i].name);
        int from = -1;
        for (int j = 0; j < o->num_inputs; j++)
            if (given[j] == i)
                from = j;
        if (from >= 0) {
            const char *path = strchr(o->inputs[from], '=') + 1;
            if (cli_npy_read(path, t))
                return cli_fail_last(cmd, NULL);
            /* bfloat16 arrives as its uint16 bits. */
            if (t->dtype == CGE_U16 && d[i].dtype == CGE_BF16)
                t->dtype = CGE_BF16;
        } else {
            cge_shape sh = shapes ? shapes[i] : d[i].shape;
            /* A symbolic .cgm's input: --input-shape gives its size. */
            for (int j = 0; !shapes && j < o->num_shapes; j++)
                if (!strcmp(o->shapes[j].name, d[i].name) && !o->shape_symbolic[j] &&
                    o->shapes[j].shape.rank == sh.rank)
                    sh = o->shapes[j].shape;
            for (int32_t r = 0; r < sh.rank; r++)
                if (sh.dims[r] < 0)
                    sh.dims[r] = 1;   /* dynamic dims of random inputs: 1 */
            *t = (cge_tensor){.dtype = d[i].dtype, .shape = sh};
            t->bytes = cge_tensor_nbytes(d[i].dtype, &sh);
            t->data = malloc(t->bytes + 1);
            if (!t->data)
                return cli_fail(cmd, "[io] out of memory for input '%s'", d[i].name);
            fill_random(t, &rng);
        }
        t->name = in->names[i];
    }
    return CLI_OK;
}

int cli_make_outputs(const char *cmd, cge_session *s, cli_tensors *out)
{
    memset(out, 0, sizeof *out);
    int32_t ni = 0, no = 0;
    if (cge_session_num_io(s, 1, &ni, &no))
        return cli_fail_last(cmd, NULL);
    if (no > CLI_MAX_LIST)
        return cli_fail(cmd, "the model has %d outputs; this tool handles %d", no, CLI_MAX_LIST);
    out->n = no;
    for (int32_t i = 0; i < no; i++) {
        cge_tensor_desc d;
        if (cge_session_output_desc(s, 1, i, &d))
            return cli_fail_last(cmd, NULL);
        out->names[i] = strdup(d.name);
        size_t nb = cge_shape_is_static(&d.shape) ? cge_tensor_nbytes(d.dtype, &d.shape) : 0;
        out->t[i] = (cge_tensor){.name = out->names[i], .data = malloc(nb + 1), .bytes = nb};
    }
    return CLI_OK;
}

cge_status cli_run_once(cge_session *s, cli_tensors *in, cli_tensors *out, const cge_run_options *ro)
{
    cge_status st = cge_session_run(s, 1, in->t, in->n, out->t, out->n, ro);
    if (st != CGE_ERR_INVALID_ARG || cge_last_error_layer() != CGE_LAYER_SESSION ||
        !strstr(cge_last_error(), "the buffer given has"))
        return st;
    /* Shapes known only after running: the session recorded them. */
    for (int i = 0; i < out->n; i++) {
        cge_tensor_desc d;
        if (cge_session_last_output_desc(s, 1, i, &d) || !cge_shape_is_static(&d.shape))
            return st;
        size_t nb = cge_tensor_nbytes(d.dtype, &d.shape);
        if (nb > out->t[i].bytes) {
            void *p = realloc(out->t[i].data, nb + 1);
            if (!p)
                return cge_error(CGE_LAYER_SESSION, CGE_ERR_NO_MEMORY, "out of memory");
            out->t[i].data = p;
            out->t[i].bytes = nb;
        }
    }
    return cge_session_run(s, 1, in->t, in->n, out->t, out->n, ro);
}

/* ---- entry ------------------------------------------------------------------------- */

static const char usage[] =
    "usage: cge <command> [options]\n"
    "\n"
    "commands:\n"
    "  compile MODEL.onnx -o MODEL.cgm   compile and write the offline model\n"
    "  run MODEL                         run once; print and save the outputs\n"
    "  bench MODEL                       load/compile time, latency percentiles, throughput\n"
    "  inspect MODEL [--json]            inputs, outputs, ops, engines, streams, memory\n"
    "  dot MODEL -o FILE.dot             the graph for Graphviz (after a named pass)\n"
    "  profile MODEL -o TRACE.json       Chrome trace: compile, dispatch, kernels, copies\n"
    "  op-check [--lib LIB.so] [--op OP] check operators' schema, meta and kernels agree\n"
    "  quantize MODEL.onnx -o OUT.onnx   QDQ int8 model (--calibrate DIR) or MatMulNBits\n"
    "\n"
    "MODEL is an ONNX file (.onnx) or a compiled model (.cgm). 'cge <command> --help'\n"
    "describes a command. Exit codes: 0 success, 1 failure, 2 usage error.\n";

/* oneDNN runs cge's float32 and int8 convolutions on libgomp's threads, and
 * libgomp reads its wait policy once, when it loads, before main. Left unset,
 * its workers spin for about 300000 polls after every oneDNN call, on the
 * cores the next (cge) kernels need: resnet18 at 2 threads on a busy 2-core
 * machine took 808 ms instead of 45 (issue 14, docs/runtime.md). So when
 * libgomp is in the process and the user set neither OMP_WAIT_POLICY nor
 * GOMP_SPINCOUNT, the tool sets GOMP_SPINCOUNT to CGE_OPENMP_SPINCOUNT and
 * executes itself again, once (the variable, now set, stops a second time).
 * A short spin, not a passive policy: a sleeping worker costs mobilenet_v2
 * 10-13% on a quiet machine, 30000 polls cost nothing there and stay within
 * a few percent of passive on a loaded one (docs/runtime.md). A user's own
 * setting always wins; if the exec fails the tool runs on as it is. */
#define CGE_OPENMP_SPINCOUNT "30000"
static void cli_openmp_policy(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return;
    if (!dlsym(RTLD_DEFAULT, "omp_get_max_threads"))
        return; /* no oneDNN/libgomp in this build: nothing spins */
    if (setenv("GOMP_SPINCOUNT", CGE_OPENMP_SPINCOUNT, 0) != 0)
        return;
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
    cli_openmp_policy(argv);
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    const char *c = argv[1];
    if (!strcmp(c, "-h") || !strcmp(c, "--help") || !strcmp(c, "help")) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (!strcmp(c, "--version")) {
        printf("cge %s (model format %d)\n", CGE_VERSION_STRING, CGE_MODEL_FORMAT_VERSION);
        return CLI_OK;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"compile", cmd_compile}, {"run", cmd_run},   {"bench", cmd_bench},
                {"inspect", cmd_inspect}, {"dot", cmd_dot},   {"profile", cmd_profile},
                {"op-check", cmd_opcheck}, {"quantize", cmd_quantize}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(c, cmds[i].name))
            return cmds[i].fn(argc - 2, argv + 2);
    fprintf(stderr, "cge: unknown command '%s'\n\n%s", c, usage);
    return CLI_USAGE;
}
