#pragma once
// The pass over movements behind MovePlan::scan_part, as templates, so that
// a backend can run the same expressions with wider vectors (the CPU
// backend's AVX2 scan, cpu/move_scan.cpp) and get the same MoveScan.
// GCC and Clang vector extensions: SSE2 on x86-64, NEON on AArch64, plain
// code elsewhere.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <metatensor.h>

#include "base/move_plan.hpp"

namespace mtsarray::detail::move_scan {

// Two 64-bit lanes: a movement's (sample_in, sample_out),
// (properties_start_in, properties_start_out) and (properties_start_out,
// properties_length) are each one load.
typedef uint64_t Lanes __attribute__((vector_size(16)));

static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "movement fields are 64-bit");
static_assert(offsetof(mts_data_movement_t, sample_out) == offsetof(mts_data_movement_t, sample_in) + 8 &&
                  offsetof(mts_data_movement_t, properties_start_in) ==
                      offsetof(mts_data_movement_t, sample_out) + 8 &&
                  offsetof(mts_data_movement_t, properties_start_out) ==
                      offsetof(mts_data_movement_t, properties_start_in) + 8 &&
                  offsetof(mts_data_movement_t, properties_length) ==
                      offsetof(mts_data_movement_t, properties_start_out) + 8,
              "a movement is its five fields in this order");

[[gnu::always_inline]] inline Lanes load_lanes(const uintptr_t* first) noexcept {
    Lanes lanes;
    std::memcpy(&lanes, first, sizeof(lanes));
    return lanes;
}

constexpr uint64_t top_bits = uint64_t(3) << 62;

// What a pass over movements sees, in two lanes (in, out):
//  - flags: with every field and limit below 2^62, `limit - value` has its
//    two top bits set exactly when value > limit, and clear otherwise:
//    or-ing the differences (and the fields themselves, so that larger ones
//    flag too) flags any movement out of range. The sample limits are
//    samples - 1, so that an empty sample axis flags as well. Conservative:
//    a flagged list gets the exact check, which names the first bad
//    movement or finds that all are valid after all (huge but valid
//    fields). Both sides of a movement are checked at once.
//  - breaks: samples - (previous samples + 1) on both sides, zero when each
//    movement's samples follow the previous one's, with its top bits set
//    (fields below 2^62) when one went back; while it is zero, or-ed with
//    the ranges xor the first movement's too (below 2^62 as well). Zero at
//    the end: the movements are one run (in-order gathers into a new array
//    mostly are). The top bits of the output lane: an output sample did not
//    increase.
//  - lengths: lane 1 adds up properties_length.
// scan_block() below is that pass and scan_range() its driver; the CPU
// backend runs the same pass two movements at a time where the CPU has AVX2
// (cpu/move_scan.cpp).

// Movements compared with the first one's ranges at a time: a list that is
// not one run (scattered samples) mostly shows it in its first block, and
// the rest of it takes the loop without the comparison.
constexpr size_t run_check_block = 256;

// The flags of one movement: (samples, starts, tail) are its three loads.
[[gnu::always_inline]] inline Lanes range_flags(Lanes samples, Lanes starts, Lanes tail, Lanes last_samples,
                                                Lanes properties) noexcept {
    const Lanes length = __builtin_shufflevector(tail, tail, 1, 1);
    return (last_samples - samples) | (properties - (starts + length)) | samples | starts | tail;
}
[[gnu::always_inline]] inline Lanes range_flags(const mts_data_movement_t* movement, Lanes last_samples,
                                                Lanes properties) noexcept {
    return range_flags(load_lanes(&movement->sample_in), load_lanes(&movement->properties_start_in),
                       load_lanes(&movement->properties_start_out), last_samples, properties);
}

// The loop over [begin, end), without a branch per movement: most of the
// cost of each movement of a small call. `Ranges`: compare the ranges with
// `first`'s.
template <bool Ranges>
[[gnu::always_inline]] inline void scan_block(const mts_data_movement_t* begin, const mts_data_movement_t* end,
                                              const mts_data_movement_t* first, Lanes last_samples,
                                              Lanes properties, Lanes& flags, Lanes& breaks, Lanes& lengths,
                                              Lanes& next_samples) {
    const Lanes ones = {1, 1};
    const Lanes first_starts = load_lanes(&first->properties_start_in);
    const Lanes first_tail = load_lanes(&first->properties_start_out);  // start_out, length
    for (const mts_data_movement_t* movement = begin; movement != end; movement++) {
        const Lanes samples = load_lanes(&movement->sample_in);
        const Lanes starts = load_lanes(&movement->properties_start_in);
        const Lanes tail = load_lanes(&movement->properties_start_out);
        flags |= range_flags(samples, starts, tail, last_samples, properties);
        breaks |= samples - next_samples;
        if (Ranges) {
            breaks |= (starts ^ first_starts) | (tail ^ first_tail);
        }
        lengths += tail;
        next_samples = samples + ones;
    }
}

// scan_block as a scanner for scan_range below: one movement at a time.
struct ScanOneAtATime {
    template <bool Ranges>
    [[gnu::always_inline]] void run(const mts_data_movement_t* begin, const mts_data_movement_t* end,
                                    const mts_data_movement_t* first, Lanes last_samples, Lanes properties,
                                    Lanes& flags, Lanes& breaks, Lanes& lengths, Lanes& next_samples) const {
        scan_block<Ranges>(begin, end, first, last_samples, properties, flags, breaks, lengths, next_samples);
    }
};

// The pass over [begin, end) (see "What a pass over movements sees"):
// blocks compared with the first movement's ranges while the movements may
// still be one run, then the rest without the comparison.
template <typename Scanner>
[[gnu::always_inline]] inline MoveScan scan_range(const mts_data_movement_t* first, size_t begin, size_t end,
                                                  Lanes last_samples, Lanes properties, const Scanner& scanner) {
    // locals, not a result's fields (which may live in memory)
    Lanes flags = (last_samples | properties) & top_bits;
    Lanes breaks = {0, 0};
    Lanes lengths = {0, 0};
    // what a pass from the first movement would expect here
    Lanes next_samples = load_lanes(&first[begin == 0 ? 0 : begin - 1].sample_in);
    if (begin != 0) {
        next_samples += Lanes{1, 1};
    }
    const mts_data_movement_t* movement = first + begin;
    const mts_data_movement_t* const stop = first + end;
    while (movement != stop && (breaks[0] | breaks[1]) == 0) {
        const auto* block_end = static_cast<size_t>(stop - movement) > run_check_block ? movement + run_check_block
                                                                                       : stop;
        scanner.template run<true>(movement, block_end, first, last_samples, properties, flags, breaks, lengths,
                                   next_samples);
        movement = block_end;
    }
    scanner.template run<false>(movement, stop, first, last_samples, properties, flags, breaks, lengths,
                                next_samples);
    return {flags[0] | flags[1], breaks[0] | breaks[1], breaks[1], lengths[1]};
}

}  // namespace mtsarray::detail::move_scan
