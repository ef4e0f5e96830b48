// CUDA rows (built only when mtsarray has the CUDA backend): mtsarray arrays
// on cuda:0, driven through the mts_array_t vtable on a user stream, next to
// the device-to-device cudaMemcpyAsync bandwidth (the limit) and to one
// cudaMemcpyAsync per contiguous segment (what a user would write without a
// gather kernel). move_data is reported end to end (host wall time until the
// stream is done) and kernel-only (device time between two events on the
// array's stream). Every case checks its values against the baseline or a
// host reference before it reports a time.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>

#include <cuda_runtime.h>

#include "cases.hpp"

namespace bench {
namespace {

constexpr DLDevice GPU = {kDLCUDA, 0};
constexpr double KIB4 = 4096;
/// Above this many segments the per-segment baseline takes seconds per call.
constexpr size_t MAX_BASELINE_SEGMENTS = 200000;

void cuda_check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) {
        throw std::runtime_error(std::string(call) + ": " + cudaGetErrorName(status) + ": " +
                                 cudaGetErrorString(status));
    }
}
#define BENCH_CUDA(call) cuda_check((call), #call)

/// Why the CUDA rows can not run here, or "" when they can.
std::string unavailable_reason() {
    bool available = false;
    if (mtsarray_backend_available(kDLCUDA, &available) != MTS_SUCCESS || !available) {
        return std::string("mtsarray: ") + mtsarray_backend_unavailable_reason(kDLCUDA);
    }
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
    }
    if (count == 0) {
        return "no CUDA device";
    }
    return "";
}

/// The user stream every case runs on, and two events to time it.
struct Timing {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;

    Timing() {
        BENCH_CUDA(cudaSetDevice(0));
        BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        BENCH_CUDA(cudaEventCreate(&start));
        BENCH_CUDA(cudaEventCreate(&stop));
    }
    ~Timing() {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        cudaStreamDestroy(stream);
    }
    Timing(const Timing&) = delete;
    Timing& operator=(const Timing&) = delete;

    /// The DLPack stream number of `stream` (a handle: > 2).
    int64_t dlpack_number() const { return static_cast<int64_t>(reinterpret_cast<intptr_t>(stream)); }

    void synchronize() const { BENCH_CUDA(cudaStreamSynchronize(stream)); }

    /// Device time of `iterations` calls of `enqueue` (which queues on `stream`).
    TimedBatch device_time(std::function<void()> enqueue) {
        return [this, enqueue = std::move(enqueue)](size_t iterations) {
            BENCH_CUDA(cudaEventRecord(start, stream));
            for (size_t i = 0; i < iterations; i++) {
                enqueue();
            }
            BENCH_CUDA(cudaEventRecord(stop, stream));
            BENCH_CUDA(cudaEventSynchronize(stop));
            float milliseconds = 0;
            BENCH_CUDA(cudaEventElapsedTime(&milliseconds, start, stop));
            return 1e-3 * static_cast<double>(milliseconds);
        };
    }

    /// Host time of `iterations` calls of `enqueue`, until `stream` is done.
    TimedBatch end_to_end(std::function<void()> enqueue) {
        return [this, enqueue = std::move(enqueue)](size_t iterations) {
            const auto begin = std::chrono::steady_clock::now();
            for (size_t i = 0; i < iterations; i++) {
                enqueue();
            }
            synchronize();
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        };
    }
};

Timing& timing() {
    static Timing instance;
    return instance;
}

/// A device buffer owned by the benchmark (baselines and limits).
struct DeviceBuffer {
    explicit DeviceBuffer(size_t bytes) : bytes(bytes == 0 ? 1 : bytes) {
        BENCH_CUDA(cudaMalloc(&data, this->bytes));
        BENCH_CUDA(cudaMemset(data, 0, this->bytes));
    }
    ~DeviceBuffer() { cudaFree(data); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    char* get() const { return static_cast<char*>(data); }
    void* data = nullptr;
    size_t bytes;
};

template <typename T> std::vector<T> host_values(size_t count) {
    std::vector<T> values(count);
    for (size_t i = 0; i < count; i++) {
        values[i] = value_at<T>(i);
    }
    return values;
}

/// An mtsarray array on cuda:0 working on the benchmark's stream, holding
/// value_at(i) (or zeros).
template <typename T>
metatensor::MtsArray gpu_array(const std::vector<uintptr_t>& shape, bool with_values) {
    auto array = mtsarray_zeros_array(GPU, dtype_of<T>(), shape);
    auto r = raw(array);
    check(mtsarray_set_stream(&r, timing().dlpack_number()));
    check(mtsarray_synchronize(&r));
    if (with_values) {
        const auto values = host_values<T>(product(shape));
        BENCH_CUDA(cudaMemcpy(mtsarray_pointer(array), values.data(), values.size() * sizeof(T),
                              cudaMemcpyHostToDevice));
        BENCH_CUDA(cudaDeviceSynchronize());  // pageable copies may still be in flight
    }
    return array;
}

std::vector<char> to_host(const void* device, size_t bytes) {
    std::vector<char> host(bytes);
    if (bytes != 0) {
        BENCH_CUDA(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost));
    }
    return host;
}

std::string percent(double fraction) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.0f%%", 100.0 * fraction);
    return buffer;
}

// ---- move_data ------------------------------------------------------------------

struct GpuMoveCase {
    size_t movements;
    size_t properties;
    std::vector<uintptr_t> components;
    bool scattered;
    size_t output_factor;
};

template <typename T> Row run_move_data(const Options& options, const GpuMoveCase& c) {
    auto& t = timing();
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
        movements[i] = {order[i], i, 0, (c.output_factor - 1) * c.properties, c.properties};
    }

    // The baseline's segments: one per movement when rows are whole, else one per row.
    struct Segment {
        size_t input_offset, output_offset, bytes;
    };
    const size_t row_in = c.properties * sizeof(T);
    const size_t row_out = c.properties * c.output_factor * sizeof(T);
    const bool whole_rows = c.output_factor == 1;
    std::vector<Segment> segments;
    for (const auto& m : movements) {
        if (whole_rows) {
            segments.push_back({m.sample_in * n_components * row_in, m.sample_out * n_components * row_out,
                                n_components * row_in});
        } else {
            for (size_t k = 0; k < n_components; k++) {
                segments.push_back({(m.sample_in * n_components + k) * row_in,
                                    (m.sample_out * n_components + k) * row_out +
                                        m.properties_start_out * sizeof(T),
                                    row_in});
            }
        }
    }

    auto input = gpu_array<T>(input_shape, true);
    auto output = gpu_array<T>(output_shape, false);
    const size_t output_bytes = product(output_shape) * sizeof(T);
    DeviceBuffer baseline_output(output_bytes);
    const double bytes = static_cast<double>(c.movements * n_components * row_in);
    DeviceBuffer limit_source(static_cast<size_t>(bytes));
    DeviceBuffer limit_destination(static_cast<size_t>(bytes));
    const char* input_data = static_cast<const char*>(mtsarray_pointer(input));

    auto move = [&] {
        auto o = raw(output);
        auto i = raw(input);
        check(o.move_data(o.ptr, i.ptr, movements.data(), movements.size()));
    };
    auto per_segment = [&] {
        for (const auto& s : segments) {
            BENCH_CUDA(cudaMemcpyAsync(baseline_output.get() + s.output_offset, input_data + s.input_offset,
                                       s.bytes, cudaMemcpyDeviceToDevice, t.stream));
        }
    };
    auto d2d = [&] {
        BENCH_CUDA(cudaMemcpyAsync(limit_destination.get(), limit_source.get(), static_cast<size_t>(bytes),
                                   cudaMemcpyDeviceToDevice, t.stream));
    };

    std::vector<TimedBatch> operations = {t.end_to_end(move), t.device_time(move), t.device_time(d2d)};
    const bool with_baseline = segments.size() <= MAX_BASELINE_SEGMENTS;
    if (with_baseline) {
        operations.push_back(t.end_to_end(per_segment));
    }
    auto seconds = measure(options, operations);

    if (with_baseline) {
        if (to_host(mtsarray_pointer(output), output_bytes) != to_host(baseline_output.get(), output_bytes)) {
            throw std::runtime_error("cuda move_data: mtsarray's result differs from the per-segment copies");
        }
    } else {  // a host reference instead
        const auto in = host_values<T>(product(input_shape));
        std::vector<T> expected(product(output_shape), T{});
        for (const auto& s : segments) {
            std::memcpy(reinterpret_cast<char*>(expected.data()) + s.output_offset,
                        reinterpret_cast<const char*>(in.data()) + s.input_offset, s.bytes);
        }
        const auto got = to_host(mtsarray_pointer(output), output_bytes);
        if (std::memcmp(got.data(), expected.data(), output_bytes) != 0) {
            throw std::runtime_error("cuda move_data: mtsarray's result differs from the host reference");
        }
    }

    Row row;
    row.group = "move_data";
    row.device = "cuda";
    row.name = std::string(dtype_name<T>()) + " moves=" + format_count(static_cast<double>(c.movements)) +
               " props=" + std::to_string(c.properties) +
               " comps=" + (c.components.empty() ? std::string("-") : join_shape(c.components)) +
               (c.scattered ? " scattered" : " in-order") +
               (c.output_factor > 1 ? " ->" + std::to_string(c.output_factor) + "P" : "");
    row.parameters = {{"dtype", dtype_name<T>()},
                      {"movements", std::to_string(c.movements)},
                      {"properties_length", std::to_string(c.properties)},
                      {"components", c.components.empty() ? "-" : join_shape(c.components)},
                      {"samples", c.scattered ? "scattered" : "in-order"},
                      {"output_properties", std::to_string(c.properties * c.output_factor)},
                      {"segments", std::to_string(segments.size())}};
    row.bytes = bytes;
    row.run_bytes = whole_rows ? (c.scattered ? n_components * row_in : bytes) : row_in;
    row.seconds = seconds[0];
    row.device_seconds = seconds[1];
    row.limit_name = "D2D cudaMemcpyAsync";
    row.limit_seconds = seconds[2];
    row.baseline_name = "cudaMemcpyAsync per segment";
    row.baseline_seconds = with_baseline ? seconds[3] : NOT_MEASURED;
    const double kernel_fraction = row.limit_seconds / row.device_seconds;
    if (row.run_bytes >= KIB4) {
        row.targets.push_back({">=70% D2D (kernel)", kernel_fraction >= 0.70});
    }
    if (with_baseline) {
        row.targets.push_back({">=1x per-segment", row.speedup() >= 1.0});
    }
    row.note = "kernel-only " + format_seconds(row.device_seconds) + " = " + percent(kernel_fraction) +
               " of D2D; " + std::to_string(segments.size()) + " segments" +
               (with_baseline ? "" : " (too many for the per-segment baseline)");
    return row;
}

// ---- create, copy, swap_axes, as_dlpack ----------------------------------------------

Row run_create(const Options& options, size_t elements) {
    auto& t = timing();
    const std::vector<uintptr_t> shape = {elements / 8, 8};
    const size_t bytes = product(shape) * sizeof(double);
    const double value = 1.5;
    auto prototype = gpu_array<double>({1, 8}, false);
    DeviceBuffer limit(bytes);

    auto create = [&] {
        mts_array_t fill;
        check(mtsarray_full({kDLCPU, 0}, dtype_of<double>(), nullptr, 0, &value, &fill));
        auto p = raw(prototype);
        mts_array_t created;
        check(p.create(p.ptr, shape.data(), shape.size(), fill, &created));
        return metatensor::MtsArray(created);
    };
    {
        auto created = create();
        auto r = raw(created);
        check(mtsarray_synchronize(&r));
        const auto host = to_host(mtsarray_pointer(created), bytes);
        const auto* data = reinterpret_cast<const double*>(host.data());
        for (size_t i = 0; i < product(shape); i++) {
            if (data[i] != value) {
                throw std::runtime_error("cuda create: element " + std::to_string(i) + " is not the fill value");
            }
        }
    }
    // New arrays work on the device's default stream: wait for the device.
    auto seconds = measure(options, {
        [&](size_t iterations) {
            const auto begin = std::chrono::steady_clock::now();
            for (size_t i = 0; i < iterations; i++) {
                create();
            }
            BENCH_CUDA(cudaDeviceSynchronize());
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        },
        t.end_to_end([&] { BENCH_CUDA(cudaMemsetAsync(limit.get(), 0x3c, bytes, t.stream)); }),
    });

    Row row;
    row.group = "create";
    row.device = "cuda";
    row.name = "f64 elements=" + format_count(static_cast<double>(product(shape)));
    row.parameters = {{"dtype", "f64"}, {"shape", join_shape(shape)}};
    row.bytes = static_cast<double>(bytes);
    row.run_bytes = row.bytes;
    row.seconds = seconds[0];
    row.limit_name = "cudaMemsetAsync";
    row.limit_seconds = seconds[1];
    row.targets.push_back({">=70% memset", row.fraction_of_limit() >= 0.70});
    row.note = "(includes stream-ordered allocation and free)";
    return row;
}

Row run_copy(const Options& options, size_t elements) {
    auto& t = timing();
    const std::vector<uintptr_t> shape = {elements / 8, 8};
    const size_t bytes = product(shape) * sizeof(double);
    auto source = gpu_array<double>(shape, true);
    DeviceBuffer limit_source(bytes);
    DeviceBuffer limit_destination(bytes);
    auto copy = [&] {
        auto s = raw(source);
        mts_array_t copied;
        check(s.copy(s.ptr, GPU, &copied));
        return metatensor::MtsArray(copied);
    };
    {
        auto copied = copy();
        auto r = raw(copied);
        check(mtsarray_synchronize(&r));
        if (to_host(mtsarray_pointer(copied), bytes) != to_host(mtsarray_pointer(source), bytes)) {
            throw std::runtime_error("cuda copy: the copy differs from the source");
        }
    }
    auto seconds = measure(options, {
        [&](size_t iterations) {
            const auto begin = std::chrono::steady_clock::now();
            for (size_t i = 0; i < iterations; i++) {
                copy();
            }
            BENCH_CUDA(cudaDeviceSynchronize());
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        },
        t.end_to_end([&] {
            BENCH_CUDA(cudaMemcpyAsync(limit_destination.get(), limit_source.get(), bytes,
                                       cudaMemcpyDeviceToDevice, t.stream));
        }),
    });

    Row row;
    row.group = "copy";
    row.device = "cuda";
    row.name = "f64 elements=" + format_count(static_cast<double>(product(shape)));
    row.parameters = {{"dtype", "f64"}, {"shape", join_shape(shape)}};
    row.bytes = static_cast<double>(bytes);
    row.run_bytes = row.bytes;
    row.seconds = seconds[0];
    row.limit_name = "D2D cudaMemcpyAsync";
    row.limit_seconds = seconds[1];
    row.note = "(includes stream-ordered allocation and free)";
    return row;
}

Row run_swap_axes(const Options& options, const std::vector<uintptr_t>& shape, uintptr_t axis_1,
                  uintptr_t axis_2) {
    auto& t = timing();
    const size_t bytes = product(shape) * sizeof(double);
    auto swap = [axis_1, axis_2](metatensor::MtsArray& array) {
        auto a = raw(array);
        check(a.swap_axes(a.ptr, axis_1, axis_2));
    };
    {
        auto array = gpu_array<double>(shape, true);
        swap(array);
        auto r = raw(array);
        check(mtsarray_synchronize(&r));
        const auto expected = swapped_reference<double>(shape, axis_1, axis_2);
        const auto got = to_host(mtsarray_pointer(array), bytes);
        if (std::memcmp(got.data(), expected.data(), bytes) != 0) {
            throw std::runtime_error("cuda swap_axes: wrong result for " + join_shape(shape));
        }
    }
    auto array = gpu_array<double>(shape, true);
    DeviceBuffer limit_source(bytes);
    DeviceBuffer limit_destination(bytes);
    auto seconds = measure(options, {
        t.end_to_end([&] { swap(array); }),
        t.device_time([&] { swap(array); }),
        t.end_to_end([&] {
            BENCH_CUDA(cudaMemcpyAsync(limit_destination.get(), limit_source.get(), bytes,
                                       cudaMemcpyDeviceToDevice, t.stream));
        }),
    });

    Row row;
    row.group = "swap_axes";
    row.device = "cuda";
    row.name = "f64 " + join_shape(shape) + " axes " + std::to_string(axis_1) + "<->" + std::to_string(axis_2);
    row.parameters = {{"dtype", "f64"}, {"shape", join_shape(shape)},
                      {"axes", std::to_string(axis_1) + "," + std::to_string(axis_2)}};
    row.bytes = static_cast<double>(bytes);
    row.run_bytes = static_cast<double>(shape.back() * sizeof(double));
    row.seconds = seconds[0];
    row.device_seconds = seconds[1];
    row.limit_name = "D2D cudaMemcpyAsync";
    row.limit_seconds = seconds[2];
    row.note = "kernel-only " + format_seconds(row.device_seconds) + " = " +
               percent(row.limit_seconds / row.device_seconds) + " of D2D";
    return row;
}

Row run_as_dlpack(const Options& options) {
    auto& t = timing();
    auto array = gpu_array<double>({1000, 3, 8}, true);
    const int64_t stream = t.dlpack_number();
    const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    auto seconds = measure(options, {
        wall_clock([&] {
            auto a = raw(array);
            DLManagedTensorVersioned* tensor = nullptr;
            check(a.as_dlpack(a.ptr, &tensor, GPU, &stream, version));
            tensor->deleter(tensor);
        }),
    });
    Row row;
    row.group = "as_dlpack";
    row.device = "cuda";
    row.name = "f64 1000x3x8 export+delete, same stream";
    row.parameters = {{"dtype", "f64"}, {"shape", "1000x3x8"}};
    row.seconds = seconds[0];
    return row;
}

Case make_case(std::string group, std::string name, std::function<Row()> run) {
    return Case{std::move(group), "cuda", std::move(name), std::move(run)};
}

}  // namespace

std::vector<Case> cuda_cases(const Options& options) {
    std::vector<Case> cases;
    const std::string reason = unavailable_reason();
    if (!reason.empty()) {
        std::printf("cuda rows: skipped: %s\n", reason.c_str());
        return cases;
    }
    const bool quick = options.quick();
    const bool smoke = options.smoke();

    std::vector<GpuMoveCase> moves;
    if (smoke) {
        moves = {{100, 32, {}, true, 1}, {64, 16, {3}, true, 2}};
    } else if (quick) {
        moves = {{10000, 32, {}, false, 1},  {10000, 32, {}, true, 1},   {100000, 32, {}, true, 1},
                 {10000, 64, {3}, true, 1},  {100000, 1, {}, true, 2},   {2000, 1024, {}, true, 2},
                 {1000000, 32, {}, true, 1}};
    } else {
        for (size_t count : {1, 10, 100, 1000, 10000, 100000, 1000000}) {
            moves.push_back({static_cast<size_t>(count), 32, {}, false, 1});
            moves.push_back({static_cast<size_t>(count), 32, {}, true, 1});
        }
        for (size_t length : {1, 4, 16, 64, 256, 1024, 4096}) {
            const size_t count = std::max<size_t>(64, std::min<size_t>(1000000, (64u << 20) / (length * 8)));
            moves.push_back({count, length, {}, true, 2});
        }
        for (size_t axes = 1; axes <= 3; axes++) {
            moves.push_back({100000, 64, std::vector<uintptr_t>(axes, 3), true, 1});
        }
    }
    for (const auto& c : moves) {
        cases.push_back(make_case("move_data", "f64", [options, c] { return run_move_data<double>(options, c); }));
        if (c.output_factor > 1) {
            cases.push_back(make_case("move_data", "f32", [options, c] { return run_move_data<float>(options, c); }));
        }
    }

    const std::vector<size_t> sizes = smoke ? std::vector<size_t>{10000}
                                      : quick ? std::vector<size_t>{1000000, 100000000}
                                              : std::vector<size_t>{10000, 1000000, 10000000, 100000000};
    for (size_t size : sizes) {
        cases.push_back(make_case("create", format_count(static_cast<double>(size)), [options, size] { return run_create(options, size); }));
    }
    for (size_t size : sizes) {
        cases.push_back(make_case("copy", format_count(static_cast<double>(size)), [options, size] { return run_copy(options, size); }));
    }
    std::vector<std::vector<uintptr_t>> matrices = smoke ? std::vector<std::vector<uintptr_t>>{{100, 100}}
                                                   : quick ? std::vector<std::vector<uintptr_t>>{{1000, 1000}, {10000, 10000}}
                                                           : std::vector<std::vector<uintptr_t>>{{100, 100}, {1000, 1000}, {2500, 4000}, {10000, 10000}};
    for (const auto& shape : matrices) {
        cases.push_back(make_case("swap_axes", join_shape(shape), [options, shape] { return run_swap_axes(options, shape, 0, 1); }));
    }
    if (!smoke) {
        const std::vector<uintptr_t> shape = {2083333, 3, 16};
        cases.push_back(make_case("swap_axes", join_shape(shape), [options, shape] { return run_swap_axes(options, shape, 1, 2); }));
    }
    cases.push_back(make_case("as_dlpack", "small", [options] { return run_as_dlpack(options); }));
    return cases;
}

}  // namespace bench
