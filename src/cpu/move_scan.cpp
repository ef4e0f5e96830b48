#include "cpu/move_scan.hpp"

#include <cstdint>
#include <cstring>

#include "base/move_scan.hpp"

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

// Movements whose ranges scan_compact() keeps on the stack at a time (32
// bytes each: in L1 with the block's samples), and the first block of a
// part, shorter: a scattered list shows it at once.
constexpr size_t compact_block = 128;
constexpr size_t first_compact_block = 8;

// Where scan_compact() keeps the ranges of movement j of a block, 8
// entries a pair of movements: (properties_start_in, the second read of
// properties_start_out) of both, then (properties_start_out,
// properties_length) of both, so that a pair is two 32-byte stores.
inline size_t starts_entry(size_t j) noexcept { return (j / 2) * 8 + (j % 2) * 2; }
inline size_t tail_entry(size_t j) noexcept { return starts_entry(j) + 4; }

// One block of scan_compact(): movements [block, block_end) read once each,
// their samples stored into `stored_samples` (2 entries a movement: the
// list's, or the stack while the part may still be one run) and their
// ranges into `ranges` (starts_entry, tail_entry). Checks the samples
// only: the ranges are compared with the part's first movement (`differ`),
// and checked from `ranges` where they differ (the same values).
struct CompactBlockOneAtATime {
    [[gnu::always_inline]] void run(const mts_data_movement_t* movements, size_t block, size_t block_end,
                                    uint64_t* stored_samples, uint64_t* ranges, const MovementLanes& head,
                                    Lanes last_samples, Lanes& flags, Lanes& breaks, Lanes& differ,
                                    Lanes& next_samples, size_t first_j = 0) const {
        const Lanes ones = {1, 1};
        for (size_t i = block, j = first_j; i < block_end; i++, j++, stored_samples += 2) {
            const MovementLanes lanes = read_movement(movements + i, nullptr);
            std::memcpy(stored_samples, &lanes.samples, sizeof(Lanes));
            std::memcpy(ranges + starts_entry(j), &lanes.starts, sizeof(Lanes));
            std::memcpy(ranges + tail_entry(j), &lanes.tail, sizeof(Lanes));
            flags |= (last_samples - lanes.samples) | lanes.samples;
            breaks |= lanes.samples - next_samples;
            differ |= (lanes.starts ^ head.starts) | (lanes.tail ^ head.tail);
            next_samples = lanes.samples + ones;
        }
    }
};

// scan_compact() on [begin, end) (begin < end): `Scanner` goes on where the
// ranges differ.
template <typename BlockScanner, typename Scanner>
[[gnu::always_inline]] inline CompactScan scan_compact_range(const mts_data_movement_t* movements,
                                                             uint64_t* samples, mts_data_movement_t* copy,
                                                             size_t begin, size_t end, Lanes last_samples,
                                                             Lanes properties, const BlockScanner& block_scanner,
                                                             const Scanner& scanner) {
    const Lanes ones = {1, 1};
    // locals, not a result's fields (which may live in memory)
    Lanes flags = (last_samples | properties) & top_bits;
    Lanes breaks = {0, 0};
    Lanes differ = {0, 0};
    const MovementLanes head = read_movement(movements + begin, copy + begin);
    std::memcpy(samples + 2 * begin, &head.samples, sizeof(Lanes));
    flags |= range_flags(head, last_samples, properties);
    Lanes next_samples = head.samples + ones;
    const uint64_t head_length = head.tail[1];
    // While the part is one run, its samples are kept on the stack: they
    // follow from the first one's, and are stored into `samples` only
    // once a block breaks the run (then every block is stored as read).
    bool one_run = true;
    uint64_t run_samples[2 * compact_block];
    uint64_t ranges[4 * compact_block];
    size_t block_size = first_compact_block;
    for (size_t block = begin + 1; block < end;) {
        const size_t block_end = end - block > block_size ? block + block_size : end;
        block_size = compact_block;
        block_scanner.run(movements, block, block_end, one_run ? run_samples : samples + 2 * block, ranges, head,
                          last_samples, flags, breaks, differ, next_samples);
        if (one_run && ((breaks[0] | breaks[1] | differ[0] | differ[1]) != 0)) {
            one_run = false;
            for (size_t i = begin + 1; i < block; i++) {
                const uint64_t step = i - begin;
                samples[2 * i] = samples[2 * begin] + step;
                samples[2 * i + 1] = samples[2 * begin + 1] + step;
            }
            std::memcpy(samples + 2 * block, run_samples, 2 * (block_end - block) * sizeof(uint64_t));
        }
        if ((differ[0] | differ[1]) != 0) {
            // from here on every movement whole, into `copy`: first those
            // seen so far, from what was stored of them, with the ranges of
            // this block checked
            const mts_data_movement_t first = copy[begin];
            for (size_t i = begin + 1; i < block; i++) {
                copy[i] = {samples[2 * i], samples[2 * i + 1], first.properties_start_in,
                           first.properties_start_out, first.properties_length};
            }
            Lanes lengths = {0, head_length * (block - begin)};
            for (size_t i = block; i < block_end; i++) {
                const uint64_t* starts_range = ranges + starts_entry(i - block);
                const uint64_t* tail_range = ranges + tail_entry(i - block);
                copy[i] = {samples[2 * i], samples[2 * i + 1], starts_range[0], tail_range[0], tail_range[1]};
                Lanes block_samples;
                Lanes starts;
                Lanes tail;
                std::memcpy(&block_samples, samples + 2 * i, sizeof(Lanes));
                std::memcpy(&starts, starts_range, sizeof(Lanes));
                std::memcpy(&tail, tail_range, sizeof(Lanes));
                flags |= range_flags(block_samples, starts, tail, last_samples, properties);
                lengths += tail;
            }
            breaks |= differ;
            scanner.template run<false>(movements + block_end, movements + end, copy + block_end, FirstRanges{},
                                        last_samples, properties, flags, breaks, lengths, next_samples);
            return {{flags[0] | flags[1], breaks[0] | breaks[1], breaks[1], lengths[1], begin, end, true}, false};
        }
        block = block_end;
    }
    return {{flags[0] | flags[1], breaks[0] | breaks[1], breaks[1], head_length * (end - begin), begin, end,
             !one_run || end - begin <= 1},
            true};
}

[[gnu::noinline]] CompactScan scan_compact_baseline(const mts_data_movement_t* movements, uint64_t* samples,
                                                    mts_data_movement_t* copy, size_t begin, size_t end,
                                                    Lanes last_samples, Lanes properties) {
    return scan_compact_range(movements, samples, copy, begin, end, last_samples, properties,
                              CompactBlockOneAtATime{}, ScanOneAtATime{});
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
    return __builtin_shufflevector(first, second, 0, 1, 2, 3);
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

// CompactBlockOneAtATime two movements at a time: the same stores and
// the same bits.
struct CompactBlockTwoAtATime {
    __attribute__((target("avx2"))) void run(const mts_data_movement_t* movements, size_t block, size_t block_end,
                                             uint64_t* stored_samples, uint64_t* ranges, const MovementLanes& head,
                                             Lanes last_samples, Lanes& flags, Lanes& breaks, Lanes& differ,
                                             Lanes& next_samples) const {
        size_t i = block;
        if (block_end - block >= 2) {
            const PairLanes ones = {1, 1, 1, 1};
            const PairLanes last_samples_2 = both(last_samples);
            const PairLanes head_starts = both(head.starts);
            const PairLanes head_tail = both(head.tail);
            PairLanes flags_2 = {0, 0, 0, 0};
            PairLanes breaks_2 = {0, 0, 0, 0};
            PairLanes differ_2 = {0, 0, 0, 0};
            // lanes 2, 3: the samples before the next pair's, minus one
            PairLanes previous = both(next_samples - Lanes{1, 1});
            uint64_t* range = ranges;
            for (; block_end - i >= 2; i += 2, stored_samples += 4, range += 8) {
                const MovementLanes one = read_movement(movements + i, nullptr);
                const MovementLanes two = read_movement(movements + i + 1, nullptr);
                const PairLanes samples = join(one.samples, two.samples);
                const PairLanes starts = join(one.starts, two.starts);
                const PairLanes tail = join(one.tail, two.tail);
                std::memcpy(stored_samples, &samples, sizeof(PairLanes));
                std::memcpy(range, &starts, sizeof(PairLanes));
                std::memcpy(range + 4, &tail, sizeof(PairLanes));
                flags_2 |= (last_samples_2 - samples) | samples;
                breaks_2 |= samples - (__builtin_shufflevector(previous, samples, 2, 3, 4, 5) + ones);
                differ_2 |= (starts ^ head_starts) | (tail ^ head_tail);
                previous = samples;
            }
            flags |= Lanes{flags_2[0] | flags_2[2], flags_2[1] | flags_2[3]};
            breaks |= Lanes{breaks_2[0] | breaks_2[2], breaks_2[1] | breaks_2[3]};
            differ |= Lanes{differ_2[0] | differ_2[2], differ_2[1] | differ_2[3]};
            next_samples = Lanes{previous[2] + 1, previous[3] + 1};
        }
        // an odd movement at the end
        CompactBlockOneAtATime{}.run(movements, i, block_end, stored_samples, ranges, head, last_samples, flags,
                                     breaks, differ, next_samples, i - block);
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
    return scan_compact_range(movements, samples, copy, begin, end, last_samples, properties,
                              CompactBlockTwoAtATime{}, ScanTwoAtATime{});
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
