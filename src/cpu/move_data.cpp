#include "cpu/move_data.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/fault_injection.hpp"
#include "base/move_plan_scan.hpp"
#include "cpu/cpu_features.hpp"
#include "cpu/move_data_avx2.hpp"
#include "cpu/move_data_rows.hpp"
#include "cpu/move_scan_avx2.hpp"
#include "cpu/threads/parallel_split.hpp"
#include "cpu/threads/thread_count.hpp"

namespace mtsarray::detail::cpu {

namespace {

// Pieces of the byte split start on cache lines: threads do not share one.
constexpr size_t cache_line = 64;

// Movement blocks handed to one task: at least this many movements, and at
// least this many blocks per thread (dynamic scheduling evens out rows of
// different lengths and threads slowed down by the rest of the machine).
constexpr size_t min_block_movements = 64;
constexpr size_t blocks_per_thread = 16;


void copy_runs(const Arrays& arrays, const MovePlan& plan) {
    plan.for_each_run([&](const MoveRun& run) { copy_run(arrays, run); });
}

// Each movement on its own, without looking for runs to merge: the
// cheapest loop when movements are scattered (nothing would merge).
// Movements of one call mostly have one length: `Bytes` is the first
// movement's, copied with fixed-size code; any other goes through memcpy.
template <size_t Bytes, typename Movements>
[[gnu::noinline]] void copy_each_movement(const Arrays& arrays, const Movements& movements, size_t count,
                                          uint64_t rows) {
    // locals: the copies' stores could alias the structures behind the
    // references, and the compiler would load these again every time
    unsigned char* const output = arrays.output;
    const unsigned char* const input = arrays.input;
    const uint64_t output_row = arrays.output_row_stride;
    const uint64_t input_row = arrays.input_row_stride;
    const Movements view = movements;
    // mixed lengths (Bytes = 0) are not prefetched: no fixed size to fetch
    const bool prefetch = Bytes != 0 && arrays.prefetch_inputs;
    for (size_t i = 0; i < count; i++) {
        const uint64_t output_offset = view.output_offset(i);
        const uint64_t input_offset = view.input_offset(i);
        const uint64_t bytes = view.bytes(i);
        if (prefetch) {
            prefetch_later_input<Bytes>(view, i + prefetch_distance, count, input);
        }
        if (Bytes != 0 && bytes == Bytes) {
            copy_fixed_rows<Bytes>(output + output_offset, input + input_offset, rows, output_row, input_row);
        } else if (bytes != 0) {
            copy_run(arrays, MoveRun{input_offset, output_offset, bytes, rows});
        }
    }
}


template <size_t Bytes, typename Movements>
void copy_each_movement_dispatched(const Arrays& arrays, const Movements& movements, size_t count, uint64_t rows) {
#if defined(MTSARRAY_AVX2_GATHER)
    if constexpr (Bytes >= 32 && Bytes % 32 == 0) {
        if (cpu_has_avx2()) {
            return copy_each_movement_avx2<Bytes>(arrays, movements, count, rows);
        }
    }
#endif
    copy_each_movement<Bytes>(arrays, movements, count, rows);
}

template <typename Movements>
void copy_each_movement(const Arrays& arrays, const Movements& movements, size_t count, uint64_t rows) {
    if (count == 0) {
        return;
    }
    switch (movements.bytes(0)) {
    case 4: return copy_each_movement_dispatched<4>(arrays, movements, count, rows);
    case 8: return copy_each_movement_dispatched<8>(arrays, movements, count, rows);
    case 16: return copy_each_movement_dispatched<16>(arrays, movements, count, rows);
    case 32: return copy_each_movement_dispatched<32>(arrays, movements, count, rows);
    case 64: return copy_each_movement_dispatched<64>(arrays, movements, count, rows);
    case 128: return copy_each_movement_dispatched<128>(arrays, movements, count, rows);
    case 256: return copy_each_movement_dispatched<256>(arrays, movements, count, rows);
    case 512: return copy_each_movement_dispatched<512>(arrays, movements, count, rows);
    default: return copy_each_movement_dispatched<0>(arrays, movements, count, rows);
    }
}

WholeMovements whole_movements(const MovePlan& plan) {
    return {&plan.movement(0), plan.input_sample_stride(), plan.output_sample_stride(), plan.element_size()};
}

void copy_each_movement(const Arrays& arrays, const MovePlan& plan) {
    if (plan.movements_count() == 0) {
        return;
    }
    copy_each_movement(arrays, whole_movements(plan), plan.movements_count(), plan.components());
}

// Up to this many movements, a move_data call takes the short path.
constexpr size_t few_movements = 4;
// Up to this many, movements that are not one run are copied one by one,
// without looking for runs to merge: the look (and the walk over the runs it
// finds) costs more than the few memcpy calls merging could save (the
// "moves=10 ... scattered" row of mtsarray-bench's full sweep).
constexpr size_t short_list_movements = 16;

// The error of a one-movement call whose movement is out of range: the
// value that was read and checked, named by validate() (out of line, so
// that the movement stays in registers on the way of valid calls).
[[noreturn, gnu::noinline, gnu::cold]] void reject_movement(const MovePlan& plan, uint64_t sample_in,
                                                          uint64_t sample_out, uint64_t properties_start_in,
                                                          uint64_t properties_start_out,
                                                          uint64_t properties_length) {
    const mts_data_movement_t movement = {sample_in, sample_out, properties_start_in, properties_start_out,
                                          properties_length};
    (void)plan.with_movements(&movement).validate();  // throws the error naming it
    throw Error("move_data: movement 0 is out of range");  // not reached: validate() throws
}

// The end of move_one() past its fast case: the rows of the movement, as
// one block when they are whole rows on both sides.
[[gnu::noinline]] void copy_one(unsigned char* destination, const unsigned char* source, uint64_t bytes,
                                const MovePlan& plan) {
    fault_injection::check("move_data");
    const uint64_t rows = plan.components();
    if (bytes == 0 || rows == 0) {
        return;
    }
    if (rows == 1 || (bytes == plan.input_row_stride() && bytes == plan.output_row_stride())) {
        std::memcpy(destination, source, bytes * rows);
        return;
    }
    copy_rows(destination, source, bytes, rows, plan.output_row_stride(), plan.input_row_stride());
}

// move_data() of one movement (a common call): read once into registers,
// checked there, and copied from the same registers; no copy of it is
// stored, nothing is set up. Out of line: move_data() jumps here before it
// sets up the large frame of its other paths; and what the common case (one
// row) does not need is out of line too (copy_one()), so that this one
// needs no frame of its own either.
[[gnu::noinline]] void move_one(void* output, const void* input, const MovePlan& plan) {
    // field by field: read as one aggregate, the movement would be stored
    // on the stack and loaded again from there
    const mts_data_movement_t& listed = plan.movement(0);
    const uint64_t sample_in = listed.sample_in;
    const uint64_t sample_out = listed.sample_out;
    const uint64_t properties_start_in = listed.properties_start_in;
    const uint64_t properties_start_out = listed.properties_start_out;
    const uint64_t properties_length = listed.properties_length;
    // the movement may change from here on, as far as the compiler knows:
    // it may not load a field again for the check or the copy (the list may
    // be the output's own memory, or be edited by another thread)
    asm volatile("" ::: "memory");
    const mts_data_movement_t movement = {sample_in, sample_out, properties_start_in, properties_start_out,
                                          properties_length};
    if (!plan.in_range(movement)) {
        reject_movement(plan, sample_in, sample_out, properties_start_in, properties_start_out, properties_length);
    }
    const MoveRun run = plan.run_of(movement);
    unsigned char* const destination = static_cast<unsigned char*>(output) + run.output_offset;
    const unsigned char* const source = static_cast<const unsigned char*>(input) + run.input_offset;
    if (run.rows == 1 && run.bytes != 0) {
        fault_injection::check("move_data");
        std::memcpy(destination, source, run.bytes);  // no component axis: one row
        return;
    }
    copy_one(destination, source, run.bytes, plan);
}

void copy_few_movements(const Arrays& arrays, const MovePlan& plan, const mts_data_movement_t* movements,
                        size_t count) {
    for (size_t i = 0; i < count; i++) {
        const MoveRun run = plan.run_of(movements[i]);
        if (run.bytes != 0) {
            copy_rows(arrays.output + run.output_offset, arrays.input + run.input_offset, run.bytes, run.rows,
                      arrays.output_row_stride, arrays.input_row_stride);
        }
    }
}

// Whether the first movements merge into runs (in-order samples): then
// coalescing pays (one long memcpy instead of many short ones); plans are
// mostly uniform, so a few pairs tell.
template <typename Movements>
bool movements_merge(const MovePlan& plan, const Movements& movements, size_t count) {
    const size_t pairs = std::min<size_t>(count, 9);
    for (size_t i = 1; i < pairs; i++) {
        if (movements.bytes(i) == movements.bytes(i - 1) && movements.bytes(i) != 0 &&
            movements.input_offset(i) == movements.input_offset(i - 1) + plan.input_sample_stride() &&
            movements.output_offset(i) == movements.output_offset(i - 1) + plan.output_sample_stride()) {
            return true;
        }
    }
    return false;
}

bool movements_merge(const MovePlan& plan) {
    return plan.movements_count() != 0 && movements_merge(plan, whole_movements(plan), plan.movements_count());
}

void copy_plan(const Arrays& arrays, const MovePlan& plan, bool merge) {
    if (merge) {
        copy_runs(arrays, plan);
    } else {
        copy_each_movement(arrays, plan);
    }
}

// Whether no two movements write the same output sample (then they write
// disjoint bytes and may be copied in any order, by any thread). Cheap when
// the output samples increase (validate() saw it); otherwise one pass over
// the movements with a bitmap of the output samples, when that bitmap is
// small next to the copy; otherwise "no".
template <typename Movements>
bool outputs_disjoint(const MovePlan& plan, const Movements& movements, size_t count, const MoveSummary& summary) {
    if (summary.output_samples_increase) {
        return true;
    }
    const uint64_t samples = plan.output_samples();
    if (samples / 8 > summary.bytes / 64) {
        return false;
    }
    std::vector<uint64_t> written(samples / 64 + 1, 0);
    for (size_t i = 0; i < count; i++) {
        const uint64_t sample = movements.sample_out(i);
        const uint64_t bit = uint64_t(1) << (sample % 64);
        if ((written[sample / 64] & bit) != 0) {
            return false;
        }
        written[sample / 64] |= bit;
    }
    return true;
}

bool outputs_disjoint(const MovePlan& plan, const MoveSummary& summary) {
    return plan.movements_count() == 0 || outputs_disjoint(plan, whole_movements(plan), plan.movements_count(), summary);
}

// Many movements: blocks of consecutive movements, each copied like the
// serial code does (`copy_block(begin, end)`).
template <typename CopyBlock>
void copy_in_movement_blocks(size_t count, size_t threads, const CopyBlock& copy_block) {
    const size_t block = std::max(min_block_movements, (count + threads * blocks_per_thread - 1) /
                                                           (threads * blocks_per_thread));
    const size_t blocks = (count + block - 1) / block;
    auto task = [&](size_t index) {
        const size_t begin = index * block;
        copy_block(begin, std::min(begin + block, count));
    };
    run_tasks(blocks, threads, TaskBody(task));
}

void copy_in_movement_blocks(const Arrays& arrays, const MovePlan& plan, size_t threads, bool merge) {
    copy_in_movement_blocks(plan.movements_count(), threads, [&](size_t begin, size_t end) {
        copy_plan(arrays, plan.slice(begin, end), merge);
    });
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

// The runs' bytes end to end, cut into equal pieces for the threads (runs
// that do not overlap).
void copy_runs_in_byte_pieces(const Arrays& arrays, const std::vector<MoveRun>& runs, size_t threads) {
    std::vector<uint64_t> starts;  // of each run in the bytes end to end
    uint64_t total = 0;
    for (const auto& run : runs) {
        starts.push_back(total);
        total += run.bytes * run.rows;
    }
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

// Few movements with much to copy each (one large movement, a few hundred
// long rows): their runs, cut into equal pieces.
void copy_in_byte_pieces(const Arrays& arrays, const MovePlan& plan, size_t threads) {
    std::vector<MoveRun> runs;
    plan.for_each_run([&](const MoveRun& run) { runs.push_back(run); });
    copy_runs_in_byte_pieces(arrays, runs, threads);
}

// Long movement lists are checked by several threads: the check costs
// about a nanosecond and a half per movement, as much as copying a short
// row, and comes before any copy. Parts of at least this many movements.
constexpr size_t min_check_movements_per_part = 2048;
constexpr size_t max_check_parts = 64;

// The check of `count` movements in parts: `scan(part, begin, end)` for
// each part, all of them on this thread for short lists, on the pool for
// long ones. Returns the number of parts (at most max_check_parts).
template <typename Scan>
size_t check_in_parts(size_t count, const Scan& scan) {
    const size_t threads = count < 2 * min_check_movements_per_part
                               ? 1
                               : std::min(usable_thread_count(), count / (2 * min_check_movements_per_part));
    if (threads <= 1) {
        scan(0, 0, count);
        return 1;
    }
    const size_t parts = std::min({max_check_parts, threads * pieces_per_thread, count / min_check_movements_per_part});
    auto task = [&](size_t part) { scan(part, count * part / parts, count * (part + 1) / parts); };
    run_tasks(parts, threads, TaskBody(task));
    return parts;
}

// Checks every movement of `plan`, reading each once from the caller's list
// and storing it into `copy` (movements_count() entries) as it goes; the
// summary and the check are those of the copy.
MoveSummary validate_into(const MovePlan& plan, mts_data_movement_t* copy) {
    MoveScan scans[max_check_parts];
    const size_t parts = check_in_parts(plan.movements_count(), [&](size_t part, size_t begin, size_t end) {
        scans[part] = scan_movements(plan, begin, end, copy);
    });
    return plan.summarize(scans, parts, copy);
}

// choose_split() of `count` movements: `disjoint()` says whether no two of
// them write the same output sample (asked only with several threads).
template <typename Disjoint>
MoveDataSplit split_for(size_t count, size_t threads, const Disjoint& disjoint) {
    if (threads <= 1 || !disjoint()) {
        return MoveDataSplit::serial;
    }
    if (count >= threads * min_block_movements) {
        return MoveDataSplit::movement_blocks;
    }
    return MoveDataSplit::byte_pieces;
}

// The copy of the caller's movements that a call checks and then uses: the
// caller's list is read once, so that a list in memory the call writes (the
// output's own) or that another thread edits meanwhile can not change a
// movement between its check and its copy. Whole movements (data()), and
// their samples alone (samples(), 2 entries a movement: scan_compact).
// Each thread keeps its buffers between calls (no allocation per call once
// they are large enough), up to `kept_movements`; a larger list gets
// buffers of its own for the call.
constexpr size_t kept_movements = size_t(1) << 18;  // 14 MiB

class MovementCopy {
public:
    explicit MovementCopy(size_t count) {
        Buffer& kept = thread_buffer();
        if (!kept.in_use && count <= kept_movements) {
            if (kept.capacity < count) {
                // a little more than asked: lists of slowly growing size do
                // not allocate on every call
                const size_t capacity = std::min(kept_movements, std::max(count + count / 2, size_t(64)));
                mts_data_movement_t* data = allocate<mts_data_movement_t>(capacity);
                uint64_t* samples = allocate<uint64_t>(capacity, 2, data);
                if (kept.data == nullptr) {
                    thread_local FreeAtThreadExit free_at_exit;
                    (void)free_at_exit;
                }
                delete[] kept.data;
                delete[] kept.samples;
                kept.data = data;
                kept.samples = samples;
                kept.capacity = capacity;
            }
            kept.in_use = true;
            kept_ = &kept;
            data_ = kept.data;
            samples_ = kept.samples;
        } else {
            own_.reset(allocate<mts_data_movement_t>(count));
            own_samples_.reset(allocate<uint64_t>(count, 2));
            data_ = own_.get();
            samples_ = own_samples_.get();
        }
    }
    ~MovementCopy() {
        if (kept_ != nullptr) {
            kept_->in_use = false;
        }
    }
    MovementCopy(const MovementCopy&) = delete;
    MovementCopy& operator=(const MovementCopy&) = delete;

    mts_data_movement_t* data() const noexcept { return data_; }
    uint64_t* samples() const noexcept { return samples_; }

private:
    // Plain data, so that reaching it costs no guard of a thread_local
    // object (a few nanoseconds of each call, the "moves=1" rows); its
    // memory is given back when the thread exits (FreeAtThreadExit).
    struct Buffer {
        mts_data_movement_t* data;
        uint64_t* samples;
        size_t capacity;
        bool in_use;  // a second call on this thread (a nested one) takes a buffer of its own
    };
    struct FreeAtThreadExit {
        ~FreeAtThreadExit() {
            Buffer& kept = thread_buffer();
            delete[] kept.data;
            delete[] kept.samples;
            kept = {nullptr, nullptr, 0, false};
        }
    };
    static Buffer& thread_buffer() noexcept {
        // the default TLS model: the library is also loaded with dlopen
        // (the Python extension), where the initial-exec model's static TLS
        // block may already be full ("cannot allocate memory in static TLS
        // block")
        static thread_local Buffer buffer = {nullptr, nullptr, 0, false};
        return buffer;
    }
    // `per_movement` entries for each of `count` movements; `release` is
    // freed when the allocation fails
    template <typename Entry>
    static Entry* allocate(size_t count, size_t per_movement = 1, mts_data_movement_t* release = nullptr) {
        auto* data = new (std::nothrow) Entry[count * per_movement];
        if (data == nullptr) {
            delete[] release;
            throw OutOfMemory("out of host memory for the copy of " + std::to_string(count) + " movements");
        }
        return data;
    }

    Buffer* kept_ = nullptr;
    std::unique_ptr<mts_data_movement_t[]> own_;
    std::unique_ptr<uint64_t[]> own_samples_;
    mts_data_movement_t* data_ = nullptr;
    uint64_t* samples_ = nullptr;
};

// What move_data's check of a list learned, and where the checked movements
// are: `shared_ranges`, every movement has the ranges of the first one
// (copy[0]) and its samples in `samples`; otherwise `copy` holds them all.
struct CheckedList {
    MoveSummary summary;
    bool shared_ranges;
};

bool same_ranges(const mts_data_movement_t& one, const mts_data_movement_t& other) noexcept {
    return one.properties_start_in == other.properties_start_in &&
           one.properties_start_out == other.properties_start_out &&
           one.properties_length == other.properties_length;
}

// validate_into() storing the samples alone where the movements share their
// ranges (scan_compact): the same summary, the same errors.
CheckedList check_compact(const MovePlan& plan, uint64_t* samples, mts_data_movement_t* copy) {
    CompactScan parts[max_check_parts];
    const size_t part_count = check_in_parts(plan.movements_count(), [&](size_t part, size_t begin, size_t end) {
        parts[part] = scan_compact(plan, begin, end, samples, copy);
    });
    bool shared = true;
    uint64_t out_of_range = 0;
    for (size_t i = 0; i < part_count; i++) {
        shared &= parts[i].compact && same_ranges(copy[parts[i].scan.begin], copy[0]);
        out_of_range |= parts[i].scan.out_of_range;
    }
    // MovePlan::summarize() on the samples: each part after the first
    // continues the one before it or not (the last samples of a part that
    // is one run follow from its first ones)
    uint64_t not_one_run = 0;
    uint64_t out_of_order = 0;
    uint64_t elements = 0;
    for (size_t i = 0; i < part_count; i++) {
        const MoveScan& part = parts[i].scan;
        if (i != 0) {
            const MoveScan& before = parts[i - 1].scan;
            const size_t last = before.end - 1;
            const uint64_t step = before.copied ? 0 : last - before.begin;
            const size_t stored = before.copied ? last : before.begin;
            const uint64_t gap_in = samples[2 * part.begin] - (samples[2 * stored] + step + 1);
            const uint64_t gap_out = samples[2 * part.begin + 1] - (samples[2 * stored + 1] + step + 1);
            not_one_run |= gap_in | gap_out;
            out_of_order |= gap_out;
        }
        not_one_run |= part.not_one_run;
        out_of_order |= part.out_of_order;
        elements += part.elements;
    }
    const bool flagged = (out_of_range & move_scan::top_bits) != 0;
    if (!shared || flagged) {
        // whole movements, for the exact check and the copy loops
        MoveScan scans[max_check_parts];
        for (size_t i = 0; i < part_count; i++) {
            scans[i] = parts[i].scan;
            if (!parts[i].compact) {
                continue;
            }
            if (!scans[i].copied) {
                MovePlan::fill_run(copy, scans[i].begin, scans[i].end);
                scans[i].copied = true;
                continue;
            }
            fill_from_samples(copy, samples, scans[i].begin, scans[i].end);
        }
        return {plan.summarize(scans, part_count, copy), false};
    }
    if (not_one_run != 0) {
        // copied by movements: the samples of parts that are one run too (a
        // list that is one run is copied from copy[0])
        for (size_t i = 0; i < part_count; i++) {
            const MoveScan& part = parts[i].scan;
            if (!part.copied) {
                fill_run_samples(samples, part.begin, part.end);
            }
        }
    }
    const MoveSummary summary = {elements * plan.components() * plan.element_size(),
                                 (out_of_order & move_scan::top_bits) == 0, not_one_run == 0};
    return {summary, true};
}

SharedRanges shared_ranges(const MovePlan& plan, const uint64_t* samples) {
    const mts_data_movement_t& first = plan.movement(0);
    const uint64_t element = plan.element_size();
    return {samples,
            plan.input_sample_stride(),
            plan.output_sample_stride(),
            first.properties_start_in * element,
            first.properties_start_out * element,
            first.properties_length * element};
}

// for_each_run() of movements sharing their ranges: consecutive samples on
// both sides make one run.
template <typename Visit>
void for_each_shared_run(const MovePlan& plan, const SharedRanges& movements, size_t count, Visit&& visit) {
    const uint64_t rows = plan.components();
    if (rows == 0 || movements.run_bytes == 0 || count == 0) {
        return;
    }
    // whole rows on both sides: the run is one contiguous block
    const uint64_t whole_rows =
        plan.input_row_stride() == plan.output_row_stride() ? plan.input_row_stride() : 0;
    auto run_of = [&](size_t first, uint64_t length) {
        MoveRun run = {movements.input_offset(first), movements.output_offset(first), movements.run_bytes,
                       rows * length};
        if (run.bytes == whole_rows) {
            run.bytes *= run.rows;
            run.rows = 1;
        }
        return run;
    };
    const uint64_t* samples = movements.samples;
    size_t first = 0;
    for (size_t i = 1; i < count; i++) {
        const uint64_t step = i - first;
        if (samples[2 * i] != samples[2 * first] + step || samples[2 * i + 1] != samples[2 * first + 1] + step) {
            visit(run_of(first, step));
            first = i;
        }
    }
    visit(run_of(first, count - first));
}

void copy_shared(const Arrays& arrays, const MovePlan& plan, const SharedRanges& movements, size_t count,
                 bool merge) {
    if (merge) {
        for_each_shared_run(plan, movements, count, [&](const MoveRun& run) { copy_run(arrays, run); });
    } else {
        copy_each_movement(arrays, movements, count, plan.components());
    }
}

// move_data() of a list that is not one run, its movements sharing their
// ranges: the split of choose_split(), the same copies, from the samples.
void move_shared(const Arrays& arrays, const MovePlan& plan, const SharedRanges& movements,
                 const MoveSummary& summary, size_t threads) {
    const size_t count = plan.movements_count();
    const bool merge = count > short_list_movements && movements_merge(plan, movements, count);
    switch (split_for(count, threads, [&] { return outputs_disjoint(plan, movements, count, summary); })) {
    case MoveDataSplit::serial: return copy_shared(arrays, plan, movements, count, merge);
    case MoveDataSplit::movement_blocks:
        return copy_in_movement_blocks(count, threads, [&](size_t begin, size_t end) {
            copy_shared(arrays, plan, movements.from(begin), end - begin, merge);
        });
    case MoveDataSplit::byte_pieces: {
        std::vector<MoveRun> runs;
        for_each_shared_run(plan, movements, count, [&](const MoveRun& run) { runs.push_back(run); });
        return copy_runs_in_byte_pieces(arrays, runs, threads);
    }
    }
}

}  // namespace

MoveDataSplit choose_split(const MovePlan& plan, const MoveSummary& summary, size_t threads) {
    return split_for(plan.movements_count(), threads, [&] { return outputs_disjoint(plan, summary); });
}

namespace {

// move_data() of any other count (out of line, like move_one()).
[[gnu::noinline]] void move_many(void* output, const void* input, const MovePlan& caller_plan) {
    const size_t count = caller_plan.movements_count();
    if (count <= few_movements) {
        // A handful of movements (none, or two to four: one has move_one()):
        // each one read once into a local copy and checked exactly, then a
        // memcpy per row, without the passes and the set-up that pay off on
        // longer lists.
        mts_data_movement_t few[few_movements];
        bool valid = true;
        for (size_t i = 0; i < count; i++) {
            few[i] = caller_plan.movement(i);
            valid &= caller_plan.in_range(few[i]);
        }
        if (!valid) {
            (void)caller_plan.with_movements(few).validate();  // throws the error naming it
        }
        fault_injection::check("move_data");
        copy_few_movements(arrays_of(output, input, caller_plan, 0), caller_plan, few, count);
        return;
    }
    // every movement is checked, and copied, before the first write: the
    // copy streams, from the checked copy of the movements only
    const MovementCopy copy(count);
    const MovePlan plan = caller_plan.with_movements(copy.data());
    const CheckedList checked = check_compact(caller_plan, copy.samples(), copy.data());
    const MoveSummary summary = checked.summary;
    const size_t threads = threads_for(summary.bytes);
    fault_injection::check("move_data");
    const Arrays arrays = arrays_of(output, input, plan, summary.bytes);
    if (summary.one_run) {
        // in-order movements: one copy, without looking at them again
        const MoveRun run = plan.single_run();
        if (run.bytes == 0) {
            return;
        }
        if (threads <= 1) {
            return copy_run(arrays, run);
        }
        return copy_runs_in_byte_pieces(arrays, {run}, threads);
    }
    if (checked.shared_ranges) {
        return move_shared(arrays, plan, shared_ranges(plan, copy.samples()), summary, threads);
    }
    const bool merge = count > short_list_movements && movements_merge(plan);
    switch (choose_split(plan, summary, threads)) {
    case MoveDataSplit::serial: return copy_plan(arrays, plan, merge);
    case MoveDataSplit::movement_blocks: return copy_in_movement_blocks(arrays, plan, threads, merge);
    case MoveDataSplit::byte_pieces: return copy_in_byte_pieces(arrays, plan, threads);
    }
}

}  // namespace

// One movement, the most common short call, goes its own way before
// anything else is set up.
void move_data(void* output, const void* input, const MovePlan& plan) {
    if (plan.movements_count() == 1) {
        return move_one(output, input, plan);
    }
    return move_many(output, input, plan);
}

MoveSummary check_into(const MovePlan& plan, mts_data_movement_t* copy) {
    if (plan.movements_count() == 0) {
        return {0, true, false};
    }
    const MoveSummary summary = validate_into(plan, copy);
    if (summary.one_run) {
        // a plan keeps every movement (a GPU builds its table from them)
        MovePlan::fill_run(copy, 0, plan.movements_count());
    }
    return summary;
}

SampleReach copy_movements(const mts_data_movement_t* from, mts_data_movement_t* copy, size_t count) {
    SampleReach reaches[max_check_parts];
    const bool in_place = copy == from;  // the reach alone: nothing to write
    const size_t parts = check_in_parts(count, [&](size_t part, size_t begin, size_t end) {
        uintptr_t input_samples = 0;
        uintptr_t output_samples = 0;
        for (size_t i = begin; i < end; i++) {
            const mts_data_movement_t movement = from[i];
            input_samples = std::max(input_samples, movement.sample_in + 1);
            output_samples = std::max(output_samples, movement.sample_out + 1);
            if (!in_place) {
                copy[i] = movement;
            }
        }
        reaches[part] = {input_samples, output_samples};
    });
    SampleReach reach;
    for (size_t part = 0; part < parts; part++) {
        reach.input_samples = std::max(reach.input_samples, reaches[part].input_samples);
        reach.output_samples = std::max(reach.output_samples, reaches[part].output_samples);
    }
    return reach;
}

namespace {

// The samples of movements that all share the ranges of the first one, or
// nothing when one does not.
std::vector<uint64_t> samples_if_shared(const MovePlan& plan) {
    const size_t count = plan.movements_count();
    const mts_data_movement_t& first = plan.movement(0);
    std::vector<uint64_t> samples(2 * count);
    for (size_t i = 0; i < count; i++) {
        const mts_data_movement_t& movement = plan.movement(i);
        if (!same_ranges(movement, first)) {
            return {};
        }
        samples[2 * i] = movement.sample_in;
        samples[2 * i + 1] = movement.sample_out;
    }
    return samples;
}

// How a plan copies `movements` (its whole movements, or their samples when
// they share their ranges), decided once as move_data decides at every
// call; `for_each_run(visit)` gives their coalesced runs, stored when the
// copy goes through them.
template <typename Movements, typename ForEachRun>
void decide_copy(const MovePlan& plan, const Movements& movements, CheckedMoves& checked,
                 const ForEachRun& for_each_run) {
    const size_t count = plan.movements_count();
    checked.merge = count > short_list_movements && movements_merge(plan, movements, count);
    checked.disjoint = outputs_disjoint(plan, movements, count, checked.summary);
    checked.threads = threads_for(checked.summary.bytes);
    checked.split = split_for(count, checked.threads, [&] { return checked.disjoint; });
    if (checked.split == MoveDataSplit::byte_pieces ||
        (checked.split == MoveDataSplit::serial && checked.merge)) {
        for_each_run([&](const MoveRun& run) { checked.runs.push_back(run); });
        checked.has_runs = true;
    }
}

}  // namespace

CheckedMoves plan_checked_copy(const MovePlan& plan, const MoveSummary& summary) {
    CheckedMoves checked;
    checked.summary = summary;
    if (plan.trivially_empty() || summary.one_run) {
        return checked;  // nothing to copy, or one copy: nothing to decide
    }
    const size_t count = plan.movements_count();
    if (count > short_list_movements) {
        checked.shared_samples = samples_if_shared(plan);
    }
    if (!checked.shared_samples.empty()) {
        const SharedRanges movements = shared_ranges(plan, checked.shared_samples.data());
        decide_copy(plan, movements, checked,
                    [&](const auto& visit) { for_each_shared_run(plan, movements, count, visit); });
    } else {
        decide_copy(plan, whole_movements(plan), checked, [&](const auto& visit) { plan.for_each_run(visit); });
    }
    return checked;
}

namespace {

// A plan's serial copy through the runs it stored, when it merges
// movements into runs; false when it does not (nothing copied).
bool copy_stored_runs(const Arrays& arrays, const CheckedMoves& checked) {
    if (!checked.merge || !checked.has_runs) {
        return false;
    }
    for (const MoveRun& run : checked.runs) {
        copy_run(arrays, run);
    }
    return true;
}

// move_checked() of movements sharing their ranges: from their samples.
void move_checked_shared(const Arrays& arrays, const MovePlan& plan, const CheckedMoves& checked,
                         MoveDataSplit split, size_t threads) {
    const size_t count = plan.movements_count();
    const SharedRanges movements = shared_ranges(plan, checked.shared_samples.data());
    switch (split) {
    case MoveDataSplit::serial:
        if (copy_stored_runs(arrays, checked)) {
            return;
        }
        return copy_shared(arrays, plan, movements, count, checked.merge);
    case MoveDataSplit::movement_blocks:
        return copy_in_movement_blocks(count, threads, [&](size_t begin, size_t end) {
            copy_shared(arrays, plan, movements.from(begin), end - begin, checked.merge);
        });
    case MoveDataSplit::byte_pieces:
        if (checked.has_runs) {
            return copy_runs_in_byte_pieces(arrays, checked.runs, threads);
        }
        std::vector<MoveRun> runs;
        for_each_shared_run(plan, movements, count, [&](const MoveRun& run) { runs.push_back(run); });
        return copy_runs_in_byte_pieces(arrays, runs, threads);
    }
}

}  // namespace

void move_checked(void* output, const void* input, const MovePlan& plan, const CheckedMoves& checked) {
    if (plan.trivially_empty()) {
        return;
    }
    const size_t threads = threads_for(checked.summary.bytes);
    fault_injection::check("move_data");
    const Arrays arrays = arrays_of(output, input, plan, checked.summary.bytes);
    if (checked.summary.one_run) {
        const MoveRun run = plan.single_run();
        if (run.bytes == 0) {
            return;
        }
        if (threads <= 1) {
            return copy_run(arrays, run);
        }
        return copy_runs_in_byte_pieces(arrays, {run}, threads);
    }
    MoveDataSplit split = checked.split;
    if (threads != checked.threads) {
        // the thread count changed since the plan was made: choose_split()'s
        // rule, on what was learned then
        split = split_for(plan.movements_count(), threads, [&] { return checked.disjoint; });
    }
    if (!checked.shared_samples.empty()) {
        return move_checked_shared(arrays, plan, checked, split, threads);
    }
    switch (split) {
    case MoveDataSplit::serial:
        if (copy_stored_runs(arrays, checked)) {
            return;
        }
        if (!checked.merge && plan.movements_count() <= few_movements) {
            return copy_few_movements(arrays, plan, &plan.movement(0), plan.movements_count());
        }
        return copy_plan(arrays, plan, checked.merge);
    case MoveDataSplit::movement_blocks: return copy_in_movement_blocks(arrays, plan, threads, checked.merge);
    case MoveDataSplit::byte_pieces:
        if (checked.has_runs) {
            return copy_runs_in_byte_pieces(arrays, checked.runs, threads);
        }
        return copy_in_byte_pieces(arrays, plan, threads);
    }
}

namespace {
template <size_t Bytes>
void copy_rows_of(unsigned char* destination, const unsigned char* source, uint64_t bytes, uint64_t rows,
                  uint64_t output_row_stride, uint64_t input_row_stride) {
    if constexpr (Bytes != 0) {
        (void)bytes;
        copy_fixed_rows<Bytes>(destination, source, rows, output_row_stride, input_row_stride);
    } else {
        copy_rows(destination, source, bytes, rows, output_row_stride, input_row_stride);
    }
}
}  // namespace

RowsCopy rows_copy_for(uint64_t bytes) noexcept {
    switch (bytes) {  // copy_run()'s widths
    case 1: return copy_rows_of<1>;
    case 2: return copy_rows_of<2>;
    case 4: return copy_rows_of<4>;
    case 8: return copy_rows_of<8>;
    case 12: return copy_rows_of<12>;
    case 16: return copy_rows_of<16>;
    case 24: return copy_rows_of<24>;
    case 32: return copy_rows_of<32>;
    case 64: return copy_rows_of<64>;
    case 128: return copy_rows_of<128>;
    case 256: return copy_rows_of<256>;
    default: return copy_rows_of<0>;
    }
}

}  // namespace mtsarray::detail::cpu
