#pragma once
// What the CPU rows of mtsarray-bench share: arrays with values, host
// buffers, mtsarray's thread count (read, and set for one case), and the
// limits mtsarray is held to --
// memcpy / memset of the same bytes on as many threads as mtsarray uses,
// run by a HostTeam whose threads wait for each round without sleeping.

#include <cstddef>
#include <string>
#include <vector>

#include "cases.hpp"

namespace bench {

/// A host buffer of `bytes`, touched so that page faults are not timed.
struct HostBuffer {
    explicit HostBuffer(size_t bytes) : data(bytes == 0 ? 1 : bytes, 1) {}
    std::vector<char> data;
    char* get() { return data.data(); }
};

/// A CPU mtsarray array of `shape`: zeros, or value_at(i) at element i.
template <typename T>
metatensor::MtsArray mtsarray_array(const std::vector<uintptr_t>& shape, bool with_values) {
    auto array = mtsarray_zeros_array({kDLCPU, 0}, dtype_of<T>(), shape);
    if (with_values) {
        T* data = static_cast<T*>(mtsarray_pointer(array));
        for (size_t i = 0; i < product(shape); i++) {
            data[i] = value_at<T>(i);
        }
    }
    return array;
}

/// mtsarray's host thread count.
size_t host_threads();

/// The threads mtsarray uses for `bytes` of host work: the rule of
/// src/cpu/threads/parallel_split.hpp (one thread below 1 MiB, then at most
/// one per 256 KiB, up to the count). The limits run on as many.
size_t threads_for(size_t bytes);

class HostTeam;
/// A team of `threads` threads (the caller one of them), made once and kept
/// for the whole run.
HostTeam& team_of(size_t threads);

/// memcpy of `bytes` from `source` to `destination`, on `threads` threads.
TimedBatch parallel_memcpy(void* destination, const void* source, size_t bytes, size_t threads);

/// malloc, then memset (0x3c) or memcpy from `source` (when not null) of
/// `bytes` on `threads` threads, then free: what a new array costs at best.
TimedBatch parallel_allocate_and_write(size_t bytes, const void* source, size_t threads);

/// `batch` after two untimed calls: a swap_axes batch lasts a few calls,
/// and its first one would start from whatever the previous batch (the
/// baseline, which churns through its own arrays) left in the caches, while
/// the memcpy limit runs dozens of calls on the same buffers. Warming each
/// batch compares both with their data as hot as the machine keeps it. (Two
/// calls: swapping twice restores the shape.)
TimedBatch warm(TimedBatch batch);

/// Sets mtsarray's thread count for a case, back after it (0: unchanged).
class CaseThreads {
public:
    explicit CaseThreads(size_t threads) : previous_(host_threads()), changed_(threads != 0) {
        if (changed_) {
            check(mtsarray_set_num_threads(static_cast<int32_t>(threads)));
        }
    }
    ~CaseThreads() {
        if (changed_) {
            (void)mtsarray_set_num_threads(static_cast<int32_t>(previous_));
        }
    }
    CaseThreads(const CaseThreads&) = delete;
    CaseThreads& operator=(const CaseThreads&) = delete;

private:
    size_t previous_;
    bool changed_;
};

/// " [1 thread]", " [4 threads]"; "" for 0 (the count left as it is).
std::string threads_suffix(size_t threads);
}  // namespace bench
