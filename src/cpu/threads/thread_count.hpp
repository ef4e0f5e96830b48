#pragma once
// How many threads host-memory work may use at once, the calling thread
// included. Decided once, in this order: set_thread_count() (the C API's
// mtsarray_set_num_threads), else MTSARRAY_NUM_THREADS, else
// OMP_NUM_THREADS (its first entry: "8,2" is 8), else the CPUs in the
// process's affinity mask. The environment is read the first time the count
// is needed; set_thread_count() may change it at any time.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mtsarray::detail::cpu {

/// The most threads mtsarray accepts (a typo guard: 10^6 threads would not
/// help anyone and could exhaust the process).
constexpr int64_t max_thread_count = 4096;

/// The count once decided (> 0), else 0 (or -1 for an invalid environment).
extern std::atomic<int64_t> decided_thread_count;

/// Decides the count (slow path of thread_count()).
size_t decide_thread_count();

/// The thread count, >= 1. Throws Error naming the variable and its value
/// when the count comes from an environment variable that is not a whole
/// number in [1, max_thread_count], until set_thread_count() replaces it:
/// every host data operation reports it first
/// (operations/host_thread_count.hpp). One atomic load once decided.
inline size_t thread_count() {
    const int64_t count = decided_thread_count.load(std::memory_order_acquire);
    return count > 0 ? static_cast<size_t>(count) : decide_thread_count();
}

/// The threads host work may be split between: thread_count(), or 1 while
/// the count is invalid. For the code below the operations, which have
/// reported an invalid count before they got here.
size_t usable_thread_count() noexcept;

/// Whether the thread count is known: thread_count() then neither throws
/// nor decides anything (one atomic load).
inline bool thread_count_decided() noexcept {
    return decided_thread_count.load(std::memory_order_acquire) > 0;
}

/// Uses `count` threads from now on (operations already running keep the
/// count they started with). Throws Error unless 1 <= count <=
/// max_thread_count. Thread-safe.
void set_thread_count(int64_t count);

/// The count an environment variable's value asks for; throws Error naming
/// `variable` when `value` is not a whole number in [1, max_thread_count].
/// Blanks around the number are ignored; for OMP_NUM_THREADS only the first
/// entry of a comma-separated list counts (the outermost nesting level).
size_t parse_thread_count(const char* variable, const std::string& value);

/// The CPUs this process may run on (its affinity mask), at least 1.
size_t affinity_cpu_count() noexcept;

/// Tests only: forgets the count so that the next thread_count() reads the
/// environment again.
void reset_thread_count_for_testing() noexcept;

}  // namespace mtsarray::detail::cpu
