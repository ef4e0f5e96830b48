#include "cpu/move_scan_avx2.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/move_plan_scan.hpp"

namespace mtsarray::detail::cpu {

namespace {

using move_scan::FirstRanges;
using move_scan::Lanes;
using move_scan::MovementLanes;
using move_scan::range_flags;
using move_scan::read_movement;
using move_scan::scan_block;
using move_scan::ScanOneAtATime;
using move_scan::scan_range;
using move_scan::top_bits;

[[gnu::always_inline]] inline bool any_bit(Lanes lanes) noexcept { return (lanes[0] | lanes[1]) != 0; }

// The movement a part of scan_compact() differs at in its ranges, `at`
// (read with the one after it when `read` is 2: the second's samples
// checked too): the movements before it, stored as samples, are written
// whole into `copy`, then those read, their ranges checked, and `Scanner`
// goes on with the rest into `copy`. Vectors, not MovementLanes: the loops
// that call this keep their movements in registers.
template <typename Scanner>
[[gnu::noinline, gnu::cold]] CompactScan continue_whole(const mts_data_movement_t* movements, const uint64_t* samples,
                                                         mts_data_movement_t* copy, size_t begin, size_t at,
                                                         size_t read, size_t end, Lanes samples_1, Lanes starts_1,
                                                         Lanes tail_1, Lanes samples_2, Lanes starts_2, Lanes tail_2,
                                                         Lanes last_samples, Lanes properties, Lanes flags,
                                                         Lanes breaks, const Scanner& scanner) {
    const mts_data_movement_t first = copy[begin];
    fill_from_samples(copy, samples, begin, at);
    copy[at] = {samples_1[0], samples_1[1], starts_1[0], tail_1[0], tail_1[1]};
    flags |= range_flags(samples_1, starts_1, tail_1, last_samples, properties);
    Lanes lengths = {0, first.properties_length * (at - begin) + tail_1[1]};
    Lanes next_samples = samples_1 + Lanes{1, 1};
    if (read == 2) {
        copy[at + 1] = {samples_2[0], samples_2[1], starts_2[0], tail_2[0], tail_2[1]};
        flags |= range_flags(samples_2, starts_2, tail_2, last_samples, properties);
        lengths += Lanes{0, tail_2[1]};
        next_samples = samples_2 + Lanes{1, 1};
    }
    breaks |= Lanes{1, 0};  // not one run: a range differs
    scanner.template run<false>(movements + at + read, movements + end, copy + at + read, FirstRanges{},
                                last_samples, properties, flags, breaks, lengths, next_samples);
    return {{flags[0] | flags[1], breaks[0] | breaks[1], breaks[1], lengths[1], begin, end, true}, false};
}

// scan_compact_range()'s loop over movements stored as samples, two at a
// time: none in the portable scan.
struct NoPairs {
    template <typename Scanner>
    [[gnu::always_inline]] bool run(const mts_data_movement_t*, uint64_t*, mts_data_movement_t*, size_t, size_t&,
                                    size_t, const MovementLanes&, Lanes, Lanes, Lanes&, Lanes&, Lanes&,
                                    const Scanner&, CompactScan&) const {
        return false;
    }
};

// scan_compact() on [begin, end) (begin < end), `Scanner` going on where
// the ranges differ. Without a store while the part is one run (its samples
// follow from the first one's), then the samples of each movement; the
// ranges of each movement are compared with the first one's, and checked
// where they differ (continue_whole: a branch taken once, if ever, in a
// part); the same flags as range_flags() otherwise.
template <typename Pairs, typename Scanner>
[[gnu::always_inline]] inline CompactScan scan_compact_range(const mts_data_movement_t* movements,
                                                             uint64_t* samples, mts_data_movement_t* copy,
                                                             size_t begin, size_t end, Lanes last_samples,
                                                             Lanes properties, const Pairs& pairs,
                                                             const Scanner& scanner) {
    const Lanes ones = {1, 1};
    // locals, not a result's fields (which may live in memory)
    Lanes flags = (last_samples | properties) & top_bits;
    Lanes breaks = {0, 0};
    const MovementLanes head = read_movement(movements + begin, copy + begin);
    std::memcpy(samples + 2 * begin, &head.samples, sizeof(Lanes));
    flags |= range_flags(head, last_samples, properties);
    Lanes next_samples = head.samples + ones;
    const uint64_t head_length = head.tail[1];
    size_t i = begin + 1;
    for (; i < end; i++) {  // one run so far
        const MovementLanes lanes = read_movement(movements + i, nullptr);
        flags |= (last_samples - lanes.samples) | lanes.samples;
        const Lanes gap = lanes.samples - next_samples;
        const Lanes differ = (lanes.starts ^ head.starts) | (lanes.tail ^ head.tail);
        next_samples = lanes.samples + ones;
        if (__builtin_expect(any_bit(gap | differ), 0)) {
            // the samples of the run so far, then as read
            fill_run_samples(samples, begin, i);
            std::memcpy(samples + 2 * i, &lanes.samples, sizeof(Lanes));
            breaks |= gap;
            if (any_bit(differ)) {
                return continue_whole(movements, samples, copy, begin, i, 1, end, lanes.samples, lanes.starts,
                                      lanes.tail, lanes.samples, lanes.starts, lanes.tail, last_samples,
                                      properties, flags, breaks, scanner);
            }
            break;
        }
    }
    if (i == end) {
        return {{flags[0] | flags[1], 0, 0, head_length * (end - begin), begin, end, end - begin <= 1}, true};
    }
    i++;
    CompactScan whole;
    if (pairs.run(movements, samples, copy, begin, i, end, head, last_samples, properties, flags, breaks,
                  next_samples, scanner, whole)) {
        return whole;
    }
    for (; i < end; i++) {
        const MovementLanes lanes = read_movement(movements + i, nullptr);
        std::memcpy(samples + 2 * i, &lanes.samples, sizeof(Lanes));
        flags |= (last_samples - lanes.samples) | lanes.samples;
        breaks |= lanes.samples - next_samples;
        const Lanes differ = (lanes.starts ^ head.starts) | (lanes.tail ^ head.tail);
        next_samples = lanes.samples + ones;
        if (__builtin_expect(any_bit(differ), 0)) {
            return continue_whole(movements, samples, copy, begin, i, 1, end, lanes.samples, lanes.starts,
                                  lanes.tail, lanes.samples, lanes.starts, lanes.tail, last_samples, properties,
                                  flags, breaks, scanner);
        }
    }
    return {{flags[0] | flags[1], breaks[0] | breaks[1], breaks[1], head_length * (end - begin), begin, end, true},
            true};
}

[[gnu::noinline]] CompactScan scan_compact_baseline(const mts_data_movement_t* movements, uint64_t* samples,
                                                    mts_data_movement_t* copy, size_t begin, size_t end,
                                                    Lanes last_samples, Lanes properties) {
    return scan_compact_range(movements, samples, copy, begin, end, last_samples, properties, NoPairs{},
                              ScanOneAtATime{});
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__AVX2__)
#define MTSARRAY_AVX2_MOVE_SCAN 1
// Four 64-bit lanes: two movements side by side, (in, out) of the first
// then of the second.
typedef uint64_t PairLanes __attribute__((vector_size(32)));

[[gnu::always_inline]] __attribute__((target("avx2"))) inline PairLanes both(Lanes lanes) noexcept {
    return __builtin_shufflevector(lanes, lanes, 0, 1, 0, 1);
}
[[gnu::always_inline]] __attribute__((target("avx2"))) inline PairLanes join(Lanes first, Lanes second) noexcept {
    // one vinserti128 (a shuffle of two registers compiles to two moves and a vperm2i128)
    return PairLanes(_mm256_inserti128_si256(_mm256_castsi128_si256(__m128i(first)), __m128i(second), 1));
}

// The same pass, two movements at a time where the CPU has AVX2: the same
// expressions on each movement, so the same bits in the end (or-ed and
// added up the same way), and the same copy (each movement read once by
// read_movement), with about half the instructions of the baseline x86-64
// build's 2-lane SSE2 loop. The check is most of the cost of a small
// move_data call (the "moves=100" rows of mtsarray-bench).
struct ScanTwoAtATime {
    template <bool Ranges>
    __attribute__((target("avx2"))) void run(const mts_data_movement_t* begin, const mts_data_movement_t* end,
                                             mts_data_movement_t* copy, const FirstRanges& first,
                                             Lanes last_samples, Lanes properties, Lanes& flags, Lanes& breaks,
                                             Lanes& lengths, Lanes& next_samples) const {
        if (end - begin >= 2) {
            const PairLanes ones = {1, 1, 1, 1};
            const PairLanes last_samples_2 = both(last_samples);
            const PairLanes properties_2 = both(properties);
            const PairLanes first_starts = both(first.starts);
            const PairLanes first_tail = both(first.tail);
            PairLanes flags_2 = {0, 0, 0, 0};
            PairLanes breaks_2 = {0, 0, 0, 0};
            PairLanes lengths_2 = {0, 0, 0, 0};
            // lanes 2, 3: the samples before the next pair's, minus one for
            // the pass's expectation (next_samples)
            PairLanes previous = both(next_samples - Lanes{1, 1});
            for (; end - begin >= 2; begin += 2) {
                const MovementLanes one = read_movement(begin, copy);
                const MovementLanes two = read_movement(begin + 1, copy == nullptr ? nullptr : copy + 1);
                if (copy != nullptr) {
                    copy += 2;
                }
                const PairLanes samples = join(one.samples, two.samples);
                const PairLanes starts = join(one.starts, two.starts);
                const PairLanes tail = join(one.tail, two.tail);
                const PairLanes length = __builtin_shufflevector(tail, tail, 1, 1, 3, 3);
                const PairLanes range_starts = __builtin_shufflevector(starts, tail, 0, 4, 2, 6);
                flags_2 |= (last_samples_2 - samples) | (properties_2 - (range_starts + length)) | samples | starts |
                           tail;
                // each movement's samples against the movement before it
                breaks_2 |= samples - (__builtin_shufflevector(previous, samples, 2, 3, 4, 5) + ones);
                if (Ranges) {
                    breaks_2 |= (starts ^ first_starts) | (tail ^ first_tail);
                }
                lengths_2 += tail;
                previous = samples;
            }
            flags |= Lanes{flags_2[0] | flags_2[2], flags_2[1] | flags_2[3]};
            breaks |= Lanes{breaks_2[0] | breaks_2[2], breaks_2[1] | breaks_2[3]};
            lengths += Lanes{lengths_2[0] + lengths_2[2], lengths_2[1] + lengths_2[3]};
            next_samples = Lanes{previous[2] + 1, previous[3] + 1};
        }
        // an odd movement at the end
        scan_block<Ranges>(begin, end, copy, first, last_samples, properties, flags, breaks, lengths, next_samples);
    }
};

// scan_compact_range()'s loop over movements stored as samples, two at a
// time where the CPU has AVX2: the same stores and bits as one at a time.
// Stops at the end of the pairs (`i` then at the odd movement left, if
// any) or at a pair one of whose ranges differs (true, `whole` then the
// part's scan: continue_whole).
struct StoredPairs {
    template <typename Scanner>
    __attribute__((target("avx2"))) bool run(const mts_data_movement_t* movements, uint64_t* samples,
                                             mts_data_movement_t* copy, size_t begin, size_t& i, size_t end,
                                             const MovementLanes& head, Lanes last_samples, Lanes properties,
                                             Lanes& flags, Lanes& breaks, Lanes& next_samples,
                                             const Scanner& scanner, CompactScan& whole) const {
        if (end - i < 2) {
            return false;
        }
        const PairLanes ones = {1, 1, 1, 1};
        const PairLanes last_samples_2 = both(last_samples);
        const PairLanes head_starts = both(head.starts);
        const PairLanes head_tail = both(head.tail);
        PairLanes flags_2 = {0, 0, 0, 0};
        PairLanes breaks_2 = {0, 0, 0, 0};
        // lanes 2, 3: the samples before the next pair's, minus one
        PairLanes previous = both(next_samples - Lanes{1, 1});
        bool differs = false;
        MovementLanes one;
        MovementLanes two;
        for (; end - i >= 2; i += 2) {
            one = read_movement(movements + i, nullptr);
            two = read_movement(movements + i + 1, nullptr);
            const PairLanes pair_samples = join(one.samples, two.samples);
            std::memcpy(samples + 2 * i, &pair_samples, sizeof(PairLanes));
            flags_2 |= (last_samples_2 - pair_samples) | pair_samples;
            breaks_2 |= pair_samples - (__builtin_shufflevector(previous, pair_samples, 2, 3, 4, 5) + ones);
            previous = pair_samples;
            const PairLanes differ = (join(one.starts, two.starts) ^ head_starts) | (join(one.tail, two.tail) ^ head_tail);
            if (__builtin_expect(!_mm256_testz_si256(__m256i(differ), __m256i(differ)), 0)) {
                differs = true;
                break;
            }
        }
        flags |= Lanes{flags_2[0] | flags_2[2], flags_2[1] | flags_2[3]};
        breaks |= Lanes{breaks_2[0] | breaks_2[2], breaks_2[1] | breaks_2[3]};
        next_samples = Lanes{previous[2] + 1, previous[3] + 1};
        if (differs) {
            whole = continue_whole(movements, samples, copy, begin, i, 2, end, one.samples, one.starts, one.tail,
                                   two.samples, two.starts, two.tail, last_samples, properties, flags, breaks,
                                   scanner);
        }
        return differs;
    }
};

[[gnu::noinline, gnu::flatten]] __attribute__((target("avx2"))) MoveScan scan_range_avx2(
    const mts_data_movement_t* movements, mts_data_movement_t* copy, size_t begin, size_t end, Lanes last_samples,
    Lanes properties) {
    return scan_range(movements, copy, begin, end, last_samples, properties, ScanTwoAtATime{});
}

[[gnu::noinline, gnu::flatten]] __attribute__((target("avx2"))) CompactScan scan_compact_avx2(
    const mts_data_movement_t* movements, uint64_t* samples, mts_data_movement_t* copy, size_t begin, size_t end,
    Lanes last_samples, Lanes properties) {
    return scan_compact_range(movements, samples, copy, begin, end, last_samples, properties, StoredPairs{},
                              ScanTwoAtATime{});
}
#endif

}  // namespace

MoveScan scan_movements(const MovePlan& plan, size_t begin, size_t end, mts_data_movement_t* copy,
                        InstructionSet instructions) noexcept {
#if defined(MTSARRAY_AVX2_MOVE_SCAN)
    if (instructions == InstructionSet::best && cpu_has_avx2()) {
        const MoveBounds bounds = plan.bounds();
        const Lanes last_samples = {bounds.samples_in - 1, bounds.samples_out - 1};
        const Lanes properties = {bounds.properties_in, bounds.properties_out};
        return scan_range_avx2(&plan.movement(0), copy, begin, end, last_samples, properties);
    }
#else
    (void)instructions;
#endif
    return plan.scan_part(begin, end, copy);
}

}  // namespace mtsarray::detail::cpu

namespace mtsarray::detail::cpu {

CompactScan scan_compact(const MovePlan& plan, size_t begin, size_t end, uint64_t* samples,
                         mts_data_movement_t* copy, InstructionSet instructions) noexcept {
    const MoveBounds bounds = plan.bounds();
    const Lanes last_samples = {bounds.samples_in - 1, bounds.samples_out - 1};
    const Lanes properties = {bounds.properties_in, bounds.properties_out};
    if (begin == end) {
        const Lanes flags = (last_samples | properties) & top_bits;
        return {{flags[0] | flags[1], 0, 0, 0, begin, end, true}, true};
    }
#if defined(MTSARRAY_AVX2_MOVE_SCAN)
    if (instructions == InstructionSet::best && cpu_has_avx2()) {
        return scan_compact_avx2(&plan.movement(0), samples, copy, begin, end, last_samples, properties);
    }
#else
    (void)instructions;
#endif
    return scan_compact_baseline(&plan.movement(0), samples, copy, begin, end, last_samples, properties);
}

}  // namespace mtsarray::detail::cpu
