/* A C program built against the INSTALL tree with nothing but
 *   cc consumer.c $(pkg-config --cflags --libs mtsarray)
 * It makes an array, moves data, reads it back through DLPack, and checks
 * that the mtsarray and libmetatensor symbols both resolve. Exits non-zero
 * on the first mismatch. */

#include <stdio.h>
#include <string.h>

#include <mtsarray.h>

#define CHECK(condition)                                                      \
    do {                                                                      \
        if (!(condition)) {                                                   \
            const char* message = NULL;                                       \
            mts_last_error(&message, NULL, NULL);                             \
            fprintf(stderr, "FAILED: %s (%s)\n", #condition, message ? message : ""); \
            return 1;                                                         \
        }                                                                     \
    } while (0)

int main(void) {
    DLDevice cpu = {kDLCPU, 0};
    DLDataType float64 = {kDLFloat, 64, 1};
    DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    uintptr_t shape[2] = {2, 3};
    double value = 4.5;
    double host[6] = {0, 1, 2, 3, 4, 5};
    mts_array_t full, wrapped;
    mts_data_movement_t movement = {1, 0, 0, 1, 2};
    DLManagedTensorVersioned* tensor = NULL;
    const double* data;
    const char* text = NULL;
    bool available = false;

    printf("mtsarray %s (config.h: %s), libmetatensor %s\n", mtsarray_version(), MTSARRAY_VERSION,
           mts_version());
    CHECK(strcmp(mtsarray_version(), MTSARRAY_VERSION) == 0);
    CHECK(mtsarray_backend_available(kDLCPU, &available) == MTS_SUCCESS && available);

    CHECK(mtsarray_full(cpu, float64, shape, 2, &value, &full) == MTS_SUCCESS);
    CHECK(mtsarray_wrap(host, cpu, float64, shape, 2, NULL, NULL, &wrapped) == MTS_SUCCESS);
    /* full[0, 1:3] = host[1, 0:2] */
    CHECK(full.move_data(full.ptr, wrapped.ptr, &movement, 1) == MTS_SUCCESS);
    CHECK(full.as_dlpack(full.ptr, &tensor, cpu, NULL, version) == MTS_SUCCESS);
    data = (const double*)tensor->dl_tensor.data;
    CHECK(data[0] == 4.5 && data[1] == 3.0 && data[2] == 4.0 && data[3] == 4.5);
    tensor->deleter(tensor);

    CHECK(mtsarray_set_stream(&full, 3) != MTS_SUCCESS);
    CHECK(mts_last_error(&text, NULL, NULL) == MTS_SUCCESS && strstr(text, "mtsarray") != NULL);

    full.destroy(full.ptr);
    wrapped.destroy(wrapped.ptr);
    printf("pkg-config consumer: all checks passed\n");
    return 0;
}
