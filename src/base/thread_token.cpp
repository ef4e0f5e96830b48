#include "base/thread_token.hpp"

#include <atomic>

namespace mtsarray::detail {

uint64_t this_thread_token() noexcept {
    static std::atomic<uint64_t> next{1};
    thread_local const uint64_t token = next.fetch_add(1, std::memory_order_relaxed);
    return token;
}

}  // namespace mtsarray::detail
