#pragma once
// StreamOrderedPool<Runtime>: mtsarray's stream-ordered memory pool of one
// device, and StreamOrderedFree, a scope's free of one of its allocations.
//
// Memory shared with other libraries. The pool keeps the memory freed into
// it up to its release threshold across synchronisations (the device's
// default pool, threshold 0, gives it all back at every one, which makes
// every allocation after it pay the full price), and gives what it keeps
// beyond back at the next stream, event or device synchronisation, anyone's
// (CUDA Runtime API, cudaMemPoolAttrReleaseThreshold). The default
// threshold, 1/16 of the device, leaves the rest of the
// device to another library's allocator (PyTorch's keeps everything it
// frees and trims its own cache only when it runs out), which would starve
// beside a pool that keeps everything; the program may set it
// (set_release_threshold). An allocation that does not fit gives the
// pool's cached memory back (trim) and tries once more before failing:
// mtsarray never starves itself either. trim() gives everything back.
//
// Capture mode. Pool calls and stream-ordered allocation and free are
// "potentially unsafe" calls (CUDA Runtime API,
// cudaThreadExchangeStreamCaptureMode): while any thread captures a graph in
// the Global mode (torch.cuda.graph's default), such a call from another
// thread in the default mode fails with cudaErrorStreamCaptureUnsupported
// and invalidates that capture -- every mtsarray call of a data-loading
// thread would fail and break the training thread's graph. They are made
// in the Relaxed mode (capture_mode.hpp), as PyTorch's allocator does: on a
// stream that is not capturing they touch no capture, and on a capturing
// stream the mode does not matter (the call is captured as a node), though
// mtsarray queues none there (check_not_capturing).
//
// Traits used: PoolHandle, create_pool, set_release_threshold, trim_pool,
// device_memory_bytes, allocate_from_pool, free_async, grant_pool_access
// (runtime_traits.md).

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "base/error.hpp"

#include "gpu/capture_mode.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class StreamOrderedPool {
public:
    using StreamHandle = typename Runtime::StreamHandle;

    /// The pool of `device`, created on first use (the caller has made the
    /// device current then).
    explicit StreamOrderedPool(int device) : device_(device) {}
    StreamOrderedPool(const StreamOrderedPool&) = delete;
    StreamOrderedPool& operator=(const StreamOrderedPool&) = delete;

    /// The default release threshold, as a fraction of the device (1/16):
    /// a fixed cap (256 MiB was tried) made every step that frees an array
    /// larger than it map its memory again (create, copy and swap_axes of
    /// 763 MiB fell from 93-100 % to 30-39 % of memset / D2D on an H100).
    static constexpr uint64_t default_release_threshold_fraction = 16;

    /// `bytes` (> 0) of device memory usable in `stream`'s order. When it
    /// does not fit, the pool's cached memory goes back and the allocation
    /// is tried once more. Throws OutOfMemory / Error.
    void* allocate(size_t bytes, StreamHandle stream) {
        const auto pool = handle();
        RelaxedCaptureMode<Runtime> relaxed;
        try {
            return Runtime::allocate_from_pool(bytes, pool, stream);
        } catch (const OutOfMemory&) {
            Runtime::trim_pool(pool);
        }
        try {
            return Runtime::allocate_from_pool(bytes, pool, stream);
        } catch (const OutOfMemory& error) {
            throw OutOfMemory(std::string(error.what()) +
                              " (after giving the memory mtsarray kept cached on the device back)");
        }
    }

    /// The memory the pool keeps cached across synchronisations (the
    /// device is current).
    uint64_t release_threshold() {
        (void)handle();
        return threshold_.load();
    }

    /// Sets the release threshold (the device is current); memory kept
    /// beyond it goes back at the next synchronisation.
    void set_release_threshold(uint64_t bytes) {
        const auto pool = handle();
        std::lock_guard<std::mutex> lock(threshold_mutex_);
        RelaxedCaptureMode<Runtime> relaxed;
        Runtime::set_release_threshold(pool, bytes);
        threshold_.store(bytes);
    }

    /// Frees `data` once the work queued on `stream` so far is done;
    /// failures are reported on stderr.
    static void free(void* data, StreamHandle stream) noexcept {
        RelaxedCaptureMode<Runtime> relaxed;
        Runtime::free_async(data, stream);
    }

    /// Lets work on `device` read and write the pool's memory, what it
    /// holds now and what it gives later (peer_access.hpp; the pool's
    /// device is current).
    void grant_access(int device) {
        const auto pool = handle();
        RelaxedCaptureMode<Runtime> relaxed;
        Runtime::grant_pool_access(pool, device);
    }

    /// Gives the memory the pool keeps back to the driver.
    void trim() {
        const auto pool = handle();
        RelaxedCaptureMode<Runtime> relaxed;
        Runtime::trim_pool(pool);
    }

    /// The address every zero-byte allocation of the device gets: a real
    /// (small) allocation of the device, so that empty arrays export a
    /// genuine device pointer; made once, never freed.
    void* zero_size_allocation(StreamHandle stream) {
        std::lock_guard<std::mutex> lock(zero_size_mutex_);
        if (zero_size_ == nullptr) {
            zero_size_ = allocate(256, stream);
        }
        return zero_size_;
    }
    bool is_zero_size_allocation(const void* data) {
        std::lock_guard<std::mutex> lock(zero_size_mutex_);
        return data == zero_size_;
    }

private:
    typename Runtime::PoolHandle handle() {
        std::call_once(created_, [&] {
            RelaxedCaptureMode<Runtime> relaxed;
            const uint64_t threshold = Runtime::device_memory_bytes(device_) / default_release_threshold_fraction;
            pool_ = Runtime::create_pool(device_);
            Runtime::set_release_threshold(pool_, threshold);
            threshold_.store(threshold);
        });
        return pool_;
    }

    int device_;
    std::once_flag created_;
    typename Runtime::PoolHandle pool_{};
    std::mutex threshold_mutex_;  // one setter at a time: the pool's attribute and threshold_ agree
    std::atomic<uint64_t> threshold_{0};
    std::mutex zero_size_mutex_;
    void* zero_size_ = nullptr;
};

/// Frees a stream-ordered allocation on scope exit, after whatever was
/// queued on the stream before (including on the error path).
template <class Runtime> class StreamOrderedFree {
public:
    using StreamHandle = typename Runtime::StreamHandle;

    StreamOrderedFree(void* data, StreamHandle stream) : data_(data), stream_(stream) {}
    StreamOrderedFree(const StreamOrderedFree&) = delete;
    StreamOrderedFree& operator=(const StreamOrderedFree&) = delete;
    ~StreamOrderedFree() { StreamOrderedPool<Runtime>::free(data_, stream_); }

private:
    void* data_;
    StreamHandle stream_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
