#include "api/create_like.hpp"

#include <string>

#include "api/callbacks.hpp"
#include "api/foreign_call.hpp"
#include "base/device.hpp"
#include "base/dlpack_owner.hpp"
#include "base/dtype.hpp"
#include "base/error.hpp"
#include "core/handle_registry.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

namespace {

// Destroys an mts_array_t handed to us when the scope ends, error or not.
class ArrayOwner {
public:
    explicit ArrayOwner(mts_array_t array) : array_(array) {}
    ~ArrayOwner() {
        if (array_.destroy != nullptr) {
            array_.destroy(array_.ptr);
        }
    }
    ArrayOwner(const ArrayOwner&) = delete;
    ArrayOwner& operator=(const ArrayOwner&) = delete;
    const mts_array_t& get() const { return array_; }

private:
    mts_array_t array_;
};

}  // namespace

std::unique_ptr<Array> create_like(const Array& prototype, Shape shape,
                                   mts_array_t fill_value) {
    ArrayOwner owner(fill_value);
    if (is_mtsarray(fill_value)) {
        // One of our own CPU scalars (what mtsarray_full makes): its bytes
        // are where its as_dlpack(cpu) would point, read without the export.
        // Anything else (another device, another dtype or shape) takes the
        // general path below, with its checks and messages.
        const Array& scalar = *find_array(fill_value.ptr);
        if (scalar.device().device_type == kDLCPU && scalar.size() == 1 &&
            same_dtype(scalar.dtype(), prototype.dtype())) {
            return make_filled(prototype.dtype(), std::move(shape), scalar.data(), prototype.stream());
        }
    }
    MTSARRAY_EXPECTS(fill_value.as_dlpack != nullptr, "fill_value has no as_dlpack function");

    DLManagedTensorVersioned* tensor = nullptr;
    const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    DLPackOwner tensor_owner(nullptr);
    call_foreign("reading fill_value on the CPU through its as_dlpack", [&] {
        const auto status = fill_value.as_dlpack(fill_value.ptr, &tensor, cpu_device(), nullptr, version);
        tensor_owner.adopt(tensor);  // a failing export may still have handed a tensor out
        return status;
    });
    MTSARRAY_EXPECTS(tensor != nullptr, "fill_value's as_dlpack returned a NULL tensor");
    MTSARRAY_EXPECTS(tensor->version.major == DLPACK_MAJOR_VERSION,
                     "fill_value's DLPack tensor has version " + std::to_string(tensor->version.major) +
                         "." + std::to_string(tensor->version.minor) + ", expected major version 1");
    const DLTensor& scalar = tensor->dl_tensor;
    MTSARRAY_EXPECTS(scalar.device.device_type == kDLCPU,
                     "fill_value's as_dlpack(cpu) returned data that is not on the CPU");
    MTSARRAY_EXPECTS(same_dtype(scalar.dtype, prototype.dtype()),
                     "fill_value has dtype " + dtype_name(scalar.dtype) + ", expected " +
                         dtype_name(prototype.dtype()));
    MTSARRAY_EXPECTS(scalar.ndim >= 0, "fill_value's DLPack tensor has ndim = " + std::to_string(scalar.ndim));
    MTSARRAY_EXPECTS(scalar.ndim == 0 || scalar.shape != nullptr,
                     "fill_value's DLPack tensor has a NULL shape with ndim = " + std::to_string(scalar.ndim));
    // a single scalar: every dimension is 1 (checked one by one: a product
    // of hostile dimensions could overflow, or two -1 multiply to 1)
    for (int32_t axis = 0; axis < scalar.ndim; axis++) {
        if (scalar.shape[axis] != 1) {
            std::string shape;
            for (int32_t i = 0; i < scalar.ndim; i++) {
                shape += (i == 0 ? "" : ", ") + std::to_string(scalar.shape[i]);
            }
            throw Error("fill_value must hold a single scalar, its DLPack shape is [" + shape + "]");
        }
    }
    MTSARRAY_EXPECTS(scalar.data != nullptr, "fill_value's DLPack data pointer is NULL");

    const auto* value = static_cast<const unsigned char*>(scalar.data) + scalar.byte_offset;
    return make_filled(prototype.dtype(), std::move(shape), value, prototype.stream());
}

}  // namespace mtsarray::detail
