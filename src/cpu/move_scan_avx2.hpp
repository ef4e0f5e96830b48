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

/// What scan_compact() saw of movements [begin, end).
struct CompactScan {
    /// As scan_movements() gives it; `copied`: `samples` holds the samples
    /// of every movement of the part (otherwise the part is one run and
    /// holds its first movement's only: the others follow from it).
    MoveScan scan;
    /// Whether every movement of the part has the ranges (properties_start_in,
    /// properties_start_out, properties_length) of its first one, copy[begin]:
    /// then samples[2 * i], samples[2 * i + 1] are movement i's (sample_in,
    /// sample_out), and copy[i] is not written for i > begin. Otherwise
    /// copy[begin, end) holds every movement (and `samples` not all of them).
    bool compact;
};

/// scan_movements() for move_data, which copies from what it stores: each
/// movement read once, its samples stored into `samples` (2 *
/// movements_count() entries) and its ranges compared with the part's first
/// movement (stored whole into copy[begin]). A list whose movements share
/// their ranges (the common gathers) costs 16 bytes of stores a movement
/// instead of 40, and nothing while it is one run; a part goes on as
/// scan_movements(), into `copy`, from the first movement whose ranges
/// differ. The MoveScan says what scan_movements()'s does: the same
/// out_of_range (for a list that no one edits meanwhile) and elements,
/// not_one_run zero in the same cases, the same top bits of out_of_order.
CompactScan scan_compact(const MovePlan& plan, size_t begin, size_t end, uint64_t* samples,
                         mts_data_movement_t* copy, InstructionSet instructions = InstructionSet::best) noexcept;

/// Writes out the samples of movements (begin, end) of a part that is one
/// run: they follow from movement `begin`'s, in samples[2 * begin].
inline void fill_run_samples(uint64_t* samples, size_t begin, size_t end) noexcept {
    for (size_t m = begin + 1; m < end; m++) {
        samples[2 * m] = samples[2 * begin] + (m - begin);
        samples[2 * m + 1] = samples[2 * begin + 1] + (m - begin);
    }
}

/// Writes movements (begin, end) whole into `copy`, from their samples and
/// the ranges they share with copy[begin].
inline void fill_from_samples(mts_data_movement_t* copy, const uint64_t* samples, size_t begin,
                              size_t end) noexcept {
    const mts_data_movement_t first = copy[begin];
    for (size_t m = begin + 1; m < end; m++) {
        copy[m] = {samples[2 * m], samples[2 * m + 1], first.properties_start_in, first.properties_start_out,
                   first.properties_length};
    }
}

}  // namespace mtsarray::detail::cpu
