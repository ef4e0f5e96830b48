#pragma once
// The benchmark harness: interleaved timing with medians, result rows with
// ratios to a limit (memcpy / memset / device-to-device bandwidth) and to a
// baseline implementation measured in the same process, a readable table and
// a JSON file.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace bench {

/// Above this fraction of the limit (memcpy, memset, D2D of the same bytes)
/// a figure is not physical: caches and thread counts explain up to ~1.3x,
/// a busy machine the rest.
constexpr double UNRELIABLE_FRACTION = 1.5;

/// Table width: rows, targets and notes fit in this many columns.
constexpr size_t TABLE_COLUMNS = 120;

constexpr double NOT_MEASURED = std::numeric_limits<double>::quiet_NaN();

enum class Mode { smoke, quick, full };

struct Options {
    Mode mode = Mode::full;
    std::string json_path;
    std::string filter;  // run only cases whose "group device name" contains it
    /// --calls N: run every operation exactly N times (after one warm-up
    /// call), untimed rounds aside, for profilers (callgrind, perf): the
    /// instruction counts per call are then total / N.
    size_t calls = 0;

    bool quick() const { return mode != Mode::full; }
    bool smoke() const { return mode == Mode::smoke; }
};

/// One timed operation: runs `iterations` calls and returns the seconds they
/// took. Host operations use `wall_clock`; GPU operations may time themselves
/// with device events.
using TimedBatch = std::function<double(size_t iterations)>;

/// Wraps a host function: the batch is timed with a steady clock.
TimedBatch wall_clock(std::function<void()> operation);

/// Times every operation, interleaved (round r runs a batch of each, in
/// turn, so that they see the same machine state), after a warm-up call and
/// a calibration of the batch size to a minimum duration. Stops after enough
/// rounds and enough time for the mode (see harness.cpp). Returns the median
/// seconds per call of each operation.
std::vector<double> measure(const Options& options, const std::vector<TimedBatch>& operations);

/// A performance target checked on a row.
struct Target {
    std::string name;  // "≥70% memcpy", "≥1x SimpleDataArray", ...
    bool pass;
};

struct Row {
    std::string group;    // move_data, create, copy, swap_axes, as_dlpack
    std::string device;   // cpu, cuda
    std::string name;     // the case: dtype and sizes
    std::vector<std::pair<std::string, std::string>> parameters;  // for the JSON file
    double bytes = 0;     // bytes written per call (0: not a bandwidth operation)
    double run_bytes = 0; // longest contiguous run the operation can copy at once

    double seconds = NOT_MEASURED;           // mtsarray, end to end
    double device_seconds = NOT_MEASURED;    // mtsarray, device time only (GPU)
    std::string limit_name;                  // "memcpy", "alloc+memset", "D2D"
    double limit_seconds = NOT_MEASURED;     // the limit on the same bytes
    std::string baseline_name;               // "SimpleDataArray", ...
    double baseline_seconds = NOT_MEASURED;  // the baseline on the same data
    std::vector<Target> targets;
    std::string note;
    /// The baseline does not do the operation's work (SimpleDataArray::copy
    /// shares its buffer): its time is kept in the JSON file, no speedup is
    /// given.
    bool baseline_does_no_work = false;
    /// More named times or ratios of the row (other baselines, the table
    /// upload, kernel-only estimates), written to the JSON file as numbers.
    std::vector<std::pair<std::string, double>> measurements;

    /// Achieved bytes per second, and the same for the limit.
    double bandwidth() const { return bytes / seconds; }
    double limit_bandwidth() const { return bytes / limit_seconds; }
    /// Achieved bandwidth over the limit's (1.0 = as fast as the limit).
    double fraction_of_limit() const { return limit_seconds / seconds; }
    /// Baseline time over mtsarray time (> 1: mtsarray is faster); not a
    /// number when the baseline does no work.
    double speedup() const { return baseline_does_no_work ? NOT_MEASURED : baseline_seconds / seconds; }
    /// A figure no hardware gives: more than UNRELIABLE_FRACTION of the
    /// limit's bandwidth on the same bytes (the limit or the row was
    /// disturbed by other work on the machine). Reported, never a result.
    bool unreliable() const;
};

/// A case to run: `run` measures it and returns its row.
struct Case {
    std::string group;
    std::string device;
    std::string name;
    std::function<Row()> run;
};

/// Prints the table header of a group (with what its limit and baseline
/// are), rows as they come, and a summary.
class Table {
public:
    void header(const std::string& group, const std::string& device, const std::string& limit,
                const std::string& baseline);
    void print(const Row& row);
    /// Prints the PASS/MISS counts and the missed rows; returns the number of misses.
    size_t summary(const std::vector<Row>& rows) const;
};

/// Prints `text` after `indent` spaces, cut at spaces into lines of at most
/// TABLE_COLUMNS.
void print_wrapped(const std::string& text, size_t indent);

/// Writes the rows, with the machine and the mode, to `path` as JSON.
void write_json(const std::string& path, const Options& options, const std::vector<Row>& rows);

/// "model name" of /proc/cpuinfo and the number of CPUs, for the report.
std::string describe_machine();
/// What the benchmark was built from and with (build_info.cpp.in, filled in
/// by CMake at configure time).
namespace build_info {
extern const char* const commit;         // git describe --always --dirty
extern const char* const compiler;       // "GNU 12.2.0"
extern const char* const cuda_compiler;  // "NVIDIA 13.0.88", or "-"
extern const char* const build_type;     // CMAKE_BUILD_TYPE
}  // namespace build_info

/// "model name" of /proc/cpuinfo alone.
std::string cpu_model();

/// 1.2 ms, 350 ns, ...; 4.0 KiB, 1.5 MiB, ...; 1e6, 3e3, ...
std::string format_seconds(double seconds);
/// "2.35x", "12.3x", "1234x" (suffix after the number); "-" when not finite.
std::string format_ratio(double value, const char* suffix);
std::string format_bytes(double bytes);
std::string format_count(double count);

}  // namespace bench
