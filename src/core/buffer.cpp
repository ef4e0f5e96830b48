#include "core/buffer.hpp"

#include <cstdio>
#include <exception>
#include <utility>

#include "core/backend_registry.hpp"
#include "core/installed_allocator.hpp"
#include "base/device.hpp"
#include "base/error.hpp"
#include "base/fault_injection.hpp"

namespace mtsarray::detail {

std::shared_ptr<Buffer> Buffer::allocate(const Stream& stream, size_t bytes) {
    auto allocator = current_allocator(stream.device().device_type);
    void* data = allocator->allocate(stream, bytes);
    return hold(std::move(allocator), stream, data, bytes);
}

std::shared_ptr<Buffer> Buffer::allocate_zeroed(const Stream& stream, size_t bytes) {
    auto allocator = current_allocator(stream.device().device_type);
    void* data = allocator->allocate_zeroed(stream, bytes);
    if (data == nullptr) {
        return nullptr;
    }
    return hold(std::move(allocator), stream, data, bytes);
}

std::shared_ptr<Buffer> Buffer::hold(std::shared_ptr<const Allocator> allocator, const Stream& stream, void* data,
                                     size_t bytes) {
    try {
        fault_injection::check("allocate");  // the holder's own host allocation
        // one allocation for the Buffer and its reference count: arrays are
        // made often (create, copy, swap_axes), and each host allocation
        // costs
        return std::make_shared<Buffer>(Key{}, data, bytes, stream, allocator);
    } catch (...) {
        allocator->deallocate(stream, data, bytes);
        throw;
    }
}

std::shared_ptr<Buffer> Buffer::external(void* data, size_t bytes, DLDevice device,
                                         std::function<void()> release) {
    // `release` becomes ours only once the holder exists: if anything above
    // throws, the memory is still the caller's
    fault_injection::check("allocate");
    auto shared = std::make_shared<Buffer>(Key{}, data, bytes, Stream::default_for(device), nullptr);
    shared->release_ = std::move(release);
    return shared;
}

Buffer::Buffer(Key, void* data, size_t bytes, Stream stream, std::shared_ptr<const Allocator> allocator)
    : data_(data), bytes_(bytes), device_(stream.device()), host_memory_(is_host_accessible(device_.device_type)),
      allocator_(std::move(allocator)), release_stream_(stream) {}

void Buffer::set_device_release_stream(const Stream& stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    release_stream_ = stream;
}

void Buffer::record_device_use(const Stream& stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stream == release_stream_) {
        return;  // the free is queued behind it anyway
    }
    const Backend& backend = memory_backend(stream.device().device_type);
    std::shared_ptr<const StreamMarker> marker;
    try {
        marker = backend.mark(stream);
    } catch (...) {
        // the work is queued and its marker could not be made: wait for it
        // here, the last resort, or never free the memory
        try {
            backend.synchronize(stream);
        } catch (...) {
            kept_forever_ = true;
        }
        throw;
    }
    for (auto& use : uses_) {
        if (use.first == stream) {
            // the newest mark covers the older ones; a stream capturing a
            // graph makes none, and the earlier real one must stay
            if (marker != nullptr) {
                use.second = std::move(marker);
            }
            return;
        }
    }
    uses_.emplace_back(stream, std::move(marker));
    has_uses_.store(true, std::memory_order_release);
}

void Buffer::order_write_after_uses(const Stream& stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    bool all_ordered = true;
    for (const auto& use : uses_) {
        if (use.first == stream) {
            continue;  // queued before the write on its own stream
        }
        if (use.second == nullptr) {
            all_ordered = false;  // a use inside a capture: only the free can wait for it (after the graph)
            continue;
        }
        const Backend& backend = memory_backend(use.first.device().device_type);
        if (stream.is_none()) {
            backend.synchronize(*use.second);  // a host writer: the host waits, for these reads only
        } else {
            backend.wait(stream, *use.second);
        }
    }
    if (stream == release_stream_ && all_ordered) {
        uses_.clear();
        has_uses_.store(false, std::memory_order_release);
    }
}

void Buffer::mark_writable_pointer_escaped() noexcept {
    escaped_.store(true, std::memory_order_release);
}

bool Buffer::writable_pointer_escaped() const noexcept {
    return escaped_.load(std::memory_order_acquire);
}

namespace {

// Everything a buffer needs to give its memory back, so that the work can
// outlive the Buffer when it has to wait for a graph capture to end.
struct GiveBack {
    void* data;
    size_t bytes;
    std::shared_ptr<const Allocator> allocator;  // nullptr: external memory
    std::function<void()> release;
    Stream stream;
    std::vector<std::pair<Stream, std::shared_ptr<const StreamMarker>>> uses;

    void operator()() noexcept {
        // the per-thread stream of another thread can not be named here: the
        // legacy stream waits for it (and for every other blocking stream)
        try {
            stream = stream.usable_here();
        } catch (...) {
        }
        const Backend* backend = nullptr;
        try {
            backend = &memory_backend(stream.device().device_type);
            for (const auto& use : uses) {
                if (use.second != nullptr) {
                    backend->wait(stream, *use.second);
                }
            }
        } catch (const DeviceFault&) {
            return;  // nothing runs on the device any more, nothing can be freed: reported once
        } catch (const std::exception& error) {
            // Could not order the free after another stream's use (a runtime
            // failure): waiting on the host is the only safe way left -- for
            // the markers, never the streams, which their owners may have
            // destroyed since
            std::fprintf(stderr, "mtsarray: %s; waiting for the device before freeing memory\n", error.what());
            for (const auto& use : uses) {
                try {
                    if (backend != nullptr && use.second != nullptr) {
                        backend->synchronize(*use.second);
                    }
                } catch (...) {
                }
            }
        }

        if (allocator != nullptr) {
            allocator->deallocate(stream, data, bytes);
            return;
        }
        if (!release) {
            return;
        }
        if (stream.is_none() || backend == nullptr) {
            release();
            return;
        }
        try {
            backend->release_after(stream, std::move(release));
        } catch (const DeviceFault&) {
            return;  // the device may never finish with the memory: kept from its owner
        } catch (const std::exception& error) {
            // release_after leaves `release` with us when it fails
            std::fprintf(stderr, "mtsarray: %s; waiting for the device before releasing memory\n", error.what());
            try {
                backend->synchronize(stream);
            } catch (...) {
            }
            release();
        }
    }
};

}  // namespace

Buffer::~Buffer() {
    // no lock: the last holder is gone, nobody else can reach this buffer
    if (kept_forever_) {
        std::fprintf(stderr, "mtsarray: %zu bytes on %s:%d are never freed: work queued on them could not be "
                             "ordered before the free\n",
                     bytes_, device_type_name(device_.device_type), device_.device_id);
        return;
    }
    if (allocator_ != nullptr && release_stream_.is_none() && uses_.empty()) {
        // host memory (the common case): nothing to wait for
        allocator_->deallocate(release_stream_, data_, bytes_);
        return;
    }
    GiveBack give_back{data_, bytes_, std::move(allocator_), std::move(release_), release_stream_, std::move(uses_)};
    if (release_stream_.is_none()) {
        give_back();
        return;
    }
    try {
        std::function<void()> work = std::move(give_back);
        const Stream release = release_stream_.usable_here();
        if (!memory_backend(release.device().device_type).defer_while_capturing(release, work)) {
            work();
        }
    } catch (const DeviceFault&) {
        // after a device fault nothing is given back (reported once)
    } catch (const std::exception& error) {
        std::fprintf(stderr, "mtsarray: %s; memory of a destroyed array was not given back\n", error.what());
    }
}

}  // namespace mtsarray::detail
