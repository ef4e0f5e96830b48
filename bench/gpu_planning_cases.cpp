// The host side of a GPU move_data, timed on the CPU so that every machine
// tracks it (target: at most 4 ns per movement, bench/README.md). This is
// the very code GpuBackend::move_data runs before it queues anything:
// MovePlan checks every movement while build_move_table coalesces the runs
// and packs their 16-byte entries, here into host memory reused from call to
// call (what the page-locked staging pool hands the GPU backend), then the
// class sort. A long list is built in parts on the library's thread pool,
// as the backend does (gpu/move_table_parts.hpp); the same list on the
// calling thread alone is timed in the same run.
//
// The floor it is compared with is the least any implementation must do per
// movement: read the 40-byte mts_data_movement_t, bounds-check it and write
// one 16-byte entry, in one simple loop.
//
// The `GPU plan` rows time the host work of mtsarray_move_plan_create on a
// GPU: the same table, and the plan's own copy of the movements with the
// samples they reach, written in the same pass over the caller's list (what
// the backend does); against the copy made first, in parts on the pool,
// then the table built from it (what it did before). One pass reads the
// caller's 40 bytes a movement once instead of twice, which counts where the
// lists do not stay in the caches (10^6 movements here).

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/threads/pool_host_tasks.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/move_table_parts.hpp"
#include "base/move_plan.hpp"

#include "cases.hpp"
#include "move_patterns.hpp"

namespace bench {
namespace {

using mtsarray::detail::MovePlan;
using mtsarray::detail::SampleReach;
using mtsarray::detail::gpu::build_move_table;
using mtsarray::detail::gpu::entry_input_offset;
using mtsarray::detail::gpu::entry_output_offset;
using mtsarray::detail::gpu::entry_row_bytes;
using mtsarray::detail::gpu::entry_rows;
using mtsarray::detail::gpu::MoveTableEntry;
using mtsarray::detail::gpu::MoveTableSummary;

constexpr double NANOSECONDS_PER_MOVEMENT_TARGET = 4.0;
constexpr double NANOSECONDS_PER_MOVEMENT_SIXTEEN_THREADS_TARGET = 1.5;
constexpr size_t ELEMENT_SIZE = sizeof(double);

/// Host memory for the table, sized once and reused by every call, and
/// memory of the same size for the class sort to write into (the GPU
/// backend's page-locked leases are pooled the same way, and the table
/// moves to the second one when the sort writes it there).
class ReusedTable {
public:
    explicit ReusedTable(size_t capacity) : entries_(capacity), sorted_(capacity) {}
    MoveTableEntry* data() { return entries_.data(); }
    size_t capacity() const { return entries_.size(); }
    void grow(size_t at_least) { entries_.resize(std::max(at_least, 2 * entries_.size())); }
    MoveTableEntry* sort_space(size_t count) {
        if (sorted_.size() < count) {
            sorted_.resize(count);
        }
        return sorted_.data();
    }
    /// The table is in the sort space now.
    void use_sorted() { entries_.swap(sorted_); }

private:
    std::vector<MoveTableEntry> entries_;
    std::vector<MoveTableEntry> sorted_;
};

using PlanningCase = MovePattern;

/// Runs the table on host buffers and compares the result with the
/// movements applied one by one: the timed planning must produce a table
/// that does what the movements say.
void check_table(const PlanningCase& c, const MovePlan& plan, const MoveTableEntry* entries,
                 const MoveTableSummary& summary) {
    const size_t input_count = product(c.input_shape);
    const size_t output_count = product(c.output_shape);
    std::vector<double> input(input_count);
    for (size_t i = 0; i < input_count; i++) {
        input[i] = value_at<double>(i);
    }
    std::vector<double> expected(output_count, -1.0);
    std::vector<double> got(output_count, -1.0);
    const size_t p_in = c.input_shape.back();
    const size_t p_out = c.output_shape.back();
    for (const auto& m : c.movements) {
        for (size_t x = 0; x < m.properties_length; x++) {
            expected[m.sample_out * p_out + m.properties_start_out + x] =
                input[m.sample_in * p_in + m.properties_start_in + x];
        }
    }
    const auto* in = reinterpret_cast<const unsigned char*>(input.data());
    auto* out = reinterpret_cast<unsigned char*>(got.data());
    for (uint64_t e = 0; e < summary.entries; e++) {
        const auto& entry = entries[e];
        for (uint64_t row = 0; row < entry_rows(entry); row++) {
            std::memcpy(out + entry_output_offset(entry) + row * plan.output_row_stride(),
                        in + entry_input_offset(entry) + row * plan.input_row_stride(), entry_row_bytes(entry));
        }
    }
    if (got != expected) {
        throw std::runtime_error("gpu planning " + c.name + ": the table does not move what the movements say");
    }
}

/// The floor: bounds-check each movement and write one 16-byte entry.
/// Returns the number of invalid movements (0), so that nothing is elided.
size_t floor_pass(const PlanningCase& c, MoveTableEntry* entries) {
    const uintptr_t samples_in = c.input_shape[0], samples_out = c.output_shape[0];
    const uintptr_t p_in = c.input_shape[1], p_out = c.output_shape[1];
    size_t invalid = 0;
    for (size_t i = 0; i < c.movements.size(); i++) {
        const auto& m = c.movements[i];
        const bool ok = (m.sample_in < samples_in) & (m.sample_out < samples_out) &
                        (m.properties_start_in <= p_in) & (m.properties_length <= p_in - m.properties_start_in) &
                        (m.properties_start_out <= p_out) & (m.properties_length <= p_out - m.properties_start_out);
        invalid += ok ? 0 : 1;
        entries[i].input = (m.sample_in * p_in + m.properties_start_in) * ELEMENT_SIZE |
                           uint64_t(m.properties_length * ELEMENT_SIZE) << 40;
        entries[i].output = (m.sample_out * p_out + m.properties_start_out) * ELEMENT_SIZE | uint64_t(1) << 40;
    }
    return invalid;
}

/// The plan of `c`'s movements on arrays of its shapes (float64 unless said).
MovePlan plan_of(const PlanningCase& c, size_t element_size = ELEMENT_SIZE) {
    return MovePlan(c.output_shape, c.input_shape, element_size, c.movements.data(), c.movements.size());
}

void classify(ReusedTable& table, const MoveTableSummary& summary);

/// What the GPU backend does on the host for `plan`: the table into
/// `table`, then sorted by size class when it mixes several (the check of
/// the table reads the entries in any order).
void build(const PlanningCase& c, const MovePlan& plan, ReusedTable& table, MoveTableSummary& summary) {
    if (!build_move_table(plan, table, summary)) {
        throw std::runtime_error("gpu planning " + c.name + ": a movement was refused");
    }
    classify(table, summary);
}

/// The class sort of a built table, as the backend runs it.
void classify(ReusedTable& table, const MoveTableSummary& summary) {
    MoveTableEntry* sorted = table.data();
    auto classes = mtsarray::detail::gpu::classify_move_table_into(
        sorted, summary, mtsarray::detail::gpu::threads_per_block, mtsarray::detail::gpu::max_blocks,
        [&](size_t count) { return table.sort_space(count); });
    if (sorted != table.data()) {
        table.use_sorted();
    }
    clobber(&classes);
}

/// What GpuBackend::plan_move_table does: build() on the calling thread,
/// or in parts on the thread pool for a long list; with a `copy` (a plan's),
/// also the copy of the movements and the samples they reach, in the same
/// pass. Returns the threads it ran on.
size_t build_as_backend(const PlanningCase& c, const MovePlan& plan, ReusedTable& table, MoveTableSummary& summary,
                        mts_data_movement_t* copy = nullptr, SampleReach* reach = nullptr) {
    const auto& tasks = mtsarray::detail::cpu::pool_host_tasks();
    const size_t threads = tasks.threads();
    const size_t parts = mtsarray::detail::gpu::move_table_part_count(plan.movements_count(), threads);
    if (parts <= 1) {
        if (copy == nullptr) {
            build(c, plan, table, summary);
            return 1;
        }
        if (!mtsarray::detail::gpu::build_move_table_copying(plan, table, summary, copy, *reach)) {
            throw std::runtime_error("gpu planning " + c.name + ": a movement was refused");
        }
        classify(table, summary);
        return 1;
    }
    mtsarray::detail::gpu::MoveLaunchClasses classes;
    if (!mtsarray::detail::gpu::build_move_table_in_parts(plan, table, summary, classes,
                                                         mtsarray::detail::gpu::threads_per_block,
                                                         mtsarray::detail::gpu::max_blocks, tasks, threads, parts,
                                                         copy, reach)) {
        throw std::runtime_error("gpu planning " + c.name + ": a movement was refused");
    }
    clobber(&classes);
    return threads;
}

/// The copy of `c`'s movements and the samples they reach, in parts on the
/// pool (as cpu::copy_movements makes it): a plan's copy made on its own.
SampleReach copy_in_parts(const PlanningCase& c, mts_data_movement_t* copy) {
    const auto& tasks = mtsarray::detail::cpu::pool_host_tasks();
    const size_t count = c.movements.size();
    const size_t parts = std::max<size_t>(1, std::min<size_t>(2 * tasks.threads(), count / 4096));
    std::vector<SampleReach> reaches(parts);
    auto copy_part = [&](size_t part) {
        SampleReach reach;
        for (size_t i = count * part / parts; i < count * (part + 1) / parts; i++) {
            const mts_data_movement_t movement = c.movements[i];
            reach.input_samples = std::max(reach.input_samples, movement.sample_in + 1);
            reach.output_samples = std::max(reach.output_samples, movement.sample_out + 1);
            copy[i] = movement;
        }
        reaches[part] = reach;
    };
    tasks.run_each(parts, tasks.threads(), copy_part);
    SampleReach reach;
    for (const SampleReach& part : reaches) {
        reach.input_samples = std::max(reach.input_samples, part.input_samples);
        reach.output_samples = std::max(reach.output_samples, part.output_samples);
    }
    return reach;
}

/// The host work of a GPU plan of `c` (its table, its copy of the movements
/// and the samples they reach, in one pass), against the copy made first and
/// the table built from it, and against the table alone (move_data's host
/// work), side by side.
Row run_plan_host_work(const Options& options, const PlanningCase& c) {
    const size_t count = c.movements.size();
    ReusedTable table(count);
    MoveTableSummary summary;
    std::vector<mts_data_movement_t> copy(count);
    SampleReach expected;
    for (const auto& movement : c.movements) {
        expected.input_samples = std::max(expected.input_samples, movement.sample_in + 1);
        expected.output_samples = std::max(expected.output_samples, movement.sample_out + 1);
    }
    size_t threads = 1;
    {
        const MovePlan plan = plan_of(c);
        SampleReach reach;
        threads = build_as_backend(c, plan, table, summary, copy.data(), &reach);
        check_table(c, plan, table.data(), summary);
        if (std::memcmp(copy.data(), c.movements.data(), count * sizeof(mts_data_movement_t)) != 0 ||
            reach.input_samples != expected.input_samples || reach.output_samples != expected.output_samples) {
            throw std::runtime_error("gpu plan " + c.name + ": the copy or the samples reached are wrong");
        }
    }
    auto seconds = measure(options, {
        wall_clock([&] {
            SampleReach reach;
            build_as_backend(c, plan_of(c), table, summary, copy.data(), &reach);
            clobber(table.data());
            clobber(copy.data());
            clobber(&reach);
        }),
        wall_clock([&] {
            SampleReach reach = copy_in_parts(c, copy.data());
            const MovePlan copied(c.output_shape, c.input_shape, ELEMENT_SIZE, copy.data(), count);
            build_as_backend(c, copied, table, summary);
            clobber(table.data());
            clobber(&reach);
        }),
        wall_clock([&] {
            build_as_backend(c, plan_of(c), table, summary);
            clobber(table.data());
        }),
    });

    Row row;
    row.group = "move_data planning";
    row.device = "cpu";
    row.name = "GPU plan, f64 " + c.name;
    row.parameters = {{"movements", std::to_string(count)}, {"threads", std::to_string(threads)}};
    row.seconds = seconds[0];
    row.baseline_name = "the copy first, then the table";
    row.baseline_seconds = seconds[1];
    const double per_movement = 1e9 * seconds[0] / static_cast<double>(count);
    const double table_alone = 1e9 * seconds[2] / static_cast<double>(count);
    row.measurements = {{"nanoseconds_per_movement", per_movement},
                        {"copy_first_nanoseconds_per_movement", 1e9 * seconds[1] / static_cast<double>(count)},
                        {"table_alone_nanoseconds_per_movement", table_alone}};
    char text[200];
    std::snprintf(text, sizeof(text),
                  "%.2f ns per movement on %zu thread%s with the copy (copy first %.2f; the table alone %.2f: "
                  "%.2fx)",
                  per_movement, threads, threads == 1 ? "" : "s", 1e9 * seconds[1] / static_cast<double>(count),
                  table_alone, per_movement / table_alone);
    row.note = text;
    return row;
}

Row run_planning(const Options& options, const PlanningCase& c) {
    const size_t count = c.movements.size();
    ReusedTable table(count);
    MoveTableSummary summary;
    size_t threads = 1;
    {
        const MovePlan plan = plan_of(c);
        build(c, plan, table, summary);
        check_table(c, plan, table.data(), summary);
        threads = build_as_backend(c, plan, table, summary);
        check_table(c, plan, table.data(), summary);
    }
    std::vector<MoveTableEntry> floor_entries(count);
    // Where the time of a build in parts goes: its first round alone (each
    // part checked and made into its own table, into the part tables the
    // backend's build on this thread uses); the rest is the merge of the
    // parts' counts and the second round, which places the parts in the
    // table.
    const auto& tasks = mtsarray::detail::cpu::pool_host_tasks();
    const size_t parts = mtsarray::detail::gpu::move_table_part_count(count, tasks.threads());
    auto first_round = [&] {
        auto& part_tables = mtsarray::detail::gpu::move_table_parts(parts);
        mtsarray::detail::gpu::build_move_table_parts(plan_of(c), part_tables, parts, tasks, tasks.threads());
        clobber(part_tables.data());
    };
    auto seconds = measure(options, {
        wall_clock([&] {
            build_as_backend(c, plan_of(c), table, summary);
            clobber(table.data());
        }),
        wall_clock([&] {
            build(c, plan_of(c), table, summary);
            clobber(table.data());
        }),
        wall_clock([&] {
            if (floor_pass(c, floor_entries.data()) != 0) {
                throw std::runtime_error("gpu planning floor: invalid movement");
            }
            clobber(floor_entries.data());
        }),
        wall_clock(first_round),
    });

    Row row;
    row.group = "move_data planning";
    row.device = "cpu";
    row.name = "GPU table, f64 " + c.name;
    row.parameters = {{"movements", std::to_string(count)}, {"entries", std::to_string(summary.entries)},
                      {"table_bytes", std::to_string(summary.entries * sizeof(MoveTableEntry))},
                      {"threads", std::to_string(threads)}};
    row.seconds = seconds[0];
    row.baseline_name = "check + 16-byte write per movement, one thread";
    row.baseline_seconds = seconds[2];
    const double per_movement = 1e9 * row.seconds / static_cast<double>(count);
    const double one_thread = 1e9 * seconds[1] / static_cast<double>(count);
    const double floor = 1e9 * row.baseline_seconds / static_cast<double>(count);
    row.measurements = {{"nanoseconds_per_movement", per_movement},
                        {"one_thread_nanoseconds_per_movement", one_thread},
                        {"floor_nanoseconds_per_movement", floor},
                        {"table_bytes_per_entry", static_cast<double>(sizeof(MoveTableEntry))}};
    char text[160];
    std::snprintf(text, sizeof(text), "%.2f ns per movement on %zu thread%s (one thread %.2f, floor %.2f); %zu entries",
                  per_movement, threads, threads == 1 ? "" : "s", one_thread, floor,
                  static_cast<size_t>(summary.entries));
    row.note = text;
    if (parts > 1) {
        const double first = 1e9 * seconds[3] / static_cast<double>(count);
        row.measurements.push_back({"first_round_nanoseconds_per_movement", first});
        std::snprintf(text, sizeof(text), "; in %zu parts: %.2f checking and building them, %.2f merging and placing "
                      "them", parts, first, per_movement - first);
        row.note += text;
    }
    row.targets.push_back({"<=4 ns/movement", per_movement <= NANOSECONDS_PER_MOVEMENT_TARGET});
    row.targets.push_back({"<=4 ns/movement on one thread", one_thread <= NANOSECONDS_PER_MOVEMENT_TARGET});
    if (threads >= 16) {
        // the planning must scale: 16 threads at least 2.7x better than the one-thread target
        row.targets.push_back({"<=1.5 ns/movement on 16 threads",
                               per_movement <= NANOSECONDS_PER_MOVEMENT_SIXTEEN_THREADS_TARGET});
    }
    return row;
}

}  // namespace

size_t planned_table_entries(const MovePattern& pattern, size_t element_size) {
    ReusedTable table(std::max<size_t>(1, pattern.movements.size()));
    MoveTableSummary summary;
    build_as_backend(pattern, plan_of(pattern, element_size), table, summary);
    return summary.entries;
}

std::vector<Case> gpu_planning_cases(const Options& options) {
    const std::vector<size_t> counts = options.smoke()   ? std::vector<size_t>{1000}
                                       : options.quick() ? std::vector<size_t>{100000}
                                                         : std::vector<size_t>{100000, 1000000};
    std::vector<PlanningCase> planning;
    for (size_t count : counts) {
        planning.push_back(differing_ranges_pattern(count));
        planning.push_back(shared_range_pattern(count, true));
    }
    std::vector<Case> cases;
    for (const auto& c : planning) {
        cases.push_back(Case{"move_data planning", "cpu", "GPU table " + c.name,
                             [options, c] { return run_planning(options, c); }});
    }
    // a plan's copy: 10^6 movements (40 MB, past the caches) in every mode
    // but the smoke run, where the two ways part
    const std::vector<size_t> plan_counts = options.smoke() ? std::vector<size_t>{1000}
                                                            : std::vector<size_t>{100000, 1000000};
    for (size_t count : plan_counts) {
        const PlanningCase c = differing_ranges_pattern(count);
        cases.push_back(Case{"move_data planning", "cpu", "GPU plan " + c.name,
                             [options, c] { return run_plan_host_work(options, c); }});
    }
    return cases;
}

}  // namespace bench
