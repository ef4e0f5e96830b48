#include "move_plan.hpp"

#include <cstddef>
#include <cstring>
#include <string>

#include "shape.hpp"
#include "error.hpp"

namespace mtsarray::detail {

namespace {

std::string movement_error(size_t index, const char* field, uintptr_t value, const std::string& why) {
    return "movement " + std::to_string(index) + ": " + field + " = " + std::to_string(value) + " " + why;
}

void check_sample(size_t index, const char* field, uintptr_t sample, uintptr_t samples, const char* side) {
    MTSARRAY_EXPECTS(sample < samples, movement_error(index, field, sample,
                                                      std::string("is out of range for an ") + side + " with " +
                                                          std::to_string(samples) + " samples"));
}

void check_properties(size_t index, const char* field, uintptr_t start, uintptr_t length, uintptr_t properties,
                      const char* side) {
    // written as a subtraction so that start + length can not overflow
    MTSARRAY_EXPECTS(start <= properties && length <= properties - start,
                     movement_error(index, field, start,
                                    "with properties_length = " + std::to_string(length) + " goes past the " +
                                        std::to_string(properties) + " properties of the " + side));
}

// Names the first bad field of a movement that failed in_range.
void validate_movement(size_t index, const mts_data_movement_t& movement, uintptr_t samples_in,
                       uintptr_t samples_out, uintptr_t properties_in, uintptr_t properties_out) {
    check_sample(index, "sample_in", movement.sample_in, samples_in, "input");
    check_sample(index, "sample_out", movement.sample_out, samples_out, "output");
    check_properties(index, "properties_start_in", movement.properties_start_in, movement.properties_length,
                     properties_in, "input");
    check_properties(index, "properties_start_out", movement.properties_start_out, movement.properties_length,
                     properties_out, "output");
}

}  // namespace

void MovePlan::reject(const Shape& output_shape, const Shape& input_shape,
                      const mts_data_movement_t* movements, size_t movements_count) {
    MTSARRAY_EXPECTS(input_shape.size() >= 2 && output_shape.size() >= 2,
                     "move_data needs arrays with at least two axes (samples and properties), got input " +
                         describe_shape(input_shape) + " and output " + describe_shape(output_shape));
    bool same_components = input_shape.size() == output_shape.size();
    for (size_t axis = 1; same_components && axis + 1 < input_shape.size(); axis++) {
        same_components = input_shape[axis] == output_shape[axis];
    }
    MTSARRAY_EXPECTS(same_components, "input " + describe_shape(input_shape) + " and output " +
                                          describe_shape(output_shape) +
                                          " do not have the same component axes");
    MTSARRAY_EXPECTS(movements != nullptr || movements_count == 0,
                     "movements is NULL but movements_count = " + std::to_string(movements_count));
    throw Error("move_data: invalid shapes");  // not reached: one of the checks above failed
}

namespace {

// Two 64-bit lanes (GCC and Clang vector extensions: SSE2 on x86-64, NEON
// on AArch64, plain code elsewhere): a movement's (sample_in, sample_out),
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
// scan_block() below is that pass, scan_range() its driver, and
// ScanTwoAtATime the same pass two movements at a time (AVX2).

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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__AVX2__)
#define MTSARRAY_AVX2_MOVE_SCAN 1
// Four 64-bit lanes: two movements side by side, (in, out) of the first
// then of the second.
typedef uint64_t PairLanes __attribute__((vector_size(32)));

[[gnu::always_inline]] __attribute__((target("avx2"))) inline PairLanes both(Lanes lanes) noexcept {
    return __builtin_shufflevector(lanes, lanes, 0, 1, 0, 1);
}
// The same two fields of a movement and of the next one.
[[gnu::always_inline]] __attribute__((target("avx2"))) inline PairLanes pair(const uintptr_t* field) noexcept {
    static_assert(sizeof(mts_data_movement_t) == 5 * sizeof(uintptr_t), "movements are 5 words apart");
    return __builtin_shufflevector(load_lanes(field), load_lanes(field + 5), 0, 1, 2, 3);
}

// The same pass, two movements at a time where the CPU has AVX2: the same
// expressions on each movement, so the same bits in the end (or-ed and
// added up the same way), in 19 instructions a movement where the baseline
// x86-64 build's 2-lane SSE2 loop takes 33: 1.6x faster (2.0 -> 1.25 ns,
// 100 and 10^4 movements, a driver outside the library). The check is most
// of the cost of a small move_data call (bench/README.md, "Movement
// checks").
struct ScanTwoAtATime {
    template <bool Ranges>
    __attribute__((target("avx2"))) void run(const mts_data_movement_t* begin, const mts_data_movement_t* end,
                                             const mts_data_movement_t* first, Lanes last_samples,
                                             Lanes properties, Lanes& flags, Lanes& breaks, Lanes& lengths,
                                             Lanes& next_samples) const {
        if (end - begin >= 2) {
            const PairLanes ones = {1, 1, 1, 1};
            const PairLanes last_samples_2 = both(last_samples);
            const PairLanes properties_2 = both(properties);
            const PairLanes first_starts = both(load_lanes(&first->properties_start_in));
            const PairLanes first_tail = both(load_lanes(&first->properties_start_out));
            PairLanes flags_2 = {0, 0, 0, 0};
            PairLanes breaks_2 = {0, 0, 0, 0};
            PairLanes lengths_2 = {0, 0, 0, 0};
            // lanes 2, 3: the samples before the next pair's, minus one for
            // the pass's expectation (next_samples)
            PairLanes previous = both(next_samples - Lanes{1, 1});
            for (; end - begin >= 2; begin += 2) {
                const PairLanes samples = pair(&begin->sample_in);
                const PairLanes starts = pair(&begin->properties_start_in);
                const PairLanes tail = pair(&begin->properties_start_out);
                const PairLanes length = __builtin_shufflevector(tail, tail, 1, 1, 3, 3);
                flags_2 |= (last_samples_2 - samples) | (properties_2 - (starts + length)) | samples | starts | tail;
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
        scan_block<Ranges>(begin, end, first, last_samples, properties, flags, breaks, lengths, next_samples);
    }
};

[[gnu::noinline, gnu::flatten]] __attribute__((target("avx2"))) MoveScan scan_range_avx2(
    const mts_data_movement_t* first, size_t begin, size_t end, Lanes last_samples, Lanes properties) {
    return scan_range(first, begin, end, last_samples, properties, ScanTwoAtATime{});
}
#endif

}  // namespace

MoveScan MovePlan::scan_part(size_t begin, size_t end, cpu::InstructionSet instructions) const noexcept {
    const Lanes last_samples = {samples_in_ - 1, samples_out_ - 1};
    const Lanes properties = {properties_in_, properties_out_};
#if defined(MTSARRAY_AVX2_MOVE_SCAN)
    if (instructions == cpu::InstructionSet::best && cpu::cpu_has_avx2()) {
        return scan_range_avx2(movements_, begin, end, last_samples, properties);
    }
#else
    (void)instructions;
#endif
    return scan_range(movements_, begin, end, last_samples, properties, ScanOneAtATime{});
}

bool MovePlan::may_be_out_of_range(const mts_data_movement_t* begin, const mts_data_movement_t* end) const noexcept {
    const Lanes last_samples = {samples_in_ - 1, samples_out_ - 1};
    const Lanes properties = {properties_in_, properties_out_};
    Lanes flags = (last_samples | properties) & top_bits;
    for (const mts_data_movement_t* movement = begin; movement != end; movement++) {
        flags |= range_flags(movement, last_samples, properties);
    }
    return ((flags[0] | flags[1]) & top_bits) != 0;
}

MoveSummary MovePlan::summarize(const MoveScan* parts, size_t count) const {
    MoveScan all = {0, 0, 0, 0};
    for (size_t i = 0; i < count; i++) {
        all.out_of_range |= parts[i].out_of_range;
        all.not_one_run |= parts[i].not_one_run;
        all.out_of_order |= parts[i].out_of_order;
        all.elements += parts[i].elements;
    }
    if (movements_count_ == 0) {
        return {0, true, false};
    }
    const bool flagged = (all.out_of_range & top_bits) != 0;
    if (flagged) {
        check_exactly();
    }
    // a flagged list was valid only with huge fields: no claim is made
    const bool increasing = !flagged && (all.out_of_order & top_bits) == 0;
    const bool one_run = !flagged && all.not_one_run == 0;
    return {all.elements * components_ * element_size_, increasing, one_run};
}

MoveSummary MovePlan::validate() const {
    if (movements_count_ == 0) {
        return {0, true, false};
    }
    const MoveScan all = scan_part(0, movements_count_);
    return summarize(&all, 1);
}

void MovePlan::check_exactly() const {
    for (size_t i = 0; i < movements_count_; i++) {
        if (!in_range(movements_[i])) {
            validate_movement(i, movements_[i], samples_in_, samples_out_, properties_in_, properties_out_);
        }
    }
}

}  // namespace mtsarray::detail
