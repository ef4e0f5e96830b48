#pragma once
// PreparedMovePlan<Runtime>: a reusable move plan's form on the GPU
// backend (prepare_move_plan), its table in stream-ordered device memory,
// shared with the graphs that captured an execution of it and freed after
// the last use of any of them, without blocking any caller. Written against
// the runtime traits of gpu_backend.hpp.

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "base/backend.hpp"
#include "base/stream.hpp"
#include "base/thread_token.hpp"
#include "gpu/deferred_work.hpp"
#include "gpu/device_guard.hpp"
#include "gpu/event_pool.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/runtime_calls.hpp"
#include "gpu/stream_ordered_memory.hpp"

namespace mtsarray::detail {
namespace gpu {

/// A prepared plan's table in stream-ordered device memory, shared by
/// the plan and by the graphs that captured an execution of it: freed by
/// the last of them to go, on the deferred-work thread (a graph's user
/// object is released on a thread of the runtime, which must make no
/// runtime call), once every use of it is done -- on the device's own
/// stream, which no caller's stream orders.
template <class Runtime> struct SharedDeviceTable {
    using StreamHandle = typename Runtime::StreamHandle;

    SharedDeviceTable(int device_id, void* memory, StreamHandle free_on) noexcept
        : device(device_id), data(memory), free_stream(free_on) {}
    SharedDeviceTable(const SharedDeviceTable&) = delete;
    SharedDeviceTable& operator=(const SharedDeviceTable&) = delete;
    ~SharedDeviceTable() {
        try {
            DeviceGuard<Runtime> guard(device);
            StreamOrderedPool<Runtime>::free(data, free_stream);
        } catch (...) {
            std::fprintf(stderr, "mtsarray: %s move plan leaked its table\n", Runtime::name);
        }
    }
    int device;
    void* data;
    StreamHandle free_stream;
};
/// One owner's reference to a SharedDeviceTable, dropped on the
/// deferred-work thread.
template <class Runtime> struct TableReference {
    DeferredWork<Runtime>* deferred;
    std::shared_ptr<SharedDeviceTable<Runtime>> table;

    /// Queues the drop of the reference (and so, for the last one, the
    /// free of the table). Makes no runtime call: it is the release of
    /// a graph's user object too.
    static void drop(void* object) {
        auto* reference = static_cast<TableReference*>(object);
        try {
            reference->deferred->soon([reference]() { delete reference; });
        } catch (...) {
            std::fprintf(stderr, "mtsarray: %s move plan leaked its table\n", Runtime::name);
        }
    }
};

/// A reusable plan's table in device memory (prepare_move_plan). Each
/// execution outside a capture re-records the plan's event for its
/// stream; the destructor gives up the plan's share of the table on the
/// deferred-work thread once every such event has completed, i.e. after
/// the last queued execution, without blocking the caller. A graph that
/// captured an execution holds a share of its own (capture_move_plan).
template <class Runtime> class PreparedMovePlan final : public BackendMovePlan {
public:
    using StreamHandle = typename Runtime::StreamHandle;
    using EventLease = typename EventPool<Runtime>::Lease;

    /// `owner`: the backend that made the plan; `deferred` and `events`
    /// (the device's) outlive the plan.
    PreparedMovePlan(const Backend& owner, DeferredWork<Runtime>& deferred, EventPool<Runtime>& events,
                     int device_id, uint64_t entry_count)
        : backend(&owner), device(device_id), entries(entry_count), deferred_(deferred), events_(events) {}
    PreparedMovePlan(const PreparedMovePlan&) = delete;
    PreparedMovePlan& operator=(const PreparedMovePlan&) = delete;

    ~PreparedMovePlan() override {
        if (share_ == nullptr) {
            return;
        }
        std::vector<EventLease> pending;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto& use : uses_) {
                pending.push_back(std::move(use.event));
            }
            uses_.clear();
        }
        if (ready != nullptr) {
            pending.push_back(std::move(*ready));
        }
        try {
            drop_after(deferred_, device, share_, std::move(pending));
        } catch (...) {
            std::fprintf(stderr, "mtsarray: %s move plan leaked its table\n", Runtime::name);
        }
    }

    /// Takes ownership of the device memory of the table (allocated on
    /// `stream`), to be freed on `free_stream` after its last use.
    void own_table(void* data, StreamHandle stream, StreamHandle free_stream) {
        std::unique_ptr<SharedDeviceTable<Runtime>> owned;
        try {
            owned = std::make_unique<SharedDeviceTable<Runtime>>(device, data, free_stream);
        } catch (...) {
            StreamOrderedPool<Runtime>::free(data, stream);
            throw;
        }
        table = static_cast<MoveTableEntry*>(data);
        share_ = new TableReference<Runtime>{&deferred_, std::shared_ptr<SharedDeviceTable<Runtime>>(std::move(owned))};
    }

    /// Whether the upload of the table is known to be done; queries
    /// the `ready` event, never waits for it.
    bool upload_done() const {
        if (uploaded_.load(std::memory_order_acquire)) {
            return true;
        }
        const bool done = event_done_outside_capture<Runtime>(ready->get());
        if (done) {
            uploaded_.store(true, std::memory_order_release);
        }
        return done;
    }

    /// Makes `stream` (not capturing) wait for the upload of the table,
    /// until it is known to be done.
    void wait_until_uploaded(StreamHandle stream) const {
        if (!upload_done()) {
            Runtime::stream_wait_event(stream, ready->get());
        }
    }

    /// Whether a capture may read the device table: once its upload is
    /// known done (a graph can not wait for an event recorded outside
    /// it), and where a graph can own a share of it (a user object).
    bool capturable() const {
        if constexpr (Runtime::has_user_objects) {
            return upload_done();
        } else {
            return false;
        }
    }

    /// A new share of the device table, for a graph to own.
    std::unique_ptr<TableReference<Runtime>> share() const {
        return std::make_unique<TableReference<Runtime>>(TableReference<Runtime>{share_->deferred, share_->table});
    }

    /// Records that work queued on `stream` reads the table.
    void record_use(const Stream& stream, StreamHandle handle) const {
        const uint64_t thread = stream.is_per_thread() ? this_thread_token() : 0;
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& use : uses_) {
            if (use.stream == handle && use.thread == thread) {
                Runtime::record_event(use.event.get(), handle);
                return;
            }
        }
        Use use{handle, thread, events_.acquire()};
        Runtime::record_event(use.event.get(), handle);
        uses_.push_back(std::move(use));
    }

    const Backend* backend;
    int device;
    uint64_t entries;
    MoveTableEntry* table = nullptr;
    MoveLaunchClasses classes;
    bool narrow = false;
    uint64_t input_row_stride = 0;
    uint64_t output_row_stride = 0;
    std::unique_ptr<EventLease> ready;

private:
    struct Use {
        StreamHandle stream;
        uint64_t thread;  // per-thread default streams: one per thread (this_thread_token)
        EventLease event;
    };
    /// Drops the plan's share of the table once every event of
    /// `pending` has completed, one after the other on the
    /// deferred-work thread.
    static void drop_after(DeferredWork<Runtime>& deferred, int device, TableReference<Runtime>* share,
                           std::vector<EventLease>&& pending) {
        if (pending.empty()) {
            TableReference<Runtime>::drop(share);
            return;
        }
        EventLease last = std::move(pending.back());
        pending.pop_back();
        auto rest = std::make_shared<std::vector<EventLease>>(std::move(pending));
        DeferredWork<Runtime>* queue = &deferred;
        deferred.after_event(device, std::move(last), [queue, device, share, rest]() {
            drop_after(*queue, device, share, std::move(*rest));
        });
    }

    DeferredWork<Runtime>& deferred_;
    EventPool<Runtime>& events_;
    TableReference<Runtime>* share_ = nullptr;  // the plan's; a raw pointer, so that only the deferred thread drops it
    mutable std::mutex mutex_;
    mutable std::vector<Use> uses_;
    mutable std::atomic<bool> uploaded_{false};
};
}  // namespace gpu
}  // namespace mtsarray::detail
