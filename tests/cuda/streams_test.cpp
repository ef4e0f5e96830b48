// CUDA stream ordering, run on the legacy default stream (1), the per-thread
// default stream (2) and a user stream (a cudaStream_t handle), as RMM runs
// its tests. Built only when the CUDA backend is; skips with the probe's
// reason when no GPU is present.

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "support/backends.hpp"
#include "support/cuda_slow_kernel.hpp"
#include "support/cuda_stream_fixture.hpp"

using namespace mtsarray_test;

namespace {

class CudaStreams : public CudaStreamTest {};

INSTANTIATE_TEST_SUITE_P(AllStreams, CudaStreams,
                         ::testing::Values(StreamKind::legacy, StreamKind::per_thread, StreamKind::user),
                         stream_kind_name);

TEST_P(CudaStreams, WorkRunsOnTheArrayStream) {
    const DLDevice cuda = {kDLCUDA, 0};
    auto input = mtsarray::Array::full<double>(cuda, {256, 3, 64}, 1.5);
    auto output = mtsarray::Array::zeros(cuda, float64(), {256, 3, 64});
    input.set_stream(number_);
    output.set_stream(number_);
    EXPECT_EQ(input.stream(), number_);
    EXPECT_EQ(output.stream(), number_);

    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < 256; i += 2) {
        movements.push_back({i, 255 - i, 0, 0, 64});
    }
    const auto& raw = output.get();
    ASSERT_EQ(raw.move_data(raw.ptr, input.get().ptr, movements.data(), movements.size()), MTS_SUCCESS)
        << last_error();
    output.synchronize();
    auto values = from_bytes<double>(read_bytes(output));
    for (uintptr_t sample = 0; sample < 256; sample++) {
        const double expected = sample % 2 == 1 ? 1.5 : 0.0;  // 255 - even = odd
        ASSERT_EQ(values[sample * 3 * 64], expected) << sample;
        ASSERT_EQ(values[sample * 3 * 64 + 3 * 64 - 1], expected) << sample;
    }
}

TEST_P(CudaStreams, ArraysOnDifferentStreamsAreOrdered) {
    const DLDevice cuda = {kDLCUDA, 0};
    // the input is filled on another stream, the output works on ours:
    // move_data must make the output's stream wait for the fill
    auto input = mtsarray::Array::zeros(cuda, float32(), {1000, 1000});
    input.set_stream(other_number());
    auto fill = mtsarray::Array::full<float>(cuda, {1000, 1000}, 3.0f);
    fill.set_stream(other_number());
    std::vector<mts_data_movement_t> all;
    for (uintptr_t i = 0; i < 1000; i++) {
        all.push_back({i, i, 0, 0, 1000});
    }
    ASSERT_EQ(input.get().move_data(input.get().ptr, fill.get().ptr, all.data(), all.size()), MTS_SUCCESS)
        << last_error();

    auto output = mtsarray::Array::zeros(cuda, float32(), {1000, 1000});
    output.set_stream(number_);
    ASSERT_EQ(output.get().move_data(output.get().ptr, input.get().ptr, all.data(), all.size()), MTS_SUCCESS)
        << last_error();
    auto values = from_bytes<float>(read_bytes(output));
    EXPECT_EQ(std::count(values.begin(), values.end(), 3.0f), 1000000);
}

TEST_P(CudaStreams, ConsumerStreamWaitsForTheExport) {
    const DLDevice cuda = {kDLCUDA, 0};
    auto array = mtsarray::Array::zeros(cuda, float64(), {512, 512});
    array.set_stream(number_);
    auto source = mtsarray::Array::full<double>(cuda, {512, 512}, -2.0);
    source.set_stream(number_);
    std::vector<mts_data_movement_t> all;
    for (uintptr_t i = 0; i < 512; i++) {
        all.push_back({i, i, 0, 0, 512});
    }
    ASSERT_EQ(array.get().move_data(array.get().ptr, source.get().ptr, all.data(), all.size()), MTS_SUCCESS);

    // the consumer reads on its own stream right after the export
    const int64_t consumer = other_number();
    DLManagedTensorVersioned* tensor = nullptr;
    const auto& raw = array.get();
    ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, cuda, &consumer, dlpack_version()), MTS_SUCCESS) << last_error();
    EXPECT_EQ(tensor->flags, 0u);
    std::vector<double> host(512 * 512, 0.0);
    CUDA_CHECK(cudaMemcpyAsync(host.data(), tensor->dl_tensor.data, host.size() * sizeof(double),
                               cudaMemcpyDeviceToHost, other_));
    CUDA_CHECK(cudaStreamSynchronize(other_));
    tensor->deleter(tensor);
    EXPECT_EQ(std::count(host.begin(), host.end(), -2.0), 512 * 512);
}

TEST_P(CudaStreams, CopiesToTheHostAreComplete) {
    const DLDevice cuda = {kDLCUDA, 0};
    std::vector<int64_t> values(1 << 20);
    std::iota(values.begin(), values.end(), int64_t(-5));
    auto array = array_from_bytes(cuda, make_dtype(kDLInt, 64), {1 << 10, 1 << 10}, to_bytes(values));
    array.set_stream(number_);
    auto copy = array.copy(cuda);
    EXPECT_EQ(copy.stream(), number_) << "a same-device copy keeps the work stream";
    auto on_host = copy.copy(DLDevice{kDLCPU, 0});
    EXPECT_EQ(from_bytes<int64_t>(read_bytes(on_host)), values);
}

// Thousands of scattered movements of mixed lengths (8 B .. 512 B, some
// misaligned, so the table has several size classes and goes to device
// memory) while a slow kernel (~tens of ms) still writes the input on its
// own stream: move_data must order its kernel after the writer, whatever
// the table's shape. Repeated with fresh values.
TEST_P(CudaStreams, ThousandsOfScatteredMovementsWaitForAHeldInput) {
    const DLDevice cuda = {kDLCUDA, 0};
    constexpr uintptr_t samples = 4096;
    constexpr uintptr_t properties = 64;
    auto input = mtsarray::Array::zeros(cuda, float64(), {samples, properties});
    input.set_stream(other_number());
    auto output = mtsarray::Array::zeros(cuda, float64(), {2 * samples, properties});
    output.set_stream(number_);
    std::vector<uintptr_t> order(samples);
    std::iota(order.begin(), order.end(), 0);
    std::reverse(order.begin(), order.end());
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < samples; i++) {
        const uintptr_t length = 1 + (i * 37) % 64;
        const uintptr_t start = i % 16 == 5 ? (properties - length) / 2 : 0;
        movements.push_back({i, 2 * order[i], start, start, length});
    }
    for (int repetition = 0; repetition < 5; repetition++) {
        const double value = 10.0 + repetition;
        CUDA_CHECK(launch_spin_then_fill(static_cast<double*>(input.data()), samples * properties, value,
                                         50000000, other_));
        const auto& raw = output.get();
        ASSERT_EQ(raw.move_data(raw.ptr, input.get().ptr, movements.data(), movements.size()), MTS_SUCCESS)
            << last_error();
        const auto values = from_bytes<double>(read_bytes(output));
        for (const auto& m : movements) {
            for (uintptr_t x = 0; x < m.properties_length; x++) {
                ASSERT_EQ(values[m.sample_out * properties + m.properties_start_out + x], value)
                    << "repetition " << repetition << ": move_data read the input before its writer finished";
            }
        }
    }
}

// A move_data of 100 000 movements captured in a CUDA graph, in the Global
// capture mode (torch.cuda.graph's default): one kernel node whatever the
// table size, and every replay moves the input of its moment.
TEST_P(CudaStreams, ALargeCapturedMoveDataIsOneKernelNode) {
    if (GetParam() == StreamKind::legacy) {
        GTEST_SKIP() << "the legacy stream can not capture a graph";
    }
    const DLDevice cuda = {kDLCUDA, 0};
    constexpr uintptr_t count = 100000;
    auto input = mtsarray::Array::zeros(cuda, float64(), {count, 4});
    auto output = mtsarray::Array::zeros(cuda, float64(), {2 * count, 4});
    input.set_stream(number_);
    output.set_stream(number_);
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < count; i++) {
        movements.push_back({i, 2 * ((i * 7919) % count), 0, 0, 4});
    }
    output.synchronize();
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
    const auto& raw = output.get();
    const auto status = raw.move_data(raw.ptr, input.get().ptr, movements.data(), movements.size());
    CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    ASSERT_EQ(status, MTS_SUCCESS) << last_error();
    size_t nodes = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
    std::vector<cudaGraphNode_t> all(nodes);
    CUDA_CHECK(cudaGraphGetNodes(graph, all.data(), &nodes));
    size_t kernels = 0;
    for (auto node : all) {
        cudaGraphNodeType type;
        CUDA_CHECK(cudaGraphNodeGetType(node, &type));
        kernels += type == cudaGraphNodeTypeKernel ? 1 : 0;
    }
    EXPECT_EQ(kernels, 1u);
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));  // the instantiation keeps the table alive
    for (double value : {3.0, -7.0}) {
        CUDA_CHECK(launch_spin_then_fill(static_cast<double*>(input.data()), count * 4, value, 1000000, stream_));
        CUDA_CHECK(cudaGraphLaunch(exec, stream_));
        const auto values = from_bytes<double>(read_bytes(output));
        for (const auto& m : movements) {
            ASSERT_EQ(values[m.sample_out * 4], value);
            ASSERT_EQ(values[m.sample_out * 4 + 3], value);
        }
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
}

}  // namespace

// The ordering the DLPack stream hand-off promises, made observable: a slow
// kernel writes the array on its work stream A; as_dlpack hands the data to
// a consumer stream B; a read queued on B right away must see the kernel's
// values. Without the event wait the read overtakes the spinning kernel.
// Repeated, with fresh values, so that a lucky schedule can not hide a race.
TEST_P(CudaStreams, ASlowKernelIsWaitedForByTheConsumerStream) {
    const DLDevice cuda = {kDLCUDA, 0};
    constexpr size_t count = 1 << 16;
    auto array = mtsarray::Array::zeros(cuda, float64(), {count});
    array.set_stream(number_);
    cudaStream_t work = stream_;
    const int64_t consumer = other_number();
    std::vector<double> host(count);
    for (int repetition = 0; repetition < 100; repetition++) {
        const double value = repetition + 1.0;
        // ~1 ms of spinning at GPU clock rates: far longer than the read
        CUDA_CHECK(launch_spin_then_fill(static_cast<double*>(array.data()), count, value, 1000000, work));

        DLManagedTensorVersioned* tensor = nullptr;
        const auto& raw = array.get();
        ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, cuda, &consumer, dlpack_version()), MTS_SUCCESS) << last_error();
        CUDA_CHECK(cudaMemcpyAsync(host.data(), tensor->dl_tensor.data, count * sizeof(double),
                                   cudaMemcpyDeviceToHost, other_));
        CUDA_CHECK(cudaStreamSynchronize(other_));
        tensor->deleter(tensor);
        ASSERT_EQ(std::count(host.begin(), host.end(), value), static_cast<std::ptrdiff_t>(count))
            << "repetition " << repetition << ": the consumer stream read before the kernel finished";

        int current = -1;
        CUDA_CHECK(cudaGetDevice(&current));
        EXPECT_EQ(current, 0) << "as_dlpack must leave the current device as it found it";
    }
}
