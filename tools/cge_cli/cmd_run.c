/* `cge run`, `cge bench` and `cge profile`: the commands that execute a
 * model in a session, fed from .npy files or seeded random inputs. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "cli.h"

static const char run_help[] =
    "usage: cge run MODEL [options]\n"
    "\n"
    "Run MODEL (.onnx or .cgm) once and print each output's dtype, shape and first\n"
    "values. Inputs not given are random with a fixed seed (floats in [-1, 1),\n"
    "integers in [0, 4), dynamic dimensions 1).\n"
    "\n"
    "  --input NAME=FILE.npy      an input from a .npy file (repeatable)\n"
    "  --output-dir DIR           write every output as DIR/<name>.npy\n"
    "  --mode eager|plan|replay   run mode (default: replay where possible)\n"
    "  --seed N                   seed of the random inputs (default 0)\n"
    "  --threads N                compute threads (default: all cores)\n"
    "  --tp N                     tensor-parallel over N ranks: mpirun -np N cge run\n"
    "                             ... --tp N (rank 0 prints; docs/distributed.md)\n"
    "  --pp N                     pipeline stages over N ranks (under mpirun)\n"
    "  --micro-batches M          with --pp: the batch (axis 0) split into M parts\n"
    "                             in flight through the stages (GPipe)\n"
    "  --input-shape NAME:D0,D1   (.onnx, symbolic .cgm) an input's shape; a dim may be a\n"
    "                             name (ids:1,batch: symbolic)\n"
    "  --precision fp32|bf16      bf16: float32 Conv/MatMul/Gemm in bfloat16 with\n"
    "                             float32 accumulation (AVX512-BF16 CPUs)\n"
    "  --opt-level 0-3, --streams N, --custom-op-lib LIB.so\n"
    "  --kv-cache-max-len N       (.onnx) a concat-form KV cache as the static form\n"
    "                             (N slots, input cache_position; docs/guide.md)\n"
    "\n"
    ".npy: every cge dtype; bfloat16 is read and written as '<u2' (its bits).\n";

static const char bench_help[] =
    "usage: cge bench MODEL [options]\n"
    "\n"
    "Load (or import and compile) MODEL, then time its runs: load/compile time,\n"
    "first run, min/p50/p90/p99/max latency, throughput, peak memory.\n"
    "\n"
    "  --iterations N             timed runs (default 100, or as many as\n"
    "                             --duration allows; 20 per size with --shapes)\n"
    "  --warmup N                 untimed runs first (default 10; 2 with --shapes)\n"
    "  --duration S               stop timing after S seconds (per size)\n"
    "  --mode eager|plan|replay   run mode (default: replay where possible)\n"
    "  --threads N                compute threads (default: all cores)\n"
    "  --tp N                     tensor-parallel over N ranks (under mpirun): each\n"
    "                             rank's latency on stderr, rank 0 the whole\n"
    "  --pp N                     pipeline stages over N ranks (under mpirun)\n"
    "  --micro-batches M          with --pp: the batch (axis 0) split into M parts\n"
    "                             in flight through the stages (GPipe)\n"
    "  --json                     one JSON object\n"
    "  --shapes SIZES             sweep input sizes in ONE session: per size, the\n"
    "                             first run (which compiles a new shape) and the\n"
    "                             steady latency (p50, p90). SIZES is either\n"
    "                               NAME:D0,D1,... [NAME2:...];NAME:...;...\n"
    "                             (';' between sizes, spaces between inputs; an\n"
    "                             input not given takes its symbolic dims from\n"
    "                             those that are), or\n"
    "                               SYMBOL=N1,N2,...   (the values of a symbolic\n"
    "                             dim, as 'cge inspect' names it: batch=1,2,4,8;\n"
    "                             several such options are zipped, a single value\n"
    "                             repeats; other symbolic dims are 1).\n"
    "                             Repeatable; sizes repeat as given (1,2,1 runs\n"
    "                             size 1 again: cached).\n"
    "  --input-shape NAME:D0,D1   (.onnx, symbolic .cgm) an input's shape; a dim may be a\n"
    "                             name (ids:1,batch: a symbol for --shapes)\n"
    "  --precision fp32|bf16      bf16: float32 Conv/MatMul/Gemm in bfloat16\n"
    "  --kv-cache-max-len N       (.onnx) a concat-form KV cache as the static form\n"
    "  --compare-precision        run the model in fp32 and in bf16 (alternating,\n"
    "                             --iterations each, default 20) on the same inputs:\n"
    "                             p50 latency of each, the speed-up, and per output\n"
    "                             the max and mean relative error of bf16 against\n"
    "                             fp32 (|bf16 - fp32| / max |fp32| of that output)\n"
    "  --input NAME=FILE.npy, --seed N, --opt-level 0-3,\n"
    "  --streams N, --custom-op-lib LIB.so\n";

static const char profile_help[] =
    "usage: cge profile MODEL -o TRACE.json [options]\n"
    "\n"
    "Run MODEL step by step and write a Chrome trace (Perfetto, chrome://tracing)\n"
    "with four tracks: compile (import/load, passes, kernel preparation), host\n"
    "dispatch (binding and enqueueing each step), kernel execution (each step until\n"
    "its stream is idle) and memory copies (inputs in, outputs out). Prints a\n"
    "summary per op type. Every step is synchronized before the next, so kernel\n"
    "times do not overlap (docs/cli.md). A model whose shapes follow computed\n"
    "values (NonZero: detectors) has no plan and runs node by node; each node is\n"
    "then a step.\n"
    "\n"
    "  -o FILE                    the trace to write (required)\n"
    "  --iterations N             profiled runs (default 10; one warm-up run first)\n"
    "  --input NAME=FILE.npy, --seed N, --threads N, --input-shape NAME:D0,D1,\n"
    "  --precision fp32|bf16, --opt-level 0-3, --disable-pass NAME, --streams N,\n"
    "  --custom-op-lib LIB.so\n";

static void opts_free(cli_opts *o) { cli_opts_free(o); }

static double value_at(const cge_tensor *t, size_t i)
{
    const char *p = (const char *)t->data + i * cge_dtype_size(t->dtype);
    switch (t->dtype) {
    case CGE_F32: return *(const float *)p;
    case CGE_F64: return *(const double *)p;
    case CGE_F16: return cge_f16_to_f32(*(const uint16_t *)p);
    case CGE_BF16: return cge_bf16_to_f32(*(const uint16_t *)p);
    case CGE_I8: return *(const int8_t *)p;
    case CGE_U8: case CGE_BOOL: return *(const uint8_t *)p;
    case CGE_I16: return *(const int16_t *)p;
    case CGE_U16: return *(const uint16_t *)p;
    case CGE_I32: return *(const int32_t *)p;
    case CGE_U32: return *(const uint32_t *)p;
    case CGE_I64: return (double)*(const int64_t *)p;
    case CGE_U64: return (double)*(const uint64_t *)p;
    default: return 0;
    }
}

static void print_output(const cge_tensor *t)
{
    char sh[CGE_SHAPE_STR_MAX];
    size_t n = (size_t)cge_shape_numel(&t->shape);
    printf("output '%s': %s %s", t->name, cge_dtype_name(t->dtype),
           cge_shape_str(&t->shape, sh, sizeof sh));
    if (n && t->dtype == CGE_STRING) {
        const cge_string *e = t->data;
        printf("\n  values:");
        for (size_t i = 0; i < n && i < 8; i++)
            printf(" \"%.*s\"", e[i].size > 40 ? 40 : (int)e[i].size, e[i].data ? e[i].data : "");
        printf("%s", n > 8 ? " ..." : "");
    } else if (n) {
        double lo = INFINITY, hi = -INFINITY, sum = 0;
        for (size_t i = 0; i < n; i++) {
            double v = value_at(t, i);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
            sum += v;
        }
        printf("  min %.6g max %.6g mean %.6g\n  values:", lo, hi, sum / (double)n);
        for (size_t i = 0; i < n && i < 8; i++)
            printf(" %.6g", value_at(t, i));
        printf("%s", n > 8 ? " ..." : "");
    }
    printf("\n");
}

/* A file name from an output name: letters, digits, '.', '-', '_' kept. */
static void safe_name(const char *name, char *buf, size_t size)
{
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < size; p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '-' || c == '_';
        buf[k++] = ok ? c : '_';
    }
    buf[k] = '\0';
    if (!k || buf[0] == '.')
        snprintf(buf, size, "output_%s", name[0] ? "x" : "");
}

/* Open, make a session, inputs and outputs: what run, bench and profile share. */
typedef struct prepared {
    cli_model m;
    cge_session *s;
    cli_tensors in, out;
    double prepare_ms;
} prepared;

static void prepared_free(prepared *p)
{
    cli_tensors_free(&p->in);
    cli_tensors_free(&p->out);
    cge_session_destroy(p->s);
    cli_close(&p->m);
}

static int prepare(const char *cmd, const cli_opts *o, prepared *p)
{
    memset(p, 0, sizeof *p);
    int rc = cli_open(cmd, o, &p->m);
    if (!rc)
        rc = cli_session(cmd, o, &p->m, &p->s, &p->prepare_ms);
    if (!rc)
        rc = cli_make_inputs(cmd, o, p->s, &p->in);
    if (!rc)
        rc = cli_make_outputs(cmd, p->s, &p->out);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    cli_opts o;
    bool done;
    int rc = cli_parse("run", argc, argv,
                       "input,output-dir,mode,seed,threads,input-shape,opt-level,streams,"
                       "custom-op-lib,verify,precision,tp,pp,micro-batches,kv-cache-max-len",
                       run_help, &o, &done);
    if (rc || done) {
        opts_free(&o);
        return rc;
    }
    prepared p;
    rc = prepare("run", &o, &p);
    if (!rc)
        cli_dist_quiet_others(p.s);
    if (!rc && o.output_dir && mkdir(o.output_dir, 0777) && errno != EEXIST)
        rc = cli_fail("run", "[io] %s: cannot make the folder: %s", o.output_dir, strerror(errno));
    double ms = 0;
    if (!rc) {
        cge_run_options ro = {.mode = o.mode};
        double t0 = cli_now_ms();
        if (cli_run_once(p.s, &p.in, &p.out, &ro))
            rc = cli_fail_last("run", NULL);
        ms = cli_now_ms() - t0;
    }
    if (!rc) {
        cge_run_mode used = CGE_RUN_DEFAULT;
        cge_session_last_run_mode(p.s, 1, &used);
        printf("%s: %s in %.2f ms (%s mode; %s %.1f ms, prepare %.1f ms)\n", o.model,
               p.m.is_cgm ? "compiled model ran" : "ran", ms, cge_run_mode_name(used),
               p.m.is_cgm ? "load" : "import", p.m.open_ms, p.prepare_ms);
        for (int i = 0; i < p.out.n; i++)
            print_output(&p.out.t[i]);
    }
    /* Names made safe for a file system can meet ("a/b" and "a_b"): refuse
     * rather than let one output overwrite another. */
    for (int i = 0; !rc && o.output_dir && i < p.out.n; i++)
        for (int j = 0; !rc && j < i; j++) {
            char a[256], b[256];
            safe_name(p.out.t[i].name, a, sizeof a);
            safe_name(p.out.t[j].name, b, sizeof b);
            if (!strcmp(a, b))
                rc = cli_fail("run", "outputs '%s' and '%s' would both be written to %s/%s.npy",
                              p.out.t[j].name, p.out.t[i].name, o.output_dir, a);
        }
    for (int i = 0; !rc && o.output_dir && i < p.out.n; i++) {
        char nm[256], path[4096];
        safe_name(p.out.t[i].name, nm, sizeof nm);
        snprintf(path, sizeof path, "%s/%s.npy", o.output_dir, nm);
        if (cli_npy_write(path, &p.out.t[i]))
            rc = cli_fail_last("run", NULL);
        else
            printf("wrote %s%s\n", path,
                   p.out.t[i].dtype == CGE_BF16 ? " (bfloat16 stored as uint16 bits)" : "");
    }
    prepared_free(&p);
    opts_free(&o);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *v, long n, double q)
{
    long k = (long)ceil(q * (double)n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* ---- bench --shapes: a sweep of input sizes in one session ----------------------- */

#define MAX_SWEEP 256

typedef struct sweep {
    int n;                                  /* sizes */
    int num_inputs;
    cge_tensor_desc decl[CLI_MAX_LIST];     /* declared (compiled) descriptors */
    cge_shape (*shapes)[CLI_MAX_LIST];      /* [n][num_inputs] */
} sweep;

static const char *sym_name(cge_session *s, int64_t d)
{
    const char *n = cge_dim_is_symbol(d) ? cge_session_dim_symbol_name(s, 1, d) : NULL;
    return n ? n : "";
}

/* The symbolic dims of the model's inputs, as "batch, seq" (for messages). */
static void list_symbols(cge_session *s, const sweep *w, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < w->num_inputs; i++)
        for (int32_t r = 0; r < w->decl[i].shape.rank; r++) {
            const char *n = sym_name(s, w->decl[i].shape.dims[r]);
            if (!n[0] || (k && strstr(buf, n)))
                continue;
            if (k < size)
                k += (size_t)snprintf(buf + k, size - k, "%s%s", k ? ", " : "", n);
        }
    if (!k)
        snprintf(buf, size, "none");
}

/* Every input's shape at one size: given shapes as given; the others from
 * their declared shapes, symbolic dims from `vals` (by symbol id; -1: not
 * known) else 1. */
static void fill_size(const sweep *w, const bool *given, cge_shape *shapes, const int64_t *vals,
                      int nvals)
{
    for (int i = 0; i < w->num_inputs; i++) {
        if (given[i])
            continue;
        shapes[i] = w->decl[i].shape;
        for (int32_t r = 0; r < shapes[i].rank; r++) {
            int64_t d = shapes[i].dims[r];
            if (d >= 0)
                continue;
            int64_t k = cge_dim_symbol_id(d);
            shapes[i].dims[r] = k >= 0 && k < nvals && vals[k] >= 0 ? vals[k] : 1;
        }
    }
}

static int input_index(const sweep *w, const char *name, size_t len)
{
    for (int i = 0; i < w->num_inputs; i++)
        if (strlen(w->decl[i].name) == len && !strncmp(w->decl[i].name, name, len))
            return i;
    return -1;
}

#define MAX_SYMS 64

/* "NAME:D0,D1 NAME2:..." (one size) into shapes; symbol values learnt. */
static int parse_size_item(const char *item, size_t len, sweep *w, cge_shape *shapes,
                           bool *given, int64_t *vals)
{
    const char *p = item, *end = item + len;
    int count = 0;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == end)
            break;
        const char *tok = p;
        while (p < end && *p != ' ' && *p != '\t')
            p++;
        size_t tl = (size_t)(p - tok);
        const char *colon = memchr(tok, ':', tl);
        if (!colon || colon == tok)
            return cli_usage("bench", "--shapes: '%.*s': want NAME:D0,D1,... (e.g. "
                                      "input:1,3,224,224)", (int)tl, tok);
        int i = input_index(w, tok, (size_t)(colon - tok));
        if (i < 0)
            return cli_usage("bench", "--shapes: the model has no input named '%.*s'",
                             (int)(colon - tok), tok);
        if (given[i])
            return cli_usage("bench", "--shapes: '%s' is given twice in one size",
                             w->decl[i].name);
        cge_shape sh = {0};
        const char *q = colon + 1;
        while (q < p) {
            char *e;
            errno = 0;
            long long d = strtoll(q, &e, 10);
            if (e == q || d < 0 || errno || e > p || sh.rank == CGE_MAX_RANK)
                return cli_usage("bench", "--shapes: '%.*s': dimensions are integers >= 0",
                                 (int)tl, tok);
            sh.dims[sh.rank++] = d;
            if (e == p)
                break;
            if (*e != ',')
                return cli_usage("bench", "--shapes: '%.*s': separate dimensions with ','",
                                 (int)tl, tok);
            q = e + 1;
        }
        shapes[i] = sh;
        given[i] = true;
        count++;
        const cge_shape *decl = &w->decl[i].shape;
        for (int32_t r = 0; decl->rank == sh.rank && r < sh.rank; r++) {
            int64_t k = cge_dim_symbol_id(decl->dims[r]);
            if (k >= 0 && k < MAX_SYMS)
                vals[k] = sh.dims[r];
        }
    }
    if (!count)
        return cli_usage("bench", "--shapes: an empty size");
    return CLI_OK;
}

static int parse_sweep(const cli_opts *o, cge_session *s, sweep *w)
{
    memset(w, 0, sizeof *w);
    int32_t ni = 0, no = 0;
    if (cge_session_num_io(s, 1, &ni, &no))
        return cli_fail_last("bench", NULL);
    if (ni > CLI_MAX_LIST)
        return cli_fail("bench", "the model has %d inputs; this tool handles %d", ni,
                        CLI_MAX_LIST);
    w->num_inputs = ni;
    for (int32_t i = 0; i < ni; i++)
        if (cge_session_input_desc(s, 1, i, &w->decl[i]))
            return cli_fail_last("bench", NULL);
    w->shapes = calloc(MAX_SWEEP, sizeof *w->shapes);
    if (!w->shapes)
        return cli_fail("bench", "out of memory");
    bool per_input = false, per_symbol = false;
    for (int j = 0; j < o->num_sweeps; j++) {
        const char *v = o->sweeps[j];
        bool sym = strchr(v, ':') == NULL && strchr(v, '=') != NULL;
        per_input |= !sym;
        per_symbol |= sym;
    }
    if (per_input && per_symbol)
        return cli_usage("bench", "--shapes: give either sizes per input (NAME:D0,D1;...) or "
                                  "values of symbolic dims (SYMBOL=N1,N2,...), not both");
    if (per_input) {
        for (int j = 0; j < o->num_sweeps; j++) {
            const char *p = o->sweeps[j];
            while (*p) {
                const char *e = strchr(p, ';');
                size_t len = e ? (size_t)(e - p) : strlen(p);
                bool blank = true;
                for (size_t q = 0; q < len; q++)
                    blank &= p[q] == ' ' || p[q] == '\t';
                if (!blank) {
                    if (w->n == MAX_SWEEP)
                        return cli_usage("bench", "--shapes: at most %d sizes", MAX_SWEEP);
                    bool given[CLI_MAX_LIST] = {0};
                    int64_t vals[MAX_SYMS];
                    for (int k = 0; k < MAX_SYMS; k++)
                        vals[k] = -1;
                    int rc = parse_size_item(p, len, w, w->shapes[w->n], given, vals);
                    if (rc)
                        return rc;
                    fill_size(w, given, w->shapes[w->n], vals, MAX_SYMS);
                    w->n++;
                }
                p += len + (e ? 1 : 0);
            }
        }
        return CLI_OK;
    }
    /* SYMBOL=N1,N2,...: each option a symbol's values, zipped. */
    int64_t sym_id[CLI_MAX_LIST];
    long long *vals[CLI_MAX_LIST] = {0};
    int counts[CLI_MAX_LIST] = {0}, n = 1, rc = CLI_OK;
    char known[512];
    list_symbols(s, w, known, sizeof known);
    for (int j = 0; !rc && j < o->num_sweeps; j++) {
        const char *v = o->sweeps[j], *eq = strchr(v, '=');
        size_t len = (size_t)(eq - v);
        sym_id[j] = -1;
        for (int i = 0; i < w->num_inputs && sym_id[j] < 0; i++)
            for (int32_t r = 0; r < w->decl[i].shape.rank; r++) {
                const char *nm = sym_name(s, w->decl[i].shape.dims[r]);
                if (strlen(nm) == len && !strncmp(nm, v, len)) {
                    sym_id[j] = cge_dim_symbol_id(w->decl[i].shape.dims[r]);
                    break;
                }
            }
        if (sym_id[j] < 0) {
            rc = cli_usage("bench", "--shapes '%s': the model's inputs have no symbolic dim "
                                    "named '%.*s' (theirs: %s)", v, (int)len, v, known);
            break;
        }
        for (int q = 0; q < j; q++)
            if (sym_id[q] == sym_id[j])
                rc = cli_usage("bench", "--shapes: '%.*s' is given twice", (int)len, v);
        if (!rc && !(vals[j] = malloc(sizeof(long long) * MAX_SWEEP)))
            rc = cli_fail("bench", "out of memory");
        for (const char *p = eq + 1; !rc;) {
            char *e;
            errno = 0;
            long long d = strtoll(p, &e, 10);
            if (e == p || d < 1 || errno || counts[j] == MAX_SWEEP) {
                rc = cli_usage("bench", "--shapes '%s': want SYMBOL=N1,N2,... (sizes >= 1, at "
                                        "most %d)", v, MAX_SWEEP);
                break;
            }
            vals[j][counts[j]++] = d;
            if (!*e)
                break;
            if (*e != ',') {
                rc = cli_usage("bench", "--shapes '%s': separate values with ','", v);
                break;
            }
            p = e + 1;
        }
        if (!rc && counts[j] > 1) {
            if (n > 1 && counts[j] != n)
                rc = cli_usage("bench", "--shapes: the symbols' lists have different lengths "
                                        "(%d and %d); they are zipped", n, counts[j]);
            n = counts[j];
        }
    }
    for (int k = 0; !rc && k < n; k++) {
        int64_t sv[MAX_SYMS];
        for (int q = 0; q < MAX_SYMS; q++)
            sv[q] = -1;
        for (int j = 0; j < o->num_sweeps; j++)
            if (sym_id[j] < MAX_SYMS)
                sv[sym_id[j]] = vals[j][counts[j] > 1 ? k : 0];
        bool given[CLI_MAX_LIST] = {0};
        fill_size(w, given, w->shapes[w->n++], sv, MAX_SYMS);
    }
    for (int j = 0; j < o->num_sweeps; j++)
        free(vals[j]);
    return rc;
}

static void size_str(const sweep *w, int k, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < w->num_inputs && n < size; i++) {
        n += (size_t)snprintf(buf + n, size - n, "%s%s:", i ? " " : "", w->decl[i].name);
        for (int32_t r = 0; r < w->shapes[k][i].rank && n < size; r++)
            n += (size_t)snprintf(buf + n, size - n, "%s%lld", r ? "," : "",
                                  (long long)w->shapes[k][i].dims[r]);
    }
}

typedef struct size_result {
    double first, p50, p90, min;
    long n;
    cge_run_mode mode;
} size_result;

static int bench_sweep(const cli_opts *o, prepared *p)
{
    if (o->num_inputs)
        return cli_usage("bench", "--shapes makes random inputs of each size; it does not "
                                  "take --input files");
    sweep w;
    int rc = parse_sweep(o, p->s, &w);
    long iters = o->iterations > 0 ? o->iterations : o->duration_s > 0 ? 100000000 : 20;
    long warm = o->warmup >= 0 ? o->warmup : 2;
    size_result *res = rc ? NULL : calloc((size_t)w.n, sizeof *res);
    double *lat = rc ? NULL : malloc(sizeof(double) * (size_t)(iters < 100000 ? iters : 100000));
    if (!rc && (!res || !lat))
        rc = cli_fail("bench", "out of memory");
    cge_run_options ro = {.mode = o->mode};
    double sweep0 = cli_now_ms();
    for (int k = 0; !rc && k < w.n; k++) {
        cli_tensors in, out;
        memset(&out, 0, sizeof out);
        rc = cli_make_inputs_at("bench", o, p->s, w.shapes[k], &in);
        if (!rc)
            rc = cli_make_outputs("bench", p->s, &out);
        char sz[512];
        size_str(&w, k, sz, sizeof sz);
        double t0 = cli_now_ms();
        if (!rc && cli_run_once(p->s, &in, &out, &ro))
            rc = cli_fail_last("bench", sz);
        res[k].first = cli_now_ms() - t0;
        for (long i = 0; !rc && i < warm; i++)
            if (cge_session_run(p->s, 1, in.t, in.n, out.t, out.n, &ro))
                rc = cli_fail_last("bench", sz);
        long n = 0;
        double start = cli_now_ms();
        while (!rc && n < iters && n < 100000) {
            double a = cli_now_ms();
            if (cge_session_run(p->s, 1, in.t, in.n, out.t, out.n, &ro)) {
                rc = cli_fail_last("bench", sz);
                break;
            }
            double b = cli_now_ms();
            lat[n++] = b - a;
            if (o->duration_s > 0 && b - start >= o->duration_s * 1e3)
                break;
        }
        if (!rc) {
            qsort(lat, (size_t)n, sizeof(double), cmp_double);
            res[k].n = n;
            res[k].min = lat[0];
            res[k].p50 = pct(lat, n, 0.5);
            res[k].p90 = pct(lat, n, 0.9);
            cge_session_last_run_mode(p->s, 1, &res[k].mode);
        }
        cli_tensors_free(&in);
        cli_tensors_free(&out);
    }
    double total = cli_now_ms() - sweep0;
    int threads = o->threads ? o->threads : cge_device_num_threads(cge_session_device(p->s));
    if (!rc && o->json) {
        printf("{\"model\": ");
        cli_json_str(stdout, o->model);
        printf(", \"format\": \"%s\", \"threads\": %d, \"%s_ms\": %.3f, \"prepare_ms\": %.3f, "
               "\"iterations\": %ld, \"warmup\": %ld, \"total_ms\": %.3f, \"sizes\": [",
               p->m.is_cgm ? "cgm" : "onnx", threads, p->m.is_cgm ? "load" : "import",
               p->m.open_ms, p->prepare_ms, iters, warm, total);
        for (int k = 0; k < w.n; k++) {
            printf("%s{\"inputs\": {", k ? ", " : "");
            for (int i = 0; i < w.num_inputs; i++) {
                printf("%s", i ? ", " : "");
                cli_json_str(stdout, w.decl[i].name);
                printf(": [");
                for (int32_t r = 0; r < w.shapes[k][i].rank; r++)
                    printf("%s%lld", r ? ", " : "", (long long)w.shapes[k][i].dims[r]);
                printf("]");
            }
            printf("}, \"mode\": \"%s\", \"first_run_ms\": %.4f, \"min_ms\": %.4f, "
                   "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"runs\": %ld, "
                   "\"first_over_p50\": %.3f}",
                   cge_run_mode_name(res[k].mode), res[k].first, res[k].min, res[k].p50,
                   res[k].p90, res[k].n, res[k].p50 > 0 ? res[k].first / res[k].p50 : 0.0);
        }
        printf("]}\n");
    } else if (!rc) {
        printf("%s (%s, %d threads): %d size(s) in one session; %s %.1f ms, prepare %.1f ms\n",
               o->model, p->m.is_cgm ? "compiled model" : "ONNX", threads, w.n,
               p->m.is_cgm ? "load" : "import", p->m.open_ms, p->prepare_ms);
        int width = 24;
        for (int k = 0; k < w.n; k++) {
            char sz[512];
            size_str(&w, k, sz, sizeof sz);
            int l = (int)strlen(sz);
            width = l > width ? (l < 60 ? l : 60) : width;
        }
        printf("  %-*s %-6s %13s %10s %10s %9s\n", width, "size", "mode", "first run ms",
               "p50 ms", "p90 ms", "first/p50");
        for (int k = 0; k < w.n; k++) {
            char sz[512];
            size_str(&w, k, sz, sizeof sz);
            printf("  %-*s %-6s %13.3f %10.3f %10.3f %8.1fx\n", width, sz,
                   cge_run_mode_name(res[k].mode), res[k].first, res[k].p50, res[k].p90,
                   res[k].p50 > 0 ? res[k].first / res[k].p50 : 0.0);
        }
        printf("  (first run: the first run at that size, with any compile of a new shape; "
               "p50/p90 over %ld runs after %ld warm-up; total %.1f ms)\n", iters, warm, total);
    }
    free(lat);
    free(res);
    free(w.shapes);
    return rc;
}

/* --compare-precision: one session per precision on the same inputs, runs
 * alternating so that both see the same machine; bf16's outputs measured
 * against fp32's, relative to each output's largest magnitude (elements
 * near zero would make elementwise ratios meaningless). */
static int bench_compare_precision(const cli_opts *o)
{
    prepared p[2];
    memset(p, 0, sizeof p);
    cli_opts oo[2] = {*o, *o};
    oo[0].precision = CGE_PRECISION_FP32;
    oo[1].precision = CGE_PRECISION_BF16;
    int rc = CLI_OK;
    for (int k = 0; k < 2 && !rc; k++)
        rc = prepare("bench", &oo[k], &p[k]);
    long iters = o->iterations > 0 ? o->iterations : 20;
    long warm = o->warmup >= 0 ? o->warmup : 3;
    double *lat = NULL;
    cge_run_options ro = {.mode = o->mode};
    if (!rc && !(lat = malloc(sizeof(double) * (size_t)iters * 2)))
        rc = cli_fail("bench", "out of memory");
    for (int k = 0; k < 2 && !rc; k++)
        if (cli_run_once(p[k].s, &p[0].in, &p[k].out, &ro))
            rc = cli_fail_last("bench", k ? "bf16 run" : "fp32 run");
    for (long i = 0; !rc && i < warm + iters; i++)
        for (int k = 0; k < 2 && !rc; k++) {
            double t0 = cli_now_ms();
            if (cge_session_run(p[k].s, 1, p[0].in.t, p[0].in.n, p[k].out.t, p[k].out.n, &ro))
                rc = cli_fail_last("bench", "run");
            if (i >= warm)
                lat[k * iters + (i - warm)] = cli_now_ms() - t0;
        }
    /* The outputs of the last runs: every run computes the same. */
    if (!rc) {
        qsort(lat, (size_t)iters, sizeof(double), cmp_double);
        qsort(lat + iters, (size_t)iters, sizeof(double), cmp_double);
        double f = pct(lat, iters, 0.5), b = pct(lat + iters, iters, 0.5);
        bool avail = cge_precision_bf16_available();
        if (o->json) {
            printf("{\"model\": ");
            cli_json_str(stdout, o->model);
            printf(", \"bf16_available\": %s, \"iterations\": %ld, \"fp32_p50_ms\": %.4f, "
                   "\"bf16_p50_ms\": %.4f, \"speedup\": %.3f, \"outputs\": [",
                   avail ? "true" : "false", iters, f, b, b > 0 ? f / b : 0.0);
        } else {
            printf("%s: fp32 vs bf16 (%ld runs each, alternating)%s\n", o->model, iters,
                   avail ? "" : "\n  (no bfloat16 kernels on this CPU or build: bf16 runs fp32)");
            printf("  p50 fp32 %.3f ms  bf16 %.3f ms  speed-up %.2fx\n", f, b,
                   b > 0 ? f / b : 0.0);
        }
        for (int i = 0; i < p[0].out.n; i++) {
            const cge_tensor *a = &p[0].out.t[i], *c = &p[1].out.t[i];
            size_t n = (size_t)cge_shape_numel(&a->shape);
            double scale = 0, mx = 0, sum = 0;
            bool fl = cge_dtype_is_float(a->dtype) && a->dtype == c->dtype &&
                      cge_shape_equal(&a->shape, &c->shape);
            for (size_t j = 0; fl && j < n; j++)
                scale = fmax(scale, fabs(value_at(a, j)));
            for (size_t j = 0; fl && j < n; j++) {
                double e = fabs(value_at(a, j) - value_at(c, j)) / (scale > 0 ? scale : 1.0);
                mx = e > mx || isnan(e) ? e : mx;
                sum += e;
            }
            double mean = n ? sum / (double)n : 0;
            if (o->json) {
                printf("%s{\"name\": ", i ? ", " : "");
                cli_json_str(stdout, a->name);
                if (fl)
                    printf(", \"max_rel_error\": %.3e, \"mean_rel_error\": %.3e}", mx, mean);
                else
                    printf(", \"compared\": false}");
            } else if (fl) {
                printf("  output '%s': max rel error %.3e  mean rel error %.3e\n", a->name, mx,
                       mean);
            } else {
                printf("  output '%s': %s, not compared\n", a->name, cge_dtype_name(a->dtype));
            }
        }
        if (o->json)
            printf("]}\n");
    }
    free(lat);
    prepared_free(&p[0]);
    prepared_free(&p[1]);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    cli_opts o;
    bool done;
    int rc = cli_parse("bench", argc, argv,
                       "iterations,warmup,duration,mode,threads,json,input,seed,input-shape,"
                       "opt-level,streams,custom-op-lib,shapes,precision,compare-precision,tp,pp,"
                       "micro-batches,kv-cache-max-len",
                       bench_help, &o, &done);
    if (rc || done) {
        opts_free(&o);
        return rc;
    }
    if (o.compare_precision) {
        if (o.num_sweeps)
            rc = cli_usage("bench", "--compare-precision runs one size: drop --shapes");
        else
            rc = bench_compare_precision(&o);
        opts_free(&o);
        return rc;
    }
    if (o.num_sweeps) {
        prepared p;
        memset(&p, 0, sizeof p);
        rc = cli_open("bench", &o, &p.m);
        if (!rc)
            rc = cli_session("bench", &o, &p.m, &p.s, &p.prepare_ms);
        if (!rc)
            rc = bench_sweep(&o, &p);
        prepared_free(&p);
        opts_free(&o);
        return rc;
    }
    prepared p;
    rc = prepare("bench", &o, &p);
    if (!rc)
        cli_dist_quiet_others(p.s);
    long iters = o.iterations > 0 ? o.iterations : o.duration_s > 0 ? 100000000 : 100;
    long warm = o.warmup >= 0 ? o.warmup : 10;
    double *lat = NULL;
    long n = 0;
    double first = 0, total = 0;
    cge_run_options ro = {.mode = o.mode};
    if (!rc) {
        double t0 = cli_now_ms();
        if (cli_run_once(p.s, &p.in, &p.out, &ro))
            rc = cli_fail_last("bench", "first run");
        first = cli_now_ms() - t0;
    }
    for (long i = 0; !rc && i < warm; i++)
        if (cge_session_run(p.s, 1, p.in.t, p.in.n, p.out.t, p.out.n, &ro))
            rc = cli_fail_last("bench", "warm-up run");
    size_t cap = 1024;
    if (!rc && !(lat = malloc(sizeof(double) * cap)))
        rc = cli_fail("bench", "out of memory");
    double start = cli_now_ms();
    while (!rc && n < iters) {
        double t0 = cli_now_ms();
        if (cge_session_run(p.s, 1, p.in.t, p.in.n, p.out.t, p.out.n, &ro)) {
            rc = cli_fail_last("bench", "run");
            break;
        }
        double t1 = cli_now_ms();
        if ((size_t)n == cap) {
            double *q = realloc(lat, sizeof(double) * cap * 2);
            if (!q) {
                rc = cli_fail("bench", "out of memory");
                break;
            }
            lat = q;
            cap *= 2;
        }
        lat[n++] = t1 - t0;
        if (o.duration_s > 0 && t1 - start >= o.duration_s * 1e3)
            break;
    }
    total = cli_now_ms() - start;
    if (!rc) {
        qsort(lat, (size_t)n, sizeof(double), cmp_double);
        double mean = 0;
        for (long i = 0; i < n; i++)
            mean += lat[i];
        mean /= (double)n;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        long long peak = (long long)ru.ru_maxrss * 1024;
        cge_run_mode used = CGE_RUN_DEFAULT;
        cge_session_last_run_mode(p.s, 1, &used);
        double thr = total > 0 ? (double)n / (total / 1e3) : 0;
        long long arena = p.m.is_cgm ? (long long)cge_plan_arena_bytes(cge_model_plan(p.m.model)) : -1;
        /* Where the memory went: weights read as they are, packed copies,
         * weights freed once packed, the arena. */
        cge_session_graph_stats gs = {0};
        if (cge_session_get_graph_stats(p.s, 1, &gs) != CGE_OK)
            cge_clear_error();
        if (arena < 0)
            arena = (long long)gs.arena_bytes;
        if (o.json) {
            printf("{\"model\": ");
            cli_json_str(stdout, o.model);
            printf(", \"format\": \"%s\", \"mode\": \"%s\", \"threads\": %d, \"%s_ms\": %.3f, "
                   "\"prepare_ms\": %.3f, \"first_run_ms\": %.3f, \"iterations\": %ld, "
                   "\"warmup\": %ld, \"min_ms\": %.4f, \"p50_ms\": %.4f, \"p90_ms\": %.4f, "
                   "\"p99_ms\": %.4f, \"max_ms\": %.4f, \"mean_ms\": %.4f, "
                   "\"throughput_per_s\": %.2f, \"peak_rss_bytes\": %lld, \"arena_bytes\": %lld, "
                   "\"weight_bytes\": %zu, \"packed_bytes\": %zu, \"released_bytes\": %zu}\n",
                   p.m.is_cgm ? "cgm" : "onnx", cge_run_mode_name(used),
                   o.threads ? o.threads : cge_device_num_threads(cge_session_device(p.s)),
                   p.m.is_cgm ? "load" : "import", p.m.open_ms, p.prepare_ms, first, n, warm,
                   lat[0], pct(lat, n, 0.5), pct(lat, n, 0.9), pct(lat, n, 0.99), lat[n - 1],
                   mean, thr, peak, arena, gs.weight_bytes, gs.packed_bytes, gs.released_bytes);
        } else {
            printf("%s (%s, %s mode, %d threads)\n", o.model, p.m.is_cgm ? "compiled model" : "ONNX",
                   cge_run_mode_name(used),
                   o.threads ? o.threads : cge_device_num_threads(cge_session_device(p.s)));
            printf("  %-10s %10.3f ms\n  %-10s %10.3f ms%s\n  %-10s %10.3f ms\n",
                   p.m.is_cgm ? "load" : "import", p.m.open_ms, "prepare", p.prepare_ms,
                   p.m.is_cgm ? " (kernels, arena)" : " (compile, kernels, arena)", "first run",
                   first);
            printf("  latency over %ld runs (after %ld warm-up): min %.3f  p50 %.3f  p90 %.3f  "
                   "p99 %.3f  max %.3f  mean %.3f ms\n",
                   n, warm, lat[0], pct(lat, n, 0.5), pct(lat, n, 0.9), pct(lat, n, 0.99),
                   lat[n - 1], mean);
            printf("  throughput %.1f runs/s; peak memory %.1f MiB", thr, (double)peak / 1048576.0);
            if (arena >= 0)
                printf(" (arena %.1f MiB)", (double)arena / 1048576.0);
            printf("\n");
            if (gs.weight_bytes || gs.packed_bytes)
                printf("  memory: weights %.1f MiB, packed weights %.1f MiB (weights freed once "
                       "packed: %.1f MiB), arena %.1f MiB\n",
                       (double)gs.weight_bytes / 1048576.0, (double)gs.packed_bytes / 1048576.0,
                       (double)gs.released_bytes / 1048576.0, (double)arena / 1048576.0);
        }
        cli_dist_bench_report(p.s, lat, n, n + warm + 1);
    }
    free(lat);
    prepared_free(&p);
    opts_free(&o);
    return rc;
}

/* ---- profile ------------------------------------------------------------------- */

typedef struct span {
    int track;                    /* 1 compile, 2 dispatch, 3 kernels, 4 copies */
    char name[96];
    const char *cat;
    double begin, end;            /* ms, cge_profile_clock_ms */
    char args[256];               /* JSON object body */
} span;

typedef struct trace {
    span *v;
    size_t n, cap;
    bool oom;
} trace;

static span *add_span(trace *t, int track, const char *cat, double b, double e, const char *name)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 1024;
        span *q = realloc(t->v, nc * sizeof *q);
        if (!q) {
            t->oom = true;
            return NULL;
        }
        t->v = q;
        t->cap = nc;
    }
    span *s = &t->v[t->n++];
    memset(s, 0, sizeof *s);
    s->track = track;
    s->cat = cat;
    s->begin = b;
    s->end = e;
    snprintf(s->name, sizeof s->name, "%s", name);
    return s;
}

/* `s` for a JSON string body (quotes, backslashes, control bytes escaped). */
static const char *esc(const char *s, char *buf, size_t size)
{
    size_t k = 0;
    for (; s && *s && k + 7 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            k += (size_t)snprintf(buf + k, size - k, "\\%c", c);
        else if (c < 0x20)
            k += (size_t)snprintf(buf + k, size - k, "\\u%04x", c);
        else
            buf[k++] = (char)c;
    }
    buf[k] = '\0';
    return buf;
}

static void on_profile(const cge_profile_event *ev, void *user)
{
    trace *t = user;
    char nm[128];
    esc(ev->name, nm, sizeof nm);
    if (ev->kind == CGE_PROFILE_KERNEL) {
        char op[96];
        snprintf(op, sizeof op, "%s%s%s", ev->domain, ev->domain[0] ? "." : "", ev->op_type);
        span *d = add_span(t, 2, "dispatch", ev->launch_begin_ms, ev->launch_end_ms, op);
        if (d)
            snprintf(d->args, sizeof d->args, "\"node\": \"%s\", \"step\": %d", nm,
                     (int)ev->step);
        span *k = add_span(t, 3, "kernel", ev->launch_end_ms, ev->end_ms, op);
        if (k)
            snprintf(k->args, sizeof k->args,
                     "\"node\": \"%s\", \"step\": %d, \"engine\": \"%s\", \"stream\": %d",
                     nm, (int)ev->step, ev->engine, (int)ev->stream);
    } else {
        span *c = add_span(t, 4, "copy", ev->launch_begin_ms, ev->end_ms,
                           ev->kind == CGE_PROFILE_COPY_IN ? "copy in" : "copy out");
        if (c)
            snprintf(c->args, sizeof c->args, "\"value\": \"%s\", \"bytes\": %zu", nm,
                     ev->bytes);
    }
}

typedef struct op_sum {
    char op[96];
    long count;
    double total, dispatch;
} op_sum;

static int cmp_sum(const void *a, const void *b)
{
    double x = ((const op_sum *)a)->total, y = ((const op_sum *)b)->total;
    return (x < y) - (x > y);
}

static int write_trace(const char *path, const trace *t, double t0, const char *model)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return cli_fail("profile", "[io] %s: cannot write: %s", path, strerror(errno));
    static const char *const tracks[5] = {"", "compile", "host dispatch", "kernel execution",
                                          "memory copies"};
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"model\": ");
    cli_json_str(f, model);
    fprintf(f, ", \"tool\": \"cge profile\"}, \"traceEvents\": [\n");
    fprintf(f, "{\"ph\": \"M\", \"pid\": 1, \"name\": \"process_name\", \"args\": {\"name\": \"cge\"}}");
    for (int k = 1; k <= 4; k++)
        fprintf(f, ",\n{\"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"name\": \"thread_name\", "
                   "\"args\": {\"name\": \"%s\"}},\n{\"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                   "\"name\": \"thread_sort_index\", \"args\": {\"sort_index\": %d}}",
                k, tracks[k], k, k);
    for (size_t i = 0; i < t->n; i++) {
        const span *s = &t->v[i];
        fprintf(f, ",\n{\"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"cat\": \"%s\", \"name\": ",
                s->track, s->cat);
        cli_json_str(f, s->name);
        fprintf(f, ", \"ts\": %.3f, \"dur\": %.3f, \"args\": {%s}}", (s->begin - t0) * 1e3,
                (s->end - s->begin) * 1e3, s->args);
    }
    fprintf(f, "\n]}\n");
    if (fclose(f))
        return cli_fail("profile", "[io] %s: write failed: %s", path, strerror(errno));
    return CLI_OK;
}

int cmd_profile(int argc, char **argv)
{
    cli_opts o;
    bool done;
    int rc = cli_parse("profile", argc, argv,
                       "o,iterations,input,seed,threads,input-shape,opt-level,disable-pass,"
                       "streams,custom-op-lib,precision",
                       profile_help, &o, &done);
    if (rc || done) {
        opts_free(&o);
        return rc;
    }
    if (!o.out) {
        opts_free(&o);
        return cli_usage("profile", "no output file: give -o TRACE.json");
    }
    trace tr = {0};
    double t0 = cli_now_ms();
    prepared p;
    memset(&p, 0, sizeof p);
    rc = cli_open("profile", &o, &p.m);
    double opened = cli_now_ms();
    if (!rc)
        add_span(&tr, 1, "compile", t0, opened, p.m.is_cgm ? "load .cgm" : "import ONNX");
    /* An ONNX model is compiled here with per-pass statistics, and the plan
     * run through an in-memory model, so that the profile shows this very
     * plan's compile. */
    if (!rc && !p.m.is_cgm) {
        char dis[1024];
        cge_compile_options co = cli_compile_options(&o, dis, sizeof dis);
        /* A graph whose shapes follow computed values (a detector's
         * NonZero) has no plan: the session runs it node by node, and its
         * runs are profiled per node just the same. */
        co.allow_incomplete = true;
        cge_plan *plan = NULL;
        double c0 = cli_now_ms();
        if (cge_compile(p.m.graph, NULL, 0, &co, &plan))
            rc = cli_fail_last("profile", NULL);
        double c1 = cli_now_ms();
        /* An incomplete plan cannot be a session's (cge_session_add_plan
         * refuses it): the session compiles the graph again itself. */
        bool node_by_node = !rc && !cge_plan_is_complete(plan);
        if (!rc) {
            add_span(&tr, 1, "compile", c0, c1,
                     node_by_node ? "compile (shapes follow values: node by node)" : "compile");
            const cge_plan_stats *st = cge_plan_get_stats(plan);
            double at = c0;
            for (int32_t i = 0; i < st->num_passes; i++) {
                span *s = add_span(&tr, 1, "pass", at, at + st->passes[i].ms, st->passes[i].name);
                if (s)
                    snprintf(s->args, sizeof s->args,
                             "\"stage\": \"%s\", \"nodes_before\": %d, \"nodes_after\": %d",
                             st->passes[i].stage, (int)st->passes[i].nodes_before,
                             (int)st->passes[i].nodes_after);
                at += st->passes[i].ms;
            }
        }
        if (!rc && !node_by_node) {
            void *buf = NULL;
            size_t size = 0;
            if (cge_model_save_buffer(plan, NULL, &buf, &size) ||
                cge_model_load_buffer(buf, size, NULL, &p.m.model))
                rc = cli_fail_last("profile", NULL);
            free(buf);
            add_span(&tr, 1, "compile", c1, cli_now_ms(), "plan to model (in memory)");
            if (!rc) {
                p.m.is_cgm = true;
                cge_graph_destroy(p.m.graph);
                p.m.graph = NULL;
            }
        }
        cge_plan_destroy(plan);
    }
    double s0 = cli_now_ms();
    if (!rc)
        rc = cli_session("profile", &o, &p.m, &p.s, &p.prepare_ms);
    if (!rc)
        add_span(&tr, 1, "compile", s0, cli_now_ms(),
                 p.m.is_cgm ? "prepare (arena, kernels)" : "prepare (session)");
    if (!rc)
        rc = cli_make_inputs("profile", &o, p.s, &p.in);
    if (!rc)
        rc = cli_make_outputs("profile", p.s, &p.out);
    /* One unprofiled run first: caches, pages of the weights, lazy state. */
    cge_run_options plain = {.mode = CGE_RUN_PLAN};
    if (!rc && cli_run_once(p.s, &p.in, &p.out, &plain))
        rc = cli_fail_last("profile", "warm-up run");
    long iters = o.iterations > 0 ? o.iterations : 10;
    size_t first_run_span = tr.n;
    cge_run_options ro = {.mode = CGE_RUN_PLAN, .profile = on_profile, .profile_user = &tr};
    for (long i = 0; !rc && i < iters; i++) {
        double r0 = cli_now_ms();
        if (cge_session_run(p.s, 1, p.in.t, p.in.n, p.out.t, p.out.n, &ro))
            rc = cli_fail_last("profile", "profiled run");
        char nm[32];
        snprintf(nm, sizeof nm, "run %ld", i);
        add_span(&tr, 2, "run", r0, cli_now_ms(), nm);
    }
    if (!rc && tr.oom)
        rc = cli_fail("profile", "out of memory");
    if (!rc)
        rc = write_trace(o.out, &tr, t0, o.model);
    if (!rc) {
        /* Summary per op type over the profiled runs. */
        op_sum *sums = calloc(tr.n + 1, sizeof *sums);
        int ns = 0;
        double compile = 0, dispatch = 0, kernels = 0, copies = 0;
        for (size_t i = 0; i < tr.n; i++) {
            const span *s = &tr.v[i];
            double d = s->end - s->begin;
            if (s->track == 1 && !strcmp(s->cat, "compile"))
                compile += d;
            if (i < first_run_span || s->track == 1)
                continue;
            if (s->track == 4)
                copies += d;
            if (s->track == 2 && !strcmp(s->cat, "dispatch"))
                dispatch += d;
            if (s->track == 3)
                kernels += d;
            if (s->track != 2 && s->track != 3)
                continue;
            if (s->track == 2 && strcmp(s->cat, "dispatch"))
                continue;
            int k = 0;
            while (k < ns && strcmp(sums[k].op, s->name))
                k++;
            if (k == ns)
                snprintf(sums[ns++].op, sizeof sums[0].op, "%s", s->name);
            sums[k].total += d;
            if (s->track == 2)
                sums[k].dispatch += d;
            else
                sums[k].count++;
        }
        qsort(sums, (size_t)ns, sizeof *sums, cmp_sum);
        double all = dispatch + kernels;
        printf("profile of %s: %ld run(s), trace in %s\n", o.model, iters, o.out);
        printf("  compile %.2f ms (%s), per run: dispatch %.3f ms, kernels %.3f ms, copies %.3f ms\n",
               compile, p.m.graph ? "import + compile" : "load/compile + prepare",
               dispatch / (double)iters, kernels / (double)iters, copies / (double)iters);
        printf("  %-32s %8s %12s %10s %7s\n", "op type", "count", "total ms", "mean ms", "share");
        for (int k = 0; k < ns; k++)
            printf("  %-32s %8ld %12.3f %10.4f %6.1f%%\n", sums[k].op, sums[k].count / iters,
                   sums[k].total / (double)iters,
                   sums[k].count ? sums[k].total / (double)sums[k].count : 0.0,
                   all > 0 ? 100.0 * sums[k].total / all : 0.0);
        printf("  (count, total: per run; time = host dispatch + kernel execution)\n");
        free(sums);
    }
    free(tr.v);
    prepared_free(&p);
    opts_free(&o);
    return rc;
}
