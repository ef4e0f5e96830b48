#include "buffer.hpp"

#include <utility>

#include "backend_registry.hpp"
#include "fault_injection.hpp"

namespace mtsarray::detail {

std::shared_ptr<Buffer> Buffer::allocate(const Stream& stream, size_t bytes) {
    const auto& backend = memory_backend(stream.device().device_type);
    void* data = backend.allocate(stream, bytes);
    try {
        fault_injection::check("allocate");  // the holder's own host allocation
        return std::shared_ptr<Buffer>(new Buffer(data, bytes, stream, /*external=*/false));
    } catch (...) {
        backend.deallocate(stream, data, bytes);
        throw;
    }
}

std::shared_ptr<Buffer> Buffer::external(void* data, size_t bytes, DLDevice device,
                                         std::function<void()> release) {
    // `release` becomes ours only once the holder exists: if anything above
    // throws, the memory is still the caller's
    fault_injection::check("allocate");
    auto shared = std::shared_ptr<Buffer>(new Buffer(data, bytes, Stream::default_for(device), /*external=*/true));
    shared->release_ = std::move(release);
    return shared;
}

Buffer::Buffer(void* data, size_t bytes, Stream stream, bool external)
    : data_(data), bytes_(bytes), release_stream_(stream), external_(external) {}

Buffer::~Buffer() {
    if (external_) {
        if (release_) {
            release_();
        }
        return;
    }
    // memory_backend can not fail here: it served the allocation
    try {
        memory_backend(release_stream_.device().device_type)
            .deallocate(release_stream_, data_, bytes_);
    } catch (...) {
    }
}

void Buffer::set_release_stream(const Stream& stream) noexcept {
    release_stream_ = stream;
}

}  // namespace mtsarray::detail
