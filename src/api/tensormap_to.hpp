#pragma once
// A TensorMap moved to another device: libmetatensor has no such function,
// and a TensorMap loaded from a file always lands on the CPU.

#include <metatensor.h>

#include "base/stream.hpp"

namespace mtsarray::detail {

/// A new TensorMap on `stream.device()`: every values and gradient array
/// becomes an mtsarray array working on `stream`, keys and every Labels get
/// their values copied there too (int32 label arrays keep a host mirror, so
/// that libmetatensor reading them back costs no device transfer). Arrays
/// of any origin are read through DLPack. Throws Error; `tensor` is only read.
mts_tensormap_t* tensormap_to(const mts_tensormap_t* tensor, const Stream& stream);

}  // namespace mtsarray::detail
