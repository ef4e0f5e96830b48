#include "core/backend_registry.hpp"

#include <atomic>
#include <string>

#include "base/device.hpp"
#include "base/error.hpp"
#include "mtsarray/config.h"
#include "cpu/cpu_backend.hpp"
#include "cpu/threads/pool_host_tasks.hpp"
#if MTSARRAY_HAS_CUDA
#include "cuda/cuda_backend.hpp"
#endif
#if MTSARRAY_HAS_HIP
#include "hip/hip_backend.hpp"
#endif

namespace mtsarray::detail {

namespace {

enum class Family { cpu, cuda, hip, unsupported };

Family family_of(DLDeviceType type) noexcept {
    switch (type) {
    case kDLCPU: return Family::cpu;
    case kDLCUDA:
    case kDLCUDAHost:
    case kDLCUDAManaged: return Family::cuda;
    case kDLROCM:
    case kDLROCMHost: return Family::hip;
    default: return Family::unsupported;
    }
}

// test-only replacement of the CUDA family's backend (set_cuda_backend_for_testing)
std::atomic<const Backend*> cuda_replacement{nullptr};

// nullptr when the family's backend is not in this build
const Backend* compiled_backend(Family family) {
    if (family == Family::cuda) {
        if (const Backend* replacement = cuda_replacement.load(std::memory_order_acquire)) {
            return replacement;
        }
    }
    switch (family) {
    case Family::cpu: return &cpu_backend();
#if MTSARRAY_HAS_CUDA
    case Family::cuda: return &cuda_backend(cpu::pool_host_tasks());
#endif
#if MTSARRAY_HAS_HIP
    case Family::hip: return &hip_backend(cpu::pool_host_tasks());
#endif
    default: return nullptr;
    }
}

std::string not_compiled_reason(DLDeviceType type) {
    switch (family_of(type)) {
    case Family::cuda:
        return std::string("mtsarray was built without CUDA support (MTSARRAY_CUDA=OFF), ") +
               device_type_name(type) + " arrays are not available";
    case Family::hip:
        return std::string("mtsarray was built without HIP support (MTSARRAY_HIP=OFF), ") +
               device_type_name(type) + " arrays are not available";
    default:
        return std::string("mtsarray has no backend for ") +
               (device_type_name(type) == std::string("unknown device type")
                    ? "device type " + std::to_string(static_cast<int>(type))
                    : std::string(device_type_name(type)) + " devices") +
               " (supported: cpu, cuda, cuda_host, cuda_managed, rocm, rocm_host)";
    }
}

}  // namespace

const Backend& memory_backend(DLDeviceType type) {
    const auto* backend = compiled_backend(family_of(type));
    if (backend == nullptr) {
        throw Error(not_compiled_reason(type));
    }
    return *backend;
}

const Backend& compute_backend(DLDeviceType type) {
    if (is_host_accessible(type)) {
        return cpu_backend();
    }
    return memory_backend(type);
}

void check_device_usable(DLDevice device) {
    memory_backend(device.device_type).check_device(device);
}

const Backend* set_cuda_backend_for_testing(const Backend* backend) noexcept {
    return cuda_replacement.exchange(backend, std::memory_order_acq_rel);
}

int device_count(DLDeviceType type) {
    const Family family = family_of(type);
    MTSARRAY_EXPECTS(family != Family::unsupported, not_compiled_reason(type));
    const auto* backend = compiled_backend(family);
    return backend == nullptr ? 0 : backend->device_count();
}

std::string unavailable_reason(DLDeviceType type) {
    const auto* backend = compiled_backend(family_of(type));
    if (backend == nullptr) {
        return not_compiled_reason(type);
    }
    try {
        backend->check_device(DLDevice{type, 0});
        return "";
    } catch (const std::exception& error) {
        return error.what();
    }
}

}  // namespace mtsarray::detail
