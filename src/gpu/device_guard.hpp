#pragma once
// DeviceGuard<Runtime>: makes a device current for its lifetime, then
// restores the previous one (RAII, not copyable) if it was in use: a thread
// that never chose a device reports device 0, and restoring it would make a
// context on GPU 0 in every process (eight MPI ranks on eight GPUs: eight
// stray contexts on GPU 0). Written once for CUDA and HIP against four calls
// of the runtime traits:
//   static int current_device();               // throws
//   static void set_device(int);               // throws
//   static void restore_device(int) noexcept;  // reports
//   static bool device_active(int) noexcept;   // has a context (true when unknown)

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class DeviceGuard {
public:
    explicit DeviceGuard(int device) : previous_(Runtime::current_device()) {
        if (previous_ != device) {
            restore_ = Runtime::device_active(previous_);
            Runtime::set_device(device);
            changed_ = true;
        }
    }
    ~DeviceGuard() {
        if (changed_ && restore_) {
            Runtime::restore_device(previous_);
        }
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_;
    bool changed_ = false;
    bool restore_ = false;  // the previous device had a context
};

}  // namespace gpu
}  // namespace mtsarray::detail
