#pragma once
// The batched-copy kernels that the CUDA move_data rows compare mtsarray's
// kernel with (kernel-only, on a segment list already in device memory):
//  - cub::DeviceMemcpy::Batched, from the CCCL that ships with the toolkit
//    (CUDA builds only: HIP has no CUB here, which is why src/gpu does not
//    use it);
//  - a plain warp-per-segment kernel: warp w copies segment w with the
//    widest loads (up to 16 bytes) that every pointer and size allows,
//    lanes on consecutive units.
//  - on segments of one length (a power of two, 16 to 512 bytes, 16-byte
//    aligned), an index gather: the least a gather with a list must do,
//    an 8-byte list (two 32-bit unit indices a segment), the length a
//    constant of the launch, teams of lanes on consecutive 16-byte units
//    and four segments a team (mtsarray's shape for such segments). It
//    bounds what any kernel moving a list of scattered segments can reach
//    on the card, as D2D bounds a contiguous copy.
// All copy exactly the segments the user would hand to cudaMemcpyAsync one
// by one (cuda_cases.cpp: segments_of).

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>
#include <metatensor.h>

namespace bench {

/// A segment list in device memory: sources[i] -> destinations[i], sizes[i]
/// bytes. Uploaded once, at construction (synchronously: set-up, not timed).
class DeviceSegmentList {
public:
    DeviceSegmentList(const std::vector<const void*>& sources, const std::vector<void*>& destinations,
                      const std::vector<size_t>& sizes);
    ~DeviceSegmentList();
    DeviceSegmentList(const DeviceSegmentList&) = delete;
    DeviceSegmentList& operator=(const DeviceSegmentList&) = delete;

    const void* const* sources() const { return sources_; }
    void* const* destinations() const { return destinations_; }
    const size_t* sizes() const { return sizes_; }
    size_t count() const { return count_; }
    /// Widest power of two (at most 16) dividing every pointer and size.
    size_t unit_bytes() const { return unit_bytes_; }

private:
    const void** sources_ = nullptr;
    void** destinations_ = nullptr;
    size_t* sizes_ = nullptr;
    size_t count_ = 0;
    size_t unit_bytes_ = 16;
};

/// mtsarray's own move_data kernel (src/gpu/move_data.hpp) on a table
/// planned by the library's host code and uploaded once, at construction:
/// what a reusable plan's execute queues, so that timing `launch` times the
/// kernel alone, with no upload and nothing subtracted.
class PreparedMoveKernel {
public:
    PreparedMoveKernel(const std::vector<uintptr_t>& output_shape, const std::vector<uintptr_t>& input_shape,
                       size_t element_size, const std::vector<mts_data_movement_t>& movements);
    ~PreparedMoveKernel();
    PreparedMoveKernel(const PreparedMoveKernel&) = delete;
    PreparedMoveKernel& operator=(const PreparedMoveKernel&) = delete;

    void launch(void* output, const void* input, cudaStream_t stream) const;
    size_t entries() const { return entries_; }
    unsigned blocks() const { return blocks_; }
    unsigned classes() const { return classes_; }

private:
    struct State;
    State* state_ = nullptr;
    size_t entries_ = 0;
    unsigned blocks_ = 0;
    unsigned classes_ = 0;
};

/// Queues the warp-per-segment kernel over `segments` on `stream`.
void launch_warp_per_segment(const DeviceSegmentList& segments, cudaStream_t stream);

/// The index gather of `segments` (host pointers into the arrays at
/// `input` and `output`), when they all have one length it takes
/// (possible()); its list is uploaded at construction.
class IndexGather {
public:
    IndexGather(const void* input, void* output, const std::vector<const void*>& sources,
                const std::vector<void*>& destinations, const std::vector<size_t>& sizes);
    ~IndexGather();
    IndexGather(const IndexGather&) = delete;
    IndexGather& operator=(const IndexGather&) = delete;

    bool possible() const { return list_ != nullptr; }
    void launch(cudaStream_t stream) const;

private:
    const void* input_;
    void* output_;
    void* list_ = nullptr;  // uint2 {source unit, destination unit} a segment
    size_t count_ = 0;
    unsigned units_ = 0;  // 16-byte units a segment
};

/// cub::DeviceMemcpy::Batched over `segments`, its temporary storage sized
/// and allocated once (set-up), so that `launch` queues only the copy.
class CubBatchedMemcpy {
public:
    explicit CubBatchedMemcpy(const DeviceSegmentList& segments);
    ~CubBatchedMemcpy();
    CubBatchedMemcpy(const CubBatchedMemcpy&) = delete;
    CubBatchedMemcpy& operator=(const CubBatchedMemcpy&) = delete;

    void launch(cudaStream_t stream) const;

private:
    const DeviceSegmentList& segments_;
    void* temporary_ = nullptr;
    size_t temporary_bytes_ = 0;
};

}  // namespace bench
