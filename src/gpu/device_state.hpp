#pragma once
// DeviceState<Runtime>: what GpuBackend keeps for one device, shared by all
// threads working on it: its events, its page-locked staging buffers, its
// stream-ordered memory pool, its own stream (library_stream.hpp), its host ->
// device copies (host_to_device.hpp), and its set-up -- every kernel of the library
// is loaded on the device before the first launch there
// (kernel_loading.hpp).

#include <mutex>

#include "gpu/deferred_work.hpp"
#include "gpu/device_guard.hpp"
#include "gpu/event_pool.hpp"
#include "gpu/host_to_device.hpp"
#include "gpu/kernel_loading.hpp"
#include "gpu/library_stream.hpp"
#include "gpu/pinned_staging_pool.hpp"
#include "gpu/stream_ordered_memory.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class DeviceState {
public:
    /// `deferred` outlives the state.
    DeviceState(int device, DeferredWork<Runtime>& deferred)
        : events(), staging(device, deferred, events), memory(device), uploads(memory, events, library_stream),
          device_(device) {}
    DeviceState(const DeviceState&) = delete;
    DeviceState& operator=(const DeviceState&) = delete;

    EventPool<Runtime> events;
    PinnedStagingPool<Runtime> staging;
    StreamOrderedPool<Runtime> memory;
    LibraryStream<Runtime> library_stream;
    HostToDevice<Runtime> uploads;

    /// Sets the device up, once (again after a failure): loads every
    /// kernel there. The load may wait for the device (the runtime's own
    /// rule); it happens when mtsarray first uses the device, never at a
    /// launch.
    void set_up() {
        std::call_once(set_up_once_, [&] {
            DeviceGuard<Runtime> guard(device_);
            load_every_kernel<Runtime>();
        });
    }

private:
    int device_;
    std::once_flag set_up_once_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
