#include "cpu/threads/pool_host_tasks.hpp"

#include "cpu/threads/thread_count.hpp"
#include "cpu/threads/thread_pool.hpp"

namespace mtsarray::detail::cpu {
namespace {

class PoolHostTasks final : public HostTasks {
public:
    // an invalid count in the environment is reported by the host
    // operations, not by work split for speed only
    size_t threads() const noexcept override { return usable_thread_count(); }

    void run(size_t tasks, size_t threads, void* object, void (*call)(void*, size_t)) const override {
        auto body = [object, call](size_t task) { call(object, task); };
        run_tasks(tasks, threads, TaskBody(body));
    }
};

}  // namespace

const HostTasks& pool_host_tasks() noexcept {
    static const PoolHostTasks tasks;
    return tasks;
}

}  // namespace mtsarray::detail::cpu
