/* Sessions: hold several graphs by id, compile them (verify, infer, order,
 * allocate) and run them synchronously or asynchronously on a stream. Inputs
 * are checked (count, names, dtypes, shapes) before anything runs. */
#ifndef CGE_SESSION_H
#define CGE_SESSION_H

#include "cge/graph.h"
#include "cge/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cge_session cge_session;

typedef struct cge_session_options {
    /* Device to run on; NULL creates a CPU device owned by the session. */
    cge_device *device;
    /* Threads of the owned device (0: $CGE_NUM_THREADS or all cores). */
    int num_threads;
} cge_session_options;

cge_status cge_session_create(const cge_session_options *opts, cge_session **out);
/* Waits for the session's work, releases every graph. NULL is a no-op. */
void cge_session_destroy(cge_session *s);
cge_device *cge_session_device(const cge_session *s);

/* The session keeps its own copy of `g`; the caller keeps `g`. */
cge_status cge_session_add_graph(cge_session *s, uint32_t graph_id, const cge_graph *g);
/* Verify, infer shapes and dtypes, order nodes, pick kernels, allocate. */
cge_status cge_session_compile_graph(cge_session *s, uint32_t graph_id);
cge_status cge_session_remove_graph(cge_session *s, uint32_t graph_id);

/* Descriptors of a compiled graph's inputs and outputs (shapes as compiled:
 * dynamic dims stay dynamic until a run fixes them). */
cge_status cge_session_num_io(const cge_session *s, uint32_t graph_id, int32_t *num_inputs,
                              int32_t *num_outputs);
cge_status cge_session_input_desc(const cge_session *s, uint32_t graph_id, int32_t i,
                                  cge_tensor_desc *out);
cge_status cge_session_output_desc(const cge_session *s, uint32_t graph_id, int32_t i,
                                   cge_tensor_desc *out);

/* Run a compiled graph (compiling it first if needed). Inputs: host tensors,
 * matched by name (or by position when every name is NULL), each with the
 * graph's dtype and a shape that fits the declared one. Outputs: host
 * buffers, by name or position; each output's dtype and shape are written
 * back, and `bytes` must be large enough. Errors leave outputs untouched. */
cge_status cge_session_run_graph(cge_session *s, uint32_t graph_id, const cge_tensor *inputs,
                                 int32_t num_inputs, cge_tensor *outputs, int32_t num_outputs);
/* The same, enqueued on `stream`: returns after checking and enqueueing; the
 * input and output buffers must stay valid until the stream has passed the
 * run (cge_stream_synchronize). Runs of one graph on a stream are ordered. */
cge_status cge_session_run_graph_async(cge_session *s, uint32_t graph_id,
                                       const cge_tensor *inputs, int32_t num_inputs,
                                       cge_tensor *outputs, int32_t num_outputs,
                                       cge_stream *stream);

#ifdef __cplusplus
}
#endif
#endif
