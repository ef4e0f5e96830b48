#pragma once
// HostTasks: host threads that a backend may borrow for host work it splits
// in parts (a GPU backend plans a long move_data on them). The library's
// thread pool implements it (cpu/threads/pool_host_tasks.hpp); the backend
// registry hands it to the GPU backends, so that no backend includes
// another.

#include <cstddef>

namespace mtsarray::detail {

class HostTasks {
public:
    virtual ~HostTasks() = default;

    /// The most threads one call may use now, the calling thread included
    /// (at least 1; 1 when the configured count is invalid: the host data
    /// operations report that error, work split for speed only does not).
    virtual size_t threads() const noexcept = 0;

    /// Runs call(object, 0), ..., call(object, tasks - 1), each exactly once,
    /// on the calling thread and on up to `threads - 1` other threads, and
    /// returns when all are done; rethrows the first exception a task threw.
    virtual void run(size_t tasks, size_t threads, void* object, void (*call)(void*, size_t)) const = 0;

    /// run() for a callable `body(size_t task)`.
    template <typename Body>
    void run_each(size_t tasks, size_t threads, Body& body) const {
        run(tasks, threads, &body, [](void* object, size_t task) { (*static_cast<Body*>(object))(task); });
    }
};

}  // namespace mtsarray::detail
