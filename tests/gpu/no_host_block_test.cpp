// The stream contract of the CUDA backend, on the legacy default stream, the
// per-thread default stream and a user stream, on a real GPU when there is
// one, else on the simulated runtime (support/stream_driver.hpp):
//  - no operation on device memory waits on the host: every stream involved
//    is held, the operation is called, and the holds must still be running
//    when it returns (on the simulation, no host wait is counted either);
//  - memory read on another stream is freed only after that read, for a
//    move_data input and for an export outliving its array (on the
//    simulation any use of freed memory is reported; on a GPU the freed
//    block is handed out again and filled at once);
//  - move_data under graph capture replays right; operations that allocate
//    refuse a capturing stream with a clear error and leave the capture valid.
// tests/gpu/simulated_streams_test.cpp checks what only the simulation sees.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/stream_fixture.hpp"

using namespace mtsarray_test;

namespace {

class NoHostBlock : public GpuStreamTest {};

INSTANTIATE_TEST_SUITE_P(AllStreams, NoHostBlock,
                         ::testing::Values(StreamKind::legacy, StreamKind::per_thread, StreamKind::user),
                         stream_kind_name);

}  // namespace

TEST_P(NoHostBlock, MoveDataReturnsWhileBothStreamsAreHeld) {
    auto input = device_array(iota(8 * 3, 1.0), {8, 3}, other_);
    auto output = device_array(std::vector<double>(4 * 3, 0.0), {4, 3}, stream_);
    const std::vector<mts_data_movement_t> movements = {{7, 0, 0, 0, 3}, {2, 3, 1, 1, 2}};
    expect_returns_while_held({{stream_, 0}, {other_, 0}},
                              [&] { ASSERT_EQ(move_data(output, input, movements), MTS_SUCCESS) << last_error(); },
                              "move_data");
    EXPECT_EQ(values_of(output), (std::vector<double>{22, 23, 24, 0, 0, 0, 0, 0, 0, 0, 8, 9}));
}

// New arrays work on the device's default stream (the legacy one), derived
// arrays on their prototype's stream: both held.
TEST_P(NoHostBlock, CreateZerosFullCopyAndSwapAxesReturnWhileHeld) {
    auto array = device_array(iota(6, 0.0), {2, 3}, stream_);
    std::unique_ptr<mtsarray::Array> created, zeros, full, copied, swapped;
    expect_returns_while_held({{stream_, 0}, {1, 0}},
                              [&] {
                                  mts_array_t made = {};
                                  const uintptr_t shape[] = {5};
                                  const auto& raw = array.get();
                                  ASSERT_EQ(raw.create(raw.ptr, shape, 1, scalar(2.5), &made), MTS_SUCCESS)
                                      << last_error();
                                  created = std::make_unique<mtsarray::Array>(made);
                                  zeros = std::make_unique<mtsarray::Array>(
                                      mtsarray::Array::zeros(gpu0, float64(), {1000}));
                                  full = std::make_unique<mtsarray::Array>(
                                      mtsarray::Array::full<double>(gpu0, {1000}, -1.0));
                                  copied = std::make_unique<mtsarray::Array>(array.copy(gpu0));
                                  swapped = std::make_unique<mtsarray::Array>(array.copy(gpu0));
                                  ASSERT_EQ(swapped->get().swap_axes(swapped->get().ptr, 0, 1), MTS_SUCCESS)
                                      << last_error();
                              },
                              "create, zeros, full, copy and swap_axes");
    ASSERT_NE(swapped, nullptr);
    EXPECT_EQ(created->stream(), stream_) << "create works on the prototype's stream";
    EXPECT_EQ(copied->stream(), stream_) << "a same-device copy keeps the work stream";
    EXPECT_EQ(values_of(*created), std::vector<double>(5, 2.5));
    EXPECT_EQ(values_of(*zeros), std::vector<double>(1000, 0.0));
    EXPECT_EQ(values_of(*full), std::vector<double>(1000, -1.0));
    EXPECT_EQ(values_of(*copied), iota(6, 0.0));
    EXPECT_EQ(values_of(*swapped), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST_P(NoHostBlock, CopiesToAnotherDeviceReturnWhileHeld) {
    if (driver().device_count() < 2) {
        GTEST_SKIP() << driver().name() << " has " << driver().device_count() << " device: no other device";
    }
    auto source = device_array(iota(6, 0.5), {2, 3}, stream_);
    std::unique_ptr<mtsarray::Array> copy;
    expect_returns_while_held({{stream_, 0}, {1, 1}},
                              [&] { copy = std::make_unique<mtsarray::Array>(source.copy(gpu1)); },
                              "a copy to another device");
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(values_of(*copy), iota(6, 0.5));
}

// The input is read on the output's stream, which is held: destroying the
// input must not let its memory be reused (by a new array filled on the
// input's stream) before that read has run.
TEST_P(NoHostBlock, AnInputReadOnAnotherStreamIsFreedAfterTheRead) {
    constexpr uintptr_t count = 1 << 16;
    // every array is made before a stream is held: new arrays start on the
    // legacy default stream, which may be the one held
    auto output = device_array(std::vector<double>(count, 0.0), {count, 1}, stream_);
    auto input = std::make_unique<mtsarray::Array>(device_array(std::vector<double>(count, 7.0), {count, 1}, other_));
    auto prototype = device_array({0.0}, {1}, other_);
    const auto all = whole_rows(count, 1);
    {
        auto hold = driver().hold(stream_, 0);
        ASSERT_EQ(move_data(output, *input, all), MTS_SUCCESS) << last_error();
        input.reset();  // destroyed while the read is still queued
        // same size, same stream: a pool hands the freed block back here
        // as soon as its free is complete in stream order
        mts_array_t reused = {};
        const uintptr_t shape[] = {count, 1};
        ASSERT_EQ(prototype.get().create(prototype.get().ptr, shape, 2, scalar(-3.0), &reused), MTS_SUCCESS)
            << last_error();
        mtsarray::Array reused_array(reused);
        let_misordered_work_run();
        EXPECT_TRUE(hold->running());
        hold->release();
        EXPECT_EQ(values_of(reused_array), std::vector<double>(count, -3.0));
    }
    EXPECT_EQ(values_of(output), std::vector<double>(count, 7.0))
        << "the input's memory was reused before the output's stream read it";
}

// An export is read on a default stream of the consumer's (held) and
// released before its array is gone: the memory stays until that read has
// run. (A default stream is the runtime's and never destroyed, so the
// release may name it; a stream the consumer made may be gone by then, and
// its reads are the consumer's to finish before the release.)
TEST_P(NoHostBlock, AnExportReadOnADefaultStreamKeepsItsMemory) {
    constexpr uintptr_t count = 1 << 16;
    const int64_t consumer = stream_ == 2 ? 1 : 2;  // a default stream, not the array's
    auto read = driver().host_buffer(count * sizeof(double));
    auto prototype = device_array({0.0}, {1}, stream_);
    auto array = std::make_unique<mtsarray::Array>(device_array(std::vector<double>(count, 5.0), {count}, stream_));
    {
        DLManagedTensorVersioned* tensor = nullptr;
        const auto& raw = array->get();
        ASSERT_EQ(raw.as_dlpack(raw.ptr, &tensor, gpu0, &consumer, dlpack_version()), MTS_SUCCESS) << last_error();
        auto hold = driver().hold(consumer, 0);
        driver().read_on_stream(consumer, 0, read.get(), tensor->dl_tensor.data, count * sizeof(double));
        tensor->deleter(tensor);  // the consumer is done queuing its reads
        array.reset();
        mts_array_t reused = {};
        const uintptr_t shape[] = {count};
        ASSERT_EQ(prototype.get().create(prototype.get().ptr, shape, 1, scalar(-4.0), &reused), MTS_SUCCESS)
            << last_error();
        mtsarray::Array reused_array(reused);
        let_misordered_work_run();
        EXPECT_TRUE(hold->running());
        hold->release();
        driver().synchronize_stream(consumer, 0);
        EXPECT_EQ(values_of(reused_array), std::vector<double>(count, -4.0));
    }
    const auto* values = static_cast<const double*>(read.get());
    EXPECT_EQ(std::vector<double>(values, values + count), std::vector<double>(count, 5.0))
        << "the export's memory was reused before the consumer stream read it";
}

// move_data captured in a graph (more movements than fit in one kernel's
// parameters) gives the right output at every replay, reading the input of
// that moment; the movements need not outlive the call. Operations that
// allocate refuse the capturing stream, queue nothing, and leave the
// capture valid.
TEST_P(NoHostBlock, MoveDataIsCapturedAndAllocatingOperationsAreRefused) {
    MTSARRAY_SKIP_UNLESS_CAPTURABLE();
    constexpr uintptr_t samples = 1000;
    auto input = device_array(std::vector<double>(samples * 4, 0.0), {samples, 4}, stream_);
    auto output = device_array(std::vector<double>(samples * 2, 0.0), {samples, 2}, stream_);
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < samples; i++) {
        // each into its own output sample; starts 0..2 and lengths 1..2 of 4
        movements.push_back({(i * 7) % samples, i, i % 3, 0, 1 + i % 2});
    }
    driver().synchronize_all();

    // refused: nothing is queued, and the capture stays valid
    const auto& in = input.get();
    std::vector<std::string> refusals;
    mts_array_t refused = {};
    const uintptr_t shape[] = {3};
    int destroyed = 0;
    auto fill = ForeignArray::make(float64(), {}, to_bytes(std::vector<double>{1.0}), &destroyed);
    driver().begin_capture(stream_, 0, CaptureMode::thread_local_mode);
    refusals.push_back(in.create(in.ptr, shape, 1, fill, &refused) == MTS_CALLBACK_ERROR ? last_error() : "");
    refusals.push_back(in.copy(in.ptr, gpu0, &refused) == MTS_CALLBACK_ERROR ? last_error() : "");
    refusals.push_back(in.swap_axes(in.ptr, 0, 1) == MTS_CALLBACK_ERROR ? last_error() : "");
    std::string why;
    auto nothing = driver().end_capture(stream_, 0, why);
    ASSERT_NE(nothing, nullptr) << "a refused operation invalidated the capture: " << why;
    EXPECT_EQ(nothing->nodes(), 0u) << "a refused operation queued work";
    for (const auto& refusal : refusals) {
        EXPECT_NE(refusal.find("can not be captured"), std::string::npos) << refusal;
    }
    EXPECT_EQ(destroyed, 1) << "create takes its fill value, also when it fails";
    EXPECT_EQ(refused.ptr, nullptr);
    EXPECT_EQ(input.shape(), (std::vector<uintptr_t>{samples, 4}));

    // captured: the movements need not outlive the call
    driver().begin_capture(stream_, 0, CaptureMode::thread_local_mode);
    auto passed = movements;
    const auto captured = move_data(output, input, passed);
    const std::string capture_error = captured == MTS_SUCCESS ? "" : last_error();
    std::fill(passed.begin(), passed.end(), mts_data_movement_t{0, 0, 0, 0, 1});
    auto graph = driver().end_capture(stream_, 0, why);
    ASSERT_EQ(captured, MTS_SUCCESS) << capture_error;
    ASSERT_NE(graph, nullptr) << why;
    EXPECT_EQ(values_of(output), std::vector<double>(samples * 2, 0.0)) << "captured work must not run";

    for (int replay = 0; replay < 3; replay++) {
        const auto values = iota(samples * 4, 1000.0 * replay);
        auto fresh = device_array(values, {samples, 4}, stream_);
        const auto all = whole_rows(samples, 4);
        ASSERT_EQ(move_data(input, fresh, all), MTS_SUCCESS) << last_error();
        graph->replay(stream_, 0);
        EXPECT_EQ(values_of(output), moved(std::vector<double>(samples * 2, 0.0), values, 4, 2, movements))
            << "replay " << replay;
    }
}
