// The runtime's error state as the GPU backend meets it, on the simulated
// runtime (its rules: tests/support/simulation/faults.cpp):
//
//  - the last error of a thread is whatever an earlier call left there
//    (ROCm keeps a not-ready event query): a launch reads it just before,
//    so that the error it reports after is its own;
//  - after a sticky fault (an illegal address in anyone's kernel) every
//    runtime call fails with it: one clear error naming the fault, every
//    later call failing fast with it, and no retry loop burying it.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/backend.hpp"
#include "base/stream.hpp"
#include "core/backend_registry.hpp"
#include "gpu/runtime_error.hpp"
#include "support/backends.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;
using mtsarray::detail::Stream;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};
constexpr DLDevice gpu1 = {kDLCUDA, 1};

/// The simulation follows `flavour`'s error rules for its lifetime.
class FlavourScope {
public:
    explicit FlavourScope(sim::Flavour flavour) : previous_(sim::set_flavour(flavour)) {}
    ~FlavourScope() { sim::set_flavour(previous_); }

private:
    sim::Flavour previous_;
};

}  // namespace

// ---- the last error ----------------------------------------------------------------------

// A release queried while its stream is busy (not ready: ROCm keeps it as
// the last error), then launches of every kernel the backend checks: fill,
// move_data with its table in the parameters and in device memory, a
// prepared plan, a strided copy. Each must succeed and move the values.
TEST(LastError, ALaunchReportsItsOwnErrorAndNoEarlierOne) {
    ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
    FlavourScope hip(sim::Flavour::hip);
    const auto& backend = mtsarray::detail::memory_backend(kDLCUDA);
    const int64_t number = sim::create_stream(0);
    const Stream stream = Stream::parse(gpu0, number);
    constexpr size_t rows = 300;
    const size_t bytes = rows * 2 * sizeof(double);
    void* input = backend.allocate(stream, bytes);
    void* output = backend.allocate(stream, bytes);
    std::vector<double> values(rows * 2);
    for (size_t i = 0; i < values.size(); i++) {
        values[i] = 0.25 * static_cast<double>(i);
    }
    backend.copy_from_host(stream, input, values.data(), bytes);
    std::vector<mts_data_movement_t> movements(rows);
    for (size_t i = 0; i < rows; i++) {
        movements[i] = {(i * 11) % rows, i, 0, 1, 1};
    }
    const mtsarray::detail::Shape shape = {rows, 2};
    const mtsarray::detail::MovePlan long_plan(shape, shape, sizeof(double), movements.data(), rows);
    const mtsarray::detail::MovePlan short_plan(shape, shape, sizeof(double), movements.data(), 20);
    std::vector<mts_data_movement_t> kept(rows);
    mtsarray::detail::SampleReach reach;
    const auto prepared = backend.prepare_move_plan(stream, long_plan, kept.data(), reach);
    ASSERT_NE(prepared, nullptr);
    backend.synchronize(stream);

    const std::vector<std::pair<std::string, std::function<void()>>> launches = {
        {"fill", [&] { const double value = 1.5; backend.fill(stream, output, rows * 2, &value, sizeof(value)); }},
        {"move_data (table in the parameters)", [&] { backend.move_data(stream, output, input, stream, short_plan); }},
        {"move_data (table on the device)", [&] { backend.move_data(stream, output, input, stream, long_plan); }},
        {"move plan", [&] { ASSERT_TRUE(backend.execute_move_plan(stream, output, input, stream, *prepared)); }},
        {"strided_copy",
         [&] {
             // the [rows, 2] input read as its transpose [2, rows]
             const mtsarray::detail::StridedView transposed{input, {2, rows}, {1, 2}, sizeof(double)};
             backend.strided_copy(stream, output, transposed);
         }},
    };
    for (const auto& launch : launches) {
        SCOPED_TRACE(launch.first);
        {
            auto gate = sim::hold(number, 0);
            // queried while the stream is held: not ready
            backend.release_after(stream, [] {});
            EXPECT_NO_THROW(launch.second());
        }
        backend.synchronize(stream);
    }
    std::vector<double> read(rows * 2);
    backend.copy_to_host(stream, read.data(), output, bytes);
    backend.synchronize(stream);
    for (size_t i = 0; i < rows; i++) {  // the transpose, last
        ASSERT_EQ(read[i], values[2 * i]) << i;
        ASSERT_EQ(read[rows + i], values[2 * i + 1]) << i;
    }
    backend.deallocate(stream, input, bytes);
    backend.deallocate(stream, output, bytes);
    sim::drain();
    sim::destroy_stream(number);
}

// ---- device faults -----------------------------------------------------------------------

namespace {

/// A sticky fault of device 0 for the scope's lifetime, forgotten after
/// (as in a new process).
class FaultScope {
public:
    FaultScope() { sim::inject_fault(0); }
    ~FaultScope() {
        sim::clear_fault();
        sim::drain();
    }
};

size_t occurrences(const std::string& text, const std::string& word) {
    size_t count = 0;
    for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + word.size())) {
        count++;
    }
    return count;
}

}  // namespace

// A release waits on the deferred-work thread for a stream held by a slow
// kernel; another kernel faults the device meanwhile. The wait meets the
// fault: it is reported once, not retried; every later call fails at once
// with a message naming the fault, and arrays destroyed then say nothing.
TEST(DeviceFault, OneClearErrorThenEveryCallFailsFastAndNothingRetries) {
    ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
    const auto& backend = mtsarray::detail::memory_backend(kDLCUDA);
    const int64_t number = sim::create_stream(0);
    const Stream stream = Stream::parse(gpu0, number);
    auto array = std::make_unique<mtsarray::Array>(mtsarray::Array::full<double>(gpu0, {16}, 1.0));
    array->set_stream(number);
    sim::drain();
    std::atomic<bool> released{false};
    {
        auto gate = sim::hold(number, 0);
        backend.release_after(stream, [&released] { released = true; });  // waits on the deferred thread
        ::testing::internal::CaptureStderr();
        {
            FaultScope fault;
            gate.open();
            std::this_thread::sleep_for(std::chrono::milliseconds(300));  // 30 retries at 10 ms
            std::string error;
            const auto start = std::chrono::steady_clock::now();
            const mts_array_t& raw = array->get();
            mts_array_t copy = {};
            if (raw.copy(raw.ptr, gpu0, &copy) == MTS_SUCCESS) {
                copy.destroy(copy.ptr);
                ADD_FAILURE() << "a copy on the faulted device succeeded";
            }
            error = last_error();
            const auto elapsed = std::chrono::steady_clock::now() - start;
            EXPECT_NE(error.find("cudaErrorIllegalAddress"), std::string::npos) << error;
            EXPECT_NE(error.find("fault"), std::string::npos) << error;
            EXPECT_LT(elapsed, std::chrono::milliseconds(100)) << "the call did not fail fast";
            for (int call = 0; call < 3; call++) {
                EXPECT_EQ(raw.copy(raw.ptr, gpu0, &copy), MTS_CALLBACK_ERROR);
                EXPECT_NE(last_error().find("had a fault earlier in this process"), std::string::npos)
                    << last_error();
            }
            array.reset();  // its free meets the fault: nothing more is said
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        const std::string printed = ::testing::internal::GetCapturedStderr();
        EXPECT_EQ(occurrences(printed, "will retry"), 0u) << printed;
        EXPECT_LE(occurrences(printed, "cudaErrorIllegalAddress"), 1u) << printed;
        EXPECT_FALSE(released.load()) << "memory went back to its owner while the device may still use it";
    }
    sim::destroy_stream(number);
}

// The process-fatal errors that are no kernel's fault (the MPS server
// terminated this client; a device outside CUDA signalled an error) are
// faults too: one clear error naming them, then every call fails fast, and
// a pending release is not retried.
TEST(DeviceFault, ProcessFatalErrorsOtherThanAKernelFaultAreFaultsToo) {
    ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
    const auto& backend = mtsarray::detail::memory_backend(kDLCUDA);
    for (const auto& [status, name] : {std::pair<sim::Status, std::string>{sim::Status::mps_client_terminated,
                                                                           "cudaErrorMpsClientTerminated"},
                                       {sim::Status::external_device, "cudaErrorExternalDevice"}}) {
        SCOPED_TRACE(name);
        const int64_t number = sim::create_stream(0);
        const Stream stream = Stream::parse(gpu0, number);
        auto array = std::make_unique<mtsarray::Array>(mtsarray::Array::full<double>(gpu0, {16}, 1.0));
        array->set_stream(number);
        sim::drain();
        std::atomic<bool> released{false};
        {
            auto gate = sim::hold(number, 0);
            backend.release_after(stream, [&released] { released = true; });
            ::testing::internal::CaptureStderr();
            sim::inject_fault(0, status);
            gate.open();
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // 20 retries at 10 ms, if any
            const mts_array_t& raw = array->get();
            mts_array_t copy = {};
            EXPECT_EQ(raw.copy(raw.ptr, gpu0, &copy), MTS_CALLBACK_ERROR);
            EXPECT_NE(last_error().find(name), std::string::npos) << last_error();
            EXPECT_EQ(raw.copy(raw.ptr, gpu0, &copy), MTS_CALLBACK_ERROR);
            EXPECT_NE(last_error().find("had a fault earlier in this process"), std::string::npos) << last_error();
            array.reset();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            const std::string printed = ::testing::internal::GetCapturedStderr();
            EXPECT_EQ(occurrences(printed, "will retry"), 0u) << printed;
            EXPECT_FALSE(released.load()) << "memory went back to its owner while the device may still use it";
            sim::clear_fault();
            sim::drain();
        }
        sim::destroy_stream(number);
    }
}

// A wait of the deferred-work thread that keeps failing with an error that
// is not a fault (here every call of the device fails with
// cudaErrorInvalidValue) is retried every 10 ms, never skipped, but
// reported on a bounded number of lines: the first failure, then at
// doubling counts (2, 4, 8, ...). Once the device answers, the release is
// made.
TEST(DeferredRelease, AWaitThatKeepsFailingIsReportedOnAFewLinesNotAtEveryRetry) {
    ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
    const auto& backend = mtsarray::detail::memory_backend(kDLCUDA);
    // the device set up first: its set-up loads the kernels, a host wait for
    // the whole device, which the held stream below would never let end
    (void)mtsarray::Array::full<double>(gpu0, {1}, 0.0);
    sim::drain();
    const int64_t number = sim::create_stream(0);
    const Stream stream = Stream::parse(gpu0, number);
    std::atomic<bool> released{false};
    {
        auto gate = sim::hold(number, 0);
        backend.release_after(stream, [&released] { released = true; });
        ::testing::internal::CaptureStderr();
        sim::inject_fault(0, sim::Status::invalid_value);
        gate.open();
        // at most 50 retries: log2(50) + 1 lines at most, however fast the machine
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        sim::clear_fault();
        const auto start = std::chrono::steady_clock::now();
        while (!released.load() && std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        const std::string printed = ::testing::internal::GetCapturedStderr();
        const size_t lines = occurrences(printed, "will retry");
        EXPECT_GE(lines, 1u) << "the first failure is reported";
        EXPECT_LE(lines, 6u) << printed;
        EXPECT_NE(printed.find("cudaErrorInvalidValue"), std::string::npos) << printed;
        EXPECT_TRUE(released.load()) << "the release was not made once the device answered";
    }
    sim::drain();
    sim::destroy_stream(number);
}

// A fault is the process's, not its device's: once a call on device 0 met
// one, calls on device 1 fail with it too (the runtime asks for the process
// to end), although the simulation, like a real GPU, would still run them.
// The device count does not change; backend_available says false.
TEST(DeviceFault, AFaultOnOneDeviceFailsTheCallsOnEveryDevice) {
    ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
    if (sim::device_count() < 2) {
        GTEST_SKIP() << "one simulated device (MTSARRAY_SIM_DEVICES=1): there is no other device to fail";
    }
    int32_t devices = 0;
    ASSERT_EQ(mtsarray_device_count(kDLCUDA, &devices), MTS_SUCCESS) << last_error();
    auto array = std::make_unique<mtsarray::Array>(mtsarray::Array::full<double>(gpu1, {16}, 1.0));
    sim::drain();
    ::testing::internal::CaptureStderr();
    {
        FaultScope fault;  // on device 0
        try {
            (void)mtsarray::Array::full<double>(gpu0, {16}, 2.0);
            ADD_FAILURE() << "an array was made on the faulted device";
        } catch (const mtsarray::Error& error) {
            EXPECT_NE(std::string(error.what()).find("cudaErrorIllegalAddress"), std::string::npos) << error.what();
        }
        const mts_array_t& raw = array->get();
        mts_array_t copy = {};
        if (raw.copy(raw.ptr, gpu1, &copy) == MTS_SUCCESS) {
            copy.destroy(copy.ptr);
            ADD_FAILURE() << "a copy on device 1 succeeded after device 0's fault";
        } else {
            EXPECT_NE(last_error().find("had a fault earlier in this process"), std::string::npos) << last_error();
            EXPECT_NE(last_error().find("cudaErrorIllegalAddress"), std::string::npos) << last_error();
        }
        int32_t count = -1;
        ASSERT_EQ(mtsarray_device_count(kDLCUDA, &count), MTS_SUCCESS) << last_error();
        EXPECT_EQ(count, devices);
        bool available = true;
        ASSERT_EQ(mtsarray_backend_available(kDLCUDA, &available), MTS_SUCCESS);
        EXPECT_FALSE(available);
        array.reset();  // its free meets the fault: nothing more is said
    }
    (void)::testing::internal::GetCapturedStderr();
}

// Two calls meet sticky faults one after the other (a call that was under
// way when the device faulted reports it after the first): the error of
// every later call names the first fault, the one that broke the device,
// never the later one, whichever way the later one was checked.
TEST(DeviceFault, LaterCallsNameTheFirstFaultAfterAnotherOne) {
    ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
    using mtsarray::detail::DeviceFault;
    namespace gpu = mtsarray::detail::gpu;
    FaultScope fault;
    EXPECT_THROW(gpu::check<SimulatedErrors>(sim::Status::illegal_address, "the first faulting call", "first.cpp", 1),
                 DeviceFault);
    EXPECT_THROW(
        gpu::check<SimulatedErrors>(sim::Status::illegal_address, "a second faulting call", "second.cpp", 2),
        DeviceFault);
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(gpu::check_nothrow<SimulatedErrors>(sim::Status::illegal_address, "a third faulting call",
                                                     "third.cpp", 3));
    (void)::testing::internal::GetCapturedStderr();
    mts_array_t array = {};
    const uintptr_t shape[1] = {4};
    EXPECT_EQ(mtsarray_zeros(gpu0, float64(), shape, 1, &array), MTS_CALLBACK_ERROR);
    const std::string error = last_error();
    EXPECT_NE(error.find("had a fault earlier in this process"), std::string::npos) << error;
    EXPECT_NE(error.find("first.cpp:1: the first faulting call failed"), std::string::npos)
        << "the message does not name the first fault: " << error;
    EXPECT_EQ(error.find("second"), std::string::npos) << error;
    EXPECT_EQ(error.find("third"), std::string::npos) << error;
}
