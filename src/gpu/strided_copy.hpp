#pragma once
// strided_copy: writes a strided view to C-contiguous memory, executing a
// StridedCopyPlan (see strided_copy_plan.hpp for how views are reduced to
// the transpose and general cases; the contiguous case is a plain device
// copy the backend issues itself).
//
// transpose: 32 x 32 unit tiles of the two axes that are contiguous in the
// input (axis `a`) and in the output (the last axis, `b`). A block reads a
// tile with threadIdx.x along `a` (coalesced reads), then writes it with
// threadIdx.x along `b` (coalesced writes) through a padded shared-memory
// tile; the other axes are a batch, decomposed once per tile.
//
// general: one unit per thread and grid-stride step; the output index is
// decomposed over the axes (32-bit division when everything fits) and the
// input offset accumulated from the strides.
//
// Axes travel by value, innermost first and padded to the kernel's Rank, so
// every loop over them unrolls with constant indices into the parameters.
// Rank is unrolled_strided_rank for every view seen in practice, and
// max_strided_rank for the rare views that keep more axes after merging.

#include <cstddef>
#include <cstdint>

#include "gpu/host_device.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/strided_copy_plan.hpp"
#include "gpu/vector_units.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Queues the copy described by `plan` (kind transpose or general) from
/// `source` to `destination`, both device memory of one device, on `stream`.
template <class Runtime>
void launch_strided_copy(typename Runtime::StreamHandle stream, const StridedCopyPlan& plan, const void* source,
                         void* destination);

/// Calls `visit(KernelKey)` for every kernel launch_strided_copy may launch
/// (kernel_loading.hpp).
template <class Runtime, class Visit> void visit_strided_copy_kernels(Visit&& visit);

// ---- implementation -------------------------------------------------------

template <size_t Rank> struct GeneralCopyArguments {
    const unsigned char* source;
    unsigned char* destination;
    uint64_t total_units;
    uint32_t rank;
    uint64_t shape[Rank];           // innermost first
    int64_t input_strides[Rank];    // units, innermost first
};

template <size_t Rank> struct TransposeArguments {
    const unsigned char* source;
    unsigned char* destination;
    uint64_t a_size;          // axis contiguous in the input
    uint64_t b_size;          // last axis, contiguous in the output
    int64_t b_input_stride;   // units
    uint64_t a_output_stride; // units
    uint64_t a_tiles;
    uint64_t b_tiles;
    uint64_t total_tiles;     // a_tiles * b_tiles * batch size
    uint32_t batch_rank;
    uint64_t batch_shape[Rank];           // innermost first
    int64_t batch_input_strides[Rank];    // units
    uint64_t batch_output_strides[Rank];  // units
};
static_assert(sizeof(TransposeArguments<max_strided_rank>) <= 4096 &&
                  sizeof(GeneralCopyArguments<max_strided_rank>) <= 4096,
              "kernel parameters must fit in 4 KiB on every runtime");

constexpr unsigned transpose_block_rows = threads_per_block / transpose_tile;

/// The units thread `first` of a grid of `step` threads copies.
template <size_t Width, class Index, size_t Rank>
MTSARRAY_HOST_DEVICE inline void general_copy_thread(const GeneralCopyArguments<Rank>& arguments, Index first,
                                                     Index step) {
    using Unit = unit_t<Width>;
    const Unit* source = reinterpret_cast<const Unit*>(arguments.source);
    Unit* destination = reinterpret_cast<Unit*>(arguments.destination);
    const Index total = static_cast<Index>(arguments.total_units);

    for (Index index = first; index < total; index += step) {
        Index rest = index;
        int64_t offset = 0;
MTSARRAY_UNROLL
        for (uint32_t axis = 0; axis < Rank; axis++) {
            if (axis < arguments.rank) {
                const Index size = static_cast<Index>(arguments.shape[axis]);
                const Index coordinate = rest % size;
                rest /= size;
                offset += static_cast<int64_t>(coordinate) * arguments.input_strides[axis];
            }
        }
        destination[index] = source[offset];
    }
}

/// Where tile `tile_index` starts: its first unit along `a` and `b`, and the
/// offsets of its batch in the input and the output.
struct TileOrigin {
    uint64_t a0;
    uint64_t b0;
    int64_t input_base;
    uint64_t output_base;
};

template <size_t Rank>
MTSARRAY_HOST_DEVICE inline TileOrigin transpose_tile_origin(const TransposeArguments<Rank>& arguments,
                                                             uint64_t tile_index) {
    // b tiles vary fastest: neighbouring blocks write neighbouring output.
    const uint64_t b_tile = tile_index % arguments.b_tiles;
    const uint64_t rest = tile_index / arguments.b_tiles;
    const uint64_t a_tile = rest % arguments.a_tiles;
    uint64_t batch = rest / arguments.a_tiles;

    TileOrigin origin{a_tile * transpose_tile, b_tile * transpose_tile, 0, 0};
MTSARRAY_UNROLL
    for (uint32_t axis = 0; axis < Rank; axis++) {
        if (axis < arguments.batch_rank) {
            const uint64_t coordinate = batch % arguments.batch_shape[axis];
            batch /= arguments.batch_shape[axis];
            origin.input_base += static_cast<int64_t>(coordinate) * arguments.batch_input_strides[axis];
            origin.output_base += coordinate * arguments.batch_output_strides[axis];
        }
    }
    return origin;
}

/// The transpose as thread (x, y) of block `block` (of `blocks`) does it,
/// without the shared-memory tile: each thread writes the units it writes in
/// the kernel's second phase, reading them straight from the input. For
/// runtimes whose kernels run on the host, where the tile buys nothing.
template <size_t Width, size_t Rank>
MTSARRAY_HOST_DEVICE inline void transpose_thread(const TransposeArguments<Rank>& arguments, uint64_t block,
                                                  uint64_t blocks, unsigned x, unsigned y) {
    using Unit = unit_t<Width>;
    const Unit* source = reinterpret_cast<const Unit*>(arguments.source);
    Unit* destination = reinterpret_cast<Unit*>(arguments.destination);
    for (uint64_t tile_index = block; tile_index < arguments.total_tiles; tile_index += blocks) {
        const TileOrigin origin = transpose_tile_origin(arguments, tile_index);
        for (unsigned row = y; row < transpose_tile; row += transpose_block_rows) {
            const uint64_t a = origin.a0 + row;
            const uint64_t b = origin.b0 + x;
            if (a < arguments.a_size && b < arguments.b_size) {
                destination[origin.output_base + a * arguments.a_output_stride + b] =
                    source[origin.input_base + static_cast<int64_t>(a) +
                           static_cast<int64_t>(b) * arguments.b_input_stride];
            }
        }
    }
}

#if MTSARRAY_DEVICE_COMPILER
template <size_t Width, class Index, size_t Rank>
__global__ void __launch_bounds__(threads_per_block)
    general_copy_kernel(GeneralCopyArguments<Rank> arguments) {
    general_copy_thread<Width, Index, Rank>(arguments,
                                            static_cast<Index>(blockIdx.x) * threads_per_block + threadIdx.x,
                                            static_cast<Index>(gridDim.x) * threads_per_block);
}

template <size_t Width, size_t Rank>
__global__ void __launch_bounds__(threads_per_block)
    transpose_kernel(TransposeArguments<Rank> arguments) {
    using Unit = unit_t<Width>;
    // +1 column: the column-wise reads of the second phase hit distinct banks.
    __shared__ Unit tile[transpose_tile][transpose_tile + 1];
    const Unit* source = reinterpret_cast<const Unit*>(arguments.source);
    Unit* destination = reinterpret_cast<Unit*>(arguments.destination);
    const unsigned x = threadIdx.x;
    const unsigned y = threadIdx.y;

    for (uint64_t tile_index = blockIdx.x; tile_index < arguments.total_tiles;
         tile_index += gridDim.x) {
        const TileOrigin origin = transpose_tile_origin(arguments, tile_index);

        // Read: x along a (input stride 1).
        for (unsigned row = y; row < transpose_tile; row += transpose_block_rows) {
            const uint64_t a = origin.a0 + x;
            const uint64_t b = origin.b0 + row;
            if (a < arguments.a_size && b < arguments.b_size) {
                tile[row][x] = source[origin.input_base + static_cast<int64_t>(a) +
                                      static_cast<int64_t>(b) * arguments.b_input_stride];
            }
        }
        __syncthreads();
        // Write: x along b (output stride 1).
        for (unsigned row = y; row < transpose_tile; row += transpose_block_rows) {
            const uint64_t a = origin.a0 + row;
            const uint64_t b = origin.b0 + x;
            if (a < arguments.a_size && b < arguments.b_size) {
                destination[origin.output_base + a * arguments.a_output_stride + b] = tile[x][row];
            }
        }
        // The next tile overwrites `tile`.
        __syncthreads();
    }
}
#endif

/// Tags of general_copy_kernel<Width, Index, Rank> and
/// transpose_kernel<Width, Rank> (KernelKey).
template <size_t Width, class Index, size_t Rank> struct GeneralCopyKernel;
template <size_t Width, size_t Rank> struct TransposeKernel;

template <class Runtime, size_t Width, class Index, size_t Rank> KernelKey general_copy_kernel_key() {
    using Tag = GeneralCopyKernel<Width, Index, Rank>;
    return MTSARRAY_KERNEL_KEY(Runtime, Tag, (general_copy_kernel<Width, Index, Rank>));
}

template <class Runtime, size_t Width, size_t Rank> KernelKey transpose_kernel_key() {
    using Tag = TransposeKernel<Width, Rank>;
    return MTSARRAY_KERNEL_KEY(Runtime, Tag, (transpose_kernel<Width, Rank>));
}

template <class Runtime, size_t Rank, class Visit> void visit_strided_copy_kernels_of_rank(Visit& visit) {
    for_each_unit_width([&](auto width_constant) {
        constexpr size_t Width = decltype(width_constant)::value;
        visit(transpose_kernel_key<Runtime, Width, Rank>());
        visit(general_copy_kernel_key<Runtime, Width, uint32_t, Rank>());
        visit(general_copy_kernel_key<Runtime, Width, uint64_t, Rank>());
    });
}

template <class Runtime, class Visit> void visit_strided_copy_kernels(Visit&& visit) {
    visit_strided_copy_kernels_of_rank<Runtime, unrolled_strided_rank>(visit);
    visit_strided_copy_kernels_of_rank<Runtime, max_strided_rank>(visit);
}

template <size_t Rank>
TransposeArguments<Rank> make_transpose_arguments(const StridedCopyPlan& plan, const void* source,
                                                  void* destination) {
    const size_t rank = plan.shape.size();
    const size_t a_axis = plan.contiguous_axis;
    const size_t b_axis = rank - 1;

    TransposeArguments<Rank> arguments{};
    arguments.source = static_cast<const unsigned char*>(source);
    arguments.destination = static_cast<unsigned char*>(destination);
    arguments.a_size = plan.shape[a_axis];
    arguments.b_size = plan.shape[b_axis];
    arguments.b_input_stride = plan.input_strides[b_axis];
    arguments.a_tiles = ceil_div(arguments.a_size, transpose_tile);
    arguments.b_tiles = ceil_div(arguments.b_size, transpose_tile);

    // Output strides of the C-contiguous result, innermost first.
    uint64_t output_stride = 1;
    uint64_t batch_size = 1;
    for (size_t axis = rank; axis-- > 0;) {
        if (axis == a_axis) {
            arguments.a_output_stride = output_stride;
        } else if (axis != b_axis) {
            const uint32_t slot = arguments.batch_rank++;
            arguments.batch_shape[slot] = plan.shape[axis];
            arguments.batch_input_strides[slot] = plan.input_strides[axis];
            arguments.batch_output_strides[slot] = output_stride;
            batch_size *= plan.shape[axis];
        }
        output_stride *= plan.shape[axis];
    }
    arguments.total_tiles = arguments.a_tiles * arguments.b_tiles * batch_size;
    return arguments;
}

template <size_t Rank>
GeneralCopyArguments<Rank> make_general_arguments(const StridedCopyPlan& plan, const void* source,
                                                  void* destination) {
    GeneralCopyArguments<Rank> arguments{};
    arguments.source = static_cast<const unsigned char*>(source);
    arguments.destination = static_cast<unsigned char*>(destination);
    arguments.total_units = plan.total_units;
    arguments.rank = static_cast<uint32_t>(plan.shape.size());
    for (size_t i = 0; i < plan.shape.size(); i++) {
        const size_t axis = plan.shape.size() - 1 - i;
        arguments.shape[i] = plan.shape[axis];
        arguments.input_strides[i] = plan.input_strides[axis];
    }
    return arguments;
}

template <size_t Rank, class Runtime>
void launch_strided_copy_of_rank(typename Runtime::StreamHandle stream, const StridedCopyPlan& plan,
                                 const void* source, void* destination) {
    if (plan.kind == StridedCopyPlan::Kind::transpose) {
        const auto arguments = make_transpose_arguments<Rank>(plan, source, destination);
        const GridShape shape{grid_size(arguments.total_tiles, 1), transpose_tile, transpose_block_rows};
        with_unit_width(plan.unit_width, [&](auto width_constant) {
            constexpr size_t Width = decltype(width_constant)::value;
            if constexpr (Runtime::kernels_run_on_host) {
                Runtime::run_grid(
                    stream, transpose_kernel_key<Runtime, Width, Rank>(), shape,
                    [arguments](const GridThread& thread) {
                        transpose_thread<Width, Rank>(arguments, thread.block, thread.shape.blocks, thread.x,
                                                      thread.y);
                    },
                    {arguments.source}, {arguments.destination});
            } else {
#if MTSARRAY_DEVICE_COMPILER
                const dim3 block(shape.block_x, shape.block_y);
                transpose_kernel<Width, Rank><<<shape.blocks, block, 0, stream>>>(arguments);
#else
                static_assert(Runtime::kernels_run_on_host, "GPU kernels need nvcc or hipcc");
#endif
            }
        });
        return;
    }

    const auto arguments = make_general_arguments<Rank>(plan, source, destination);
    const GridShape shape{grid_size(arguments.total_units, threads_per_block), threads_per_block};
    // 32-bit indices halve the cost of the per-axis divisions; the grid
    // stride must not overflow them either.
    const uint64_t index_limit = uint64_t(1) << 32;
    const bool narrow = arguments.total_units + uint64_t(shape.blocks) * threads_per_block < index_limit;
    with_unit_width(plan.unit_width, [&](auto width_constant) {
        constexpr size_t Width = decltype(width_constant)::value;
        if constexpr (Runtime::kernels_run_on_host) {
            Runtime::run_grid(
                stream,
                narrow ? general_copy_kernel_key<Runtime, Width, uint32_t, Rank>()
                       : general_copy_kernel_key<Runtime, Width, uint64_t, Rank>(),
                shape,
                [arguments, narrow](const GridThread& thread) {
                    if (narrow) {
                        general_copy_thread<Width, uint32_t, Rank>(arguments, static_cast<uint32_t>(thread.global()),
                                                                   static_cast<uint32_t>(thread.count()));
                    } else {
                        general_copy_thread<Width, uint64_t, Rank>(arguments, thread.global(), thread.count());
                    }
                },
                {arguments.source}, {arguments.destination});
        } else {
#if MTSARRAY_DEVICE_COMPILER
            if (narrow) {
                general_copy_kernel<Width, uint32_t, Rank><<<shape.blocks, threads_per_block, 0, stream>>>(arguments);
            } else {
                general_copy_kernel<Width, uint64_t, Rank><<<shape.blocks, threads_per_block, 0, stream>>>(arguments);
            }
#else
            static_assert(Runtime::kernels_run_on_host, "GPU kernels need nvcc or hipcc");
#endif
        }
    });
}

template <class Runtime>
void launch_strided_copy(typename Runtime::StreamHandle stream, const StridedCopyPlan& plan, const void* source,
                         void* destination) {
    MTSARRAY_EXPECTS(plan.kind == StridedCopyPlan::Kind::transpose ||
                         plan.kind == StridedCopyPlan::Kind::general,
                     "strided_copy: the kernels only run transpose and general plans");
    if (plan.shape.size() <= unrolled_strided_rank) {
        launch_strided_copy_of_rank<unrolled_strided_rank, Runtime>(stream, plan, source, destination);
    } else {
        launch_strided_copy_of_rank<max_strided_rank, Runtime>(stream, plan, source, destination);
    }
}

}  // namespace gpu
}  // namespace mtsarray::detail
