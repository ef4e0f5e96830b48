#pragma once
// A foreign (non-mtsarray) mts_array_t in host memory whose DLPack export has
// any strides and flags, for the tests of sources that mtsarray must copy
// before reading them (strided, read-only).

#include <cstdint>
#include <cstring>
#include <vector>

#include <metatensor.h>

namespace mtsarray_test {

/// A foreign (non-mtsarray) array in host memory (the CPU's, or a GPU's
/// page-locked or managed memory) whose export has any strides and flags:
/// element i of the C-order view sits at `strides`-defined offsets in `storage`.
struct StridedForeignArray {
    DLDataType dtype;
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;  // in elements
    std::vector<uint8_t> storage;
    DLDevice device;
    uint64_t flags;

    static mts_array_t make(DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                            std::vector<uint8_t> storage, DLDevice device = DLDevice{kDLCPU, 0},
                            uint64_t flags = 0) {
        auto* self = new StridedForeignArray{dtype, std::move(shape), std::move(strides), std::move(storage),
                                             device, flags};
        mts_array_t array;
        std::memset(&array, 0, sizeof(array));
        array.ptr = self;
        array.destroy = [](void* pointer) { delete static_cast<StridedForeignArray*>(pointer); };
        array.device = [](const void* pointer, DLDevice* device) -> mts_status_t {
            *device = static_cast<const StridedForeignArray*>(pointer)->device;
            return MTS_SUCCESS;
        };
        array.as_dlpack = [](void* pointer, DLManagedTensorVersioned** result, DLDevice device, const int64_t*,
                             DLPackVersion) -> mts_status_t {
            auto* self = static_cast<StridedForeignArray*>(pointer);
            if (device.device_type != self->device.device_type || device.device_id != self->device.device_id) {
                mts_set_last_error("this test array exports on its own device only", "mtsarray-tests", nullptr,
                                   nullptr);
                return MTS_CALLBACK_ERROR;
            }
            auto* managed = new DLManagedTensorVersioned{};
            managed->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
            managed->deleter = [](DLManagedTensorVersioned* tensor) { delete tensor; };
            managed->flags = self->flags;
            managed->dl_tensor.data = self->storage.data();
            managed->dl_tensor.device = self->device;
            managed->dl_tensor.ndim = static_cast<int32_t>(self->shape.size());
            managed->dl_tensor.dtype = self->dtype;
            managed->dl_tensor.shape = self->shape.data();
            managed->dl_tensor.strides = self->strides.data();
            *result = managed;
            return MTS_SUCCESS;
        };
        return array;
    }
};

}  // namespace mtsarray_test
