#pragma once
// Test-only fault injection. The backends and Buffer call
// `fault_injection::check("<point>")` before each allocation and before each
// runtime call that can fail. In a normal build (MTSARRAY_TEST_HOOKS
// undefined) the call is an empty inline function and the release library
// carries nothing of this. With -DMTSARRAY_TEST_HOOKS=ON the library
// exports mtsarray_test_fail_after() (tests/support/test_hooks_api.h): once
// armed with k, the first k checks pass and the next one throws
// OutOfMemory ("allocate" points) or Error (every other point), once; then
// the hook disarms itself. Tests sweep k over every fault point of an
// operation to prove that each failure gives a clear error, leaves the
// inputs untouched and leaks nothing.

#include <cstdint>

namespace mtsarray::detail {
namespace fault_injection {

#if defined(MTSARRAY_TEST_HOOKS) && MTSARRAY_TEST_HOOKS
/// Throws when the armed counter says this point must fail.
void check(const char* point);
/// Arms the hook for `k` passing checks (k < 0 disarms); returns the number
/// of checks reached since the previous call.
int64_t arm(int64_t k) noexcept;
/// Faults injected since the program started.
int64_t injected_count() noexcept;
#else
inline void check(const char*) noexcept {}
#endif

}  // namespace fault_injection
}  // namespace mtsarray::detail
