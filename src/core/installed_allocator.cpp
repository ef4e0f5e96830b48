#include "core/installed_allocator.hpp"

#include <atomic>
#include <string>

#include "core/backend_registry.hpp"
#include "base/device.hpp"
#include "base/error.hpp"

namespace mtsarray::detail {

namespace {

/// The user's functions. Zero-byte requests never reach them: the backend
/// gives those its placeholder address, so that allocators which return
/// NULL for zero bytes need no special case.
class UserAllocator final : public Allocator {
public:
    UserAllocator(const mtsarray_allocator_t& functions, const Backend& backend)
        : functions_(functions), backend_(backend) {}

    void* allocate(const Stream& stream, size_t bytes) const override {
        if (bytes == 0) {
            return backend_.allocate(stream, 0);
        }
        void* data = functions_.allocate(functions_.context, stream.device(), stream.number(), bytes);
        if (data == nullptr) {
            throw OutOfMemory("the allocator installed with mtsarray_set_allocator could not allocate " +
                              std::to_string(bytes) + " bytes on " + describe(stream.device()));
        }
        return data;
    }

    void deallocate(const Stream& stream, void* data, size_t bytes) const noexcept override {
        if (bytes == 0) {
            backend_.deallocate(stream, data, 0);
            return;
        }
        functions_.deallocate(functions_.context, stream.device(), stream.number(), data, bytes);
    }

private:
    mtsarray_allocator_t functions_;
    const Backend& backend_;
};

// The user's allocator per GPU device type; nullptr: the backend's.
struct Installed {
    std::shared_ptr<const Allocator> cuda;
    std::shared_ptr<const Allocator> rocm;
};

Installed& installed() {
    static auto* instance = new Installed();  // never destroyed: used by late frees
    return *instance;
}

std::shared_ptr<const Allocator>* user_slot(DLDeviceType type) {
    switch (type) {
    case kDLCUDA: return &installed().cuda;
    case kDLROCM: return &installed().rocm;
    default: return nullptr;
    }
}

}  // namespace

std::shared_ptr<const Allocator> current_allocator(DLDeviceType type) {
    if (auto* slot = user_slot(type)) {
        if (auto user = std::atomic_load(slot)) {
            return user;
        }
    }
    // A backend lives as long as the program: a pointer that owns nothing
    // (aliasing an empty shared_ptr), so no reference count is touched.
    const Allocator& backend = memory_backend(type);
    return std::shared_ptr<const Allocator>(std::shared_ptr<const Allocator>(), &backend);
}

void set_user_allocator(DLDeviceType type, const mtsarray_allocator_t* allocator) {
    auto* slot = user_slot(type);
    MTSARRAY_EXPECTS(slot != nullptr, std::string("mtsarray_set_allocator: only CUDA and ROCm device memory ") +
                                          "(kDLCUDA, kDLROCM) can use another allocator, not " +
                                          device_type_name(type));
    if (allocator == nullptr) {
        std::atomic_store(slot, std::shared_ptr<const Allocator>());
        return;
    }
    MTSARRAY_EXPECTS(allocator->allocate != nullptr && allocator->deallocate != nullptr,
                     "mtsarray_set_allocator: the allocate and deallocate functions must not be NULL");
    const Backend& backend = memory_backend(type);
    std::atomic_store(slot, std::shared_ptr<const Allocator>(std::make_shared<const UserAllocator>(*allocator, backend)));
}

}  // namespace mtsarray::detail
