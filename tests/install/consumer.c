/* Installed-package check, in C: make an array, read it back through
 * mtsarray_data, hand it to metatensor, print "ok". Exit status 1 on error. */
#include <stdio.h>

#include <mtsarray.h>

static int failed(const char* what) {
    const char* message = NULL;
    mts_last_error(&message, NULL, NULL);
    fprintf(stderr, "consumer-c: %s failed: %s\n", what, message ? message : "?");
    return 1;
}

int main(void) {
    const DLDevice cpu = {kDLCPU, 0};
    const DLDataType f64 = {kDLFloat, 64, 1};
    const uintptr_t shape[2] = {4, 3};
    const double value = 2.5;

    mts_array_t array;
    if (mtsarray_full(cpu, f64, shape, 2, &value, &array) != MTS_SUCCESS) {
        return failed("mtsarray_full");
    }
    void* data = NULL;
    if (mtsarray_data(&array, &data) != MTS_SUCCESS) {
        return failed("mtsarray_data");
    }
    for (int i = 0; i < 12; i++) {
        if (((const double*)data)[i] != value) {
            fprintf(stderr, "consumer-c: element %d is %g, expected %g\n", i, ((const double*)data)[i], value);
            return 1;
        }
    }
    const uintptr_t* got_shape = NULL;
    uintptr_t count = 0;
    if (array.shape(array.ptr, &got_shape, &count) != MTS_SUCCESS || count != 2 ||
        got_shape[0] != 4 || got_shape[1] != 3) {
        fprintf(stderr, "consumer-c: wrong shape\n");
        return 1;
    }
    array.destroy(array.ptr);
    printf("consumer-c: mtsarray %s (config: cuda %d, hip %d): ok\n", mtsarray_version(),
           MTSARRAY_HAS_CUDA, MTSARRAY_HAS_HIP);
    return 0;
}
