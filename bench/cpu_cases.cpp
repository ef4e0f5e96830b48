// CPU rows: every operation through the mts_array_t vtable, exactly as
// libmetatensor calls it, for mtsarray and for metatensor::SimpleDataArray on
// the same data, next to memcpy/memset of the same bytes run on as many
// threads as mtsarray uses for them. Each case checks that mtsarray's result
// equals SimpleDataArray's before it reports a time.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>

#include "cases.hpp"
#include "host_limits.hpp"
#include "host_team.hpp"

namespace bench {
namespace {

constexpr DLDevice CPU = {kDLCPU, 0};
constexpr double KIB4 = 4096;

/// A SimpleDataArray handed to metatensor, with a typed handle on it.
template <typename T> struct SimpleArray {
    metatensor::MtsArray array;
    metatensor::SimpleDataArray<T>* simple;
};

template <typename T>
SimpleArray<T> simple_array(const std::vector<uintptr_t>& shape, bool with_values) {
    auto* simple = new metatensor::SimpleDataArray<T>(shape, T{});
    if (with_values) {
        T* data = simple->data();
        for (size_t i = 0; i < product(shape); i++) {
            data[i] = value_at<T>(i);
        }
    }
    auto array = metatensor::DataArrayBase::to_mts_array(
        std::unique_ptr<metatensor::DataArrayBase>(simple));
    return {std::move(array), simple};
}

void require_equal(const void* mtsarray, const void* simple, size_t bytes, const std::string& what) {
    if (bytes != 0 && std::memcmp(mtsarray, simple, bytes) != 0) {
        throw std::runtime_error(what + ": mtsarray's result differs from SimpleDataArray's");
    }
}

/// A row of the CPU table: `seconds` as measured for {mtsarray,
/// SimpleDataArray[, the limit named `limit_name`]}.
Row cpu_row(std::string group, std::string name, const std::vector<double>& seconds,
            std::string limit_name = "") {
    Row row;
    row.group = std::move(group);
    row.device = "cpu";
    row.name = std::move(name);
    row.seconds = seconds[0];
    row.baseline_name = "SimpleDataArray";
    row.baseline_seconds = seconds[1];
    if (!limit_name.empty()) {
        row.limit_name = std::move(limit_name);
        row.limit_seconds = seconds[2];
    }
    return row;
}

// ---- move_data ----------------------------------------------------------

struct MoveCase {
    size_t movements;
    size_t properties;                // properties_length = input properties
    std::vector<uintptr_t> components;
    bool scattered;                   // samples in random order (else in order)
    size_t output_factor;             // output has factor * properties; we fill the last slice
    size_t threads = 0;               // mtsarray's thread count for the case (0: the default)
};

std::string components_text(const std::vector<uintptr_t>& components) {
    return components.empty() ? "-" : join_shape(components);
}

template <typename T> Row run_move_data(const Options& options, const MoveCase& c) {
    const CaseThreads case_threads(c.threads);
    const size_t n_components = product(c.components);
    std::vector<uintptr_t> input_shape = {c.movements};
    input_shape.insert(input_shape.end(), c.components.begin(), c.components.end());
    std::vector<uintptr_t> output_shape = input_shape;
    input_shape.push_back(c.properties);
    output_shape.push_back(c.properties * c.output_factor);

    std::vector<size_t> order(c.movements);
    std::iota(order.begin(), order.end(), 0);
    if (c.scattered) {
        std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
    }
    std::vector<mts_data_movement_t> movements(c.movements);
    for (size_t i = 0; i < c.movements; i++) {
        movements[i].sample_in = order[i];  // a gather: scattered reads, ordered writes
        movements[i].sample_out = i;
        movements[i].properties_start_in = 0;
        movements[i].properties_start_out = (c.output_factor - 1) * c.properties;
        movements[i].properties_length = c.properties;
    }

    auto input = mtsarray_array<T>(input_shape, true);
    auto output = mtsarray_array<T>(output_shape, false);
    auto simple_input = simple_array<T>(input_shape, true);
    auto simple_output = simple_array<T>(output_shape, false);

    const size_t row_bytes = c.properties * sizeof(T);
    const double bytes = static_cast<double>(c.movements * n_components * row_bytes);
    HostBuffer source(static_cast<size_t>(bytes));
    HostBuffer destination(static_cast<size_t>(bytes));

    auto move = [&movements](const metatensor::MtsArray& out, const metatensor::MtsArray& in) {
        auto o = raw(out);
        auto i = raw(in);
        check(o.move_data(o.ptr, i.ptr, movements.data(), movements.size()));
    };
    const size_t threads = threads_for(static_cast<size_t>(bytes));
    auto seconds = measure(options, {
        wall_clock([&] { move(output, input); }),
        wall_clock([&] { move(simple_output.array, simple_input.array); }),
        parallel_memcpy(destination.get(), source.get(), static_cast<size_t>(bytes), threads),
    });
    require_equal(mtsarray_pointer(output), simple_output.simple->data(),
                  product(output_shape) * sizeof(T), "move_data");

    Row row = cpu_row("move_data",
                      std::string(dtype_name<T>()) + " moves=" + format_count(c.movements) +
                          " props=" + std::to_string(c.properties) + " comps=" + components_text(c.components) +
                          (c.scattered ? " scattered" : " in-order") +
                          (c.output_factor > 1 ? " ->" + std::to_string(c.output_factor) + "P" : "") +
                          threads_suffix(c.threads),
                      seconds, "memcpy");
    row.parameters = {{"dtype", dtype_name<T>()},
                      {"movements", std::to_string(c.movements)},
                      {"properties_length", std::to_string(c.properties)},
                      {"components", components_text(c.components)},
                      {"samples", c.scattered ? "scattered" : "in-order"},
                      {"output_properties", std::to_string(c.properties * c.output_factor)},
                      {"threads", std::to_string(threads)}};
    row.bytes = bytes;
    // Whole rows in order coalesce into one copy; otherwise a run is one
    // movement (C rows when the rows are whole) or one row.
    const bool whole_rows = c.output_factor == 1;
    row.run_bytes = whole_rows ? (c.scattered ? n_components * row_bytes : bytes) : row_bytes;
    if (row.run_bytes >= KIB4) {
        row.targets.push_back({">=70% memcpy", row.fraction_of_limit() >= 0.70});
    }
    row.targets.push_back({">=1x SDA", row.speedup() >= 1.0});
    // the scattered gather of the multi-thread target: 10^5 rows of 32 properties
    if (c.movements == 100000 && c.properties == 32 && c.scattered && c.output_factor == 1 && threads > 1) {
        const double wanted = threads >= 8 ? 2.0 : 1.5;
        row.targets.push_back({wanted == 2.0 ? ">=2x SDA" : ">=1.5x SDA", row.speedup() >= wanted});
    }
    row.note = "";
    return row;
}

// ---- move_data from several user threads at once ------------------------------

/// "Threads:" of /proc/self/status (0 where there is none).
size_t process_thread_count() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("Threads:", 0) == 0) {
            return std::strtoull(line.c_str() + 8, nullptr, 10);
        }
    }
    return 0;
}

/// `users` threads each calling move_data on arrays of their own, all at
/// once (an HPC code's threads, or a data loader's): 10^4 scattered rows of
/// 32 f64 properties each, 2.4 MiB, which mtsarray alone would split.
/// mtsarray must not pile its pool threads on top of the callers.
Row run_move_data_from_user_threads(const Options& options, size_t users) {
    const size_t count = 10000;
    const size_t properties = 32;
    const std::vector<uintptr_t> shape = {count, properties};
    std::vector<size_t> order(count);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
    std::vector<mts_data_movement_t> movements(count);
    for (size_t i = 0; i < count; i++) {
        movements[i] = {order[i], i, 0, 0, properties};
    }
    std::vector<metatensor::MtsArray> inputs, outputs;
    std::vector<SimpleArray<double>> simple_inputs, simple_outputs;
    std::vector<HostBuffer> sources, destinations;
    const size_t bytes = count * properties * sizeof(double);
    for (size_t u = 0; u < users; u++) {
        inputs.push_back(mtsarray_array<double>(shape, true));
        outputs.push_back(mtsarray_array<double>(shape, false));
        simple_inputs.push_back(simple_array<double>(shape, true));
        simple_outputs.push_back(simple_array<double>(shape, false));
        sources.emplace_back(bytes);
        destinations.emplace_back(bytes);
    }
    auto move = [&movements](const metatensor::MtsArray& out, const metatensor::MtsArray& in) {
        auto o = raw(out);
        auto i = raw(in);
        check(o.move_data(o.ptr, i.ptr, movements.data(), movements.size()));
    };
    HostTeam& team = team_of(users);
    auto seconds = measure(options, {
        [&](size_t iterations) {
            return team.run(iterations, [&](size_t u, size_t) { move(outputs[u], inputs[u]); });
        },
        [&](size_t iterations) {
            return team.run(iterations, [&](size_t u, size_t) { move(simple_outputs[u].array, simple_inputs[u].array); });
        },
        [&](size_t iterations) {
            return team.run(iterations, [&](size_t u, size_t) {
                std::memcpy(destinations[u].get(), sources[u].get(), bytes);
                clobber(destinations[u].get());
            });
        },
    });
    for (size_t u = 0; u < users; u++) {
        require_equal(mtsarray_pointer(outputs[u]), simple_outputs[u].simple->data(), bytes, "move_data (user threads)");
    }
    Row row = cpu_row("move_data", "f64 moves=1e4 props=32 scattered, " + std::to_string(users) + " user threads at once",
                      seconds, "memcpy");
    row.parameters = {{"dtype", "f64"}, {"movements", std::to_string(count)}, {"properties_length", "32"},
                      {"user_threads", std::to_string(users)}, {"threads", std::to_string(host_threads())}};
    row.bytes = static_cast<double>(users * bytes);
    row.run_bytes = static_cast<double>(properties * sizeof(double));
    row.targets.push_back({">=1x SDA", row.speedup() >= 1.0});
    row.note = "(each user thread memcpy's its own bytes for the limit; threads in the process now: " +
               std::to_string(process_thread_count()) + ", of which " + std::to_string(users) +
               " bench user threads, at most " + std::to_string(host_threads() - 1) + " mtsarray pool threads)";
    return row;
}

// ---- create (fill) ----------------------------------------------------------

template <typename T> Row run_create(const Options& options, size_t elements, size_t case_threads_count = 0) {
    const CaseThreads case_threads(case_threads_count);
    const std::vector<uintptr_t> shape = {elements / 8, 8};
    const size_t bytes = product(shape) * sizeof(T);
    const T value = static_cast<T>(1.5);

    auto prototype = mtsarray_array<T>({1, 8}, false);
    auto simple_prototype = simple_array<T>({1, 8}, false);

    auto mtsarray_fill = [&] {
        mts_array_t fill;
        check(mtsarray_full(CPU, dtype_of<T>(), nullptr, 0, &value, &fill));
        return fill;
    };
    auto simple_fill = [&] {
        return metatensor::DataArrayBase::to_mts_array(
                   std::make_unique<metatensor::SimpleDataArray<T>>(std::vector<uintptr_t>{}, value))
            .release();
    };
    auto create = [&shape](const metatensor::MtsArray& from, mts_array_t fill) {
        auto p = raw(from);
        mts_array_t created;
        check(p.create(p.ptr, shape.data(), shape.size(), fill, &created));
        return metatensor::MtsArray(created);
    };

    {  // the values first
        auto created = create(prototype, mtsarray_fill());
        const T* data = static_cast<const T*>(mtsarray_pointer(created));
        for (size_t i = 0; i < product(shape); i++) {
            if (data[i] != value) {
                throw std::runtime_error("create: element " + std::to_string(i) + " is not the fill value");
            }
        }
    }

    const size_t threads = threads_for(bytes);
    auto seconds = measure(options, {
        wall_clock([&] { create(prototype, mtsarray_fill()); }),
        wall_clock([&] { create(simple_prototype.array, simple_fill()); }),
        parallel_allocate_and_write(bytes, nullptr, threads),
    });

    Row row = cpu_row("create",
                      std::string(dtype_name<T>()) + " elements=" + format_count(static_cast<double>(product(shape))) +
                          threads_suffix(case_threads_count),
                      seconds, "malloc+memset+free");
    row.parameters = {{"dtype", dtype_name<T>()}, {"shape", join_shape(shape)}, {"threads", std::to_string(threads)}};
    row.bytes = static_cast<double>(bytes);
    row.run_bytes = row.bytes;
    row.targets.push_back({">=70% memset", row.fraction_of_limit() >= 0.70});
    return row;
}

// ---- copy ---------------------------------------------------------------------

template <typename T> Row run_copy(const Options& options, size_t elements) {
    const std::vector<uintptr_t> shape = {elements / 8, 8};
    const size_t bytes = product(shape) * sizeof(T);
    auto source = mtsarray_array<T>(shape, true);
    auto simple_source = simple_array<T>(shape, true);
    HostBuffer host_source(bytes);

    auto copy = [](const metatensor::MtsArray& from) {
        auto f = raw(from);
        mts_array_t copied;
        check(f.copy(f.ptr, CPU, &copied));
        return metatensor::MtsArray(copied);
    };
    {
        auto copied = copy(source);
        require_equal(mtsarray_pointer(copied), simple_source.simple->data(), bytes, "copy");
    }
    const size_t threads = threads_for(bytes);
    auto seconds = measure(options, {
        wall_clock([&] { copy(source); }),
        wall_clock([&] { copy(simple_source.array); }),
        parallel_allocate_and_write(bytes, host_source.get(), threads),
    });

    Row row = cpu_row("copy",
                      std::string(dtype_name<T>()) + " elements=" + format_count(static_cast<double>(product(shape))),
                      seconds, "malloc+memcpy+free");
    row.parameters = {{"dtype", dtype_name<T>()}, {"shape", join_shape(shape)}, {"threads", std::to_string(threads)}};
    row.bytes = static_cast<double>(bytes);
    row.run_bytes = row.bytes;
    row.targets.push_back({">=70% memcpy", row.fraction_of_limit() >= 0.70});
    row.note = "(SimpleDataArray::copy shares its buffer: it copies no data)";
    row.baseline_does_no_work = true;
    return row;
}

// ---- swap_axes ----------------------------------------------------------------

template <typename T>
Row run_swap_axes(const Options& options, const std::vector<uintptr_t>& shape, uintptr_t axis_1,
                  uintptr_t axis_2, size_t case_threads_count = 0) {
    const CaseThreads case_threads(case_threads_count);
    const size_t bytes = product(shape) * sizeof(T);
    auto swap = [axis_1, axis_2](metatensor::MtsArray& array) {
        auto a = raw(array);
        check(a.swap_axes(a.ptr, axis_1, axis_2));
    };
    bool simple_is_right = true;
    {  // one swap each, compared with a plain loop
        const auto expected = swapped_reference<T>(shape, axis_1, axis_2);
        auto array = mtsarray_array<T>(shape, true);
        auto simple = simple_array<T>(shape, true);
        swap(array);
        swap(simple.array);
        auto swapped_shape = shape;
        std::swap(swapped_shape[axis_1], swapped_shape[axis_2]);
        if (array.shape() != swapped_shape ||
            std::memcmp(mtsarray_pointer(array), expected.data(), bytes) != 0) {
            throw std::runtime_error("swap_axes: mtsarray's result is wrong for " + join_shape(shape));
        }
        simple_is_right = std::memcmp(simple.simple->data(), expected.data(), bytes) == 0;
    }

    // Swapping the same axes again restores the shape: every call does the same work.
    auto array = mtsarray_array<T>(shape, true);
    auto simple = simple_array<T>(shape, true);
    HostBuffer source(bytes);
    HostBuffer destination(bytes);
    const size_t threads = threads_for(bytes);
    auto seconds = measure(options, {
        warm(wall_clock([&] { swap(array); })),
        warm(wall_clock([&] { swap(simple.array); })),
        warm(parallel_memcpy(destination.get(), source.get(), bytes, threads)),
    });

    Row row = cpu_row("swap_axes",
                      std::string(dtype_name<T>()) + " " + join_shape(shape) + " axes " +
                          std::to_string(axis_1) + "<->" + std::to_string(axis_2) + threads_suffix(case_threads_count),
                      seconds, "memcpy");
    row.parameters = {{"dtype", dtype_name<T>()},
                      {"shape", join_shape(shape)},
                      {"elements", std::to_string(product(shape))},
                      {"axes", std::to_string(axis_1) + "," + std::to_string(axis_2)},
                      {"threads", std::to_string(threads)}};
    row.bytes = static_cast<double>(bytes);
    row.run_bytes = static_cast<double>(shape.back() * sizeof(T));
    if (product(shape) >= 1000000) {
        row.targets.push_back({">=50% memcpy", row.fraction_of_limit() >= 0.50});
        row.targets.push_back({">=5x SDA", row.speedup() >= 5.0});
    }
    if (!simple_is_right) {
        // metatensor-core 0.2.6: cartesian_index is column-major, linear_index row-major.
        row.note = "(SimpleDataArray::swap_axes gave wrong values here; timed anyway)";
    }
    return row;
}

// ---- as_dlpack ----------------------------------------------------------------

Row run_as_dlpack(const Options& options, const std::vector<uintptr_t>& shape) {
    auto array = mtsarray_array<double>(shape, true);
    auto simple = simple_array<double>(shape, true);
    const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    auto export_and_release = [&version](const metatensor::MtsArray& from) {
        auto f = raw(from);
        DLManagedTensorVersioned* tensor = nullptr;
        check(f.as_dlpack(f.ptr, &tensor, CPU, nullptr, version));
        return tensor;
    };
    {
        auto* tensor = export_and_release(array);
        const auto& dl = tensor->dl_tensor;
        bool ok = dl.ndim == static_cast<int32_t>(shape.size()) && dl.device.device_type == kDLCPU &&
                  static_cast<const char*>(dl.data) + dl.byte_offset ==
                      static_cast<const char*>(mtsarray_pointer(array));
        tensor->deleter(tensor);
        if (!ok) {
            throw std::runtime_error("as_dlpack: unexpected DLPack tensor");
        }
    }
    auto seconds = measure(options, {
        wall_clock([&] {
            auto* tensor = export_and_release(array);
            tensor->deleter(tensor);
        }),
        wall_clock([&] {
            auto* tensor = export_and_release(simple.array);
            tensor->deleter(tensor);
        }),
    });

    Row row = cpu_row("as_dlpack", "f64 " + join_shape(shape) + " export+delete", seconds);
    row.parameters = {{"dtype", "f64"}, {"shape", join_shape(shape)}};
    return row;
}

// ---- movement plans -------------------------------------------------------------

/// One movement plan, made once, executed on every call, next to move_data
/// and SimpleDataArray's move_data on the same arrays (and memcpy of the
/// same bytes). Whole rows of `properties` (the move_data rows' shapes).
Row run_move_plan(const Options& options, size_t count, size_t properties, bool scattered,
                  const std::string& name) {
    const std::vector<uintptr_t> shape = {count, properties};
    std::vector<size_t> order(count);
    std::iota(order.begin(), order.end(), 0);
    if (scattered) {
        std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
    }
    std::vector<mts_data_movement_t> movements(count);
    for (size_t i = 0; i < count; i++) {
        movements[i] = {order[i], i, 0, 0, properties};
    }
    auto input = mtsarray_array<double>(shape, true);
    auto planned = mtsarray_array<double>(shape, false);
    auto moved = mtsarray_array<double>(shape, false);
    auto simple_input = simple_array<double>(shape, true);
    auto simple_output = simple_array<double>(shape, false);
    const mts_array_t planned_raw = raw(planned);
    const mts_array_t input_raw = raw(input);
    mtsarray_move_plan_t* plan = nullptr;
    check(mtsarray_move_plan_create(&planned_raw, &input_raw, movements.data(), count, &plan));
    const std::unique_ptr<mtsarray_move_plan_t, mts_status_t (*)(mtsarray_move_plan_t*)> owned(
        plan, mtsarray_move_plan_free);

    const size_t bytes = count * properties * sizeof(double);
    HostBuffer source(bytes);
    HostBuffer destination(bytes);
    auto move = [&movements](const metatensor::MtsArray& out, const metatensor::MtsArray& in) {
        auto o = raw(out);
        auto i = raw(in);
        check(o.move_data(o.ptr, i.ptr, movements.data(), movements.size()));
    };
    auto seconds = measure(options, {
        wall_clock([&] { check(mtsarray_move_plan_execute(plan, &planned_raw, &input_raw)); }),
        wall_clock([&] { move(moved, input); }),
        wall_clock([&] { move(simple_output.array, simple_input.array); }),
        parallel_memcpy(destination.get(), source.get(), bytes, threads_for(bytes)),
    });
    require_equal(mtsarray_pointer(planned), simple_output.simple->data(), bytes, "plan execute");
    require_equal(mtsarray_pointer(moved), simple_output.simple->data(), bytes, "move_data");

    Row row;
    row.group = "move_plan";
    row.device = "cpu";
    row.name = name;
    row.seconds = seconds[0];
    row.baseline_name = "move_data";
    row.baseline_seconds = seconds[1];
    row.limit_name = "memcpy";
    row.limit_seconds = seconds[3];
    row.bytes = static_cast<double>(bytes);
    row.run_bytes = scattered ? static_cast<double>(properties * sizeof(double)) : row.bytes;
    row.parameters = {{"dtype", "f64"},
                      {"movements", std::to_string(count)},
                      {"properties_length", std::to_string(properties)},
                      {"samples", scattered ? "scattered" : "in-order"}};
    row.measurements = {{"simple_data_array_seconds", seconds[2]}};
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.2fx", seconds[2] / seconds[0]);
    row.note = "SimpleDataArray " + format_seconds(seconds[2]) + ": execute " + ratio + " faster";
    row.targets.push_back({">=1x move_data", row.speedup() >= 1.0});
    if (count <= 100) {
        row.targets.push_back({">=1.3x move_data", row.speedup() >= 1.3});
    }
    if (count == 1 && properties == 1) {
        row.targets.push_back({"<=60 ns", row.seconds <= 60e-9});
    }
    return row;
}

// ---- the sweeps -----------------------------------------------------------------

template <typename F> Case make_case(std::string group, std::string name, F run) {
    return Case{std::move(group), "cpu", std::move(name), std::move(run)};
}

void add_move_data(std::vector<Case>& cases, const Options& options, const MoveCase& c, bool single) {
    // the row's own name, so that --filter can pick one row
    const std::string name = "moves=" + format_count(c.movements) + " props=" +
                             std::to_string(c.properties) + " comps=" + components_text(c.components) +
                             (c.scattered ? " scattered" : " in-order") +
                             (c.output_factor > 1 ? " ->" + std::to_string(c.output_factor) + "P" : "");
    cases.push_back(make_case("move_data", "f64 " + name, [options, c] { return run_move_data<double>(options, c); }));
    if (!single) {
        cases.push_back(make_case("move_data", "f32 " + name, [options, c] { return run_move_data<float>(options, c); }));
    }
}

}  // namespace

std::vector<Case> cpu_cases(const Options& options) {
    std::vector<Case> cases;
    const bool quick = options.quick();
    const bool smoke = options.smoke();

    // move_data: number of movements (whole rows: in order they coalesce)
    std::vector<size_t> counts = smoke ? std::vector<size_t>{1, 100}
                                 : quick ? std::vector<size_t>{1, 100, 10000, 100000}
                                         : std::vector<size_t>{1, 10, 100, 1000, 10000, 100000, 1000000};
    for (size_t count : counts) {
        for (bool scattered : {false, true}) {
            add_move_data(cases, options, {count, 32, {}, scattered, 1}, true);
        }
    }
    // movement plans: executed next to move_data and SimpleDataArray; the
    // fixed cost of an execution is the time of a 1-movement plan of 1
    // property (8 bytes)
    for (size_t count : counts) {
        for (bool scattered : {false, true}) {
            const std::string name = "f64 moves=" + format_count(count) + " props=32" +
                                     (scattered ? " scattered" : " in-order");
            cases.push_back(make_case("move_plan", name, [options, count, scattered, name] {
                return run_move_plan(options, count, 32, scattered, name);
            }));
        }
    }
    cases.push_back(make_case("move_plan", "f64 fixed cost: moves=1 props=1",
                              [options] { return run_move_plan(options, 1, 1, false, "f64 fixed cost: moves=1 props=1"); }));
    // move_data: properties_length, into the last slice of a twice wider
    // output (the shape of keys_to_properties), float32 and float64
    std::vector<size_t> lengths = smoke ? std::vector<size_t>{16}
                                  : quick ? std::vector<size_t>{1, 64, 1024, 4096}
                                          : std::vector<size_t>{1, 4, 16, 64, 256, 1024, 4096};
    for (size_t length : lengths) {
        const size_t budget = (smoke ? 1 : quick ? 8 : 32) << 20;  // input bytes
        const size_t movements = std::clamp<size_t>(budget / (length * 8), 64, 100000);
        for (bool scattered : quick ? std::vector<bool>{true} : std::vector<bool>{false, true}) {
            add_move_data(cases, options, {movements, length, {}, scattered, 2}, false);
        }
    }
    // move_data: the parallel gather on one thread (the code a thread count
    // of 1 runs), and 8 user threads calling at once
    if (!smoke) {
        MoveCase single = {100000, 32, {}, true, 1};
        single.threads = 1;
        cases.push_back(make_case("move_data", "f64 moves=1e5 props=32 comps=- [1 thread]",
                                  [options, single] { return run_move_data<double>(options, single); }));
        cases.push_back(make_case("move_data", "f64 8 user threads",
                                  [options] { return run_move_data_from_user_threads(options, 8); }));
    }
    // move_data: component axes (0..3 axes of 3: xyz, then 3x3 tensors, ...)
    if (!smoke) {
        for (size_t axes = 0; axes <= 3; axes++) {
            std::vector<uintptr_t> components(axes, 3);
            for (bool scattered : quick ? std::vector<bool>{true} : std::vector<bool>{false, true}) {
                add_move_data(cases, options, {quick ? 2000u : 10000u, 64, components, scattered, 1}, true);
            }
        }
    }

    // create and copy: 1e4 .. 1e8 elements
    std::vector<size_t> sizes = smoke ? std::vector<size_t>{10000}
                                : quick ? std::vector<size_t>{10000, 1000000, 10000000}
                                        : std::vector<size_t>{10000, 100000, 1000000, 10000000, 100000000};
    for (size_t size : sizes) {
        cases.push_back(make_case("create", "f64 " + format_count(size), [options, size] { return run_create<double>(options, size); }));
        if (!quick) {
            cases.push_back(make_case("create", "f32 " + format_count(size), [options, size] { return run_create<float>(options, size); }));
        }
    }
    for (size_t size : sizes) {
        cases.push_back(make_case("copy", "f64 " + format_count(size), [options, size] { return run_copy<double>(options, size); }));
    }

    // swap_axes: square matrices, and (samples, 3, 16) -> (samples, 16, 3)
    std::vector<std::vector<uintptr_t>> matrices =
        smoke ? std::vector<std::vector<uintptr_t>>{{100, 100}}
        : quick ? std::vector<std::vector<uintptr_t>>{{100, 100}, {250, 400}, {1000, 1000}}
                : std::vector<std::vector<uintptr_t>>{{100, 100}, {250, 400}, {1000, 1000}, {2500, 4000}, {10000, 10000}};
    for (const auto& shape : matrices) {
        cases.push_back(make_case("swap_axes", "f64 " + join_shape(shape), [options, shape] { return run_swap_axes<double>(options, shape, 0, 1); }));
    }
    // swap_axes on one thread: the transpose kernels alone, float64 and
    // float32, and a power of two (rows that share cache sets)
    if (!smoke) {
        for (const std::vector<uintptr_t>& shape : {std::vector<uintptr_t>{1000, 1000}, std::vector<uintptr_t>{1024, 1024}}) {
            cases.push_back(make_case("swap_axes", "f64 " + join_shape(shape) + " [1 thread]",
                                      [options, shape] { return run_swap_axes<double>(options, shape, 0, 1, 1); }));
            cases.push_back(make_case("swap_axes", "f32 " + join_shape(shape) + " [1 thread]",
                                      [options, shape] { return run_swap_axes<float>(options, shape, 0, 1, 1); }));
        }
        const std::vector<uintptr_t> small_matrices = {20833, 3, 16};
        cases.push_back(make_case("swap_axes", "f64 20833x3x16 [1 thread]",
                                  [options, small_matrices] { return run_swap_axes<double>(options, small_matrices, 1, 2, 1); }));
    }
    std::vector<size_t> samples = smoke ? std::vector<size_t>{}
                                  : quick ? std::vector<size_t>{20833}
                                          : std::vector<size_t>{208, 20833, 208333, 2083333};
    for (size_t n : samples) {
        const std::vector<uintptr_t> shape = {n, 3, 16};
        cases.push_back(make_case("swap_axes", "f64 " + join_shape(shape), [options, shape] { return run_swap_axes<double>(options, shape, 1, 2); }));
    }

    // as_dlpack: a fixed cost, whatever the size
    cases.push_back(make_case("as_dlpack", "small", [options] { return run_as_dlpack(options, {10, 3, 8}); }));
    if (!quick) {
        cases.push_back(make_case("as_dlpack", "large", [options] { return run_as_dlpack(options, {100000, 3, 8}); }));
    }
    return cases;
}

}  // namespace bench
