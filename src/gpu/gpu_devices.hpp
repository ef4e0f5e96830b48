#pragma once
// GpuDevices<Runtime>: the devices of one GPU runtime as GpuBackend finds
// them -- probed once, each with its DeviceState (events, staging buffers,
// memory pool, set up on first use), and the deferred-work thread they
// share -- and the checks every call makes first: the device is one of
// them, the stream is a device stream the calling thread may use, and no
// device fault has been met (runtime_error.hpp: after one, every call fails
// fast with it). Written against the runtime traits (runtime_traits.md).

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/device.hpp"
#include "base/error.hpp"
#include "base/stream.hpp"
#include "gpu/deferred_work.hpp"
#include "gpu/device_state.hpp"
#include "gpu/runtime_error.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class GpuDevices {
public:
    using StreamHandle = typename Runtime::StreamHandle;
    using Errors = typename Runtime::Errors;
    using DeviceState = gpu::DeviceState<Runtime>;

    GpuDevices() = default;
    GpuDevices(const GpuDevices&) = delete;
    GpuDevices& operator=(const GpuDevices&) = delete;

    /// Throws Error naming the cause when `device` can not be used: a type
    /// of another backend, no device (the probe's reason), an id out of
    /// range, a device fault met before.
    void check_device(DLDevice device) const {
        MTSARRAY_EXPECTS(serves(device.device_type),
                         std::string("the ") + Runtime::name + " backend does not manage " +
                             device_type_name(device.device_type) + " memory");
        const auto& devices = probe();
        MTSARRAY_EXPECTS(devices.count > 0, devices.failure);
        MTSARRAY_EXPECTS(device.device_id >= 0 && device.device_id < devices.count,
                         out_of_range(device.device_id, devices.count));
        DeviceFaults<Errors>::check();  // fails fast after a device fault
    }

    bool available() const noexcept { return probe().count > 0; }

    /// The devices the runtime reported (0 when it has none or no driver).
    int count() const noexcept { return probe().count; }

    /// The device types of this backend: device memory, page-locked and
    /// (CUDA) managed host memory.
    static bool serves(DLDeviceType type) noexcept {
        return type == Runtime::device_type || type == Runtime::pinned_host_type ||
               (Runtime::has_managed_memory && type == Runtime::managed_type);
    }

    /// The state of `device`, set up on first use: every kernel of the
    /// library is loaded there then (kernel_loading.hpp), before any launch.
    DeviceState& device_state(int device) const {
        const auto& devices = probe();
        MTSARRAY_EXPECTS(device >= 0 && device < devices.count, out_of_range(device, devices.count));
        DeviceState& state = *states_[static_cast<size_t>(device)];
        state.set_up();
        return state;
    }

    /// The device whose context a page-locked or managed allocation (or
    /// free) is made in: the runtime makes these in the current device's
    /// context, and a device without one would get one (hundreds of MiB on
    /// a GPU the program never chose: every MPI rank on GPU 0). `preferred`
    /// when it has a context, else the current device when it has one, else
    /// the first device that has one, else `preferred`. Page-locked memory is
    /// allocated portable (every context sees it as page-locked) and managed
    /// memory is global, so any context serves them and may free them.
    int host_memory_device(int preferred) const {
        if (Runtime::device_active(preferred)) {
            return preferred;
        }
        const int current = Runtime::current_device();
        if (Runtime::device_active(current)) {
            return current;
        }
        for (int device = 0; device < probe().count; device++) {
            if (Runtime::device_active(device)) {
                return device;
            }
        }
        return preferred;
    }

    /// The thread that does the host work waiting for the devices.
    DeferredWork<Runtime>& deferred() const noexcept { return deferred_; }

    /// The native handle of a stream of this backend's device memory. Host
    /// accessible memory is computed on by the CPU backend, so reaching here
    /// with it is a dispatch bug, reported as such.
    static StreamHandle device_stream(const Stream& stream, const char* operation) {
        MTSARRAY_EXPECTS(stream.device().device_type == Runtime::device_type && !stream.is_none(),
                         std::string(operation) + ": the " + Runtime::name + " backend only computes on " +
                             device_type_name(Runtime::device_type) + " streams, got " + stream.describe());
        DeviceFaults<Errors>::check();  // fails fast after a device fault
        // the runtime resolves stream 2 to the calling thread's stream
        MTSARRAY_EXPECTS(stream.belongs_to_this_thread(),
                         std::string(operation) + ": " + stream.describe() +
                             " is the per-thread default stream of another thread, which this thread can not "
                             "queue work on; give arrays shared between threads a stream handle (> 2) or the "
                             "legacy default stream (1)");
        return Runtime::native_stream(stream);
    }

private:
    /// "device id 3 out of range (2 CUDA devices)"
    static std::string out_of_range(int device, int count) {
        return "device id " + std::to_string(device) + " out of range (" + std::to_string(count) + " " +
               Runtime::display_name + (count == 1 ? " device)" : " devices)");
    }

    /// The device count, probed once (thread-safe); the per-device states
    /// are made at the same time, so that finding one takes no lock.
    const typename Runtime::DeviceCount& probe() const noexcept {
        std::call_once(probe_once_, [this]() {
            devices_ = Runtime::probe_devices();
            try {
                for (int device = 0; device < devices_.count; device++) {
                    states_.push_back(std::make_unique<DeviceState>(device, deferred_));
                }
            } catch (...) {
                states_.clear();
                devices_ = {0, std::string("out of host memory for the ") + Runtime::display_name + " backend"};
            }
        });
        return devices_;
    }

    mutable std::once_flag probe_once_;
    mutable typename Runtime::DeviceCount devices_{};
    mutable std::vector<std::unique_ptr<DeviceState>> states_;
    mutable DeferredWork<Runtime> deferred_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
