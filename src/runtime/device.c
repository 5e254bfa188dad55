/* Public device API (destroy, name, threads, synchronize) and the choice of
 * the core pool's size from options, $CGE_NUM_THREADS and the cores. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "runtime/device.h"

int rt_online_cores(void)
{
    /* The affinity mask, not the machine: a container or taskset may give
     * this process fewer cores than the machine has. */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > INT_MAX ? INT_MAX : n) : 1;
}

cge_status rt_resolve_num_threads(const cge_device_options *opts, int *out)
{
    int requested = opts ? opts->num_threads : 0;
    if (requested < 0)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                         "device create: num_threads is %d; use 0 for the default or a positive count",
                         requested);
    if (requested == 0) {
        const char *env = getenv("CGE_NUM_THREADS");
        if (env && *env) {
            char *end = NULL;
            errno = 0;
            long v = strtol(env, &end, 10);
            if (errno != 0 || *end != '\0' || v < 1 || v > INT_MAX)
                return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG,
                                 "device create: CGE_NUM_THREADS='%s' is not a positive integer", env);
            requested = (int)v;
        }
    }
    int cores = rt_online_cores();
    if (requested == 0 || requested > cores)
        requested = cores;
    *out = requested;
    return CGE_OK;
}

void cge_device_destroy(cge_device *dev)
{
    if (!dev)
        return;
    /* Captures in progress are dropped and RIs released first: they refer to
     * streams and events the device is about to free. */
    rt_capture_device_gone(dev);
    dev->ops->destroy(dev);
}

const char *cge_device_name(const cge_device *dev) { return dev ? dev->ops->name : "(null)"; }

int cge_device_num_threads(const cge_device *dev) { return dev ? dev->num_threads : 0; }

cge_status cge_device_synchronize(cge_device *dev)
{
    if (!dev)
        return cge_error(CGE_LAYER_RUNTIME, CGE_ERR_INVALID_ARG, "cge_device_synchronize: device is NULL");
    cge_status st = rt_device_unsafe(dev, "device synchronize");
    if (st != CGE_OK)
        return st;
    return dev->ops->synchronize(dev);
}
