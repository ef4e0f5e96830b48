#pragma once
#include "base/backend.hpp"
#include "cpu/cpu_features.hpp"

namespace mtsarray::detail::cpu {

/// Copies `source` into the C-contiguous `destination`, on up to `threads`
/// threads. Axes that are contiguous in both are merged first and size-1
/// axes dropped; a contiguous innermost axis is copied as whole runs (its
/// elements never one by one); what remains is a cache-blocked transpose
/// between the innermost destination axis and the source's densest axis:
/// strips of the latter, read along the source's rows and written one full
/// cache line of the destination at a time. The strips (and the outer axes)
/// are what the threads share out.
///
/// `instructions`: `best` uses what the CPU running it has (AVX2 blocks for
/// 8-byte elements, and for 4-byte ones outside power-of-two rows, where
/// there is AVX2; AVX-512 tiles for both in power-of-two rows where there is
/// AVX-512); `baseline` keeps to what the library is compiled for, so that
/// the tests check both kernels on one machine.
void strided_copy(void* destination, const StridedView& source, size_t threads,
                  InstructionSet instructions = InstructionSet::best);

}  // namespace mtsarray::detail::cpu
