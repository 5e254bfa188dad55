/* A custom operator for the session tests that records where its work ran:
 * session_probe::Probe, Y = X - 1 (float32), whose launch notes the buffers
 * it reads and writes and whose block notes the thread that runs it. */
#ifndef CGE_TEST_PROBE_OP_H
#define CGE_TEST_PROBE_OP_H

#include <pthread.h>
#include <stdatomic.h>

#include "cge/cge.h"

#define PROBE_MAX 64

/* Per call since probe_reset, in launch order (the first PROBE_MAX). */
extern pthread_t probe_thread[PROBE_MAX];
extern const void *probe_in[PROBE_MAX];
extern void *probe_out[PROBE_MAX];
extern atomic_int probe_calls;

/* Registers the operator (once per process; later calls do nothing). */
cge_status probe_register(void);
void probe_reset(void);
/* A 2-thread session running `g` as graph 1 (NULL, the error recorded, if
 * it cannot be made). */
cge_session *probe_session(const cge_graph *g);

#endif
