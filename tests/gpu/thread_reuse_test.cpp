// Threads that come and go, as a training loop's data-loading workers do,
// on the simulated runtime (its rule: a thread's id may be an exited
// thread's, tests/support/simulation/streams.cpp). The per-thread default
// stream (2) of an exited thread still runs what it queued; a later thread
// that happens to get the same id is not its owner:
//
//  - an array working on the exited thread's stream 2, destroyed by a later
//    thread, is freed after the work queued there;
//  - a prepared plan executed on the exited thread's stream 2 and on a later
//    thread's keeps its table until both executions have run.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"
#include "support/simulated_device_test.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};

/// Time for work wrongly not ordered behind a held stream to run.
void let_misordered_work_run() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

std::vector<double> iota(size_t count, double first) {
    std::vector<double> values(count);
    for (size_t i = 0; i < count; i++) {
        values[i] = first + static_cast<double>(i);
    }
    return values;
}

class ThreadReuse : public SimulatedDeviceTest {
protected:
    /// The plan test's arrays and executions, on the user's stream `user`.
    void executions_on_two_threads_of_one_id(int64_t user);
};

}  // namespace

TEST_F(ThreadReuse, AnArrayOfAnExitedThreadsStreamIsFreedAfterItsWork) {
    std::unique_ptr<mtsarray::Array> array;
    std::vector<double> read(4, 0.0);
    sim::Gate gate;
    std::thread::id first;
    std::thread([&] {
        first = std::this_thread::get_id();
        array = std::make_unique<mtsarray::Array>(array_from_bytes(gpu0, float64(), {4}, to_bytes(iota(4, 1.0))));
        array->set_stream(2);  // this thread's per-thread stream
        gate = sim::hold(2, 0);
        sim::enqueue_read(2, 0, read.data(), array->data(), 4 * sizeof(double));
    }).join();
    // the owner has gone; its stream still holds the read
    ASSERT_TRUE(sim::run_on_a_thread_with_id(first, [&] { array.reset(); }))
        << "no new thread got the exited thread's id";
    let_misordered_work_run();
    gate.open();
    sim::drain();
    EXPECT_EQ(read, iota(4, 1.0));
}

TEST_F(ThreadReuse, APlanExecutedOnTwoThreadsOfOneIdKeepsItsTableForBoth) {
    // a non-blocking stream of the user's: nothing the test queues runs on
    // the legacy stream, which would order every per-thread stream after the
    // held one (and hide a table freed too early)
    const int64_t user = sim::create_stream(0);
    executions_on_two_threads_of_one_id(user);
    sim::drain();
    sim::destroy_stream(user);
}

void ThreadReuse::executions_on_two_threads_of_one_id(int64_t user) {
    constexpr size_t rows = 300;  // a table in device memory
    auto input = array_from_bytes(gpu0, float64(), {rows, 2}, to_bytes(iota(rows * 2, 0.5)));
    auto first_output = mtsarray::Array::full<double>(gpu0, {rows, 2}, -1.0);
    auto second_output = mtsarray::Array::full<double>(gpu0, {rows, 2}, -1.0);
    std::vector<mts_data_movement_t> movements(rows);
    std::vector<double> expected(rows * 2, -1.0);
    const auto values = iota(rows * 2, 0.5);
    for (size_t i = 0; i < rows; i++) {
        movements[i] = {(i * 13) % rows, i, 0, 1, 1};
        expected[2 * i + 1] = values[2 * ((i * 13) % rows)];
    }
    for (auto* array : {&input, &first_output, &second_output}) {
        array->set_stream(user);
    }
    auto plan = std::make_unique<mtsarray::MovePlan>(first_output, input.get(), movements.data(), rows);
    sim::drain();  // the table is on the device

    sim::Gate gate;
    std::thread::id first;
    std::vector<double> first_read(rows * 2, 0.0);
    std::thread([&] {
        first = std::this_thread::get_id();
        first_output.set_stream(2);
        gate = sim::hold(2, 0);
        plan->execute(first_output, input);  // behind the gate
        sim::enqueue_read(2, 0, first_read.data(), first_output.data(), rows * 2 * sizeof(double));
    }).join();
    ASSERT_TRUE(sim::run_on_a_thread_with_id(first, [&] {
        second_output.set_stream(2);  // this thread's own
        plan->execute(second_output, input);
        second_output.set_stream(user);
    })) << "no new thread got the exited thread's id";
    plan.reset();
    let_misordered_work_run();
    gate.open();
    sim::drain();
    EXPECT_EQ(from_bytes<double>(read_bytes(second_output)), expected);
    EXPECT_EQ(first_read, expected);
}
