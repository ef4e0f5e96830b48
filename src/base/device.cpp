#include "base/device.hpp"

#include <string>

namespace mtsarray::detail {

bool is_host_accessible(DLDeviceType type) noexcept {
    return type == kDLCPU || type == kDLCUDAHost || type == kDLCUDAManaged || type == kDLROCMHost;
}

const char* device_type_name(DLDeviceType type) noexcept {
    switch (type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLROCM: return "rocm";
    case kDLROCMHost: return "rocm_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLVPI: return "vpi";
    case kDLExtDev: return "ext_dev";
    case kDLOneAPI: return "oneapi";
    case kDLWebGPU: return "webgpu";
    case kDLHexagon: return "hexagon";
    default: return "unknown device type";
    }
}

std::string describe(DLDevice device) {
    std::string name = device_type_name(device.device_type);
    if (name == "unknown device type") {
        return "unknown device type " + std::to_string(static_cast<int>(device.device_type));
    }
    if (device.device_type == kDLCPU) {
        return name;
    }
    return name + ":" + std::to_string(device.device_id);
}

}  // namespace mtsarray::detail
