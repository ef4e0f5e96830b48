#include "cpu/gather.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/parallel_split.hpp"

namespace mtsarray::detail::cpu {

namespace {

// Plans moving less than this are likely in cache already: prefetching
// would only add instructions.
constexpr uint64_t prefetch_from_bytes = uint64_t(256) << 10;
// Movements whose input rows are prefetched before they are copied: enough
// cache misses in flight to hide the memory latency of scattered rows.
constexpr size_t prefetch_batch = 16;
constexpr size_t cache_line = 64;
// At most this much of each input row, and this many rows of a movement,
// are prefetched (the hardware prefetcher follows longer streams itself).
constexpr uint64_t prefetched_row_bytes = 256;
constexpr uint64_t prefetched_rows = 4;

// Movement blocks handed to one task: at least this many movements, and at
// least this many blocks per thread (dynamic scheduling evens out rows of
// different lengths and threads slowed down by the rest of the machine).
constexpr size_t min_block_movements = 64;
constexpr size_t blocks_per_thread = 16;

// Rows of one or a few properties are the common move_data case (gathers
// into keys_to_properties outputs): a fixed-size memcpy compiles to plain
// loads and stores, where a call to memcpy would cost more than the copy.
inline void copy_row(unsigned char* destination, const unsigned char* source, size_t bytes) {
    switch (bytes) {
    case 1: std::memcpy(destination, source, 1); return;
    case 2: std::memcpy(destination, source, 2); return;
    case 4: std::memcpy(destination, source, 4); return;
    case 8: std::memcpy(destination, source, 8); return;
    case 12: std::memcpy(destination, source, 12); return;
    case 16: std::memcpy(destination, source, 16); return;
    case 24: std::memcpy(destination, source, 24); return;
    case 32: std::memcpy(destination, source, 32); return;
    case 64: std::memcpy(destination, source, 64); return;
    case 128: std::memcpy(destination, source, 128); return;
    case 256: std::memcpy(destination, source, 256); return;
    default: std::memcpy(destination, source, bytes); return;
    }
}

struct Arrays {
    unsigned char* output;
    const unsigned char* input;
    uint64_t input_row_stride;
    uint64_t output_row_stride;
};

Arrays arrays_of(void* output, const void* input, const MovePlan& plan) {
    return {static_cast<unsigned char*>(output), static_cast<const unsigned char*>(input), plan.input_row_stride(),
            plan.output_row_stride()};
}

void copy_runs(const Arrays& arrays, const MovePlan& plan) {
    plan.for_each_run([&](const MoveRun& run) {
        auto* destination = arrays.output + run.output_offset;
        const auto* source = arrays.input + run.input_offset;
        for (uint64_t row = 0; row < run.rows; row++) {
            copy_row(destination, source, run.bytes);
            destination += arrays.output_row_stride;
            source += arrays.input_row_stride;
        }
    });
}

void prefetch_inputs(const Arrays& arrays, const MovePlan& plan) {
    for (size_t i = 0; i < plan.movements_count(); i++) {
        const MoveRun run = plan.run_of(plan.movement(i));
        const uint64_t bytes = std::min(run.bytes, prefetched_row_bytes);
        const uint64_t rows = bytes == 0 ? 0 : std::min(run.rows, prefetched_rows);
        for (uint64_t row = 0; row < rows; row++) {
            const auto* source = arrays.input + run.input_offset + row * arrays.input_row_stride;
            for (uint64_t offset = 0; offset < bytes; offset += cache_line) {
                __builtin_prefetch(source + offset);
            }
        }
    }
}

// The copy of `plan`, with the input rows of each batch of movements
// prefetched first when the plan is too large to be in cache.
void copy_movements(const Arrays& arrays, const MovePlan& plan, bool prefetch) {
    if (!prefetch) {
        copy_runs(arrays, plan);
        return;
    }
    const size_t count = plan.movements_count();
    for (size_t begin = 0; begin < count; begin += prefetch_batch) {
        const size_t end = std::min(begin + prefetch_batch, count);
        const MovePlan batch = plan.slice(begin, end);
        prefetch_inputs(arrays, batch);
        copy_runs(arrays, batch);
    }
}

// Whether no two movements write the same output sample (then they write
// disjoint bytes and may be copied in any order, by any thread). Cheap when
// the output samples increase (validate() saw it); otherwise one pass over
// the movements with a bitmap of the output samples, when that bitmap is
// small next to the copy; otherwise "no".
bool outputs_disjoint(const MovePlan& plan, const MoveSummary& summary) {
    if (summary.output_samples_increase) {
        return true;
    }
    const uint64_t samples = plan.output_samples();
    if (samples / 8 > summary.bytes / 64) {
        return false;
    }
    std::vector<uint64_t> written(samples / 64 + 1, 0);
    for (size_t i = 0; i < plan.movements_count(); i++) {
        const uintptr_t sample = plan.movement(i).sample_out;
        const uint64_t bit = uint64_t(1) << (sample % 64);
        if ((written[sample / 64] & bit) != 0) {
            return false;
        }
        written[sample / 64] |= bit;
    }
    return true;
}

// Many movements: blocks of consecutive movements, each copied like the
// serial code does (coalesced runs, prefetching).
void copy_in_movement_blocks(const Arrays& arrays, const MovePlan& plan, size_t threads, bool prefetch) {
    const size_t count = plan.movements_count();
    const size_t block = std::max(min_block_movements, (count + threads * blocks_per_thread - 1) /
                                                           (threads * blocks_per_thread));
    const size_t blocks = (count + block - 1) / block;
    auto task = [&](size_t index) {
        const size_t begin = index * block;
        copy_movements(arrays, plan.slice(begin, std::min(begin + block, count)), prefetch);
    };
    run_tasks(blocks, threads, TaskBody(task));
}

// Copies bytes [begin, end) of `run`, counted row after row.
void copy_part_of_run(const Arrays& arrays, const MoveRun& run, uint64_t begin, uint64_t end) {
    uint64_t row = begin / run.bytes;
    uint64_t offset = begin % run.bytes;
    while (begin < end) {
        const uint64_t bytes = std::min(run.bytes - offset, end - begin);
        std::memcpy(arrays.output + run.output_offset + row * arrays.output_row_stride + offset,
                    arrays.input + run.input_offset + row * arrays.input_row_stride + offset, bytes);
        begin += bytes;
        row++;
        offset = 0;
    }
}

// Few movements with much to copy each (one large movement, a few hundred
// long rows): the runs' bytes end to end, cut into equal pieces.
void copy_in_byte_pieces(const Arrays& arrays, const MovePlan& plan, size_t threads) {
    std::vector<MoveRun> runs;
    std::vector<uint64_t> starts;  // of each run in the bytes end to end
    uint64_t total = 0;
    plan.for_each_run([&](const MoveRun& run) {
        runs.push_back(run);
        starts.push_back(total);
        total += run.bytes * run.rows;
    });
    if (total == 0) {
        return;
    }
    for_each_piece(total, cache_line, threads, [&](size_t begin, size_t end) {
        // the last run starting at or before `begin`
        size_t index = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin()) - 1;
        for (; index < runs.size() && starts[index] < end; index++) {
            const MoveRun& run = runs[index];
            const uint64_t run_end = starts[index] + run.bytes * run.rows;
            const uint64_t from = std::max<uint64_t>(begin, starts[index]) - starts[index];
            const uint64_t to = std::min<uint64_t>(end, run_end) - starts[index];
            if (from < to) {
                copy_part_of_run(arrays, run, from, to);
            }
        }
    });
}

}  // namespace

GatherSplit choose_split(const MovePlan& plan, const MoveSummary& summary, size_t threads) {
    if (threads <= 1 || !outputs_disjoint(plan, summary)) {
        return GatherSplit::serial;
    }
    if (plan.movements_count() >= threads * min_block_movements) {
        return GatherSplit::movement_blocks;
    }
    return GatherSplit::byte_pieces;
}

void gather(void* output, const void* input, const MovePlan& plan, const MoveSummary& summary, size_t threads) {
    const Arrays arrays = arrays_of(output, input, plan);
    const bool prefetch = summary.bytes >= prefetch_from_bytes;
    switch (choose_split(plan, summary, threads)) {
    case GatherSplit::serial: return copy_movements(arrays, plan, prefetch);
    case GatherSplit::movement_blocks: return copy_in_movement_blocks(arrays, plan, threads, prefetch);
    case GatherSplit::byte_pieces: return copy_in_byte_pieces(arrays, plan, threads);
    }
}

}  // namespace mtsarray::detail::cpu
