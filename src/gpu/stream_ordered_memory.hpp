#pragma once
// StreamOrderedPool<Runtime>: mtsarray's stream-ordered memory pool of one
// device, and StreamOrderedFree, a scope's free of one of its allocations.
//
// The pool keeps the memory freed into it (release threshold: everything):
// the device's default pool gives memory back to the driver at every
// synchronisation, which makes every allocation after it pay the full price.
// Other libraries' pools are left alone; trim() gives ours back.
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
// Traits used: PoolHandle, create_pool, trim_pool, allocate_from_pool,
// free_async (gpu_backend.hpp).

#include <cstddef>
#include <mutex>

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

    /// `bytes` (> 0) of device memory usable in `stream`'s order. Throws
    /// OutOfMemory / Error.
    void* allocate(size_t bytes, StreamHandle stream) {
        const auto pool = handle();
        RelaxedCaptureMode<Runtime> relaxed;
        return Runtime::allocate_from_pool(bytes, pool, stream);
    }

    /// Frees `data` once the work queued on `stream` so far is done;
    /// failures are reported on stderr.
    static void free(void* data, StreamHandle stream) noexcept {
        RelaxedCaptureMode<Runtime> relaxed;
        Runtime::free_async(data, stream);
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
            pool_ = Runtime::create_pool(device_);
        });
        return pool_;
    }

    int device_;
    std::once_flag created_;
    typename Runtime::PoolHandle pool_{};
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
