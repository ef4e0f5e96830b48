// Stream ordering of the CUDA backend, on the legacy default stream, the
// per-thread default stream and a user stream: work runs on the array's
// stream, after the work it reads from other streams and devices, and
// before consumers of its exports; move_data captured in a graph replays
// right, whatever another thread does meanwhile. On a real GPU when there
// is one, else on the simulated runtime (support/stream_driver.hpp). Each
// ordering is made observable by holding a stream: what is queued behind
// the hold must not have run before it is released, and must be right after.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/stream_fixture.hpp"

using namespace mtsarray_test;

namespace {

class StreamOrdering : public GpuStreamTest {};

INSTANTIATE_TEST_SUITE_P(AllStreams, StreamOrdering,
                         ::testing::Values(StreamKind::legacy, StreamKind::per_thread, StreamKind::user),
                         stream_kind_name);

}  // namespace

TEST_P(StreamOrdering, WorkRunsOnTheArrayStream) {
    constexpr uintptr_t samples = 256;
    constexpr uintptr_t properties = 64;
    const auto source = iota(samples * properties, 0.5);
    const std::vector<double> zeros(samples * properties, 0.0);
    auto input = device_array(source, {samples, properties}, stream_);
    auto output = device_array(zeros, {samples, properties}, stream_);
    EXPECT_EQ(input.stream(), stream_);
    EXPECT_EQ(output.stream(), stream_);
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < samples; i += 2) {
        movements.push_back({i, samples - 1 - i, i % 5, 3, 32});
    }

    auto hold = driver().hold(stream_, 0);
    ASSERT_EQ(move_data(output, input, movements), MTS_SUCCESS) << last_error();
    EXPECT_TRUE(hold->running()) << "move_data waited on the host for the array's stream";
    let_misordered_work_run();
    EXPECT_EQ(peek_values(output), zeros) << "move_data ran before the work queued on the array's stream";
    hold->release();
    output.synchronize();
    EXPECT_EQ(values_of(output), moved(zeros, source, properties, properties, movements));
}

// The input is written on another stream, held: move_data, on the output's
// stream, must wait for the writer. Thousands of scattered movements of
// mixed lengths (8 B to 512 B, misaligned starts), so the table has several
// size classes and goes through the page-locked staging pool and an upload.
TEST_P(StreamOrdering, ThousandsOfScatteredMovementsWaitForAHeldWriter) {
    constexpr uintptr_t samples = 3000;
    constexpr uintptr_t properties = 64;
    const auto movements = mixed_movements(samples, 11);
    const std::vector<double> before(2 * samples * properties, -1.0);
    auto input = device_array(std::vector<double>(samples * properties, 0.0), {samples, properties}, other_);
    auto output = device_array(before, {2 * samples, properties}, stream_);
    for (double base : {10.0, 1e6}) {
        SCOPED_TRACE("input values from " + std::to_string(base));
        const auto written = iota(samples * properties, base);
        auto fresh = device_array(written, {samples, properties}, other_);
        auto reset = device_array(before, {2 * samples, properties}, stream_);
        ASSERT_EQ(move_data(output, reset, whole_rows(2 * samples, properties)), MTS_SUCCESS) << last_error();
        output.synchronize();

        auto hold = driver().hold(other_, 0);
        ASSERT_EQ(move_data(input, fresh, whole_rows(samples, properties)), MTS_SUCCESS) << last_error();
        const size_t uploads = driver().simulated() ? sim::host_to_device_copies() : 0;
        ASSERT_EQ(move_data(output, input, movements), MTS_SUCCESS) << last_error();
        if (driver().simulated()) {
            EXPECT_EQ(sim::host_to_device_copies(), uploads + 1)
                << "a table this large is uploaded, not passed as kernel parameters";
        }
        EXPECT_TRUE(hold->running()) << "move_data waited on the host for the writer's stream";
        let_misordered_work_run();
        EXPECT_EQ(peek_values(output), before) << "move_data read the input before its writer ran";
        hold->release();
        EXPECT_EQ(values_of(output), moved(before, written, properties, properties, movements));
    }
}

// Both streams held: the call returns at once, nothing has moved, and
// everything has once they are released.
TEST_P(StreamOrdering, ThousandsOfScatteredMovementsReturnWhileBothStreamsAreHeld) {
    constexpr uintptr_t samples = 1200;
    constexpr uintptr_t properties = 3;
    const auto source = iota(samples * properties, 0.0);
    const std::vector<double> before(samples * properties, -1.0);
    auto input = device_array(source, {samples, properties}, other_);
    auto output = device_array(before, {samples, properties}, stream_);
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < samples; i++) {
        movements.push_back({(i * 7) % samples, samples - 1 - i, i % 2, i % 2, 1 + i % 2});
    }
    expect_returns_while_held({{stream_, 0}, {other_, 0}},
                              [&] {
                                  const size_t uploads = driver().simulated() ? sim::host_to_device_copies() : 0;
                                  ASSERT_EQ(move_data(output, input, movements), MTS_SUCCESS) << last_error();
                                  if (driver().simulated()) {
                                      EXPECT_EQ(sim::host_to_device_copies(), uploads + 1)
                                          << "a table this large is uploaded, not passed as kernel parameters";
                                  }
                                  let_misordered_work_run();
                                  EXPECT_EQ(peek_values(output), before) << "moved with the output's stream held";
                              },
                              "move_data of 1200 scattered movements");
    EXPECT_EQ(values_of(output), moved(before, source, properties, properties, movements));
}

// The array is written behind a hold on its stream, then exported to a
// consumer stream, which reads it at once: the read must come after the
// write, and as_dlpack must neither wait nor leave another device current.
TEST_P(StreamOrdering, AnExportIsWaitedForByTheConsumerStream) {
    constexpr uintptr_t rows = 1024;
    constexpr uintptr_t properties = 64;
    constexpr size_t bytes = rows * properties * sizeof(double);
    auto read = driver().host_buffer(bytes);
    auto array = device_array(std::vector<double>(rows * properties, 0.0), {rows, properties}, stream_);
    for (double base : {1.0, -500.0}) {
        SCOPED_TRACE("values from " + std::to_string(base));
        const auto written = iota(rows * properties, base);
        auto fresh = device_array(written, {rows, properties}, stream_);
        auto hold = driver().hold(stream_, 0);
        ASSERT_EQ(move_data(array, fresh, whole_rows(rows, properties)), MTS_SUCCESS) << last_error();
        DLManagedTensorVersioned* tensor = nullptr;
        const auto& raw = array.get();
        ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, gpu0, &consumer_, dlpack_version()), MTS_SUCCESS) << last_error();
        EXPECT_TRUE(hold->running()) << "as_dlpack to a device stream waited on the host";
        EXPECT_EQ(tensor->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u) << "an export to its own device is no copy";
        driver().read_on_stream(consumer_, 0, read.get(), tensor->dl_tensor.data, bytes);
        let_misordered_work_run();
        hold->release();
        driver().synchronize_stream(consumer_, 0);
        tensor->deleter(tensor);
        const auto* values = static_cast<const double*>(read.get());
        EXPECT_EQ(std::vector<double>(values, values + rows * properties), written)
            << "the consumer stream read before the array's work was done";
        EXPECT_EQ(driver().current_device(), 0) << "as_dlpack must leave the current device as it found it";
    }
}

TEST_P(StreamOrdering, CopiesToTheHostAreComplete) {
    std::vector<int64_t> values(1 << 20);
    std::iota(values.begin(), values.end(), int64_t(-5));
    auto array = array_from_bytes(gpu0, make_dtype(kDLInt, 64), {1 << 10, 1 << 10}, to_bytes(values));
    array.set_stream(stream_);
    auto copy = array.copy(gpu0);
    EXPECT_EQ(copy.stream(), stream_) << "a same-device copy keeps the work stream";
    auto on_host = copy.copy(DLDevice{kDLCPU, 0});
    EXPECT_EQ(from_bytes<int64_t>(read_bytes(on_host)), values);
}

// An input written on device 0's stream, held, copied and exported to
// device 1: nothing arrives there before the release, everything after.
TEST_P(StreamOrdering, CopiesAndExportsToAnotherDeviceAreOrdered) {
    if (driver().device_count() < 2) {
        GTEST_SKIP() << driver().name() << " has " << driver().device_count()
                     << " device: ordering across devices needs two";
    }
    constexpr uintptr_t rows = 512;
    constexpr uintptr_t properties = 16;
    constexpr size_t bytes = rows * properties * sizeof(double);
    const int64_t device1 = driver().create_stream(1);
    auto read = driver().host_buffer(bytes);
    const auto written = iota(rows * properties, 7000.25);
    auto input = device_array(std::vector<double>(rows * properties, 0.0), {rows, properties}, stream_);
    auto fresh = device_array(written, {rows, properties}, stream_);
    {
        auto hold = driver().hold(stream_, 0);
        ASSERT_EQ(move_data(input, fresh, whole_rows(rows, properties)), MTS_SUCCESS) << last_error();
        auto copy = input.copy(gpu1);
        DLManagedTensorVersioned* tensor = nullptr;
        const auto& raw = input.get();
        ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, gpu1, &device1, dlpack_version()), MTS_SUCCESS) << last_error();
        EXPECT_TRUE(hold->running()) << "a copy or an export to another device waited on the host";
        EXPECT_NE(tensor->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
        EXPECT_EQ(tensor->dl_tensor.device.device_id, 1);
        driver().read_on_stream(device1, 1, read.get(), tensor->dl_tensor.data, bytes);
        let_misordered_work_run();
        EXPECT_NE(peek_values(copy), written) << "the copy on device 1 ran before the input's writer";
        hold->release();
        EXPECT_EQ(values_of(copy), written);
        driver().synchronize_stream(device1, 1);
        tensor->deleter(tensor);
        const auto* values = static_cast<const double*>(read.get());
        EXPECT_EQ(std::vector<double>(values, values + rows * properties), written)
            << "device 1's consumer read the export before the input's writer ran";
    }
    driver().synchronize_all();
    driver().destroy_stream(device1, 1);
}

// ---- graph capture ------------------------------------------------------------------------

// A move_data of 100 000 movements captured in a graph in the Global capture
// mode (torch.cuda.graph's default): one kernel node whatever the table
// size, the table uploaded from the graph's own host copy, and every replay
// moves the input of its moment.
TEST_P(StreamOrdering, ALargeCapturedMoveDataIsOneKernelNodeAndReplaysRight) {
    MTSARRAY_SKIP_UNLESS_CAPTURABLE();
    constexpr uintptr_t count = 100000;
    const auto movements = scattered_movements(count, 4, 3);
    const std::vector<double> zeros(2 * count * 4, 0.0);
    auto input = device_array(iota(count * 4, 1.0), {count, 4}, stream_);
    auto output = device_array(zeros, {2 * count, 4}, stream_);
    driver().synchronize_all();
    const size_t objects_before = driver().simulated() ? sim::retained_objects() : 0;
    driver().begin_capture(stream_, 0, CaptureMode::global);
    const auto status = move_data(output, input, movements);
    const std::string error = status == MTS_SUCCESS ? "" : last_error();
    std::string why;
    auto graph = driver().end_capture(stream_, 0, why);
    ASSERT_EQ(status, MTS_SUCCESS) << error;
    ASSERT_NE(graph, nullptr) << why;
    EXPECT_EQ(graph->kernel_nodes(), 1u) << "one kernel node whatever the table size";
    EXPECT_EQ(graph->copy_nodes(), 1u) << "the table's upload from the graph's own host copy";
    if (driver().simulated()) {
        EXPECT_EQ(sim::retained_objects(), objects_before + 1) << "the graph owns its table";
    }
    EXPECT_EQ(values_of(output), zeros) << "captured work must not run";
    for (double base : {10.0, 1e6}) {
        auto fresh = device_array(iota(count * 4, base), {count, 4}, stream_);
        ASSERT_EQ(move_data(input, fresh, whole_rows(count, 4)), MTS_SUCCESS) << last_error();
        const size_t waits = driver().host_waits();
        graph->replay(stream_, 0);
        EXPECT_EQ(driver().host_waits(), waits) << "a replay waited on the host";
        EXPECT_EQ(values_of(output), moved(zeros, iota(count * 4, base), 4, 4, movements));
    }
    graph.reset();
    if (driver().simulated()) {
        driver().synchronize_all();
        EXPECT_EQ(sim::retained_objects(), objects_before) << "the table goes with the graph";
    }
}

// A large move_data captured while every page-locked staging buffer is
// still read by work queued behind a held stream: the graph must not read
// the plain host memory the call would otherwise stage through (a node of
// the graph reads it again at every replay); the table goes into the
// kernel nodes' parameters instead, and the replays are right.
TEST_P(StreamOrdering, ACaptureWhileEveryStagingBufferIsBusyReadsNoPageableMemory) {
    MTSARRAY_SKIP_UNLESS_CAPTURABLE();
    constexpr uintptr_t count = 1500;
    constexpr uintptr_t properties = 4;
    const auto movements = scattered_movements(count, properties, 23);
    const std::vector<double> zeros(2 * count * properties, 0.0);
    auto input = device_array(iota(count * properties, 1.0), {count, properties}, stream_);
    auto output = device_array(zeros, {2 * count, properties}, stream_);
    auto busy_input = device_array(iota(count * properties, -1.0), {count, properties}, other_);
    auto busy_output = device_array(zeros, {2 * count, properties}, other_);
    driver().synchronize_all();

    std::unique_ptr<CapturedGraph> graph;
    {
        auto hold = driver().hold(other_, 0);
        for (int i = 0; i < 16; i++) {  // each leases a staging buffer until the hold ends
            ASSERT_EQ(move_data(busy_output, busy_input, movements), MTS_SUCCESS) << last_error();
        }
        driver().begin_capture(stream_, 0, CaptureMode::global);
        const auto status = move_data(output, input, movements);
        const std::string error = status == MTS_SUCCESS ? "" : last_error();
        std::string why;
        graph = driver().end_capture(stream_, 0, why);
        ASSERT_EQ(status, MTS_SUCCESS) << error;
        ASSERT_NE(graph, nullptr) << why;
        if (driver().simulated()) {
            // the pool can not grow while the hold lasts: page-locking waits for the device
            EXPECT_GT(graph->kernel_nodes(), 1u) << "the table in the kernels' parameters";
            EXPECT_EQ(graph->copy_nodes(), 0u) << "no upload from host memory";
        }
        hold->release();
    }
    driver().synchronize_all();
    EXPECT_EQ(values_of(busy_output), moved(zeros, iota(count * properties, -1.0), properties, properties, movements));
    for (double base : {10.0, 1e6}) {
        auto fresh = device_array(iota(count * properties, base), {count, properties}, stream_);
        ASSERT_EQ(move_data(input, fresh, whole_rows(count, properties)), MTS_SUCCESS) << last_error();
        graph->replay(stream_, 0);
        EXPECT_EQ(values_of(output), moved(zeros, iota(count * properties, base), properties, properties, movements));
    }
}

// One thread captures move_data in each capture mode while another thread
// moves data, creates, waits for and destroys arrays on another stream
// (with tables large enough to use the staging pool): the capture stays
// valid and its replays, and the other thread's work, are right. (In the
// Global mode, the other thread's allocations, frees and waits are
// "potentially unsafe" calls that CUDA refuses, breaking the capture, unless
// they are made in the Relaxed mode.)
TEST_P(StreamOrdering, ACaptureStaysValidWhileAnotherThreadWorks) {
    MTSARRAY_SKIP_UNLESS_CAPTURABLE();
    constexpr uintptr_t samples = 1500;
    constexpr uintptr_t properties = 8;
    const auto movements = scattered_movements(samples, properties, 17);
    const std::vector<double> zeros(2 * samples * properties, 0.0);
    for (CaptureMode mode : {CaptureMode::global, CaptureMode::thread_local_mode, CaptureMode::relaxed}) {
        SCOPED_TRACE(std::string(capture_mode_name(mode)) + " capture mode");
        auto input = device_array(std::vector<double>(samples * properties, 0.0), {samples, properties}, stream_);
        auto output = device_array(zeros, {2 * samples, properties}, stream_);
        const auto theirs = iota(samples * properties, -3.0);
        auto their_input = device_array(theirs, {samples, properties}, other_);
        auto their_output = device_array(zeros, {2 * samples, properties}, other_);
        driver().synchronize_all();

        driver().begin_capture(stream_, 0, mode);
        std::atomic<int> failures{0};
        std::string their_error;
        std::thread worker([&] {
            for (int i = 0; i < 10; i++) {
                if (move_data(their_output, their_input, movements) != MTS_SUCCESS) {
                    failures++;
                    their_error = last_error();
                }
                mts_array_t created = {};
                const uintptr_t shape[] = {samples, properties};
                const auto& prototype = their_input.get();
                if (prototype.create(prototype.ptr, shape, 2, scalar(i), &created) != MTS_SUCCESS) {
                    failures++;
                    their_error = last_error();
                    continue;
                }
                mtsarray::Array made(created);
                if (move_data(their_output, made, {{0, 1, 0, 0, properties}}) != MTS_SUCCESS) {
                    failures++;
                    their_error = last_error();
                }
                if (mtsarray_synchronize(&their_output.get()) != MTS_SUCCESS) {  // a host consumer's wait
                    failures++;
                    their_error = last_error();
                }
            }  // every array made here is destroyed here
        });
        const auto status = move_data(output, input, movements);
        const std::string error = status == MTS_SUCCESS ? "" : last_error();
        worker.join();
        std::string why;
        auto graph = driver().end_capture(stream_, 0, why);
        ASSERT_EQ(status, MTS_SUCCESS) << error;
        ASSERT_NE(graph, nullptr) << "the other thread's work invalidated the capture: " << why;
        EXPECT_EQ(failures.load(), 0) << their_error;

        for (double base : {1.0, 100.0}) {
            const auto values = iota(samples * properties, base);
            auto fresh = device_array(values, {samples, properties}, stream_);
            ASSERT_EQ(move_data(input, fresh, whole_rows(samples, properties)), MTS_SUCCESS) << last_error();
            graph->replay(stream_, 0);
            EXPECT_EQ(values_of(output), moved(zeros, values, properties, properties, movements));
        }
        auto expected = moved(zeros, theirs, properties, properties, movements);
        std::fill(expected.begin() + properties, expected.begin() + 2 * properties, 9.0);  // the last array made
        EXPECT_EQ(values_of(their_output), expected);
    }
}
