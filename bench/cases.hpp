#pragma once
// The benchmark cases of each device, and what they share: making arrays
// through the public C API and keeping the compiler from removing the
// baseline loops.

#include <cstdint>
#include <utility>
#include <string>
#include <vector>

#include <metatensor.hpp>
#include <mtsarray.h>

#include "harness.hpp"

namespace bench {

/// CPU cases: move_data, create, copy, swap_axes and as_dlpack against
/// memcpy/memset and metatensor::SimpleDataArray.
std::vector<Case> cpu_cases(const Options& options);

/// The CPU operations mtsarray splits between threads, at 2-16 threads,
/// each against the same call on one thread and memcpy / memset on as many
/// threads (thread_split_cases.cpp).
std::vector<Case> thread_split_cases(const Options& options);

/// The host work of a GPU move_data (MovePlan + the 16-byte move table),
/// timed on the CPU against the least any implementation must do per
/// movement (gpu_planning_cases.cpp). Runs on every machine.
std::vector<Case> gpu_planning_cases(const Options& options);

struct MovePattern;
/// Entries of the table the GPU backend builds for `pattern` on elements of
/// `element_size` bytes, by the backend's own planning code (its size, and
/// whether it travels in the kernel parameters, as the backend decides).
size_t planned_table_entries(const MovePattern& pattern, size_t element_size);

/// libmetatensor's keys_to_properties, keys_to_samples and
/// components_to_properties on TensorMaps of mtsarray arrays (CPU, and CUDA
/// when usable) against SimpleDataArray ones, with the share of the time
/// spent in mtsarray's callbacks (operations_cases.cpp).
std::vector<Case> operation_cases(const Options& options);
/// CUDA cases (cuda_cases.cpp, built only when mtsarray has the CUDA
/// backend). Returns no case, after printing why, when no GPU can be used.
std::vector<Case> cuda_cases(const Options& options);

/// Throws metatensor::Error with mts_last_error's message on failure.
inline void check(mts_status_t status) {
    metatensor::details::check_status(status);
}

/// Tells the compiler that memory behind `pointer` is read and written here,
/// so that memcpy/memset into otherwise unused buffers are not removed.
inline void clobber(void* pointer) {
    asm volatile("" : : "r"(pointer) : "memory");
}

inline size_t product(const std::vector<uintptr_t>& shape) {
    size_t result = 1;
    for (auto extent : shape) {
        result *= extent;
    }
    return result;
}

inline std::string join_shape(const std::vector<uintptr_t>& shape) {
    std::string text;
    for (size_t i = 0; i < shape.size(); i++) {
        text += (i == 0 ? "" : "x") + std::to_string(shape[i]);
    }
    return text.empty() ? "scalar" : text;
}

/// An mtsarray array on `device` (zeros), owned by the returned MtsArray.
inline metatensor::MtsArray mtsarray_zeros_array(DLDevice device, DLDataType dtype,
                                                 const std::vector<uintptr_t>& shape) {
    mts_array_t array;
    check(mtsarray_zeros(device, dtype, shape.data(), shape.size(), &array));
    return metatensor::MtsArray(array);
}

/// The data pointer of an mtsarray array (on the array's device).
inline void* mtsarray_pointer(const metatensor::MtsArray& array) {
    mts_array_t raw = array.as_mts_array_t();
    void* data = nullptr;
    check(mtsarray_data(&raw, &data));
    return data;
}

/// The raw vtable of an owned array (a view: do not destroy it).
inline mts_array_t raw(const metatensor::MtsArray& array) {
    return array.as_mts_array_t();
}

template <typename T> const char* dtype_name();
template <> inline const char* dtype_name<float>() { return "f32"; }
template <> inline const char* dtype_name<double>() { return "f64"; }

template <typename T> DLDataType dtype_of() { return metatensor::details::dtype_of<T>(); }

/// The value stored at flat index `i` of every input: exact in float32.
template <typename T> T value_at(size_t i) {
    return static_cast<T>(i % 65521) + static_cast<T>(0.5);
}

/// The values of an input (value_at) after swapping `axis_1` and `axis_2`.
template <typename T>
std::vector<T> swapped_reference(const std::vector<uintptr_t>& shape, uintptr_t axis_1, uintptr_t axis_2) {
    auto swapped = shape;
    std::swap(swapped[axis_1], swapped[axis_2]);
    std::vector<T> result(product(shape));
    std::vector<size_t> index(shape.size(), 0);
    std::vector<size_t> target(shape.size(), 0);
    for (size_t i = 0; i < result.size(); i++) {
        target = index;
        std::swap(target[axis_1], target[axis_2]);
        size_t linear = 0;
        for (size_t axis = 0; axis < shape.size(); axis++) {
            linear = linear * swapped[axis] + target[axis];
        }
        result[linear] = value_at<T>(i);
        for (size_t axis = shape.size(); axis-- > 0;) {  // row-major increment
            if (++index[axis] < shape[axis]) {
                break;
            }
            index[axis] = 0;
        }
    }
    return result;
}

}  // namespace bench
