/* The operator contract checker: runs each operator's schema, meta and kernel
 * against each other on inputs inside and just outside the declared
 * constraints, and reports every disagreement (what `cge op-check` prints). */
#ifndef CGE_OPCHECK_H
#define CGE_OPCHECK_H

#include <stdio.h>

#include "cge/op.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a finding says is wrong. */
typedef enum cge_opcheck_kind {
    /* An input outside the schema's dtypes, or a shape meta should refuse,
     * passed meta without an error. */
    CGE_OPCHECK_CONSTRAINT_PASSED = 0,
    /* Meta accepted the inputs, but no kernel handles them ([engine]). */
    CGE_OPCHECK_NO_KERNEL,
    /* Meta accepted the inputs, the kernel failed on them. */
    CGE_OPCHECK_KERNEL_FAILED,
    /* The kernel's output dtype or shape differs from meta's. */
    CGE_OPCHECK_OUTPUT_DESC,
    /* The kernel wrote outside its outputs: a guard zone around an output,
     * input or workspace changed, or an input's data changed. */
    CGE_OPCHECK_OUT_OF_BOUNDS,
    /* Output bytes that no run wrote (they kept the fill put there before). */
    CGE_OPCHECK_UNWRITTEN,
    /* Two runs on the same inputs gave different results. */
    CGE_OPCHECK_NONDETERMINISTIC,
    /* The kernel ran without an error on inputs meta refuses: it does not
     * check the constraint it relies on. */
    CGE_OPCHECK_KERNEL_UNCHECKED,
    /* A converter maps onto an operator that has no definition. */
    CGE_OPCHECK_CONVERTER,
    CGE_OPCHECK_KIND_COUNT
} cge_opcheck_kind;
const char *cge_opcheck_kind_name(cge_opcheck_kind kind);   /* "out-of-bounds", ... */

typedef struct cge_opcheck_options {
    /* Which operators: by name and domain (NULL: any), by registering library
     * ("builtin", "add_custom"; NULL: any). */
    const char *op;
    const char *domain;
    const char *origin;
    /* Operator libraries to load first (cge_load_op_library); when given,
     * only the operators they register are checked. */
    const char *const *libraries;
    int32_t num_libraries;
    /* Extra input cases, for operators whose valid inputs the generator
     * cannot guess:  "Name[@domain]: f32[8,2048]; i64[2]={3,4}; - | axis=1"
     * (inputs by position, "-" for an absent optional one; values repeat to
     * fill; attributes by schema name, lists comma-separated; "... -> 4 | ..."
     * asks for 4 outputs, for variadic ones). */
    const char *const *cases;
    int32_t num_cases;
    /* Kernel runs per case, at least 2 (0: 3). */
    int runs;
    /* Core pool size of the device the checker creates (0: default). */
    int num_threads;
    /* Also launch kernels on inputs meta refuses, expecting an error:
     * 0 (default): for operators not from "builtin" (builtin kernels document
     * that they rely on meta); 1: always; 2: never. */
    int kernel_constraints;
    /* One line per operator as it is checked (NULL: quiet). */
    FILE *log;
} cge_opcheck_options;

typedef struct cge_opcheck_finding {
    cge_opcheck_kind kind;
    const char *op;
    const char *domain;
    const char *origin;           /* registering library */
    const char *message;          /* names the op, inputs and what went wrong */
} cge_opcheck_finding;

/* Per operator definition checked (or skipped). */
typedef struct cge_opcheck_op_result {
    const char *op;
    const char *domain;
    const char *origin;
    int32_t since_version;
    int32_t cases_accepted;       /* input cases meta accepted (kernels run on these) */
    int32_t cases_refused;        /* cases meta refused (constraint checks) */
    int32_t kernel_runs;
    int32_t num_findings;
    const char *skipped;          /* NULL, or why the op was not run */
} cge_opcheck_op_result;

typedef struct cge_opcheck_report cge_opcheck_report;

/* Check the selected operators. CGE_OK when the check ran, findings or not
 * (see cge_opcheck_num_findings); an error when a library does not load, the
 * options select no operator, or memory runs out. */
cge_status cge_op_check(const cge_opcheck_options *opts, cge_opcheck_report **out);

int32_t cge_opcheck_num_ops(const cge_opcheck_report *r);
const cge_opcheck_op_result *cge_opcheck_op(const cge_opcheck_report *r, int32_t i);
int32_t cge_opcheck_num_findings(const cge_opcheck_report *r);
const cge_opcheck_finding *cge_opcheck_finding_at(const cge_opcheck_report *r, int32_t i);
int32_t cge_opcheck_num_skipped(const cge_opcheck_report *r);
/* Human-readable report: every finding, a line per skipped op, a summary
 * (and a line per op when `verbose`). */
cge_status cge_opcheck_write(const cge_opcheck_report *r, FILE *f, bool verbose);
void cge_opcheck_report_destroy(cge_opcheck_report *r);              /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
