/* Status codes and layered error messages: every fallible public call returns a
 * cge_status, and cge_last_error() (thread-local) says which layer failed and why. */
#ifndef CGE_STATUS_H
#define CGE_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cge_status {
    CGE_OK = 0,
    CGE_ERR_INVALID_ARG,   /* API misuse: NULL handle, bad count, bad name */
    CGE_ERR_NOT_FOUND,     /* unknown operator, graph id, tensor name */
    CGE_ERR_EXISTS,        /* duplicate registration, name or id */
    CGE_ERR_SHAPE,         /* shape mismatch or unsupported shape */
    CGE_ERR_DTYPE,         /* dtype mismatch or unsupported dtype */
    CGE_ERR_UNSUPPORTED,   /* valid request that this build cannot do */
    CGE_ERR_NO_MEMORY,     /* allocation failed */
    CGE_ERR_IO,            /* malformed or unreadable file */
    CGE_ERR_STATE,         /* call not allowed in the current state */
    CGE_ERR_TIMEOUT,       /* a wait, or a run's deadline, ran past its limit */
    CGE_ERR_INTERNAL,      /* broken invariant: a bug in cge */
    CGE_ERR_CANCELLED      /* the work was cancelled (cge_cancel_request) */
} cge_status;

/* The layer that reported an error; its name opens the message: "[meta] ...". */
typedef enum cge_layer {
    CGE_LAYER_NONE = 0,
    CGE_LAYER_SCHEMA,     /* operator registry: unknown or duplicate operators */
    CGE_LAYER_META,       /* shape/dtype inference and the kernel's constraints */
    CGE_LAYER_CONVERTER,  /* front-end node -> operator mapping */
    CGE_LAYER_ENGINE,     /* choosing an engine/kernel for a node */
    CGE_LAYER_KERNEL,     /* a kernel at run time */
    CGE_LAYER_RUNTIME,    /* device, memory, streams, events */
    CGE_LAYER_IO,         /* files and serialised data */
    CGE_LAYER_GRAPH,      /* IR construction and verification, builders */
    CGE_LAYER_SESSION,    /* sessions: graph ids, run inputs and outputs */
    CGE_LAYER_COUNT
} cge_layer;

/* Message of the last error on this thread ("" when none). Valid until the next
 * cge call on this thread that fails or clears it. */
const char *cge_last_error(void);
/* Layer and status of the last error on this thread. */
cge_layer cge_last_error_layer(void);
cge_status cge_last_error_status(void);
/* Forget the last error on this thread. */
void cge_clear_error(void);

/* Record an error for this thread and return `status`, so that callers (custom
 * operator libraries included) can write `return cge_error(...)`. The message
 * is prefixed with "[layer] ". */
cge_status cge_error(cge_layer layer, cge_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
cge_status cge_error_v(cge_layer layer, cge_status status, const char *fmt, va_list ap);

const char *cge_status_name(cge_status status); /* "CGE_ERR_SHAPE" */
const char *cge_layer_name(cge_layer layer);    /* "meta" */

#ifdef __cplusplus
}
#endif
#endif
