/* Optional operators (ONNX Optional, OptionalHasElement, OptionalGetElement):
 * an optional is a cge_sequence of type CGE_TYPE_OPTIONAL (a tensor or none)
 * or CGE_TYPE_OPTIONAL_SEQUENCE (a sequence or none). */
#include <string.h>

#include "ops/builtin.h"
#include "ops/family_util.h"
#include "ops/kernel_util.h"
#include "ops/sequence_util.h"

static bool is_opt(cge_value_type t)
{
    return t == CGE_TYPE_OPTIONAL || t == CGE_TYPE_OPTIONAL_SEQUENCE;
}

/* ---- Optional ----------------------------------------------------------------------------- */

static cge_status optional_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 0, 1, 1, 1, "0 to 1 inputs and 1 output");
    const cge_tensor_desc *x = c->num_inputs ? &c->inputs[0] : NULL;
    if (x && x->dtype != CGE_DTYPE_UNDEFINED) {
        if (is_opt(x->type))
            return cge_meta_error(c, CGE_ERR_DTYPE, "its input is already an optional");
        c->outputs[0].type = x->type == CGE_TYPE_SEQUENCE ? CGE_TYPE_OPTIONAL_SEQUENCE
                                                          : CGE_TYPE_OPTIONAL;
        c->outputs[0].dtype = x->dtype;
        c->outputs[0].shape = x->shape;
        return CGE_OK;
    }
    const int64_t *t = NULL;
    if (cge_attrs_get_ints(c->attrs, "type", &t) != 2)
        return cge_meta_error(c, CGE_ERR_INVALID_ARG,
                              "without an input it needs attribute 'type' (the element type)");
    if ((t[0] != CGE_TYPE_TENSOR && t[0] != CGE_TYPE_SEQUENCE) || !cge_dtype_valid((cge_dtype)t[1]))
        return cge_meta_error(c, CGE_ERR_UNSUPPORTED,
                              "attribute 'type' must be a tensor or a sequence of tensors");
    c->outputs[0].type = t[0] == CGE_TYPE_SEQUENCE ? CGE_TYPE_OPTIONAL_SEQUENCE : CGE_TYPE_OPTIONAL;
    c->outputs[0].dtype = (cge_dtype)t[1];
    c->outputs[0].shape = (cge_shape){.rank = -1};
    return CGE_OK;
}

static cge_status optional_run(const cge__seq_call *c)
{
    cge_sequence *o = c->outs[0].data;
    const cge_tensor *x = c->ni ? &c->ins[0] : NULL;
    if (!x || !x->data) {
        const int64_t *t = NULL;
        cge_attrs_get_ints(c->attrs, "type", &t);
        cge__seq_reset(o, t && t[0] == CGE_TYPE_SEQUENCE ? CGE_TYPE_OPTIONAL_SEQUENCE
                                                         : CGE_TYPE_OPTIONAL,
                       t ? (cge_dtype)t[1] : c->outs[0].dtype);
        o->none = true;
        return CGE_OK;
    }
    if (c->in_types[0] == CGE_TYPE_SEQUENCE) {
        cge_status st = cge_sequence_copy(o, x->data);
        o->type = CGE_TYPE_OPTIONAL_SEQUENCE;
        return st;
    }
    cge__seq_reset(o, CGE_TYPE_OPTIONAL, x->dtype);
    return cge__seq_insert_copy(o, 0, &x->shape, x->data);
}

/* ---- OptionalHasElement, OptionalGetElement ------------------------------------------------------ */

static cge_status has_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 0, 1, 1, 1, "0 to 1 inputs and 1 output");
    c->outputs[0].dtype = CGE_BOOL;
    c->outputs[0].shape = CGE_SCALAR;
    return CGE_OK;
}

static cge_status has_run(const cge__seq_call *c)
{
    const cge_tensor *x = c->ni ? &c->ins[0] : NULL;
    bool has = x && x->data &&
               (!is_opt(c->in_types[0]) || !((const cge_sequence *)x->data)->none);
    *(uint8_t *)c->outs[0].data = has;
    return CGE_OK;
}

static cge_status get_infer(cge_infer_ctx *c)
{
    CGE__CHECK_COUNTS(c, cge_meta_error, 1, 1, 1, 1, "1 input and 1 output");
    const cge_tensor_desc *x = &c->inputs[0];
    const cge_sequence *s = is_opt(x->type) ? cge__seq_in(c, 0) : NULL;
    if (s && s->none)
        return cge_meta_error(c, CGE_ERR_INVALID_ARG, "the optional holds no value");
    c->outputs[0] = (cge_tensor_desc){.name = c->outputs[0].name, .dtype = x->dtype,
                                      .shape = x->shape, .type = x->type};
    if (x->type == CGE_TYPE_OPTIONAL) {
        c->outputs[0].type = CGE_TYPE_TENSOR;
        if (s && s->count == 1)
            c->outputs[0].shape = s->elems[0].shape;
        if (c->outputs[0].shape.rank < 0)
            c->outputs[0].shape = CGE_SCALAR;   /* stands in until the run knows the rank */
    } else if (x->type == CGE_TYPE_OPTIONAL_SEQUENCE) {
        c->outputs[0].type = CGE_TYPE_SEQUENCE;
    }
    return CGE_OK;
}

static cge_status get_run(const cge__seq_call *c)
{
    const cge_tensor *x = &c->ins[0];
    cge_tensor *y = &c->outs[0];
    if (c->in_types[0] == CGE_TYPE_TENSOR) {
        if (x->bytes && y->data != x->data)
            memcpy(y->data, x->data, x->bytes < y->bytes ? x->bytes : y->bytes);
        return CGE_OK;
    }
    const cge_sequence *s = x->data;
    if (s->none)
        return cge_error(CGE_LAYER_KERNEL, CGE_ERR_INVALID_ARG, "the optional holds no value");
    if (c->out_types[0] != CGE_TYPE_TENSOR) {
        cge_status st = cge_sequence_copy(y->data, s);
        ((cge_sequence *)y->data)->type = CGE_TYPE_SEQUENCE;
        return st;
    }
    size_t n = s->count ? cge_tensor_nbytes(s->dtype, &s->elems[0].shape) : 0;
    if (s->count != 1 || n > y->bytes)
        return cge_error(CGE_LAYER_KERNEL, CGE_ERR_SHAPE, "the value does not fit the output");
    if (n)
        memcpy(y->data, s->elems[0].data, n);
    return CGE_OK;
}

/* ---- definitions ------------------------------------------------------------------------- */

#define OPT_LAUNCH(F)                                                                 \
    static cge_status F##_launch(const cge_kernel_ctx *ctx, cge_stream *stream)       \
    {                                                                                 \
        return cge__seq_enqueue(ctx, stream, F##_run);                                \
    }                                                                                 \
    static const cge_kernel_def F##_k[] = CGE__KDEF(0, F##_launch, NULL, -1)
OPT_LAUNCH(optional);
OPT_LAUNCH(has);
OPT_LAUNCH(get);

static const cge_arg_def optional_in[] = {
    {"input", CGE_ARG_OPTIONAL | CGE_ARG_NON_TENSOR, 0, "a tensor or a sequence (absent: none)"}};
static const cge_arg_def optional_out[] = {{"output", 0, 0, "an optional"}};
static const cge_arg_def has_in[] = {
    {"input", CGE_ARG_OPTIONAL | CGE_ARG_NON_TENSOR, 0, "an optional (18: or any value, or none)"}};
static const cge_arg_def has_out[] = {{"output", 0, CGE_DT(CGE_BOOL), "bool scalar"}};
static const cge_arg_def get_in[] = {
    {"input", CGE_ARG_NON_TENSOR, 0, "an optional (18: or a tensor or sequence)"}};
static const cge_arg_def get_out[] = {{"output", 0, 0, "the value held"}};
static const cge_attr_def optional_attrs[] = {
    {.name = "type", .kind = CGE_ATTR_INTS,
     .doc = "without an input: [value type, element dtype] (the importer's form of the "
            "ONNX type attribute)"}};

#define OPT_DEF(NAME, SINCE, END, F, DOC)                                                \
    {.name = NAME, .domain = CGE_DOMAIN_DEFAULT, .since_version = SINCE, .end_version = END, \
     .inputs = F##_in, .num_inputs = 1, .outputs = F##_out, .num_outputs = 1,              \
     .infer = F##_infer, .kernels = F##_k, .num_kernels = 1, .doc = DOC}
static const cge_op_def optional_ops[] = {
    CGE__OPDEF("Optional", 15, optional_in, 1, optional_out, 1, optional_attrs,
               CGE__NATTR(optional_attrs), optional_infer, optional_k,
               "an optional holding the input, or none"),
    /* 18 widened both to take any value (and HasElement no input: false);
     * one meta serves both versions, as 15's inputs are a subset. */
    OPT_DEF("OptionalHasElement", 15, 17, has, "whether the optional holds a value"),
    OPT_DEF("OptionalHasElement", 18, 0, has,
            "whether the input holds a value (an absent input: false)"),
    OPT_DEF("OptionalGetElement", 15, 17, get, "the value the optional holds (an error if none)"),
    OPT_DEF("OptionalGetElement", 18, 0, get,
            "the value an optional holds (an error if none), or a tensor or sequence itself"),
};

const cge_op_def *cge__ops_optional(int32_t *count)
{
    *count = (int32_t)(sizeof optional_ops / sizeof optional_ops[0]);
    return optional_ops;
}
