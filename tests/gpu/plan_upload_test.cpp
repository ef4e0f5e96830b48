// A prepared plan's table is uploaded on the stream the plan was made on;
// an execution on any other stream waits for that upload on the device. On
// the simulated runtime, with the upload held back by a slow kernel on the
// plan's stream and the execution queued at once on a non-blocking stream
// that nothing else orders after it: the values must be the reference's.
// A kernel that read the table before its upload would read the pool's
// poison as offsets and crash, so the execution runs in a child process
// (a death test, re-executed: the simulation has threads), which exits 0
// only when the values are right.

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "mtsarray.h"
#include "support/backends.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};

/// The execution on another stream than the plan's, with the upload held
/// back: whether the output holds the reference's values.
bool execution_waits_for_the_upload() {
    constexpr size_t rows = 300;  // a table on the device, not in the kernel's parameters
    constexpr size_t properties = 3;
    const int64_t plan_stream = sim::create_stream(0);
    const int64_t work_stream = sim::create_stream(0);
    std::vector<double> values(rows * properties);
    for (size_t i = 0; i < values.size(); i++) {
        values[i] = 0.5 + static_cast<double>(i);
    }
    auto input = array_from_bytes(gpu0, float64(), {rows, properties}, to_bytes(values));
    auto output = mtsarray::Array::full<double>(gpu0, {rows, properties}, -1.0);
    auto template_output = mtsarray::Array::full<double>(gpu0, {rows, properties}, -1.0);
    input.set_stream(work_stream);
    output.set_stream(work_stream);
    template_output.set_stream(plan_stream);
    std::vector<mts_data_movement_t> movements(rows);
    std::vector<double> expected(rows * properties, -1.0);
    for (size_t i = 0; i < rows; i++) {
        movements[i] = {(i * 17) % rows, i, 1, 0, 2};
        for (size_t x = 0; x < 2; x++) {
            expected[i * properties + x] = values[((i * 17) % rows) * properties + 1 + x];
        }
    }
    sim::drain();

    auto gate = sim::hold(plan_stream, 0);  // the upload waits behind it
    mtsarray_move_plan_t* plan = nullptr;
    if (mtsarray_move_plan_create(&template_output.get(), &input.get(), movements.data(), rows, &plan) !=
        MTS_SUCCESS) {
        return false;
    }
    const bool executed = mtsarray_move_plan_execute(plan, &output.get(), &input.get()) == MTS_SUCCESS;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a kernel not waiting runs now
    gate.open();
    mtsarray_move_plan_free(plan);
    const bool right = executed && from_bytes<double>(read_bytes(output)) == expected;
    sim::drain();
    return right;
}

}  // namespace

TEST(PlanUpload, AnExecutionOnAnotherStreamWaitsForTheUpload) {
    ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(execution_waits_for_the_upload() ? 0 : 3), ::testing::ExitedWithCode(0), "")
        << "the execution read the plan's table before its upload (exit code 3: wrong values; a signal: it "
           "crashed on the table's unfilled memory)";
}
