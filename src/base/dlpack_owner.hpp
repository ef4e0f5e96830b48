#pragma once
// Ownership of a DLManagedTensorVersioned handed to us: its deleter runs
// exactly once, when the owner goes out of scope, unless released.

#include <metatensor.h>

namespace mtsarray::detail {

class DLPackOwner {
public:
    explicit DLPackOwner(DLManagedTensorVersioned* tensor) noexcept : tensor_(tensor) {}
    ~DLPackOwner() { reset(); }
    DLPackOwner(const DLPackOwner&) = delete;
    DLPackOwner& operator=(const DLPackOwner&) = delete;

    DLManagedTensorVersioned* get() const noexcept { return tensor_; }

    /// Gives up ownership (someone else will call the deleter).
    DLManagedTensorVersioned* release() noexcept {
        auto* tensor = tensor_;
        tensor_ = nullptr;
        return tensor;
    }

    /// Takes ownership of `tensor`, after releasing the one held.
    void adopt(DLManagedTensorVersioned* tensor) noexcept {
        reset();
        tensor_ = tensor;
    }

    /// Calls the deleter now.
    void reset() noexcept {
        if (tensor_ != nullptr && tensor_->deleter != nullptr) {
            tensor_->deleter(tensor_);
        }
        tensor_ = nullptr;
    }

private:
    DLManagedTensorVersioned* tensor_;
};

}  // namespace mtsarray::detail
