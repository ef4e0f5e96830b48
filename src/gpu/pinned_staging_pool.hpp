#pragma once
// Page-locked host buffers for host -> device uploads that must not block
// the host: move_data tables too large for kernel parameters, and small
// copy_from_host calls whose source the caller may reuse at once.
//
// A copy from page-locked memory is truly asynchronous, so the host must not
// rewrite a buffer before the copy that reads it has run. Each buffer
// carries an event recorded after its last copy; `acquire` only hands out a
// buffer whose event has completed (queried, never waited on, in the
// Relaxed capture mode: runtime_calls.hpp). Such an event is never recorded
// on a stream capturing a graph: it could not be queried again
// (cudaErrorCapturedEvent). A graph that reads a buffer at every replay
// owns it instead (acquire_for_graph) and gives it back, unused, with the
// graph.
//
// Allocating and freeing page-locked memory synchronise the device: they
// never happen on the caller's thread. When no buffer is free (the pool is
// cold, or every buffer is still read by a copy in flight), `acquire`
// hands out plain host memory for this once (released in stream order, like
// a buffer) and asks the deferred-work thread to add a page-locked buffer to
// the pool; idle buffers beyond `retained_bytes_limit` are freed there too,
// never with the pool's lock held. Written against the runtime traits of
// gpu_backend.hpp; thread-safe; one pool per device (the events belong to
// one device, the caller makes it current).

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "gpu/capture_mode.hpp"
#include "gpu/deferred_work.hpp"
#include "gpu/device_guard.hpp"
#include "gpu/event_pool.hpp"
#include "gpu/runtime_calls.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class PinnedStagingPool {
    struct Buffer;

public:
    using Event = typename Runtime::EventHandle;
    using StreamHandle = typename Runtime::StreamHandle;

    /// Idle bytes kept for reuse; more are freed when the pool grows in
    /// the background (grow_later). A buffer made for a graph
    /// (acquire_for_graph, during a capture, where freeing page-locked
    /// memory is forbidden) is added without trimming, and comes back idle
    /// when its graph is gone: a program that uploads only inside graphs
    /// keeps, besides this limit, at most the buffers its graphs held at
    /// one time (later graphs reuse them first). Documented in the guide
    /// "GPU use inside training loops".
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
        /// False for the plain host memory given when no page-locked
        /// buffer was free: fine for a copy queued now, never for a graph
        /// node that reads it at every replay.
        bool page_locked() const noexcept { return buffer_->host == nullptr; }

    private:
        friend class PinnedStagingPool;
        Lease(PinnedStagingPool* pool, Buffer* buffer) : pool_(pool), buffer_(buffer) {}
        PinnedStagingPool* pool_;
        Buffer* buffer_;
    };

    /// `device`: the pool's device; `deferred` and `events` outlive the pool.
    PinnedStagingPool(int device, DeferredWork<Runtime>& deferred, EventPool<Runtime>& events)
        : device_(device), deferred_(deferred), events_(events) {}
    PinnedStagingPool(const PinnedStagingPool&) = delete;
    PinnedStagingPool& operator=(const PinnedStagingPool&) = delete;
    ~PinnedStagingPool() {
        for (auto& buffer : buffers_) {
            release_buffer(*buffer);
        }
    }

    /// A buffer of at least `bytes` bytes that no queued copy still reads:
    /// page-locked, or plain host memory when no page-locked buffer is free
    /// (then one is added in the background).
    Lease acquire(size_t bytes) {
        const size_t capacity = capacity_for(bytes);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (Buffer* best = best_free_locked(bytes)) {
                best->leased = true;
                return Lease(this, best);
            }
            // no page-locking on the caller's thread: the pool grows in the
            // background, this upload goes through plain host memory
            grow_later(capacity);
        }
        auto overflow = std::make_unique<Buffer>();
        overflow->capacity = capacity;
        overflow->host.reset(new unsigned char[capacity]);
        overflow->data = overflow->host.get();
        overflow->leased = true;
        return Lease(this, overflow.release());
    }

    /// A page-locked buffer of at least `bytes` bytes that no queued copy
    /// still reads, or none (then one is added in the background, and the
    /// caller copies without it).
    std::unique_ptr<Lease> try_acquire(size_t bytes) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (Buffer* best = best_free_locked(bytes)) {
            best->leased = true;
            return std::unique_ptr<Lease>(new Lease(this, best));
        }
        grow_later(capacity_for(bytes));
        return nullptr;
    }

    /// A page-locked buffer of at least `bytes` bytes for a graph, which
    /// reads it at every replay: a free one of the pool, or, when none is,
    /// one page-locked now on the calling thread (in the Relaxed capture
    /// mode: the one host wait of a capture on a cold pool). The graph
    /// gives it back unused (the Lease's destruction) once it is gone.
    Lease acquire_for_graph(size_t bytes) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (Buffer* best = best_free_locked(bytes)) {
                best->leased = true;
                return Lease(this, best);
            }
        }
        const size_t capacity = capacity_for(bytes);
        std::unique_ptr<Buffer> buffer;
        {
            RelaxedCaptureMode<Runtime> relaxed;
            buffer = make_buffer(capacity);
        }
        buffer->leased = true;
        Buffer* leased = buffer.get();
        std::lock_guard<std::mutex> lock(mutex_);
        retained_bytes_ += capacity;
        buffers_.push_back(std::move(buffer));
        return Lease(this, leased);
    }

    /// Returns the buffer; it is reused once the work queued on `stream` so
    /// far (the copy reading it) is done. `stream` is not capturing a graph
    /// (a graph owns its buffers: acquire_for_graph). If recording the event
    /// fails the buffer is retired rather than risk overwriting data in
    /// flight.
    void release_after(Lease&& lease, StreamHandle stream) {
        Buffer* buffer = lease.buffer_;
        lease.pool_ = nullptr;
        if (buffer->host != nullptr) {
            // plain host memory: freed by the deferred thread once the copy ran
            std::unique_ptr<Buffer> owned(buffer);
            auto event = events_.acquire();
            Runtime::record_event(event.get(), stream);
            std::shared_ptr<Buffer> shared(std::move(owned));
            deferred_.after_event(device_, std::move(event), [shared]() {});
            return;
        }
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
        std::unique_ptr<unsigned char[]> host;  // plain host memory, not in the pool
    };

    /// The size of the buffer made for `bytes`: a power of two times
    /// min_buffer_bytes.
    static size_t capacity_for(size_t bytes) {
        size_t capacity = min_buffer_bytes;
        while (capacity < bytes) {
            capacity *= 2;
        }
        return capacity;
    }

    /// The smallest free buffer of at least `bytes` whose last copy is
    /// done, or null. Called with the lock.
    Buffer* best_free_locked(size_t bytes) {
        Buffer* best = nullptr;
        for (auto& buffer : buffers_) {
            if (!buffer->leased && !buffer->retired && buffer->capacity >= bytes &&
                (best == nullptr || buffer->capacity < best->capacity) &&
                event_done_outside_capture<Runtime>(buffer->event)) {
                best = buffer.get();
            }
        }
        return best;
    }

    void give_back(Buffer* buffer) noexcept {
        if (buffer->host != nullptr) {
            delete buffer;  // returned unused
            return;
        }
        std::lock_guard<std::mutex> lock(mutex_);
        buffer->leased = false;
    }

    /// A page-locked buffer with its event (the caller made the device current).
    static std::unique_ptr<Buffer> make_buffer(size_t capacity) {
        auto buffer = std::make_unique<Buffer>();
        buffer->capacity = capacity;
        buffer->event = Runtime::create_event();
        try {
            buffer->data = Runtime::allocate_pinned(capacity);
        } catch (...) {
            Runtime::destroy_event(buffer->event);
            throw;
        }
        return buffer;
    }

    /// Adds a buffer of `capacity` bytes from the deferred-work thread (at
    /// most two on the way). Called with the lock.
    void grow_later(size_t capacity) {
        if (growing_ >= 2) {
            return;
        }
        growing_++;
        try {
            deferred_.soon([this, capacity]() {
                std::unique_ptr<Buffer> buffer;
                try {
                    DeviceGuard<Runtime> guard(device_);
                    buffer = make_buffer(capacity);
                } catch (...) {
                    std::lock_guard<std::mutex> lock(mutex_);
                    growing_--;
                    throw;
                }
                std::vector<std::unique_ptr<Buffer>> idle;
                {
                    std::lock_guard<std::mutex> lock(mutex_);
                    growing_--;
                    idle = trim_for(capacity);
                    retained_bytes_ += capacity;
                    buffers_.push_back(std::move(buffer));
                }
                for (auto& old : idle) {
                    release_buffer(*old);  // on this (deferred) thread, without the lock
                }
            });
        } catch (...) {
            growing_--;  // no room to ask: the next shortage asks again
        }
    }

    /// Takes idle, completed buffers out of the pool until `incoming` more
    /// bytes fit in retained_bytes_limit (or nothing else can go); the
    /// caller frees them without the lock. Called with the lock.
    std::vector<std::unique_ptr<Buffer>> trim_for(size_t incoming) {
        std::vector<std::unique_ptr<Buffer>> idle;
        for (size_t i = 0; i < buffers_.size() && retained_bytes_ + incoming > retained_bytes_limit;) {
            Buffer& buffer = *buffers_[i];
            if (!buffer.leased && !buffer.retired && event_done_outside_capture<Runtime>(buffer.event)) {
                retained_bytes_ -= buffer.capacity;
                idle.push_back(std::move(buffers_[i]));
                buffers_.erase(buffers_.begin() + static_cast<std::ptrdiff_t>(i));
            } else {
                i++;
            }
        }
        return idle;
    }

    static void release_buffer(Buffer& buffer) noexcept {
        if (buffer.retired) {
            return;
        }
        Runtime::free_pinned(buffer.data);
        Runtime::destroy_event(buffer.event);
    }

    int device_;
    DeferredWork<Runtime>& deferred_;
    EventPool<Runtime>& events_;
    std::mutex mutex_;
    std::vector<std::unique_ptr<Buffer>> buffers_;
    size_t retained_bytes_ = 0;
    int growing_ = 0;  // buffers the deferred thread is allocating
};

}  // namespace gpu
}  // namespace mtsarray::detail
