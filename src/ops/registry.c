/* The operator registry: the one piece of global state. Libraries (the
 * builtin one included) register all-or-nothing; lookups by (domain, name,
 * version), kernels by engine and dtype, converters by front-end op. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops/builtin.h"
#include "ops/registry.h"

typedef struct op_entry {
    const cge_op_def *def;
    const char *origin;
} op_entry;

typedef struct conv_entry {
    const cge_converter_def *def;
    const char *origin;
} conv_entry;

static struct {
    pthread_rwlock_t lock;
    op_entry *ops;
    int32_t num_ops, cap_ops;
    conv_entry *convs;
    int32_t num_convs, cap_convs;
} reg = {.lock = PTHREAD_RWLOCK_INITIALIZER};

static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;

static void ensure_init(void) { pthread_once(&builtin_once, cge__ops_builtin_init); }

static const char *dom(const char *d) { return d ? d : ""; }

static int32_t end_of(int32_t end) { return end > 0 ? end : INT32_MAX; }

static const char *domain_label(const char *d)
{
    return d && d[0] ? d : "ai.onnx (default)";
}

/* Checks a definition on its own, before anything is registered. */
static cge_status check_def(const cge_op_library *lib, const cge_op_def *d)
{
    const char *ln = lib->name;
    if (!d->name || !d->name[0])
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                         "library '%s': an operator has no name", ln);
    if (!d->infer)
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                         "library '%s': operator '%s' has no meta (infer) function", ln, d->name);
    if (d->num_inputs < 0 || d->num_outputs < 0 || d->num_attrs < 0 || d->num_kernels < 0 ||
        (d->num_inputs && !d->inputs) || (d->num_outputs && !d->outputs) ||
        (d->num_attrs && !d->attrs) || (d->num_kernels && !d->kernels))
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                         "library '%s': operator '%s' has inconsistent argument counts", ln,
                         d->name);
    if (d->since_version < 1 || (d->end_version && d->end_version < d->since_version))
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                         "library '%s': operator '%s' has an invalid version range %d..%d", ln,
                         d->name, d->since_version, d->end_version);
    for (int32_t i = 0; i < d->num_inputs; i++)
        if (!d->inputs[i].name ||
            ((d->inputs[i].flags & CGE_ARG_VARIADIC) && i != d->num_inputs - 1))
            return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                             "library '%s': operator '%s' input %d: unnamed, or variadic but "
                             "not last",
                             ln, d->name, i);
    for (int32_t i = 0; i < d->num_outputs; i++)
        if (!d->outputs[i].name ||
            ((d->outputs[i].flags & CGE_ARG_VARIADIC) && i != d->num_outputs - 1))
            return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                             "library '%s': operator '%s' output %d: unnamed, or variadic but "
                             "not last",
                             ln, d->name, i);
    for (int32_t i = 0; i < d->num_attrs; i++)
        if (!d->attrs[i].name || d->attrs[i].kind <= CGE_ATTR_UNDEFINED ||
            d->attrs[i].kind > CGE_ATTR_GRAPHS)
            return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                             "library '%s': operator '%s' attribute %d: no name or bad kind", ln,
                             d->name, i);
    for (int32_t i = 0; i < d->num_kernels; i++)
        if (!d->kernels[i].engine || !d->kernels[i].launch)
            return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                             "library '%s': operator '%s' kernel %d: no engine or launch", ln,
                             d->name, i);
    return CGE_OK;
}

static bool overlaps(const cge_op_def *a, const cge_op_def *b)
{
    return !strcmp(dom(a->domain), dom(b->domain)) && !strcmp(a->name, b->name) &&
           a->since_version <= end_of(b->end_version) && b->since_version <= end_of(a->end_version);
}

static cge_status duplicate_error(const cge_op_def *d, const char *new_lib, const char *old_lib)
{
    return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_EXISTS,
                     "operator '%s' in domain '%s' is already registered by library '%s'; "
                     "library '%s' registers it again (versions overlap)",
                     d->name, domain_label(d->domain), old_lib, new_lib);
}

static cge_status grow(void **arr, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap)
        return CGE_OK;
    int32_t nc = *cap ? *cap : 64;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_NO_MEMORY, "registry: out of memory");
    *arr = p;
    *cap = nc;
    return CGE_OK;
}

/* Registration without the builtin-init guard (builtin.c calls this). */
cge_status cge__registry_add_library(const cge_op_library *lib)
{
    if (!lib)
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG, "register: library is NULL");
    if (lib->api_version != CGE_OP_API_VERSION)
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_UNSUPPORTED,
                         "library '%s' was built for operator API version %u; this cge "
                         "supports version %u (rebuild it against this cge)",
                         lib->name ? lib->name : "?", lib->api_version, CGE_OP_API_VERSION);
    if (!lib->name || !lib->name[0])
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG, "register: library has no name");
    if (lib->num_ops < 0 || lib->num_converters < 0 || (lib->num_ops && !lib->ops) ||
        (lib->num_converters && !lib->converters))
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                         "library '%s': inconsistent op or converter counts", lib->name);
    for (int32_t i = 0; i < lib->num_ops; i++) {
        cge_status st = check_def(lib, &lib->ops[i]);
        if (st)
            return st;
        for (int32_t j = 0; j < i; j++)
            if (overlaps(&lib->ops[i], &lib->ops[j]))
                return duplicate_error(&lib->ops[i], lib->name, lib->name);
    }
    for (int32_t i = 0; i < lib->num_converters; i++) {
        const cge_converter_def *c = &lib->converters[i];
        if (!c->front_end || !c->source_op || !c->target_op)
            return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                             "library '%s': converter %d lacks front end, source or target",
                             lib->name, i);
    }

    pthread_rwlock_wrlock(&reg.lock);
    cge_status st = CGE_OK;
    for (int32_t i = 0; i < lib->num_ops && !st; i++)
        for (int32_t j = 0; j < reg.num_ops; j++)
            if (overlaps(&lib->ops[i], reg.ops[j].def)) {
                st = duplicate_error(&lib->ops[i], lib->name, reg.ops[j].origin);
                break;
            }
    if (!st)
        st = grow((void **)&reg.ops, &reg.cap_ops, reg.num_ops + lib->num_ops, sizeof(op_entry));
    if (!st)
        st = grow((void **)&reg.convs, &reg.cap_convs, reg.num_convs + lib->num_converters,
                  sizeof(conv_entry));
    if (!st) {
        for (int32_t i = 0; i < lib->num_ops; i++)
            reg.ops[reg.num_ops++] = (op_entry){&lib->ops[i], lib->name};
        for (int32_t i = 0; i < lib->num_converters; i++)
            reg.convs[reg.num_convs++] = (conv_entry){&lib->converters[i], lib->name};
    }
    pthread_rwlock_unlock(&reg.lock);
    return st;
}

cge_status cge_op_register_library(const cge_op_library *lib)
{
    ensure_init();
    return cge__registry_add_library(lib);
}

cge_status cge_load_op_library(const char *path)
{
    ensure_init();
    if (!path || !path[0])
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG, "load_op_library: no path");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        /* A missing, unreadable or malformed file: the io layer's failure. */
        return cge_error(CGE_LAYER_IO, CGE_ERR_IO, "cannot load operator library '%s': %s", path,
                         why ? why : "unknown error");
    }
    cge_op_library_entry_fn entry;
    void *sym = dlsym(h, CGE_OP_LIBRARY_ENTRY);
    memcpy(&entry, &sym, sizeof entry);
    if (!entry) {
        dlclose(h);
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_NOT_FOUND,
                         "'%s' is not a cge operator library: it has no '%s' entry point", path,
                         CGE_OP_LIBRARY_ENTRY);
    }
    const cge_op_library *lib = entry();
    if (!lib) {
        dlclose(h);
        return cge_error(CGE_LAYER_SCHEMA, CGE_ERR_INVALID_ARG,
                         "operator library '%s': its entry point returned NULL", path);
    }
    cge_status st = cge__registry_add_library(lib);
    if (st) {
        /* Nothing of it was registered, so nothing can point into it. */
        dlclose(h);
        return st;
    }
    /* Registered definitions live in the library: it stays loaded. */
    return CGE_OK;
}

int32_t cge_op_count(void)
{
    ensure_init();
    pthread_rwlock_rdlock(&reg.lock);
    int32_t n = reg.num_ops;
    pthread_rwlock_unlock(&reg.lock);
    return n;
}

const cge_op_def *cge_op_at(int32_t index)
{
    ensure_init();
    pthread_rwlock_rdlock(&reg.lock);
    const cge_op_def *d = index >= 0 && index < reg.num_ops ? reg.ops[index].def : NULL;
    pthread_rwlock_unlock(&reg.lock);
    return d;
}

const char *cge_op_origin(const cge_op_def *def)
{
    ensure_init();
    const char *o = NULL;
    pthread_rwlock_rdlock(&reg.lock);
    for (int32_t i = 0; i < reg.num_ops && !o; i++)
        if (reg.ops[i].def == def)
            o = reg.ops[i].origin;
    pthread_rwlock_unlock(&reg.lock);
    return o;
}

/* The last lookups of this thread: a Loop body finds each of its ops every
 * iteration, and the scan below compares every registered name. Ops are
 * only ever added, so an entry holds while the count it saw is the count. */
typedef struct find_cache {
    int32_t num_ops, version;
    const cge_op_def *def;
    char name[40], domain[40];
} find_cache;
static _Thread_local find_cache fcache[16];

static find_cache *cache_slot(const char *domain, const char *name, int32_t version)
{
    size_t ln = strlen(name), ld = strlen(domain);
    if (ln >= sizeof fcache[0].name || ld >= sizeof fcache[0].domain)
        return NULL;
    unsigned h = (unsigned)ln * 7u + (unsigned)version;
    for (size_t i = 0; i < ln && i < 4; i++)
        h = h * 31u + (unsigned char)name[i];
    return &fcache[h % 16u];
}

const cge_op_def *cge_op_find(const char *domain, const char *name, int32_t version)
{
    ensure_init();
    if (!name)
        name = "";
    const cge_op_def *best = NULL;
    bool any = false;
    int32_t lo = INT32_MAX, hi = 0;
    find_cache *fc = cache_slot(dom(domain), name, version);
    pthread_rwlock_rdlock(&reg.lock);
    if (fc && fc->def && fc->num_ops == reg.num_ops && fc->version == version &&
        !strcmp(fc->name, name) && !strcmp(fc->domain, dom(domain))) {
        best = fc->def;
        pthread_rwlock_unlock(&reg.lock);
        return best;
    }
    for (int32_t i = 0; i < reg.num_ops; i++) {
        const cge_op_def *d = reg.ops[i].def;
        if (d->name[0] != name[0] || strcmp(d->name, name) || strcmp(dom(d->domain), dom(domain)))
            continue;
        any = true;
        if (d->since_version < lo)
            lo = d->since_version;
        if (end_of(d->end_version) > hi)
            hi = end_of(d->end_version);
        if (version <= 0) {
            if (!best || d->since_version > best->since_version)
                best = d;
        } else if (d->since_version <= version && version <= end_of(d->end_version)) {
            best = d;
        }
    }
    if (fc && best) {
        *fc = (find_cache){.num_ops = reg.num_ops, .version = version, .def = best};
        strcpy(fc->name, name);
        strcpy(fc->domain, dom(domain));
    }
    pthread_rwlock_unlock(&reg.lock);
    if (!best) {
        if (any)
            cge_error(CGE_LAYER_SCHEMA, CGE_ERR_NOT_FOUND,
                      "operator '%s' in domain '%s' has no definition for version %d "
                      "(defined from version %d)",
                      name, domain_label(domain), version, lo);
        else
            cge_error(CGE_LAYER_SCHEMA, CGE_ERR_NOT_FOUND,
                      "no operator '%s' in domain '%s' (is its library loaded?)", name,
                      domain_label(domain));
    }
    (void)hi;
    return best;
}

const cge_kernel_def *cge_op_find_kernel(const cge_op_def *def, const char *engine,
                                         cge_dtype dtype)
{
    if (!def) {
        cge_error(CGE_LAYER_ENGINE, CGE_ERR_INVALID_ARG, "find_kernel: operator is NULL");
        return NULL;
    }
    for (int32_t i = 0; i < def->num_kernels; i++) {
        const cge_kernel_def *k = &def->kernels[i];
        if (engine && strcmp(k->engine, engine))
            continue;
        if (k->dtypes == 0 || dtype == CGE_DTYPE_UNDEFINED || (k->dtypes & CGE_DT(dtype)))
            return k;
    }
    if (engine)
        cge_error(CGE_LAYER_ENGINE, CGE_ERR_UNSUPPORTED,
                  "engine '%s' has no kernel for '%s' with dtype %s", engine, def->name,
                  cge_dtype_name(dtype));
    else
        cge_error(CGE_LAYER_ENGINE, CGE_ERR_UNSUPPORTED,
                  "no engine has a kernel for '%s' with dtype %s", def->name,
                  cge_dtype_name(dtype));
    return NULL;
}

const cge_converter_def *cge_converter_find(const char *front_end, const char *source_domain,
                                            const char *source_op, int64_t opset)
{
    ensure_init();
    const cge_converter_def *best = NULL;
    pthread_rwlock_rdlock(&reg.lock);
    for (int32_t i = 0; i < reg.num_convs; i++) {
        const cge_converter_def *c = reg.convs[i].def;
        if (strcmp(c->front_end, front_end ? front_end : "") ||
            strcmp(c->source_op, source_op ? source_op : "") ||
            strcmp(dom(c->source_domain), dom(source_domain)))
            continue;
        if (opset > 0 && (opset < c->since_version || opset > end_of(c->end_version)))
            continue;
        if (!best || c->since_version > best->since_version)
            best = c;
    }
    pthread_rwlock_unlock(&reg.lock);
    if (!best)
        cge_error(CGE_LAYER_CONVERTER, CGE_ERR_UNSUPPORTED,
                  "no %s converter for op '%s' (domain '%s', opset %lld)",
                  front_end ? front_end : "?", source_op ? source_op : "?",
                  domain_label(source_domain), (long long)opset);
    return best;
}

cge_status cge_converter_apply(const cge_converter_def *conv, const cge_node *src,
                               int64_t opset, cge_graph *dst)
{
    if (!conv || !src || !dst)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_INVALID_ARG,
                         "converter_apply: NULL converter, node or graph");
    if (conv->convert)
        return conv->convert(src, opset, dst);
    /* The 1:1 mapping: same inputs, outputs and attributes. */
    int32_t ni = cge_node_num_inputs(src), no = cge_node_num_outputs(src);
    const char **names = malloc(sizeof(char *) * (size_t)(ni + no + 1));
    if (!names)
        return cge_error(CGE_LAYER_CONVERTER, CGE_ERR_NO_MEMORY, "converter: out of memory");
    for (int32_t i = 0; i < ni; i++)
        names[i] = cge_node_input(src, i);
    for (int32_t i = 0; i < no; i++)
        names[ni + i] = cge_node_output(src, i);
    cge_node *n = NULL;
    cge_status st = cge_graph_add_node(dst, conv->target_op, conv->target_domain,
                                       cge_node_name(src), names, ni, names + ni, no, &n);
    free(names);
    if (st)
        return st;
    const cge_attrs *a = cge_node_attrs_const(src);
    for (int32_t i = 0; i < cge_attrs_count(a) && !st; i++)
        st = cge_attrs_set(cge_node_attrs(n), cge_attrs_at(a, i));
    return st;
}
