#include "cuda_baselines.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>
#include <stdexcept>
#include <string>

#include <cub/device/device_memcpy.cuh>

#include "base/move_plan.hpp"
#include "cuda/cuda_runtime.hpp"
#include "gpu/move_data.hpp"

namespace bench {
namespace {

void baseline_check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) {
        throw std::runtime_error(std::string(call) + ": " + cudaGetErrorName(status) + ": " +
                                 cudaGetErrorString(status));
    }
}
#define BASELINE_CUDA(call) baseline_check((call), #call)

constexpr unsigned WARP = 32;
constexpr unsigned THREADS_PER_BLOCK = 256;

template <typename Unit>
__global__ void __launch_bounds__(THREADS_PER_BLOCK)
    warp_per_segment_kernel(const void* const* sources, void* const* destinations, const size_t* sizes,
                            size_t count) {
    const size_t thread = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t lane = threadIdx.x % WARP;
    const size_t warps = size_t(gridDim.x) * blockDim.x / WARP;
    for (size_t segment = thread / WARP; segment < count; segment += warps) {
        const Unit* source = static_cast<const Unit*>(sources[segment]);
        Unit* destination = static_cast<Unit*>(destinations[segment]);
        const size_t units = sizes[segment] / sizeof(Unit);
        for (size_t unit = lane; unit < units; unit += WARP) {
            destination[unit] = source[unit];
        }
    }
}

template <typename Unit> void launch_with_unit(const DeviceSegmentList& segments, cudaStream_t stream) {
    int device = 0;
    int multiprocessors = 0;
    BASELINE_CUDA(cudaGetDevice(&device));
    BASELINE_CUDA(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    // one warp per segment, at most enough blocks to fill the device a few
    // times over (the kernel strides over the rest)
    const size_t warps_per_block = THREADS_PER_BLOCK / WARP;
    const size_t wanted = (segments.count() + warps_per_block - 1) / warps_per_block;
    const size_t limit = size_t(multiprocessors) * 16;
    const unsigned blocks = static_cast<unsigned>(wanted < limit ? wanted : limit);
    warp_per_segment_kernel<Unit><<<blocks, THREADS_PER_BLOCK, 0, stream>>>(
        segments.sources(), segments.destinations(), segments.sizes(), segments.count());
    BASELINE_CUDA(cudaGetLastError());
}

// Team of `units` lanes (a power of two <= 32) a segment, four segments a
// team: all loads of a thread issued before its stores.
__global__ void __launch_bounds__(THREADS_PER_BLOCK)
    index_gather_kernel(const uint4* __restrict__ input, uint4* __restrict__ output, const uint2* __restrict__ list,
                        size_t count, unsigned units) {
    const size_t thread = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t team = thread / units;
    const unsigned lane = static_cast<unsigned>(thread % units);
    constexpr unsigned per_team = 4;
    uint2 entries[per_team];
    uint4 values[per_team];
#pragma unroll
    for (unsigned e = 0; e < per_team; e++) {
        const size_t segment = team * per_team + e;
        entries[e] = segment < count ? list[segment] : make_uint2(0, 0);
    }
#pragma unroll
    for (unsigned e = 0; e < per_team; e++) {
        if (team * per_team + e < count) {
            values[e] = input[size_t(entries[e].x) + lane];
        }
    }
#pragma unroll
    for (unsigned e = 0; e < per_team; e++) {
        if (team * per_team + e < count) {
            output[size_t(entries[e].y) + lane] = values[e];
        }
    }
}

}  // namespace

IndexGather::IndexGather(const void* input, void* output, const std::vector<const void*>& sources,
                         const std::vector<void*>& destinations, const std::vector<size_t>& sizes)
    : input_(input), output_(output), count_(sizes.size()) {
    if (count_ == 0 || sizes[0] % 16 != 0 || sizes[0] > 512 || (sizes[0] & (sizes[0] - 1)) != 0) {
        return;
    }
    std::vector<uint2> list(count_);
    const auto* in = static_cast<const unsigned char*>(input);
    const auto* out = static_cast<const unsigned char*>(output);
    for (size_t i = 0; i < count_; i++) {
        const auto source = static_cast<size_t>(static_cast<const unsigned char*>(sources[i]) - in);
        const auto destination = static_cast<size_t>(static_cast<const unsigned char*>(destinations[i]) - out);
        if (sizes[i] != sizes[0] || source % 16 != 0 || destination % 16 != 0 || (source >> 36) != 0 ||
            (destination >> 36) != 0) {
            return;  // not one length, or not a list of 32-bit unit indices
        }
        list[i] = make_uint2(static_cast<unsigned>(source / 16), static_cast<unsigned>(destination / 16));
    }
    units_ = static_cast<unsigned>(sizes[0] / 16);
    BASELINE_CUDA(cudaMalloc(&list_, count_ * sizeof(uint2)));
    BASELINE_CUDA(cudaMemcpy(list_, list.data(), count_ * sizeof(uint2), cudaMemcpyHostToDevice));
}

IndexGather::~IndexGather() {
    cudaFree(list_);
}

void IndexGather::launch(cudaStream_t stream) const {
    const size_t threads = (count_ + 3) / 4 * units_;
    const auto blocks = static_cast<unsigned>((threads + THREADS_PER_BLOCK - 1) / THREADS_PER_BLOCK);
    index_gather_kernel<<<blocks, THREADS_PER_BLOCK, 0, stream>>>(static_cast<const uint4*>(input_),
                                                                  static_cast<uint4*>(output_),
                                                                  static_cast<const uint2*>(list_), count_, units_);
    BASELINE_CUDA(cudaGetLastError());
}

DeviceSegmentList::DeviceSegmentList(const std::vector<const void*>& sources, const std::vector<void*>& destinations,
                                     const std::vector<size_t>& sizes)
    : count_(sizes.size()) {
    if (sources.size() != count_ || destinations.size() != count_) {
        throw std::invalid_argument("DeviceSegmentList: sources, destinations and sizes differ in length");
    }
    uintptr_t bits = 0;
    for (size_t i = 0; i < count_; i++) {
        bits |= reinterpret_cast<uintptr_t>(sources[i]) | reinterpret_cast<uintptr_t>(destinations[i]) | sizes[i];
    }
    while (unit_bytes_ > 1 && bits % unit_bytes_ != 0) {
        unit_bytes_ /= 2;
    }
    const size_t pointer_bytes = (count_ == 0 ? 1 : count_) * sizeof(void*);
    try {
        BASELINE_CUDA(cudaMalloc(reinterpret_cast<void**>(&sources_), pointer_bytes));
        BASELINE_CUDA(cudaMalloc(reinterpret_cast<void**>(&destinations_), pointer_bytes));
        BASELINE_CUDA(cudaMalloc(reinterpret_cast<void**>(&sizes_), (count_ == 0 ? 1 : count_) * sizeof(size_t)));
        BASELINE_CUDA(cudaMemcpy(sources_, sources.data(), count_ * sizeof(void*), cudaMemcpyHostToDevice));
        BASELINE_CUDA(cudaMemcpy(destinations_, destinations.data(), count_ * sizeof(void*), cudaMemcpyHostToDevice));
        BASELINE_CUDA(cudaMemcpy(sizes_, sizes.data(), count_ * sizeof(size_t), cudaMemcpyHostToDevice));
    } catch (...) {
        cudaFree(sources_);
        cudaFree(destinations_);
        cudaFree(sizes_);
        throw;
    }
}

DeviceSegmentList::~DeviceSegmentList() {
    cudaFree(sources_);
    cudaFree(destinations_);
    cudaFree(sizes_);
}

void launch_warp_per_segment(const DeviceSegmentList& segments, cudaStream_t stream) {
    if (segments.count() == 0) {
        return;
    }
    switch (segments.unit_bytes()) {
    case 16: launch_with_unit<uint4>(segments, stream); break;
    case 8: launch_with_unit<uint2>(segments, stream); break;
    case 4: launch_with_unit<uint32_t>(segments, stream); break;
    case 2: launch_with_unit<uint16_t>(segments, stream); break;
    default: launch_with_unit<uint8_t>(segments, stream); break;
    }
}

CubBatchedMemcpy::CubBatchedMemcpy(const DeviceSegmentList& segments) : segments_(segments) {
    BASELINE_CUDA(cub::DeviceMemcpy::Batched(nullptr, temporary_bytes_, segments_.sources(),
                                             segments_.destinations(), segments_.sizes(),
                                             static_cast<int64_t>(segments_.count())));
    BASELINE_CUDA(cudaMalloc(&temporary_, temporary_bytes_ == 0 ? 1 : temporary_bytes_));
}

CubBatchedMemcpy::~CubBatchedMemcpy() {
    cudaFree(temporary_);
}

void CubBatchedMemcpy::launch(cudaStream_t stream) const {
    size_t bytes = temporary_bytes_;
    BASELINE_CUDA(cub::DeviceMemcpy::Batched(temporary_, bytes, segments_.sources(), segments_.destinations(),
                                             segments_.sizes(), static_cast<int64_t>(segments_.count()),
                                             stream));
}

struct PreparedMoveKernel::State {
    mtsarray::detail::gpu::MoveTableEntry* table = nullptr;
    mtsarray::detail::gpu::MoveLaunchClasses launch;
    uint64_t input_row_stride = 0;
    uint64_t output_row_stride = 0;
    bool narrow = false;
};

namespace {
struct VectorTable {
    std::vector<mtsarray::detail::gpu::MoveTableEntry> entries = std::vector<mtsarray::detail::gpu::MoveTableEntry>(1024);
    mtsarray::detail::gpu::MoveTableEntry* data() { return entries.data(); }
    size_t capacity() const { return entries.size(); }
    void grow(size_t at_least) { entries.resize(std::max(at_least, 2 * entries.size())); }
};
}  // namespace

PreparedMoveKernel::PreparedMoveKernel(const std::vector<uintptr_t>& output_shape,
                                       const std::vector<uintptr_t>& input_shape, size_t element_size,
                                       const std::vector<mts_data_movement_t>& movements)
    : state_(new State()) {
    using namespace mtsarray::detail::gpu;
    const mtsarray::detail::MovePlan plan(output_shape, input_shape, element_size, movements.data(),
                                          movements.size());
    VectorTable table;
    MoveTableSummary summary;
    if (!build_move_table(plan, table, summary)) {
        throw std::runtime_error("PreparedMoveKernel: a movement is out of range");
    }
    std::vector<MoveTableEntry> scratch;
    state_->launch = classify_move_table(table.data(), summary, plan.input_row_stride(), plan.output_row_stride(),
                                         mtsarray::detail::gpu::threads_per_block, max_blocks, scratch);
    state_->input_row_stride = plan.input_row_stride();
    state_->output_row_stride = plan.output_row_stride();
    state_->narrow = narrow_offsets(summary.span);
    entries_ = summary.entries;
    blocks_ = state_->launch.blocks;
    classes_ = state_->launch.count;
    if (entries_ != 0) {
        BASELINE_CUDA(cudaMalloc(&state_->table, entries_ * sizeof(MoveTableEntry)));
        BASELINE_CUDA(cudaMemcpy(state_->table, table.data(), entries_ * sizeof(MoveTableEntry),
                                 cudaMemcpyHostToDevice));
    }
}

PreparedMoveKernel::~PreparedMoveKernel() {
    cudaFree(state_->table);
    delete state_;
}

void PreparedMoveKernel::launch(void* output, const void* input, cudaStream_t stream) const {
    using namespace mtsarray::detail::gpu;
    const MoveDataArguments arguments = move_data_arguments(state_->launch, input, output, state_->input_row_stride,
                                                            state_->output_row_stride);
    launch_move_data_with_device_table<mtsarray::detail::cuda::CudaRuntime>(stream, arguments, state_->table,
                                                                           state_->launch.blocks, state_->narrow);
    BASELINE_CUDA(cudaGetLastError());
}

}  // namespace bench
