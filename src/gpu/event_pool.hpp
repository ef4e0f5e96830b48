#pragma once
// Reusable events: for making one stream wait for another, and for the
// markers and deferred releases that keep an event recorded for a while.
//
// A stream wait captures the state of its event when it is queued, so an
// event can be recorded again as soon as the wait call has returned: events
// only need to be unique while a lease holds them, and a small free list
// replaces an event creation and destruction per use.
// Written against the runtime traits of gpu_backend.hpp; thread-safe.

#include <mutex>
#include <utility>
#include <vector>

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class EventPool {
public:
    using Event = typename Runtime::EventHandle;

    /// One event, returned to the pool when this goes out of scope.
    class Lease {
    public:
        Lease(EventPool& pool, Event event) : pool_(&pool), event_(event) {}
        Lease(Lease&& other) noexcept : pool_(other.pool_), event_(other.event_) { other.pool_ = nullptr; }
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        Lease& operator=(Lease&&) = delete;
        ~Lease() {
            if (pool_ != nullptr) {
                pool_->release(event_);
            }
        }
        Event get() const noexcept { return event_; }

    private:
        EventPool* pool_;
        Event event_;
    };

    EventPool() = default;
    EventPool(const EventPool&) = delete;
    EventPool& operator=(const EventPool&) = delete;
    ~EventPool() {
        for (Event event : idle_) {
            Runtime::destroy_event(event);
        }
    }

    /// An event of this pool's device (the caller has made it current when
    /// a new event must be created).
    Lease acquire() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!idle_.empty()) {
                Event event = idle_.back();
                idle_.pop_back();
                return Lease(*this, event);
            }
        }
        return Lease(*this, Runtime::create_event());
    }

private:
    void release(Event event) noexcept {
        try {
            std::lock_guard<std::mutex> lock(mutex_);
            idle_.push_back(event);
        } catch (...) {
            // Out of memory for the free list: give the event back instead.
            Runtime::destroy_event(event);
        }
    }

    std::mutex mutex_;
    std::vector<Event> idle_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
