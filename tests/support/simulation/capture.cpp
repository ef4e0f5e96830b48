// The simulated runtime's graph captures: each rule with the section of the
// CUDA documentation it follows.
//
// Graph capture (Programming Guide "CUDA Graphs > Creating a Graph Using
//   Stream Capture", "Cross-stream Dependencies and Events", "Prohibited and
//   Unhandled Operations", "Invalidation"; Runtime API cudaStreamBeginCapture
//   and cudaThreadExchangeStreamCaptureMode).
//   begin_capture(stream, mode) makes the stream record what is queued on it
//   instead of running it; end_capture returns the recorded work (or fails
//   with cudaErrorStreamCaptureInvalidated), launch replays it. A stream
//   waiting on an event recorded in a capture joins it. Capture modes: a
//   potentially unsafe call (host synchronisation of a stream, an event or
//   the device, event query, page-locked and managed allocation and free,
//   the non-async free) made by a thread whose own interaction mode
//   (exchange_capture_mode, default Global) is not Relaxed, while that
//   thread has a capture begun in Global or ThreadLocal mode, or — in Global
//   mode — while any other thread has a capture begun in Global mode, fails
//   with cudaErrorStreamCaptureUnsupported and invalidates those captures.
//   Pool creation and trimming, and stream-ordered allocation and free on a
//   stream that is not capturing, are potentially unsafe calls too.
//   Synchronising or querying a capturing stream or an event recorded in a
//   capture does the same to that capture. Queuing work on the legacy stream
//   while a blocking stream of its device captures fails with
//   cudaErrorStreamCaptureImplicit and invalidates the capture. A copy
//   between pageable host memory and the device on a capturing stream fails
//   with cudaErrorStreamCaptureUnsupported and invalidates the capture: the
//   driver stages pageable memory when the copy is called (Runtime API "API
//   synchronization behavior"), so a graph node would read the pageable
//   memory again at every replay, when its owner may have reused it. (Real
//   CUDA may record such a node; mtsarray must never make one, so the
//   simulation is the stricter.)
// Events recorded in a capture (Runtime API, "Data types used by CUDA
//   Runtime": cudaErrorCapturedEvent, "The operation is not permitted on an
//   event which was last recorded in a capturing stream"; cudaEventRecord:
//   it "can be called multiple times on the same event and will overwrite
//   the previously captured state").
//   An event recorded on a capturing stream becomes a node of the graph. A
//   query or synchronisation of it while the capture is under way fails
//   with cudaErrorStreamCaptureUnsupported and invalidates the capture (as
//   above); once the capture has ended it fails with cudaErrorCapturedEvent,
//   and so does a stream wait on it outside a capture, until the event is
//   recorded again outside any capture. The capture's bookkeeping lives as
//   long as an event names it.

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

#include "support/simulation/state.hpp"

namespace mtsarray_test {

using mtsarray::detail::Error;

namespace sim {

bool blocking_stream_capturing(int device) {
    for (auto* stream : simulator().blocking[device]) {
        if (stream->capture != nullptr) {
            return true;
        }
    }
    return false;
}

void invalidate(Capture* capture, const std::string& why) {
    if (capture != nullptr && !capture->invalidated) {
        capture->invalidated = true;
        simulator().invalidations.push_back("capture " + std::to_string(capture->id) + ": " + why);
    }
}

std::shared_ptr<Capture> capture_of(const StreamState* stream) {
    for (const auto& capture : simulator().captures) {
        if (capture.get() == stream->capture) {
            return capture;
        }
    }
    return nullptr;
}

// The rule of an event last recorded in a capture: `call` (a query, a
// synchronisation, a stream wait outside the capture) fails. With the
// simulator's mutex held.
Status captured_event_locked(EventState* event, const char* call) {
    if (event->capture == nullptr) {
        return Status::success;
    }
    if (!event->capture->ended) {
        invalidate(event->capture.get(), std::string(call) + " of an event recorded in the capture");
        return Status::capture_unsupported;
    }
    return Status::captured_event;
}

// A copy between pageable host memory and the device goes through the
// driver's own staging when it is called; a graph node made of it would
// read the pageable memory again at every replay, long after the caller
// may have reused or freed it. Refused on a capturing stream, and the
// capture invalidated. With the simulator's mutex held.
Status pageable_copy_locked(StreamState* stream, const char* call) {
    if (stream->capture == nullptr) {
        return Status::success;
    }
    invalidate(stream->capture, std::string(call) + " with pageable host memory");
    return Status::capture_unsupported;
}


// Whether the calling thread may make a potentially unsafe call now
// (Runtime API, cudaThreadExchangeStreamCaptureMode); invalidates the
// captures that forbid it. With the simulator's mutex held.
Status unsafe_call_locked(const char* call) {
    if (interaction_mode == CaptureMode::relaxed) {
        return Status::success;
    }
    const auto self = std::this_thread::get_id();
    Status status = Status::success;
    for (auto& shared : simulator().captures) {
        Capture* capture = shared.get();
        const bool own = capture->thread == self && capture->mode != CaptureMode::relaxed;
        const bool global = interaction_mode == CaptureMode::global && capture->thread != self &&
                            capture->mode == CaptureMode::global;
        if (own || global) {
            std::ostringstream why;
            why << call << " on " << (own ? "the capturing thread" : "another thread")
                << " in " << (interaction_mode == CaptureMode::global ? "Global" : "ThreadLocal") << " mode";
            invalidate(capture, why.str());
            status = Status::capture_unsupported;
        }
    }
    return status;
}

// ---- test controls -----------------------------------------------------------------

std::vector<std::string> capture_invalidations() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().invalidations;
}

void begin_capture(int64_t stream, int device, CaptureMode mode) {
    StreamState* target = resolve_number(stream, device);
    std::lock_guard<std::mutex> lock(simulator().mutex);
    MTSARRAY_EXPECTS(target->kind != Kind::legacy, "the legacy stream can not capture (cudaErrorStreamCaptureUnsupported)");
    MTSARRAY_EXPECTS(target->capture == nullptr, "the stream is already capturing");
    auto capture = std::make_shared<Capture>(
        Capture{simulator().next_capture++, mode, std::this_thread::get_id(), target, {target}, {}});
    target->capture = capture.get();
    simulator().captures.push_back(std::move(capture));
}

Graph end_capture(int64_t stream, int device) {
    StreamState* target = resolve_number(stream, device);
    std::shared_ptr<Capture> capture;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        MTSARRAY_EXPECTS(target->capture != nullptr && target->capture->origin == target,
                         "end_capture: the stream did not begin a capture");
        capture = capture_of(target);
        for (auto* member : capture->streams) {
            member->capture = nullptr;
        }
        // the events recorded in the capture keep its bookkeeping
        capture->ended = true;
        auto& captures = simulator().captures;
        captures.erase(std::remove(captures.begin(), captures.end(), capture), captures.end());
    }
    if (capture->invalidated) {
        fail(Status::capture_invalidated, "cudaStreamEndCapture");
    }
    return Graph{std::move(capture->nodes), std::move(capture->retained)};
}

void launch(const Graph& graph, int64_t stream, int device) {
    for (const auto& node : graph.nodes) {
        if (node.work) {
            enqueue(stream, device, node.work);
        }
    }
    // the graph's user objects live until this launch has run
    enqueue(stream, device, [retained = graph.retained] {});
}

size_t retained_objects() { return live_user_objects.load(); }

CaptureMode exchange_capture_mode(CaptureMode mode) {
    const CaptureMode previous = interaction_mode;
    interaction_mode = mode;
    return previous;
}

}  // namespace sim

// ---- the traits -----------------------------------------------------------------------

using sim::Status;
using sim::simulator;

SimulatedRuntime::CaptureState SimulatedRuntime::capture_state(StreamHandle handle) {
    sim::refuse_unusable_runtime("cudaStreamGetCaptureInfo");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::StreamState* stream = sim::resolve_locked(handle);
    if (stream == nullptr) {
        sim::fail(Status::invalid_resource_handle, "cudaStreamGetCaptureInfo");
    }
    if (stream->kind == sim::Kind::legacy && sim::blocking_stream_capturing(stream->device)) {
        throw Error("the legacy default stream can not be used while another stream is capturing a CUDA graph "
                    "(cudaErrorStreamCaptureImplicit): give the arrays a non-blocking stream, or capture in "
                    "cudaStreamCaptureModeRelaxed");
    }
    if (stream->capture == nullptr) {
        return CaptureState{false, 0};
    }
    return CaptureState{true, stream->capture->id};
}

SimulatedRuntime::CaptureMode SimulatedRuntime::exchange_capture_mode(CaptureMode mode) noexcept {
    return sim::exchange_capture_mode(mode);
}

void SimulatedRuntime::retain_with_graph(StreamHandle handle, void (*release)(void*), void* object) {
    sim::refuse_unusable_runtime("cudaGraphRetainUserObject");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::StreamState* stream = sim::resolve_locked(handle);
    if (stream == nullptr || stream->capture == nullptr) {
        release(object);
        sim::fail(Status::invalid_value, "cudaGraphRetainUserObject");
    }
    stream->capture->retained->objects.emplace_back(release, object);
    sim::live_user_objects++;
}

}  // namespace mtsarray_test
