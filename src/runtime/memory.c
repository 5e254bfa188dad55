/* Public memory API: argument checks, the tracking every device shares
 * (device allocations, pinned host ranges), then dispatch to the device. */
#include <stdlib.h>
#include <string.h>

#include "runtime/device.h"
#include "runtime/warm_memory.h"

cge_status rt_device_init_base(cge_device *dev, const cge__device_ops *ops, int num_threads)
{
    dev->ops = ops;
    dev->num_threads = num_threads;
    rt_mem_table_init(&dev->mem);
    if (pthread_mutex_init(&dev->mem_lock, NULL) != 0)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INTERNAL, "device create: cannot create a mutex");
    if (pthread_mutex_init(&dev->cap_lock, NULL) != 0) {
        pthread_mutex_destroy(&dev->mem_lock);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INTERNAL, "device create: cannot create a mutex");
    }
    if (pthread_mutex_init(&dev->hz_lock, NULL) != 0) {
        pthread_mutex_destroy(&dev->cap_lock);
        pthread_mutex_destroy(&dev->mem_lock);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INTERNAL, "device create: cannot create a mutex");
    }
    /* Without it, tables come from the C heap: slower first runs, no error. */
    dev->warm = cge__warm_create();
    atomic_init(&dev->num_captures, 0);
    atomic_init(&dev->global_captures, 0);
    atomic_init(&dev->next_ri_id, 0);
    const char *hz = getenv("CGE_CHECK_HAZARDS");
    atomic_init(&dev->hazard_check, hz && strcmp(hz, "1") == 0);
    return CGE_OK;
}

void rt_device_fini_base(cge_device *dev)
{
    /* Whatever the caller did not free goes with the device, as a device
     * context's memory does; registered ranges are the caller's, so they are
     * only forgotten. */
    cge__mem_table *t = &dev->mem;
    for (size_t i = 0; i < t->capacity; i++)
        if (t->slots[i].ptr)
            dev->ops->free(dev, (void *)t->slots[i].ptr);
    for (size_t i = 0; i < t->num_ranges; i++) {
        if (t->ranges[i].registered) {
            if (dev->ops->unregister_host)
                dev->ops->unregister_host(dev, (void *)t->ranges[i].base);
        } else {
            dev->ops->free_host(dev, (void *)t->ranges[i].base);
        }
    }
    rt_mem_table_fini(t);
    rt_mem_names_free(dev);
    cge__warm_release(dev->warm);
    pthread_mutex_destroy(&dev->hz_lock);
    pthread_mutex_destroy(&dev->cap_lock);
    pthread_mutex_destroy(&dev->mem_lock);
}

cge__warm *cge__device_warm(cge_device *dev) { return dev ? dev->warm : NULL; }

bool rt_mem_is_pinned(cge_device *dev, const void *ptr, size_t bytes)
{
    pthread_mutex_lock(&dev->mem_lock);
    bool ok = rt_range_find_containing(&dev->mem, ptr, bytes) != NULL;
    pthread_mutex_unlock(&dev->mem_lock);
    return ok;
}

bool rt_mem_is_device_alloc(cge_device *dev, const void *ptr)
{
    pthread_mutex_lock(&dev->mem_lock);
    bool ok = rt_ptr_contains(&dev->mem, ptr);
    pthread_mutex_unlock(&dev->mem_lock);
    return ok;
}

cge_status cge_mem_alloc(cge_device *dev, size_t bytes, void **out)
{
    if (!out)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_alloc: out is NULL");
    *out = NULL;
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_alloc: device is NULL");
    cge_status unsafe = rt_unsafe_call(dev, "cge_mem_alloc");
    if (unsafe != CGE_OK)
        return unsafe;
    void *p = NULL;
    cge_status st = dev->ops->alloc(dev, bytes, &p);
    if (st != CGE_OK)
        return st;
    pthread_mutex_lock(&dev->mem_lock);
    bool added = rt_ptr_add(&dev->mem, p, bytes);
    pthread_mutex_unlock(&dev->mem_lock);
    if (!added) {
        dev->ops->free(dev, p);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                         "cge_mem_alloc: out of memory tracking an allocation of %zu bytes", bytes);
    }
    *out = p;
    return CGE_OK;
}

cge_status cge_mem_free(cge_device *dev, void *ptr)
{
    if (!ptr)
        return CGE_OK;
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_free: device is NULL");
    cge_status unsafe = rt_unsafe_call(dev, "cge_mem_free");
    if (unsafe != CGE_OK)
        return unsafe;
    pthread_mutex_lock(&dev->mem_lock);
    bool known = rt_ptr_remove(&dev->mem, ptr);
    if (known)
        rt_mem_name_forget_locked(dev, ptr);
    pthread_mutex_unlock(&dev->mem_lock);
    if (!known)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_mem_free: %p is not a live device allocation of this device "
                         "(freed twice, or from another allocator?)",
                         ptr);
    dev->ops->free(dev, ptr);
    return CGE_OK;
}

cge_status cge_mem_alloc_host(cge_device *dev, size_t bytes, void **out)
{
    if (!out)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_alloc_host: out is NULL");
    *out = NULL;
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_alloc_host: device is NULL");
    cge_status unsafe = rt_unsafe_call(dev, "cge_mem_alloc_host");
    if (unsafe != CGE_OK)
        return unsafe;
    void *p = NULL;
    cge_status st = dev->ops->alloc_host(dev, bytes, &p);
    if (st != CGE_OK)
        return st;
    pthread_mutex_lock(&dev->mem_lock);
    rt_range_status rs = rt_range_add(&dev->mem, p, bytes, false);
    pthread_mutex_unlock(&dev->mem_lock);
    if (rs != RT_RANGE_OK) {
        dev->ops->free_host(dev, p);
        /* A fresh allocation cannot overlap a live range unless a caller
         * registered memory it then freed: say so rather than guess. */
        if (rs == RT_RANGE_OVERLAP)
            return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_STATE,
                             "cge_mem_alloc_host: new allocation %p overlaps a registered host "
                             "range (was registered memory freed without unregistering it?)",
                             p);
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                         "cge_mem_alloc_host: out of memory tracking an allocation of %zu bytes",
                         bytes);
    }
    *out = p;
    return CGE_OK;
}

cge_status cge_mem_free_host(cge_device *dev, void *ptr)
{
    if (!ptr)
        return CGE_OK;
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_free_host: device is NULL");
    cge_status unsafe = rt_unsafe_call(dev, "cge_mem_free_host");
    if (unsafe != CGE_OK)
        return unsafe;
    pthread_mutex_lock(&dev->mem_lock);
    const rt_host_range *r = rt_range_find_base(&dev->mem, ptr);
    bool registered = r && r->registered;
    if (r && !registered) {
        rt_range_remove(&dev->mem, r);
        rt_mem_name_forget_locked(dev, ptr);
    }
    pthread_mutex_unlock(&dev->mem_lock);
    if (!r)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_mem_free_host: %p is not a live host allocation of this device", ptr);
    if (registered)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_mem_free_host: %p was registered, not allocated, by the runtime: "
                         "use cge_mem_unregister_host",
                         ptr);
    dev->ops->free_host(dev, ptr);
    return CGE_OK;
}

cge_status cge_mem_register_host(cge_device *dev, void *ptr, size_t bytes)
{
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_register_host: device is NULL");
    if (!ptr)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_register_host: ptr is NULL");
    if (bytes == 0)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_mem_register_host: cannot register 0 bytes at %p", ptr);
    if ((uintptr_t)ptr + bytes < (uintptr_t)ptr)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_mem_register_host: %zu bytes at %p wrap around the address space", bytes,
                         ptr);
    /* Hold the table lock across the device call so that a racing register of
     * an overlapping range cannot pin the bytes twice. */
    pthread_mutex_lock(&dev->mem_lock);
    rt_range_status rs = rt_range_add(&dev->mem, ptr, bytes, true);
    cge_status st = CGE_OK;
    if (rs == RT_RANGE_OK && dev->ops->register_host) {
        st = dev->ops->register_host(dev, ptr, bytes);
        if (st != CGE_OK)
            rt_range_remove(&dev->mem, rt_range_find_base(&dev->mem, ptr));
    }
    pthread_mutex_unlock(&dev->mem_lock);
    if (rs == RT_RANGE_OVERLAP)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_EXISTS,
                         "cge_mem_register_host: %zu bytes at %p overlap a host range that is "
                         "already pinned",
                         bytes, ptr);
    if (rs == RT_RANGE_NO_MEMORY)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NO_MEMORY,
                         "cge_mem_register_host: out of memory tracking %zu bytes at %p", bytes, ptr);
    return st;
}

cge_status cge_mem_unregister_host(cge_device *dev, void *ptr)
{
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_unregister_host: device is NULL");
    if (!ptr)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_mem_unregister_host: ptr is NULL");
    pthread_mutex_lock(&dev->mem_lock);
    const rt_host_range *r = rt_range_find_base(&dev->mem, ptr);
    bool registered = r && r->registered;
    if (registered) {
        if (dev->ops->unregister_host)
            dev->ops->unregister_host(dev, ptr);
        rt_range_remove(&dev->mem, r);
        rt_mem_name_forget_locked(dev, ptr);
    }
    pthread_mutex_unlock(&dev->mem_lock);
    if (!r)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_NOT_FOUND,
                         "cge_mem_unregister_host: %p is not the start of a registered host range", ptr);
    if (!registered)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_mem_unregister_host: %p was allocated by cge_mem_alloc_host: use "
                         "cge_mem_free_host",
                         ptr);
    return CGE_OK;
}

static bool kind_valid(cge_memcpy_kind kind)
{
    return (int)kind >= CGE_MEMCPY_HOST_TO_DEVICE && (int)kind <= CGE_MEMCPY_HOST_TO_HOST;
}

cge_status cge_memcpy(cge_device *dev, void *dst, const void *src, size_t bytes, cge_memcpy_kind kind)
{
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_memcpy: device is NULL");
    if (!kind_valid(kind))
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_memcpy: invalid copy kind %d",
                         (int)kind);
    if (bytes == 0)
        return CGE_OK;
    if (!dst || !src)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "cge_memcpy: %s is NULL for a copy of %zu bytes", !dst ? "dst" : "src", bytes);
    cge_status st = rt_unsafe_call(dev, "cge_memcpy (synchronous copy)");
    if (st == CGE_OK)
        st = rt_hazard_check(dev, 0, dst, bytes, "cge_memcpy");
    if (st != CGE_OK)
        return st;
    return dev->ops->memcpy(dev, dst, src, bytes, kind);
}

cge_status cge_memset(cge_device *dev, void *dst, int value, size_t bytes)
{
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_memset: device is NULL");
    if (bytes == 0)
        return CGE_OK;
    if (!dst)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_memset: dst is NULL for %zu bytes",
                         bytes);
    cge_status st = rt_unsafe_call(dev, "cge_memset (synchronous fill)");
    if (st == CGE_OK)
        st = rt_hazard_check(dev, 0, dst, bytes, "cge_memset");
    if (st != CGE_OK)
        return st;
    return dev->ops->memset(dev, dst, value, bytes);
}
