/* The hazard guard: while checking is on, the RIs with replays in flight and
 * the ranges they read and write, and the refusal of writes into those ranges
 * from elsewhere. Also the allocation names used in the messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/capture.h"

/* A refused write is reported with the buffer's name and the RI. Kernel
 * arguments are opaque bytes, so only copies and fills of a recording count: a
 * kernel's own reads are not tracked. */

struct rt_mem_name {
    const void *base;
    size_t bytes;
    char *name;
};

cge_status cge_device_set_hazard_check(cge_device *dev, bool on)
{
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_device_set_hazard_check: device is NULL");
    atomic_store_explicit(&dev->hazard_check, on, memory_order_relaxed);
    return CGE_OK;
}

/* ---- names ------------------------------------------------------------------ */

static rt_mem_name *name_find_base_locked(cge_device *dev, const void *base)
{
    for (size_t i = 0; i < dev->num_names; i++)
        if (dev->names[i].base == base)
            return &dev->names[i];
    return NULL;
}

void rt_mem_name_forget_locked(cge_device *dev, const void *base)
{
    rt_mem_name *n = name_find_base_locked(dev, base);
    if (!n)
        return;
    free(n->name);
    *n = dev->names[--dev->num_names];
}

void rt_mem_names_free(cge_device *dev)
{
    for (size_t i = 0; i < dev->num_names; i++)
        free(dev->names[i].name);
    free(dev->names);
    dev->names = NULL;
    dev->num_names = dev->cap_names = 0;
}

cge_status cge_mem_set_name(cge_device *dev, void *ptr, const char *name)
{
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_set_name: device is NULL");
    if (!ptr)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_set_name: ptr is NULL");
    char *copy = NULL;
    if (name && !(copy = strdup(name)))
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_mem_set_name: out of memory");
    cge_status st = CGE_OK;
    pthread_mutex_lock(&dev->mem_lock);
    size_t bytes = 0;
    const rt_host_range *r = rt_range_find_base(&dev->mem, ptr);
    bool known = r ? (bytes = r->bytes, true) : rt_ptr_lookup(&dev->mem, ptr, &bytes);
    if (!known) {
        st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NOT_FOUND,
                       "cge_mem_set_name: %p is not the start of a device allocation or pinned host "
                       "range of this device",
                       ptr);
    } else {
        rt_mem_name_forget_locked(dev, ptr);
        if (copy) {
            if (dev->num_names == dev->cap_names) {
                size_t cap = dev->cap_names ? dev->cap_names * 2 : 16;
                rt_mem_name *v = realloc(dev->names, cap * sizeof *v);
                if (!v)
                    st = cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_mem_set_name: out of memory");
                else {
                    dev->names = v;
                    dev->cap_names = cap;
                }
            }
            if (st == CGE_OK) {
                dev->names[dev->num_names++] = (rt_mem_name){.base = ptr, .bytes = bytes ? bytes : 1, .name = copy};
                copy = NULL;
            }
        }
    }
    pthread_mutex_unlock(&dev->mem_lock);
    free(copy);
    return st;
}

/* "'x_host'" or "buffer 0x..." for the allocation holding `p`. */
static void describe_buffer(cge_device *dev, const void *p, const void *fallback, char *out, size_t cap)
{
    pthread_mutex_lock(&dev->mem_lock);
    const rt_mem_name *hit = NULL;
    for (size_t i = 0; i < dev->num_names && !hit; i++) {
        const rt_mem_name *n = &dev->names[i];
        if ((uintptr_t)p - (uintptr_t)n->base < n->bytes)
            hit = n;
    }
    if (hit)
        snprintf(out, cap, "'%s' (%p)", hit->name, hit->base);
    else
        snprintf(out, cap, "buffer %p", fallback);
    pthread_mutex_unlock(&dev->mem_lock);
}

/* ---- in-flight replays ---------------------------------------------------------- */

void rt_hazard_replay_begin(cge_ri *ri, uint64_t stream_id)
{
    cge_device *dev = ri->dev;
    pthread_mutex_lock(&dev->hz_lock);
    if (ri->hz_inflight++ == 0) {
        ri->hz_stream_id = stream_id;
        ri->hz_prev = NULL;
        ri->hz_next = dev->hz_active;
        if (dev->hz_active)
            dev->hz_active->hz_prev = ri;
        dev->hz_active = ri;
    } else if (ri->hz_stream_id != stream_id) {
        ri->hz_stream_id = 0; /* on several streams: none of them is exempt */
    }
    pthread_mutex_unlock(&dev->hz_lock);
}

void rt_hazard_replay_end(cge_ri *ri)
{
    cge_device *dev = ri->dev;
    pthread_mutex_lock(&dev->hz_lock);
    if (--ri->hz_inflight == 0) {
        if (ri->hz_prev)
            ri->hz_prev->hz_next = ri->hz_next;
        else
            dev->hz_active = ri->hz_next;
        if (ri->hz_next)
            ri->hz_next->hz_prev = ri->hz_prev;
        ri->hz_prev = ri->hz_next = NULL;
        ri->hz_stream_id = 0;
    }
    pthread_mutex_unlock(&dev->hz_lock);
}

cge_status rt_hazard_check_slow(cge_device *dev, uint64_t stream_id, const void *ptr, size_t bytes,
                                const char *what)
{
    if (!bytes)
        return CGE_OK;
    uintptr_t lo = (uintptr_t)ptr, hi = lo + bytes;
    bool hit = false;
    rt_range found = {0};
    uint64_t ri_id = 0, on_stream = 0;
    pthread_mutex_lock(&dev->hz_lock);
    for (const cge_ri *ri = dev->hz_active; ri && !hit; ri = ri->hz_next) {
        /* Later work on the stream that replays is ordered after the replay. */
        if (stream_id && ri->hz_stream_id == stream_id)
            continue;
        for (int32_t i = 0; i < ri->num_ranges; i++) {
            const rt_range *r = &ri->ranges[i];
            uintptr_t rlo = (uintptr_t)r->ptr, rhi = rlo + r->bytes;
            if (r->bytes && lo < rhi && rlo < hi) {
                hit = true;
                found = *r;
                ri_id = ri->id;
                on_stream = ri->hz_stream_id;
                break;
            }
        }
    }
    pthread_mutex_unlock(&dev->hz_lock);
    if (!hit)
        return CGE_OK;
    const void *at = lo > (uintptr_t)found.ptr ? ptr : found.ptr;
    char buf[160], where[64], writer[64];
    describe_buffer(dev, at, found.ptr, buf, sizeof buf);
    if (on_stream)
        snprintf(where, sizeof where, "replaying on stream %llu", (unsigned long long)on_stream);
    else
        snprintf(where, sizeof where, "replaying");
    if (stream_id)
        snprintf(writer, sizeof writer, "%s on stream %llu", what, (unsigned long long)stream_id);
    else
        snprintf(writer, sizeof writer, "%s", what);
    return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                     "hazard: %s writes %zu bytes at %p into %s, which ri#%llu (%s) still %s; wait for "
                     "the replay to finish before writing",
                     writer, bytes, ptr, buf, (unsigned long long)ri_id, where,
                     found.write ? "writes" : "reads");
}

cge_status cge_mem_host_write(cge_device *dev, const void *ptr, size_t bytes)
{
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_host_write: device is NULL");
    if (!bytes)
        return CGE_OK;
    if (!ptr)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_mem_host_write: ptr is NULL for %zu bytes", bytes);
    return rt_hazard_check(dev, 0, ptr, bytes, "cge_mem_host_write");
}

cge_status cge_ri_track_range(cge_ri *ri, const void *ptr, size_t bytes, bool write)
{
    if (!ri || (!ptr && bytes))
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_ri_track_range: ri is NULL or ptr is NULL for %zu bytes", bytes);
    if (!bytes)
        return CGE_OK;
    pthread_mutex_lock(&ri->mu);
    bool idle = ri->finished == ri->submitted;
    pthread_mutex_unlock(&ri->mu);
    if (!idle)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                         "cge_ri_track_range: ri#%llu has a replay in flight",
                         (unsigned long long)ri->id);
    cge_device *dev = ri->dev;
    pthread_mutex_lock(&dev->hz_lock);
    rt_range *r = realloc(ri->ranges, ((size_t)ri->num_ranges + 1) * sizeof *r);
    if (r) {
        ri->ranges = r;
        r[ri->num_ranges++] = (rt_range){.ptr = ptr, .bytes = bytes, .write = write};
    }
    pthread_mutex_unlock(&dev->hz_lock);
    return r ? CGE_OK
             : cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY, "cge_ri_track_range: out of memory");
}
