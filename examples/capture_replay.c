/* Capture once, replay many times: host->device copies of x and y, an add
 * kernel over num_blocks blocks and a device->host copy of z are captured on a
 * stream, then replayed 5 times with new inputs written into the same pinned
 * host buffers between replays (after each replay has finished). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cge/runtime.h"

enum { BLOCK_LEN = 2048, NUM_BLOCKS = 8, N = BLOCK_LEN * NUM_BLOCKS, REPLAYS = 5 };

typedef struct add_args {
    const float *x, *y;
    float *z;
} add_args;

/* z = x + y over this block's slice. */
static void add_kernel(int64_t block, int64_t num_blocks, void *args)
{
    const add_args *a = args;
    for (int64_t i = block * BLOCK_LEN; i < (block + 1) * BLOCK_LEN; i++)
        a->z[i] = a->x[i] + a->y[i];
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cge_status st_ = (call);                                                                   \
        if (st_ != CGE_OK) {                                                                       \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cge_last_error()); \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int run(cge_device *dev)
{
    const size_t bytes = N * sizeof(float);
    cge_stream *stream = NULL;
    float *x_host = NULL, *y_host = NULL, *z_host = NULL;
    float *x_dev = NULL, *y_dev = NULL, *z_dev = NULL;
    CHECK(cge_stream_create(dev, &stream));
    /* Asynchronous copies need pinned host memory, as on an accelerator. */
    CHECK(cge_mem_alloc_host(dev, bytes, (void **)&x_host));
    CHECK(cge_mem_alloc_host(dev, bytes, (void **)&y_host));
    CHECK(cge_mem_alloc_host(dev, bytes, (void **)&z_host));
    CHECK(cge_mem_alloc(dev, bytes, (void **)&x_dev));
    CHECK(cge_mem_alloc(dev, bytes, (void **)&y_dev));
    CHECK(cge_mem_alloc(dev, bytes, (void **)&z_dev));
    CHECK(cge_mem_set_name(dev, x_host, "x_host"));
    CHECK(cge_mem_set_name(dev, y_host, "y_host"));

    cge_ri *ri = NULL;
    CHECK(cge_stream_begin_capture(stream, CGE_CAPTURE_GLOBAL));
    CHECK(cge_memcpy_async(stream, x_dev, x_host, bytes, CGE_MEMCPY_HOST_TO_DEVICE));
    CHECK(cge_memcpy_async(stream, y_dev, y_host, bytes, CGE_MEMCPY_HOST_TO_DEVICE));
    add_args args = {x_dev, y_dev, z_dev};
    CHECK(cge_launch(stream, add_kernel, NUM_BLOCKS, &args, sizeof args));
    CHECK(cge_memcpy_async(stream, z_host, z_dev, bytes, CGE_MEMCPY_DEVICE_TO_HOST));
    CHECK(cge_stream_end_capture(stream, &ri));
    printf("captured ri with %d tasks\n", cge_ri_num_tasks(ri));

    int failures = 0;
    for (int r = 0; r < REPLAYS; r++) {
        /* New inputs go into the same buffers: the previous replay has
         * finished (synchronized below), so nothing still reads them. */
        CHECK(cge_mem_host_write(dev, x_host, bytes));
        CHECK(cge_mem_host_write(dev, y_host, bytes));
        for (int i = 0; i < N; i++) {
            x_host[i] = (float)(i % 1000) + (float)r;
            y_host[i] = 2.0f * (float)r - (float)(i % 7);
        }
        CHECK(cge_ri_execute_async(ri, stream));
        CHECK(cge_stream_synchronize(stream));
        int bad = 0;
        for (int i = 0; i < N; i++) {
            float want = ((float)(i % 1000) + (float)r) + (2.0f * (float)r - (float)(i % 7));
            if (z_host[i] != want) {
                if (bad++ == 0)
                    fprintf(stderr, "replay %d: z[%d] = %g, want %g\n", r, i, z_host[i], want);
            }
        }
        printf("replay %d: %d of %d values of z = x + y checked, %d wrong\n", r, N, N, bad);
        failures += bad != 0;
    }

    /* Everything has completed (the last synchronize): now release. */
    cge_ri_destroy(ri);
    CHECK(cge_mem_free(dev, x_dev));
    CHECK(cge_mem_free(dev, y_dev));
    CHECK(cge_mem_free(dev, z_dev));
    CHECK(cge_mem_free_host(dev, x_host));
    CHECK(cge_mem_free_host(dev, y_host));
    CHECK(cge_mem_free_host(dev, z_host));
    cge_stream_destroy(stream);
    return failures ? 1 : 0;
}

int main(void)
{
    cge_device *dev = NULL;
    if (cge_device_create_cpu(NULL, &dev) != CGE_OK) {
        fprintf(stderr, "device: %s\n", cge_last_error());
        return 1;
    }
    CHECK(cge_device_set_hazard_check(dev, true));
    int rc = run(dev);
    cge_device_destroy(dev);
    printf("%s\n", rc == 0 ? "capture_replay: all replays correct" : "capture_replay: FAILED");
    return rc;
}
