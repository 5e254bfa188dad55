/* libFuzzer target over the .cgm loader: any byte string must load or fail
 * with an [io] error, never crash, leak or read out of bounds. The header's
 * checksum is recomputed first (when the input is long enough to hold one),
 * so that mutations reach the section and record checks instead of stopping
 * at the checksum, and the weights are trusted (CGE_WEIGHTS_CHECK_SKIP) so that
 * mutated weights reach the kernels; small models that load are run once.
 * Seeds: files written by `cge compile` (make fuzz makes one from
 * models/small_cnn.onnx). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cge/cge.h"
#include "model_file/format.h"

static void fix_crc(uint8_t *d, size_t size)
{
    cgm_header h;
    if (size < sizeof h)
        return;
    memcpy(&h, d, sizeof h);
    if (h.meta_end < sizeof h || h.meta_end > size)
        return;
    h.meta_crc32 = cgm_meta_crc(d, h.meta_end);
    memcpy(d + offsetof(cgm_header, meta_crc32), &h.meta_crc32, 4);
}

static void run_once(cge_model *m)
{
    const cge_plan *p = cge_model_plan(m);
    if (cge_plan_arena_bytes(p) > ((size_t)16 << 20))
        return;
    cge_session_options so = {.num_threads = 1};
    cge_session *s = NULL;
    if (cge_session_create(&so, &s))
        return;
    int32_t ni = 0, no = 0;
    cge_tensor in[8], out[8];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    if (!cge_session_add_model(s, 1, m) && !cge_session_num_io(s, 1, &ni, &no) && ni <= 8 &&
        no <= 8) {
        bool ok = true;
        for (int32_t i = 0; ok && i < ni + no; i++) {
            cge_tensor_desc d;
            ok = !(i < ni ? cge_session_input_desc(s, 1, i, &d)
                          : cge_session_output_desc(s, 1, i - ni, &d));
            size_t nb = ok ? cge_tensor_nbytes(d.dtype, &d.shape) : 0;
            ok = ok && nb <= ((size_t)16 << 20);
            cge_tensor *t = i < ni ? &in[i] : &out[i - ni];
            *t = (cge_tensor){.name = NULL, .dtype = d.dtype, .shape = d.shape,
                              .data = ok ? calloc(1, nb + 1) : NULL, .bytes = nb};
        }
        if (ok)
            cge_session_run(s, 1, in, ni, out, no, NULL);
        for (int32_t i = 0; i < 8; i++) {
            free(in[i].data);
            free(out[i].data);
        }
    }
    cge_session_destroy(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size + 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    fix_crc(copy, size);
    cge_model *m = NULL;
    cge_model_load_options lo = {.weights_check = CGE_WEIGHTS_CHECK_SKIP};
    cge_status st = cge_model_load_buffer(copy, size, &lo, &m);
    free(copy);
    if (st == CGE_OK) {
        run_once(m);
        cge_model_destroy(m);
    } else if (m || cge_last_error_layer() != CGE_LAYER_IO) {
        fprintf(stderr, "unexpected failure: %s\n", cge_last_error());
        abort();
    }
    return 0;
}
