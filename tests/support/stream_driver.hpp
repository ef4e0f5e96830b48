#pragma once
// StreamDriver: what the GPU stream tests (tests/gpu/streams_test.cpp,
// tests/gpu/no_host_block_test.cpp) do to the runtime under mtsarray's CUDA
// backend besides calling mtsarray: make streams, hold one busy, capture a
// graph, read device memory. Two implementations, chosen at run time by
// stream_driver(): the simulated runtime (support/simulated_runtime.hpp)
// when it serves kDLCUDA in this process (sim::in_use()), the CUDA runtime
// otherwise (support/cuda_stream_driver.cu, built with the CUDA backend
// only). One source of tests thus runs on every CI machine, on the
// simulation, and on a real GPU where there is one.
//
// Streams are named as mtsarray names them, by their DLPack number on a
// device: 1 the legacy default stream, 2 the calling thread's per-thread
// default stream, anything else a stream made by create_stream. Failures of
// the runtime are thrown as std::runtime_error (a test failure in gtest).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mtsarray_test {

/// cudaStreamCaptureMode{Global, ThreadLocal, Relaxed}.
enum class CaptureMode { global, thread_local_mode, relaxed };

inline const char* capture_mode_name(CaptureMode mode) {
    return mode == CaptureMode::global ? "Global" : mode == CaptureMode::thread_local_mode ? "ThreadLocal" : "Relaxed";
}

/// A stream kept busy by work that only the host ends: what is queued on
/// the stream after it does not run before release() (or destruction).
class StreamHold {
public:
    virtual ~StreamHold() = default;
    virtual void release() = 0;
    /// Whether the holding work is still running: false once released, and
    /// on CUDA also once the hold gave up (after about two seconds, so that
    /// a call that waits for the stream on the host fails instead of hanging).
    virtual bool running() const = 0;
};

/// Work captured from a stream, instantiated, ready to replay.
class CapturedGraph {
public:
    virtual ~CapturedGraph() = default;
    /// Nodes of every kind.
    virtual size_t nodes() const = 0;
    virtual size_t kernel_nodes() const = 0;
    /// Memory copy nodes.
    virtual size_t copy_nodes() const = 0;
    /// Queues one replay on `stream` of `device`.
    virtual void replay(int64_t stream, int device) = 0;
};

class StreamDriver {
public:
    virtual ~StreamDriver() = default;

    /// "simulated CUDA" or "CUDA", for messages.
    virtual std::string name() const = 0;
    virtual bool simulated() const = 0;
    virtual int device_count() const = 0;
    /// The calling thread's current device.
    virtual int current_device() const = 0;

    /// A new non-blocking stream of `device`: its DLPack number.
    virtual int64_t create_stream(int device) = 0;
    /// Waits for the stream's work, then destroys it.
    virtual void destroy_stream(int64_t stream, int device) = 0;

    /// Queues a hold on the stream. Holds never allocate: any number may be
    /// taken while other streams are held.
    virtual std::unique_ptr<StreamHold> hold(int64_t stream, int device) = 0;

    virtual void begin_capture(int64_t stream, int device, CaptureMode mode) = 0;
    /// The captured work; nullptr, with the reason in `why`, when the
    /// capture was invalidated.
    virtual std::unique_ptr<CapturedGraph> end_capture(int64_t stream, int device, std::string& why) = 0;

    /// Copies `bytes` of device memory of `device` into host memory now,
    /// ordered after nothing queued on any stream: what the memory holds at
    /// this moment, even while every stream of mtsarray is held.
    virtual void peek(int device, void* destination, const void* source, size_t bytes) = 0;
    /// Host memory that read_on_stream may write into without the host
    /// waiting (page-locked on CUDA). Make it before holding a stream:
    /// page-locked allocation may wait for the device.
    virtual std::shared_ptr<void> host_buffer(size_t bytes) = 0;
    /// Queues on the stream, as a consumer would, a read of `bytes` of
    /// device memory into `destination` (from host_buffer).
    virtual void read_on_stream(int64_t stream, int device, void* destination, const void* source,
                                size_t bytes) = 0;
    virtual void synchronize_stream(int64_t stream, int device) = 0;
    /// Waits until every stream of every device is idle.
    virtual void synchronize_all() = 0;

    /// Empty when host_waits() counts the host waits of the calling thread
    /// (the simulation does); else why it can not, for the skip message.
    virtual std::string host_waits_unseen() const = 0;
    virtual size_t host_waits() const = 0;
};

/// The driver of this process; nullptr when no runtime serves kDLCUDA (a
/// CPU-only build run with MTSARRAY_TEST_GPU=real).
StreamDriver* stream_driver();

}  // namespace mtsarray_test
