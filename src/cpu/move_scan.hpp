#pragma once
// MovePlan's scan of the movements (MovePlan::scan_part) on the CPU running
// the library: two movements at a time where it has AVX2, the portable scan
// otherwise. Both give the same MoveScan, bit for bit.

#include <cstddef>

#include "base/move_plan.hpp"
#include "cpu/cpu_features.hpp"

namespace mtsarray::detail::cpu {

/// MovePlan::scan_part(begin, end, copy) with the widest vectors the CPU
/// has (`best`), or the portable scan (`baseline`, for the tests): the same
/// MoveScan and the same copy.
MoveScan scan_movements(const MovePlan& plan, size_t begin, size_t end, mts_data_movement_t* copy,
                        InstructionSet instructions = InstructionSet::best) noexcept;

}  // namespace mtsarray::detail::cpu
