// Leak check for every test of the executables that link this file: in a
// build with the test hooks (-DMTSARRAY_TEST_HOOKS=ON: the sanitizer builds
// of scripts/sanitizers.sh), a test fails when it ends with more or fewer
// live mtsarray arrays than it started with. LeakSanitizer alone can miss an
// array that an error path forgot, when something still points at it; this
// count can not.

#include <gtest/gtest.h>

#if defined(MTSARRAY_TEST_HOOKS) && MTSARRAY_TEST_HOOKS

#include <cstdint>

#include "support/test_hooks_api.h"

namespace {

class LiveArrayCheck : public ::testing::EmptyTestEventListener {
    void OnTestStart(const ::testing::TestInfo&) override { before_ = mtsarray_test_live_arrays(); }

    // gtest calls the OnTestEnd of later listeners first, so the failure
    // added here is part of the test's result when the printer reports it
    void OnTestEnd(const ::testing::TestInfo&) override {
        const int64_t after = mtsarray_test_live_arrays();
        if (after != before_) {
            ADD_FAILURE() << "the test started with " << before_ << " live mtsarray arrays and ended with "
                          << after << ": an array leaked (or was destroyed twice)";
        }
    }

    int64_t before_ = 0;
};

const bool installed = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new LiveArrayCheck());
    return true;
}();

}  // namespace

#endif
