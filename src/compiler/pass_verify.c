/* prepare/verify: structure and every node against its schema, before any
 * other pass looks at the graph. */
#include "compiler/compiler_internal.h"

cge_status cc_pass_verify(cc_ctx *ctx, cge_graph *g) { return cge_graph_verify(g); }
