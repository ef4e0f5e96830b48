#pragma once
// The thread pool as the HostTasks (base/host_tasks.hpp) of the backends
// that split host work but may not include cpu/: the same threads, the same
// thread count and the same rules against oversubscription as the CPU
// backend's own work (thread_pool.hpp).

#include "base/host_tasks.hpp"

namespace mtsarray::detail::cpu {

/// The process-wide instance.
const HostTasks& pool_host_tasks() noexcept;

}  // namespace mtsarray::detail::cpu
