#pragma once
// The module-level functions: making arrays, backend availability, and the
// bridge to the metatensor package (TensorMaps and arrays it owns).

#include <cstdint>
#include <string>

#include <nanobind/nanobind.h>

#include "array.hpp"

namespace mtsarray_python {

Array zeros(nanobind::handle shape, nanobind::handle dtype, nanobind::handle device);
Array full(nanobind::handle shape, nanobind::handle value, nanobind::handle dtype, nanobind::handle device);

bool backend_available(nanobind::handle device_type);
/// mtsarray_device_count.
int32_t device_count(nanobind::handle device_type);

/// mtsarray_set_num_threads / mtsarray_get_num_threads.
void set_num_threads(int64_t count);
int32_t get_num_threads();
std::string backend_unavailable_reason(nanobind::handle device_type);

/// mtsarray_release_cached_memory, mtsarray_set_release_threshold and
/// mtsarray_get_release_threshold on `device`.
void empty_cache(nanobind::handle device);
void set_release_threshold(nanobind::handle device, int64_t bytes);
uint64_t get_release_threshold(nanobind::handle device);

/// mtsarray_tensormap_to on the mts_tensormap_t at `address`; returns the
/// address of the new tensor map (the caller owns it).
uintptr_t tensormap_to(uintptr_t address, nanobind::handle device, nanobind::handle stream);

/// A view of the mts_array_t (a struct) at `address`, owned by `owner`.
Array borrow(uintptr_t address, nanobind::object owner);

/// from_dlpack(object, stream), written as an mts_array_t to the struct at
/// `address`: the caller owns it from then on, and hands it to
/// libmetatensor (mts_block, mts_labels), which destroys it.
void from_dlpack_into(nanobind::handle object, uintptr_t address, nanobind::handle stream);

/// `array` as a NumPy array (zero-copy for host memory), for __array__.
nanobind::object to_numpy(nanobind::handle array, nanobind::handle dtype, nanobind::handle copy);

}  // namespace mtsarray_python
