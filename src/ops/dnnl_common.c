/* oneDNN glue shared by the convolution, int8 and bf16 wrappers (see
 * dnnl_common.h). Without CGE_HAVE_DNNL only cge__dnnl_available is here. */
#include "ops/dnnl_common.h"
#include "ops/dnnl_conv.h"

#include "base/shared_block.h"

#ifdef CGE_HAVE_DNNL
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

int cge__dnnl_available(void)
{
    return 1;
}

static void (*omp_set)(int);
static int (*omp_get)(void);
static pthread_once_t omp_once = PTHREAD_ONCE_INIT;

static void omp_lookup(void)
{
    *(void **)&omp_set = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    *(void **)&omp_get = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
}

int cge__dnnl_omp_enter(int threads)
{
    pthread_once(&omp_once, omp_lookup);
    int saved = omp_get ? omp_get() : 0;
    if (omp_set)
        omp_set(threads > 0 ? threads : 1);
    return saved;
}

void cge__dnnl_omp_leave(int saved)
{
    if (omp_set && saved > 0)
        omp_set(saved);
}

/* Reorders take their scratchpad from the caller (user mode): in oneDNN's
 * library mode each reorder primitive holds a scratchpad of its own from
 * creation for as long as it lives, and a Winograd weights transform's is a
 * plain copy of the transformed W (4x W's bytes). Every convolution keeps
 * its weights reorder, so each Winograd layer kept that copy resident after
 * packing once: retinanet_resnet50_fpn's 40 MB of Winograd weights held
 * ~90 MB more than their packed copies. */
int cge__dnnl_make_reorder(dnnl_engine_t e, const dnnl_memory_desc_t *from,
                           const dnnl_memory_desc_t *to, dnnl_primitive_t *out)
{
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    int ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
             dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ==
                 dnnl_success &&
             dnnl_reorder_primitive_desc_create(&rpd, from, e, to, e, attr) == dnnl_success &&
             dnnl_primitive_create(out, rpd) == dnnl_success;
    dnnl_primitive_desc_destroy(rpd);
    dnnl_primitive_attr_destroy(attr);
    return ok;
}

/* r's scratchpad descriptor and engine (NULL where it has none). */
static const dnnl_memory_desc_t *reorder_scratch_md(const_dnnl_primitive_t r, dnnl_engine_t *e)
{
    const_dnnl_primitive_desc_t pd = NULL;
    const dnnl_memory_desc_t *md = NULL;
    if (!r || dnnl_primitive_get_primitive_desc(r, &pd) != dnnl_success ||
        !(md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0)) ||
        !dnnl_memory_desc_get_size(md) ||
        (e && dnnl_primitive_desc_query(pd, dnnl_query_engine, 0, e) != dnnl_success))
        return NULL;
    return md;
}

size_t cge__dnnl_reorder_scratch_size(const_dnnl_primitive_t r)
{
    const dnnl_memory_desc_t *md = reorder_scratch_md(r, NULL);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

int cge__dnnl_run_reorder(dnnl_stream_t s, dnnl_primitive_t r, dnnl_memory_t from,
                          dnnl_memory_t to)
{
    dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, NULL}};
    dnnl_engine_t e = NULL;
    const dnnl_memory_desc_t *md = reorder_scratch_md(r, &e);
    if (!md)
        return dnnl_primitive_execute(r, s, 2, a) == dnnl_success;
    /* Only weight transforms have one (activations' layout reorders have
     * none): they run at prepare, or when a W that is not constant changes.
     * Its own pages, unmapped after (a block of a MiB and more is mapped),
     * not the heap's: freed heap blocks of this size stayed resident. */
    void *scratch = cge__block_new_unpopulated(dnnl_memory_desc_get_size(md));
    int ok = scratch && dnnl_memory_create(&a[2].memory, md, e, scratch) == dnnl_success &&
             dnnl_primitive_execute(r, s, 3, a) == dnnl_success &&
             dnnl_stream_wait(s) == dnnl_success;
    dnnl_memory_destroy(a[2].memory);
    cge__block_unref(scratch);
    return ok;
}

int cge__dnnl_bind(dnnl_engine_t e, const dnnl_memory_desc_t *plain,
                   const dnnl_memory_desc_t *chosen, dnnl_memory_t *own, dnnl_memory_t *user,
                   dnnl_primitive_t *to_own, dnnl_primitive_t *from_own)
{
    if (dnnl_memory_desc_equal(plain, chosen))
        return dnnl_memory_create(own, plain, e, DNNL_MEMORY_NONE) == dnnl_success;
    return dnnl_memory_create(own, chosen, e, DNNL_MEMORY_ALLOCATE) == dnnl_success &&
           dnnl_memory_create(user, plain, e, DNNL_MEMORY_NONE) == dnnl_success &&
           (!to_own || cge__dnnl_make_reorder(e, plain, chosen, to_own)) &&
           (!from_own || cge__dnnl_make_reorder(e, chosen, plain, from_own));
}

typedef struct pack_job {
    dnnl_engine_t e;
    dnnl_stream_t s;
    dnnl_primitive_t r;
    dnnl_memory_t user;
    const dnnl_memory_desc_t *chosen;
    const void *w;
} pack_job;

static int64_t weight_reorders;

void cge__dnnl_count_weight_reorder(void)
{
    __atomic_add_fetch(&weight_reorders, 1, __ATOMIC_RELAXED);
}

int64_t cge__dnnl_weight_reorders(void)
{
    return __atomic_load_n(&weight_reorders, __ATOMIC_RELAXED);
}

static cge_status pack_fill(void *dst, void *arg)
{
    cge__dnnl_count_weight_reorder();
    const pack_job *j = arg;
    dnnl_memory_t to = NULL;
    int ok = dnnl_memory_create(&to, j->chosen, j->e, dst) == dnnl_success &&
             dnnl_memory_set_data_handle(j->user, (void *)j->w) == dnnl_success &&
             cge__dnnl_run_reorder(j->s, j->r, j->user, to) &&
             dnnl_stream_wait(j->s) == dnnl_success;
    dnnl_memory_destroy(to);
    return ok ? CGE_OK : CGE_ERR_INTERNAL;
}

cge_status cge__dnnl_pack_shared(const cge_kernel_ctx *ctx, dnnl_engine_t e, dnnl_stream_t s,
                                 dnnl_primitive_t r_wei, dnnl_memory_t user,
                                 const dnnl_memory_desc_t *chosen, const void *src,
                                 const void *data, const void *key, size_t key_bytes,
                                 int threads, void **block, dnnl_memory_t *mem)
{
    *block = NULL;
    *mem = NULL;
    if (!chosen || !r_wei || !user || !src || !data)
        return CGE_ERR_INVALID_ARG;
    int saved = cge__dnnl_omp_enter(threads);
    pack_job job = {e, s, r_wei, user, chosen, data};
    cge_status st = cge_kernel_shared_get(ctx, src, key ? key : (const void *)chosen,
                                          key ? key_bytes : sizeof *chosen,
                                          dnnl_memory_desc_get_size(chosen), pack_fill, &job, block);
    if (!st && dnnl_memory_create(mem, chosen, e, *block) != dnnl_success) {
        cge_kernel_shared_release(*block);
        *block = NULL;
        *mem = NULL;
        st = CGE_ERR_INTERNAL;
    }
    cge__dnnl_omp_leave(saved);
    return st;
}

dnnl_status_t cge__dnnl_pd_create(dnnl_primitive_desc_t *out, const_dnnl_op_desc_t op_desc,
                                  const_dnnl_primitive_attr_t attr, dnnl_engine_t e,
                                  const char *avoid)
{
    *out = NULL;
    if (!avoid)
        return dnnl_primitive_desc_create(out, op_desc, attr, e, NULL);
    dnnl_primitive_desc_iterator_t it = NULL;
    dnnl_status_t st = dnnl_primitive_desc_iterator_create(&it, op_desc, attr, e, NULL);
    if (st != dnnl_success)
        return st;
    dnnl_primitive_desc_t first = NULL;
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        const char *name = NULL;
        if (!pd)
            continue;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success &&
            name && !strstr(name, avoid)) {
            *out = pd;
            break;
        }
        if (!first)
            first = pd;
        else
            dnnl_primitive_desc_destroy(pd);
    } while (dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    if (*out)
        dnnl_primitive_desc_destroy(first);
    else
        *out = first;
    return *out ? dnnl_success : dnnl_unimplemented;
}

#else

int cge__dnnl_available(void)
{
    return 0;
}

int64_t cge__dnnl_weight_reorders(void)
{
    return 0;
}

#endif
