/* The contract checker's driver: for each selected operator, find input cases
 * meta accepts, run the kernel on them with guarded buffers several times,
 * perturb shapes and dtypes just past the constraints, and record findings. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/meta.h"
#include "opcheck/opcheck_internal.h"

/* Guard zones around every buffer a kernel sees. Wide enough that a kernel
 * assuming a 64 KiB tile on a small tensor stays inside memory we own (and
 * is reported, not a crash). */
#define GUARD ((size_t)80 * 1024)
#define GUARD_BYTE 0xC3
#define MAX_PERTURB 24
#define MAX_FINDINGS_PER_KIND 4
#define MSG_MAX 768

static const char *const kind_names[CGE_OPCHECK_KIND_COUNT] = {
    [CGE_OPCHECK_CONSTRAINT_PASSED] = "constraint-passed",
    [CGE_OPCHECK_NO_KERNEL] = "no-kernel",
    [CGE_OPCHECK_KERNEL_FAILED] = "kernel-failed",
    [CGE_OPCHECK_OUTPUT_DESC] = "output-desc",
    [CGE_OPCHECK_OUT_OF_BOUNDS] = "out-of-bounds",
    [CGE_OPCHECK_UNWRITTEN] = "unwritten",
    [CGE_OPCHECK_NONDETERMINISTIC] = "nondeterministic",
    [CGE_OPCHECK_KERNEL_UNCHECKED] = "kernel-unchecked",
    [CGE_OPCHECK_CONVERTER] = "converter",
};

const char *cge_opcheck_kind_name(cge_opcheck_kind kind)
{
    return kind >= 0 && kind < CGE_OPCHECK_KIND_COUNT ? kind_names[kind] : "unknown";
}

struct cge_opcheck_report {
    cge_opcheck_op_result *ops;
    int32_t num_ops, cap_ops;
    cge_opcheck_finding *findings;
    int32_t num_findings, cap_findings;
    char **strings;        /* every message and skip reason, owned */
    int32_t num_strings, cap_strings;
};

/* State while checking one op. */
typedef struct oc_run {
    const cge_opcheck_options *opts;
    cge_opcheck_report *r;
    cge_device *dev;
    cge_stream *stream;
    const cge_op_def *def;
    cge_opcheck_op_result *res;
    int32_t per_kind[CGE_OPCHECK_KIND_COUNT];
    bool kernel_constraints;
    int runs;
} oc_run;

/* ---- report ------------------------------------------------------------ */

static char *keep_string(cge_opcheck_report *r, const char *s)
{
    if (r->num_strings == r->cap_strings) {
        int32_t nc = r->cap_strings ? r->cap_strings * 2 : 64;
        char **p = realloc(r->strings, sizeof *p * (size_t)nc);
        if (!p)
            return NULL;
        r->strings = p;
        r->cap_strings = nc;
    }
    char *d = strdup(s);
    if (d)
        r->strings[r->num_strings++] = d;
    return d;
}

static void add_finding(oc_run *x, cge_opcheck_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_finding(oc_run *x, cge_opcheck_kind kind, const char *fmt, ...)
{
    x->res->num_findings++;
    if (x->per_kind[kind]++ >= MAX_FINDINGS_PER_KIND)
        return;
    char msg[MSG_MAX];
    int n = snprintf(msg, sizeof msg, "%s%s%s%s: ", x->def->name, x->def->domain[0] ? " (" : "",
                     x->def->domain, x->def->domain[0] ? ")" : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    cge_opcheck_report *r = x->r;
    if (r->num_findings == r->cap_findings) {
        int32_t nc = r->cap_findings ? r->cap_findings * 2 : 32;
        cge_opcheck_finding *p = realloc(r->findings, sizeof *p * (size_t)nc);
        if (!p)
            return;
        r->findings = p;
        r->cap_findings = nc;
    }
    const char *m = keep_string(r, msg);
    if (!m)
        return;
    r->findings[r->num_findings++] = (cge_opcheck_finding){
        .kind = kind, .op = x->res->op, .domain = x->res->domain, .origin = x->res->origin,
        .message = m};
}

/* ---- meta ---------------------------------------------------------------- */

/* Meta as every engine path runs it: arity, attributes, dtype sets, infer. */
static cge_status run_meta(const oc_run *x, const oc_case *c, cge_tensor_desc *out)
{
    bool present[OC_MAX_ARGS];
    cge_tensor_desc in[OC_MAX_ARGS];
    const void *values[OC_MAX_ARGS];
    for (int32_t i = 0; i < c->num_inputs; i++) {
        present[i] = c->present[i];
        in[i] = (cge_tensor_desc){.name = "", .dtype = c->present[i] ? c->dtype[i] : CGE_DTYPE_UNDEFINED,
                                  .shape = c->shape[i]};
        values[i] = c->present[i] ? c->values[i] : NULL;
    }
    for (int32_t i = 0; i < c->num_outputs; i++)
        out[i] = (cge_tensor_desc){.name = ""};
    cge_status st = cge__op_check_arity(x->def, "opcheck", present, c->num_inputs, c->num_outputs);
    if (!st)
        st = cge__op_check_attrs(x->def, "opcheck", oc_case_attrs(c));
    if (!st)
        st = cge__op_infer_node(x->def, "opcheck", oc_case_attrs(c), in, values, c->num_inputs,
                               out, c->num_outputs);
    for (int32_t i = 0; !st && i < c->num_outputs; i++)
        if (!cge_shape_is_static(&out[i].shape) || !cge_dtype_valid(out[i].dtype))
            st = cge_error(CGE_LAYER_META, CGE_ERR_SHAPE,
                           "%s: output %d has no static shape or dtype with every input known",
                           x->def->name, i);
    return st;
}

/* ---- guarded buffers and one kernel run ---------------------------------- */

typedef struct oc_buf {
    unsigned char *raw;    /* GUARD | bytes | GUARD */
    size_t bytes;
} oc_buf;

static cge_status buf_alloc(oc_run *x, oc_buf *b, size_t bytes, const void *init, int fill)
{
    void *p = NULL;
    cge_status st = cge_mem_alloc(x->dev, bytes + 2 * GUARD, &p);
    if (st)
        return st;
    b->raw = p;
    b->bytes = bytes;
    memset(b->raw, GUARD_BYTE, GUARD);
    memset(b->raw + GUARD + bytes, GUARD_BYTE, GUARD);
    if (init && bytes)
        memcpy(b->raw + GUARD, init, bytes);
    else
        memset(b->raw + GUARD, fill, bytes);
    return CGE_OK;
}

static void *buf_data(const oc_buf *b) { return b->raw ? b->raw + GUARD : NULL; }

/* Bytes of the guards that changed: before (negative side) and after. */
static void buf_guard_damage(const oc_buf *b, size_t *before, size_t *after)
{
    *before = *after = 0;
    if (!b->raw)
        return;
    for (size_t k = 0; k < GUARD; k++) {
        *before += b->raw[k] != GUARD_BYTE;
        *after += b->raw[GUARD + b->bytes + k] != GUARD_BYTE;
    }
}

static void buf_free(oc_run *x, oc_buf *b)
{
    cge_mem_free(x->dev, b->raw);
    b->raw = NULL;
}

typedef struct oc_result {
    cge_status st;
    bool while_running;                /* reported by a running block, not by launch */
    char error[MSG_MAX];
    unsigned char *out[OC_MAX_ARGS];   /* copies of the outputs, malloc'ed */
    size_t out_bytes[OC_MAX_ARGS];
} oc_result;

static void result_free(oc_result *r)
{
    for (int32_t i = 0; i < OC_MAX_ARGS; i++)
        free(r->out[i]);
    memset(r, 0, sizeof *r);
}

/* Launch the kernel once on c with outputs shaped `od`, outputs filled with
 * `fill` first. Reports out-of-bounds writes and output descriptor changes
 * itself (when `report`); the kernel's own error is returned in res. */
static cge_status run_kernel(oc_run *x, const cge_kernel_def *k, const oc_case *c,
                             const cge_tensor_desc *od, int fill, bool report, const char *what,
                             oc_result *res)
{
    memset(res, 0, sizeof *res);
    oc_buf in[OC_MAX_ARGS] = {{0}}, out[OC_MAX_ARGS] = {{0}}, ws = {0};
    cge_tensor tin[OC_MAX_ARGS], tout[OC_MAX_ARGS];
    memset(tin, 0, sizeof tin);
    memset(tout, 0, sizeof tout);
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < c->num_inputs; i++) {
        if (!c->present[i])
            continue;
        size_t nb = cge_tensor_nbytes(c->dtype[i], &c->shape[i]);
        st = buf_alloc(x, &in[i], nb, c->values[i], 0);
        tin[i] = (cge_tensor){.dtype = c->dtype[i], .shape = c->shape[i], .data = buf_data(&in[i]),
                              .bytes = nb};
    }
    for (int32_t i = 0; !st && i < c->num_outputs; i++) {
        size_t nb = cge_tensor_nbytes(od[i].dtype, &od[i].shape);
        st = buf_alloc(x, &out[i], nb, NULL, fill);
        tout[i] = (cge_tensor){.dtype = od[i].dtype, .shape = od[i].shape, .data = buf_data(&out[i]),
                               .bytes = nb};
    }
    if (st)
        goto done;
    cge_kernel_ctx ctx = {
        .op_type = x->def->name, .node_name = "opcheck",
        .num_inputs = c->num_inputs, .inputs = tin,
        .num_outputs = c->num_outputs, .outputs = tout,
        .attrs = oc_case_attrs(c), .device = x->dev,
        .num_threads = cge_device_num_threads(x->dev),
    };
    cge_status kst = CGE_OK;
    if (k->workspace_size) {
        ctx.workspace_size = k->workspace_size(&ctx);
        st = buf_alloc(x, &ws, ctx.workspace_size, NULL, 0);
        if (st)
            goto done;
        ctx.workspace = buf_data(&ws);
    }
    if (k->prepare)
        kst = k->prepare(&ctx, &ctx.state);
    if (!kst)
        kst = k->launch(&ctx, x->stream);
    cge_status sync = cge_stream_synchronize(x->stream);
    if (!kst && sync) {
        kst = sync;
        res->while_running = true;
    }
    if (kst)
        snprintf(res->error, sizeof res->error, "%s", cge_last_error());
    if (k->release && ctx.state)
        k->release(ctx.state);
    res->st = kst;

    /* Writes outside the outputs: guards of every buffer, inputs' data. */
    size_t before, after;
    for (int32_t i = 0; report && i < c->num_outputs; i++) {
        buf_guard_damage(&out[i], &before, &after);
        if (before || after)
            add_finding(x, CGE_OPCHECK_OUT_OF_BOUNDS, "%s: the kernel wrote outside output %d "
                        "(%zu bytes): %zu guard bytes changed before it, %zu after", what, i, out[i].bytes,
                        before, after);
    }
    for (int32_t i = 0; report && i < c->num_inputs; i++) {
        if (!c->present[i])
            continue;
        buf_guard_damage(&in[i], &before, &after);
        if (before || after)
            add_finding(x, CGE_OPCHECK_OUT_OF_BOUNDS, "%s: the kernel wrote into the guard zones "
                        "of input %d (%zu bytes before, %zu after)", what, i, before, after);
        else if (in[i].bytes && memcmp(buf_data(&in[i]), c->values[i], in[i].bytes))
            add_finding(x, CGE_OPCHECK_OUT_OF_BOUNDS, "%s: the kernel changed input %d", what, i);
    }
    if (report && ws.raw) {
        buf_guard_damage(&ws, &before, &after);
        if (before || after)
            add_finding(x, CGE_OPCHECK_OUT_OF_BOUNDS, "%s: the kernel wrote outside its "
                        "workspace of %zu bytes", what, ws.bytes);
    }
    for (int32_t i = 0; report && !kst && i < c->num_outputs; i++) {
        if (tout[i].dtype != od[i].dtype || !cge_shape_equal(&tout[i].shape, &od[i].shape)) {
            char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
            add_finding(x, CGE_OPCHECK_OUTPUT_DESC, "%s: meta says output %d is %s%s, the kernel "
                        "made it %s%s", what, i, cge_dtype_name(od[i].dtype),
                        cge_shape_str(&od[i].shape, a, sizeof a), cge_dtype_name(tout[i].dtype),
                        cge_shape_str(&tout[i].shape, b, sizeof b));
        }
    }
    for (int32_t i = 0; !kst && i < c->num_outputs; i++) {
        res->out_bytes[i] = out[i].bytes;
        res->out[i] = malloc(out[i].bytes ? out[i].bytes : 1);
        if (!res->out[i]) {
            st = cge_error(CGE_LAYER_NONE, CGE_ERR_NO_MEMORY, "op-check: out of memory");
            break;
        }
        memcpy(res->out[i], buf_data(&out[i]), out[i].bytes);
    }
done:
    buf_free(x, &ws);
    for (int32_t i = 0; i < OC_MAX_ARGS; i++) {
        buf_free(x, &in[i]);
        buf_free(x, &out[i]);
    }
    return st;
}

/* Run an accepted case `runs` times with different output fills; compare. */
static cge_status check_accepted(oc_run *x, const oc_case *c, const cge_tensor_desc *od,
                                 bool perturbed)
{
    char what[MSG_MAX - 128];
    oc_case_str(c, x->def, what, sizeof what);
    x->res->cases_accepted++;
    cge_dtype kt = c->num_inputs > 0 && c->present[0] ? c->dtype[0] : CGE_DTYPE_UNDEFINED;
    const cge_kernel_def *k = cge_op_find_kernel(x->def, "cpu", kt);
    if (!k) {
        add_finding(x, CGE_OPCHECK_NO_KERNEL, "meta accepts %s but no cpu kernel handles it (%s)",
                    what, cge_last_error());
        cge_clear_error();
        return CGE_OK;
    }
    static const int fills[2] = {0xA5, 0x5A};
    oc_result first, cur;
    cge_status st = run_kernel(x, k, c, od, fills[0], true, what, &first);
    x->res->kernel_runs++;
    if (st)
        return st;
    if (first.st) {
        /* A perturbed shape can make kept index values invalid: a failure
         * found while reading the data is then the kernel doing its job. */
        if (!perturbed || !first.while_running)
            add_finding(x, CGE_OPCHECK_KERNEL_FAILED, "meta accepts %s but the kernel %s: %s",
                        what, first.while_running ? "fails while running" : "refuses it at launch",
                        first.error);
        cge_clear_error();
        result_free(&first);
        return CGE_OK;
    }
    for (int run = 1; run < x->runs; run++) {
        int fill = fills[run % 2];
        st = run_kernel(x, k, c, od, fill, false, what, &cur);
        x->res->kernel_runs++;
        if (st)
            break;
        if (cur.st) {
            add_finding(x, CGE_OPCHECK_NONDETERMINISTIC, "%s: run %d failed after run 1 passed: %s",
                        what, run + 1, cur.error);
            cge_clear_error();
            result_free(&cur);
            break;
        }
        for (int32_t i = 0; i < c->num_outputs; i++) {
            size_t unwritten = 0, differ = 0;
            for (size_t b = 0; b < first.out_bytes[i]; b++) {
                if (first.out[i][b] == cur.out[i][b])
                    continue;
                if (fill != fills[0] && first.out[i][b] == fills[0] && cur.out[i][b] == fill)
                    unwritten++;
                else
                    differ++;
            }
            if (unwritten)
                add_finding(x, CGE_OPCHECK_UNWRITTEN, "%s: %zu of the %zu bytes of output %d are "
                            "never written (they keep whatever was there)", what, unwritten,
                            first.out_bytes[i], i);
            if (differ)
                add_finding(x, CGE_OPCHECK_NONDETERMINISTIC, "%s: %zu bytes of output %d differ "
                            "between run 1 and run %d", what, differ, i, run + 1);
        }
        result_free(&cur);
    }
    result_free(&first);
    return st;
}

/* A case meta refused: with kernel constraint checks on, the kernel must
 * refuse it too (outputs shaped as the base case's). */
static cge_status check_refused(oc_run *x, const oc_case *c, const cge_tensor_desc *base_od,
                                const char *meta_error)
{
    x->res->cases_refused++;
    if (!x->kernel_constraints)
        return CGE_OK;
    cge_dtype kt = c->num_inputs > 0 && c->present[0] ? c->dtype[0] : CGE_DTYPE_UNDEFINED;
    const cge_kernel_def *k = cge_op_find_kernel(x->def, "cpu", kt);
    if (!k) {
        cge_clear_error();   /* the engine refuses it: the constraint holds */
        return CGE_OK;
    }
    char what[MSG_MAX - 256];
    oc_case_str(c, x->def, what, sizeof what);
    oc_result res;
    cge_status st = run_kernel(x, k, c, base_od, 0, false, what, &res);
    x->res->kernel_runs++;
    if (!st && !res.st)
        add_finding(x, CGE_OPCHECK_KERNEL_UNCHECKED, "meta refuses %s (%.200s) but the kernel runs "
                    "on it without an error", what, meta_error);
    cge_clear_error();
    result_free(&res);
    return st;
}

/* ---- one op -------------------------------------------------------------- */

typedef struct oc_base {
    oc_case c;
    cge_tensor_desc od[OC_MAX_ARGS];
} oc_base;

#define MAX_BASES 40

/* Try `c` through meta: accepted cases join `bases` (owned there), refused
 * ones are freed. Returns whether meta accepted. */
static bool try_base(oc_run *x, oc_case *c, oc_base *bases, int32_t *nb, char *last_error,
                     size_t le_size)
{
    cge_tensor_desc od[OC_MAX_ARGS];
    if (c->num_outputs > OC_MAX_ARGS || run_meta(x, c, od)) {
        snprintf(last_error, le_size, "%s", cge_last_error());
        cge_clear_error();
        oc_case_free(c);
        return false;
    }
    if (*nb >= MAX_BASES) {
        oc_case_free(c);
        return true;
    }
    bases[*nb].c = *c;
    memcpy(bases[*nb].od, od, sizeof od);
    (*nb)++;
    return true;
}

/* Does a user case "Name[@domain]: ..." apply to this op? Returns the spec
 * part after the colon, or NULL. */
static const char *user_case_for(const cge_op_def *def, const char *s)
{
    const char *colon = strchr(s, ':');
    if (!colon)
        return NULL;
    const char *at = memchr(s, '@', (size_t)(colon - s));
    size_t nlen = (size_t)((at ? at : colon) - s);
    if (strlen(def->name) != nlen || strncmp(s, def->name, nlen))
        return NULL;
    if (at && (strlen(def->domain) != (size_t)(colon - at - 1) ||
               strncmp(at + 1, def->domain, (size_t)(colon - at - 1))))
        return NULL;
    return colon + 1;
}

static cge_status collect_bases(oc_run *x, oc_base *bases, int32_t *nb, char *last, size_t lsz)
{
    oc_case c;
    /* Given cases first (the user's, then the builtin specs), then generic
     * candidates for each dtype of input 0 until one passes meta. */
    for (int32_t i = 0; i < x->opts->num_cases; i++) {
        const char *spec = user_case_for(x->def, x->opts->cases[i]);
        if (!spec)
            continue;
        cge_status st = oc_case_parse(x->def, spec, &c);
        if (st)
            return st;
        try_base(x, &c, bases, nb, last, lsz);
    }
    const char *const *specs = oc_builtin_cases(x->def->name);
    for (int32_t i = 0; specs && i < 4 && specs[i]; i++) {
        cge_status st = oc_case_parse(x->def, specs[i], &c);
        if (st)
            return st;
        try_base(x, &c, bases, nb, last, lsz);
    }
    cge_dtype_set set = x->def->num_inputs ? x->def->inputs[0].dtypes : 0;
    if (!set)
        set = CGE_DT(CGE_F32);
    int32_t num_spec = *nb;
    for (int t = 1; t < CGE_DTYPE_MAX; t++) {
        /* Strings are not generated (cases are numbers): the string paths of
         * Cast and friends have their own tests (tests/session/test_strings.c). */
        if (!(set & CGE_DT(t)) || t == CGE_STRING)
            continue;
        if (num_spec && bases[0].c.num_inputs > 0 && bases[0].c.present[0] &&
            bases[0].c.dtype[0] != (cge_dtype)t) {
            /* The first given case again, its type variable set to t. */
            oc_case d;
            cge_status st = oc_case_clone(&bases[0].c, x->def, &d);
            if (st)
                return st;
            cge_dtype from = d.dtype[0];
            for (int32_t i = 0; !st && i < d.num_inputs; i++)
                if (d.present[i] && d.dtype[i] == from && oc_same_type_var(x->def, i)) {
                    d.dtype[i] = (cge_dtype)t;
                    st = oc_case_fill(&d, x->def, i);
                }
            if (st) {
                oc_case_free(&d);
                return st;
            }
            try_base(x, &d, bases, nb, last, lsz);
        }
        /* And the first generic candidate meta accepts. */
        for (int32_t k = 0;; k++) {
            cge_status st = oc_generic_case(x->def, k, (cge_dtype)t, &c);
            if (st == CGE_ERR_NOT_FOUND)
                break;
            if (st)
                return st;
            if (try_base(x, &c, bases, nb, last, lsz))
                break;
        }
        if (x->def->num_inputs == 0)
            break;
    }
    return CGE_OK;
}

/* Shape perturbations of `base` just past what it is: one dim +-1, a
 * trailing 1 added, the last dim dropped; for one input, and for every
 * input of the same shape and type variable together. */
static cge_status perturb(oc_run *x, const oc_base *base)
{
    int32_t done = 0;
    cge_status st = CGE_OK;
    const oc_case *b = &base->c;
    for (int32_t i = 0; !st && i < b->num_inputs && done < MAX_PERTURB; i++) {
        if (!b->present[i])
            continue;
        for (int group = 0; group < 2 && !st; group++) {
            int32_t members[OC_MAX_ARGS], nm = 0;
            for (int32_t j = 0; j < b->num_inputs; j++)
                if (j == i || (group && b->present[j] && cge_shape_equal(&b->shape[j], &b->shape[i]) &&
                               oc_same_type_var(x->def, j) == oc_same_type_var(x->def, i)))
                    members[nm++] = j;
            if (group && (nm < 2 || members[0] != i))
                continue;   /* a group is perturbed once, from its first member */
            int32_t r = b->shape[i].rank;
            /* variants: dim0-1, dim0+1, last-1, last+1, append 1, drop last */
            for (int v = 0; v < 6 && !st && done < MAX_PERTURB; v++) {
                cge_shape s = b->shape[i];
                if (v < 4) {
                    if (r == 0 || (v >= 2 && r == 1))
                        continue;
                    int32_t d = v < 2 ? 0 : r - 1;
                    s.dims[d] += (v % 2) ? 1 : -1;
                    if (s.dims[d] < 0)
                        continue;
                } else if (v == 4) {
                    if (r >= CGE_MAX_RANK)
                        continue;
                    s.dims[s.rank++] = 1;
                } else {
                    if (r == 0)
                        continue;
                    s.rank--;
                }
                oc_case c;
                st = oc_case_clone(b, x->def, &c);
                if (st)
                    break;
                for (int32_t m = 0; !st && m < nm; m++) {
                    c.shape[members[m]] = s;
                    st = oc_case_fill(&c, x->def, members[m]);
                }
                if (st) {
                    oc_case_free(&c);
                    break;
                }
                done++;
                cge_tensor_desc od[OC_MAX_ARGS];
                if (!run_meta(x, &c, od)) {
                    st = check_accepted(x, &c, od, true);
                } else {
                    char err[512];
                    snprintf(err, sizeof err, "%s", cge_last_error());
                    cge_clear_error();
                    st = check_refused(x, &c, base->od, err);
                }
                oc_case_free(&c);
            }
        }
    }
    return st;
}

/* Each input once with a dtype outside its schema set: meta must refuse. */
static cge_status dtype_violations(oc_run *x, const oc_base *base)
{
    static const cge_dtype pref[] = {CGE_F32, CGE_I64, CGE_BOOL, CGE_I32, CGE_F64,
                                     CGE_U8, CGE_F16, CGE_I8, CGE_U64};
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < base->c.num_inputs; i++) {
        if (!base->c.present[i])
            continue;
        const cge_arg_def *a = i < x->def->num_inputs ? &x->def->inputs[i]
                                                      : &x->def->inputs[x->def->num_inputs - 1];
        if (!a->dtypes)
            continue;
        cge_dtype bad = CGE_DTYPE_UNDEFINED;
        for (size_t k = 0; k < sizeof pref / sizeof pref[0] && !bad; k++)
            if (!(a->dtypes & CGE_DT(pref[k])))
                bad = pref[k];
        if (!bad)
            continue;
        oc_case c;
        st = oc_case_clone(&base->c, x->def, &c);
        if (st)
            break;
        c.dtype[i] = bad;
        st = oc_case_fill(&c, x->def, i);
        if (!st) {
            cge_tensor_desc od[OC_MAX_ARGS];
            char what[MSG_MAX - 128];
            if (!run_meta(x, &c, od)) {
                x->res->cases_accepted++;
                add_finding(x, CGE_OPCHECK_CONSTRAINT_PASSED, "%s: input %d (%s) is %s, outside "
                            "its schema's dtypes, and meta accepts it", oc_case_str(&c, x->def,
                            what, sizeof what), i, a->name, cge_dtype_name(bad));
            } else {
                char err[512];
                snprintf(err, sizeof err, "%s", cge_last_error());
                cge_clear_error();
                st = check_refused(x, &c, base->od, err);
            }
        }
        oc_case_free(&c);
    }
    return st;
}

/* The converter layer: an ONNX converter for this op must map onto a
 * definition that exists. */
static void check_converter(oc_run *x)
{
    const cge_converter_def *conv = cge_converter_find("onnx", x->def->domain, x->def->name,
                                                       x->def->since_version);
    if (!conv) {
        cge_clear_error();
        return;
    }
    if (!cge_op_find(conv->target_domain ? conv->target_domain : "", conv->target_op,
                     x->def->since_version) && !conv->convert)
        add_finding(x, CGE_OPCHECK_CONVERTER, "the ONNX converter maps onto '%s' (domain '%s'), "
                    "which has no definition for version %d", conv->target_op,
                    conv->target_domain ? conv->target_domain : "", x->def->since_version);
    cge_clear_error();
}

static cge_status check_op(oc_run *x)
{
    const char *skip = oc_builtin_skip(x->def->name);
    if (skip && !strcmp(x->res->origin, "builtin")) {
        x->res->skipped = skip;
        return CGE_OK;
    }
    check_converter(x);
    oc_base *bases = calloc(MAX_BASES, sizeof *bases);
    if (!bases)
        return cge_error(CGE_LAYER_NONE, CGE_ERR_NO_MEMORY, "op-check: out of memory");
    int32_t nb = 0;
    char last[512] = "";
    cge_status st = collect_bases(x, bases, &nb, last, sizeof last);
    if (!st && nb == 0) {
        char why[700];
        snprintf(why, sizeof why, "no input case passes meta (last: %s); give one with a case spec",
                 last[0] ? last : "none tried");
        x->res->skipped = keep_string(x->r, why);
    }
    for (int32_t i = 0; !st && i < nb; i++)
        st = check_accepted(x, &bases[i].c, bases[i].od, false);
    if (!st && nb)
        st = perturb(x, &bases[0]);
    if (!st && nb)
        st = dtype_violations(x, &bases[0]);
    for (int32_t i = 0; i < nb; i++)
        oc_case_free(&bases[i].c);
    free(bases);
    return st;
}

/* ---- driver ---------------------------------------------------------------- */

static bool selected(const cge_opcheck_options *o, const cge_op_def *d, const char *origin)
{
    if (o->op && strcmp(o->op, d->name))
        return false;
    if (o->domain && strcmp(o->domain, d->domain))
        return false;
    if (o->origin && strcmp(o->origin, origin))
        return false;
    return true;
}

cge_status cge_op_check(const cge_opcheck_options *opts, cge_opcheck_report **out)
{
    if (!out)
        return cge_error(CGE_LAYER_NONE, CGE_ERR_INVALID_ARG, "cge_op_check: out is NULL");
    *out = NULL;
    cge_opcheck_options o = {0};
    if (opts)
        o = *opts;
    if (o.num_libraries < 0 || (o.num_libraries && !o.libraries) || o.num_cases < 0 ||
        (o.num_cases && !o.cases))
        return cge_error(CGE_LAYER_NONE, CGE_ERR_INVALID_ARG,
                         "cge_op_check: bad library or case list");
    /* Operators the given libraries register: the registry grows at its end. */
    int32_t first = 0;
    if (o.num_libraries) {
        first = cge_op_count();
        for (int32_t i = 0; i < o.num_libraries; i++) {
            cge_status st = cge_load_op_library(o.libraries[i]);
            if (st)
                return st;
        }
    }
    cge_opcheck_report *r = calloc(1, sizeof *r);
    if (!r)
        return cge_error(CGE_LAYER_NONE, CGE_ERR_NO_MEMORY, "op-check: out of memory");
    oc_run x = {.opts = &o, .r = r, .runs = o.runs >= 2 ? o.runs : 3};
    cge_device_options dopt = {.num_threads = o.num_threads};
    cge_status st = cge_device_create_cpu(&dopt, &x.dev);
    if (!st)
        st = cge_stream_create(x.dev, &x.stream);
    int32_t n = cge_op_count();
    for (int32_t i = first; !st && i < n; i++) {
        const cge_op_def *d = cge_op_at(i);
        const char *origin = d ? cge_op_origin(d) : NULL;
        if (!d || !selected(&o, d, origin ? origin : ""))
            continue;
        if (r->num_ops == r->cap_ops) {
            int32_t nc = r->cap_ops ? r->cap_ops * 2 : 64;
            cge_opcheck_op_result *p = realloc(r->ops, sizeof *p * (size_t)nc);
            if (!p) {
                st = cge_error(CGE_LAYER_NONE, CGE_ERR_NO_MEMORY, "op-check: out of memory");
                break;
            }
            r->ops = p;
            r->cap_ops = nc;
        }
        cge_opcheck_op_result *res = &r->ops[r->num_ops++];
        *res = (cge_opcheck_op_result){.op = d->name, .domain = d->domain,
                                       .origin = origin ? origin : "?",
                                       .since_version = d->since_version};
        x.def = d;
        x.res = res;
        memset(x.per_kind, 0, sizeof x.per_kind);
        x.kernel_constraints = o.kernel_constraints == 1 ||
                               (o.kernel_constraints == 0 && strcmp(res->origin, "builtin"));
        st = check_op(&x);
        if (o.log)
            fprintf(o.log, "%-28s %-14s %s: %d accepted, %d refused, %d kernel runs, %d findings\n",
                    d->name, d->domain[0] ? d->domain : "(onnx)", res->skipped ? "skipped" : "checked",
                    res->cases_accepted, res->cases_refused, res->kernel_runs, res->num_findings);
    }
    cge_stream_destroy(x.stream);
    cge_device_destroy(x.dev);
    if (!st && r->num_ops == 0)
        st = cge_error(CGE_LAYER_SCHEMA, CGE_ERR_NOT_FOUND, "op-check: no operator matches%s%s%s%s",
                       o.op ? " name " : "", o.op ? o.op : "", o.domain ? " in domain " : "",
                       o.domain ? o.domain : "");
    if (st) {
        cge_opcheck_report_destroy(r);
        return st;
    }
    *out = r;
    return CGE_OK;
}

int32_t cge_opcheck_num_ops(const cge_opcheck_report *r) { return r ? r->num_ops : 0; }

const cge_opcheck_op_result *cge_opcheck_op(const cge_opcheck_report *r, int32_t i)
{
    return r && i >= 0 && i < r->num_ops ? &r->ops[i] : NULL;
}

int32_t cge_opcheck_num_findings(const cge_opcheck_report *r) { return r ? r->num_findings : 0; }

const cge_opcheck_finding *cge_opcheck_finding_at(const cge_opcheck_report *r, int32_t i)
{
    return r && i >= 0 && i < r->num_findings ? &r->findings[i] : NULL;
}

int32_t cge_opcheck_num_skipped(const cge_opcheck_report *r)
{
    int32_t n = 0;
    for (int32_t i = 0; r && i < r->num_ops; i++)
        n += r->ops[i].skipped != NULL;
    return n;
}

cge_status cge_opcheck_write(const cge_opcheck_report *r, FILE *f, bool verbose)
{
    if (!r || !f)
        return cge_error(CGE_LAYER_NONE, CGE_ERR_INVALID_ARG, "cge_opcheck_write: NULL argument");
    for (int32_t i = 0; verbose && i < r->num_ops; i++) {
        const cge_opcheck_op_result *o = &r->ops[i];
        fprintf(f, "  %-28s %-14s v%-3d %s%s: %d accepted, %d refused, %d kernel runs, %d findings\n",
                o->op, o->domain[0] ? o->domain : "(onnx)", o->since_version, o->origin,
                o->skipped ? " SKIPPED" : "", o->cases_accepted, o->cases_refused, o->kernel_runs,
                o->num_findings);
    }
    for (int32_t i = 0; i < r->num_findings; i++)
        fprintf(f, "FINDING [%s] %s\n", cge_opcheck_kind_name(r->findings[i].kind),
                r->findings[i].message);
    int32_t ops_with = 0, total = 0;
    for (int32_t i = 0; i < r->num_ops; i++) {
        ops_with += r->ops[i].num_findings > 0;
        total += r->ops[i].num_findings;
        if (r->ops[i].skipped)
            fprintf(f, "skipped %s%s%s: %s\n", r->ops[i].op, r->ops[i].domain[0] ? "@" : "",
                    r->ops[i].domain, r->ops[i].skipped);
    }
    fprintf(f, "op-check: %d operators, %d checked, %d skipped; %d findings in %d operators\n",
            r->num_ops, r->num_ops - cge_opcheck_num_skipped(r), cge_opcheck_num_skipped(r), total,
            ops_with);
    return CGE_OK;
}

void cge_opcheck_report_destroy(cge_opcheck_report *r)
{
    if (!r)
        return;
    for (int32_t i = 0; i < r->num_strings; i++)
        free(r->strings[i]);
    free(r->strings);
    free(r->ops);
    free(r->findings);
    free(r);
}
