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
