#pragma once
// this_thread_token(): a number naming the calling thread that no other
// thread of the process ever gets, for the owner of a per-thread default
// stream. std::thread::id will not do: an id "may be reused after a
// terminated thread has been joined, or a detached thread has terminated"
// (pthread_self(3)), and glibc reuses it at once -- a later thread would
// pass for the owner of an exited thread's stream, and queue frees there
// (on its own stream, unordered after the exited thread's work).

#include <cstdint>

namespace mtsarray::detail {

/// The calling thread's token: 1, 2, 3, ... in the order threads first ask.
uint64_t this_thread_token() noexcept;

}  // namespace mtsarray::detail
