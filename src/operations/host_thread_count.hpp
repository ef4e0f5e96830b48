#pragma once
// The one rule for an invalid host thread count (MTSARRAY_NUM_THREADS or
// OMP_NUM_THREADS, the one in use, is not a whole number in [1, 4096], and
// mtsarray_set_num_threads has not set a count since): every operation that
// reads or writes the elements of an array in host-accessible memory fails
// with the error naming the variable, whatever its size -- no element, no
// movement. Each such operation calls check_host_thread_count() first,
// before it checks anything else and before any path of its own can return;
// the CPU backend below never asks again (cpu::usable_thread_count() splits
// its work as one thread would when the count is invalid), so no path can
// pass a bad count by returning early.

#include <metatensor.h>

#include "base/device.hpp"
#include "cpu/threads/thread_count.hpp"

namespace mtsarray::detail {

/// Throws Error naming the environment variable when the thread count is
/// invalid. One atomic load once the count is known (executions of small
/// movement plans call it every time).
inline void check_host_thread_count() {
    if (!cpu::thread_count_decided()) {
        (void)cpu::decide_thread_count();  // throws the environment's error
    }
}

/// check_host_thread_count() when one of `devices` is host-accessible
/// memory (the CPU, pinned or managed memory). The devices are only looked
/// at while the count is not known to be valid: once it is, this is one
/// atomic load, like the check it replaces in the hot paths.
template <typename... Devices>
void check_host_thread_count(Devices... devices) {
    if (!cpu::thread_count_decided() && (is_host_accessible(devices.device_type) || ...)) {
        (void)cpu::decide_thread_count();  // throws the environment's error
    }
}

}  // namespace mtsarray::detail
