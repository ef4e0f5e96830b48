#pragma once
// The copy of rows that every move_data loop of the CPU backend shares
// (cpu/move_data.cpp and its AVX2 variant): the arrays seen as bytes, a run
// of rows, prefetching the rows of later movements. Internal to
// move_data.cpp, the one file that includes it.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <metatensor.h>

#include "base/move_plan.hpp"

namespace mtsarray::detail::cpu {

namespace {

// Plans that copy at least this much mostly read an input that is not in
// the caches (the benchmark's 10^5 rows of 256 bytes read 24 MiB): their
// scattered input rows are fetched ahead (`prefetch_later_input`). Below,
// the input is mostly cached and the prefetches would be instructions for
// nothing (the "moves=1e4" rows run as fast without them).
constexpr uint64_t prefetch_threshold_bytes = uint64_t(8) << 20;
// How many movements ahead, and how much of each row (the hardware
// prefetcher follows a longer row once it has started).
constexpr size_t prefetch_distance = 8;
constexpr size_t prefetch_row_bytes = 512;

struct Arrays {
    unsigned char* output;
    const unsigned char* input;
    uint64_t input_row_stride;
    uint64_t output_row_stride;
    bool prefetch_inputs;  // of scattered movements: see prefetch_threshold_bytes
};

Arrays arrays_of(void* output, const void* input, const MovePlan& plan, uint64_t bytes) {
    return {static_cast<unsigned char*>(output), static_cast<const unsigned char*>(input), plan.input_row_stride(),
            plan.output_row_stride(), bytes >= prefetch_threshold_bytes};
}

// Movements as the copy loops read them: their offsets and bytes, from
// whole movements (a plan's, `WholeMovements`) or from the samples of
// movements that share one property range (`SharedRanges`, what
// move_data's check stores of the common gathers: 16 bytes a movement
// instead of 40). `from(i)`: the view that starts at movement i.
struct WholeMovements {
    const mts_data_movement_t* movements;
    uint64_t input_sample;
    uint64_t output_sample;
    uint64_t element;

    uint64_t input_offset(size_t i) const noexcept {
        return movements[i].sample_in * input_sample + movements[i].properties_start_in * element;
    }
    uint64_t output_offset(size_t i) const noexcept {
        return movements[i].sample_out * output_sample + movements[i].properties_start_out * element;
    }
    uint64_t bytes(size_t i) const noexcept { return movements[i].properties_length * element; }
    uint64_t sample_out(size_t i) const noexcept { return movements[i].sample_out; }
    WholeMovements from(size_t i) const noexcept { return {movements + i, input_sample, output_sample, element}; }
};

struct SharedRanges {
    const uint64_t* samples;  // (sample_in, sample_out) of each movement
    uint64_t input_sample;
    uint64_t output_sample;
    uint64_t input_start;   // properties_start_in * element, of every movement
    uint64_t output_start;  // properties_start_out * element
    uint64_t run_bytes;     // properties_length * element

    uint64_t input_offset(size_t i) const noexcept { return samples[2 * i] * input_sample + input_start; }
    uint64_t output_offset(size_t i) const noexcept { return samples[2 * i + 1] * output_sample + output_start; }
    uint64_t bytes(size_t) const noexcept { return run_bytes; }
    uint64_t sample_out(size_t i) const noexcept { return samples[2 * i + 1]; }
    SharedRanges from(size_t i) const noexcept {
        return {samples + 2 * i, input_sample, output_sample, input_start, output_start, run_bytes};
    }
};

// Starts reading the input row of movement `later` (`prefetch_distance`
// after the one being copied): scattered samples of a large input are not
// in the caches, and the hardware prefetcher can not guess which one comes
// next (the "moves=1e5 scattered" rows of mtsarray-bench show what it
// gains). (The last movements of a block of a multi-threaded plan are not
// prefetched: `count` is the block's.)
template <size_t Bytes, typename Movements>
[[gnu::always_inline]] inline void prefetch_later_input(const Movements& movements, size_t later, size_t count,
                                                        const unsigned char* input) {
    constexpr size_t bytes = Bytes < prefetch_row_bytes ? Bytes : prefetch_row_bytes;
    if (later < count) {
        const unsigned char* row = input + movements.input_offset(later);
        for (size_t offset = 0; offset < bytes; offset += 64) {
            __builtin_prefetch(row + offset);
        }
    }
}

// `rows` rows of `bytes` bytes. Always inlined: with a constant `bytes`
// (copy_fixed_rows) the memcpy becomes plain loads and stores.
[[gnu::always_inline]] inline void copy_rows(unsigned char* destination, const unsigned char* source,
                                             uint64_t bytes, uint64_t rows, uint64_t output_row_stride,
                                             uint64_t input_row_stride) {
    for (uint64_t row = 0; row < rows; row++) {
        std::memcpy(destination, source, bytes);
        destination += output_row_stride;
        source += input_row_stride;
    }
}

template <size_t Bytes>
void copy_fixed_rows(unsigned char* destination, const unsigned char* source, uint64_t rows,
                     uint64_t output_row_stride, uint64_t input_row_stride) {
    copy_rows(destination, source, Bytes, rows, output_row_stride, input_row_stride);
}

// One run: its rows of the same width. Rows of one or a few properties are
// the common move_data case (gathers into keys_to_properties outputs): a
// fixed-size memcpy compiles to plain loads and stores, where a call to
// memcpy would cost more than the copy. Out of line, so that the loop over
// the movements stays small (its registers are not spilled around the
// copies).
[[gnu::noinline]] void copy_run(const Arrays& arrays, const MoveRun& run) {
    auto* destination = arrays.output + run.output_offset;
    const auto* source = arrays.input + run.input_offset;
    const uint64_t out_row = arrays.output_row_stride;
    const uint64_t in_row = arrays.input_row_stride;
    switch (run.bytes) {
    case 1: return copy_fixed_rows<1>(destination, source, run.rows, out_row, in_row);
    case 2: return copy_fixed_rows<2>(destination, source, run.rows, out_row, in_row);
    case 4: return copy_fixed_rows<4>(destination, source, run.rows, out_row, in_row);
    case 8: return copy_fixed_rows<8>(destination, source, run.rows, out_row, in_row);
    case 12: return copy_fixed_rows<12>(destination, source, run.rows, out_row, in_row);
    case 16: return copy_fixed_rows<16>(destination, source, run.rows, out_row, in_row);
    case 24: return copy_fixed_rows<24>(destination, source, run.rows, out_row, in_row);
    case 32: return copy_fixed_rows<32>(destination, source, run.rows, out_row, in_row);
    case 64: return copy_fixed_rows<64>(destination, source, run.rows, out_row, in_row);
    case 128: return copy_fixed_rows<128>(destination, source, run.rows, out_row, in_row);
    case 256: return copy_fixed_rows<256>(destination, source, run.rows, out_row, in_row);
    default: return copy_rows(destination, source, run.bytes, run.rows, out_row, in_row);
    }
}

}  // namespace

}  // namespace mtsarray::detail::cpu
