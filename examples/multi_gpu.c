/*
 * multi_gpu.c: arrays on several GPUs of one process (docs/guides/multi-gpu.md).
 * Count the devices, make one array on each, each working on a stream of its own
 * device, and pass data along a pipeline of stages, one per GPU: stage k copies
 * its array into stage k + 1's with mtsarray_copy_into, then writes its next
 * batch at once. Every value is checked; the program exits with status 1 if one
 * is wrong.
 *
 * On a machine without a GPU the pipeline's stages are two CPU arrays, and the
 * program exits cleanly. CI also runs it on the simulated CUDA runtime of the
 * tests (with 1 and with 2 devices), where every stage is a GPU.
 *
 * Usage: multi_gpu
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mtsarray.h> /* includes metatensor.h */

enum { MAX_STAGES = 8, ROWS = 4, COLUMNS = 3 };

static void fail(const char* what) {
    const char* message = NULL;
    mts_last_error(&message, NULL, NULL);
    fprintf(stderr, "multi_gpu: %s failed: %s\n", what, message != NULL ? message : "?");
    exit(1);
}

#define CHECK(call)                  \
    do {                             \
        if ((call) != MTS_SUCCESS) { \
            fail(#call);             \
        }                            \
    } while (0)

static void expect(int condition, const char* what) {
    if (!condition) {
        fprintf(stderr, "multi_gpu: wrong: %s\n", what);
        exit(1);
    }
}

/* The values of `array`, copied to the host (the one call here that waits). */
static void read_values(const mts_array_t* array, double values[ROWS * COLUMNS]) {
    const DLDevice cpu = {kDLCPU, 0};
    mts_array_t on_host = {0};
    void* data = NULL;
    CHECK(array->copy(array->ptr, cpu, &on_host));
    CHECK(mtsarray_data(&on_host, &data));
    memcpy(values, data, sizeof(double) * ROWS * COLUMNS);
    on_host.destroy(on_host.ptr);
}

/* `array`'s elements all `value`? */
static int all_equal(const mts_array_t* array, double value) {
    double values[ROWS * COLUMNS];
    read_values(array, values);
    for (int i = 0; i < ROWS * COLUMNS; i++) {
        if (values[i] != value) {
            return 0;
        }
    }
    return 1;
}

int main(void) {
    const DLDataType f64 = {kDLFloat, 64, 1};
    const uintptr_t shape[2] = {ROWS, COLUMNS};

    /* [devices] */
    /* Device ids run from 0 to the count - 1; 0 devices when the CUDA backend
     * was not compiled in, or there is no driver or no GPU. */
    int32_t gpus = 0;
    CHECK(mtsarray_device_count(kDLCUDA, &gpus));
    if (gpus == 0) {
        printf("no CUDA device (%s): the stages run on the CPU\n", mtsarray_backend_unavailable_reason(kDLCUDA));
    } else {
        printf("%d CUDA device%s\n", (int)gpus, gpus == 1 ? "" : "s");
    }
    /* [devices] */

    /* [stages] */
    /* One stage per GPU (two on the CPU without one). Each array works on the
     * per-thread default stream of its own device: a DLPack stream number 1 or
     * 2 names a default stream of the array's device. */
    int stages = gpus == 0 ? 2 : gpus < MAX_STAGES ? (int)gpus : MAX_STAGES;
    if (stages == 1) {
        stages = 2; /* one GPU: both stages on it */
    }
    mts_array_t stage[MAX_STAGES];
    for (int k = 0; k < stages; k++) {
        const DLDevice device = {gpus == 0 ? kDLCPU : kDLCUDA, gpus == 0 ? 0 : k % gpus};
        CHECK(mtsarray_zeros(device, f64, shape, 2, &stage[k]));
        if (gpus != 0) {
            CHECK(mtsarray_set_stream(&stage[k], 2));
        }
    }
    /* [stages] */

    /* [pipeline] */
    /* Stage k hands its batch to stage k + 1, then writes its next batch into
     * the same array at once. The copy is queued on the destination's stream,
     * after the source's pending writes; the write that follows waits (on the
     * device) for that read. No call here waits on the host. */
    const double batch = 1.0, next_batch = 2.0;
    mts_array_t batch_source = {0};
    mts_array_t next_source = {0};
    const DLDevice cpu = {kDLCPU, 0};
    CHECK(mtsarray_full(cpu, f64, shape, 2, &batch, &batch_source));
    CHECK(mtsarray_full(cpu, f64, shape, 2, &next_batch, &next_source));
    CHECK(mtsarray_copy_into(&stage[0], &batch_source));
    for (int k = 0; k + 1 < stages; k++) {
        CHECK(mtsarray_copy_into(&stage[k + 1], &stage[k])); /* on stage k + 1's stream */
        CHECK(mtsarray_copy_into(&stage[k], &next_source));  /* after that read of stage k */
    }
    /* [pipeline] */

    for (int k = 0; k + 1 < stages; k++) {
        expect(all_equal(&stage[k], next_batch), "a stage holds its next batch");
    }
    expect(all_equal(&stage[stages - 1], batch), "the last stage holds the first batch");

    for (int k = 0; k < stages; k++) {
        DLDevice device = {kDLCPU, 0};
        CHECK(stage[k].device(stage[k].ptr, &device));
        printf("stage %d: %s:%d\n", k, device.device_type == kDLCPU ? "cpu" : "cuda", (int)device.device_id);
        stage[k].destroy(stage[k].ptr);
    }
    batch_source.destroy(batch_source.ptr);
    next_source.destroy(next_source.ptr);
    printf("multi_gpu: %d stages, every value checked, ok\n", stages);
    return 0;
}
