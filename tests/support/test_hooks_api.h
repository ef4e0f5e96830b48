#ifndef MTSARRAY_TEST_HOOKS_API_H
#define MTSARRAY_TEST_HOOKS_API_H
/*
 * Test-only API of a library built with -DMTSARRAY_TEST_HOOKS=ON
 * (src/base/fault_injection.hpp). Not installed, not part of mtsarray.h, and
 * these symbols do not exist in a normal build.
 */

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Arms the hook: the next `k` fault points (allocations and fallible runtime
 * calls) pass and the one after fails once with an "injected fault at
 * '<point>'" error, then the hook disarms itself. `k < 0` disarms it.
 * Returns the number of fault points reached since the previous call.
 */
int64_t mtsarray_test_fail_after(int64_t k);

/** Total number of faults injected since the program started. */
int64_t mtsarray_test_faults_injected(void);

/**
 * Number of mtsarray arrays alive in the process (made and not yet
 * destroyed). Leak checks compare it before and after a test.
 */
int64_t mtsarray_test_live_arrays(void);

#ifdef __cplusplus
}
#endif

#endif /* MTSARRAY_TEST_HOOKS_API_H */
