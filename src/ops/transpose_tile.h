/* 16 x 16 tiles of 4-byte elements transposed in AVX-512 registers: the
 * Reorder kernel's plain <-> NHWC tiles (copy.c) and ChannelsLastGroupNorm's
 * gather of a group's channels (norm.c). Callers check AVX-512F at run time
 * (cge__cpu_has) and define nothing else; off x86-64, CGE_TRANSPOSE_TILE_X86
 * is 0 and there is nothing here. */
#ifndef CGE_OPS_TRANSPOSE_TILE_H
#define CGE_OPS_TRANSPOSE_TILE_H

#include <stdint.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define CGE_TRANSPOSE_TILE_X86 1

/* A 16 x 16 transpose in registers: pairs, then quads within 128-bit lanes,
 * then the lanes across registers (r[i] row i in, column i out). Shuffles
 * only, so any 4-byte data (floats with NaN payloads, int32) stays bit-exact. */
__attribute__((target("avx512f"), always_inline)) static inline void cge__tr16_regs(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; j++) {
        t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
        t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
        r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
        r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xdd);
    }
}

/* `rows` x `cols` (each 1..16) 4-byte elements of x (row stride xs) to their
 * transpose in y (row stride ys). Tails go through masked loads and stores,
 * which never touch the lanes they leave out. */
__attribute__((target("avx512f"))) static inline void cge__tr_tile32_avx512(const float *x,
                                                                            int64_t xs, float *y,
                                                                            int64_t ys, int rows,
                                                                            int cols)
{
    __m512 r[16];
    if (rows == 16 && cols == 16) {
        for (int i = 0; i < 16; i++)
            r[i] = _mm512_loadu_ps(x + i * xs);
        cge__tr16_regs(r);
        for (int j = 0; j < 16; j++)
            _mm512_storeu_ps(y + j * ys, r[j]);
        return;
    }
    __mmask16 cm = (__mmask16)((1u << cols) - 1), rm = (__mmask16)((1u << rows) - 1);
    for (int i = 0; i < 16; i++)
        r[i] = i < rows ? _mm512_maskz_loadu_ps(cm, x + i * xs) : _mm512_setzero_ps();
    cge__tr16_regs(r);
    for (int j = 0; j < cols; j++)
        _mm512_mask_storeu_ps(y + j * ys, rm, r[j]);
}


#else
#define CGE_TRANSPOSE_TILE_X86 0
#endif
#endif
