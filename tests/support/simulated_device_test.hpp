#pragma once
// The fixture of the tests that run only on the simulated runtime
// (support/simulated_runtime.hpp): each starts with every stream idle and
// ends the same way, with nothing reported by the simulation (a use of
// freed memory, a host wait that timed out, a destroyed stream named
// again: sim::violations()).

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/simulated_runtime.hpp"

namespace mtsarray_test {

/// The simulation's reports, one a line, for a failure message.
inline std::string lines(const std::vector<std::string>& texts) {
    std::string text;
    for (const auto& line : texts) {
        text += "\n  " + line;
    }
    return text;
}

class SimulatedDeviceTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
        sim::drain();
        sim::clear_violations();
    }
    void TearDown() override {
        sim::drain();
        EXPECT_TRUE(sim::violations().empty()) << lines(sim::violations());
        sim::clear_violations();
    }
};

}  // namespace mtsarray_test
