/* `cge quantize MODEL.onnx -o OUT.onnx --calibrate DIR [...]`: reads the
 * calibration .npy files and hands everything to cge_onnx_quantize (the
 * library does the quantizing; this file parses flags and folders). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char help[] =
    "usage: cge quantize MODEL.onnx -o OUT.onnx --calibrate DIR [--method minmax|entropy|percentile]\n"
    "                    [--percentile P] [--per-channel] [--activations uint8|int8|int8-symmetric]\n"
    "                    [--exclude NODE]... [--threads N]\n"
    "       cge quantize MODEL.onnx -o OUT.onnx --weights-only int8|int4 [--block-size N]\n"
    "                    [--format nbits|qdq] [--exclude NODE]...\n"
    "\n"
    "Writes a standard QDQ ONNX model (QuantizeLinear/DequantizeLinear around Conv, MatMul,\n"
    "Gemm, Add, Mul, Concat, pooling, ...: u8 activations, s8 weights, int32 biases), or with\n"
    "--weights-only com.microsoft MatMulNBits for MatMuls with constant weights.\n"
    "\n"
    "  --calibrate DIR    calibration samples as .npy files, one of these layouts:\n"
    "                       DIR/<sample>/<input>.npy   a folder per sample\n"
    "                       DIR/<input>_<k>.npy        sample k of each input\n"
    "                       DIR/*.npy                  (one-input models) a file per sample\n"
    "  --method M         activation ranges: minmax (default), entropy (KL), percentile\n"
    "  --percentile P     for --method percentile (default 99.999)\n"
    "  --per-channel      one weight scale per output channel (opset 13)\n"
    "  --activations T    uint8 (default) or int8 with zero points, or int8-symmetric\n"
    "  --weights-only B   int8 or int4 MatMulNBits weights, float activations (no calibration)\n"
    "  --block-size N     weight block along K (default 32)\n"
    "  --format F         weight-only form: nbits (com.microsoft MatMulNBits, default) or\n"
    "                     qdq (DequantizeLinear with block_size, uint4/uint8: opset 21)\n"
    "  --exclude NODE     leave this node in float (repeatable)\n"
    "  --threads N        threads of the calibration runs\n";

#define MAX_SAMPLES 4096

typedef struct calib_set {
    cge_tensor *t;          /* samples * inputs, sample-major */
    char **names;           /* input names, owned */
    int n_inputs, n_samples;
} calib_set;

static void calib_free(calib_set *c)
{
    for (int i = 0; c->t && i < c->n_inputs * c->n_samples; i++)
        free(c->t[i].data);
    free(c->t);
    for (int i = 0; c->names && i < c->n_inputs; i++)
        free(c->names[i]);
    free(c->names);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of `dir` (dirs: subfolders; else .npy files). */
static int list_dir(const char *dir, bool dirs, char ***out, int *n)
{
    DIR *d = opendir(dir);
    *out = NULL;
    *n = 0;
    if (!d)
        return cli_fail("quantize", "[io] %s: cannot open the calibration folder: %m", dir);
    char **v = NULL;
    int cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st))
            continue;
        size_t len = strlen(e->d_name);
        bool ok = dirs ? S_ISDIR(st.st_mode)
                       : S_ISREG(st.st_mode) && len > 4 && !strcmp(e->d_name + len - 4, ".npy");
        if (!ok)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(v, sizeof(char *) * (size_t)cap);
            if (!nv)
                break;
            v = nv;
        }
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(v, (size_t)*n, sizeof(char *), cmp_str);
    *out = v;
    return CLI_OK;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int read_npy(const char *path, const char *input, cge_tensor *t)
{
    if (cli_npy_read(path, t))
        return cli_fail_last("quantize", NULL);
    t->name = input;
    return CLI_OK;
}

/* Sample k of input `name` in a flat folder: "<name>_<k>.npy". */
static int flat_index(const char *file, const char *name)
{
    size_t ln = strlen(name), lf = strlen(file);
    if (lf < ln + 6 || strncmp(file, name, ln) || file[ln] != '_')
        return -1;
    int k = 0;
    const char *p = file + ln + 1;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++)
        k = k * 10 + (*p - '0');
    return strcmp(p, ".npy") || k >= MAX_SAMPLES ? -1 : k;
}

static int load_calibration(const char *dir, const cge_graph *g, calib_set *c)
{
    c->n_inputs = cge_graph_num_inputs(g);
    c->names = calloc((size_t)c->n_inputs + 1, sizeof(char *));
    for (int i = 0; i < c->n_inputs; i++)
        c->names[i] = strdup(cge_graph_input(g, i));
    char **subs = NULL, **files = NULL;
    int n_subs = 0, n_files = 0, rc = list_dir(dir, true, &subs, &n_subs);
    if (rc)
        return rc;
    char path[4096];
    if (n_subs) {
        c->n_samples = n_subs;
        c->t = calloc((size_t)(n_subs * c->n_inputs) + 1, sizeof(cge_tensor));
        for (int k = 0; !rc && k < n_subs; k++)
            for (int i = 0; !rc && i < c->n_inputs; i++) {
                snprintf(path, sizeof path, "%s/%s/%s.npy", dir, subs[k], c->names[i]);
                rc = read_npy(path, c->names[i], &c->t[k * c->n_inputs + i]);
            }
        free_list(subs, n_subs);
        return rc;
    }
    free_list(subs, n_subs);
    if ((rc = list_dir(dir, false, &files, &n_files)))
        return rc;
    if (!n_files) {
        free_list(files, n_files);
        return cli_fail("quantize", "[io] %s: no .npy files and no sample folders (cge quantize "
                                    "--help describes the layouts)", dir);
    }
    /* Flat "<input>_<k>.npy" if every file is named so; else one file per
     * sample for a one-input model. */
    int max_k = -1;
    bool flat = true;
    for (int f = 0; flat && f < n_files; f++) {
        int k = -1;
        for (int i = 0; k < 0 && i < c->n_inputs; i++)
            k = flat_index(files[f], c->names[i]);
        flat = k >= 0;
        if (k > max_k)
            max_k = k;
    }
    if (!flat && c->n_inputs != 1) {
        free_list(files, n_files);
        return cli_fail("quantize", "[io] %s: the model has %d inputs: name the files "
                                    "<input>_<k>.npy or use a folder per sample",
                        dir, c->n_inputs);
    }
    c->n_samples = flat ? max_k + 1 : n_files;
    c->t = calloc((size_t)(c->n_samples * c->n_inputs) + 1, sizeof(cge_tensor));
    for (int k = 0; !rc && k < c->n_samples; k++)
        for (int i = 0; !rc && i < c->n_inputs; i++) {
            if (flat)
                snprintf(path, sizeof path, "%s/%s_%d.npy", dir, c->names[i], k);
            else
                snprintf(path, sizeof path, "%s/%s", dir, files[k]);
            rc = read_npy(path, c->names[i], &c->t[k * c->n_inputs + i]);
        }
    free_list(files, n_files);
    return rc;
}

int cmd_quantize(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *dir = NULL, *method = "minmax", *wo = NULL;
    const char *fmt = NULL, *acts = NULL;
    const char *exclude[CLI_MAX_LIST];
    cge_quantize_options o = {.exclude = exclude};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            return CLI_OK;
        }
        if (!strcmp(a, "--per-channel")) {
            o.per_channel = true;
            continue;
        }
        if (a[0] != '-') {
            if (model)
                return cli_usage("quantize", "one model only ('%s' and '%s')", model, a);
            model = a;
            continue;
        }
        if (!v)
            return cli_usage("quantize", "%s needs a value", a);
        i++;
        if (!strcmp(a, "-o") || !strcmp(a, "--output"))
            out = v;
        else if (!strcmp(a, "--calibrate"))
            dir = v;
        else if (!strcmp(a, "--method"))
            method = v;
        else if (!strcmp(a, "--percentile"))
            o.percentile = atof(v);
        else if (!strcmp(a, "--weights-only"))
            wo = v;
        else if (!strcmp(a, "--block-size"))
            o.block_size = atoi(v);
        else if (!strcmp(a, "--format"))
            fmt = v;
        else if (!strcmp(a, "--activations"))
            acts = v;
        else if (!strcmp(a, "--threads"))
            o.num_threads = atoi(v);
        else if (!strcmp(a, "--exclude") && o.num_exclude < CLI_MAX_LIST)
            exclude[o.num_exclude++] = v;
        else
            return cli_usage("quantize", "unknown option '%s'", a);
    }
    if (!model || !out)
        return cli_usage("quantize", "a model and -o OUT.onnx are needed");
    if (!strcmp(method, "minmax"))
        o.method = CGE_QUANT_MINMAX;
    else if (!strcmp(method, "entropy"))
        o.method = CGE_QUANT_ENTROPY;
    else if (!strcmp(method, "percentile"))
        o.method = CGE_QUANT_PERCENTILE;
    else
        return cli_usage("quantize", "--method is minmax, entropy or percentile, not '%s'", method);
    if (o.percentile && (o.percentile <= 0 || o.percentile > 100))
        return cli_usage("quantize", "--percentile is in (0, 100]");
    if (acts && !strcmp(acts, "int8"))
        o.activation_type = 1;
    else if (acts && !strcmp(acts, "int8-symmetric"))
        o.activation_type = 2;
    else if (acts && strcmp(acts, "uint8"))
        return cli_usage("quantize", "--activations is uint8, int8 or int8-symmetric, not '%s'",
                         acts);
    if (fmt && !strcmp(fmt, "qdq"))
        o.weights_only_format = 1;
    else if (fmt && strcmp(fmt, "nbits"))
        return cli_usage("quantize", "--format is nbits or qdq, not '%s'", fmt);
    if (fmt && !wo)
        return cli_usage("quantize", "--format goes with --weights-only");
    if (wo) {
        if (!strcmp(wo, "int8") || !strcmp(wo, "8"))
            o.weights_only_bits = 8;
        else if (!strcmp(wo, "int4") || !strcmp(wo, "4"))
            o.weights_only_bits = 4;
        else
            return cli_usage("quantize", "--weights-only is int8 or int4, not '%s'", wo);
    } else if (!dir) {
        return cli_usage("quantize", "--calibrate DIR is needed (or --weights-only int8|int4)");
    }
    double t0 = cli_now_ms();
    calib_set c = {0};
    if (!wo) {
        cge_graph *g = NULL;
        if (cge_onnx_import_file(model, NULL, &g))
            return cli_fail_last("quantize", NULL);
        int rc = load_calibration(dir, g, &c);
        cge_graph_destroy(g);
        if (rc) {
            calib_free(&c);
            return rc;
        }
        o.samples = c.t;
        o.num_samples = c.n_samples;
        o.inputs_per_sample = c.n_inputs;
    }
    cge_quantize_report r;
    cge_status st = cge_onnx_quantize(model, out, &o, &r);
    calib_free(&c);
    if (st)
        return cli_fail_last("quantize", NULL);
    if (r.warning[0])
        fprintf(stderr, "cge quantize: warning: %s\n", r.warning);
    if (wo)
        printf("%s -> %s: %d MatMul%s -> %s (%s, block %d), %d weight%s packed; "
               "%d left float (%.0f ms)\n", model, out, r.nodes_quantized,
               r.nodes_quantized == 1 ? "" : "s",
               o.weights_only_format ? "DequantizeLinear-21 blocks" : "MatMulNBits", wo,
               o.block_size ? o.block_size : 32,
               r.weights, r.weights == 1 ? "" : "s", r.nodes_left_float, cli_now_ms() - t0);
    else
        printf("%s -> %s: %d nodes quantized (QDQ, %s, %s, %s), %d activations, %d weights, "
               "%d Relu/Clip folded, %d quantizable nodes left float; opset %lld -> %lld; "
               "%d calibration samples (%.0f ms)\n", model, out, r.nodes_quantized, method,
               o.per_channel ? "per-channel" : "per-tensor", acts ? acts : "uint8", r.activations, r.weights,
               r.relu_folded, r.nodes_left_float, (long long)r.opset_in, (long long)r.opset_out,
               o.num_samples, cli_now_ms() - t0);
    return CLI_OK;
}
