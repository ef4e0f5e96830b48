// Compiled only when MTSARRAY_FAULT_INJECTION is ON (cmake/sanitizers.cmake).
// See fault_injection.hpp; the test-side declarations are in
// tests/fault_injection_api.h.

#include "fault_injection.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "error.hpp"
#include "mtsarray.h"

namespace mtsarray {
namespace fault_injection {

namespace {

// < 0: disarmed. Otherwise the number of checks that still pass before one
// fails. Process-wide: the tests that arm it run one operation at a time.
std::atomic<int64_t> remaining{-1};
std::atomic<int64_t> points_seen{0};
std::atomic<int64_t> injected{0};

}  // namespace

void check(const char* point) {
    points_seen.fetch_add(1, std::memory_order_relaxed);
    int64_t current = remaining.load(std::memory_order_relaxed);
    while (current >= 0) {
        // current == 0: this check fails and disarms the hook
        if (remaining.compare_exchange_weak(current, current - 1, std::memory_order_relaxed)) {
            if (current != 0) {
                return;
            }
            injected.fetch_add(1, std::memory_order_relaxed);
            const std::string message = std::string("injected fault at '") + point + "'";
            if (std::strcmp(point, "allocate") == 0) {
                throw OutOfMemory(message);
            }
            throw Error(message);
        }
    }
}

}  // namespace fault_injection
}  // namespace mtsarray

extern "C" {

MTSARRAY_EXPORT int64_t mtsarray_test_fail_after(int64_t k) {
    using namespace mtsarray::fault_injection;
    remaining.store(k < 0 ? -1 : k, std::memory_order_relaxed);
    return points_seen.exchange(0, std::memory_order_relaxed);
}

MTSARRAY_EXPORT int64_t mtsarray_test_faults_injected(void) {
    return mtsarray::fault_injection::injected.load(std::memory_order_relaxed);
}

}  // extern "C"
