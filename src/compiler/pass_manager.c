/* The pass manager: the four stages and their ordered passes, options
 * (level, enable/disable by name, dumps, verification, statistics) and
 * cge_compile, which runs them over a private copy of the graph. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compiler/compiler_internal.h"

typedef struct pass_entry {
    const char *stage;
    const char *name;
    cc_pass_fn fn;
    cge_opt_level level;   /* lowest level that runs it; DEFAULT (0): opt-in only */
    bool mandatory;        /* cannot be disabled */
    const char *needs;     /* the pass whose result it reads (NULL: none); that pass
                              cannot be disabled while this one runs */
    const char *what;      /* what it reads of it, for the message */
} pass_entry;

static const pass_entry passes[] = {
    {"prepare", "verify", cc_pass_verify, CGE_OPT_NONE, true, NULL, NULL},
    {"prepare", "infer", cc_pass_infer, CGE_OPT_NONE, true, NULL, NULL},
    {"prepare", "kv_cache_static", cc_pass_kv_cache_static, CGE_OPT_NONE, false, NULL, NULL},
    /* Sequences of elements known now become their tensors (a graph left
     * with sequences runs node by node: see cge_compile). */
    {"prepare", "fold_sequences", cc_pass_fold_sequences, CGE_OPT_NONE, false, NULL, NULL},
    {"prepare", "normalize", cc_pass_normalize, CGE_OPT_NONE, false, NULL, NULL},
    /* first: the passes after it see float16/bfloat16 models' nodes as
     * float32 ones */
    {"optimize", "widen_half", cc_pass_widen_half, CGE_OPT_FUSE, false, NULL, NULL},
    {"optimize", "fuse_qdq", cc_pass_fuse_qdq, CGE_OPT_FUSE, false, NULL, NULL},
    {"optimize", "fuse_dq_matmul", cc_pass_fuse_dq_matmul, CGE_OPT_FUSE, false, NULL, NULL},
    {"optimize", "fold_constants", cc_pass_fold_constants, CGE_OPT_EXACT, false, NULL, NULL},
    /* right after folding (the Slices' bounds are constants by then), before
     * remove_noops and fuse_attention: the pieces' Transposes compose with
     * the ones after them and fold into Attention's operands */
    {"optimize", "split_matmul_columns", cc_pass_split_matmul_columns, CGE_OPT_EXACT, false, NULL, NULL},
    {"optimize", "remove_noops", cc_pass_remove_noops, CGE_OPT_EXACT, false, NULL, NULL},
    {"optimize", "simplify_algebra", cc_pass_simplify_algebra, CGE_OPT_EXACT, false, NULL, NULL},
    {"optimize", "cse", cc_pass_cse, CGE_OPT_EXACT, false, NULL, NULL},
    {"optimize", "fuse_attention", cc_pass_fuse_attention, CGE_OPT_FUSE, false, NULL, NULL},
    {"optimize", "dce", cc_pass_dce, CGE_OPT_EXACT, false, NULL, NULL},
    {"optimize", "fuse_conv_bn", cc_pass_fuse_conv_bn, CGE_OPT_FUSE, false, NULL, NULL},
    /* fuse_gelu first: a Conv takes the Gelu it makes as its activation. */
    {"optimize", "fuse_gelu", cc_pass_fuse_gelu, CGE_OPT_FUSE, false, NULL, NULL},
    {"optimize", "fuse_conv_activation", cc_pass_fuse_conv_activation, CGE_OPT_FUSE, false, NULL, NULL},
    {"optimize", "fuse_layernorm", cc_pass_fuse_layernorm, CGE_OPT_FUSE, false, NULL, NULL},
    {"optimize", "fuse_matmul_epilogue", cc_pass_fuse_matmul_epilogue, CGE_OPT_FUSE, false, NULL, NULL},
    /* after fuse_matmul_epilogue: a residual a FusedMatMul took needs no pass */
    {"optimize", "fuse_skip_layernorm", cc_pass_fuse_skip_layernorm, CGE_OPT_FUSE, false, NULL, NULL},
    {"optimize", "fuse_elementwise", cc_pass_fuse_elementwise, CGE_OPT_FUSE, false, NULL, NULL},
    {"optimize", "precision", cc_pass_precision, CGE_OPT_NONE, false, NULL, NULL},
    {"optimize", "channels_last_ops", cc_pass_channels_last_ops, CGE_OPT_LAYOUT, false, NULL, NULL},
    {"optimize", "dce", cc_pass_dce, CGE_OPT_EXACT, false, NULL, NULL},
    {"optimize", "infer", cc_pass_infer_changes, CGE_OPT_NONE, true, "infer", "inferred descriptors"},
    {"partition", "assign_engines", cc_pass_assign_engines, CGE_OPT_NONE, true, NULL, NULL},
    {"partition", "insert_conversions", cc_pass_insert_conversions, CGE_OPT_NONE, true, NULL, NULL},
    {"partition", "layout_channels_last", cc_pass_layout_channels_last, CGE_OPT_LAYOUT, false, NULL, NULL},
    {"partition", "fuse_quantize_reorder", cc_pass_fuse_quantize_reorder, CGE_OPT_LAYOUT, false, NULL, NULL},
    {"partition", "fuse_qconv_add", cc_pass_fuse_qconv_add, CGE_OPT_FUSE, false, NULL, NULL},
    {"build", "order", cc_pass_order, CGE_OPT_NONE, true, NULL, NULL},
    {"build", "schedule", cc_pass_schedule, CGE_OPT_NONE, false, "order", "step order"},
    {"build", "plan_streams", cc_pass_plan_streams, CGE_OPT_NONE, false, "order", "step order"},
    {"build", "plan_memory", cc_pass_plan_memory, CGE_OPT_NONE, true, "order", "step order"},
};
#define NUM_PASSES ((int32_t)(sizeof passes / sizeof passes[0]))

static const char *const stage_names[4] = {"prepare", "optimize", "partition", "build"};

int32_t cge_compiler_num_passes(void) { return NUM_PASSES; }

bool cge_compiler_pass_info(int32_t i, const char **stage, const char **name,
                            cge_opt_level *default_level)
{
    if (i < 0 || i >= NUM_PASSES)
        return false;
    if (stage)
        *stage = passes[i].stage;
    if (name)
        *name = passes[i].name;
    if (default_level)
        *default_level = passes[i].level;
    return true;
}

/* Whether `name` is an item of the comma-separated `list`. */
static bool in_list(const char *list, const char *name)
{
    if (!list)
        return false;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if ((size_t)(e - p) == n && !strncmp(p, name, n))
            return true;
        p = e;
    }
    return false;
}

/* Unknown names in enable/disable are mistakes worth reporting. */
static cge_status check_list(const char *list, const char *what)
{
    if (!list)
        return CGE_OK;
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if (e > p) {
            bool found = false;
            for (int32_t i = 0; i < NUM_PASSES && !found; i++)
                found = strlen(passes[i].name) == (size_t)(e - p) &&
                        !strncmp(passes[i].name, p, (size_t)(e - p));
            if (!found)
                return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                                 "compile options: no pass named '%.*s' in '%s' (%s)",
                                 (int)(e - p), p, list, what);
        }
        p = e;
    }
    return CGE_OK;
}

static bool pass_enabled(const cc_ctx *ctx, const pass_entry *pe)
{
    if (pe->mandatory)
        return true;
    if (in_list(ctx->opts.disable, pe->name))
        return false;
    if (in_list(ctx->opts.enable, pe->name))
        return true;
    return pe->level != CGE_OPT_DEFAULT && ctx->level >= pe->level;
}

static cge_status dump_graph(const char *dir, int32_t k, const pass_entry *pe, const cge_graph *g)
{
    char path[4096];
    cge_status st = CGE_OK;
    const char *ext[2] = {"dot", "txt"};
    for (int e = 0; e < 2 && !st; e++) {
        snprintf(path, sizeof path, "%s/%02d_%s_%s.%s", dir, (int)k, pe->stage, pe->name, ext[e]);
        FILE *f = fopen(path, "w");
        if (!f)
            return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "dump: cannot write '%s': %s", path,
                             strerror(errno));
        st = e == 0 ? cge_graph_write_dot(g, f) : cge_graph_write_text(g, f);
        fclose(f);
    }
    return st;
}

static cge_status record_stats(cc_ctx *ctx, const pass_entry *pe, double ms, int32_t before,
                               int32_t after)
{
    cge_plan_pass_stats ps = {
        .stage = pe->stage, .name = pe->name, .ms = ms, .nodes_before = before,
        .nodes_after = after, .removed = ctx->removed, .fused = ctx->fused, .added = ctx->added};
    return cge__plan_add_pass_stats(ctx->build.plan, &ps);
}

static cge_status set_input_shapes(cge_graph *g, const cge_shape *shapes, int32_t n)
{
    int32_t gi = cge_graph_num_inputs(g);
    if (n != gi)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "compile: graph '%s' has %d inputs; %d shapes given", cge_graph_name(g),
                         gi, n);
    /* One symbol ("batch"), one size: else kernels would read one for the other. */
    cge_dim_conflict dc;
    if (cge_graph_find_dim_conflict(g, shapes, n, &dc)) {
        const char *sym = cge_graph_dim_symbol_name(g, dc.symbol);
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_SHAPE,
                         "compile: symbolic dimension '%s' is %lld in input '%s' (dim %d) but "
                         "%lld in input '%s' (dim %d)",
                         sym ? sym : "?", (long long)dc.size[0], cge_graph_input(g, dc.input[0]),
                         (int)dc.axis[0], (long long)dc.size[1], cge_graph_input(g, dc.input[1]),
                         (int)dc.axis[1]);
    }
    char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
    for (int32_t i = 0; i < n; i++) {
        cge_tensor_desc d;
        cge_status st = cge_graph_get_desc(g, cge_graph_input(g, i), &d);
        if (st)
            return st;
        if (d.type != CGE_TYPE_TENSOR)
            continue;   /* a sequence or optional: its elements' shapes come at run time */
        bool fits = shapes[i].rank == d.shape.rank && cge_shape_is_static(&shapes[i]);
        for (int32_t k = 0; fits && k < d.shape.rank; k++)
            fits = d.shape.dims[k] < 0 || d.shape.dims[k] == shapes[i].dims[k];
        if (!fits)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_SHAPE,
                             "compile: input '%s' is declared %s; %s does not fit", d.name,
                             cge_shape_str(&d.shape, a, sizeof a),
                             cge_shape_str(&shapes[i], b, sizeof b));
        if ((st = cge_graph_set_desc(g, d.name, d.dtype, &shapes[i])))
            return st;
    }
    return CGE_OK;
}

/* Disabling a mandatory pass, or one whose result an enabled pass reads,
 * would build a broken plan: refuse, naming both. */
static cge_status check_dependencies(const cc_ctx *ctx)
{
    for (int32_t i = 0; i < NUM_PASSES; i++) {
        const pass_entry *pe = &passes[i];
        if (pe->mandatory && in_list(ctx->opts.disable, pe->name))
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                             "compile options: pass '%s' (%s) cannot be disabled: every plan "
                             "needs it",
                             pe->name, pe->stage);
        if (!pe->needs || !pass_enabled(ctx, pe))
            continue;
        for (int32_t k = 0; k < NUM_PASSES; k++)
            if (!strcmp(passes[k].name, pe->needs) && !pass_enabled(ctx, &passes[k]))
                return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                                 "compile options: pass '%s' cannot be disabled: pass '%s' "
                                 "needs its %s",
                                 pe->needs, pe->name, pe->what);
    }
    return CGE_OK;
}

/* Whether every value has a known dtype and a static shape. */
static bool shapes_known(const cge_graph *g)
{
    for (int32_t id = 0; id < cge_graph_num_values(g); id++) {
        cge_tensor_desc d;
        if (cge_graph_value_kind(g, id) == CGE_VALUE_UNDEFINED)
            continue;
        if (cge_graph_value_desc(g, id, &d) || !cge_dtype_valid(d.dtype) ||
            !cge_shape_is_static(&d.shape))
            return false;
    }
    return true;
}

/* Whether every input of g has a static shape. */
static bool inputs_static(const cge_graph *g)
{
    for (int32_t i = 0; i < cge_graph_num_inputs(g); i++) {
        cge_tensor_desc d;
        if (cge_graph_value_desc(g, cge_graph_value_id(g, cge_graph_input(g, i)), &d) ||
            !cge_shape_is_static(&d.shape))
            return false;
    }
    return true;
}

static int engine_cmp(const void *a, const void *b)
{
    const cge_engine_desc *x = a, *y = b;
    return (y->priority > x->priority) - (y->priority < x->priority);
}

static cge_status resolve_options(cc_ctx *ctx, const cge_compile_options *opts)
{
    if (opts)
        ctx->opts = *opts;
    if (!ctx->opts.disable) /* for A/B runs of a pass without code changes */
        ctx->opts.disable = getenv("CGE_DISABLE_PASSES");
    cge_status st = check_list(ctx->opts.disable, "disable");
    if (!st)
        st = check_list(ctx->opts.enable, "enable");
    if (st)
        return st;
    ctx->level = ctx->opts.opt_level;
    if ((int)ctx->level < CGE_OPT_DEFAULT || ctx->level > CGE_OPT_LAYOUT)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG,
                         "compile options: opt_level %d is out of range", (int)ctx->level);
    if (ctx->level == CGE_OPT_DEFAULT) {
        const char *env = getenv("CGE_OPT_LEVEL");
        /* Level 3 measured faster on every CNN here (mobilenet_v2 2.2x) and
         * changes nothing else: channels-last only touches convolutions. */
        ctx->level = CGE_OPT_LAYOUT;
        if (env && env[0] >= '0' && env[0] <= '3' && !env[1])
            ctx->level = (cge_opt_level)(env[0] - '0' + 1);
        else if (env && env[0])
            fprintf(stderr, "cge: ignoring CGE_OPT_LEVEL='%s' (want 0-3)\n", env);
    }
    if (!ctx->opts.dump_dir) {
        const char *env = getenv("CGE_DUMP_DIR");
        ctx->opts.dump_dir = env && env[0] ? env : NULL;
    }
#ifndef NDEBUG
    ctx->opts.verify_each_pass = true;
#endif
    if (ctx->opts.num_streams <= 0)
        ctx->opts.num_streams = 1;
    if (ctx->opts.num_streams > 16)
        ctx->opts.num_streams = 16;
    if (!ctx->opts.fold_limit_bytes)
        ctx->opts.fold_limit_bytes = (size_t)1 << 20;
    static const cge_engine_desc cpu = {.name = "cpu"};
    const cge_engine_desc *src = ctx->opts.engines ? ctx->opts.engines : &cpu;
    int32_t n = ctx->opts.engines ? ctx->opts.num_engines : 1;
    if (n <= 0)
        return cge_error(CGE_LAYER_ENGINE, CGE_ERR_INVALID_ARG, "compile options: no engines");
    ctx->engines = malloc(sizeof *ctx->engines * (size_t)n);
    if (!ctx->engines)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "compile: out of memory");
    for (int32_t i = 0; i < n; i++) {
        if (!src[i].name || !src[i].name[0])
            return cge_error(CGE_LAYER_ENGINE, CGE_ERR_INVALID_ARG,
                             "compile options: engine %d has no name", (int)i);
        ctx->engines[i] = src[i];
    }
    ctx->num_engines = n;
    /* The CPU engine is always the last resort (border conversions use it). */
    bool has_cpu = false;
    for (int32_t i = 0; i < n; i++)
        has_cpu |= !strcmp(ctx->engines[i].name, "cpu");
    if (!has_cpu) {
        cge_engine_desc *e = realloc(ctx->engines, sizeof *e * (size_t)(n + 1));
        if (!e)
            return cge_error(CGE_LAYER_GRAPH, CGE_ERR_NO_MEMORY, "compile: out of memory");
        ctx->engines = e;
        ctx->engines[n] = (cge_engine_desc){.name = "cpu", .priority = INT32_MIN};
        ctx->num_engines = ++n;
    }
    /* Stable for equal priorities: insertion sort keeps the caller's order. */
    for (int32_t i = 1; i < n; i++)
        for (int32_t j = i; j > 0 && engine_cmp(&ctx->engines[j - 1], &ctx->engines[j]) > 0; j--) {
            cge_engine_desc t = ctx->engines[j];
            ctx->engines[j] = ctx->engines[j - 1];
            ctx->engines[j - 1] = t;
        }
    ctx->opts.engines = NULL;
    ctx->opts.num_engines = 0;
    return check_dependencies(ctx);
}

static void ctx_release(cc_ctx *ctx)
{
    cc_forget_known(ctx);
    cge_stream_destroy(ctx->stream);
    if (ctx->own_dev)
        cge_device_destroy(ctx->dev);
    free(ctx->engines);
    free(ctx->node_engine);
    free(ctx->node_kernel);
    free(ctx->node_def);
    free(ctx->node_space);
    free(ctx->build.order);
    cc_stream_plan *sp = &ctx->build.streams;
    free(sp->step_stream);
    free(sp->step_pos);
    free(sp->vc);
    free(sp->wait_start);
    free(sp->waits);
    free(sp->record_event);
}

cge_status cge_compile(const cge_graph *g, const cge_shape *input_shapes, int32_t num_inputs,
                       const cge_compile_options *opts, cge_plan **out)
{
    if (!out || !g)
        return cge_error(CGE_LAYER_GRAPH, CGE_ERR_INVALID_ARG, "cge_compile: graph or out is NULL");
    *out = NULL;
    double t0 = cc_now_ms();
    cc_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    cge_plan *p = NULL;
    cge_status st = cge__plan_create(&p);
    ctx.build.plan = p;
    if (!st)
        st = resolve_options(&ctx, opts);
    cge_graph *pg = NULL;
    if (!st)
        st = cge_graph_clone(g, &pg);
    if (!st)
        cge__plan_set_graph(p, pg);
    if (!st && input_shapes)
        st = set_input_shapes(pg, input_shapes, num_inputs);
    if (!st && ctx.opts.dump_dir)
        mkdir(ctx.opts.dump_dir, 0777); /* may exist; a real failure shows at fopen */
    if (st) {
        ctx_release(&ctx);
        cge_plan_destroy(p);
        return st;
    }
    ctx.dev = ctx.opts.device;
    cge_plan_stats *ps = cge__plan_stats_mut(p);
    ps->nodes_in = cge_graph_num_nodes(pg);
    int32_t dumped = 0;
    bool incomplete = false, symbolic = false, sized_inputs = false;
    for (int32_t i = 0; !st && !incomplete && i < NUM_PASSES; i++) {
        const pass_entry *pe = &passes[i];
        if (!pass_enabled(&ctx, pe))
            continue;
        /* Shapes still unknown after prepare: the graph is optimised as it
         * is, dims symbolic, once for every size (folding and fusion work on
         * the weights happen here, not per signature); build needs every
         * size, partition the inputs' (below), so the plan stops there, for
         * a caller that compiles it again per signature or runs it node by
         * node. */
        if (ctx.opts.allow_incomplete && !symbolic && ctx.stage &&
            !strcmp(ctx.stage, "prepare") && strcmp(pe->stage, "prepare")) {
            symbolic = !shapes_known(pg);
            sized_inputs = symbolic && inputs_static(pg);
        }
        /* Sequences or optionals left after prepare (their folding into
         * tensors is a prepare pass): the graph runs node by node as
         * prepared, since their descriptors may be partial. */
        if (ctx.stage && !strcmp(ctx.stage, "prepare") && strcmp(pe->stage, "prepare") &&
            cge_graph_has_non_tensor_values(pg)) {
            if (!ctx.opts.allow_incomplete) {
                st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_UNSUPPORTED,
                               "compile: graph '%s' keeps sequence or optional values that only "
                               "a session's node-by-node run can carry",
                               cge_graph_name(pg));
                break;
            }
            incomplete = true;
            break;
        }
        /* A symbolic plan (symbolic_plan) goes on with the dims symbolic:
         * cge_plan_specialize gives its sizes per signature. One stream:
         * the stream planner weighs branches by bytes. */
        if (symbolic && ctx.opts.symbolic_plan)
            ctx.opts.num_streams = 1;
        /* Inputs of known sizes, shapes that follow computed values (a
         * detector's NonZero): the graph is partitioned too, so that the
         * node-by-node run gets the layout passes' channels-last
         * convolutions; only build needs every size. */
        if (symbolic && !ctx.opts.symbolic_plan &&
            ((!strcmp(pe->stage, "partition") && !sized_inputs) ||
             !strcmp(pe->stage, "build"))) {
            incomplete = true;
            break;
        }
        ctx.stage = pe->stage;
        ctx.removed = ctx.fused = ctx.added = 0;
        int32_t before = cge_graph_num_nodes(pg);
        double ts = cc_now_ms();
        st = pe->fn(&ctx, pg);
        if (!st)
            st = cge_graph_compact(pg);
        double ms = cc_now_ms() - ts;
        for (int s = 0; s < 4; s++)
            if (!strcmp(stage_names[s], pe->stage))
                ps->stage_ms[s] += ms;
        bool graph_stage = strcmp(pe->stage, "build") != 0;
        if (!st && ctx.opts.verify_each_pass && graph_stage && pe->fn != cc_pass_verify) {
            st = cge_graph_verify(pg);
            if (st) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", cge_last_error());
                st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL,
                               "compile: the graph is broken after pass '%s': %s", pe->name, msg);
            }
        }
        if (!st && ctx.opts.collect_stats)
            st = record_stats(&ctx, pe, ms, before, cge_graph_num_nodes(pg));
        if (!st && ctx.opts.dump_dir && graph_stage)
            st = dump_graph(ctx.opts.dump_dir, dumped++, pe, pg);
    }
    if (!st && !incomplete && !cge_plan_steps(p))
        st = cge_error(CGE_LAYER_GRAPH, CGE_ERR_INTERNAL, "compile: no plan was built");
    if (!st) {
        ps->compile_ms = cc_now_ms() - t0;
        ps->nodes_out = cge_plan_num_steps(p);
        ps->num_subgraphs = ctx.num_subgraphs;
        ps->num_conversions = ctx.num_conversions;
        ps->opt_level = ctx.level;
        ps->incomplete = incomplete;
        ps->symbolic = symbolic && !incomplete;
    }
    ctx_release(&ctx);
    if (st) {
        cge_plan_destroy(p);
        return st;
    }
    *out = p;
    return CGE_OK;
}
