// The host thread pool (src/cpu/threads/thread_pool.hpp) and the thread count
// setting (src/cpu/threads/thread_count.hpp): every task runs exactly once, no
// thread is made per call, several callers never make more threads work
// than the count allows, nested and failing tasks, fork(), and the
// environment variables with their errors.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#if defined(__linux__)
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "base/shape.hpp"
#include "cpu/threads/parallel_split.hpp"
#include "cpu/threads/thread_count.hpp"
#include "cpu/threads/thread_pool.hpp"
#include "base/error.hpp"
#include "operations/host_thread_count.hpp"

namespace cpu = mtsarray::detail::cpu;

namespace {

/// Sets the count for the scope, back to the previous one after.
class CountForTest {
public:
    explicit CountForTest(int64_t count) : previous_(static_cast<int64_t>(cpu::thread_count())) {
        cpu::set_thread_count(count);
    }
    ~CountForTest() { cpu::set_thread_count(previous_); }

private:
    int64_t previous_;
};

/// Sets environment variables for the scope and makes the count be decided
/// again from them; restores both after.
class EnvironmentForTest {
public:
    EnvironmentForTest(const char* mtsarray_value, const char* omp_value) : previous_(cpu::thread_count()) {
        save("MTSARRAY_NUM_THREADS", mtsarray_value);
        save("OMP_NUM_THREADS", omp_value);
        cpu::reset_thread_count_for_testing();
    }
    ~EnvironmentForTest() {
        for (const auto& saved : saved_) {
            if (saved.was_set) {
                setenv(saved.name.c_str(), saved.value.c_str(), 1);
            } else {
                unsetenv(saved.name.c_str());
            }
        }
        cpu::set_thread_count(static_cast<int64_t>(previous_));
    }

private:
    struct Saved {
        std::string name;
        bool was_set;
        std::string value;
    };
    void save(const char* name, const char* value) {
        const char* old = std::getenv(name);
        saved_.push_back({name, old != nullptr, old != nullptr ? old : ""});
        if (value != nullptr) {
            setenv(name, value, 1);
        } else {
            unsetenv(name);
        }
    }
    size_t previous_;
    std::vector<Saved> saved_;
};

template <typename Body>
size_t run(size_t tasks, size_t threads, Body body) {
    return cpu::run_tasks(tasks, threads, cpu::TaskBody(body));
}

}  // namespace

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
    CountForTest count(8);
    for (size_t threads : {1, 2, 3, 8}) {
        for (size_t tasks : {0, 1, 2, 3, 7, 64, 1000}) {
            std::vector<std::atomic<int>> runs(tasks);
            for (auto& r : runs) {
                r.store(0);
            }
            const size_t participants = run(tasks, threads, [&](size_t task) { runs[task].fetch_add(1); });
            for (size_t task = 0; task < tasks; task++) {
                ASSERT_EQ(runs[task].load(), 1) << "task " << task << " of " << tasks << ", " << threads << " threads";
            }
            EXPECT_GE(participants, 1u);
            EXPECT_LE(participants, std::max<size_t>(1, std::min(threads, tasks)));
        }
    }
}

TEST(ThreadPool, ThreadsAreReusedNotMadePerCall) {
    CountForTest count(4);
    for (int call = 0; call < 500; call++) {
        run(16, 4, [](size_t) {});
        ASSERT_LE(cpu::pool_thread_count(), 3u) << "call " << call;
    }
    // work that keeps the pool threads busy long enough to be seen
    std::mutex mutex;
    std::set<std::thread::id> seen;
    for (int call = 0; call < 50; call++) {
        run(8, 4, [&](size_t) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            std::lock_guard<std::mutex> lock(mutex);
            seen.insert(std::this_thread::get_id());
        });
    }
    EXPECT_LE(seen.size(), 4u) << "more threads took part than the count: threads are made per call";
    EXPECT_GE(seen.size(), 2u) << "the pool never helped";
}

TEST(ThreadPool, FewerThreadsStopTheIdleOnes) {
    {
        CountForTest count(6);
        run(64, 6, [](size_t) { std::this_thread::sleep_for(std::chrono::microseconds(100)); });
        EXPECT_LE(cpu::pool_thread_count(), 5u);
        cpu::set_thread_count(2);
        EXPECT_LE(cpu::pool_thread_count(), 1u);
        cpu::set_thread_count(1);
        EXPECT_EQ(cpu::pool_thread_count(), 0u);
        EXPECT_EQ(run(64, 6, [](size_t) {}), 1u) << "one thread: everything on the caller";
    }
}


// The count goes down while a call holds its recruits: set_thread_count can
// stop none of them (they are busy), so they stop when the call gives them
// back. The call's tasks wait for the count to be lowered: no timing.
TEST(ThreadPool, ThreadsACallHeldStopWhenItEndsBelowALowerCount) {
    CountForTest count(8);
    std::mutex mutex;
    std::condition_variable changed;
    bool started = false;
    bool lowered = false;
    std::thread caller([&] {
        run(8, 8, [&](size_t) {
            std::unique_lock<std::mutex> lock(mutex);
            started = true;
            changed.notify_all();
            changed.wait(lock, [&] { return lowered; });
        });
    });
    {
        // a task runs: the call has recruited its pool threads
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return started; });
    }
    const size_t held = cpu::pool_thread_count();
    cpu::set_thread_count(1);
    EXPECT_EQ(cpu::pool_thread_count(), held) << "the threads the call holds are busy: none stopped yet";
    {
        std::lock_guard<std::mutex> lock(mutex);
        lowered = true;
        changed.notify_all();
    }
    caller.join();
    EXPECT_EQ(held, 7u) << "the call recruited the 7 pool threads of a count of 8";
    EXPECT_EQ(cpu::pool_thread_count(), 0u) << "at a count of 1, no pool thread stays once the call has ended";
}
TEST(ThreadPool, NestedWorkRunsOnTheCallingThread) {
    CountForTest count(4);
    std::atomic<size_t> inner_participants{0};
    std::atomic<size_t> inner_tasks{0};
    run(8, 4, [&](size_t) {
        const auto caller = std::this_thread::get_id();
        std::atomic<bool> same_thread{true};
        inner_participants += run(4, 4, [&](size_t) {
            inner_tasks++;
            same_thread = same_thread && std::this_thread::get_id() == caller;
        });
        EXPECT_TRUE(same_thread.load());
    });
    EXPECT_EQ(inner_participants.load(), 8u);
    EXPECT_EQ(inner_tasks.load(), 32u);
}

TEST(ThreadPool, TheFirstExceptionIsRethrownAfterEveryTask) {
    CountForTest count(4);
    for (size_t threads : {1, 4}) {
        std::atomic<int> runs{0};
        try {
            run(40, threads, [&](size_t task) {
                runs++;
                if (task % 10 == 3) {
                    throw std::runtime_error("task failed");
                }
            });
            ADD_FAILURE() << "no exception";
        } catch (const std::runtime_error& error) {
            EXPECT_STREQ(error.what(), "task failed");
        }
        EXPECT_EQ(runs.load(), 40);
    }
}

// 8 user threads calling at once with a count of 4: the pool threads busy
// at any time never exceed what the count leaves (3), and no call waits for
// more than its own work.
TEST(ThreadPool, ConcurrentCallersDoNotOversubscribe) {
    CountForTest count(4);
    thread_local bool user_thread = false;
    std::atomic<int> pool_threads_inside{0};
    std::atomic<int> most_pool_threads_inside{0};
    std::atomic<int> tasks_done{0};
    std::vector<std::thread> users;
    std::atomic<bool> go{false};
    for (int t = 0; t < 8; t++) {
        users.emplace_back([&] {
            user_thread = true;
            while (!go.load()) {
                std::this_thread::yield();
            }
            for (int call = 0; call < 40; call++) {
                run(16, 4, [&](size_t) {
                    if (!user_thread) {
                        const int inside = ++pool_threads_inside;
                        int most = most_pool_threads_inside.load();
                        while (inside > most && !most_pool_threads_inside.compare_exchange_weak(most, inside)) {
                        }
                    }
                    std::this_thread::sleep_for(std::chrono::microseconds(20));
                    if (!user_thread) {
                        --pool_threads_inside;
                    }
                    tasks_done++;
                });
            }
        });
    }
    go = true;
    for (auto& user : users) {
        user.join();
    }
    EXPECT_EQ(tasks_done.load(), 8 * 40 * 16);
    EXPECT_LE(most_pool_threads_inside.load(), 3);
    EXPECT_LE(cpu::pool_thread_count(), 3u);
}

// A caller takes its job back from the threads it recruited after they
// may already be idle again; a count that goes down meanwhile stops idle
// threads, never one that a caller still holds (AddressSanitizer reports
// the use of a freed thread otherwise).
TEST(ThreadPool, TheCountGoesDownWhileCallersRun) {
    CountForTest count(4);
    std::atomic<bool> stop{false};
    std::vector<std::thread> callers;
    std::atomic<size_t> runs{0};
    for (int caller = 0; caller < 2; caller++) {
        callers.emplace_back([&] {
            auto count_run = [&](size_t) { runs.fetch_add(1, std::memory_order_relaxed); };
            while (!stop.load(std::memory_order_relaxed)) {
                cpu::run_tasks(8, 4, cpu::TaskBody(count_run));
            }
        });
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    for (int64_t round = 0; std::chrono::steady_clock::now() < end; round++) {
        cpu::set_thread_count(round % 2 == 0 ? 1 : 4);
    }
    stop.store(true);
    for (auto& caller : callers) {
        caller.join();
    }
    EXPECT_GT(runs.load(), 0u);
    cpu::set_thread_count(1);
    EXPECT_EQ(cpu::pool_thread_count(), 0u) << "idle threads are stopped once no caller holds them";
}

#if defined(__linux__)
TEST(ThreadPool, WorksInAForkedChild) {
    CountForTest count(4);
    run(16, 4, [](size_t) { std::this_thread::sleep_for(std::chrono::microseconds(50)); });
    const pid_t child = fork();
    ASSERT_NE(child, -1);
    if (child == 0) {
        // the parent's pool threads do not exist here: a new pool starts
        std::atomic<int> runs{0};
        auto count_run = [&](size_t) { runs++; };
        cpu::run_tasks(64, 4, cpu::TaskBody(count_run));
        _exit(runs.load() == 64 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the forked child could not run tasks";
}
#endif

// ---- the count ------------------------------------------------------------------

TEST(ThreadCount, ParsesEnvironmentValues) {
    EXPECT_EQ(cpu::parse_thread_count("MTSARRAY_NUM_THREADS", "4"), 4u);
    EXPECT_EQ(cpu::parse_thread_count("MTSARRAY_NUM_THREADS", " 12 "), 12u);
    EXPECT_EQ(cpu::parse_thread_count("MTSARRAY_NUM_THREADS", "4096"), 4096u);
    EXPECT_EQ(cpu::parse_thread_count("OMP_NUM_THREADS", "8,2"), 8u);
    EXPECT_EQ(cpu::parse_thread_count("OMP_NUM_THREADS", "3 ,1"), 3u);
    auto message = [](const char* variable, const char* value) {
        try {
            cpu::parse_thread_count(variable, value);
        } catch (const mtsarray::detail::Error& error) {
            return std::string(error.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message("MTSARRAY_NUM_THREADS", "-2"),
              "MTSARRAY_NUM_THREADS='-2' is negative; set it to a whole number of threads in [1, 4096], or call "
              "mtsarray_set_num_threads");
    EXPECT_NE(message("MTSARRAY_NUM_THREADS", "0").find("asks for no thread at all"), std::string::npos);
    EXPECT_NE(message("MTSARRAY_NUM_THREADS", "four").find("MTSARRAY_NUM_THREADS='four' is not a whole number"),
              std::string::npos);
    EXPECT_NE(message("MTSARRAY_NUM_THREADS", "2.5").find("is not a whole number"), std::string::npos);
    EXPECT_NE(message("MTSARRAY_NUM_THREADS", "4 4").find("is not a whole number"), std::string::npos);
    EXPECT_NE(message("MTSARRAY_NUM_THREADS", "4097").find("asks for more than 4096 threads"), std::string::npos);
    EXPECT_NE(message("MTSARRAY_NUM_THREADS", "99999999999999999999999").find("more than 4096"),
              std::string::npos);
    EXPECT_NE(message("MTSARRAY_NUM_THREADS", "8,2").find("is not a whole number"), std::string::npos)
        << "only OMP_NUM_THREADS is a list";
    EXPECT_NE(message("OMP_NUM_THREADS", ",4").find("OMP_NUM_THREADS=',4' is empty"), std::string::npos);
    EXPECT_NE(message("OMP_NUM_THREADS", "  ").find("is empty"), std::string::npos);
}

TEST(ThreadCount, ComesFromTheEnvironmentInOrder) {
    {
        EnvironmentForTest environment("3", "5");
        EXPECT_EQ(cpu::thread_count(), 3u);
    }
    {
        EnvironmentForTest environment(nullptr, "5,1");
        EXPECT_EQ(cpu::thread_count(), 5u);
    }
    {
        EnvironmentForTest environment("", "6");  // empty counts as unset
        EXPECT_EQ(cpu::thread_count(), 6u);
    }
    {
        EnvironmentForTest environment(nullptr, nullptr);
        EXPECT_EQ(cpu::thread_count(), cpu::affinity_cpu_count());
    }
    {
        // the setting wins over the environment, and is not undone by it
        EnvironmentForTest environment("3", nullptr);
        cpu::set_thread_count(7);
        EXPECT_EQ(cpu::thread_count(), 7u);
    }
}

TEST(ThreadCount, AnInvalidEnvironmentFailsHostOperationsAndSplitsNothing) {
    EnvironmentForTest environment("lots", "4");
    const std::string named = "MTSARRAY_NUM_THREADS='lots' is not a whole number";
    for (int attempt = 0; attempt < 2; attempt++) {  // the error stays
        try {
            (void)cpu::thread_count();
            ADD_FAILURE() << "no error";
        } catch (const mtsarray::detail::Error& error) {
            EXPECT_NE(std::string(error.what()).find(named), std::string::npos) << error.what();
        }
    }
    // the one check of the operations: on host memory of any kind, not on
    // a GPU's
    for (auto type : {kDLCPU, kDLCUDAHost, kDLCUDAManaged, kDLROCMHost}) {
        try {
            mtsarray::detail::check_host_thread_count(DLDevice{kDLCUDA, 0}, DLDevice{type, 0});
            ADD_FAILURE() << "no error for device type " << type;
        } catch (const mtsarray::detail::Error& error) {
            EXPECT_EQ(std::string(error.what()).rfind(named, 0), 0u) << error.what();
        }
    }
    EXPECT_NO_THROW(mtsarray::detail::check_host_thread_count(DLDevice{kDLCUDA, 0}, DLDevice{kDLROCM, 0}));
    // below the operations, which reported it, work splits as on one thread
    EXPECT_EQ(cpu::usable_thread_count(), 1u);
    EXPECT_EQ(cpu::threads_for(8), 1u);
    EXPECT_EQ(cpu::threads_for(size_t(64) << 20), 1u);
    cpu::set_thread_count(2);
    EXPECT_EQ(cpu::thread_count(), 2u);
    EXPECT_NO_THROW(mtsarray::detail::check_host_thread_count(DLDevice{kDLCPU, 0}));
}

#if defined(__linux__)
TEST(ThreadCount, DefaultsToTheAffinityMask) {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(getpid(), sizeof(set), &set), 0);
    EXPECT_EQ(cpu::affinity_cpu_count(), static_cast<size_t>(CPU_COUNT(&set)));
}
#endif

TEST(ThreadCount, SplitsOnlyLargeWork) {
    CountForTest count(8);
    EXPECT_EQ(cpu::threads_for(0), 1u);
    EXPECT_EQ(cpu::threads_for(cpu::parallel_threshold_bytes - 1), 1u);
    EXPECT_EQ(cpu::threads_for(cpu::parallel_threshold_bytes), cpu::parallel_threshold_bytes / cpu::min_bytes_per_thread);
    EXPECT_EQ(cpu::threads_for(size_t(1) << 30), 8u);
    cpu::set_thread_count(1);
    EXPECT_EQ(cpu::threads_for(size_t(1) << 30), 1u);
}
