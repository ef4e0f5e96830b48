#pragma once
// Which backend serves which DLPack device type. Adding a backend means one
// folder (src/<name>/, whose <name>_backend.hpp declares its factory) and one
// line in backend_registry.cpp.

#include <string>

#include <metatensor.h>

#include "base/backend.hpp"

namespace mtsarray::detail {

/// The backend that owns memory of `type`: allocation, free, streams and
/// synchronisation (the CUDA backend for kDLCUDAHost and kDLCUDAManaged).
/// Throws Error naming the cause when it was not compiled in.
const Backend& memory_backend(DLDeviceType type);

/// The backend that computes on memory of `type`: the CPU backend for every
/// host-accessible type, the memory backend otherwise.
const Backend& compute_backend(DLDeviceType type);

/// Throws Error naming the cause unless `device` can be used right now
/// (backend compiled in, driver present, device id in range).
void check_device_usable(DLDevice device);

/// Tests only: `backend` serves the CUDA family (kDLCUDA, kDLCUDAHost,
/// kDLCUDAManaged) in this process instead of the compiled-in one (nullptr
/// restores it); returns the previous replacement. Lets the tests run the
/// GPU backend on a simulated CUDA runtime (tests/support/simulated_runtime.hpp)
/// on machines without one. Not for use while arrays of that family exist.
const Backend* set_cuda_backend_for_testing(const Backend* backend) noexcept;

/// The number of device ids of `type` (mtsarray_device_count): 1 for the
/// CPU, the runtime's count for a GPU family, 0 when its backend was not
/// compiled in or has no device. Throws Error naming `type` and the
/// supported types when no backend of any build serves `type`.
int device_count(DLDeviceType type);

/// "" when `type` can be used, otherwise why not.
std::string unavailable_reason(DLDeviceType type);

}  // namespace mtsarray::detail
