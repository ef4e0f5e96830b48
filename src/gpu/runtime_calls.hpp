#pragma once
// The runtime calls that need a capture mode or a device guard around them,
// in one layer, so that no caller forgets either: written against the
// runtime traits of gpu_backend.hpp.
//
// Capture mode. While any thread captures a graph in the Global mode
// (torch.cuda.graph's default), a "potentially unsafe" call -- an event
// query or synchronisation, a stream synchronisation, cudaMalloc -- made by
// another thread in the default mode fails and invalidates that capture
// (CUDA Runtime API, cudaThreadExchangeStreamCaptureMode). The calls here
// touch only work queued outside any capture, and run in the Relaxed mode
// (capture_mode.hpp), which leaves other threads' captures alone.
//
// Captured events. An event last recorded inside a capture can not be
// queried nor synchronised ("cudaErrorCapturedEvent: the operation is not
// permitted on an event which was last recorded in a capturing stream"),
// until it is recorded again outside: the callers never record a pooled
// event on a capturing stream (capturing() tells them), so every event they
// query here was recorded outside any capture.

#include <string>

#include "base/error.hpp"
#include "base/stream.hpp"
#include "gpu/capture_mode.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Whether the work before `event`'s last record is done; never blocks. The
/// event was recorded outside any capture.
template <class Runtime> bool event_done_outside_capture(typename Runtime::EventHandle event) {
    RelaxedCaptureMode<Runtime> relaxed;
    return Runtime::event_done(event);
}

/// Blocks until the work before `event`'s last record (outside any
/// capture) is done: deferred work and host consumers only.
template <class Runtime> void synchronize_event_outside_capture(typename Runtime::EventHandle event) {
    RelaxedCaptureMode<Runtime> relaxed;
    Runtime::synchronize_event(event);
}

/// Blocks until `stream` (not capturing) is idle: host consumers only.
template <class Runtime> void synchronize_stream_outside_capture(typename Runtime::StreamHandle stream) {
    RelaxedCaptureMode<Runtime> relaxed;
    Runtime::synchronize_stream(stream);
}

/// Blocks until the current device is idle: host consumers of managed
/// memory only.
template <class Runtime> void synchronize_device_outside_capture() {
    RelaxedCaptureMode<Runtime> relaxed;
    Runtime::synchronize_device();
}

/// Device memory outside any stream order (cudaMalloc): a potentially
/// unsafe call, allowed in a capture (for memory a graph owns) and during
/// another thread's in the Relaxed mode.
template <class Runtime> void* allocate_device_outside_capture(size_t bytes) {
    RelaxedCaptureMode<Runtime> relaxed;
    return Runtime::allocate_device(bytes);
}

/// Whether `stream` is capturing a graph; an error counts as capturing
/// (the legacy stream reports one while a blocking stream of its device
/// captures).
template <class Runtime> bool capturing(typename Runtime::StreamHandle stream) {
    try {
        return Runtime::capture_state(stream).active;
    } catch (const Error&) {
        return true;
    }
}

/// Record/wait pairs are legal between streams outside any capture, or
/// between streams of the same capture (its fork and join); any other pair
/// would tie a graph to work outside it.
template <class Runtime>
void check_same_capture(const Stream& waiting, typename Runtime::StreamHandle waiting_handle, const Stream& producer,
                        typename Runtime::StreamHandle producer_handle) {
    const auto waiting_capture = Runtime::capture_state(waiting_handle);
    const auto producer_capture = Runtime::capture_state(producer_handle);
    if (!waiting_capture.active && !producer_capture.active) {
        return;
    }
    MTSARRAY_EXPECTS(waiting_capture.active && producer_capture.active && waiting_capture.id == producer_capture.id,
                     waiting.describe() + " can not wait for " + producer.describe() + ": " +
                         (waiting_capture.active ? waiting.describe() : producer.describe()) + " is capturing a " +
                         Runtime::graph_name +
                         " and the other stream is not part of that capture. Use the capturing stream for "
                         "both arrays, or fork the capture to the other stream first.");
}

}  // namespace gpu
}  // namespace mtsarray::detail
