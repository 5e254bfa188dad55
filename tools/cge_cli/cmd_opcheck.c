/* `cge op-check`: the operator contract checker (src/opcheck) as a command:
 * cge op-check [--lib LIB.so]... [--op NAME] [--domain D] [--origin LIB]
 * [--case SPEC]... [--runs N] [-v]. Exit 0: no findings, 1: findings, 2: error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cge/opcheck.h"
#include "cli.h"

#define MAX_LIST 64

static int usage(FILE *f)
{
    fprintf(f, "usage: cge op-check [--lib LIB.so]... [--op NAME] [--domain DOMAIN] "
               "[--origin LIBRARY] [--case 'Op: f32[2,3]; ...']... [--runs N] [-v]\n"
               "Checks operators' schema, meta and kernels against each other; with --lib, "
               "only the library's operators. Exit status: 0 no findings, 1 findings, 2 error.\n");
    return 2;
}

int cmd_opcheck(int argc, char **argv)
{
    const char *libs[MAX_LIST], *cases[MAX_LIST];
    cge_opcheck_options o = {.libraries = libs, .cases = cases};
    bool verbose = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = true;
            continue;
        }
        if (!v)
            return usage(stderr);
        i++;
        if (!strcmp(a, "--lib") && o.num_libraries < MAX_LIST)
            libs[o.num_libraries++] = v;
        else if (!strcmp(a, "--case") && o.num_cases < MAX_LIST)
            cases[o.num_cases++] = v;
        else if (!strcmp(a, "--op"))
            o.op = v;
        else if (!strcmp(a, "--domain"))
            o.domain = v;
        else if (!strcmp(a, "--origin"))
            o.origin = v;
        else if (!strcmp(a, "--runs"))
            o.runs = atoi(v);
        else
            return usage(stderr);
    }
    if (verbose)
        o.log = stderr;
    cge_opcheck_report *r = NULL;
    if (cge_op_check(&o, &r) != CGE_OK) {
        fprintf(stderr, "cge op-check: %s\n", cge_last_error());
        return 2;
    }
    cge_opcheck_write(r, stdout, verbose);
    int rc = cge_opcheck_num_findings(r) ? 1 : 0;
    cge_opcheck_report_destroy(r);
    return rc;
}
