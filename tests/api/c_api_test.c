/* The public C header, compiled as strict C99 (-pedantic -Werror): make
 * arrays, check their values through the mts_array_t callbacks, and hit an
 * error path. Exits non-zero on the first failed check. */

#include <stdio.h>
#include <string.h>

#include "mtsarray.h"

static int failures = 0;

#define CHECK(condition)                                                         \
    do {                                                                         \
        if (!(condition)) {                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

static const char* last_message(void) {
    const char* message = NULL;
    mts_last_error(&message, NULL, NULL);
    return message == NULL ? "" : message;
}

static int deleted = 0;
static void count_deleter(void* context) {
    (void)context;
    deleted++;
}

int main(void) {
    DLDevice cpu;
    DLDataType float64;
    uintptr_t shape[2] = {2, 3};
    mts_array_t zeros, full, wrapped, copy;
    double value = 2.5;
    double memory[6] = {0, 1, 2, 3, 4, 5};
    DLManagedTensorVersioned* tensor = NULL;
    DLPackVersion version;
    const uintptr_t* reported = NULL;
    uintptr_t count = 0;
    bool ours = false;
    bool available = false;
    mts_data_movement_t movement;
    const char* origin = NULL;
    int32_t threads = 0;
    int32_t devices = 0;
    int i;

    cpu.device_type = kDLCPU;
    cpu.device_id = 0;
    float64.code = kDLFloat;
    float64.bits = 64;
    float64.lanes = 1;
    version.major = DLPACK_MAJOR_VERSION;
    version.minor = DLPACK_MINOR_VERSION;

    CHECK(strlen(mtsarray_version()) > 0);
    CHECK(mtsarray_backend_available(kDLCPU, &available) == MTS_SUCCESS && available);
    CHECK(mtsarray_device_count(kDLCPU, &devices) == MTS_SUCCESS && devices == 1);
    devices = -7;
    CHECK(mtsarray_device_count(kDLOpenCL, &devices) != MTS_SUCCESS && devices == -7);

    /* host threads */
    CHECK(mtsarray_set_num_threads(3) == MTS_SUCCESS);
    CHECK(mtsarray_get_num_threads(&threads) == MTS_SUCCESS && threads == 3);
    CHECK(mtsarray_set_num_threads(0) != MTS_SUCCESS);
    CHECK(mtsarray_get_num_threads(&threads) == MTS_SUCCESS && threads == 3);

    /* zeros */
    CHECK(mtsarray_zeros(cpu, float64, shape, 2, &zeros) == MTS_SUCCESS);
    CHECK(mtsarray_is_mtsarray(&zeros, &ours) == MTS_SUCCESS && ours);
    CHECK(zeros.shape(zeros.ptr, &reported, &count) == MTS_SUCCESS);
    CHECK(count == 2 && reported[0] == 2 && reported[1] == 3);
    CHECK(zeros.as_dlpack(zeros.ptr, &tensor, cpu, NULL, version) == MTS_SUCCESS);
    CHECK(tensor != NULL && tensor->dl_tensor.ndim == 2);
    for (i = 0; i < 6; i++) {
        CHECK(((const double*)tensor->dl_tensor.data)[i] == 0.0);
    }
    tensor->deleter(tensor);

    /* full */
    CHECK(mtsarray_full(cpu, float64, shape, 2, &value, &full) == MTS_SUCCESS);
    CHECK(full.as_dlpack(full.ptr, &tensor, cpu, NULL, version) == MTS_SUCCESS);
    for (i = 0; i < 6; i++) {
        CHECK(((const double*)tensor->dl_tensor.data)[i] == 2.5);
    }
    tensor->deleter(tensor);

    /* wrap, move_data from it, copy */
    CHECK(mtsarray_wrap(memory, cpu, float64, shape, 2, count_deleter, NULL, &wrapped) == MTS_SUCCESS);
    movement.sample_in = 1;
    movement.sample_out = 0;
    movement.properties_start_in = 0;
    movement.properties_start_out = 1;
    movement.properties_length = 2;
    CHECK(full.move_data(full.ptr, wrapped.ptr, &movement, 1) == MTS_SUCCESS);
    CHECK(full.copy(full.ptr, cpu, &copy) == MTS_SUCCESS);
    CHECK(copy.as_dlpack(copy.ptr, &tensor, cpu, NULL, version) == MTS_SUCCESS);
    {
        const double expected[6] = {2.5, 3.0, 4.0, 2.5, 2.5, 2.5};
        for (i = 0; i < 6; i++) {
            CHECK(((const double*)tensor->dl_tensor.data)[i] == expected[i]);
        }
    }
    tensor->deleter(tensor);

    /* a movement plan: the same move into zeros, then refused on a shorter input */
    {
        mtsarray_move_plan_t* plan = NULL;
        const double expected[6] = {0.0, 3.0, 4.0, 0.0, 0.0, 0.0};
        CHECK(mtsarray_move_plan_create(&zeros, &wrapped, &movement, 1, &plan) == MTS_SUCCESS && plan != NULL);
        CHECK(mtsarray_move_plan_execute(plan, &zeros, &wrapped) == MTS_SUCCESS);
        CHECK(zeros.as_dlpack(zeros.ptr, &tensor, cpu, NULL, version) == MTS_SUCCESS);
        for (i = 0; i < 6; i++) {
            CHECK(((const double*)tensor->dl_tensor.data)[i] == expected[i]);
        }
        tensor->deleter(tensor);
        CHECK(mtsarray_move_plan_execute(plan, &zeros, &full) == MTS_SUCCESS);
        CHECK(mtsarray_move_plan_execute(NULL, &zeros, &wrapped) == MTS_CALLBACK_ERROR);
        CHECK(mtsarray_move_plan_free(plan) == MTS_SUCCESS);
        CHECK(mtsarray_move_plan_free(NULL) == MTS_SUCCESS);
    }

    /* an error path: wrong number of elements */
    shape[0] = 4;
    CHECK(zeros.reshape(zeros.ptr, shape, 2) == MTS_CALLBACK_ERROR);
    CHECK(strstr(last_message(), "can not reshape to [4, 3]") != NULL);
    CHECK(mts_last_error(NULL, &origin, NULL) == MTS_SUCCESS && strcmp(origin, "mtsarray") == 0);
    CHECK(mtsarray_set_stream(&zeros, 1) == MTS_CALLBACK_ERROR);
    CHECK(strstr(last_message(), "cpu memory has no streams") != NULL);

    zeros.destroy(zeros.ptr);
    full.destroy(full.ptr);
    copy.destroy(copy.ptr);
    CHECK(deleted == 0);
    wrapped.destroy(wrapped.ptr);
    CHECK(deleted == 1);

    if (failures != 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("C API: all checks passed\n");
    return 0;
}
