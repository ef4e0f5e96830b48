#include "foreign_tensor.hpp"

namespace mtsarray_python {

ForeignTensor::~ForeignTensor() {
    if (tensor_ != nullptr && tensor_->deleter != nullptr) {
        tensor_->deleter(tensor_);
    }
}

mts_array_t ForeignTensor::array() noexcept {
    device_ = tensor_ != nullptr ? tensor_->dl_tensor.device : DLDevice{kDLCPU, 0};
    mts_array_t raw = {};
    raw.ptr = this;
    raw.device = &ForeignTensor::device;
    raw.as_dlpack = &ForeignTensor::as_dlpack;
    return raw;
}

mts_status_t ForeignTensor::device(const void* self, DLDevice* device) {
    *device = static_cast<const ForeignTensor*>(self)->device_;
    return MTS_SUCCESS;
}

mts_status_t ForeignTensor::as_dlpack(void* self, DLManagedTensorVersioned** tensor, DLDevice device,
                                      const int64_t* stream, DLPackVersion max_version) {
    // the tensor is on the device it is on: the C API asks for that one, on
    // the default stream the producer was asked to order its work before
    (void)device;
    (void)stream;
    (void)max_version;
    auto* foreign = static_cast<ForeignTensor*>(self);
    if (foreign->tensor_ == nullptr) {
        mts_set_last_error("this DLPack tensor was already exported once", "mtsarray", nullptr, nullptr);
        return MTS_CALLBACK_ERROR;
    }
    *tensor = foreign->tensor_;
    foreign->tensor_ = nullptr;
    return MTS_SUCCESS;
}

}  // namespace mtsarray_python
