/* What the string kernels share with the families that hand work to them:
 * Cast's string paths (ops/string_cast.c), called from unary.c's Cast and
 * from CastLike. */
#ifndef CGE_OPS_STRING_UTIL_H
#define CGE_OPS_STRING_UTIL_H

#include "cge/op.h"

/* Cast where the input or the output (or both) is a string tensor. */
cge_status cge__cast_string_launch(const cge_kernel_ctx *ctx, cge_stream *stream);
/* Cast's prepare and release: a string store (base/strings.h) as the node's
 * state when its output is a string tensor, none otherwise. */
cge_status cge__cast_string_prepare(const cge_kernel_ctx *ctx, void **state);
void cge__cast_string_release(void *state);

/* Numbers as text, the way numpy's astype(str) writes them (the ONNX
 * reference's Cast): the shortest digits that read back as the same value,
 * positional for 1e-4 <= |v| < 1e16 ("0.5", "100.0"), else scientific
 * ("1e-05", "1.5e+16"); "nan", "inf", "-inf". `dtype` is the value's own
 * type, so float16 0.1 is "0.1". Returns the length written (buf >= 48). */
int cge__format_number(cge_dtype dtype, const void *data, int64_t i, char *buf);

#endif
