#pragma once
// SimulatedGpu: a GPU backend (mtsarray::detail::Backend) that runs on the
// CPU, for testing the dispatch layer's stream contract on machines without
// a GPU. Installed as the CUDA backend of the process (kDLCUDA arrays then
// live in its "device memory", which is host memory the CPU backend never
// touches), it behaves like a real device where it matters:
//
//  - every stream (1 legacy, 2 per-thread, user streams made by
//    create_stream) is a thread running its queue in order; the calls that
//    queue work return at once, nothing is implicitly synchronised (stricter
//    than CUDA's legacy stream, so ordering mistakes show);
//  - events, stream waits and host synchronisation as in CUDA;
//  - `hold(stream)` queues a "slow kernel" that keeps the stream busy until
//    the gate it returns is opened: a test can check that an operation
//    returned while it was still pending, and `host_waits()` counts every
//    host synchronisation (one that would wait for a held stream fails after
//    a timeout instead of hanging the test);
//  - frees are queued on their stream and poison the memory; every queued
//    copy checks, when it runs, that the memory it touches is still
//    allocated, so a free ordered before a read on another stream is caught
//    (`violations()`);
//  - graph capture: `begin_capture(stream)` makes the stream record what is
//    queued on it instead of running it, `end_capture` returns the recorded
//    work and `launch` replays it.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/backend.hpp"

namespace mtsarray_test {

class SimulatedGpu final : public mtsarray::detail::Backend {
public:
    using Stream = mtsarray::detail::Stream;

    explicit SimulatedGpu(int device_count = 2);
    ~SimulatedGpu() override;
    SimulatedGpu(const SimulatedGpu&) = delete;
    SimulatedGpu& operator=(const SimulatedGpu&) = delete;

    // ---- what tests drive -----------------------------------------------------

    /// A new user stream of `device`: its DLPack stream number (> 2).
    int64_t create_stream(int device = 0);

    /// Keeps a stream busy until open() (or destruction of the gate).
    class Gate {
    public:
        Gate() = default;
        Gate(Gate&&) = default;
        Gate& operator=(Gate&&) = default;
        ~Gate() { open(); }
        void open();
        bool is_open() const;

    private:
        friend class SimulatedGpu;
        struct State;
        std::shared_ptr<State> state_;
    };
    /// Queues the slow kernel on `stream` (a DLPack number of `device`).
    Gate hold(int64_t stream, int device = 0);
    /// Queues `work` on a stream as a kernel of the test's own (a consumer
    /// reading an export, say); it runs in order with mtsarray's work.
    void enqueue(int64_t stream, int device, std::function<void()> work);

    /// Host synchronisations asked for so far (by mtsarray or the test).
    size_t host_waits() const { return host_waits_.load(); }
    /// Use of freed memory seen by queued work, in words.
    std::vector<std::string> violations() const;
    void clear_violations();
    /// Waits until every stream is idle and the deferred releases ran
    /// (does not count as a host wait).
    void drain();
    /// Bytes currently allocated by the simulated device (live allocations).
    size_t allocated_bytes() const;

    void begin_capture(int64_t stream, int device = 0);
    using Graph = std::vector<std::function<void()>>;
    Graph end_capture(int64_t stream, int device = 0);
    void launch(const Graph& graph, int64_t stream, int device = 0);

    // ---- Backend ---------------------------------------------------------------

    const char* name() const noexcept override { return "simulated-gpu"; }
    void check_device(DLDevice device) const override;
    bool available() const noexcept override { return true; }
    void* allocate(const Stream& stream, size_t bytes) const override;
    void deallocate(const Stream& stream, void* data, size_t bytes) const noexcept override;
    void fill(const Stream& stream, void* data, size_t count, const void* value, size_t element_size) const override;
    void copy(const Stream& stream, void* destination, const void* source, size_t bytes) const override;
    void move_data(const Stream& stream, void* output, const void* input, const Stream& input_stream,
                   const mtsarray::detail::MovePlan& plan) const override;
    void strided_copy(const Stream& stream, void* destination,
                      const mtsarray::detail::StridedView& source) const override;
    void copy_to_host(const Stream& stream, void* host_destination, const void* source, size_t bytes) const override;
    void copy_from_host(const Stream& stream, void* destination, const void* host_source,
                        size_t bytes) const override;
    void copy_peer(const Stream& stream, void* destination, DLDevice destination_device, const void* source,
                   size_t bytes) const override;
    void wait(const Stream& waiting, const Stream& producer) const override;
    void synchronize(const Stream& stream) const override;
    std::shared_ptr<const mtsarray::detail::StreamMarker> mark(const Stream& stream) const override;
    void wait(const Stream& waiting, const mtsarray::detail::StreamMarker& marker) const override;
    void release_after(const Stream& stream, std::function<void()>&& release) const override;
    void release_cached_memory(DLDevice) const override {}
    bool defer_while_capturing(const Stream& stream, std::function<void()>& work) const override;
    void check_not_capturing(const Stream& stream, const char* operation) const override;

private:
    class Queue;
    struct Event;
    struct Marker;

    Queue& queue(const Stream& stream) const;
    Queue& queue(int64_t number, int device) const;
    void check_live(const void* data, size_t bytes, const char* what) const;

    int device_count_;
    mutable std::mutex mutex_;  // guards the maps below
    mutable std::map<std::pair<int, int64_t>, std::unique_ptr<Queue>> default_queues_;
    mutable std::map<int64_t, std::unique_ptr<Queue>> user_queues_;
    mutable std::map<const void*, size_t> live_;       // allocation -> bytes
    mutable std::map<const void*, size_t> quarantine_;  // freed, kept poisoned
    mutable std::vector<std::string> violations_;
    mutable std::vector<std::pair<Queue*, std::function<void()>>> after_capture_;
    std::vector<std::unique_ptr<char[]>> zero_size_;  // one placeholder per device
    mutable std::atomic<size_t> host_waits_{0};

    // deferred releases run here, like the real backends' deferred-work thread
    std::unique_ptr<Queue> releases_;
};

/// Makes `gpu` the CUDA backend of the process for its lifetime.
class UseSimulatedGpu {
public:
    explicit UseSimulatedGpu(SimulatedGpu& gpu);
    ~UseSimulatedGpu();
    UseSimulatedGpu(const UseSimulatedGpu&) = delete;
    UseSimulatedGpu& operator=(const UseSimulatedGpu&) = delete;

private:
    const mtsarray::detail::Backend* previous_;
};

}  // namespace mtsarray_test
