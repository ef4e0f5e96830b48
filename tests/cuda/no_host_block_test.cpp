// The stream contract on a real CUDA device, for the legacy default stream
// (1), the per-thread default stream (2) and a user stream, as RMM runs its
// tests:
//  - no operation on device memory waits on the host: every stream involved
//    is held by a kernel that only the host can release, the operation is
//    called, and a stream query must still find the kernel running when the
//    call returns (an operation that waited would have found it finished
//    only after the kernel's time-out, and the query says so);
//  - memory read on another stream is freed only after that read, for a
//    move_data input and for an export outliving its array;
//  - move_data under graph capture replays right; operations that allocate
//    refuse a capturing stream with a clear error.
// tests/gpu/simulated_streams_test.cpp checks the same contract on every machine
// against a simulated GPU; this file checks the CUDA backend itself. It
// skips with the probe's reason when no GPU is present.

#include <algorithm>
#include <cstdint>
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

const DLDevice cuda0 = {kDLCUDA, 0};

/// About two seconds of clock cycles: how long a held stream stays busy if
/// the host never releases it (because the call under test waited for it).
constexpr long long HOLD_LIMIT_CYCLES = 4000000000LL;

/// A stream kept busy by a kernel from `hold()` until `release()` (or
/// destruction). The flag the kernel polls is allocated at construction:
/// make every StreamHold (and any other page-locked memory) before holding
/// a stream, since allocating page-locked memory may wait for the device.
class StreamHold {
public:
    explicit StreamHold(cudaStream_t stream) : stream_(stream) {
        void* flag = nullptr;
        if (cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped) != cudaSuccess) {
            ADD_FAILURE() << "cudaHostAlloc of the hold flag failed";
            return;
        }
        flag_ = static_cast<volatile int*>(flag);
        *flag_ = 0;
    }
    ~StreamHold() {
        release();
        cudaStreamSynchronize(stream_);
        cudaFreeHost(const_cast<int*>(flag_));
    }
    StreamHold(const StreamHold&) = delete;
    StreamHold& operator=(const StreamHold&) = delete;

    void hold() {
        ASSERT_NE(flag_, nullptr);
        int* device_flag = nullptr;
        ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), const_cast<int*>(flag_), 0),
                  cudaSuccess);
        ASSERT_EQ(launch_hold_until_released(device_flag, HOLD_LIMIT_CYCLES, stream_), cudaSuccess);
    }

    /// Whether the stream still has work that has not finished.
    bool busy() const { return cudaStreamQuery(stream_) == cudaErrorNotReady; }

    void release() {
        if (flag_ != nullptr) {
            *flag_ = 1;
        }
    }

private:
    cudaStream_t stream_;
    volatile int* flag_ = nullptr;
};

class CudaNoHostBlock : public CudaStreamTest {
protected:
    void SetUp() override {
        CudaStreamTest::SetUp();
        other_number_ = other_number();
    }

    /// An array on cuda:0 holding `values`, working on `stream`, ready.
    mtsarray::Array device_array(const std::vector<double>& values, const std::vector<uintptr_t>& shape,
                                 int64_t stream) {
        auto array = array_from_bytes(cuda0, float64(), shape, to_bytes(values));
        array.set_stream(stream);
        array.synchronize();
        return array;
    }

    int64_t other_number_ = 0;  // as_dlpack takes the consumer stream by pointer
};

INSTANTIATE_TEST_SUITE_P(AllStreams, CudaNoHostBlock,
                         ::testing::Values(StreamKind::legacy, StreamKind::per_thread, StreamKind::user),
                         stream_kind_name);

std::vector<double> iota(size_t count, double start) {
    std::vector<double> values(count);
    for (size_t i = 0; i < count; i++) {
        values[i] = start + static_cast<double>(i);
    }
    return values;
}

std::vector<double> values_of(const mtsarray::Array& array) {
    return from_bytes<double>(read_bytes(array));  // a host consumer: waits for the array's work
}

/// Page-locked host memory: a device-to-host copy into it is queued
/// without blocking the host (one into pageable memory would wait).
class PinnedDoubles {
public:
    explicit PinnedDoubles(size_t count) : count_(count) {
        if (cudaMallocHost(reinterpret_cast<void**>(&data_), count * sizeof(double)) != cudaSuccess) {
            data_ = nullptr;
            ADD_FAILURE() << "cudaMallocHost failed";
        }
    }
    ~PinnedDoubles() { cudaFreeHost(data_); }
    PinnedDoubles(const PinnedDoubles&) = delete;
    PinnedDoubles& operator=(const PinnedDoubles&) = delete;
    double* data() const { return data_; }
    std::vector<double> values() const { return std::vector<double>(data_, data_ + count_); }

private:
    double* data_ = nullptr;
    size_t count_;
};

/// A 0-d float64 CPU array, the fill value `create` takes.
mts_array_t scalar(double value) {
    return mtsarray::Array::full<double>({kDLCPU, 0}, {}, value).release();
}

}  // namespace

TEST_P(CudaNoHostBlock, MoveDataLeavesBothStreamsRunning) {
    auto input = device_array(iota(8 * 3, 1.0), {8, 3}, other_number_);
    auto output = device_array(std::vector<double>(4 * 3, 0.0), {4, 3}, number_);
    const std::vector<mts_data_movement_t> movements = {{7, 0, 0, 0, 3}, {2, 3, 1, 1, 2}};
    StreamHold hold_output(stream_);
    StreamHold hold_input(other_);
    hold_output.hold();
    hold_input.hold();
    const auto& out = output.get();
    ASSERT_EQ(out.move_data(out.ptr, input.get().ptr, movements.data(), movements.size()), MTS_SUCCESS)
        << last_error();
    EXPECT_TRUE(hold_output.busy()) << "move_data waited on the host for the output's stream";
    EXPECT_TRUE(hold_input.busy()) << "move_data waited on the host for the input's stream";
    hold_input.release();
    hold_output.release();
    EXPECT_EQ(values_of(output), (std::vector<double>{22, 23, 24, 0, 0, 0, 0, 0, 0, 0, 8, 9}));
}

TEST_P(CudaNoHostBlock, CreateCopySwapAxesAndExportsLeaveTheStreamRunning) {
    auto array = device_array(iota(6, 0.0), {2, 3}, number_);
    PinnedDoubles exported(6);
    StreamHold hold(stream_);
    StreamHold hold_consumer(other_);
    hold.hold();
    hold_consumer.hold();

    mts_array_t created = {};
    const uintptr_t shape[] = {5};
    const auto& raw = array.get();
    ASSERT_EQ(raw.create(raw.ptr, shape, 1, scalar(2.5), &created), MTS_SUCCESS) << last_error();
    EXPECT_TRUE(hold.busy()) << "create waited on the host";
    mtsarray::Array created_array(created);
    EXPECT_EQ(created_array.stream(), number_) << "create works on the prototype's stream";

    auto copied = array.copy(cuda0);
    EXPECT_TRUE(hold.busy()) << "copy to the same device waited on the host";

    auto swapped = array.copy(cuda0);
    ASSERT_EQ(swapped.get().swap_axes(swapped.get().ptr, 0, 1), MTS_SUCCESS) << last_error();
    EXPECT_TRUE(hold.busy()) << "swap_axes waited on the host";

    DLManagedTensorVersioned* tensor = nullptr;
    ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, cuda0, &other_number_, dlpack_version()), MTS_SUCCESS)
        << last_error();
    EXPECT_TRUE(hold.busy()) << "as_dlpack to a device stream waited on the host";
    CUDA_CHECK(cudaMemcpyAsync(exported.data(), tensor->dl_tensor.data, 6 * sizeof(double), cudaMemcpyDeviceToHost,
                               other_));
    hold_consumer.release();
    EXPECT_TRUE(hold.busy());
    hold.release();
    CUDA_CHECK(cudaStreamSynchronize(other_));
    tensor->deleter(tensor);

    EXPECT_EQ(exported.values(), iota(6, 0.0)) << "the consumer stream read before the array's work was done";
    EXPECT_EQ(values_of(created_array), std::vector<double>(5, 2.5));
    EXPECT_EQ(values_of(copied), iota(6, 0.0));
    EXPECT_EQ(values_of(swapped), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST_P(CudaNoHostBlock, ZerosAndFullOnTheDefaultStreamReturnAtOnce) {
    if (GetParam() != StreamKind::legacy) {
        GTEST_SKIP() << "new arrays work on the device's default stream, the legacy one: tested once";
    }
    StreamHold hold(cudaStreamLegacy);
    hold.hold();
    auto zeros = mtsarray::Array::zeros(cuda0, float64(), {1000});
    EXPECT_TRUE(hold.busy()) << "mtsarray_zeros waited on the host";
    auto full = mtsarray::Array::full<double>(cuda0, {1000}, -1.0);
    EXPECT_TRUE(hold.busy()) << "mtsarray_full waited on the host";
    hold.release();
    EXPECT_EQ(values_of(zeros), std::vector<double>(1000, 0.0));
    EXPECT_EQ(values_of(full), std::vector<double>(1000, -1.0));
}

// The input is read on the output's stream, which is held: destroying the
// input must not let its memory be reused (by a new array filled on the
// input's stream) before that read has run.
TEST_P(CudaNoHostBlock, AnInputReadOnAnotherStreamIsFreedAfterTheRead) {
    constexpr uintptr_t count = 1 << 16;
    // every array is made before a stream is held: new arrays start on the
    // legacy default stream, which may be the one held
    auto output = device_array(std::vector<double>(count, 0.0), {count, 1}, number_);
    auto input = device_array(std::vector<double>(count, 7.0), {count, 1}, other_number_);
    auto prototype = device_array({0.0}, {1}, other_number_);
    std::vector<mts_data_movement_t> all;
    for (uintptr_t i = 0; i < count; i++) {
        all.push_back({i, i, 0, 0, 1});
    }
    StreamHold hold(stream_);
    {
        hold.hold();
        ASSERT_EQ(output.get().move_data(output.get().ptr, input.get().ptr, all.data(), all.size()), MTS_SUCCESS)
            << last_error();
        { auto dropped = std::move(input); }  // destroyed while the read is still queued
        // same size, same stream: the pool hands the freed block back here
        // as soon as its free is complete in stream order
        mts_array_t reused = {};
        const uintptr_t shape[] = {count, 1};
        ASSERT_EQ(prototype.get().create(prototype.get().ptr, shape, 2, scalar(-3.0), &reused), MTS_SUCCESS)
            << last_error();
        mtsarray::Array reused_array(reused);
        EXPECT_TRUE(hold.busy());
        hold.release();
        EXPECT_EQ(values_of(reused_array), std::vector<double>(count, -3.0));
    }
    EXPECT_EQ(values_of(output), std::vector<double>(count, 7.0))
        << "the input's memory was reused before the output's stream read it";
}

// An export is read on the consumer's stream (held) after its array is
// gone: the memory stays until that read has run.
TEST_P(CudaNoHostBlock, AnExportReadOnTheConsumerStreamKeepsItsMemory) {
    constexpr uintptr_t count = 1 << 16;
    PinnedDoubles read(count);
    auto prototype = device_array({0.0}, {1}, number_);
    auto array = device_array(std::vector<double>(count, 5.0), {count}, number_);
    StreamHold hold(other_);
    {
        DLManagedTensorVersioned* tensor = nullptr;
        ASSERT_EQ(array.get().as_dlpack(array.get().ptr, &tensor, cuda0, &other_number_, dlpack_version()),
                  MTS_SUCCESS)
            << last_error();
        hold.hold();
        CUDA_CHECK(cudaMemcpyAsync(read.data(), tensor->dl_tensor.data, count * sizeof(double),
                                   cudaMemcpyDeviceToHost, other_));
        tensor->deleter(tensor);  // the consumer is done queuing its reads
        { auto dropped = std::move(array); }
        mts_array_t reused = {};
        const uintptr_t shape[] = {count};
        ASSERT_EQ(prototype.get().create(prototype.get().ptr, shape, 1, scalar(-4.0), &reused), MTS_SUCCESS)
            << last_error();
        mtsarray::Array reused_array(reused);
        EXPECT_TRUE(hold.busy());
        hold.release();
        CUDA_CHECK(cudaStreamSynchronize(other_));
        EXPECT_EQ(values_of(reused_array), std::vector<double>(count, -4.0));
    }
    const auto values = read.values();
    EXPECT_EQ(std::count(values.begin(), values.end(), 5.0), static_cast<std::ptrdiff_t>(count))
        << "the export's memory was reused before the consumer stream read it";
}

// move_data captured in a graph (more movements than fit in one kernel's
// parameters, so the table travels in several kernel nodes) gives the
// right output at every replay, reading the input of that moment.
TEST_P(CudaNoHostBlock, MoveDataIsCapturedAndReplaysRight) {
    if (GetParam() != StreamKind::user) {
        GTEST_SKIP() << "graph capture is tested on a user stream (the legacy stream can not capture)";
    }
    constexpr uintptr_t samples = 1000;
    auto input = device_array(std::vector<double>(samples * 4, 0.0), {samples, 4}, number_);
    auto output = device_array(std::vector<double>(samples * 2, 0.0), {samples, 2}, number_);
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < samples; i++) {
        // each into its own output sample; starts 0..2 and lengths 1..2 of 4
        movements.push_back({(i * 7) % samples, i, i % 3, 0, 1 + i % 2});
    }
    const auto& prototype = input.get();

    CUDA_CHECK(cudaStreamBeginCapture(user_, cudaStreamCaptureModeThreadLocal));
    const auto captured = output.get().move_data(output.get().ptr, input.get().ptr, movements.data(),
                                                 movements.size());
    const std::string capture_error = captured == MTS_SUCCESS ? "" : last_error();
    // allocating operations refuse a capturing stream, and leave the capture valid
    mts_array_t refused = {};
    const uintptr_t shape[] = {3};
    const auto create_status = prototype.create(prototype.ptr, shape, 1, scalar(1.0), &refused);
    const std::string create_error = last_error();
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(user_, &graph));
    ASSERT_EQ(captured, MTS_SUCCESS) << capture_error;
    EXPECT_EQ(create_status, MTS_CALLBACK_ERROR);
    EXPECT_NE(create_error.find("capturing"), std::string::npos) << create_error;

    cudaGraphExec_t executable = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&executable, graph, 0));
    for (int replay = 0; replay < 3; replay++) {
        std::vector<double> values(samples * 4);
        for (size_t i = 0; i < values.size(); i++) {
            values[i] = 1000.0 * replay + static_cast<double>(i);
        }
        CUDA_CHECK(cudaMemcpyAsync(input.data(), values.data(), values.size() * sizeof(double),
                                   cudaMemcpyHostToDevice, user_));
        CUDA_CHECK(cudaGraphLaunch(executable, user_));
        CUDA_CHECK(cudaStreamSynchronize(user_));
        std::vector<double> expected(samples * 2, 0.0);
        for (const auto& m : movements) {
            for (uintptr_t x = 0; x < m.properties_length; x++) {
                expected[m.sample_out * 2 + m.properties_start_out + x] =
                    values[m.sample_in * 4 + m.properties_start_in + x];
            }
        }
        // rows not written by this replay keep the previous replay's values:
        // every replay writes the same elements, so compare those only
        const auto got = values_of(output);
        for (const auto& m : movements) {
            for (uintptr_t x = 0; x < m.properties_length; x++) {
                const size_t at = m.sample_out * 2 + m.properties_start_out + x;
                ASSERT_EQ(got[at], expected[at]) << "replay " << replay << ", element " << at;
            }
        }
    }
    cudaGraphExecDestroy(executable);
    cudaGraphDestroy(graph);
}
