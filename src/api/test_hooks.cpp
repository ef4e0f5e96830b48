// The test-only C entry points of a -DMTSARRAY_TEST_HOOKS=ON build
// (declared for the tests in tests/support/test_hooks_api.h; never in a release
// library): the fault injection controls and the live-array count that the
// leak checks of the test suites compare before and after each test.

#include <cstdint>

#include "core/handle_registry.hpp"
#include "base/fault_injection.hpp"
#include "mtsarray.h"

extern "C" {

MTSARRAY_EXPORT int64_t mtsarray_test_fail_after(int64_t k) {
    return mtsarray::detail::fault_injection::arm(k);
}

MTSARRAY_EXPORT int64_t mtsarray_test_faults_injected(void) {
    return mtsarray::detail::fault_injection::injected_count();
}

MTSARRAY_EXPORT int64_t mtsarray_test_live_arrays(void) {
    return static_cast<int64_t>(mtsarray::detail::live_array_count());
}

}  // extern "C"
