#pragma once
// The persistent threads that run large host-memory work in parallel
// (move_data, copy, fill, swap_axes). No thread is ever created per call:
// pool threads are started the first time work needs them, up to
// the thread count - 1 (the caller is the other one), and then wait for work,
// spinning (then yielding) for about 50 microseconds and then sleeping on a
// condition variable.
//
// Oversubscription. The thread count (thread_count.hpp, which sets the
// limit here with set_concurrency_limit) bounds the threads doing mtsarray work at
// once across the whole process, callers included: a call recruits only the
// pool threads that no other call is using, and none when the calling
// threads alone already reach the count (8 user threads calling move_data at
// once with 8 threads configured each run on their own thread). A call from
// inside an active OpenMP parallel region, from a pool thread, or from
// inside a task runs on the calling thread only: the cores are already taken.
//
// Pool threads block every signal (an HPC code's timers and MPI's signals
// go to its own threads), are named "mtsarray-pool", are started again
// after fork() in the child when needed, and are joined when the library is
// unloaded or the process exits.

#include <cstddef>
#include <type_traits>

namespace mtsarray::detail::cpu {

/// A borrowed callable `void(size_t task)` (no allocation, unlike
/// std::function); the callable must outlive the run_tasks call.
class TaskBody {
public:
    // (not a copy constructor: copies copy the pointers)
    template <typename Body, typename = std::enable_if_t<!std::is_same_v<std::decay_t<Body>, TaskBody>>>
    explicit TaskBody(Body& body) noexcept : object_(&body), call_(&invoke<Body>) {}
    void operator()(size_t task) const { call_(object_, task); }

private:
    template <typename Body>
    static void invoke(void* object, size_t task) {
        (*static_cast<Body*>(object))(task);
    }
    void* object_;
    void (*call_)(void*, size_t);
};

/// Runs body(0), ..., body(tasks - 1), each exactly once, on the calling
/// thread and on up to `threads - 1` pool threads, and returns when all are
/// done. Tasks are handed out one at a time in increasing order to whichever
/// thread is free (dynamic scheduling: a slow or descheduled thread does not
/// hold up the others), so a task must not depend on which thread runs it or
/// on the order of other tasks. Returns the number of threads that took part
/// (1: everything ran on the calling thread). When tasks throw, the other
/// tasks still run and the first exception is rethrown here.
size_t run_tasks(size_t tasks, size_t threads, TaskBody body);

/// The most threads that may do mtsarray host work at once in the process,
/// the calling threads included (the thread count, kept here by
/// thread_count.cpp whenever it is decided or set).
void set_concurrency_limit(size_t count) noexcept;

/// Pool threads alive now (for the tests: threads are reused, never made
/// per call).
size_t pool_thread_count() noexcept;

/// Stops and joins idle pool threads until at most `count` remain (called
/// when the thread count goes down). Threads busy with work stay until the
/// call they help ends: that call stops those beyond the count then.
void shrink_pool(size_t count) noexcept;

/// Whether the calling thread is inside an active OpenMP parallel region of
/// an OpenMP runtime loaded in this process (false when there is none).
bool inside_openmp_parallel_region() noexcept;

}  // namespace mtsarray::detail::cpu
