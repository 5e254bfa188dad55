/* Element types: sizes, names, classes, and float16/bfloat16 conversions. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "cge/types.h"

static const struct {
    cge_dtype t;
    size_t size;
    const char *name;
    const char *alias;
} dtype_table[] = {
    {CGE_F32, 4, "float32", "f32"},   {CGE_F16, 2, "float16", "f16"},
    {CGE_BF16, 2, "bfloat16", "bf16"}, {CGE_F64, 8, "float64", "f64"},
    {CGE_I8, 1, "int8", "i8"},         {CGE_I16, 2, "int16", "i16"},
    {CGE_I32, 4, "int32", "i32"},      {CGE_I64, 8, "int64", "i64"},
    {CGE_U8, 1, "uint8", "u8"},        {CGE_U16, 2, "uint16", "u16"},
    {CGE_U32, 4, "uint32", "u32"},     {CGE_U64, 8, "uint64", "u64"},
    {CGE_BOOL, 1, "bool", "b8"},       {CGE_STRING, sizeof(cge_string), "string", "str"},
};
#define DTYPE_COUNT (sizeof dtype_table / sizeof dtype_table[0])

static int dtype_index(cge_dtype t)
{
    for (size_t i = 0; i < DTYPE_COUNT; i++)
        if (dtype_table[i].t == t)
            return (int)i;
    return -1;
}

size_t cge_dtype_size(cge_dtype t)
{
    int i = dtype_index(t);
    return i < 0 ? 0 : dtype_table[i].size;
}

const char *cge_dtype_name(cge_dtype t)
{
    int i = dtype_index(t);
    return i < 0 ? (t == CGE_DTYPE_UNDEFINED ? "undefined" : "invalid") : dtype_table[i].name;
}

bool cge_dtype_valid(cge_dtype t) { return dtype_index(t) >= 0; }

bool cge_dtype_is_float(cge_dtype t)
{
    return t == CGE_F32 || t == CGE_F16 || t == CGE_BF16 || t == CGE_F64;
}

bool cge_dtype_is_int(cge_dtype t)
{
    return t == CGE_I8 || t == CGE_I16 || t == CGE_I32 || t == CGE_I64 || t == CGE_U8 ||
           t == CGE_U16 || t == CGE_U32 || t == CGE_U64;
}

bool cge_dtype_is_signed(cge_dtype t)
{
    return cge_dtype_is_float(t) || t == CGE_I8 || t == CGE_I16 || t == CGE_I32 || t == CGE_I64;
}

cge_dtype cge_dtype_from_name(const char *name)
{
    if (!name)
        return CGE_DTYPE_UNDEFINED;
    for (size_t i = 0; i < DTYPE_COUNT; i++)
        if (!strcasecmp(name, dtype_table[i].name) || !strcasecmp(name, dtype_table[i].alias))
            return dtype_table[i].t;
    if (!strcasecmp(name, "float"))
        return CGE_F32;
    if (!strcasecmp(name, "double"))
        return CGE_F64;
    if (!strcasecmp(name, "half"))
        return CGE_F16;
    return CGE_DTYPE_UNDEFINED;
}

/* IEEE half <-> single by bit manipulation, rounding to nearest even; NaNs
 * quiet both ways. */
float cge_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400u));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        /* a NaN comes out quiet, as the CPU's conversion (F16C) makes it */
        bits = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t cge_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff) /* inf or nan (keep nan quiet and non-zero) */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
        half++; /* may carry into the exponent, which is the correct rounding */
    return (uint16_t)half;
}

float cge_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t cge_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
        return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}
