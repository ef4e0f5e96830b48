#pragma once
// DeviceGuard<Runtime>: makes a device current for its lifetime, then
// restores the previous one (RAII, not copyable). Written once for CUDA and
// HIP against three calls of the runtime traits:
//   static int current_device();               // throws
//   static void set_device(int);               // throws
//   static void restore_device(int) noexcept;  // reports

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class DeviceGuard {
public:
    explicit DeviceGuard(int device) : previous_(Runtime::current_device()) {
        if (previous_ != device) {
            Runtime::set_device(device);
            changed_ = true;
        }
    }
    ~DeviceGuard() {
        if (changed_) {
            Runtime::restore_device(previous_);
        }
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_;
    bool changed_ = false;
};

}  // namespace gpu
}  // namespace mtsarray::detail
