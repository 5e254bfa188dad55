/* Build-time generator: writes the functional builder's per-op functions
 * (cge_es_<op>) from the operator definitions in the registry, so that the
 * builder never drifts from the schemas. Usage: cge_gen_es OUT.h OUT.c */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cge/op.h"

/* "LogSoftmax" -> "log_softmax"; "MatMul" -> "mat_mul". */
static void snake(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; in[i] && n + 2 < size; i++) {
        unsigned char c = (unsigned char)in[i];
        if (isupper(c) && i > 0 &&
            (islower((unsigned char)in[i - 1]) ||
             (in[i + 1] && islower((unsigned char)in[i + 1]) && isupper((unsigned char)in[i - 1]))))
            out[n++] = '_';
        out[n++] = (char)tolower(c);
    }
    out[n] = '\0';
}

/* Argument names as C identifiers that cannot clash with the fixed ones. */
static void ident(const char *in, char *out, size_t size)
{
    char s[128];
    snake(in, s, sizeof s);
    snprintf(out, size, "%s_", s);
}

static bool single_output(const cge_op_def *d)
{
    return d->num_outputs == 1 && !(d->outputs[0].flags & CGE_ARG_VARIADIC);
}

static bool generated(const cge_op_def *d)
{
    /* Constant's alternatives (value, value_float, ...) do not map onto
     * positional parameters; cge_es_constant() is its builder call. */
    if ((d->domain && d->domain[0]) || !strcmp(d->name, "Constant"))
        return false;
    /* One call per operator: the newest definition. */
    return cge_op_find(d->domain, d->name, 0) == d;
}

static void write_params(FILE *f, const cge_op_def *d)
{
    char id[160];
    fprintf(f, "cge_builder *b");
    for (int32_t i = 0; i < d->num_inputs; i++) {
        ident(d->inputs[i].name, id, sizeof id);
        if (d->inputs[i].flags & CGE_ARG_VARIADIC)
            fprintf(f, ", const cge_t *%s, int32_t num_%s", id, id);
        else
            fprintf(f, ", cge_t %s", id);
    }
    for (int32_t i = 0; i < d->num_attrs; i++) {
        ident(d->attrs[i].name, id, sizeof id);
        switch (d->attrs[i].kind) {
        case CGE_ATTR_INT: fprintf(f, ", int64_t %s", id); break;
        case CGE_ATTR_FLOAT: fprintf(f, ", float %s", id); break;
        case CGE_ATTR_STRING: fprintf(f, ", const char *%s", id); break;
        case CGE_ATTR_TENSOR: fprintf(f, ", const cge_tensor *%s", id); break;
        case CGE_ATTR_GRAPH: fprintf(f, ", const cge_graph *%s", id); break;
        case CGE_ATTR_INTS: fprintf(f, ", const int64_t *%s, int64_t num_%s", id, id); break;
        case CGE_ATTR_FLOATS: fprintf(f, ", const float *%s, int64_t num_%s", id, id); break;
        case CGE_ATTR_STRINGS: fprintf(f, ", const char *const *%s, int64_t num_%s", id, id); break;
        case CGE_ATTR_TENSORS: fprintf(f, ", const cge_tensor *%s, int64_t num_%s", id, id); break;
        case CGE_ATTR_GRAPHS: fprintf(f, ", const cge_graph *const *%s, int64_t num_%s", id, id); break;
        default: break;
        }
    }
    if (!single_output(d))
        fprintf(f, ", cge_t *outputs, int32_t num_outputs");
}

static void write_doc(FILE *f, const cge_op_def *d)
{
    fprintf(f, "/* %s (opset %d", d->name, d->since_version);
    if (d->end_version)
        fprintf(f, "..%d", d->end_version);
    fprintf(f, ")%s%s\n", d->doc ? ": " : "", d->doc ? d->doc : "");
    for (int32_t i = 0; i < d->num_inputs; i++)
        fprintf(f, " *   input %s%s%s\n", d->inputs[i].name,
                d->inputs[i].flags & CGE_ARG_OPTIONAL ? " (optional: CGE_NONE)" : "",
                d->inputs[i].flags & CGE_ARG_VARIADIC ? " (variadic)" : "");
    for (int32_t i = 0; i < d->num_attrs; i++) {
        const cge_attr_def *a = &d->attrs[i];
        fprintf(f, " *   attribute %s: %s", a->name, cge_attr_kind_name(a->kind));
        if (a->required)
            fprintf(f, ", required");
        else if (a->kind == CGE_ATTR_INT)
            fprintf(f, ", default %lld", (long long)a->default_i);
        else if (a->kind == CGE_ATTR_FLOAT)
            fprintf(f, ", default %g", (double)a->default_f);
        else if (a->kind == CGE_ATTR_STRING)
            fprintf(f, ", default \"%s\" (NULL: default)", a->default_s ? a->default_s : "");
        else
            fprintf(f, " (NULL: absent)");
        fprintf(f, "\n");
    }
    fprintf(f, " */\n");
}

static void write_body(FILE *f, const cge_op_def *d)
{
    char id[160];
    bool var_in = d->num_inputs && (d->inputs[d->num_inputs - 1].flags & CGE_ARG_VARIADIC);
    int32_t fixed = var_in ? d->num_inputs - 1 : d->num_inputs;
    fprintf(f, "{\n");
    if (var_in) {
        ident(d->inputs[d->num_inputs - 1].name, id, sizeof id);
        fprintf(f, "    if (num_%s < 0 || num_%s > 1024 || (num_%s && !%s))\n"
                   "        return cge__es_fail%s(b, \"%s: the variadic input list '%s' is "
                   "NULL or its count is outside 0..1024\");\n",
                id, id, id, id, single_output(d) ? "" : "_status", d->name,
                d->inputs[d->num_inputs - 1].name);
        fprintf(f, "    cge_t in[%d + 1024];\n", fixed);
    } else if (fixed > 0) {
        fprintf(f, "    cge_t in[%d];\n", fixed);
    }
    if (fixed == 0 && !var_in) {
        /* No inputs at all (RandomUniform, ...): nothing to collect. */
        fprintf(f, "    cge_t *in = NULL;\n    int32_t ni = 0;\n");
    } else {
        fprintf(f, "    int32_t ni = 0;\n");
    }
    for (int32_t i = 0; i < fixed; i++) {
        ident(d->inputs[i].name, id, sizeof id);
        fprintf(f, "    in[ni++] = %s;\n", id);
    }
    if (var_in) {
        ident(d->inputs[d->num_inputs - 1].name, id, sizeof id);
        fprintf(f, "    for (int32_t i = 0; i < num_%s; i++)\n        in[ni++] = %s[i];\n", id, id);
    }
    /* Trailing absent optional inputs are dropped, as ONNX writes nodes. */
    if (fixed > 0 || var_in)
        fprintf(f, "    while (ni > 0 && in[ni - 1].id == CGE_NONE.id)\n        ni--;\n");
    if (d->num_attrs)
        fprintf(f, "    cge_attr at[%d];\n    int32_t na = 0;\n", d->num_attrs);
    const char *attr_args = d->num_attrs ? "at, na" : "NULL, 0";
    for (int32_t i = 0; i < d->num_attrs; i++) {
        const cge_attr_def *a = &d->attrs[i];
        ident(a->name, id, sizeof id);
        const char *nm = a->name;
        switch (a->kind) {
        case CGE_ATTR_INT:
            if (a->required)
                fprintf(f, "    at[na++] = CGE_ATTR_I(\"%s\", %s);\n", nm, id);
            else if (a->default_i == INT64_MIN) /* no literal spells INT64_MIN */
                fprintf(f, "    if (%s != INT64_MIN)\n        at[na++] = CGE_ATTR_I(\"%s\", %s);\n", id,
                        nm, id);
            else
                fprintf(f, "    if (%s != %lldLL)\n        at[na++] = CGE_ATTR_I(\"%s\", %s);\n", id,
                        (long long)a->default_i, nm, id);
            break;
        case CGE_ATTR_FLOAT:
            if (a->required)
                fprintf(f, "    at[na++] = CGE_ATTR_F(\"%s\", %s);\n", nm, id);
            else
                fprintf(f, "    if (%s != (float)%.9g)\n        at[na++] = CGE_ATTR_F(\"%s\", %s);\n", id,
                        (double)a->default_f, nm, id);
            break;
        case CGE_ATTR_STRING:
            fprintf(f, "    if (%s)\n        at[na++] = CGE_ATTR_S(\"%s\", %s);\n", id, nm, id);
            break;
        case CGE_ATTR_TENSOR:
            fprintf(f, "    if (%s)\n        at[na++] = (cge_attr){.name = \"%s\", .kind = CGE_ATTR_TENSOR, .t = %s};\n", id, nm, id);
            break;
        case CGE_ATTR_GRAPH:
            fprintf(f, "    if (%s)\n        at[na++] = (cge_attr){.name = \"%s\", .kind = CGE_ATTR_GRAPH, .g = %s};\n", id, nm, id);
            break;
        case CGE_ATTR_INTS:
            fprintf(f, "    if (%s)\n        at[na++] = CGE_ATTR_INTS(\"%s\", %s, num_%s);\n", id, nm, id, id);
            break;
        case CGE_ATTR_FLOATS:
            fprintf(f, "    if (%s)\n        at[na++] = CGE_ATTR_FLOATS(\"%s\", %s, num_%s);\n", id, nm, id, id);
            break;
        case CGE_ATTR_STRINGS:
            fprintf(f, "    if (%s)\n        at[na++] = (cge_attr){.name = \"%s\", .kind = CGE_ATTR_STRINGS, .strings = %s, .n = num_%s};\n", id, nm, id, id);
            break;
        case CGE_ATTR_TENSORS:
            fprintf(f, "    if (%s)\n        at[na++] = (cge_attr){.name = \"%s\", .kind = CGE_ATTR_TENSORS, .tensors = %s, .n = num_%s};\n", id, nm, id, id);
            break;
        case CGE_ATTR_GRAPHS:
            fprintf(f, "    if (%s)\n        at[na++] = (cge_attr){.name = \"%s\", .kind = CGE_ATTR_GRAPHS, .graphs = %s, .n = num_%s};\n", id, nm, id, id);
            break;
        default: break;
        }
    }
    if (single_output(d))
        fprintf(f, "    return cge_es_op1(b, \"%s\", \"\", in, ni, %s);\n}\n\n", d->name, attr_args);
    else
        fprintf(f, "    return cge_es_op(b, \"%s\", \"\", in, ni, %s, outputs, num_outputs);\n}\n\n",
                d->name, attr_args);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s OUT.h OUT.c\n", argv[0]);
        return 2;
    }
    int32_t n = cge_op_count();
    if (n <= 0) {
        fprintf(stderr, "gen_es: the registry is empty: %s\n", cge_last_error());
        return 1;
    }
    FILE *h = fopen(argv[1], "w"), *c = fopen(argv[2], "w");
    if (!h || !c) {
        fprintf(stderr, "gen_es: cannot write %s or %s\n", argv[1], argv[2]);
        return 1;
    }
    fprintf(h, "/* Generated by tools/gen_es.c from the operator definitions: do not edit.\n"
               " * One builder call per builtin operator; optional inputs take CGE_NONE,\n"
               " * optional attributes take their default (then they are not written). */\n"
               "#ifndef CGE_ES_OPS_H\n#define CGE_ES_OPS_H\n\n#include \"cge/es.h\"\n\n"
               "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n");
    fprintf(c, "/* Generated by tools/gen_es.c from the operator definitions: do not edit. */\n"
               "#include \"cge/es.h\"\n#include \"builder/es_internal.h\"\n\n");
    int written = 0;
    for (int32_t i = 0; i < n; i++) {
        const cge_op_def *d = cge_op_at(i);
        if (!generated(d))
            continue;
        char fn[128];
        snake(d->name, fn, sizeof fn);
        write_doc(h, d);
        fprintf(h, "%s cge_es_%s(", single_output(d) ? "cge_t" : "cge_status", fn);
        write_params(h, d);
        fprintf(h, ");\n\n");
        fprintf(c, "%s cge_es_%s(", single_output(d) ? "cge_t" : "cge_status", fn);
        write_params(c, d);
        fprintf(c, ")\n");
        write_body(c, d);
        written++;
    }
    fprintf(h, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
    int bad = ferror(h) || ferror(c);
    bad |= fclose(h) != 0;
    bad |= fclose(c) != 0;
    if (bad) {
        fprintf(stderr, "gen_es: write failed\n");
        return 1;
    }
    printf("gen_es: %d builder functions\n", written);
    return 0;
}
