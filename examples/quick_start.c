/*
 * quick_start.c: the C API in five steps. Make arrays, wrap memory you own,
 * move rows between arrays with move_data, read the result back, and see
 * what a bad call gives. Every value is checked; the program exits with
 * status 1 if one is wrong.
 *
 * Usage: quick_start [--device cpu|auto]   (default: cpu)
 *   auto picks CUDA, then ROCm, when mtsarray can use one, else the CPU.
 */
/* [helpers] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mtsarray.h> /* includes metatensor.h */

/* Print the last error (set by mtsarray or libmetatensor) and stop. */
static void fail(const char* what) {
    const char* message = NULL;
    mts_last_error(&message, NULL, NULL);
    fprintf(stderr, "quick_start: %s failed: %s\n", what, message != NULL ? message : "?");
    exit(1);
}

#define CHECK(call)                  \
    do {                             \
        if ((call) != MTS_SUCCESS) { \
            fail(#call);             \
        }                            \
    } while (0)

static DLDevice pick_device(int argc, char** argv) {
    DLDevice device = {kDLCPU, 0};
    if (argc == 3 && strcmp(argv[1], "--device") == 0 && strcmp(argv[2], "auto") == 0) {
        bool available = false;
        CHECK(mtsarray_backend_available(kDLCUDA, &available));
        if (available) {
            device.device_type = kDLCUDA;
            return device;
        }
        CHECK(mtsarray_backend_available(kDLROCM, &available));
        if (available) {
            device.device_type = kDLROCM;
        }
    }
    return device;
}

int main(int argc, char** argv) {
/* [helpers] */
    /* [step 1] */
    /* 1. Pick a device and make arrays there: 4 atoms x 3 features. */
    const DLDevice device = pick_device(argc, argv);
    const DLDevice cpu = {kDLCPU, 0};
    const DLDataType f64 = {kDLFloat, 64, 1};
    const uintptr_t shape[2] = {4, 3};
    printf("mtsarray %s on %s\n", mtsarray_version(),
           device.device_type == kDLCPU ? "the CPU" : "a GPU");

    mts_array_t features = {0};
    CHECK(mtsarray_zeros(device, f64, shape, 2, &features));
    /* [step 1] */

    /* [step 2] */
    /* 2. Wrap memory the program owns, without a copy (host memory here;
     *    a device pointer with a GPU device works the same way). The NULL
     *    deleter says the program frees it, after the array is gone. */
    double owned[12];
    for (int i = 0; i < 12; i++) {
        owned[i] = (double)i; /* row r holds 3r, 3r + 1, 3r + 2 */
    }
    mts_array_t input = {0};
    CHECK(mtsarray_wrap(owned, cpu, f64, shape, 2, NULL, NULL, &input));
    /* [step 2] */

    /* [step 3] */
    /* 3. Move rows: the data of rows 3 and 1 into rows 0 and 2, all three
     *    properties. A GPU output reads a host input through DLPack; the
     *    copy is queued on the output's stream and the call returns. */
    mts_array_t staged = {0};
    if (device.device_type == kDLCPU) {
        staged = input;
    } else {
        CHECK(mtsarray_zeros(device, f64, shape, 2, &staged));
        CHECK(mtsarray_copy_into(&staged, &input)); /* host to device, on the destination's stream */
    }
    const mts_data_movement_t movements[2] = {
        /* sample_in, sample_out, properties_start_in, properties_start_out, properties_length */
        {3, 0, 0, 0, 3},
        {1, 2, 0, 0, 3},
    };
    CHECK(features.move_data(features.ptr, staged.ptr, movements, 2));
    /* [step 3] */

    /* [step 4] */
    /* 4. Read the result on the host: copy_into a host array waits for the
     *    copy (and the work before it) only. */
    double result[12] = {0};
    mts_array_t host = {0};
    CHECK(mtsarray_wrap(result, cpu, f64, shape, 2, NULL, NULL, &host));
    CHECK(mtsarray_copy_into(&host, &features));
    const double expected[12] = {9, 10, 11, 0, 0, 0, 3, 4, 5, 0, 0, 0};
    for (int i = 0; i < 12; i++) {
        if (result[i] != expected[i]) {
            fprintf(stderr, "WRONG VALUE: element %d = %g, expected %g\n", i, result[i], expected[i]);
            return 1;
        }
    }
    /* [step 4] */

    /* [step 5] */
    /* 5. A bad call returns an error status, sets a message naming what was
     *    wrong, and leaves every array as it was. */
    const mts_data_movement_t out_of_range = {7, 0, 0, 0, 3};
    if (features.move_data(features.ptr, staged.ptr, &out_of_range, 1) == MTS_SUCCESS) {
        fprintf(stderr, "an out-of-range movement was accepted\n");
        return 1;
    }
    const char* message = NULL;
    mts_last_error(&message, NULL, NULL);
    printf("as expected, move_data said: %s\n", message);
    /* [step 5] */

    /* [clean up] */
    if (device.device_type != kDLCPU) {
        staged.destroy(staged.ptr);
    }
    host.destroy(host.ptr);
    input.destroy(input.ptr); /* the wrapped memory is still the program's */
    features.destroy(features.ptr);
    /* [clean up] */
/* [end] */
    printf("quick_start: every value is right\n");
    return 0;
}
/* [end] */
