// Host -> device copies captured in a CUDA graph, on the simulated runtime
// (its capture rules: tests/support/simulation/capture.cpp), as a training
// loop captures them with torch.cuda.graph:
//
//  - a capture never leaves the page-locked staging pool with an event last
//    recorded inside it (which no later query may read: every copy from the
//    host, every move_data with a table in page-locked memory would fail);
//  - a replay copies what the host source holds at that replay, as a
//    captured copy from page-locked memory does, however often the pool
//    hands its buffers out between replays: the graph reads only memory it
//    owns, and keeps the source alive;
//  - a copy whose source does not outlive the call, or whose source mtsarray
//    must copy first (another library's strided or read-only export: a
//    replay would upload that copy, not what the source holds then), is
//    refused with a clear error before anything is queued, leaving the
//    capture valid.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/backend.hpp"
#include "base/stream.hpp"
#include "core/backend_registry.hpp"
#include "cpu/threads/pool_host_tasks.hpp"
#include "gpu/gpu_backend.hpp"
#include "support/backends.hpp"
#include "support/simulated_device_test.hpp"
#include "support/simulated_runtime.hpp"
#include "support/strided_foreign_array.hpp"

using namespace mtsarray_test;
using mtsarray::detail::Stream;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};

class CapturedHostCopies : public SimulatedDeviceTest {
protected:
    void SetUp() override {
        SimulatedDeviceTest::SetUp();
        stream_ = sim::create_stream(0);
    }
    void TearDown() override {
        SimulatedDeviceTest::TearDown();
        if (stream_ != 0) {
            sim::destroy_stream(stream_);
        }
    }

    /// A float64 array of `count` zeros on the simulated device, working on
    /// the test's stream.
    mtsarray::Array device_zeros(size_t count) {
        auto array = mtsarray::Array::zeros(gpu0, float64(), {count});
        array.set_stream(stream_);
        return array;
    }

    static std::vector<double> values_of(const mtsarray::Array& array) {
        return from_bytes<double>(read_bytes(array));
    }

    /// Writes `values` into the CPU array `host` (its memory, as a program
    /// writes a NumPy view of it).
    static void write(mtsarray::Array& host, const std::vector<double>& values) {
        std::memcpy(host.data(), values.data(), values.size() * sizeof(double));
    }

    int64_t stream_ = 0;
};

std::vector<double> step_values(size_t count, double step) {
    std::vector<double> values(count);
    for (size_t i = 0; i < count; i++) {
        values[i] = step * 1000.0 + static_cast<double>(i);
    }
    return values;
}

}  // namespace

// The pool is warm (copies before the capture grew it), one copy is
// captured, then the program goes on: every copy from the host and every
// move_data whose table goes through page-locked memory still works.
TEST_F(CapturedHostCopies, ACaptureLeavesTheStagingPoolUsable) {
    constexpr size_t count = 512;  // 4 KiB: staged through the pool
    auto destination = device_zeros(count);
    auto source = mtsarray::Array::full<double>(mtsarray::cpu(), {count}, 1.0);
    for (int warm = 0; warm < 4; warm++) {
        write(source, step_values(count, warm));
        destination.copy_from(source);
        sim::drain();  // the pool's buffers are added in the background
    }

    sim::begin_capture(stream_, 0);
    destination.copy_from(source);
    sim::Graph graph;
    ASSERT_NO_THROW(graph = sim::end_capture(stream_, 0)) << lines(sim::capture_invalidations());

    for (int step = 0; step < 8; step++) {
        write(source, step_values(count, 10 + step));
        ASSERT_NO_THROW(destination.copy_from(source)) << "step " << step;
        EXPECT_EQ(values_of(destination), step_values(count, 10 + step)) << "step " << step;
    }

    // 300 movements: a table too large for the kernel parameters, built in
    // page-locked memory of the same pool
    constexpr size_t rows = 300;
    auto input = mtsarray::Array::full<double>(gpu0, {rows, 2}, 0.0);
    auto output = mtsarray::Array::full<double>(gpu0, {rows, 2}, -1.0);
    std::vector<double> input_values(rows * 2);
    std::iota(input_values.begin(), input_values.end(), 0.5);
    input.copy_from(array_from_bytes(mtsarray::cpu(), float64(), {rows, 2}, to_bytes(input_values)));
    std::vector<mts_data_movement_t> movements(rows);
    std::vector<double> expected(rows * 2, -1.0);
    for (size_t i = 0; i < rows; i++) {
        movements[i] = {(i * 7) % rows, i, 1, 0, 1};
        expected[2 * i] = input_values[2 * ((i * 7) % rows) + 1];
    }
    const mts_array_t& raw_output = output.get();
    ASSERT_EQ(raw_output.move_data(raw_output.ptr, input.get().ptr, movements.data(), movements.size()), MTS_SUCCESS)
        << last_error();
    EXPECT_EQ(from_bytes<double>(read_bytes(output)), expected);
}

// A training loop's capture: the step's batch is written into the same host
// array before each replay; each replay copies what it holds then. Between
// replays the pool hands its buffers out to other copies, which must not
// change what the graph reads. 1000 replays, checked each time.
TEST_F(CapturedHostCopies, AReplayCopiesWhatTheSourceHoldsAtThatReplay) {
    constexpr size_t count = 256;
    auto destination = device_zeros(count);
    auto other = device_zeros(count);
    auto source = mtsarray::Array::full<double>(mtsarray::cpu(), {count}, 0.0);
    auto unrelated = mtsarray::Array::full<double>(mtsarray::cpu(), {count}, 7.0);
    for (int warm = 0; warm < 3; warm++) {
        destination.copy_from(source);
        sim::drain();
    }

    write(source, step_values(count, 1));
    sim::begin_capture(stream_, 0);
    destination.copy_from(source);
    sim::Graph graph;
    ASSERT_NO_THROW(graph = sim::end_capture(stream_, 0)) << lines(sim::capture_invalidations());

    for (int replay = 0; replay < 1000; replay++) {
        const auto batch = step_values(count, 2 + replay);
        write(source, batch);
        sim::launch(graph, stream_, 0);
        // the pool's buffers go to other copies meanwhile
        other.copy_from(unrelated);
        const auto copied = values_of(destination);
        ASSERT_EQ(copied, batch) << "replay " << replay;
    }
    EXPECT_EQ(values_of(other), std::vector<double>(count, 7.0));
}

// The graph keeps what it reads: a page-locked source destroyed after the
// capture is still there at every replay.
TEST_F(CapturedHostCopies, TheGraphKeepsAPageLockedSourceAlive) {
    constexpr size_t count = 64;
    const DLDevice pinned = {kDLCUDAHost, 0};
    auto destination = device_zeros(count);
    auto source = std::make_unique<mtsarray::Array>(
        array_from_bytes(pinned, float64(), {count}, to_bytes(step_values(count, 3))));
    sim::begin_capture(stream_, 0);
    destination.copy_from(*source);
    sim::Graph graph;
    ASSERT_NO_THROW(graph = sim::end_capture(stream_, 0)) << lines(sim::capture_invalidations());
    source.reset();
    sim::drain();
    for (int replay = 0; replay < 3; replay++) {
        sim::launch(graph, stream_, 0);
        EXPECT_EQ(values_of(destination), step_values(count, 3)) << "replay " << replay;
    }
    EXPECT_TRUE(sim::violations().empty()) << lines(sim::violations());
}

// With a cold pool (a backend of its own, as in a new process, nothing
// copied yet), the first copy captured is captured all the same.
TEST_F(CapturedHostCopies, ACaptureWithAColdPoolIsCapturedToo) {
    const auto& backend =
        *new mtsarray::detail::gpu::GpuBackend<SimulatedRuntime>(&mtsarray::detail::cpu::pool_host_tasks());
    const Stream stream = Stream::parse(gpu0, stream_);
    constexpr size_t count = 128;
    const size_t bytes = count * sizeof(double);
    void* destination = backend.allocate(stream, bytes);
    auto source = std::make_shared<std::vector<double>>(step_values(count, 4));
    sim::drain();

    sim::begin_capture(stream_, 0);
    EXPECT_NO_THROW(backend.copy_from_host_keeping(stream, destination, source->data(), bytes, source, false));
    sim::Graph graph;
    ASSERT_NO_THROW(graph = sim::end_capture(stream_, 0)) << lines(sim::capture_invalidations());
    EXPECT_EQ(graph.count(sim::NodeKind::host), 1u) << "the host node that reads the source at each replay";
    for (int replay = 0; replay < 3; replay++) {
        const auto batch = step_values(count, 5 + replay);
        std::copy(batch.begin(), batch.end(), source->begin());  // into the memory the graph reads
        sim::launch(graph, stream_, 0);
        std::vector<double> read(count, 0.0);
        backend.copy_to_host(stream, read.data(), destination, bytes);
        backend.synchronize(stream);
        EXPECT_EQ(read, step_values(count, 5 + replay)) << "replay " << replay;
    }
    graph = sim::Graph();
    backend.deallocate(stream, destination, bytes);
}

// A copy from host memory that nothing keeps alive after the call can not
// be replayed: refused before anything is queued, the capture left valid.
TEST_F(CapturedHostCopies, ACopyOfASourceThatDoesNotOutliveTheCallIsRefused) {
    const auto& backend = mtsarray::detail::memory_backend(kDLCUDA);
    const Stream stream = Stream::parse(gpu0, stream_);
    auto destination = device_zeros(16);
    const std::vector<double> source(16, 2.0);
    sim::begin_capture(stream_, 0);
    try {
        backend.copy_from_host(stream, destination.data(), source.data(), 16 * sizeof(double));
        ADD_FAILURE() << "the copy was accepted";
    } catch (const mtsarray::detail::Error& error) {
        EXPECT_NE(std::string(error.what()).find("can not be captured"), std::string::npos) << error.what();
    }
    EXPECT_NO_THROW(sim::end_capture(stream_, 0)) << lines(sim::capture_invalidations());
}

// Another library's host array whose export mtsarray must copy before
// reading it (strided, or read-only): a graph could only replay that copy,
// made at capture, and never what the source holds at a replay. Refused
// with an error that says so, the destination untouched, the capture valid;
// the same copy outside the capture works. A C-contiguous writable export
// is read in place, and captured.
TEST_F(CapturedHostCopies, ACopyFromAForeignSourceThatMtsarrayMustCopyIsRefused) {
    constexpr size_t count = 12;
    struct Case {
        const char* name;
        std::vector<int64_t> shape;
        std::vector<int64_t> strides;
        uint64_t flags;
    };
    const std::vector<Case> cases = {
        {"strided", {3, 4}, {1, 3}, 0},
        {"read-only", {3, 4}, {4, 1}, DLPACK_FLAG_BITMASK_READ_ONLY},
    };
    for (const auto& source_case : cases) {
        SCOPED_TRACE(source_case.name);
        mts_array_t source = StridedForeignArray::make(float64(), source_case.shape, source_case.strides,
                                                       to_bytes(std::vector<double>(count, 1.0)),
                                                       DLDevice{kDLCPU, 0}, source_case.flags);
        auto* foreign = static_cast<StridedForeignArray*>(source.ptr);
        auto destination = mtsarray::Array::zeros(gpu0, float64(), {3, 4});
        destination.set_stream(stream_);
        const auto before = values_of(destination);

        sim::begin_capture(stream_, 0);
        reset_last_error();
        const auto status = mtsarray_copy_into(&destination.get(), &source);
        sim::Graph graph;
        ASSERT_NO_THROW(graph = sim::end_capture(stream_, 0)) << lines(sim::capture_invalidations());
        if (status == MTS_SUCCESS) {
            // what the graph does at a replay, for the failure message
            std::memcpy(foreign->storage.data(), to_bytes(std::vector<double>(count, 42.0)).data(), count * 8);
            sim::launch(graph, stream_, 0);
            ADD_FAILURE() << "the copy was captured; a replay uploaded " << values_of(destination)[0]
                          << " where the source holds 42";
        } else {
            EXPECT_EQ(status, MTS_CALLBACK_ERROR);
            EXPECT_NE(last_error().find("mtsarray_copy_into"), std::string::npos) << last_error();
            EXPECT_NE(last_error().find("can not be captured"), std::string::npos) << last_error();
            EXPECT_NE(last_error().find("must copy"), std::string::npos) << last_error();
            EXPECT_EQ(graph.count(sim::NodeKind::host), 0u) << "nothing queued";
            EXPECT_EQ(values_of(destination), before);
        }
        graph = sim::Graph();

        // outside the capture: copied
        std::memcpy(foreign->storage.data(), to_bytes(std::vector<double>(count, 5.0)).data(), count * 8);
        EXPECT_EQ(mtsarray_copy_into(&destination.get(), &source), MTS_SUCCESS) << last_error();
        EXPECT_EQ(values_of(destination), std::vector<double>(count, 5.0));
        source.destroy(source.ptr);
    }

    // C-contiguous and writable: read in place at every replay
    mts_array_t source = StridedForeignArray::make(float64(), {3, 4}, {4, 1}, to_bytes(step_values(count, 1)));
    auto* foreign = static_cast<StridedForeignArray*>(source.ptr);
    auto destination = mtsarray::Array::zeros(gpu0, float64(), {3, 4});
    destination.set_stream(stream_);
    sim::begin_capture(stream_, 0);
    EXPECT_EQ(mtsarray_copy_into(&destination.get(), &source), MTS_SUCCESS) << last_error();
    sim::Graph graph;
    ASSERT_NO_THROW(graph = sim::end_capture(stream_, 0)) << lines(sim::capture_invalidations());
    for (int replay = 0; replay < 3; replay++) {
        const auto batch = step_values(count, 2 + replay);
        std::memcpy(foreign->storage.data(), batch.data(), count * sizeof(double));
        sim::launch(graph, stream_, 0);
        EXPECT_EQ(values_of(destination), batch) << "replay " << replay;
    }
    graph = sim::Graph();
    sim::drain();
    source.destroy(source.ptr);
}
