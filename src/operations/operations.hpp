#pragma once
// The operations behind the mts_array_t callbacks and the C API, written
// once for every backend. Each one validates all its input before any data
// is written or any array changes; each is implemented in its own file.

#include <memory>
#include <vector>

#include <metatensor.h>

#include "core/array.hpp"

namespace mtsarray::detail {

/// create.cpp: a new array on `stream` (its device) with every element set
/// to the `element_size(dtype)` bytes at `value` (a host pointer).
std::unique_ptr<Array> make_filled(DLDataType dtype, Shape shape, const void* value,
                                   const Stream& stream);

/// copy.cpp: a deep copy of `source` on `device`, working on `stream` when
/// given (a stream of `device`), else on the source's work stream (same
/// device) or the device's default stream. Ordered after the source's
/// pending work; int32 label arrays keep their host mirror.
std::unique_ptr<Array> copy_to_device(const Array& source, DLDevice device, const Stream* stream = nullptr);

/// copy_into.cpp: writes every element of `source` into `destination`
/// (same dtype and shape, any two devices), queued on the destination's
/// stream after the source's pending work. Overlapping arrays on one device
/// are copied through a snapshot. Throws Error naming the mismatch before
/// anything is written.
void copy_into(Array& destination, const Array& source);

/// copy.cpp: a new host (kDLCPU) buffer holding a copy of `bytes` host bytes.
std::shared_ptr<Buffer> host_copy(const void* data, size_t bytes);

/// copy.cpp: copies `bytes` bytes from `source` (on `source_stream`'s
/// device) to `destination` (on `destination_stream`'s device) whatever the
/// two devices are. On return, host destinations hold the data; device
/// destinations have it queued on `destination_stream`, after the source's
/// pending work, the source's stream waiting for nothing. `source_buffer`
/// (the source's memory) stays alive until a device copy has read a host
/// source, so that the copy neither waits nor stages twice, and a device
/// source read on `destination_stream` is freed only after that read.
void transfer(void* destination, const Stream& destination_stream, const void* source,
              const Stream& source_stream, size_t bytes, const std::shared_ptr<Buffer>& source_buffer);

/// move_data.cpp
void move_data(Array& output, const Array& input, const mts_data_movement_t* movements, size_t count);

/// swap_axes.cpp
void swap_axes(Array& array, uintptr_t axis_1, uintptr_t axis_2);

/// as_dlpack.cpp: a DLPack export of `array` on `device`, zero-copy on the
/// same device, a copy (IS_COPIED) otherwise; `stream` is the consumer's
/// DLPack stream number on `device` (NULL: its default stream, -1: no
/// synchronisation).
DLManagedTensorVersioned* as_dlpack(const Array& array, DLDevice device, const int64_t* stream,
                                    DLPackVersion max_version);

/// from_dlpack.cpp: takes ownership of `tensor` in every case.
std::unique_ptr<Array> from_dlpack(DLManagedTensorVersioned* tensor);

/// from_dlpack.cpp: C-contiguous strides (in elements) of `shape`.
std::vector<int64_t> contiguous_strides(const Shape& shape);

/// from_dlpack.cpp: whether `strides` lay `shape` out C-contiguously
/// (strides of size-1 axes do not matter).
bool is_c_contiguous(const Shape& shape, const int64_t* strides);

}  // namespace mtsarray::detail
