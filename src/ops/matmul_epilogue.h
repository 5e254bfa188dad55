/* The epilogue shared by cge.fused FusedMatMul and MatMulBF16: activation
 * kinds, their attribute names and the attribute definitions both schemas
 * carry, so that the precision pass can move a node from one to the other. */
#ifndef CGE_OPS_MATMUL_EPILOGUE_H
#define CGE_OPS_MATMUL_EPILOGUE_H

#include <string.h>

typedef enum cge__mm_act {
    CGE__MM_NONE, CGE__MM_RELU, CGE__MM_SIGMOID, CGE__MM_TANH, CGE__MM_GELU, CGE__MM_GELU_TANH,
    CGE__MM_LEAKY, CGE__MM_CLIP
} cge__mm_act;

/* The activation attribute's value as a cge__mm_act; -1 if unknown. */
static inline int cge__mm_act_from_name(const char *s)
{
    static const char *const names[] = {"none", "relu", "sigmoid", "tanh", "gelu", "gelu_tanh",
                                        "leaky_relu", "clip"};
    for (int i = 0; i < 8; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

/* activation, alpha, min, max, trans_b: the first five attributes of both
 * schemas (each adds its own b_const). */
#define CGE__MM_EPILOGUE_ATTR_DEFS                                                           \
    {.name = "activation", .kind = CGE_ATTR_STRING, .default_s = "none",                     \
     .doc = "none relu sigmoid tanh gelu gelu_tanh leaky_relu clip"},                        \
    {.name = "alpha", .kind = CGE_ATTR_FLOAT, .default_f = 0.01f, .doc = "leaky_relu slope"}, \
    {.name = "min", .kind = CGE_ATTR_FLOAT, .doc = "clip lower bound"},                      \
    {.name = "max", .kind = CGE_ATTR_FLOAT, .doc = "clip upper bound"},                      \
    {.name = "trans_b", .kind = CGE_ATTR_INT, .doc = "B is [N, K]"}

#endif
