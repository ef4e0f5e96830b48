#pragma once
// Page-locked host buffers for host -> device uploads that must not block
// the host: move_data tables too large for kernel parameters, and small
// copy_from_host calls whose source the caller may reuse at once.
//
// A copy from page-locked memory is truly asynchronous, so the host must not
// rewrite a buffer before the copy that reads it has run. Each buffer
// carries an event recorded after its last copy; `acquire` only hands out a
// buffer whose event has completed (queried, never waited on) and otherwise
// allocates a new one. The host therefore never blocks on the device here,
// and the pool grows to the number of uploads in flight, trimming idle
// buffers beyond `retained_bytes_limit`. Written against the runtime traits
// of gpu_backend.hpp; thread-safe; one pool per device (the events belong to
// one device, the caller makes it current).

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class PinnedStagingPool {
    struct Buffer;

public:
    using Event = typename Runtime::EventHandle;
    using StreamHandle = typename Runtime::StreamHandle;

    /// Idle bytes kept for reuse; more are freed when the pool grows.
    static constexpr size_t retained_bytes_limit = size_t(64) << 20;
    /// Smallest buffer allocated, so that small uploads share buffers.
    static constexpr size_t min_buffer_bytes = size_t(64) << 10;

    /// Exclusive use of one buffer until `release_after` (or destruction,
    /// which returns it as unused).
    class Lease {
    public:
        Lease(Lease&& other) noexcept
            : pool_(std::exchange(other.pool_, nullptr)), buffer_(other.buffer_) {}
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        Lease& operator=(Lease&&) = delete;
        ~Lease() {
            if (pool_ != nullptr) {
                pool_->give_back(buffer_);
            }
        }
        void* data() const noexcept { return buffer_->data; }

    private:
        friend class PinnedStagingPool;
        Lease(PinnedStagingPool* pool, Buffer* buffer) : pool_(pool), buffer_(buffer) {}
        PinnedStagingPool* pool_;
        Buffer* buffer_;
    };

    PinnedStagingPool() = default;
    PinnedStagingPool(const PinnedStagingPool&) = delete;
    PinnedStagingPool& operator=(const PinnedStagingPool&) = delete;
    ~PinnedStagingPool() {
        for (auto& buffer : buffers_) {
            release_buffer(*buffer);
        }
    }

    /// A buffer of at least `bytes` bytes that no queued copy still reads.
    /// Throws OutOfMemory (from the runtime) when a new buffer is needed and
    /// can not be allocated.
    Lease acquire(size_t bytes) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            Buffer* best = nullptr;
            for (auto& buffer : buffers_) {
                if (!buffer->leased && buffer->capacity >= bytes &&
                    (best == nullptr || buffer->capacity < best->capacity) &&
                    Runtime::event_done(buffer->event)) {
                    best = buffer.get();
                }
            }
            if (best != nullptr) {
                best->leased = true;
                return Lease(this, best);
            }
        }

        // Allocate outside the lock: page-locking memory is slow.
        size_t capacity = min_buffer_bytes;
        while (capacity < bytes) {
            capacity *= 2;
        }
        auto buffer = std::make_unique<Buffer>();
        buffer->capacity = capacity;
        buffer->event = Runtime::create_event();
        try {
            buffer->data = Runtime::allocate_pinned(capacity);
        } catch (...) {
            Runtime::destroy_event(buffer->event);
            throw;
        }
        buffer->leased = true;

        std::lock_guard<std::mutex> lock(mutex_);
        trim_for(capacity);
        retained_bytes_ += capacity;
        buffers_.push_back(std::move(buffer));
        return Lease(this, buffers_.back().get());
    }

    /// Returns the buffer; it is reused once the work queued on `stream` so
    /// far (the copy reading it) is done. If recording the event fails the
    /// buffer is retired rather than risk overwriting data in flight.
    void release_after(Lease&& lease, StreamHandle stream) {
        Buffer* buffer = lease.buffer_;
        lease.pool_ = nullptr;
        try {
            Runtime::record_event(buffer->event, stream);
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            buffer->retired = true;
            throw;
        }
        give_back(buffer);
    }

private:
    struct Buffer {
        void* data = nullptr;
        size_t capacity = 0;
        Event event{};
        bool leased = false;
        bool retired = false;  // never reused nor freed: a copy may still read it
    };

    void give_back(Buffer* buffer) noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        buffer->leased = false;
    }

    /// Frees idle, completed buffers until `incoming` more bytes fit in
    /// retained_bytes_limit (or nothing else can go). Called with the lock.
    void trim_for(size_t incoming) {
        for (size_t i = 0; i < buffers_.size() && retained_bytes_ + incoming > retained_bytes_limit;) {
            Buffer& buffer = *buffers_[i];
            if (!buffer.leased && !buffer.retired && Runtime::event_done(buffer.event)) {
                retained_bytes_ -= buffer.capacity;
                release_buffer(buffer);
                buffers_.erase(buffers_.begin() + static_cast<std::ptrdiff_t>(i));
            } else {
                i++;
            }
        }
    }

    static void release_buffer(Buffer& buffer) noexcept {
        if (buffer.retired) {
            return;
        }
        Runtime::free_pinned(buffer.data);
        Runtime::destroy_event(buffer.event);
    }

    std::mutex mutex_;
    std::vector<std::unique_ptr<Buffer>> buffers_;
    size_t retained_bytes_ = 0;
};

}  // namespace gpu
}  // namespace mtsarray::detail
