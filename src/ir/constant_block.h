/* Constants by their shared blocks: handed over without a copy (the ONNX
 * importer fills a block from the file once), and their bytes let go once
 * kernels hold all they need of them (the session, after packing). */
#ifndef CGE_IR_CONSTANT_BLOCK_H
#define CGE_IR_CONSTANT_BLOCK_H

#include "cge/graph.h"

/* cge_graph_add_constant with bytes already in `block` (base/shared_block.h:
 * cge__block_new), whose reference the graph takes, on failure too. */
cge_status cge__graph_add_constant_block(cge_graph *g, const char *name, cge_dtype dtype,
                                        const cge_shape *shape, void *block, size_t bytes);

/* Drop `g`'s reference to constant `name`'s bytes, if they are `data`: the
 * constant keeps its descriptor with data NULL, and the block is freed once
 * no other clone holds it. A node reading a released constant fails
 * cge_graph_verify (so a compile refuses it). false: no such constant, other
 * bytes, or already released. */
bool cge__graph_release_constant_data(cge_graph *g, const char *name, const void *data);

#endif
