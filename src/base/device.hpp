#pragma once
// Facts about DLPack device types that the dispatch layer needs.

#include <string>

#include <metatensor.h>

namespace mtsarray::detail {

/// Device types whose memory the host can read and write directly; they run
/// the CPU implementation (after synchronising their work stream).
bool is_host_accessible(DLDeviceType type) noexcept;

/// "cpu", "cuda", "cuda_host", "rocm", ... for messages.
const char* device_type_name(DLDeviceType type) noexcept;

/// "cuda:1", "cpu", for messages.
std::string describe(DLDevice device);

inline bool same_device(DLDevice a, DLDevice b) noexcept {
    return a.device_type == b.device_type && a.device_id == b.device_id;
}

constexpr DLDevice cpu_device() noexcept { return DLDevice{kDLCPU, 0}; }

}  // namespace mtsarray::detail
