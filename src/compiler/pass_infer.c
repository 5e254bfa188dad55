/* prepare/infer (and again after optimize): shapes and dtypes of every value
 * from the input signature; dimensions nobody can know stay dynamic. */
#include "compiler/compiler_internal.h"

cge_status cc_pass_infer(cc_ctx *ctx, cge_graph *g) { return cge_graph_infer(g); }
