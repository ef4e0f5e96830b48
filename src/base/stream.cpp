#include "base/stream.hpp"

#include <string>

#include "base/device.hpp"
#include "base/error.hpp"

namespace mtsarray::detail {

namespace {

std::string invalid(DLDevice device, int64_t number, const std::string& rule) {
    return "invalid DLPack stream number " + std::to_string(number) + " for " +
           describe(device) + ": " + rule;
}

}  // namespace

Stream Stream::default_for(DLDevice device) {
    if (device.device_type == kDLCUDA) {
        return Stream(device, stream_numbers::cuda_legacy);
    }
    if (device.device_type == kDLROCM) {
        return Stream(device, stream_numbers::rocm_default);
    }
    // Host-accessible memory (CPU, pinned, managed) is computed on by the
    // host, synchronously: no stream.
    return Stream(device, stream_numbers::none);
}

Stream Stream::parse(DLDevice device, int64_t number, bool allow_none) {
    if (number == stream_numbers::none) {
        MTSARRAY_EXPECTS(allow_none || is_host_accessible(device.device_type),
                         invalid(device, number, "-1 (no synchronisation) is only valid in as_dlpack"));
        return Stream(device, number);
    }
    if (number < stream_numbers::none) {
        throw Error(invalid(device, number, "negative stream numbers other than -1 are not valid"));
    }
    const auto type = device.device_type;
    if (type == kDLCUDAManaged) {
        // a consumer's CUDA stream, validated with the CUDA rules; the host
        // computes on managed memory synchronously: nothing to order
        MTSARRAY_EXPECTS(number != 0, invalid(device, number,
            "0 is ambiguous for CUDA, use 1 (legacy default stream), 2 (per-thread default "
            "stream) or a cudaStream_t handle"));
        return Stream(device, stream_numbers::none);
    }
    if (type == kDLCUDA) {
        MTSARRAY_EXPECTS(number != 0, invalid(device, number,
            "0 is ambiguous for CUDA, use 1 (legacy default stream), 2 (per-thread default "
            "stream) or a cudaStream_t handle"));
        return Stream(device, number);
    }
    if (type == kDLROCM) {
        MTSARRAY_EXPECTS(number != stream_numbers::cuda_legacy && number != stream_numbers::cuda_per_thread,
            invalid(device, number, "1 and 2 are not valid for ROCm, use 0 (default stream) or a "
                                    "hipStream_t handle"));
        return Stream(device, number);
    }
    throw Error(invalid(device, number, std::string(device_type_name(type)) +
                                            " memory has no streams, only -1 (or NULL) is valid"));
}

std::string Stream::describe() const {
    std::string text = detail::describe(device_) + " stream " + std::to_string(number_);
    const auto type = device_.device_type;
    if (number_ == stream_numbers::none) {
        text += " (none)";
    } else if (type == kDLCUDA && number_ == stream_numbers::cuda_legacy) {
        text += " (legacy default)";
    } else if (type == kDLCUDA && number_ == stream_numbers::cuda_per_thread) {
        text += " (per-thread default)";
    } else if (type == kDLROCM && number_ == stream_numbers::rocm_default) {
        text += " (default)";
    }
    return text;
}

}  // namespace mtsarray::detail
