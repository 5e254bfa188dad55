/* Thread-local layered error messages: the last failure on each thread, with
 * the layer that reported it written first ("[meta] ..."). */
#include <stdio.h>
#include <string.h>

#include "cge/status.h"

#define CGE_ERROR_MAX 1024

static _Thread_local char tl_message[CGE_ERROR_MAX];
static _Thread_local cge_layer tl_layer;
static _Thread_local cge_status tl_status;

static const char *const layer_names[CGE_LAYER_COUNT] = {
    [CGE_LAYER_NONE] = "none",         [CGE_LAYER_SCHEMA] = "schema",
    [CGE_LAYER_META] = "meta",         [CGE_LAYER_CONVERTER] = "converter",
    [CGE_LAYER_ENGINE] = "engine",     [CGE_LAYER_KERNEL] = "kernel",
    [CGE_LAYER_RUNTIME] = "runtime",   [CGE_LAYER_IO] = "io",
    [CGE_LAYER_GRAPH] = "graph",       [CGE_LAYER_SESSION] = "session",
};

const char *cge_layer_name(cge_layer layer)
{
    if ((int)layer < 0 || layer >= CGE_LAYER_COUNT)
        return "unknown";
    return layer_names[layer];
}

const char *cge_status_name(cge_status status)
{
    switch (status) {
    case CGE_OK: return "CGE_OK";
    case CGE_ERR_INVALID_ARG: return "CGE_ERR_INVALID_ARG";
    case CGE_ERR_NOT_FOUND: return "CGE_ERR_NOT_FOUND";
    case CGE_ERR_EXISTS: return "CGE_ERR_EXISTS";
    case CGE_ERR_SHAPE: return "CGE_ERR_SHAPE";
    case CGE_ERR_DTYPE: return "CGE_ERR_DTYPE";
    case CGE_ERR_UNSUPPORTED: return "CGE_ERR_UNSUPPORTED";
    case CGE_ERR_NO_MEMORY: return "CGE_ERR_NO_MEMORY";
    case CGE_ERR_IO: return "CGE_ERR_IO";
    case CGE_ERR_STATE: return "CGE_ERR_STATE";
    case CGE_ERR_TIMEOUT: return "CGE_ERR_TIMEOUT";
    case CGE_ERR_INTERNAL: return "CGE_ERR_INTERNAL";
    case CGE_ERR_CANCELLED: return "CGE_ERR_CANCELLED";
    }
    return "CGE_ERR_UNKNOWN";
}

const char *cge_last_error(void) { return tl_message; }
cge_layer cge_last_error_layer(void) { return tl_layer; }
cge_status cge_last_error_status(void) { return tl_status; }

void cge_clear_error(void)
{
    tl_message[0] = '\0';
    tl_layer = CGE_LAYER_NONE;
    tl_status = CGE_OK;
}

cge_status cge_error_v(cge_layer layer, cge_status status, const char *fmt, va_list ap)
{
    /* Format into a scratch buffer first: callers may pass cge_last_error()
     * itself as an argument when they add context to a lower layer's error. */
    char scratch[CGE_ERROR_MAX];
    int n = snprintf(scratch, sizeof scratch, "[%s] ", cge_layer_name(layer));
    if (n < 0)
        n = 0;
    if (fmt && (size_t)n < sizeof scratch)
        vsnprintf(scratch + n, sizeof scratch - (size_t)n, fmt, ap);
    memcpy(tl_message, scratch, sizeof tl_message);
    tl_layer = layer;
    tl_status = status;
    return status;
}

cge_status cge_error(cge_layer layer, cge_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cge_status st = cge_error_v(layer, status, fmt, ap);
    va_end(ap);
    return st;
}
