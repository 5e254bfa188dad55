/* libFuzzer target over the ONNX importer: any byte string must import or
 * fail with an error, never crash, leak or read out of bounds. Findings go
 * to tests/onnx/corpus/, which tests/onnx/test_onnx_import.c replays. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cge/graph.h"
#include "cge/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cge_graph *g = NULL;
    cge_status st = cge_onnx_import_buffer(data, size, NULL, NULL, &g);
    if (st == CGE_OK) {
        cge_graph_destroy(g);
    } else {
        cge_layer l = cge_last_error_layer();
        /* Malformed input is [io]; valid but unsupported content [converter]. */
        if (g || (l != CGE_LAYER_IO && l != CGE_LAYER_CONVERTER)) {
            fprintf(stderr, "unexpected failure: %s\n", cge_last_error());
            abort();
        }
    }
    return 0;
}
