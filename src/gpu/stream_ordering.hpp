#pragma once
// StreamOrdering<Runtime>: how GpuBackend orders work between streams and
// the host -- a stream waiting for another with an event (across devices
// too), the host waiting for one stream, markers (a point in a stream's
// queue, waited on later), releases handed to the deferred-work thread once
// the device is done, and the capture rules they meet: record/wait pairs
// only within one capture, frees queued during a capture run after it,
// nothing that allocates is captured. Every wait is on the device; only a
// host consumer blocks, for its own stream. Written against the runtime
// traits (runtime_traits.md).

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "base/backend.hpp"
#include "base/error.hpp"
#include "base/stream.hpp"
#include "gpu/device_guard.hpp"
#include "gpu/event_pool.hpp"
#include "gpu/gpu_devices.hpp"
#include "gpu/runtime_calls.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class StreamOrdering {
public:
    using StreamHandle = typename Runtime::StreamHandle;

    /// `devices` outlives this.
    explicit StreamOrdering(const GpuDevices<Runtime>& devices) : devices_(devices) {}
    StreamOrdering(const StreamOrdering&) = delete;
    StreamOrdering& operator=(const StreamOrdering&) = delete;

    // The Backend functions of the same names (base/backend.hpp).

    void wait(const Stream& waiting, const Stream& producer) const {
        if (waiting == producer || producer.is_none()) {
            return;  // same queue, or nothing was queued on a host stream
        }
        const StreamHandle producer_handle = GpuDevices<Runtime>::device_stream(producer, "wait");
        if (waiting.is_none()) {
            // The host is the consumer: it can only wait by blocking.
            synchronize(producer);
            return;
        }
        const StreamHandle waiting_handle = GpuDevices<Runtime>::device_stream(waiting, "wait");
        const int producer_device = producer.device().device_id;
        DeviceGuard<Runtime> producer_guard(producer_device);
        check_same_capture<Runtime>(waiting, waiting_handle, producer, producer_handle);
        // The event belongs to the producer's device; the waiting stream may
        // be on another device (a cross-device wait is legal).
        auto event = devices_.device_state(producer_device).events.acquire();
        Runtime::record_event(event.get(), producer_handle);
        DeviceGuard<Runtime> waiting_guard(waiting.device().device_id);
        Runtime::stream_wait_event(waiting_handle, event.get());
    }

    void synchronize(const Stream& stream) const {
        const DLDevice device = stream.device();
        if (stream.is_none()) {
            // Host-accessible memory has no work stream. Managed memory may
            // still be written by kernels of other libraries on any stream
            // of its device; page-locked memory only by our own copies, which
            // their device-side stream has already been synchronised for.
            if (Runtime::has_managed_memory && device.device_type == Runtime::managed_type) {
                DeviceGuard<Runtime> guard(device.device_id);
                synchronize_device_outside_capture<Runtime>();  // the host waits for work outside any capture
            }
            return;
        }
        const StreamHandle handle = GpuDevices<Runtime>::device_stream(stream, "synchronize");
        DeviceGuard<Runtime> guard(device.device_id);
        MTSARRAY_EXPECTS(!Runtime::capture_state(handle).active,
                         "the host can not wait for " + stream.describe() + ": it is capturing a " +
                             Runtime::graph_name + " (the work it queues runs when the graph is launched)");
        synchronize_stream_outside_capture<Runtime>(handle);  // another thread's capture stays valid
    }

    std::shared_ptr<const StreamMarker> mark(const Stream& stream) const {
        if (stream.is_none()) {
            return nullptr;
        }
        const StreamHandle handle = GpuDevices<Runtime>::device_stream(stream, "mark");
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);
        if (Runtime::capture_state(handle).active) {
            return nullptr;
        }
        auto marker = std::make_shared<Marker>(devices_.device_state(device).events.acquire(), device);
        Runtime::record_event(marker->event.get(), handle);
        return marker;
    }

    void wait(const Stream& waiting, const StreamMarker& marker) const {
        const auto* ours = dynamic_cast<const Marker*>(&marker);
        MTSARRAY_EXPECTS(ours != nullptr, std::string("wait: the marker was not made by the ") + Runtime::name +
                                              " backend");
        const StreamHandle handle = GpuDevices<Runtime>::device_stream(waiting, "wait");
        DeviceGuard<Runtime> guard(waiting.device().device_id);
        MTSARRAY_EXPECTS(!Runtime::capture_state(handle).active,
                         waiting.describe() + " is capturing a " + Runtime::graph_name +
                             ": it can not wait for work queued outside the capture");
        Runtime::stream_wait_event(handle, ours->event.get());
    }

    void synchronize(const StreamMarker& marker) const {
        const auto* ours = dynamic_cast<const Marker*>(&marker);
        MTSARRAY_EXPECTS(ours != nullptr, std::string("synchronize: the marker was not made by the ") +
                                              Runtime::name + " backend");
        DeviceGuard<Runtime> guard(ours->device);
        synchronize_event_outside_capture<Runtime>(ours->event.get());
    }

    void release_after(const Stream& stream, std::function<void()>&& release) const {
        const StreamHandle handle = GpuDevices<Runtime>::device_stream(stream, "release_after");
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);
        if (defer_while_capturing(stream, release)) {
            return;
        }
        auto event = devices_.device_state(device).events.acquire();
        Runtime::record_event(event.get(), handle);
        if (event_done_outside_capture<Runtime>(event.get())) {
            auto now = std::move(release);
            now();
            return;
        }
        devices_.deferred().after_event(device, std::move(event), std::move(release));
    }

    bool defer_while_capturing(const Stream& stream, std::function<void()>& work) const {
        if (stream.is_none() || stream.device().device_type != Runtime::device_type) {
            return false;
        }
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);
        const StreamHandle handle = Runtime::native_stream(stream.usable_here());
        if (!capturing<Runtime>(handle)) {
            return false;
        }
        // The deferred thread can not name this thread's per-thread stream
        // (stream 2 is resolved per calling thread): it polls the legacy
        // stream, which reports a capture on any blocking stream of the
        // device, the per-thread ones included.
        const StreamHandle poll =
            stream.is_per_thread() ? Runtime::native_stream(Stream::default_for(stream.device())) : handle;
        devices_.deferred().after_capture(
            [poll, device]() {
                DeviceGuard<Runtime> guard(device);
                return capturing<Runtime>(poll);
            },
            std::move(work));
        return true;
    }

    void check_not_capturing(const Stream& stream, const char* operation) const {
        if (stream.is_none() || stream.device().device_type != Runtime::device_type) {
            return;
        }
        const StreamHandle handle = Runtime::native_stream(stream);
        DeviceGuard<Runtime> guard(stream.device().device_id);
        MTSARRAY_EXPECTS(!Runtime::capture_state(handle).active,
                         std::string(operation) + " can not be captured: " + stream.describe() +
                             " is capturing a " + Runtime::graph_name +
                             ", and the memory it allocates would outlive the call, which a replay of the graph "
                             "can not give back. Make arrays before capturing; move_data into existing arrays is "
                             "captured.");
    }

private:
    using EventLease = typename EventPool<Runtime>::Lease;

    /// A recorded event of one device (StreamMarker).
    struct Marker final : StreamMarker {
        Marker(EventLease&& lease, int device_id) : event(std::move(lease)), device(device_id) {}
        EventLease event;
        int device;
    };

    const GpuDevices<Runtime>& devices_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
