#include "buffer.hpp"

#include <utility>

#include "backend_registry.hpp"

namespace mtsarray {

std::shared_ptr<Buffer> Buffer::allocate(const Stream& stream, size_t bytes) {
    const auto& backend = memory_backend(stream.device().device_type);
    void* data = backend.allocate(stream, bytes);
    try {
        return std::shared_ptr<Buffer>(new Buffer(data, bytes, stream, {}));
    } catch (...) {
        backend.deallocate(stream, data, bytes);
        throw;
    }
}

std::shared_ptr<Buffer> Buffer::external(void* data, size_t bytes, DLDevice device,
                                         std::function<void()> release) {
    try {
        return std::shared_ptr<Buffer>(
            new Buffer(data, bytes, Stream::default_for(device), std::move(release)));
    } catch (...) {
        // the caller handed us ownership: honour it even when we fail
        if (release) {
            release();
        }
        throw;
    }
}

Buffer::Buffer(void* data, size_t bytes, Stream stream, std::function<void()> release)
    : data_(data), bytes_(bytes), release_stream_(stream), release_(std::move(release)) {}

Buffer::~Buffer() {
    if (release_) {
        release_();
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

}  // namespace mtsarray
