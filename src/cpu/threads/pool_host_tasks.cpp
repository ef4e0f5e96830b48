#include "cpu/threads/pool_host_tasks.hpp"

#include "cpu/threads/thread_count.hpp"
#include "cpu/threads/thread_pool.hpp"

namespace mtsarray::detail::cpu {
namespace {

class PoolHostTasks final : public HostTasks {
public:
    size_t threads() const noexcept override {
        try {
            return thread_count();
        } catch (...) {
            return 1;  // an invalid count in the environment: reported by the host operations
        }
    }

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
