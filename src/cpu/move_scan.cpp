#include "cpu/move_scan.hpp"

#include "base/move_scan.hpp"

namespace mtsarray::detail::cpu {

namespace {

using move_scan::FirstRanges;
using move_scan::Lanes;
using move_scan::MovementLanes;
using move_scan::read_movement;
using move_scan::scan_block;
using move_scan::scan_range;

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

[[gnu::noinline, gnu::flatten]] __attribute__((target("avx2"))) MoveScan scan_range_avx2(
    const mts_data_movement_t* movements, mts_data_movement_t* copy, size_t begin, size_t end, Lanes last_samples,
    Lanes properties) {
    return scan_range(movements, copy, begin, end, last_samples, properties, ScanTwoAtATime{});
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
