/* Helpers for the model file tests: small graphs covering attribute kinds,
 * views, constants and streams; a generic runner that feeds a session graph
 * deterministic inputs and collects every output; file and byte helpers. */
#ifndef MF_UTIL_H
#define MF_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "cge/cge.h"

/* Every output of one run: host buffers, dtypes and shapes. */
typedef struct mf_outputs {
    int32_t n;
    cge_tensor t[16];
} mf_outputs;

/* x:[rows,4] -> MatMul/Add/Relu/Transpose/Mul/Softmax "y", ReduceSum "s". */
cge_graph *mf_mixed_graph(int64_t rows);
/* Conv (ints attributes), Reshape (view of a view), Concat, Pad (string),
 * Cast (int), Gather on a constant, two branches (for two streams). */
cge_graph *mf_attr_graph(void);

/* x [3,4] -> Loop (3 trips; body: MatMul by its own constant, Add of an
 * outer constant, Tanh carried; an If nested in the body, on the sign of
 * the carried sum, scanned) -> If on the sign of the result's sum (Relu or
 * Sigmoid): outputs "y" [3,4], "scan" [3,3,4], "z" [3,4]. */
cge_graph *mf_control_graph(void);

/* Run graph `id` of `s` on inputs made from `seed`; *out gets fresh buffers
 * (mf_outputs_free). CGE_OK or the run's status (message in cge_last_error). */
cge_status mf_run(cge_session *s, uint32_t id, cge_run_mode mode, uint32_t seed, mf_outputs *out);
void mf_outputs_free(mf_outputs *o);
/* Bitwise equality of two runs' outputs (dtypes, shapes, bytes). */
void mf_assert_same(const mf_outputs *a, const mf_outputs *b);

/* x [batch, seq, 8] -> MatMul + bias -> Softmax -> Reshape to [batch, -1]
 * with the target computed from Shape(x) (constants read): y [batch,
 * seq*8]; batch or seq <= 0 is a symbol of that name. */
#define MF_SYM_D 8
cge_graph *mf_symbolic_graph(int64_t batch, int64_t seq);
/* The symbolic plan of `g` as a session makes it (prepared, then built with
 * the dims symbolic), or fail the test. */
cge_plan *mf_compile_symbolic(const cge_graph *g);

/* Compile `g` as a session with default options would (level 2, 1 stream
 * unless `streams`), or fail the test. */
cge_plan *mf_compile(const cge_graph *g, int streams, cge_opt_level level);

/* A fresh path in $TMPDIR ("<dir>/cge_mf_<pid>_<n><suffix>"). */
void mf_temp_path(char *buf, size_t size, const char *suffix);
int mf_write_file(const char *path, const void *data, size_t size);

/* Recompute the header's metadata checksum after a deliberate change. */
void mf_fix_crc(void *data, size_t size);

/* Each 4-byte word of [lo, hi) of a saved model XORed with a few patterns,
 * the checksum recomputed (as a crafted file would have it): `try_fn` gets
 * each variant (a copy, valid during the call). */
void mf_perturb_words(const char *data, size_t size, size_t lo, size_t hi,
                      void (*try_fn)(const void *variant, size_t size, void *user), void *user);

#endif
