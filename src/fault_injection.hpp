#pragma once
// Test-only fault injection. The backends and Buffer call
// `fault_injection::check("<point>")` before each allocation and before each
// runtime call that can fail. In a normal build (MTSARRAY_FAULT_INJECTION
// undefined) the call is an empty inline function and the release library
// carries nothing of this. With -DMTSARRAY_FAULT_INJECTION=ON the library
// exports mtsarray_test_fail_after() (tests/fault_injection_api.h): once
// armed with k, the first k checks pass and the next one throws
// OutOfMemory ("allocate" points) or Error (every other point), once; then
// the hook disarms itself. Tests sweep k over every fault point of an
// operation to prove that each failure gives a clear error, leaves the
// inputs untouched and leaks nothing.

namespace mtsarray {
namespace fault_injection {

#if defined(MTSARRAY_FAULT_INJECTION) && MTSARRAY_FAULT_INJECTION
/// Throws when the armed counter says this point must fail.
void check(const char* point);
#else
inline void check(const char*) noexcept {}
#endif

}  // namespace fault_injection
}  // namespace mtsarray
