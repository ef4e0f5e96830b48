#include "cpu/threads/thread_count.hpp"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#include <unistd.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define MTSARRAY_HAS_PTHREAD_ATFORK 1
#else
#define MTSARRAY_HAS_PTHREAD_ATFORK 0
#endif

#include "cpu/environment_value.hpp"
#include "cpu/threads/thread_pool.hpp"
#include "base/error.hpp"

namespace mtsarray::detail::cpu {

namespace {

// > 0: the count; 0: not decided yet; -1: the environment is invalid, the
// message is in `environment_error`
constexpr int64_t undecided = 0;
constexpr int64_t invalid_environment = -1;

// Taken around fork(), so that the child gets it free (another thread of
// the parent may have been setting the count) and the count consistent:
// the child inherits the parent's count and may set its own.
std::mutex& decision_mutex() {
    static std::mutex* mutex = [] {
        auto* made = new std::mutex();
#if MTSARRAY_HAS_PTHREAD_ATFORK
        pthread_atfork([] { decision_mutex().lock(); }, [] { decision_mutex().unlock(); },
                       [] { decision_mutex().unlock(); });
#endif
        return made;
    }();
    return *mutex;
}
std::string environment_error;  // guarded by decision_mutex()

std::string describe_value(const char* variable, const std::string& value) {
    return std::string(variable) + "='" + value + "'";
}

// Throws Error for an environment value the user must fix, naming the way
// around it too.
[[noreturn]] void invalid(const char* variable, const std::string& value, const std::string& why) {
    throw Error(describe_value(variable, value) + " " + why + "; set it to a whole number of threads in [1, " +
                std::to_string(max_thread_count) + "], or call mtsarray_set_num_threads");
}

// The count from the environment (MTSARRAY_NUM_THREADS, then
// OMP_NUM_THREADS), or 0 when neither is set (or both are empty).
size_t count_from_environment() {
    for (const char* variable : {"MTSARRAY_NUM_THREADS", "OMP_NUM_THREADS"}) {
        const char* value = std::getenv(variable);
        if (value == nullptr) {
            continue;
        }
        if (!without_surrounding_blanks(value).empty()) {
            return parse_thread_count(variable, value);
        }
    }
    return 0;
}

}  // namespace

std::atomic<int64_t> decided_thread_count{undecided};

size_t parse_thread_count(const char* variable, const std::string& value) {
    std::string text = value;
    // OMP_NUM_THREADS is a list, one count per nesting level: mtsarray runs
    // at the outermost level
    if (std::string(variable) == "OMP_NUM_THREADS") {
        text = text.substr(0, text.find(','));
    }
    text = without_surrounding_blanks(text);
    if (text.empty()) {
        invalid(variable, value, "is empty");
    }
    int64_t count = 0;
    for (size_t i = 0; i < text.size(); i++) {
        const char c = text[i];
        if (c == '-' && i == 0) {
            invalid(variable, value, "is negative");
        }
        if (c < '0' || c > '9') {
            invalid(variable, value, "is not a whole number");
        }
        count = count * 10 + (c - '0');
        if (count > max_thread_count) {
            invalid(variable, value, "asks for more than " + std::to_string(max_thread_count) + " threads");
        }
    }
    if (count == 0) {
        invalid(variable, value, "asks for no thread at all");
    }
    return static_cast<size_t>(count);
}

size_t affinity_cpu_count() noexcept {
#if defined(__linux__)
    // the process's mask (the main thread's: its id is the process id), not
    // the calling thread's, which a user may have pinned to one core; sized
    // for machines with more than CPU_SETSIZE CPUs
    for (int cpus = 1024; cpus <= (1 << 20); cpus *= 2) {
        cpu_set_t* set = CPU_ALLOC(cpus);
        if (set == nullptr) {
            break;
        }
        const size_t size = CPU_ALLOC_SIZE(cpus);
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(getpid(), size, set) == 0) {
            const int count = CPU_COUNT_S(size, set);
            CPU_FREE(set);
            return count > 0 ? static_cast<size_t>(count) : 1;
        }
        CPU_FREE(set);
        // EINVAL: the mask is larger than ours, try a larger one
    }
#endif
    const unsigned count = std::thread::hardware_concurrency();
    return count > 0 ? count : 1;
}

size_t decide_thread_count() {
    std::lock_guard<std::mutex> lock(decision_mutex());
    int64_t current = decided_thread_count.load(std::memory_order_acquire);
    if (current == undecided) {
        try {
            size_t from_environment = count_from_environment();
            current = static_cast<int64_t>(from_environment != 0 ? from_environment : affinity_cpu_count());
            if (current > max_thread_count) {
                current = max_thread_count;
            }
        } catch (const Error& error) {
            environment_error = error.what();
            current = invalid_environment;
        }
        decided_thread_count.store(current, std::memory_order_release);
        if (current != invalid_environment) {
            set_concurrency_limit(static_cast<size_t>(current));
        }
    }
    if (current == invalid_environment) {
        throw Error(environment_error);
    }
    return static_cast<size_t>(current);
}

size_t usable_thread_count() noexcept {
    try {
        return thread_count();
    } catch (...) {
        return 1;
    }
}

void set_thread_count(int64_t count) {
    MTSARRAY_EXPECTS(count >= 1 && count <= max_thread_count,
                     "the number of threads must be in [1, " + std::to_string(max_thread_count) + "], got " +
                         std::to_string(count));
    {
        std::lock_guard<std::mutex> lock(decision_mutex());
        decided_thread_count.store(count, std::memory_order_release);
        set_concurrency_limit(static_cast<size_t>(count));
    }
    // fewer threads: the pool threads beyond the count go (the caller is
    // the count's first thread)
    shrink_pool(static_cast<size_t>(count - 1));
}

void reset_thread_count_for_testing() noexcept {
    std::lock_guard<std::mutex> lock(decision_mutex());
    decided_thread_count.store(undecided, std::memory_order_release);
}

}  // namespace mtsarray::detail::cpu
