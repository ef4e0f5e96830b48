#include "cpu/parallel_split.hpp"

#include "cpu/thread_count.hpp"

namespace mtsarray::detail::cpu {

size_t threads_for(size_t bytes) {
    const size_t configured = thread_count();
    if (bytes < parallel_threshold_bytes || configured == 1) {
        return 1;
    }
    const size_t useful = bytes / min_bytes_per_thread;
    return configured < useful ? configured : useful;
}

}  // namespace mtsarray::detail::cpu
