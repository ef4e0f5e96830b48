// Compiled only when MTSARRAY_TEST_HOOKS is ON (cmake/sanitizers.cmake).
// See fault_injection.hpp; test_hooks.cpp exports the controls.

#include "base/fault_injection.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/error.hpp"

namespace mtsarray::detail {
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

int64_t arm(int64_t k) noexcept {
    remaining.store(k < 0 ? -1 : k, std::memory_order_relaxed);
    return points_seen.exchange(0, std::memory_order_relaxed);
}

int64_t injected_count() noexcept {
    return injected.load(std::memory_order_relaxed);
}

}  // namespace fault_injection
}  // namespace mtsarray::detail
