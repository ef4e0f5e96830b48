#pragma once
// Arrays that another library made (any mts_array_t that is not one of
// ours), read through their own as_dlpack.

#include <memory>

#include <metatensor.h>

#include "core/array.hpp"

namespace mtsarray::detail {

/// An Array over the data of `source`, on its own device: a zero-copy view
/// of a C-contiguous export, which gives the producer's memory back once the
/// work that reads it has run (stream-ordered), or a contiguous copy of a
/// strided one. `role` names the array in messages ("source", "an array of
/// the TensorMap"). Throws Error with the producer's own message. The rule
/// for an export that fails but still hands a tensor out (as create's
/// fill value follows it too): the tensor is released at once, its deleter
/// called, and nothing of it is read.
std::unique_ptr<Array> borrow_foreign_array(const mts_array_t& source, const char* role);

}  // namespace mtsarray::detail
