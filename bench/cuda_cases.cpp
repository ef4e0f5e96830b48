// CUDA rows (built only when mtsarray has the CUDA backend): mtsarray arrays
// on cuda:0, driven through the mts_array_t vtable on a user stream, next to
// the device-to-device cudaMemcpyAsync bandwidth (the limit) and to what a
// user would write without a gather kernel: one cudaMemcpyAsync per segment,
// one cudaMemcpyBatchAsync (CUDA >= 12.8), one cudaMemcpy2DAsync (when every
// segment has the same length and constant strides). The targets are the
// GPU targets of bench/README.md. Every case checks its values (mtsarray's
// and each baseline's) against a host reference before it reports a time.
//
// move_data is reported three ways: end to end (host wall time until the
// stream is done: plan, table upload, kernel), device time (events on the
// stream, with the stream held back by a host gate until everything is
// queued, so that the host's planning time is not counted: table upload +
// kernel) and kernel alone: mtsarray's kernel launched on a table planned by
// the library's host code and uploaded once beforehand (PreparedMoveKernel,
// what a reusable plan's execute queues), timed with events like the
// baselines -- nothing is subtracted, nothing clamped.
//
// Kernel alone, mtsarray is compared with two batched-copy kernels run on
// the same segments in the same run with their list already on the device
// (cuda_baselines.hpp): cub::DeviceMemcpy::Batched and a plain
// warp-per-segment kernel.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>

#include <cuda_runtime.h>

#include "gpu/move_data_table.hpp"

#include "cases.hpp"
#include "cuda_baselines.hpp"
#include "move_patterns.hpp"

namespace bench {
namespace {

constexpr DLDevice GPU = {kDLCUDA, 0};
constexpr double KIB = 1024;
/// Above this many segments the per-segment baseline takes seconds per call.
constexpr size_t MAX_BASELINE_SEGMENTS = 200000;
/// The GPU move_data targets, kernel-only, as a fraction of D2D bandwidth:
/// segments of at least 1 KiB, of 256 bytes, of 64 bytes.
constexpr double SEGMENT_TARGET_LONG = 0.90;
constexpr double SEGMENT_TARGET_MEDIUM = 0.90;
constexpr double SEGMENT_TARGET_SHORT = 0.75;
/// Never behind the warp-per-segment kernel by more than this (of D2D).
constexpr double WARP_KERNEL_MARGIN = 0.05;
/// Mixed lengths (1..64 units, a few misaligned): of the warp kernel's
/// speed, and of D2D bandwidth.
constexpr double MIXED_TARGET_OF_WARP = 0.80;
constexpr double MIXED_TARGET = 0.80;
/// 100 000 scattered movements with differing ranges, end to end.
constexpr double SCATTERED_SECONDS_TARGET = 150e-6;
constexpr size_t SCATTERED_TARGET_MOVEMENTS = 100000;
constexpr double ALLOCATING_TARGET = 0.80;     // create/copy/swap_axes vs memset/D2D ...
constexpr size_t ALLOCATING_TARGET_ELEMENTS = 100000000;  // ... from 10^8 elements
constexpr double AS_DLPACK_HOST_SECONDS = 5e-6;

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

/// Holds a stream back (a host function queued on it spins) until the host
/// opens it: the work queued behind it then runs back to back.
struct Gate {
    std::atomic<bool> released{false};
    std::atomic<bool> timed_out{false};

    void open() { released.store(true, std::memory_order_release); }

    static void CUDART_CB hold(void* data) {
        auto* gate = static_cast<Gate*>(data);
        const auto begin = std::chrono::steady_clock::now();
        while (!gate->released.load(std::memory_order_acquire)) {
            if (std::chrono::steady_clock::now() - begin > std::chrono::seconds(10)) {
                gate->timed_out.store(true);
                return;
            }
            std::this_thread::yield();
        }
    }
};

/// The user stream every case runs on, and two events to time it.
struct Timing {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;

    /// Stream-ordered memory for the benchmark's own uploads, kept when
    /// freed as mtsarray's pool keeps it (the device's default pool would
    /// give it back at every synchronisation and time the driver instead).
    cudaMemPool_t pool = nullptr;

    Timing() {
        BENCH_CUDA(cudaSetDevice(0));
        BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        BENCH_CUDA(cudaEventCreate(&start));
        BENCH_CUDA(cudaEventCreate(&stop));
        cudaMemPoolProps properties = {};
        properties.allocType = cudaMemAllocationTypePinned;
        properties.location.type = cudaMemLocationTypeDevice;
        properties.location.id = 0;
        BENCH_CUDA(cudaMemPoolCreate(&pool, &properties));
        uint64_t keep_everything = UINT64_MAX;
        BENCH_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    }
    ~Timing() {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        cudaStreamDestroy(stream);
        cudaMemPoolDestroy(pool);
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

    /// Device time of `iterations` calls of `enqueue`, each timed alone
    /// with the stream held back by a host gate until the call and both
    /// events are queued: the host's own time (planning, validation) is not
    /// counted, only the work the call queued. The stream is drained between
    /// calls, so nothing the call does can wait on a gated stream for long;
    /// a gate left closed for 10 s opens itself and the batch is an error.
    TimedBatch gated_device_time(std::function<void()> enqueue) {
        return [this, enqueue = std::move(enqueue)](size_t iterations) {
            double total = 0;
            for (size_t i = 0; i < iterations; i++) {
                Gate gate;
                BENCH_CUDA(cudaLaunchHostFunc(stream, Gate::hold, &gate));
                BENCH_CUDA(cudaEventRecord(start, stream));
                try {
                    enqueue();
                } catch (...) {
                    gate.open();
                    cudaStreamSynchronize(stream);
                    throw;
                }
                BENCH_CUDA(cudaEventRecord(stop, stream));
                gate.open();
                BENCH_CUDA(cudaEventSynchronize(stop));
                if (gate.timed_out.load()) {
                    throw std::runtime_error("gated device time: the call waited for its own stream");
                }
                float milliseconds = 0;
                BENCH_CUDA(cudaEventElapsedTime(&milliseconds, start, stop));
                total += 1e-3 * static_cast<double>(milliseconds);
            }
            return total;
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

/// What a move_data row is judged on (the GPU targets of bench/README.md).
enum class MoveTarget {
    none,
    segment_bandwidth,     // kernel alone: >= 90/80/50% D2D, ahead of CUB, within 5 points of warp-per-segment
    mixed_lengths,         // kernel alone: >= 80% of warp-per-segment, ahead of CUB
    scattered_end_to_end,  // 100 000 differing ranges: <= 0.4 ms end to end
};

/// One move_data case: a plan and the target it is held to.
struct GpuMoveCase : MovePattern {
    MoveTarget target = MoveTarget::none;
};

/// `count` movements of `properties` elements (all of them) into the last
/// slice of an output `output_factor` times wider, with `components`.
GpuMoveCase grid_case(size_t count, size_t properties, const std::vector<uintptr_t>& components,
                      bool scattered, size_t output_factor) {
    GpuMoveCase c;
    c.input_shape = {count};
    c.input_shape.insert(c.input_shape.end(), components.begin(), components.end());
    c.output_shape = c.input_shape;
    c.input_shape.push_back(properties);
    c.output_shape.push_back(properties * output_factor);
    const auto order = sample_order(count, scattered);
    for (size_t i = 0; i < count; i++) {
        c.movements.push_back({order[i], i, 0, (output_factor - 1) * properties, properties});
    }
    c.name = "moves=" + format_count(static_cast<double>(count)) + " props=" + std::to_string(properties) +
             " comps=" + (components.empty() ? std::string("-") : join_shape(components)) +
             (scattered ? " scattered" : " in-order") +
             (output_factor > 1 ? " ->" + std::to_string(output_factor) + "P" : "");
    c.parameters = {{"movements", std::to_string(count)},
                    {"properties_length", std::to_string(properties)},
                    {"components", components.empty() ? "-" : join_shape(components)},
                    {"samples", scattered ? "scattered" : "in-order"},
                    {"output_properties", std::to_string(properties * output_factor)}};
    return c;
}

/// Segments of `segment_bytes` (one movement each, scattered samples, into
/// the second half of a 2x wider output) adding up to `total_bytes`.
GpuMoveCase segment_case(size_t segment_bytes, size_t total_bytes, size_t element_size) {
    const size_t properties = segment_bytes / element_size;
    GpuMoveCase c = grid_case(total_bytes / segment_bytes, properties, {}, true, 2);
    c.name = "segments=" + format_bytes(static_cast<double>(segment_bytes)) + " x" +
             format_count(static_cast<double>(c.movements.size())) + " scattered ->2P";
    c.target = MoveTarget::segment_bandwidth;
    c.parameters.push_back({"segment_bytes", std::to_string(segment_bytes)});
    return c;
}

/// Runs of 1..64 float64 (8 B .. 512 B), every 16th movement starting at an
/// odd element (8-byte aligned only), scattered into a 2x wider output.
GpuMoveCase mixed_lengths_case(size_t count) {
    GpuMoveCase c = grid_case(count, 64, {}, true, 2);
    std::mt19937_64 rng(42);
    for (size_t i = 0; i < c.movements.size(); i++) {
        auto& m = c.movements[i];
        m.properties_length = 1 + rng() % 64;
        m.properties_start_in = i % 16 == 5 ? (1 + 2 * (rng() % 32)) % (65 - m.properties_length) : 0;
        m.properties_start_out = 64;
    }
    c.name = "mixed 8B..512B x" + format_count(static_cast<double>(count)) + " scattered ->2P";
    c.target = MoveTarget::mixed_lengths;
    c.parameters.push_back({"lengths", "1..64 units, 1/16 misaligned"});
    return c;
}

GpuMoveCase differing_ranges_case(size_t count) {
    GpuMoveCase c;
    static_cast<MovePattern&>(c) = differing_ranges_pattern(count);
    c.target = count == SCATTERED_TARGET_MOVEMENTS ? MoveTarget::scattered_end_to_end : MoveTarget::none;
    return c;
}

GpuMoveCase shared_range_case(size_t count, bool scattered) {
    GpuMoveCase c;
    static_cast<MovePattern&>(c) = shared_range_pattern(count, scattered);
    return c;
}

/// The contiguous pieces a user's copies would move: one per (movement,
/// component) row, or one per movement when rows are whole on both sides.
struct Segment {
    size_t input_offset, output_offset, bytes;
};

std::vector<Segment> segments_of(const GpuMoveCase& c, size_t element_size) {
    size_t components = 1;
    for (size_t axis = 1; axis + 1 < c.input_shape.size(); axis++) {
        components *= c.input_shape[axis];
    }
    const size_t row_in = c.input_shape.back() * element_size;
    const size_t row_out = c.output_shape.back() * element_size;
    std::vector<Segment> segments;
    segments.reserve(c.movements.size());
    for (const auto& m : c.movements) {
        const size_t bytes = m.properties_length * element_size;
        if (bytes == row_in && bytes == row_out) {
            segments.push_back({m.sample_in * components * row_in, m.sample_out * components * row_out,
                                components * bytes});
            continue;
        }
        for (size_t k = 0; k < components; k++) {
            segments.push_back({(m.sample_in * components + k) * row_in + m.properties_start_in * element_size,
                                (m.sample_out * components + k) * row_out + m.properties_start_out * element_size,
                                bytes});
        }
    }
    return segments;
}

/// cudaMemcpy2DAsync parameters when every segment has the same length and
/// both offsets advance by constant pitches (>= the length): one call.
struct Copy2D {
    bool possible = false;
    size_t input_pitch = 0, output_pitch = 0;
};

Copy2D copy_2d_of(const std::vector<Segment>& segments) {
    Copy2D result;
    if (segments.size() < 2 || segments[1].input_offset <= segments[0].input_offset ||
        segments[1].output_offset <= segments[0].output_offset) {
        return result;
    }
    result.input_pitch = segments[1].input_offset - segments[0].input_offset;
    result.output_pitch = segments[1].output_offset - segments[0].output_offset;
    if (result.input_pitch < segments[0].bytes || result.output_pitch < segments[0].bytes) {
        return result;
    }
    for (size_t i = 1; i < segments.size(); i++) {
        if (segments[i].bytes != segments[0].bytes ||
            segments[i].input_offset != segments[0].input_offset + i * result.input_pitch ||
            segments[i].output_offset != segments[0].output_offset + i * result.output_pitch) {
            return result;
        }
    }
    result.possible = true;
    return result;
}

#if CUDART_VERSION >= 12080
/// One cudaMemcpyBatchAsync of every segment (CUDA 12.8 added it; CUDA 13
/// dropped its failIdx argument). It refuses the legacy default stream.
cudaError_t copy_batch(void* const* destinations, const void* const* sources, const size_t* sizes,
                       size_t count, cudaStream_t stream) {
    cudaMemcpyAttributes attributes = {};
    attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attributes.flags = 0;
    size_t first = 0;
#if CUDART_VERSION >= 13000
    return cudaMemcpyBatchAsync(destinations, sources, sizes, count, &attributes, &first, 1, stream);
#else
    size_t failed = 0;
    return cudaMemcpyBatchAsync(const_cast<void**>(destinations), const_cast<void**>(sources),
                                const_cast<size_t*>(sizes), count, &attributes, &first, 1, &failed, stream);
#endif
}
#endif

/// "12.3 ms (4.5x)": a baseline's time and mtsarray's speedup over it.
std::string versus(double baseline, double mtsarray) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), " (%.3gx)", baseline / mtsarray);
    return format_seconds(baseline) + buffer;
}

template <typename T> Row run_move_data(const Options& options, const GpuMoveCase& c) {
    auto& t = timing();
    const auto segments = segments_of(c, sizeof(T));
    const size_t entries = planned_table_entries(c, sizeof(T));
    const bool device_table = entries > mtsarray::detail::gpu::inline_move_table_capacity;
    const size_t table_bytes = device_table ? entries * sizeof(mtsarray::detail::gpu::MoveTableEntry) : 0;
    size_t payload = 0;
    size_t longest = 0;
    for (const auto& segment : segments) {
        payload += segment.bytes;
        longest = std::max(longest, segment.bytes);
    }

    auto input = gpu_array<T>(c.input_shape, true);
    auto output = gpu_array<T>(c.output_shape, false);
    const size_t output_bytes = product(c.output_shape) * sizeof(T);
    DeviceBuffer baseline_output(output_bytes);
    DeviceBuffer limit_source(payload);
    DeviceBuffer limit_destination(payload);
    const char* input_data = static_cast<const char*>(mtsarray_pointer(input));
    char* baseline_data = baseline_output.get();

    // the expected output, built on the host from the same segments
    std::vector<char> expected(output_bytes, 0);
    {
        const auto values = host_values<T>(product(c.input_shape));
        const char* in = reinterpret_cast<const char*>(values.data());
        for (const auto& s : segments) {
            std::memcpy(expected.data() + s.output_offset, in + s.input_offset, s.bytes);
        }
    }

    auto move = [&] {
        auto o = raw(output);
        auto i = raw(input);
        check(o.move_data(o.ptr, i.ptr, c.movements.data(), c.movements.size()));
    };
    auto d2d = [&] {
        BENCH_CUDA(cudaMemcpyAsync(limit_destination.get(), limit_source.get(), payload,
                                   cudaMemcpyDeviceToDevice, t.stream));
    };
    // what mtsarray does for a device table, by hand: the upload alone
    void* pinned_table = nullptr;
    if (device_table) {
        BENCH_CUDA(cudaMallocHost(&pinned_table, table_bytes));
        std::memset(pinned_table, 0, table_bytes);
    }
    struct PinnedOwner {
        void* data;
        ~PinnedOwner() { cudaFreeHost(data); }
    } pinned_owner{pinned_table};
    auto upload = [&] {
        void* table = nullptr;
        BENCH_CUDA(cudaMallocFromPoolAsync(&table, table_bytes, t.pool, t.stream));
        BENCH_CUDA(cudaMemcpyAsync(table, pinned_table, table_bytes, cudaMemcpyHostToDevice, t.stream));
        BENCH_CUDA(cudaFreeAsync(table, t.stream));
    };
    auto per_segment = [&] {
        for (const auto& s : segments) {
            BENCH_CUDA(cudaMemcpyAsync(baseline_data + s.output_offset, input_data + s.input_offset, s.bytes,
                                       cudaMemcpyDeviceToDevice, t.stream));
        }
    };
    const Copy2D plan_2d = copy_2d_of(segments);
    auto copy_2d = [&] {
        const auto& s = segments.front();
        BENCH_CUDA(cudaMemcpy2DAsync(baseline_data + s.output_offset, plan_2d.output_pitch,
                                     input_data + s.input_offset, plan_2d.input_pitch, s.bytes, segments.size(),
                                     cudaMemcpyDeviceToDevice, t.stream));
    };
#if CUDART_VERSION >= 12080
    std::vector<void*> batch_destinations;
    std::vector<const void*> batch_sources;
    std::vector<size_t> batch_sizes;
    for (const auto& s : segments) {
        batch_destinations.push_back(baseline_data + s.output_offset);
        batch_sources.push_back(input_data + s.input_offset);
        batch_sizes.push_back(s.bytes);
    }
    auto batch = [&] {
        BENCH_CUDA(copy_batch(batch_destinations.data(), batch_sources.data(), batch_sizes.data(),
                              batch_sizes.size(), t.stream));
    };
#endif

    // the batched-copy kernels, on the same segments, list already uploaded
    std::vector<const void*> kernel_sources;
    std::vector<void*> kernel_destinations;
    std::vector<size_t> kernel_sizes;
    for (const auto& s : segments) {
        kernel_sources.push_back(input_data + s.input_offset);
        kernel_destinations.push_back(baseline_data + s.output_offset);
        kernel_sizes.push_back(s.bytes);
    }
    const DeviceSegmentList segment_list(kernel_sources, kernel_destinations, kernel_sizes);
    const CubBatchedMemcpy cub_batched(segment_list);
    const IndexGather index_gather(input_data, baseline_data, kernel_sources, kernel_destinations, kernel_sizes);
    auto gather_kernel = [&] { index_gather.launch(t.stream); };
    auto warp_kernel = [&] { launch_warp_per_segment(segment_list, t.stream); };
    const PreparedMoveKernel prepared(c.output_shape, c.input_shape, sizeof(T), c.movements);
    auto prepared_kernel = [&] { prepared.launch(baseline_data, input_data, t.stream); };
    auto cub_kernel = [&] { cub_batched.launch(t.stream); };

    // Every implementation runs once and is checked before anything is timed;
    // a baseline the runtime refuses is left out, with the reason.
    std::string notes;
    auto verified = [&](const std::string& name, const std::function<void()>& run_once, void* result) {
        BENCH_CUDA(cudaMemsetAsync(result, 0, output_bytes, t.stream));
        try {
            run_once();
            t.synchronize();
        } catch (const std::exception& error) {
            cudaGetLastError();
            notes += "; " + name + " left out: " + error.what();
            return false;
        }
        if (to_host(result, output_bytes) != expected) {
            throw std::runtime_error("cuda move_data " + c.name + ": " + name + " gives wrong values");
        }
        return true;
    };
    if (!verified("mtsarray", move, mtsarray_pointer(output))) {
        throw std::runtime_error("cuda move_data " + c.name + ": mtsarray failed" + notes);
    }
    if (!verified("mtsarray kernel on a prepared table", prepared_kernel, baseline_data)) {
        throw std::runtime_error("cuda move_data " + c.name + ": the prepared kernel failed" + notes);
    }
    const bool with_per_segment = segments.size() <= MAX_BASELINE_SEGMENTS &&
                                  verified("cudaMemcpyAsync per segment", per_segment, baseline_data);
    if (segments.size() > MAX_BASELINE_SEGMENTS) {
        notes += "; per-segment cudaMemcpyAsync left out (" + std::to_string(segments.size()) + " segments)";
    }
    const bool with_2d = plan_2d.possible && verified("cudaMemcpy2DAsync", copy_2d, baseline_data);
    const bool with_warp = verified("warp-per-segment kernel", warp_kernel, baseline_data);
    const bool with_cub = verified("cub::DeviceMemcpy::Batched", cub_kernel, baseline_data);
    const bool with_gather = index_gather.possible() && verified("index gather", gather_kernel, baseline_data);
#if CUDART_VERSION >= 12080
    const bool with_batch = segments.size() > 1 && verified("cudaMemcpyBatchAsync", batch, baseline_data);
#else
    const bool with_batch = false;
    notes += "; cudaMemcpyBatchAsync needs CUDA >= 12.8";
#endif

    // 0 end to end, 1 device (gated), 2 D2D limit (gated), then optional ones
    std::vector<TimedBatch> operations = {t.end_to_end(move), t.gated_device_time(move),
                                          t.gated_device_time(d2d)};
    auto add = [&](bool wanted, TimedBatch operation) {
        if (!wanted) {
            return size_t(0);
        }
        operations.push_back(std::move(operation));
        return operations.size() - 1;
    };
    const size_t upload_index = add(device_table, t.gated_device_time(upload));
    const size_t kernel_index = add(true, t.gated_device_time(prepared_kernel));
    const size_t warp_index = add(with_warp, t.gated_device_time(warp_kernel));
    const size_t cub_index = add(with_cub, t.gated_device_time(cub_kernel));
    const size_t gather_index = add(with_gather, t.gated_device_time(gather_kernel));
    const size_t per_segment_index = add(with_per_segment, t.end_to_end(per_segment));
    const size_t copy_2d_index = add(with_2d, t.end_to_end(copy_2d));
#if CUDART_VERSION >= 12080
    const size_t batch_index = add(with_batch, t.end_to_end(batch));
#else
    const size_t batch_index = 0;
#endif
    const auto seconds = measure(options, operations);
    auto at = [&](size_t index) { return index == 0 ? NOT_MEASURED : seconds[index]; };

    const double device_seconds = seconds[1];
    const double upload_seconds = device_table ? at(upload_index) : 0.0;
    const double kernel_seconds = seconds[kernel_index];
    const double limit_seconds = seconds[2];
    const double kernel_fraction = limit_seconds / kernel_seconds;
    const double warp_fraction = with_warp ? limit_seconds / at(warp_index) : 0.0;

    Row row;
    row.group = "move_data";
    row.device = "cuda";
    row.name = std::string(dtype_name<T>()) + " " + c.name;
    row.parameters = c.parameters;
    row.parameters.insert(row.parameters.begin(), {"dtype", dtype_name<T>()});
    row.parameters.push_back({"segments", std::to_string(segments.size())});
    row.parameters.push_back({"table_entries", std::to_string(entries)});
    row.parameters.push_back({"table", device_table ? "device (uploaded)" : "inline (kernel parameters)"});
    row.bytes = static_cast<double>(payload);
    row.run_bytes = static_cast<double>(longest);
    row.seconds = seconds[0];
    row.device_seconds = device_seconds;
    row.limit_name = "D2D cudaMemcpyAsync";
    row.limit_seconds = limit_seconds;
    if (with_per_segment) {
        row.baseline_name = "cudaMemcpyAsync per segment";
        row.baseline_seconds = at(per_segment_index);
    } else if (with_batch) {
        row.baseline_name = "cudaMemcpyBatchAsync";
        row.baseline_seconds = at(batch_index);
    } else if (with_2d) {
        row.baseline_name = "cudaMemcpy2DAsync";
        row.baseline_seconds = at(copy_2d_index);
    }
    row.measurements = {{"end_to_end_seconds", row.seconds},
                        {"device_seconds", device_seconds},
                        {"table_bytes", static_cast<double>(table_bytes)},
                        {"table_upload_seconds", upload_seconds},
                        {"kernel_seconds", kernel_seconds},
                        {"kernel_fraction_of_d2d", kernel_fraction},
                        {"per_segment_seconds", at(per_segment_index)},
                        {"memcpy_batch_seconds", at(batch_index)},
                        {"memcpy_2d_seconds", at(copy_2d_index)},
                        {"warp_per_segment_kernel_seconds", at(warp_index)},
                        {"cub_batched_kernel_seconds", at(cub_index)},
                        {"index_gather_kernel_seconds", at(gather_index)}};

    if (c.target == MoveTarget::segment_bandwidth) {
        const double goal = static_cast<double>(longest) >= KIB       ? SEGMENT_TARGET_LONG
                            : static_cast<double>(longest) >= KIB / 4 ? SEGMENT_TARGET_MEDIUM
                                                                      : SEGMENT_TARGET_SHORT;
        row.targets.push_back({">=" + percent(goal) + " D2D (kernel)", kernel_fraction >= goal});
        row.targets.push_back({"within 5 pts of warp/segment (kernel)",
                               with_warp && kernel_fraction >= warp_fraction - WARP_KERNEL_MARGIN});
        row.targets.push_back({"ahead of CUB batched (kernel)", with_cub && kernel_seconds < at(cub_index)});
    } else if (c.target == MoveTarget::mixed_lengths) {
        row.targets.push_back({">=80% D2D (kernel)", kernel_fraction >= MIXED_TARGET});
        row.targets.push_back({">=80% of warp/segment (kernel)",
                               with_warp && kernel_fraction >= MIXED_TARGET_OF_WARP * warp_fraction});
        row.targets.push_back({"ahead of CUB batched (kernel)", with_cub && kernel_seconds < at(cub_index)});
    } else if (c.target == MoveTarget::scattered_end_to_end) {
        row.targets.push_back({"<=150 us (e2e)", row.seconds <= SCATTERED_SECONDS_TARGET});
    }

    row.note = "device " + format_seconds(device_seconds) + " (table upload alone " +
               (device_table ? format_seconds(upload_seconds) + ", " + format_bytes(static_cast<double>(table_bytes)) +
                                   " for " + std::to_string(entries) + " entries)"
                             : std::string("0: ") + std::to_string(entries) + " entries inline)") +
               "; kernel alone (prepared table, " + std::to_string(prepared.classes()) + " classes, " +
               std::to_string(prepared.blocks()) + " blocks) " + format_seconds(kernel_seconds) + " = " +
               percent(kernel_fraction) + " of D2D";
    if (with_warp) {
        row.note += "; warp/segment kernel " + format_seconds(at(warp_index)) + " = " +
                    percent(limit_seconds / at(warp_index));
    }
    if (with_cub) {
        row.note += "; CUB batched kernel " + format_seconds(at(cub_index)) + " = " +
                    percent(limit_seconds / at(cub_index));
    }
    if (with_gather) {
        row.note += "; index gather (8 B a segment) " + format_seconds(at(gather_index)) + " = " +
                    percent(limit_seconds / at(gather_index)) + ", mtsarray at " +
                    percent(at(gather_index) / kernel_seconds) + " of its speed";
    }
    if (with_batch && row.baseline_name != "cudaMemcpyBatchAsync") {
        row.note += "; batch " + versus(at(batch_index), row.seconds);
    }
    if (with_2d && row.baseline_name != "cudaMemcpy2DAsync") {
        row.note += "; 2D " + versus(at(copy_2d_index), row.seconds);
    }
    row.note += notes;
    return row;
}

// ---- move plans ---------------------------------------------------------------------

/// A reusable plan of `c` (mtsarray_move_plan_*) next to the move_data call
/// it replaces: making the plan (until its upload is done; freed again) and
/// move_data, both end to end, and the plan's execution end to end and on
/// the device, with mtsarray's kernel on a table uploaded beforehand (kernel
/// alone) as the limit.
Row run_move_plan(const Options& options, const GpuMoveCase& c) {
    auto& t = timing();
    auto input = gpu_array<double>(c.input_shape, true);
    auto output = gpu_array<double>(c.output_shape, false);
    auto reference = gpu_array<double>(c.output_shape, false);
    const size_t output_bytes = product(c.output_shape) * sizeof(double);
    DeviceBuffer kernel_output(output_bytes);
    const PreparedMoveKernel prepared(c.output_shape, c.input_shape, sizeof(double), c.movements);
    auto o = raw(output);
    auto i = raw(input);
    auto r = raw(reference);

    mtsarray_move_plan_t* plan = nullptr;
    check(mtsarray_move_plan_create(&o, &i, c.movements.data(), c.movements.size(), &plan));
    const std::unique_ptr<mtsarray_move_plan_t, mts_status_t (*)(mtsarray_move_plan_t*)> owned(
        plan, mtsarray_move_plan_free);
    auto create = [&] {
        mtsarray_move_plan_t* made = nullptr;
        check(mtsarray_move_plan_create(&o, &i, c.movements.data(), c.movements.size(), &made));
        check(mtsarray_move_plan_free(made));
    };
    auto move = [&] { check(r.move_data(r.ptr, i.ptr, c.movements.data(), c.movements.size())); };
    auto execute = [&] { check(mtsarray_move_plan_execute(plan, &o, &i)); };
    auto kernel = [&] { prepared.launch(kernel_output.get(), mtsarray_pointer(input), t.stream); };

    // the plan moves what move_data moves
    execute();
    move();
    t.synchronize();
    if (to_host(mtsarray_pointer(output), output_bytes) != to_host(mtsarray_pointer(reference), output_bytes)) {
        throw std::runtime_error("cuda move plan " + c.name + ": the plan and move_data give different values");
    }

    const auto seconds = measure(options, {t.end_to_end(create), t.end_to_end(move), t.end_to_end(execute),
                                           t.gated_device_time(execute), t.gated_device_time(kernel)});
    const double create_seconds = seconds[0];
    const double move_seconds = seconds[1];
    const double execute_seconds = seconds[2];
    const double kernel_seconds = seconds[4];

    Row row;
    row.group = "move_plan";
    row.device = "cuda";
    row.name = "f64 " + c.name;
    row.parameters = c.parameters;
    row.parameters.insert(row.parameters.begin(), {"dtype", "f64"});
    row.seconds = execute_seconds;
    row.device_seconds = seconds[3];
    row.limit_name = "kernel alone";
    row.limit_seconds = kernel_seconds;
    row.baseline_name = "move_data (e2e)";
    row.baseline_seconds = move_seconds;
    row.measurements = {{"create_seconds", create_seconds},
                        {"move_data_seconds", move_seconds},
                        {"execute_seconds", execute_seconds},
                        {"execute_device_seconds", seconds[3]},
                        {"kernel_seconds", kernel_seconds}};
    row.targets.push_back({"create <=1.5x move_data (e2e)", create_seconds <= 1.5 * move_seconds});
    row.targets.push_back({"execute <=1.1x kernel alone (e2e)", execute_seconds <= 1.1 * kernel_seconds});
    row.note = "create (and free) " + format_seconds(create_seconds) + " = " +
               format_ratio(create_seconds / move_seconds, "x") + " move_data's " + format_seconds(move_seconds) +
               "; execute " + format_seconds(execute_seconds) + " end to end, " + format_seconds(seconds[3]) +
               " on the device; kernel alone " + format_seconds(kernel_seconds);
    return row;
}

// ---- create, copy, swap_axes, as_dlpack ----------------------------------------------

/// create (the vtable's, as libmetatensor calls it) filled with `value`:
/// zero takes mtsarray's memset path, anything else its fill kernel.
Row run_create(const Options& options, size_t elements, double value) {
    auto& t = timing();
    const std::vector<uintptr_t> shape = {elements / 8, 8};
    const size_t bytes = product(shape) * sizeof(double);
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
    char fill[32];
    std::snprintf(fill, sizeof(fill), "%g", value);
    row.name = "f64 elements=" + format_count(static_cast<double>(product(shape))) + " fill=" + fill;
    row.parameters = {{"dtype", "f64"}, {"shape", join_shape(shape)}, {"fill_value", fill}};
    row.bytes = static_cast<double>(bytes);
    row.run_bytes = row.bytes;
    row.seconds = seconds[0];
    row.limit_name = "cudaMemsetAsync";
    row.limit_seconds = seconds[1];
    if (product(shape) >= ALLOCATING_TARGET_ELEMENTS) {
        row.targets.push_back({">=80% memset (with alloc+free)", row.fraction_of_limit() >= ALLOCATING_TARGET});
    }
    row.note = std::string(value == 0 ? "(memset path" : "(fill kernel") +
               "; includes stream-ordered allocation and free)";
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
    if (product(shape) >= ALLOCATING_TARGET_ELEMENTS) {
        row.targets.push_back({">=80% D2D (with alloc+free)", row.fraction_of_limit() >= ALLOCATING_TARGET});
    }
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
    row.note = "device time " + format_seconds(row.device_seconds) + " = " +
               percent(row.limit_seconds / row.device_seconds) + " of D2D; end to end includes allocation and free";
    if (product(shape) >= ALLOCATING_TARGET_ELEMENTS) {
        row.targets.push_back({">=80% D2D (with alloc+free)", row.fraction_of_limit() >= ALLOCATING_TARGET});
    }
    return row;
}

/// Whether as_dlpack(same device, the array's own stream) queues work on
/// that stream: the calls run inside a stream capture, and the captured
/// graph must have no node. "" when none, else what was found.
std::string queued_work(const metatensor::MtsArray& array, size_t calls) {
    auto& t = timing();
    const int64_t stream = t.dlpack_number();
    const DLPackVersion version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    BENCH_CUDA(cudaStreamBeginCapture(t.stream, cudaStreamCaptureModeRelaxed));
    std::string failure;
    for (size_t i = 0; i < calls && failure.empty(); i++) {
        auto a = raw(array);
        DLManagedTensorVersioned* tensor = nullptr;
        if (a.as_dlpack(a.ptr, &tensor, GPU, &stream, version) != MTS_SUCCESS) {
            const char* message = nullptr;
            mts_last_error(&message, nullptr, nullptr);
            failure = std::string("as_dlpack failed during stream capture: ") + (message ? message : "?");
        } else {
            tensor->deleter(tensor);
        }
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t status = cudaStreamEndCapture(t.stream, &graph);
    if (status != cudaSuccess) {
        cudaGetLastError();
        return failure.empty() ? std::string("the stream capture was invalidated (") + cudaGetErrorName(status) +
                                     "): as_dlpack made a call that is not stream-ordered"
                               : failure;
    }
    size_t nodes = 0;
    const cudaError_t counted = cudaGraphGetNodes(graph, nullptr, &nodes);
    cudaGraphDestroy(graph);
    if (!failure.empty()) {
        return failure;
    }
    if (counted != cudaSuccess) {
        return std::string("cudaGraphGetNodes: ") + cudaGetErrorName(counted);
    }
    return nodes == 0 ? std::string() : std::to_string(nodes) + " operations queued by " + std::to_string(calls) + " calls";
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
    t.synchronize();
    const std::string work = queued_work(array, 1000);

    Row row;
    row.group = "as_dlpack";
    row.device = "cuda";
    row.name = "f64 1000x3x8 export+delete, same stream";
    row.parameters = {{"dtype", "f64"}, {"shape", "1000x3x8"}, {"consumer_stream", "the array's own"}};
    row.seconds = seconds[0];
    row.targets.push_back({"<5us host", row.seconds < AS_DLPACK_HOST_SECONDS});
    row.targets.push_back({"no device work", work.empty()});
    row.note = work.empty() ? "host time per call; 1000 calls under stream capture queued nothing"
                            : "host time per call; device work: " + work;
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
        print_wrapped("cuda rows: skipped: " + reason, 0);
        return cases;
    }
    const bool quick = options.quick();
    const bool smoke = options.smoke();

    // The rows of the GPU targets first: segment sizes at a fixed total, 100 000
    // scattered movements with differing ranges, and one shared range.
    const size_t total = smoke ? (size_t(64) << 10) : (size_t(64) << 20);
    const size_t scattered_count = smoke ? 1000 : 100000;
    std::vector<GpuMoveCase> moves;
    for (size_t segment : {64, 256, 1024, 4096, 16384}) {
        moves.push_back(segment_case(segment, total, sizeof(double)));
    }
    moves.push_back(mixed_lengths_case(smoke ? 1000 : 200000));
    moves.push_back(differing_ranges_case(scattered_count));
    moves.push_back(shared_range_case(scattered_count, true));
    moves.push_back(shared_range_case(scattered_count, false));
    std::vector<GpuMoveCase> both_dtypes;  // also run in float32
    if (smoke) {
        both_dtypes.push_back(grid_case(64, 16, {3}, true, 2));
    } else if (quick) {
        moves.push_back(grid_case(10000, 32, {}, false, 1));
        moves.push_back(grid_case(10000, 64, {3}, true, 1));
        moves.push_back(grid_case(1000000, 32, {}, true, 1));
    } else {
        for (size_t count : {1, 10, 100, 1000, 10000, 100000, 1000000}) {
            moves.push_back(grid_case(count, 32, {}, false, 1));
            moves.push_back(grid_case(count, 32, {}, true, 1));
        }
        for (size_t length : {1, 4, 16, 64, 256, 1024, 4096}) {
            const size_t count = std::max<size_t>(64, std::min<size_t>(1000000, (64u << 20) / (length * 8)));
            both_dtypes.push_back(grid_case(count, length, {}, true, 2));
        }
        for (size_t axes = 1; axes <= 3; axes++) {
            moves.push_back(grid_case(100000, 64, std::vector<uintptr_t>(axes, 3), true, 1));
        }
    }
    for (const auto& c : moves) {
        cases.push_back(make_case("move_data", "f64 " + c.name, [options, c] { return run_move_data<double>(options, c); }));
    }
    for (const auto& c : both_dtypes) {
        cases.push_back(make_case("move_data", "f64 " + c.name, [options, c] { return run_move_data<double>(options, c); }));
        cases.push_back(make_case("move_data", "f32 " + c.name, [options, c] { return run_move_data<float>(options, c); }));
    }

    for (const auto& c : {differing_ranges_case(scattered_count), shared_range_case(scattered_count, true)}) {
        cases.push_back(make_case("move_plan", "f64 " + c.name, [options, c] { return run_move_plan(options, c); }));
    }

    const std::vector<size_t> sizes = smoke ? std::vector<size_t>{10000}
                                      : quick ? std::vector<size_t>{1000000, 100000000}
                                              : std::vector<size_t>{10000, 1000000, 10000000, 100000000};
    for (size_t size : sizes) {
        for (double value : {1.5, 0.0}) {
            cases.push_back(make_case("create", format_count(static_cast<double>(size)),
                                      [options, size, value] { return run_create(options, size, value); }));
        }
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
