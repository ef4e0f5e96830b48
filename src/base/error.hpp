#pragma once
// Exceptions used inside mtsarray. They never cross the C boundary:
// c_boundary.hpp turns them into mts_set_last_error + MTS_CALLBACK_ERROR.

#include <stdexcept>
#include <string>

namespace mtsarray::detail {

/// Any failure inside mtsarray: bad input, missing backend, runtime error.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// An allocation (host or device) that could not be satisfied.
class OutOfMemory : public Error {
public:
    explicit OutOfMemory(const std::string& message) : Error(message) {}
};

/// A sticky fault of a GPU (an illegal address, an assert or a launch
/// failure in anyone's kernel), after which every call of its runtime fails
/// with it: "To continue using CUDA, the process must be terminated and
/// relaunched" (CUDA Runtime API, cudaErrorIllegalAddress). Reported once
/// (src/gpu/runtime_error.hpp); memory then can not be given back.
class DeviceFault : public Error {
public:
    explicit DeviceFault(const std::string& message) : Error(message) {}
};

}  // namespace mtsarray::detail

/// Precondition check: throws mtsarray::detail::Error with `message` (a std::string
/// expression, only evaluated when the check fails).
#define MTSARRAY_EXPECTS(condition, message)                 \
    do {                                                     \
        if (!(condition)) {                                  \
            throw ::mtsarray::detail::Error(message);                \
        }                                                    \
    } while (false)
