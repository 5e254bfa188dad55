/* The loader: map a .cgm, make private what must not change under it, check
 * the header, checksums, machine and every offset, size, count and reference
 * before use, then rebuild the plan and check each step's shapes with its
 * operator's meta. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/shared_block.h"
#include "cge/cge.h"
#include "compiler/plan_builder.h"
#include "model_file/model_internal.h"
#include "ops/kernel_cache.h"
#include "session/session_seed.h"

/* The plan is rebuilt the way the compiler's plan_memory pass lays it out
 * (compiler_internal.h), looking operators and kernels up again. Large
 * weights stay in the mapping.
 *
 * What is checked once must stay as checked: the mapping is MAP_PRIVATE, but
 * a page the process has not written still shows the file, so a file
 * rewritten in place after loading would change values under the checks.
 * Before anything is checked the loader therefore copies into private memory
 * (copy-on-write, forced page by page) the metadata and every constant of at
 * most PRIVATE_CONST_MAX bytes. That covers every constant a meta reads as a
 * value and a kernel reads again at run time (pads, axes, shapes, starts and
 * ends, split sizes, scales, K, depths, Range's scalars, small index tables):
 * these are a few numbers each; the limit is far above them and far below a
 * weight matrix, so deciding by size needs no list of which operator reads
 * which input as a value, and a custom operator's values are covered too.
 * Larger constants are weights, which kernels read as numbers: a change to
 * those gives wrong numbers, not a wrong address (the weights' checksum
 * catches a file changed before loading). */

#define MAX_STEP_IO 1024
#define MAX_COUNT (1 << 24)
#define PRIVATE_CONST_MAX ((uint64_t)64 << 10)

typedef struct loader {
    const char *what;             /* the path, or "model buffer" */
    const char *base;
    size_t size;
    const cgm_header *h;
    const cgm_section *sec[CGM_SEC_COUNT];
    const char *strings;
    uint64_t strings_bytes;
    const cgm_model *m;
    const cgm_value *values;
    const cgm_step *steps;
    const int32_t *idx;
    uint64_t num_idx;
    const cgm_attr *attrs;
    uint64_t num_attrs;
    const char *aux;
    uint64_t aux_bytes;
    const cgm_lib *libs;
    uint64_t num_libs;
    const char *weights;
    /* Version 2, a symbolic plan: its named symbols (cgm_symbol records
     * after the header). */
    bool symbolic;
    const cgm_symbol *symbols;
    uint32_t num_symbols;
} loader;

static cge_status bad(const loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cge_status bad(const loader *L, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: %s", L->what, msg);
}

/* Another layer's error while rebuilding, re-reported as [io] with the file. */
static cge_status wrap(const loader *L, const char *context)
{
    char msg[900];
    snprintf(msg, sizeof msg, "%s", cge_last_error());
    return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: %s: %s", L->what, context, msg);
}

/* [off, off + len) lies within [0, limit): no overflow. */
static bool in_range(uint64_t off, uint64_t len, uint64_t limit)
{
    return off <= limit && len <= limit - off;
}

/* A string reference: NULL if it does not point into the table (the table's
 * last byte is NUL, so every in-range reference is terminated). */
static const char *str_at(const loader *L, uint32_t ref)
{
    return ref < L->strings_bytes ? L->strings + ref : NULL;
}

static cge_status get_str(const loader *L, uint32_t ref, bool nonempty, const char *what,
                          const char **out)
{
    const char *s = str_at(L, ref);
    if (!s)
        return bad(L, "%s: string reference %u is outside the string table (%llu bytes)", what,
                   ref, (unsigned long long)L->strings_bytes);
    if (nonempty && !s[0])
        return bad(L, "%s is empty", what);
    *out = s;
    return CGE_OK;
}

static const uint32_t record_bytes[CGM_SEC_COUNT] = {
    [CGM_SEC_STRINGS] = 1, [CGM_SEC_MODEL] = sizeof(cgm_model),
    [CGM_SEC_VALUES] = sizeof(cgm_value), [CGM_SEC_STEPS] = sizeof(cgm_step),
    [CGM_SEC_INDICES] = sizeof(int32_t), [CGM_SEC_ATTRS] = sizeof(cgm_attr),
    [CGM_SEC_AUX] = 1, [CGM_SEC_LIBS] = sizeof(cgm_lib),
    [CGM_SEC_SHAPES] = sizeof(cgm_symbol), [CGM_SEC_PACKED] = sizeof(cgm_packed)};
static const char *const section_names[CGM_SEC_COUNT] = {
    "", "strings", "model", "values", "steps", "indices", "attributes", "aux", "libraries",
    "shape program", "packed weights"};

static cge_status check_header(loader *L, const cge_model_load_options *opts)
{
    if (L->size < sizeof(cgm_header))
        return bad(L, "%zu bytes: too short for a cge model file (a header is %zu bytes; "
                      "truncated?)", L->size, sizeof(cgm_header));
    const cgm_header *h = L->h = (const cgm_header *)L->base;
    if (memcmp(h->magic, CGM_MAGIC, 8))
        return bad(L, "not a cge model file (it does not begin with \"%s\")", CGM_MAGIC);
    if (h->byte_order != CGM_BYTE_ORDER)
        return bad(L, "written with another byte order (marker %08x, this machine reads "
                      "%08x)", h->byte_order, CGM_BYTE_ORDER);
    if (h->format_version < CGM_FORMAT_OLDEST || h->format_version > CGE_MODEL_FORMAT_VERSION)
        return bad(L, "format version %u; this cge (%s) reads versions %u to %u: recompile the "
                      "model", h->format_version, CGE_VERSION_STRING, CGM_FORMAT_OLDEST,
                   CGE_MODEL_FORMAT_VERSION);
    if (h->header_bytes != sizeof(cgm_header))
        return bad(L, "header claims %u bytes; version %u headers are %zu", h->header_bytes,
                   h->format_version, sizeof(cgm_header));
    if (h->file_bytes != L->size)
        return bad(L, "%zu bytes; the header says %llu (%s)", L->size,
                   (unsigned long long)h->file_bytes,
                   L->size < h->file_bytes ? "truncated" : "trailing bytes");
    if (h->meta_end != h->weights_offset || h->weights_offset % 64 ||
        h->weights_offset < sizeof(cgm_header) ||
        !in_range(h->weights_offset, h->weights_bytes, L->size) ||
        (h->weights_offset + h->weights_bytes != L->size && h->format_version < 3))
        return bad(L, "weights at %llu (+%llu bytes) do not fit the layout (metadata ends at "
                      "%llu, file %zu bytes)",
                   (unsigned long long)h->weights_offset, (unsigned long long)h->weights_bytes,
                   (unsigned long long)h->meta_end, L->size);
    uint32_t crc = cgm_meta_crc(L->base, h->meta_end);
    if (crc != h->meta_crc32)
        return bad(L, "metadata checksum mismatch (stored %08x, computed %08x): the file is "
                      "corrupt", h->meta_crc32, crc);
    if (h->flags)
        return bad(L, "unknown flags %08x", h->flags);
    if (memchr(h->arch, 0, sizeof h->arch) == NULL)
        return bad(L, "the architecture name is not terminated");
    if (strcmp(h->arch, cgm_arch()))
        return bad(L, "compiled for %s; this machine is %s", h->arch, cgm_arch());
    uint64_t have = opts && opts->cpu_features ? opts->cpu_features : cge_cpu_features();
    uint64_t missing = h->cpu_required & ~have;
    if (missing) {
        char a[256], b[512];
        return bad(L, "its kernels need CPU features this machine lacks: %s (the model needs %s)",
                   cge_cpu_features_str(missing, a, sizeof a),
                   cge_cpu_features_str(h->cpu_required, b, sizeof b));
    }
    return CGE_OK;
}

/* The shape program's section (version 2): a header naming how many
 * symbols follow, then their names; absent or empty for a static plan. */
static cge_status check_shape_program(loader *L)
{
    const cgm_section *s = L->sec[CGM_SEC_SHAPES];
    if (!s || !s->count)
        return CGE_OK;
    const cgm_symbol *r = (const cgm_symbol *)(L->base + s->offset);
    if (r[0].a != CGM_SHAPES_MAGIC)
        return bad(L, "the shape program section does not begin with its header (%08x)", r[0].a);
    if ((uint64_t)r[0].b + 1 != s->count || r[0].b >= CGE_DIM_DERIVED_FIRST)
        return bad(L, "the shape program names %u symbols in %llu records", r[0].b,
                   (unsigned long long)s->count - 1);
    for (uint32_t k = 1; k <= r[0].b; k++) {
        char what[48];
        const char *nm = "";
        snprintf(what, sizeof what, "symbol %u of the shape program", k - 1);
        cge_status st = get_str(L, r[k].a, true, what, &nm);
        if (st)
            return st;
        if (r[k].b)
            return bad(L, "%s has reserved bits %08x set", what, r[k].b);
    }
    L->symbolic = true;
    L->symbols = r + 1;
    L->num_symbols = r[0].b;
    return CGE_OK;
}

static cge_status check_sections(loader *L)
{
    const cgm_header *h = L->h;
    if (h->num_sections == 0 || h->num_sections > 64 || h->section_table % 8 ||
        !in_range(h->section_table, (uint64_t)h->num_sections * sizeof(cgm_section), h->meta_end) ||
        h->section_table < sizeof(cgm_header))
        return bad(L, "section table (%u entries at %llu) lies outside the metadata (%llu bytes)",
                   h->num_sections, (unsigned long long)h->section_table,
                   (unsigned long long)h->meta_end);
    const cgm_section *tab = (const cgm_section *)(L->base + h->section_table);
    for (uint32_t i = 0; i < h->num_sections; i++) {
        const cgm_section *s = &tab[i];
        if (s->kind == 0 || s->kind >= CGM_SEC_COUNT ||
            (s->kind == CGM_SEC_SHAPES && h->format_version < 2) ||
            (s->kind == CGM_SEC_PACKED && h->format_version < 3))
            return bad(L, "section %u has unknown kind %u", i, s->kind);
        const char *nm = section_names[s->kind];
        if (L->sec[s->kind])
            return bad(L, "section '%s' appears twice", nm);
        if (s->record_bytes != record_bytes[s->kind])
            return bad(L, "section '%s' has %u-byte records; version %u's are %u bytes", nm,
                       s->record_bytes, h->format_version, record_bytes[s->kind]);
        if (s->offset % 8 || s->offset < sizeof(cgm_header) ||
            !in_range(s->offset, s->bytes, h->meta_end))
            return bad(L, "section '%s' (%llu bytes at %llu) lies outside the metadata (%llu "
                          "bytes) or is misaligned",
                       nm, (unsigned long long)s->bytes, (unsigned long long)s->offset,
                       (unsigned long long)h->meta_end);
        if (s->count > s->bytes / s->record_bytes || s->count * s->record_bytes != s->bytes)
            return bad(L, "section '%s' claims %llu records in %llu bytes", nm,
                       (unsigned long long)s->count, (unsigned long long)s->bytes);
        L->sec[s->kind] = s;
    }
    for (int k = CGM_SEC_STRINGS; k <= CGM_SEC_INDICES; k++)
        if (!L->sec[k])
            return bad(L, "the '%s' section is missing", section_names[k]);
    const cgm_section *s = L->sec[CGM_SEC_STRINGS];
    L->strings = L->base + s->offset;
    L->strings_bytes = s->bytes;
    if (!s->bytes || L->strings[s->bytes - 1] != '\0')
        return bad(L, "the string table does not end with a NUL byte");
    if (L->sec[CGM_SEC_MODEL]->count != 1)
        return bad(L, "the model section holds %llu records; it must hold one",
                   (unsigned long long)L->sec[CGM_SEC_MODEL]->count);
    L->m = (const cgm_model *)(L->base + L->sec[CGM_SEC_MODEL]->offset);
    L->values = (const cgm_value *)(L->base + L->sec[CGM_SEC_VALUES]->offset);
    L->steps = (const cgm_step *)(L->base + L->sec[CGM_SEC_STEPS]->offset);
    L->idx = (const int32_t *)(L->base + L->sec[CGM_SEC_INDICES]->offset);
    L->num_idx = L->sec[CGM_SEC_INDICES]->count;
    if (L->sec[CGM_SEC_ATTRS]) {
        L->attrs = (const cgm_attr *)(L->base + L->sec[CGM_SEC_ATTRS]->offset);
        L->num_attrs = L->sec[CGM_SEC_ATTRS]->count;
    }
    if (L->sec[CGM_SEC_AUX]) {
        L->aux = L->base + L->sec[CGM_SEC_AUX]->offset;
        L->aux_bytes = L->sec[CGM_SEC_AUX]->bytes;
    }
    if (L->sec[CGM_SEC_LIBS]) {
        L->libs = (const cgm_lib *)(L->base + L->sec[CGM_SEC_LIBS]->offset);
        L->num_libs = L->sec[CGM_SEC_LIBS]->count;
    }
    L->weights = L->base + h->weights_offset;
    return check_shape_program(L);
}

static cge_status check_shape(const loader *L, const char *what, int32_t dtype, int32_t rank,
                              const int64_t *dims, uint64_t bytes, cge_shape *shape)
{
    if (!cge_dtype_valid((cge_dtype)dtype))
        return bad(L, "%s has invalid dtype %d", what, dtype);
    if (rank < 0 || rank > CGE_MAX_RANK)
        return bad(L, "%s has rank %d (at most %d)", what, rank, CGE_MAX_RANK);
    memset(shape, 0, sizeof *shape);
    shape->rank = rank;
    for (int32_t k = 0; k < rank; k++) {
        /* A symbolic plan's dims may be its named symbols, sizes derived
         * from them (a strided window's), or unknown until the shape
         * program runs (a Reshape to computed sizes). */
        int64_t base = dims[k], add = 0, div = 1;
        if (L->symbolic && dims[k] < 0 && cge_dim_derived_parts(dims[k], &base, &add, &div))
            (void)add;
        bool sym = L->symbolic && (dims[k] == CGE_DIM_DYNAMIC ||   /* the shape program's */
                                   (cge_dim_is_symbol(base) && div >= 1 &&
                                    cge_dim_symbol_id(base) < (int64_t)L->num_symbols));
        if (!sym && (dims[k] < 0 || dims[k] > ((int64_t)1 << 32)))
            return bad(L, "%s has dimension %d of size %lld", what, (int)k, (long long)dims[k]);
        shape->dims[k] = dims[k];
    }
    if (!cge_shape_is_static(shape)) {
        if (bytes)
            return bad(L, "%s has symbolic dims and %llu bytes; the file must say 0", what,
                       (unsigned long long)bytes);
        return CGE_OK;
    }
    if (cge_tensor_too_large((cge_dtype)dtype, shape)) {
        char sh[CGE_SHAPE_STR_MAX], sz[64];
        return bad(L, "%s is %s %s: %s, too large (a tensor holds at most 2^56 bytes)", what,
                   cge_dtype_name((cge_dtype)dtype), cge_shape_str(shape, sh, sizeof sh),
                   cge_tensor_size_str((cge_dtype)dtype, shape, sz, sizeof sz));
    }
    size_t need = cge_tensor_nbytes((cge_dtype)dtype, shape);
    if (need == SIZE_MAX || need != bytes)
        return bad(L, "%s is %s of %zu bytes; the file says %llu", what,
                   cge_dtype_name((cge_dtype)dtype), need, (unsigned long long)bytes);
    return CGE_OK;
}

/* Counts, values, graph inputs and outputs. */
static cge_status check_model(loader *L)
{
    const cgm_model *m = L->m;
    if (m->num_values < 0 || m->num_values > MAX_COUNT ||
        (uint64_t)m->num_values != L->sec[CGM_SEC_VALUES]->count)
        return bad(L, "the model has %d values; the values section holds %llu", m->num_values,
                   (unsigned long long)L->sec[CGM_SEC_VALUES]->count);
    if (m->num_steps < 0 || m->num_steps > MAX_COUNT ||
        (uint64_t)m->num_steps != L->sec[CGM_SEC_STEPS]->count)
        return bad(L, "the model has %d steps; the steps section holds %llu", m->num_steps,
                   (unsigned long long)L->sec[CGM_SEC_STEPS]->count);
    if (m->num_inputs < 0 || m->num_outputs < 1 || m->num_inputs > m->num_values ||
        m->num_outputs > m->num_values || !in_range(m->inputs_first, (uint64_t)m->num_inputs, L->num_idx) ||
        !in_range(m->outputs_first, (uint64_t)m->num_outputs, L->num_idx))
        return bad(L, "graph inputs (%d) or outputs (%d) lie outside the index table",
                   m->num_inputs, m->num_outputs);
    if (m->num_streams < 1 || m->num_streams > 16 || m->num_events < 0 ||
        m->num_events > m->num_steps)
        return bad(L, "%d streams and %d events for %d steps", m->num_streams, m->num_events,
                   m->num_steps);
    if (m->constant_bytes > L->h->weights_bytes)
        return bad(L, "constants claim %llu bytes; the weights hold %llu",
                   (unsigned long long)m->constant_bytes,
                   (unsigned long long)L->h->weights_bytes);
    if (m->num_attrs < 0 || (uint64_t)m->num_attrs != L->num_attrs)
        return bad(L, "the model has %d attributes; the attributes section holds %llu",
                   m->num_attrs, (unsigned long long)L->num_attrs);
    const char *s = "";
    cge_status st = get_str(L, m->graph_name, false, "graph name", &s);
    for (int32_t v = 0; !st && v < m->num_values; v++) {
        const cgm_value *r = &L->values[v];
        char what[64];
        snprintf(what, sizeof what, "value %d", (int)v);
        if ((st = get_str(L, r->name, true, what, &s)))
            break;
        cge_shape shape;
        snprintf(what, sizeof what, "value '%.40s'", s);
        if ((st = check_shape(L, what, r->dtype, r->rank, r->dims, r->bytes, &shape)))
            break;
        uint64_t limit = r->storage == CGE_STORAGE_ARENA ? m->arena_bytes
                         : r->storage == CGE_STORAGE_CONSTANT ? m->constant_bytes : 0;
        if (r->storage != CGE_STORAGE_ARENA && r->storage != CGE_STORAGE_CONSTANT &&
            r->storage != CGE_STORAGE_NONE)
            st = bad(L, "%s has unknown storage %d", what, r->storage);
        else if (L->symbolic && r->storage == CGE_STORAGE_ARENA && r->offset)
            st = bad(L, "%s has arena offset %llu in a symbolic plan (its offsets are made per "
                        "signature)", what, (unsigned long long)r->offset);
        else if (r->storage != CGE_STORAGE_NONE &&
                 !(L->symbolic && r->storage == CGE_STORAGE_ARENA) &&
                 !in_range(r->offset, r->bytes, limit))
            st = bad(L, "%s (%llu bytes at %llu) lies outside its %s (%llu bytes)", what,
                     (unsigned long long)r->bytes, (unsigned long long)r->offset,
                     r->storage == CGE_STORAGE_ARENA ? "arena" : "constants",
                     (unsigned long long)limit);
        else if (r->storage != CGE_STORAGE_NONE &&
                 r->offset % (r->alias_of < 0 ? 64 : cge_dtype_size((cge_dtype)r->dtype)))
            /* The planner places every buffer at a multiple of 64; kernels
             * read elements at their natural alignment. */
            st = bad(L, "%s is at offset %llu, not aligned for its kernels", what,
                     (unsigned long long)r->offset);
        else if (r->alias_of < -1 || r->alias_of >= m->num_values || r->alias_of == v)
            st = bad(L, "%s shares the memory of value %d (of %d)", what, r->alias_of,
                     m->num_values);
        else if (r->first_step < -1 || r->first_step > m->num_steps || r->last_step < -1 ||
                 r->last_step > m->num_steps || r->input_index < -1 ||
                 r->input_index >= m->num_inputs || r->output_index < -1 ||
                 r->output_index >= m->num_outputs || r->format < 0 || r->format > 2 ||
                 r->memory_space < 0)
            st = bad(L, "%s has out-of-range lifetime, position, format or memory space", what);
    }
    /* Alias chains end (no cycles). */
    for (int32_t v = 0; !st && v < m->num_values; v++) {
        int32_t x = v, hops = 0;
        while (!st && L->values[x].alias_of >= 0) {
            x = L->values[x].alias_of;
            if (++hops > m->num_values)
                st = bad(L, "value %d's shared memory forms a cycle", (int)v);
        }
    }
    for (int32_t i = 0; !st && i < m->num_inputs + m->num_outputs; i++) {
        bool in = i < m->num_inputs;
        int32_t v = in ? L->idx[m->inputs_first + (uint32_t)i]
                       : L->idx[m->outputs_first + (uint32_t)(i - m->num_inputs)];
        if (v < 0 || v >= m->num_values)
            st = bad(L, "graph %s %d names value %d (of %d)", in ? "input" : "output",
                     in ? i : i - m->num_inputs, v, m->num_values);
        else if (in && L->values[v].storage != CGE_STORAGE_ARENA)
            st = bad(L, "graph input %d is not in the arena", i);
        else if (!in && L->values[v].storage == CGE_STORAGE_NONE)
            st = bad(L, "graph output %d has no storage", i - m->num_inputs);
    }
    return st;
}

static cge_status check_steps(loader *L)
{
    const cgm_model *m = L->m;
    for (int32_t t = 0; t < m->num_steps; t++) {
        const cgm_step *r = &L->steps[t];
        const char *s = "";
        char what[64];
        snprintf(what, sizeof what, "step %d", (int)t);
        cge_status st = get_str(L, r->name, true, what, &s);
        if (!st)
            st = get_str(L, r->op, true, what, &s);
        if (!st)
            st = get_str(L, r->domain, false, what, &s);
        if (!st)
            st = get_str(L, r->engine, true, what, &s);
        if (st)
            return st;
        if (r->stream < 0 || r->stream >= m->num_streams)
            return bad(L, "%s runs on stream %d (of %d)", what, r->stream, m->num_streams);
        if (r->num_inputs < 0 || r->num_outputs < 1 || r->num_inputs > MAX_STEP_IO ||
            r->num_outputs > MAX_STEP_IO ||
            !in_range(r->io_first, (uint64_t)r->num_inputs + (uint64_t)r->num_outputs, L->num_idx))
            return bad(L, "%s: %d inputs and %d outputs lie outside the index table", what,
                       r->num_inputs, r->num_outputs);
        for (int32_t k = 0; k < r->num_inputs + r->num_outputs; k++) {
            int32_t v = L->idx[r->io_first + (uint32_t)k];
            bool in = k < r->num_inputs;
            if (v < (in ? -1 : 0) || v >= m->num_values)
                return bad(L, "%s: %s %d names value %d (of %d)", what, in ? "input" : "output",
                           in ? k : k - r->num_inputs, v, m->num_values);
            if (v >= 0 && L->values[v].storage == CGE_STORAGE_NONE)
                return bad(L, "%s: value %d has no storage", what, v);
        }
        if (r->num_waits < 0 || r->num_waits > m->num_events ||
            !in_range(r->waits_first, (uint64_t)r->num_waits, L->num_idx))
            return bad(L, "%s: %d waits lie outside the index table", what, r->num_waits);
        for (int32_t k = 0; k < r->num_waits; k++) {
            int32_t e = L->idx[r->waits_first + (uint32_t)k];
            if (e < 0 || e >= m->num_events)
                return bad(L, "%s waits for event %d (of %d)", what, e, m->num_events);
        }
        if (r->record < -1 || r->record >= m->num_events)
            return bad(L, "%s records event %d (of %d)", what, r->record, m->num_events);
        if (r->num_attrs < 0 || !in_range(r->attr_first, (uint64_t)r->num_attrs, L->num_attrs))
            return bad(L, "%s: %d attributes lie outside the attribute table", what,
                       r->num_attrs);
        if (!in_range(r->ws_offset, r->ws_bytes, m->arena_bytes) || r->ws_offset % 64 ||
            r->ws_last < t ||
            r->ws_last > m->num_steps)
            return bad(L, "%s: workspace (%llu bytes at %llu) lies outside the arena (%llu "
                          "bytes) or outlives the plan",
                       what, (unsigned long long)r->ws_bytes, (unsigned long long)r->ws_offset,
                       (unsigned long long)m->arena_bytes);
    }
    for (uint64_t i = 0; i < L->num_libs; i++) {
        const char *s = "";
        cge_status st = get_str(L, L->libs[i].name, true, "library name", &s);
        if (!st)
            st = get_str(L, L->libs[i].path, false, "library path", &s);
        if (st)
            return st;
    }
    return CGE_OK;
}

/* ---- rebuilding ------------------------------------------------------------- */

static cge_status aux_span(const loader *L, const char *what, uint64_t off, uint64_t n,
                           uint64_t elem, uint64_t align, const void **out)
{
    if (n > L->aux_bytes / (elem ? elem : 1) || off % align || !in_range(off, n * elem, L->aux_bytes))
        return bad(L, "%s: %llu items at %llu lie outside the aux section (%llu bytes)", what,
                   (unsigned long long)n, (unsigned long long)off,
                   (unsigned long long)L->aux_bytes);
    *out = L->aux + off;
    return CGE_OK;
}

static cge_status tensor_of(const loader *L, const char *what, const cgm_tensor *r, cge_tensor *t)
{
    cge_status st = check_shape(L, what, r->dtype, r->rank, r->dims, r->bytes, &t->shape);
    const void *data = NULL;
    if (!st)
        st = aux_span(L, what, r->data, r->bytes, 1, 1, &data);
    t->dtype = (cge_dtype)r->dtype;
    t->data = (void *)data;
    t->bytes = r->bytes;
    t->name = NULL;
    return st;
}

/* Meta functions compute with attribute integers; values no operator uses
 * (beyond +-2^30, other than the schema's own default, such as an INT64_MIN
 * "absent" marker) are refused rather than handed to that arithmetic. */
#define ATTR_INT_LIMIT ((int64_t)1 << 30)

static bool int_ok(const cge_op_def *def, const char *name, int64_t v)
{
    if (v >= -ATTR_INT_LIMIT && v <= ATTR_INT_LIMIT)
        return true;
    for (int32_t i = 0; def && i < def->num_attrs; i++)
        if (!strcmp(def->attrs[i].name, name))
            return def->attrs[i].default_i == v;
    return false;
}

static cge_status set_attr(const loader *L, cge_node *n, const cgm_attr *r, int depth);

/* A body from its record (version 4), `depth` bodies deep. Its constants
 * are copied out of the file; every name, count and offset is checked. */
static cge_status graph_of(const loader *L, const char *what, const cgm_graph *r, int depth,
                           cge_graph **out)
{
    *out = NULL;
    if (depth >= CGM_GRAPH_DEPTH_MAX)
        return bad(L, "%s: bodies nest more than %d deep", what, CGM_GRAPH_DEPTH_MAX);
    const void *ins = NULL, *outs = NULL, *cs = NULL, *ns = NULL;
    const char *name = NULL;
    cge_status st = get_str(L, r->name, false, what, &name);
    if (!st)
        st = aux_span(L, what, r->inputs, r->num_inputs, sizeof(cgm_graph_input), 8, &ins);
    if (!st)
        st = aux_span(L, what, r->outputs, r->num_outputs, sizeof(uint32_t), 4, &outs);
    if (!st)
        st = aux_span(L, what, r->constants, r->num_constants, sizeof(cgm_graph_constant), 8,
                      &cs);
    if (!st)
        st = aux_span(L, what, r->nodes, r->num_nodes, sizeof(cgm_graph_node), 8, &ns);
    cge_graph *g = NULL;
    if (!st && cge_graph_create(name[0] ? name : "body", &g))
        st = wrap(L, what);
    for (uint32_t i = 0; !st && i < r->num_inputs; i++) {
        const cgm_graph_input *in = &((const cgm_graph_input *)ins)[i];
        const char *nm = NULL;
        st = get_str(L, in->name, true, what, &nm);
        bool tensor = in->value_type == CGE_TYPE_TENSOR;
        cge_shape sh = {0};
        if (!st && tensor && (in->rank < 0 || in->rank > CGE_MAX_RANK))
            st = bad(L, "%s: input '%.60s' has rank %d", what, nm, in->rank);
        for (int32_t k = 0; !st && tensor && k < in->rank; k++) {
            if (in->dims[k] < CGE_DIM_DYNAMIC || in->dims[k] > ((int64_t)1 << 32))
                st = bad(L, "%s: input '%.60s' has dimension %d of size %lld", what, nm, (int)k,
                         (long long)in->dims[k]);
            sh.dims[k] = in->dims[k];
        }
        sh.rank = tensor ? in->rank : 0;
        if (!st && (!cge_dtype_valid((cge_dtype)in->dtype) ||
                    in->value_type < CGE_TYPE_TENSOR || in->value_type > CGE_TYPE_OPTIONAL))
            st = bad(L, "%s: input '%.60s' has dtype %d and value type %d", what, nm, in->dtype,
                     in->value_type);
        if (!st && cge_graph_add_input(g, nm, (cge_dtype)in->dtype, &sh))
            st = wrap(L, what);
        if (!st && !tensor && cge_graph_set_value_type(g, nm, (cge_value_type)in->value_type))
            st = wrap(L, what);
    }
    for (uint32_t i = 0; !st && i < r->num_constants; i++) {
        const cgm_graph_constant *c = &((const cgm_graph_constant *)cs)[i];
        const char *nm = NULL;
        cge_tensor t;
        st = get_str(L, c->name, true, what, &nm);
        if (!st)
            st = tensor_of(L, what, &c->t, &t);
        if (!st && !cge_shape_is_static(&t.shape))
            st = bad(L, "%s: constant '%.60s' has no size", what, nm);
        if (!st && cge_graph_add_constant(g, nm, t.dtype, &t.shape, t.data, t.bytes))
            st = wrap(L, what);
    }
    for (uint32_t i = 0; !st && i < r->num_nodes; i++) {
        const cgm_graph_node *nr = &((const cgm_graph_node *)ns)[i];
        const char *nm = NULL, *op = NULL, *dom = NULL, *io[2 * 64];
        const void *ir = NULL, *orr = NULL, *ar = NULL;
        st = get_str(L, nr->name, true, what, &nm);
        if (!st)
            st = get_str(L, nr->op, true, what, &op);
        if (!st)
            st = get_str(L, nr->domain, false, what, &dom);
        if (!st && (nr->num_inputs > 64 || nr->num_outputs > 64))
            st = bad(L, "%s: node '%.60s' has %u inputs and %u outputs (at most 64 each)", what,
                     nm, nr->num_inputs, nr->num_outputs);
        if (!st)
            st = aux_span(L, what, nr->inputs, nr->num_inputs, sizeof(uint32_t), 4, &ir);
        if (!st)
            st = aux_span(L, what, nr->outputs, nr->num_outputs, sizeof(uint32_t), 4, &orr);
        if (!st)
            st = aux_span(L, what, nr->attrs, nr->num_attrs, sizeof(cgm_attr), 8, &ar);
        for (uint32_t k = 0; !st && k < nr->num_inputs; k++)
            st = get_str(L, ((const uint32_t *)ir)[k], false, what, &io[k]);
        for (uint32_t k = 0; !st && k < nr->num_outputs; k++)
            st = get_str(L, ((const uint32_t *)orr)[k], true, what, &io[64 + k]);
        cge_node *n = NULL;
        if (!st && cge_graph_add_node(g, op, dom, nm, io, (int32_t)nr->num_inputs, io + 64,
                                      (int32_t)nr->num_outputs, &n))
            st = wrap(L, what);
        for (uint32_t k = 0; !st && k < nr->num_attrs; k++)
            st = set_attr(L, n, &((const cgm_attr *)ar)[k], depth + 1);
    }
    for (uint32_t i = 0; !st && i < r->num_outputs; i++) {
        const char *nm = NULL;
        st = get_str(L, ((const uint32_t *)outs)[i], true, what, &nm);
        if (!st && cge_graph_add_output(g, nm))
            st = wrap(L, what);
    }
    if (st) {
        cge_graph_destroy(g);
        return st;
    }
    *out = g;
    return CGE_OK;
}

/* Attribute record `r` of node `n`, which lies `depth` bodies deep. */
static cge_status set_attr(const loader *L, cge_node *n, const cgm_attr *r, int depth)
{
    char what[160];
    cge_attr a = {.kind = (cge_attr_kind)r->kind};
    cge_status st = get_str(L, r->name, true, "attribute name", &a.name);
    if (st)
        return st;
    snprintf(what, sizeof what, "node '%.60s' attribute '%.60s'", cge_node_name(n), a.name);
    const void *p = NULL;
    cge_tensor *ts = NULL;
    const char **ss = NULL;
    cge_graph **gs = NULL;
    if (r->n < 0)
        return bad(L, "%s has length %lld", what, (long long)r->n);
    switch (r->kind) {
    case CGE_ATTR_INT: a.i = r->i; break;
    case CGE_ATTR_FLOAT: a.f = r->f; break;
    case CGE_ATTR_STRING: st = get_str(L, r->s, false, what, &a.s); break;
    case CGE_ATTR_INTS:
        st = aux_span(L, what, r->aux, (uint64_t)r->n, 8, 8, &p);
        a.ints = p;
        a.n = r->n;
        break;
    case CGE_ATTR_FLOATS:
        st = aux_span(L, what, r->aux, (uint64_t)r->n, 4, 4, &p);
        a.floats = p;
        a.n = r->n;
        break;
    case CGE_ATTR_STRINGS:
        st = aux_span(L, what, r->aux, (uint64_t)r->n, 4, 4, &p);
        if (!st && !(ss = calloc((size_t)r->n + 1, sizeof *ss)))
            st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
        for (int64_t k = 0; !st && k < r->n; k++)
            st = get_str(L, ((const uint32_t *)p)[k], false, what, &ss[k]);
        a.strings = ss;
        a.n = r->n;
        break;
    case CGE_ATTR_TENSOR:
    case CGE_ATTR_TENSORS: {
        uint64_t cnt = r->kind == CGE_ATTR_TENSOR ? 1 : (uint64_t)r->n;
        st = aux_span(L, what, r->aux, cnt, sizeof(cgm_tensor), 8, &p);
        if (!st && !(ts = calloc(cnt + 1, sizeof *ts)))
            st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
        for (uint64_t k = 0; !st && k < cnt; k++)
            st = tensor_of(L, what, &((const cgm_tensor *)p)[k], &ts[k]);
        a.t = ts;
        a.tensors = ts;
        a.n = (int64_t)cnt;
        break;
    }
    case CGE_ATTR_GRAPH:
    case CGE_ATTR_GRAPHS: {
        uint64_t cnt = r->kind == CGE_ATTR_GRAPH ? 1 : (uint64_t)r->n;
        if (L->h->format_version < 4) {
            st = bad(L, "%s is a graph, which format version %u cannot hold", what,
                     L->h->format_version);
            break;
        }
        st = aux_span(L, what, r->aux, cnt, sizeof(cgm_graph), 8, &p);
        if (!st && !(gs = calloc(cnt + 1, sizeof *gs)))
            st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
        for (uint64_t k = 0; !st && k < cnt; k++)
            st = graph_of(L, what, &((const cgm_graph *)p)[k], depth, &gs[k]);
        a.g = gs ? gs[0] : NULL;
        a.graphs = (const cge_graph *const *)gs;
        a.n = (int64_t)cnt;
        break;
    }
    default:
        st = bad(L, "%s has kind %d, which a model file cannot hold", what, r->kind);
    }
    if (!st && (r->kind == CGE_ATTR_INT || r->kind == CGE_ATTR_INTS)) {
        const cge_op_def *def = cge_op_find(cge_node_domain(n), cge_node_op_type(n), 0);
        cge_clear_error();
        for (int64_t k = 0; !st && k < (r->kind == CGE_ATTR_INT ? 1 : a.n); k++) {
            int64_t v = r->kind == CGE_ATTR_INT ? a.i : a.ints[k];
            if (!int_ok(def, a.name, v))
                st = bad(L, "%s holds %lld, beyond what any operator takes", what, (long long)v);
        }
    }
    if (!st && cge_attrs_set(cge_node_attrs(n), &a))
        st = wrap(L, what);
    free(ts);
    free(ss);
    for (int64_t k = 0; gs && k < a.n; k++)
        cge_graph_destroy(gs[k]);
    free(gs);
    return st;
}

static const char *origin_hint(const loader *L, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t k = 0;
    for (uint64_t i = 0; i < L->num_libs && k < size; i++) {
        const char *nm = str_at(L, L->libs[i].name), *path = str_at(L, L->libs[i].path);
        k += (size_t)snprintf(buf + k, size - k, "%s'%s'%s%s%s", i ? ", " : "", nm,
                              path[0] ? " (compiled with " : "", path, path[0] ? ")" : "");
    }
    return buf;
}

/* Nodes in step order (node index == step index), inputs and outputs named by
 * the values they read and write, attributes, descriptors of every value. */
static cge_status build_graph(loader *L, cge_graph **out)
{
    const cgm_model *m = L->m;
    cge_graph *g = NULL;
    if (cge_graph_create(str_at(L, m->graph_name), &g))
        return wrap(L, "graph");
    cge_status st = CGE_OK;
    const char **names = calloc(2 * MAX_STEP_IO + 2, sizeof *names);
    if (!names)
        st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
    /* The symbols first, in id order, so that the ids the values carry
     * name the same dims here. */
    for (uint32_t k = 0; !st && k < L->num_symbols; k++) {
        const char *nm = str_at(L, L->symbols[k].a);
        if (cge_graph_dim_symbol(g, nm) != CGE_DIM_SYMBOL((int64_t)k)) {
            cge_clear_error();
            st = bad(L, "symbol %u ('%s') of the shape program is named twice", k, nm);
        }
    }
    for (int32_t i = 0; !st && i < m->num_inputs; i++) {
        const cgm_value *v = &L->values[L->idx[m->inputs_first + (uint32_t)i]];
        cge_shape shape = {.rank = v->rank};
        memcpy(shape.dims, v->dims, sizeof shape.dims);
        if (cge_graph_add_input(g, str_at(L, v->name), (cge_dtype)v->dtype, &shape))
            st = wrap(L, "graph input");
    }
    for (int32_t t = 0; !st && t < m->num_steps; t++) {
        const cgm_step *r = &L->steps[t];
        for (int32_t k = 0; k < r->num_inputs + r->num_outputs; k++) {
            int32_t v = L->idx[r->io_first + (uint32_t)k];
            names[k] = v >= 0 ? str_at(L, L->values[v].name) : "";
        }
        cge_node *n = NULL;
        if (cge_graph_add_node(g, str_at(L, r->op), str_at(L, r->domain), str_at(L, r->name),
                               names, r->num_inputs, names + r->num_inputs, r->num_outputs, &n)) {
            st = wrap(L, "node");
            break;
        }
        for (int32_t k = 0; !st && k < r->num_attrs; k++)
            st = set_attr(L, n, &L->attrs[r->attr_first + (uint32_t)k], 0);
    }
    for (int32_t i = 0; !st && i < m->num_outputs; i++)
        if (cge_graph_add_output(g, str_at(L, L->values[L->idx[m->outputs_first + (uint32_t)i]].name)))
            st = wrap(L, "graph output");
    for (int32_t v = 0; !st && v < m->num_values; v++) {
        const cgm_value *r = &L->values[v];
        cge_shape shape = {.rank = r->rank};
        memcpy(shape.dims, r->dims, sizeof shape.dims);
        const char *nm = str_at(L, r->name);
        if (cge_graph_set_desc(g, nm, (cge_dtype)r->dtype, &shape) ||
            cge_graph_set_format(g, nm, (cge_format)r->format))
            st = wrap(L, "value");
    }
    free(names);
    if (st) {
        cge_graph_destroy(g);
        return st;
    }
    *out = g;
    return CGE_OK;
}

/* Operator, kernel and meta of one step, as the compiler chose and checked them. */
static cge_status bind_step(loader *L, cge_plan *p, int32_t t)
{
    cge_plan_step *s = &cge__plan_steps_mut(p)[t];
    const cge_plan_value *values = cge_plan_values(p);
    const cgm_step *r = &L->steps[t];
    const cge_node *n = s->node;
    char hint[512];
    s->def = cge_op_find(cge_node_domain(n), cge_node_op_type(n), 0);
    if (!s->def)
        return bad(L, "node '%s' needs operator %s%s%s, which this cge lacks%s%s", cge_node_name(n),
                   cge_node_domain(n), cge_node_domain(n)[0] ? "." : "", cge_node_op_type(n),
                   L->num_libs ? "; the model uses custom operator libraries " : "",
                   origin_hint(L, hint, sizeof hint));
    if (cge_node_check_schema(cge_plan_graph(p), n))
        return wrap(L, "schema");
    cge_dtype kd = CGE_DTYPE_UNDEFINED;
    for (int32_t k = 0; k < s->num_inputs && kd == CGE_DTYPE_UNDEFINED; k++)
        if (s->inputs[k] >= 0)
            kd = values[s->inputs[k]].dtype;
    if (kd == CGE_DTYPE_UNDEFINED)
        kd = values[s->outputs[0]].dtype;
    if ((int32_t)kd != r->kernel_dtype)
        return bad(L, "node '%s': its kernel is recorded for %s, its inputs are %s",
                   cge_node_name(n), cge_dtype_name((cge_dtype)r->kernel_dtype), cge_dtype_name(kd));
    const char *engine = str_at(L, r->engine);
    s->kernel = cge_op_find_kernel(s->def, engine, kd);
    if (!s->kernel)
        return bad(L, "node '%s' (%s): this cge has no '%s' kernel for %s (engines differ)",
                   cge_node_name(n), cge_node_op_type(n), engine, cge_dtype_name(kd));
    cge_clear_error();
    s->engine = s->kernel->engine;
    /* The operator's meta checks the shapes the kernels will trust. */
    int32_t ni = s->num_inputs, no = s->num_outputs;
    cge_tensor_desc *in = calloc((size_t)(ni + no) + 1, sizeof *in);
    const void **vals = calloc((size_t)ni + 1, sizeof *vals);
    cge_tensor *tin = calloc((size_t)(ni + no) + 1, sizeof *tin);
    cge_status st = CGE_OK;
    if (!in || !vals || !tin)
        st = cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
    cge_tensor_desc *outd = in ? in + ni : NULL;
    for (int32_t k = 0; !st && k < ni; k++) {
        in[k].name = "";
        if (s->inputs[k] < 0)
            continue;
        const cge_plan_value *v = &values[s->inputs[k]];
        in[k] = (cge_tensor_desc){.name = v->name, .dtype = v->dtype, .shape = v->shape,
                                  .format = v->format};
        if (v->storage == CGE_STORAGE_CONSTANT)
            vals[k] = L->weights + v->offset;
        tin[k] = (cge_tensor){.name = v->name, .dtype = v->dtype, .shape = v->shape,
                              .bytes = v->bytes};
    }
    for (int32_t k = 0; !st && k < no; k++)
        outd[k] = (cge_tensor_desc){.name = values[s->outputs[k]].name};
    if (!st && cge_op_infer(s->def, cge_node_name(n), cge_node_attrs_const(n), in,
                            (const void *const *)vals, NULL, ni, outd, no))
        st = wrap(L, "meta");
    char a[CGE_SHAPE_STR_MAX], b[CGE_SHAPE_STR_MAX];
    for (int32_t k = 0; !st && k < no; k++) {
        const cge_plan_value *v = &values[s->outputs[k]];
        /* A shape that only values computed at run time fix (plans compiled
         * without constant folding) is dynamic here: its known dims must agree. */
        bool same = outd[k].dtype == v->dtype && outd[k].shape.rank == v->shape.rank;
        for (int32_t d = 0; same && d < v->shape.rank; d++)
            same = outd[k].shape.dims[d] < 0 || outd[k].shape.dims[d] == v->shape.dims[d];
        if (!same)
            st = bad(L, "node '%s' (%s): output %d is %s %s by its meta; the file says %s %s",
                     cge_node_name(n), cge_node_op_type(n), (int)k, cge_dtype_name(outd[k].dtype),
                     cge_shape_str(&outd[k].shape, a, sizeof a), cge_dtype_name(v->dtype),
                     cge_shape_str(&v->shape, b, sizeof b));
        tin[ni + k] = (cge_tensor){.name = v->name, .dtype = v->dtype, .shape = v->shape,
                                   .bytes = v->bytes};
    }
    if (!st && s->kernel->workspace_size && !L->symbolic) {   /* symbolic: per signature */
        cge_kernel_ctx kc = {.op_type = cge_node_op_type(n), .node_name = cge_node_name(n),
                             .num_inputs = ni, .inputs = tin, .num_outputs = no,
                             .outputs = tin + ni, .attrs = cge_node_attrs_const(n)};
        size_t need = s->kernel->workspace_size(&kc);
        if (need > s->workspace_bytes)
            st = bad(L, "node '%s' (%s): its kernel needs %zu bytes of workspace; the file gives "
                        "%zu", cge_node_name(n), cge_node_op_type(n), need, s->workspace_bytes);
    }
    free(in);
    free(vals);
    free(tin);
    return st;
}

static cge_status build_plan(loader *L, cge_plan **out)
{
    const cgm_model *m = L->m;
    cge_plan *p = NULL;
    cge_graph *g = NULL;
    cge_status st = cge__plan_create(&p);
    if (st)
        return wrap(L, "plan");
    st = build_graph(L, &g);
    if (!st)
        cge__plan_set_graph(p, g);
    uint64_t nio = 0;
    for (int32_t t = 0; t < m->num_steps; t++)
        nio += (uint64_t)L->steps[t].num_inputs + (uint64_t)L->steps[t].num_outputs +
               (uint64_t)L->steps[t].num_waits;
    if (!st && cge__plan_reserve(p, m->num_steps, m->num_values, m->num_inputs, m->num_outputs,
                                 (size_t)nio))
        st = wrap(L, "plan");
    for (int32_t v = 0; !st && v < m->num_values; v++) {
        const cgm_value *r = &L->values[v];
        int32_t id = cge_graph_value_id(g, str_at(L, r->name));
        cge_plan_value pv = {
            .dtype = (cge_dtype)r->dtype, .shape = {.rank = r->rank},
            .format = (cge_format)r->format, .memory_space = r->memory_space, .bytes = r->bytes,
            .storage = (cge_plan_storage)r->storage, .offset = r->offset,
            .alias_of = r->alias_of, .first_step = r->first_step, .last_step = r->last_step,
            .input_index = r->input_index, .output_index = r->output_index};
        memcpy(pv.shape.dims, r->dims, sizeof pv.shape.dims);
        if (id < 0 || cge__plan_add_value(p, id, &pv, NULL)) {
            st = bad(L, "value '%s' is %s", str_at(L, r->name),
                     id < 0 ? "used by nothing" : "listed twice");
            break;
        }
    }
    for (int32_t i = 0; !st && i < m->num_inputs; i++)
        cge__plan_set_io(p, false, i, L->idx[m->inputs_first + (uint32_t)i]);
    for (int32_t i = 0; !st && i < m->num_outputs; i++)
        cge__plan_set_io(p, true, i, L->idx[m->outputs_first + (uint32_t)i]);
    cge_plan_step *steps = cge__plan_steps_mut(p);
    for (int32_t t = 0; !st && t < m->num_steps; t++) {
        const cgm_step *r = &L->steps[t];
        cge_plan_step *s = &steps[t];
        int32_t *io = NULL;
        if (cge__plan_step_io(p, t, r->num_inputs, r->num_outputs, r->num_waits, &io)) {
            st = wrap(L, "plan");
            break;
        }
        s->node = cge_graph_node(g, t);
        s->stream = r->stream;
        for (int32_t k = 0; k < r->num_inputs + r->num_outputs; k++)
            *io++ = L->idx[r->io_first + (uint32_t)k];
        for (int32_t k = 0; k < r->num_waits; k++)
            *io++ = L->idx[r->waits_first + (uint32_t)k];
        s->record = r->record;
        s->workspace_offset = r->ws_offset;
        s->workspace_bytes = r->ws_bytes;
        cge__plan_set_workspace_last(p, t, r->ws_last);
        st = bind_step(L, p, t);
    }
    if (!st) {
        cge__plan_set_sizes(p, m->arena_bytes, m->constant_bytes, m->num_streams, m->num_events);
        cge_plan_stats *ps = cge__plan_stats_mut(p);
        ps->compile_ms = m->compile_ms;
        for (int k = 0; k < 4; k++)
            ps->stage_ms[k] = m->stage_ms[k];
        ps->nodes_in = m->nodes_in;
        ps->nodes_out = m->num_steps;
        ps->arena_bytes = m->arena_bytes;
        ps->lower_bound_bytes = m->lower_bound_bytes;
        ps->naive_bytes = m->naive_bytes;
        ps->constant_bytes = m->constant_bytes;
        ps->num_streams = m->num_streams;
        ps->num_events = m->num_events;
        ps->num_subgraphs = m->num_subgraphs;
        ps->num_conversions = m->num_conversions;
        /* A symbolic plan has offsets per signature, each specialisation
         * verified as a fresh plan is; a static one is checked now:
         * overlaps, views and in-place writes. */
        ps->symbolic = L->symbolic;
        if (!L->symbolic && cge_plan_verify(p))
            st = wrap(L, "memory plan");
    }
    if (st) {
        cge_plan_destroy(p);
        return st;
    }
    *out = p;
    return CGE_OK;
}

/* ---- private copies ------------------------------------------------------------ */

typedef struct span {
    uint64_t lo, hi;              /* page-aligned offsets into the mapping */
} span;

static int span_cmp(const void *a, const void *b)
{
    uint64_t x = ((const span *)a)->lo, y = ((const span *)b)->lo;
    return x < y ? -1 : x > y;
}

static uint64_t page_bytes(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (uint64_t)p : 4096;
}

/* Pages covering [off, off + len) of the mapping, clipped to it. */
static span page_span(const cge_model *M, uint64_t off, uint64_t len)
{
    uint64_t pg = page_bytes(), end = (M->size + pg - 1) / pg * pg;
    span r = {off / pg * pg, (off + len + pg - 1) / pg * pg};
    if (r.hi > end)
        r.hi = end;
    return r;
}

/* Copies the pages of `sp` into private memory now (each written once, so
 * that MAP_PRIVATE's copy-on-write detaches it from the file); adds the
 * bytes made private to M->private_bytes. */
static cge_status make_private(cge_model *M, const char *what, span *sp, size_t n)
{
    if (!M->mapped || n == 0)
        return CGE_OK;
    qsort(sp, n, sizeof *sp, span_cmp);
    uint64_t pg = page_bytes();
    for (size_t i = 0; i < n;) {
        span r = sp[i++];
        while (i < n && sp[i].lo <= r.hi) {
            if (sp[i].hi > r.hi)
                r.hi = sp[i].hi;
            i++;
        }
        if (r.hi <= r.lo)
            continue;
        char *p = (char *)M->base + r.lo;
        bool done = false;
#ifdef MADV_POPULATE_WRITE
        /* Linux 5.14+: one call, and a page past the end of a file truncated
         * meanwhile is an error here rather than a SIGBUS. */
        if (madvise(p, r.hi - r.lo, MADV_POPULATE_WRITE) == 0)
            done = true;
        else if (errno != EINVAL)
            return cge_error(CGE_LAYER_IO, CGE_ERR_IO,
                             "%s: cannot read %llu bytes at %llu: %s (was the file truncated "
                             "while loading?)",
                             what, (unsigned long long)(r.hi - r.lo), (unsigned long long)r.lo,
                             strerror(errno));
#endif
        for (uint64_t o = 0; !done && o < r.hi - r.lo; o += pg) {
            volatile char *c = p + o;
            *c = *c;
        }
        M->private_bytes += r.hi - r.lo;
    }
    return CGE_OK;
}

/* The metadata, before its checksum is computed: the header's own claim of
 * where it ends is read from the file once, and only when the file begins
 * like a model (a large file of something else is not copied). */
static cge_status private_metadata(cge_model *M, const char *what)
{
    const cgm_header *h = M->base;
    if (M->size < sizeof *h || memcmp(h->magic, CGM_MAGIC, 8))
        return CGE_OK;
    uint64_t end = h->weights_offset;
    span sp = page_span(M, 0, end >= sizeof *h && end <= M->size ? end : sizeof *h);
    return make_private(M, what, &sp, 1);
}

/* Constants of at most PRIVATE_CONST_MAX bytes (the values were checked to
 * lie inside the weights). */
static cge_status private_constants(const loader *L, cge_model *M)
{
    const cgm_model *m = L->m;
    span *sp = calloc((size_t)m->num_values + 1, sizeof *sp);
    if (!sp)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
    size_t n = 0;
    for (int32_t v = 0; v < m->num_values; v++) {
        const cgm_value *r = &L->values[v];
        if (r->storage == CGE_STORAGE_CONSTANT && r->bytes > 0 && r->bytes <= PRIVATE_CONST_MAX)
            sp[n++] = page_span(M, L->h->weights_offset + r->offset, r->bytes);
    }
    cge_status st = make_private(M, L->what, sp, n);
    free(sp);
    return st;
}

/* Checked unless the caller or CGE_VERIFY_WEIGHTS=0 (or false, no, off) says
 * to trust them. */
static bool want_weights_check(const cge_model_load_options *opts)
{
    cge_weights_check w = opts ? opts->weights_check : CGE_WEIGHTS_CHECK_DEFAULT;
    if (w == CGE_WEIGHTS_CHECK_VERIFY)
        return true;
    if (w == CGE_WEIGHTS_CHECK_SKIP)
        return false;
    const char *e = getenv("CGE_VERIFY_WEIGHTS");
    return !(e && (!strcmp(e, "0") || !strcasecmp(e, "false") || !strcasecmp(e, "no") ||
                   !strcasecmp(e, "off")));
}

/* ---- packed weights (version 3) ------------------------------------------------ */

/* The packed section, checked whole: its header says where the region after
 * the weights lies (to the file's end: a file without the section ends with
 * its weights) and each record where a weight lies in it, in file order,
 * never overlapping, each with the 64 bytes before it free; the source is a
 * constant's offset, the key in AUX. With `use` the weights become borrowed
 * blocks for sessions (the file was packed on a machine like this one);
 * otherwise they are checked and left unused: kernels pack at load. */
static cge_status check_packed(const loader *L, cge_model *M, bool verify, bool use)
{
    const cgm_header *h = L->h;
    uint64_t wend = h->weights_offset + h->weights_bytes;
    const cgm_section *s = L->sec[CGM_SEC_PACKED];
    if (!s || !s->count) {
        if (wend != L->size)
            return bad(L, "%llu bytes after the weights, and no packed weights section",
                       (unsigned long long)(L->size - wend));
        return CGE_OK;
    }
    const cgm_packed *r = (const cgm_packed *)(L->base + s->offset);
    uint64_t region = r[0].src, rbytes = r[0].bytes;
    if (r[0].magic != CGM_PACKED_MAGIC)
        return bad(L, "the packed weights section does not begin with its header (%08x)",
                   r[0].magic);
    if (region % 64 || region < wend || region - wend >= 64 ||
        !in_range(region, rbytes, L->size) || region + rbytes != L->size)
        return bad(L, "packed weights at %llu (+%llu bytes) do not fit the layout (weights end "
                      "at %llu, file %zu bytes)",
                   (unsigned long long)region, (unsigned long long)rbytes,
                   (unsigned long long)wend, L->size);
    uint64_t at = region;
    for (uint64_t i = 1; i < s->count; i++) {
        const cgm_packed *p = &r[i];
        if (p->magic || p->pad || p->crc32 || p->data % 64 || p->data < at + 64 || !p->bytes ||
            !in_range(p->data, p->bytes, region + rbytes))
            return bad(L, "packed weight %llu (%llu bytes at %llu) lies outside its region or "
                          "overlaps the one before",
                       (unsigned long long)i - 1, (unsigned long long)p->bytes,
                       (unsigned long long)p->data);
        if (p->src >= h->weights_bytes)
            return bad(L, "packed weight %llu comes from offset %llu, past the weights (%llu "
                          "bytes)", (unsigned long long)i - 1, (unsigned long long)p->src,
                       (unsigned long long)h->weights_bytes);
        if (p->key_bytes > CGM_PACKED_KEY_MAX || p->key % 8 ||
            !in_range(p->key, p->key_bytes, L->aux_bytes))
            return bad(L, "packed weight %llu: its key (%u bytes at %llu) lies outside the aux "
                          "section", (unsigned long long)i - 1, p->key_bytes,
                       (unsigned long long)p->key);
        at = p->data + p->bytes;
    }
    if (verify) {
        uint32_t crc = cgm_crc32(0, L->base + region, rbytes);
        if (crc != r[0].crc32)
            return bad(L, "packed weights checksum mismatch (stored %08x, computed %08x): the "
                          "section is damaged or was replaced", r[0].crc32, crc);
    }
    if (!use)
        return CGE_OK;
    M->packed = calloc(s->count, sizeof *M->packed);
    if (!M->packed)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
    for (uint64_t i = 1; i < s->count; i++) {
        const cgm_packed *p = &r[i];
        void *block = cge__block_borrow((char *)L->base + p->data);
        if (!block)
            continue;
        M->packed[M->num_packed++] =
            (cgm_packed_weight){L->weights + p->src, L->aux + p->key, p->key_bytes, block,
                                p->bytes};
    }
    return CGE_OK;
}

static cge_status seed_packed(void *owner, cge_kernel_cache *c)
{
    const cge_model *m = owner;
    cge_status st = CGE_OK;
    for (int32_t i = 0; !st && i < m->num_packed; i++) {
        const cgm_packed_weight *p = &m->packed[i];
        st = cge__kernel_cache_seed(c, p->src, p->key, p->key_bytes, p->block, p->bytes);
    }
    return st;
}

/* ---- the model ------------------------------------------------------------------ */

static void model_free(cge_model *m)
{
    cge_plan_destroy(m->plan);
    free(m->packed);
    free(m->lib_names);
    free(m->lib_paths);
    if (m->mapped)
        munmap(m->base, m->size);
    else
        free(m->base);
    free(m);
}

static void model_release(void *p)
{
    cge_model *m = p;
    if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0)
        model_free(m);
}

void cge_model_destroy(cge_model *m)
{
    if (m)
        model_release(m);
}

static cge_status parse(cge_model *M, const char *what, const cge_model_load_options *opts,
                        double t0)
{
    loader L = {.what = what, .base = M->base, .size = M->size};
    if (opts && (unsigned)opts->weights_check > CGE_WEIGHTS_CHECK_SKIP)
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG,
                         "%s: load options: weights_check %d is not DEFAULT, VERIFY or SKIP",
                         what, (int)opts->weights_check);
    cge_status st = check_header(&L, opts);
    if (!st)
        st = check_sections(&L);
    if (!st)
        st = check_model(&L);
    if (!st)
        st = check_steps(&L);
    /* Before the checksum and meta read them. */
    if (!st)
        st = private_constants(&L, M);
    bool verify = want_weights_check(opts);
    if (!st && verify) {
        uint32_t crc = cgm_crc32(0, L.weights, L.h->weights_bytes);
        if (crc != L.h->weights_crc32)
            st = bad(&L, "weights checksum mismatch (stored %08x, computed %08x): the weights "
                         "section is damaged or was replaced", L.h->weights_crc32, crc);
    }
    /* Packed on a machine with other CPU features (or told to check against
     * others): kept out of use, the kernels pack as for an older file. */
    uint64_t here = opts && opts->cpu_features ? opts->cpu_features : cge_cpu_features();
    bool use_packed = false;
    if (!st && L.sec[CGM_SEC_PACKED] && L.sec[CGM_SEC_PACKED]->count)
        use_packed = ((const cgm_packed *)(L.base + L.sec[CGM_SEC_PACKED]->offset))->key == here;
    if (!st)
        st = check_packed(&L, M, verify, use_packed);
    if (!st)
        st = build_plan(&L, &M->plan);
    if (st)
        return st;
    M->weights = L.weights;
    M->weight_bytes = L.h->weights_bytes;
    M->num_libs = (int32_t)L.num_libs;
    M->lib_names = calloc(L.num_libs + 1, sizeof(char *));
    M->lib_paths = calloc(L.num_libs + 1, sizeof(char *));
    if (!M->lib_names || !M->lib_paths)
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
    for (uint64_t i = 0; i < L.num_libs; i++) {
        M->lib_names[i] = str_at(&L, L.libs[i].name);
        M->lib_paths[i] = str_at(&L, L.libs[i].path);
    }
    snprintf(M->arch, sizeof M->arch, "%s", L.h->arch);
    M->info = (cge_model_info){
        .format_version = L.h->format_version, .engine_version = L.h->engine_version,
        .arch = M->arch, .cpu_required = L.h->cpu_required,
        .cpu_compiled_on = L.h->cpu_compiled_on, .file_bytes = L.h->file_bytes,
        .weights_offset = L.h->weights_offset, .meta_crc32 = L.h->meta_crc32,
        .weights_crc32 = L.h->weights_crc32, .mapped = M->mapped,
        .opt_level = L.m->opt_level, .num_op_libraries = M->num_libs,
        .weights_verified = verify, .private_bytes = M->private_bytes};
    M->info.load_ms = cge_profile_clock_ms() - t0;
    return CGE_OK;
}

cge_status cge_model_load(const char *path, const cge_model_load_options *opts, cge_model **out)
{
    if (!out || !path)
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG, "model load: NULL path or out");
    *out = NULL;
    double t0 = cge_profile_clock_ms();
    const char *why = NULL;
    size_t file_size = 0;
    int fd = cge__open_regular(path, &file_size, &why);
    if (fd < 0)
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: cannot open: %s", path, why);
    cge_model *M = calloc(1, sizeof *M);
    if (!M) {
        close(fd);
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
    }
    M->refs = 1;
    M->size = file_size;
    if (M->size == 0) {
        close(fd);
        free(M);
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: empty file, not a cge model", path);
    }
    /* Private and writable: pages are shared with the page cache until
     * written, and a kernel that wrote its constants would touch only its
     * own copy, never the file. */
    void *base = mmap(NULL, M->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (base == MAP_FAILED) {
        free(M);
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "%s: cannot map: %s", path, strerror(err));
    }
    M->base = base;
    M->mapped = true;
    cge_status st = private_metadata(M, path);
    if (!st)
        st = parse(M, path, opts, t0);
    if (st) {
        model_free(M);
        return st;
    }
    /* Start reading the weights ahead of the first run. */
    if (M->weight_bytes)
        madvise((char *)M->base + M->info.weights_offset, M->weight_bytes, MADV_WILLNEED);
    *out = M;
    return CGE_OK;
}

cge_status cge_model_load_buffer(const void *data, size_t size, const cge_model_load_options *opts,
                                 cge_model **out)
{
    if (!out || (!data && size))
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG, "model load: NULL data or out");
    *out = NULL;
    double t0 = cge_profile_clock_ms();
    cge_model *M = calloc(1, sizeof *M);
    void *copy = aligned_alloc(CGM_WEIGHTS_ALIGN, (size + CGM_WEIGHTS_ALIGN) / CGM_WEIGHTS_ALIGN *
                                                      CGM_WEIGHTS_ALIGN);
    if (!M || !copy) {
        free(M);
        free(copy);
        return cge_error(CGE_LAYER_IO, CGE_ERR_NO_MEMORY, "model load: out of memory");
    }
    if (size)
        memcpy(copy, data, size);
    M->refs = 1;
    M->base = copy;
    M->size = size;
    cge_status st = parse(M, "model buffer", opts, t0);
    if (st) {
        model_free(M);
        return st;
    }
    *out = M;
    return CGE_OK;
}

const cge_plan *cge_model_plan(const cge_model *m) { return m ? m->plan : NULL; }
const void *cge_model_weights(const cge_model *m) { return m ? m->weights : NULL; }
size_t cge_model_weight_bytes(const cge_model *m) { return m ? m->weight_bytes : 0; }

cge_status cge_model_get_info(const cge_model *m, cge_model_info *out)
{
    if (!m || !out)
        return cge_error(CGE_LAYER_IO, CGE_ERR_INVALID_ARG, "model_get_info: NULL argument");
    *out = m->info;
    return CGE_OK;
}

bool cge_model_op_library(const cge_model *m, int32_t i, const char **name, const char **path)
{
    if (!m || i < 0 || i >= m->num_libs)
        return false;
    if (name)
        *name = m->lib_names[i];
    if (path)
        *path = m->lib_paths[i];
    return true;
}

cge_status cge_session_add_model(cge_session *s, uint32_t graph_id, cge_model *m)
{
    if (!s || !m)
        return cge_error(CGE_LAYER_SESSION, CGE_ERR_INVALID_ARG,
                         "add_model: NULL session or model");
    __atomic_add_fetch(&m->refs, 1, __ATOMIC_ACQ_REL);
    cge_status st = m->num_packed
                        ? cge__session_add_plan_seeded(s, graph_id, m->plan, m->weights,
                                                       model_release, m, seed_packed)
                        : cge_session_add_plan(s, graph_id, m->plan, m->weights, model_release, m);
    if (st)
        model_release(m);
    return st;
}
