#pragma once
// How host-memory work is cut for the thread pool: when it is worth more
// than one thread, how many, and in which pieces. A bad thread count in the
// environment is not reported here: the operations above report it before
// any work (operations/host_thread_count.hpp), and the work split here is
// then that of one thread.
//
// Results never depend on the split: each output byte is written by exactly
// one piece, with the same bytes as on one thread.

#include <cstddef>

#include "cpu/threads/thread_count.hpp"
#include "cpu/threads/thread_pool.hpp"

namespace mtsarray::detail::cpu {

/// Work below this many bytes stays on the calling thread: waking pool
/// threads costs microseconds, what copying a few tens of KiB costs.
constexpr size_t parallel_threshold_bytes = size_t(1) << 20;

/// Each thread gets at least this many bytes (so 1 MiB uses up to 4
/// threads, 64 MiB up to 256).
constexpr size_t min_bytes_per_thread = size_t(256) << 10;

/// Pieces per thread: a thread slowed down (another process, a page fault
/// storm) leaves its later pieces to the others.
constexpr size_t pieces_per_thread = 4;

/// Threads for `bytes` of work: 1 below parallel_threshold_bytes, else
/// usable_thread_count(), at most one per min_bytes_per_thread.
inline size_t threads_for(size_t bytes) noexcept {
    const size_t configured = usable_thread_count();
    if (bytes < parallel_threshold_bytes || configured == 1) {
        return 1;
    }
    const size_t useful = bytes / min_bytes_per_thread;
    return configured < useful ? configured : useful;
}

/// Calls body(begin, end) for disjoint [begin, end) pieces covering
/// [0, size), each a multiple of `alignment` long except the last, on up to
/// `threads` threads.
template <typename Body>
void for_each_piece(size_t size, size_t alignment, size_t threads, Body&& body) {
    if (threads <= 1 || size <= alignment) {
        body(size_t(0), size);
        return;
    }
    const size_t pieces = threads * pieces_per_thread;
    size_t length = (size + pieces - 1) / pieces;
    length = (length + alignment - 1) / alignment * alignment;
    const size_t count = (size + length - 1) / length;
    auto task = [&](size_t piece) {
        const size_t begin = piece * length;
        const size_t end = begin + length < size ? begin + length : size;
        body(begin, end);
    };
    run_tasks(count, threads, TaskBody(task));
}

}  // namespace mtsarray::detail::cpu
