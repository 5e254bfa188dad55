/* The `cge` command-line tool: what its subcommands share (argument parsing,
 * opening a model as .onnx or .cgm, sessions, inputs, .npy files, exit
 * codes). docs/cli.md describes every subcommand. */
#ifndef CGE_CLI_H
#define CGE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cge/cge.h"

/* Exit codes: success, a failure while working (files, compile, run), a
 * command line that cannot be acted on. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

#define CLI_MAX_LIST 64

/* Options every model-taking subcommand may accept. */
typedef struct cli_opts {
    const char *model;                      /* the positional MODEL */
    const char *out;                        /* -o */
    cge_onnx_input_shape shapes[CLI_MAX_LIST];
    char *shape_names[CLI_MAX_LIST];
    /* --input-shape ids:1,batch: a named dim (symbolic; NULL for a size). */
    char *shape_syms[CLI_MAX_LIST][CGE_MAX_RANK];
    bool shape_symbolic[CLI_MAX_LIST];
    int num_shapes;
    const char *sweeps[CLI_MAX_LIST];       /* --shapes (bench) */
    int num_sweeps;
    int opt_level;                          /* 0-3, -1: default */
    const char *disable[CLI_MAX_LIST];
    int num_disable;
    const char *libs[CLI_MAX_LIST];
    int num_libs;
    const char *dump_dir;
    const char *inputs[CLI_MAX_LIST];       /* "name=FILE.npy" */
    int num_inputs;
    const char *output_dir;
    cge_run_mode mode;
    int threads;
    int streams;
    long iterations, warmup;                /* -1: default */
    double duration_s;
    bool json;
    const char *after;
    unsigned seed;
    bool verify;
    cge_precision precision;                /* --precision fp32|bf16 */
    long kv_cache_max_len;                  /* --kv-cache-max-len N: static cache form */
    bool compare_precision;                 /* bench --compare-precision */
    int tp;                                 /* --tp: tensor-parallel degree (dist.c) */
    int pp;                                 /* --pp: pipeline stages (dist.c) */
    int micro_batches;                      /* --micro-batches: per run, with --pp */
} cli_opts;

/* A model opened for a subcommand. */
typedef struct cli_model {
    bool is_cgm;
    cge_graph *graph;     /* .onnx: as imported */
    cge_model *model;     /* .cgm */
    double open_ms;       /* import or load */
} cli_model;

/* Print "cge <cmd>: <message>" (the layered error) and return CLI_FAIL. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same for usage errors (CLI_USAGE), with a pointer to --help. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The last cge error as a failure. */
int cli_fail_last(const char *cmd, const char *context);

double cli_now_ms(void);

/* Frees what cli_parse allocated. */
void cli_opts_free(cli_opts *o);

/* Load the --custom-op-lib libraries, then open opts->model (.onnx: with the
 * --input-shape overrides, named dims made symbols of the graph). */
int cli_open(const char *cmd, const cli_opts *o, cli_model *m);
/* The graph inputs with dims that are not sizes, as "x [batch,4], ..." (an
 * empty string when every input is static). */
void cli_symbolic_inputs(const cge_graph *g, char *buf, size_t size);
void cli_close(cli_model *m);
/* The compile options the flags describe (disable list joined into buf). */
cge_compile_options cli_compile_options(const cli_opts *o, char *buf, size_t size);
/* A session running the model under id 1 (compiled: instance built). The
 * time spent adding and compiling goes to *prepare_ms. */
int cli_session(const char *cmd, const cli_opts *o, cli_model *m, cge_session **out,
                double *prepare_ms);

/* Inputs for graph 1 of `s`: from --input files, the rest random (seeded). */
typedef struct cli_tensors {
    int n;
    cge_tensor t[CLI_MAX_LIST];
    char *names[CLI_MAX_LIST];
} cli_tensors;
int cli_make_inputs(const char *cmd, const cli_opts *o, cge_session *s, cli_tensors *in);
/* The same at given shapes (shapes[i] for input i; no --input files). */
int cli_make_inputs_at(const char *cmd, const cli_opts *o, cge_session *s,
                       const cge_shape *shapes, cli_tensors *in);
/* Output buffers for graph 1, sized from the compiled shapes (dynamic ones
 * after a first run that reports them). */
int cli_make_outputs(const char *cmd, cge_session *s, cli_tensors *out);
/* Run once; when outputs were too small (value-dependent shapes), resize and
 * run again. */
cge_status cli_run_once(cge_session *s, cli_tensors *in, cli_tensors *out,
                        const cge_run_options *ro);
void cli_tensors_free(cli_tensors *t);

/* .npy files (format 1.0 to 3.0, little-endian, C order). bfloat16 has no
 * numpy dtype: it is read from and written as '<u2' (its bits). */
cge_status cli_npy_read(const char *path, cge_tensor *t);        /* t->data malloc'ed */
cge_status cli_npy_write(const char *path, const cge_tensor *t);
const char *cli_npy_descr(cge_dtype d);

/* JSON string output with escapes. */
void cli_json_str(FILE *f, const char *s);

/* Distribution (dist.c): --tp N under mpirun. The session options for it,
 * this process's rank, rank 0 alone printing to stdout, and the bench's
 * per-rank and end-to-end report. */
void cli_dist_session_options(const cli_opts *o, cge_session_options *so);
int cli_dist_rank(cge_session *s);
void cli_dist_quiet_others(cge_session *s);
void cli_dist_bench_report(cge_session *s, const double *sorted_ms, long n, long runs);

/* Subcommands. */
int cmd_compile(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_dot(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_opcheck(int argc, char **argv);
int cmd_quantize(int argc, char **argv);

/* Option parsing shared by the subcommands: `allowed` lists the long option
 * names the subcommand takes ("o,input-shape,opt-level"). CLI_OK, or the
 * exit code to return (help printed: CLI_OK with *done set). */
int cli_parse(const char *cmd, int argc, char **argv, const char *allowed, const char *help,
              cli_opts *o, bool *done);

#endif
