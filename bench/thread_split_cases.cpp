// "thread split" rows: the CPU operations whose work mtsarray splits between
// host threads (copy, copy_into, create, move_data, swap_axes of 1-8 MiB, where a
// call's fixed costs weigh most), at 2, 4, 8 and 16 threads, each next to
// the same call on one thread and to memcpy / memset of the same bytes on as
// many threads, measured side by side in one run. The rule they check: the
// split never makes a call slower than one thread, and holds the
// operation's %-of-memcpy target at every thread count. A thread count above
// the CPUs this process may use is oversubscribed: its row is printed for
// its shape, and its targets are not checked.

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "cases.hpp"
#include "host_limits.hpp"

namespace bench {
namespace {

constexpr DLDevice CPU = {kDLCPU, 0};
const std::vector<size_t> THREAD_COUNTS = {2, 4, 8, 16};

/// The CPUs this process may run on.
size_t usable_cpus() {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        return static_cast<size_t>(CPU_COUNT(&set));
    }
#endif
    return std::max(1u, std::thread::hardware_concurrency());
}

/// An operation on prepared arrays, called through the mts_array_t vtable.
struct SplitOperation {
    std::string group;     // the group of the main rows it mirrors
    std::string name;      // "f64 elements=1e6"
    size_t bytes;          // moved by one call
    double target;         // the %-of-limit target of its main rows
    std::string limit;     // "memcpy", "malloc+memset+free", ...
    std::function<void()> call;
    /// The limit on `threads` threads.
    std::function<TimedBatch(size_t threads)> limit_on;
    /// Swaps restore the shape every second call: warmed by two calls.
    bool warm = false;
};

/// `operation` with mtsarray's thread count set to `threads` first.
TimedBatch on_threads(const SplitOperation& operation, size_t threads) {
    TimedBatch batch = wall_clock(operation.call);
    if (operation.warm) {
        batch = warm(std::move(batch));
    } else {
        batch = [batch = std::move(batch)](size_t iterations) {
            (void)batch(1);  // the pool's threads started for this count
            return batch(iterations);
        };
    }
    return [threads, batch = std::move(batch)](size_t iterations) {
        check(mtsarray_set_num_threads(static_cast<int32_t>(threads)));
        return batch(iterations);
    };
}

Row run_split(const Options& options, const SplitOperation& operation, size_t threads) {
    const size_t original = host_threads();
    // the limit is the hardware's: never more threads than CPUs
    const size_t cpus = usable_cpus();
    const size_t limit_threads = std::min(threads, cpus);
    std::vector<double> seconds;
    try {
        seconds = measure(options, {
            on_threads(operation, threads),
            on_threads(operation, 1),
            operation.limit_on(limit_threads),
        });
    } catch (...) {
        (void)mtsarray_set_num_threads(static_cast<int32_t>(original));
        throw;
    }
    check(mtsarray_set_num_threads(static_cast<int32_t>(original)));

    Row row;
    row.group = "thread split";
    row.device = "cpu";
    row.name = operation.group + " " + operation.name + threads_suffix(threads);
    row.seconds = seconds[0];
    row.baseline_name = "the same call on one thread";
    row.baseline_seconds = seconds[1];
    row.limit_name = operation.limit + (limit_threads < threads ? " on " + std::to_string(limit_threads) + " threads" : "");
    row.limit_seconds = seconds[2];
    row.bytes = static_cast<double>(operation.bytes);
    row.run_bytes = row.bytes;
    row.parameters = {{"operation", operation.group}, {"threads", std::to_string(threads)}};
    if (threads <= cpus) {
        row.targets.push_back({">=1x one thread", row.speedup() >= 1.0});
        char text[32];
        std::snprintf(text, sizeof(text), ">=%.0f%% %s", 100 * operation.target,
                      operation.limit.find("memset") != std::string::npos ? "memset" : "memcpy");
        row.targets.push_back({text, row.fraction_of_limit() >= operation.target});
    } else {
        row.note = "(" + std::to_string(threads) + " threads on " + std::to_string(cpus) +
                   " CPUs: oversubscribed, shown for its shape, targets not checked)";
    }
    return row;
}

/// Arrays and calls of one operation, made once for all its rows.
template <typename Make> Case split_case(const Options& options, const std::string& name, size_t threads, Make make) {
    return Case{"thread split", "cpu", name + threads_suffix(threads), [options, threads, make] {
                    const SplitOperation operation = make();
                    return run_split(options, operation, threads);
                }};
}

/// An operation moving `bytes` into memory that exists, checked once:
/// `call` must leave the `bytes` at `written` equal to those at `expected`.
/// Its limit is memcpy of as many bytes between two host buffers.
SplitOperation into_existing(const std::string& group, const std::string& name, size_t bytes,
                             std::function<void()> call, const void* written, const void* expected) {
    call();
    if (std::memcmp(written, expected, bytes) != 0) {
        throw std::runtime_error("thread split: " + group + " gave other values");
    }
    auto source = std::make_shared<HostBuffer>(bytes);
    auto destination = std::make_shared<HostBuffer>(bytes);
    return {group, name, bytes, 0.70, "memcpy", std::move(call),
            [bytes, source, destination](size_t threads) {
                return parallel_memcpy(destination->get(), source->get(), bytes, threads);
            }};
}

/// copy of 10^6 float64: a new array, written on every thread.
SplitOperation copy_operation() {
    const std::vector<uintptr_t> shape = {125000, 8};
    const size_t bytes = product(shape) * sizeof(double);
    auto source = std::make_shared<metatensor::MtsArray>(mtsarray_array<double>(shape, true));
    auto host_source = std::make_shared<HostBuffer>(bytes);
    auto copy = [source] {
        auto from = raw(*source);
        mts_array_t copied;
        check(from.copy(from.ptr, CPU, &copied));
        return metatensor::MtsArray(copied);
    };
    {
        auto copied = copy();
        if (std::memcmp(mtsarray_pointer(copied), mtsarray_pointer(*source), bytes) != 0) {
            throw std::runtime_error("thread split: copy gave other values");
        }
    }
    return {"copy", "f64 elements=1e6", bytes, 0.70, "malloc+memcpy+free", [copy] { copy(); },
            [bytes, host_source](size_t threads) {
                return parallel_allocate_and_write(bytes, host_source->get(), threads);
            }};
}

/// copy_into of 10^6 float64: the copy's work into an array that exists, so
/// that no memory is allocated, advised or faulted in. Next to `copy`, it
/// tells a thread count where the split itself falls short from one where
/// fresh memory does.
SplitOperation copy_into_operation() {
    const std::vector<uintptr_t> shape = {125000, 8};
    const size_t bytes = product(shape) * sizeof(double);
    auto source = std::make_shared<metatensor::MtsArray>(mtsarray_array<double>(shape, true));
    auto destination = std::make_shared<metatensor::MtsArray>(mtsarray_zeros_array(CPU, dtype_of<double>(), shape));
    auto copy_into = [source, destination] {
        const mts_array_t to = raw(*destination);
        const mts_array_t from = raw(*source);
        check(mtsarray_copy_into(&to, &from));
    };
    return into_existing("copy_into", "f64 elements=1e6", bytes, copy_into, mtsarray_pointer(*destination),
                         mtsarray_pointer(*source));
}

/// create of 10^6 float64 filled with a value.
SplitOperation create_operation() {
    const std::vector<uintptr_t> shape = {125000, 8};
    const size_t bytes = product(shape) * sizeof(double);
    auto prototype = std::make_shared<metatensor::MtsArray>(mtsarray_array<double>({1, 8}, true));
    const double value = 2.5;
    auto create = [prototype, shape, value] {
        mts_array_t fill;
        check(mtsarray_full(CPU, dtype_of<double>(), nullptr, 0, &value, &fill));
        auto p = raw(*prototype);
        mts_array_t created;
        check(p.create(p.ptr, shape.data(), shape.size(), fill, &created));  // takes the fill value
        return metatensor::MtsArray(created);
    };
    {
        auto created = create();
        const auto* data = static_cast<const double*>(mtsarray_pointer(created));
        if (!std::all_of(data, data + product(shape), [value](double x) { return x == value; })) {
            throw std::runtime_error("thread split: create left an element without the fill value");
        }
    }
    return {"create", "f64 elements=1e6", bytes, 0.70, "malloc+memset+free", [create] { create(); },
            [bytes](size_t threads) { return parallel_allocate_and_write(bytes, nullptr, threads); }};
}

/// move_data of 10^4 movements of 32 float64 each, samples in order: one
/// run, copied on every thread.
SplitOperation move_data_operation() {
    const size_t count = 10000;
    const std::vector<uintptr_t> shape = {count, 32};
    const size_t bytes = product(shape) * sizeof(double);
    auto input = std::make_shared<metatensor::MtsArray>(mtsarray_array<double>(shape, true));
    auto output = std::make_shared<metatensor::MtsArray>(mtsarray_zeros_array(CPU, dtype_of<double>(), shape));
    auto movements = std::make_shared<std::vector<mts_data_movement_t>>();
    for (uintptr_t i = 0; i < count; i++) {
        movements->push_back({i, i, 0, 0, 32});
    }
    auto move = [input, output, movements] {
        auto out = raw(*output);
        auto in = raw(*input);
        check(out.move_data(out.ptr, in.ptr, movements->data(), movements->size()));
    };
    return into_existing("move_data", "f64 moves=1e4 props=32 in-order", bytes, move, mtsarray_pointer(*output),
                         mtsarray_pointer(*input));
}

/// swap_axes of a 1000x1000 float64 matrix (twice restores it).
SplitOperation swap_axes_operation() {
    const std::vector<uintptr_t> shape = {1000, 1000};
    const size_t bytes = product(shape) * sizeof(double);
    auto array = std::make_shared<metatensor::MtsArray>(mtsarray_array<double>(shape, true));
    auto swap = [array] {
        auto a = raw(*array);
        check(a.swap_axes(a.ptr, 0, 1));
    };
    swap();
    const auto* swapped = static_cast<const double*>(mtsarray_pointer(*array));
    for (size_t row = 0; row < shape[0]; row++) {
        for (size_t column = 0; column < shape[1]; column++) {
            if (swapped[column * shape[0] + row] != value_at<double>(row * shape[1] + column)) {
                throw std::runtime_error("thread split: swap_axes gave other values");
            }
        }
    }
    swap();
    auto source = std::make_shared<HostBuffer>(bytes);
    auto destination = std::make_shared<HostBuffer>(bytes);
    SplitOperation operation = {"swap_axes", "f64 1000x1000 axes 0<->1", bytes, 0.50, "memcpy", swap,
                                [bytes, source, destination](size_t threads) {
                                    return warm(parallel_memcpy(destination->get(), source->get(), bytes, threads));
                                }};
    operation.warm = true;
    return operation;
}

}  // namespace

std::vector<Case> thread_split_cases(const Options& options) {
    std::vector<Case> cases;
    // smoke: one count, for the checks of the values
    const std::vector<size_t> counts = options.smoke() ? std::vector<size_t>{2} : THREAD_COUNTS;
    const std::vector<std::pair<std::string, std::function<SplitOperation()>>> operations = {
        {"copy f64 elements=1e6", copy_operation},
        {"copy_into f64 elements=1e6", copy_into_operation},
        {"create f64 elements=1e6", create_operation},
        {"move_data f64 moves=1e4 props=32 in-order", move_data_operation},
        {"swap_axes f64 1000x1000 axes 0<->1", swap_axes_operation},
    };
    for (const auto& operation : operations) {
        for (size_t threads : counts) {
            cases.push_back(split_case(options, operation.first, threads, operation.second));
        }
    }
    return cases;
}

}  // namespace bench
