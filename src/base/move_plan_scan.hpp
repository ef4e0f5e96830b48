#pragma once
// The pass over movements behind MovePlan::scan_part, as templates, so that
// a backend can run the same expressions with wider vectors (the CPU
// backend's AVX2 scan, cpu/move_scan_avx2.cpp) and get the same MoveScan.
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
// (cpu/move_scan_avx2.cpp).

// Movements compared with the first one's ranges at a time: a list that is
// not one run (scattered samples) mostly shows it in its first block, and
// the rest of it takes the loop without the comparison.
constexpr size_t run_check_block = 256;
// The first of them, shorter (see scan_range).
constexpr size_t first_run_check_block = 8;

// One movement, read once: three loads, (sample_in, sample_out),
// (properties_start_in, properties_start_out) and (properties_start_out,
// properties_length). properties_start_out is in two of them, and may
// differ between the two (a list that another thread edits): the one of
// `tail` is the one checked (range_flags) and the one stored into `copy`
// (stored last), the second lane of `starts` only ever adds flags or
// breaks, so that nothing is claimed of a value that is not the copy's.
struct MovementLanes {
    Lanes samples;
    Lanes starts;
    Lanes tail;
};
[[gnu::always_inline]] inline MovementLanes read_movement(const mts_data_movement_t* movement,
                                                          mts_data_movement_t* copy) noexcept {
    const MovementLanes lanes = {load_lanes(&movement->sample_in), load_lanes(&movement->properties_start_in),
                                 load_lanes(&movement->properties_start_out)};
    if (copy != nullptr) {
        std::memcpy(&copy->sample_in, &lanes.samples, sizeof(Lanes));
        std::memcpy(&copy->properties_start_in, &lanes.starts, sizeof(Lanes));
        std::memcpy(&copy->properties_start_out, &lanes.tail, sizeof(Lanes));  // last: its start_out stays
    }
    return lanes;
}

// The flags of one movement: (samples, starts, tail) as read_movement gives
// them; the output's start is tail's.
[[gnu::always_inline]] inline Lanes range_flags(Lanes samples, Lanes starts, Lanes tail, Lanes last_samples,
                                                Lanes properties) noexcept {
    const Lanes length = __builtin_shufflevector(tail, tail, 1, 1);
    const Lanes range_starts = __builtin_shufflevector(starts, tail, 0, 2);
    return (last_samples - samples) | (properties - (range_starts + length)) | samples | starts | tail;
}
[[gnu::always_inline]] inline Lanes range_flags(const MovementLanes& lanes, Lanes last_samples,
                                                Lanes properties) noexcept {
    return range_flags(lanes.samples, lanes.starts, lanes.tail, last_samples, properties);
}

// The ranges every movement is compared with while the movements may be one
// run: those of the first movement of the pass.
struct FirstRanges {
    Lanes starts;
    Lanes tail;
};

// The loop over [begin, end), without a branch per movement: most of the
// cost of each movement of a small call. `Ranges`: compare the ranges with
// `first`'s. Each movement is read once (read_movement), into `copy` too
// when that is not null (`copy` is then where movement `begin` goes).
template <bool Ranges>
[[gnu::always_inline]] inline void scan_block(const mts_data_movement_t* begin, const mts_data_movement_t* end,
                                              mts_data_movement_t* copy, const FirstRanges& first,
                                              Lanes last_samples, Lanes properties, Lanes& flags, Lanes& breaks,
                                              Lanes& lengths, Lanes& next_samples) {
    const Lanes ones = {1, 1};
    for (const mts_data_movement_t* movement = begin; movement != end; movement++) {
        const MovementLanes lanes = read_movement(movement, copy);
        if (copy != nullptr) {
            copy++;
        }
        flags |= range_flags(lanes, last_samples, properties);
        breaks |= lanes.samples - next_samples;
        if (Ranges) {
            breaks |= (lanes.starts ^ first.starts) | (lanes.tail ^ first.tail);
        }
        lengths += lanes.tail;
        next_samples = lanes.samples + ones;
    }
}

// scan_block as a scanner for scan_range below: one movement at a time.
struct ScanOneAtATime {
    template <bool Ranges>
    [[gnu::always_inline]] void run(const mts_data_movement_t* begin, const mts_data_movement_t* end,
                                    mts_data_movement_t* copy, const FirstRanges& first, Lanes last_samples,
                                    Lanes properties, Lanes& flags, Lanes& breaks, Lanes& lengths,
                                    Lanes& next_samples) const {
        scan_block<Ranges>(begin, end, copy, first, last_samples, properties, flags, breaks, lengths, next_samples);
    }
};

// The pass over movements [begin, end) of `movements` (see "What a pass over
// movements sees"), copying each into copy[begin, end) as it reads it when
// `copy` is not null: blocks compared with the first movement's ranges while
// the movements may still be one run, then the rest without the comparison.
// A part starting after the first movement is compared with its own first
// movement, and its first movement with nothing: join_parts() below adds
// what lies between parts, from the copy, once every part is done. So parts
// may run at the same time, and no movement is read twice.
template <typename Scanner>
[[gnu::always_inline]] inline MoveScan scan_range(const mts_data_movement_t* movements, mts_data_movement_t* copy,
                                                  size_t begin, size_t end, Lanes last_samples, Lanes properties,
                                                  const Scanner& scanner) {
    // locals, not a result's fields (which may live in memory)
    Lanes flags = (last_samples | properties) & top_bits;
    Lanes breaks = {0, 0};
    Lanes lengths = {0, 0};
    if (begin == end) {
        return {flags[0] | flags[1], 0, 0, 0, begin, end, true};
    }
    mts_data_movement_t* next_copy = copy == nullptr ? nullptr : copy + begin + 1;
    const MovementLanes head = read_movement(movements + begin, copy == nullptr ? nullptr : copy + begin);
    const FirstRanges first = {head.starts, head.tail};
    flags |= range_flags(head, last_samples, properties);
    lengths += head.tail;
    Lanes next_samples = head.samples + Lanes{1, 1};
    const mts_data_movement_t* movement = movements + begin + 1;
    const mts_data_movement_t* const stop = movements + end;
    // While the movements are one run, they are not stored: each continues
    // the head, which is (MoveScan::copied). A block that breaks the run is
    // read again, stored as it is checked, and what the first look saw of
    // it is forgotten; from there on every movement is stored as read.
    // The first block is short: a scattered list breaks its run at once, and
    // is then read twice only that far.
    bool storing = copy == nullptr;
    size_t block = first_run_check_block;
    while (movement != stop && (breaks[0] | breaks[1]) == 0) {
        const auto* block_end = static_cast<size_t>(stop - movement) > block ? movement + block : stop;
        block = run_check_block;
        if (storing) {
            scanner.template run<true>(movement, block_end, next_copy, first, last_samples, properties, flags,
                                       breaks, lengths, next_samples);
        } else {
            const Lanes flags_before = flags;
            const Lanes lengths_before = lengths;
            const Lanes next_samples_before = next_samples;
            scanner.template run<true>(movement, block_end, nullptr, first, last_samples, properties, flags, breaks,
                                       lengths, next_samples);
            if ((breaks[0] | breaks[1]) != 0) {
                flags = flags_before;
                lengths = lengths_before;
                next_samples = next_samples_before;
                breaks = Lanes{0, 0};
                MovePlan::fill_run(copy, begin, static_cast<size_t>(movement - movements));
                storing = true;
                scanner.template run<true>(movement, block_end, next_copy, first, last_samples, properties, flags,
                                           breaks, lengths, next_samples);
            }
        }
        if (next_copy != nullptr) {
            next_copy += block_end - movement;
        }
        movement = block_end;
    }
    // here the list broke its run (every movement so far is stored), or all
    // of it was read
    scanner.template run<false>(movement, stop, next_copy, first, last_samples, properties, flags, breaks, lengths,
                                next_samples);
    return {flags[0] | flags[1], breaks[0] | breaks[1], breaks[1], lengths[1], begin, end,
            storing || end - begin <= 1};
}

// What lies between a part starting at `begin` (> 0) and the movements
// before it, read from `copy` (complete by now): whether its first movement
// continues the one before it, with the ranges of movement 0 (then, with
// the part's own comparisons, every movement of the part has them).
inline void join_part(MoveScan& part, const mts_data_movement_t* copy) noexcept {
    const Lanes samples = load_lanes(&copy[part.begin].sample_in);
    const Lanes before = load_lanes(&copy[part.begin - 1].sample_in);
    const Lanes gap = samples - (before + Lanes{1, 1});
    const Lanes starts = load_lanes(&copy[part.begin].properties_start_in) ^
                         load_lanes(&copy[0].properties_start_in);
    const Lanes tail = load_lanes(&copy[part.begin].properties_start_out) ^
                       load_lanes(&copy[0].properties_start_out);
    const Lanes breaks = gap | starts | tail;
    part.not_one_run |= breaks[0] | breaks[1];
    part.out_of_order |= gap[1];
}

}  // namespace mtsarray::detail::move_scan
