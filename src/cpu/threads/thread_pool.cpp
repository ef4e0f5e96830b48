#include "cpu/threads/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <signal.h>
#define MTSARRAY_HAS_PTHREAD 1
#else
#define MTSARRAY_HAS_PTHREAD 0
#endif


// Defined by the OpenMP runtime when the program loads one (libgomp, libomp,
// ...), null otherwise: mtsarray never links OpenMP itself. Default
// visibility, or the weak reference would be resolved (to null) when the
// library is linked instead of when it is loaded.
extern "C" int omp_in_parallel(void) __attribute__((weak, visibility("default")));

namespace mtsarray::detail::cpu {

namespace {

using Clock = std::chrono::steady_clock;

// A pool thread that just finished waits this long for the next job before
// it sleeps: back-to-back calls (a loop of move_data) then skip the futex
// wake-up, several microseconds each, while an idle pool costs no CPU after
// a few tens of microseconds.
constexpr auto pool_thread_wait = std::chrono::microseconds(50);
// A caller done with its own tasks waits this long for the last recruited
// pool threads (each is finishing one task) before it sleeps.
constexpr auto caller_wait = std::chrono::microseconds(200);
// The first part of a wait spins on the CPU; the rest yields it between
// looks, so that on a machine with more threads than cores the thread being
// waited for gets the core.
constexpr auto pure_spin = std::chrono::microseconds(2);

inline void relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

// Waits until `done()` without sleeping: spins, then yields; gives up
// after `limit`. Returns done().
template <typename Done>
bool spin_until(Done&& done, Clock::duration limit) {
    const auto start = Clock::now();
    for (unsigned i = 1;; i++) {
        if (done()) {
            return true;
        }
        if (i % 64 != 0) {
            relax();
            continue;
        }
        const auto waited = Clock::now() - start;
        if (waited > limit) {
            return done();
        }
        if (waited > pure_spin) {
            std::this_thread::yield();
        }
    }
}

// True on pool threads, and on a caller while it runs tasks: work started
// from there runs on the calling thread only.
thread_local bool running_tasks = false;

// One run_tasks call, on the caller's stack. The caller returns only once
// the last recruited pool thread is done with it (last_left).
struct Job {
    Job(size_t count, TaskBody task_body) : tasks(count), body(task_body) {}

    void run_available_tasks() noexcept {
        while (true) {
            const size_t task = next.fetch_add(1, std::memory_order_relaxed);
            if (task >= tasks) {
                return;
            }
            try {
                body(task);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mutex);
                if (!error) {
                    error = std::current_exception();
                }
            }
        }
    }

    /// A recruit is done: no lock unless it is the last one, which wakes
    /// the caller (if it sleeps) and then says it has let go of the job.
    /// Nothing here touches the job after `last_left` is set, or after a
    /// decrement that leaves others to come.
    void recruit_done() noexcept {
        if (workers_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            {
                std::lock_guard<std::mutex> lock(mutex);
                finished.notify_one();
            }
            last_left.store(true, std::memory_order_release);
        }
    }

    /// The caller takes back `count` recruits that never started.
    void recruits_retracted(size_t count) noexcept {
        if (workers_left.fetch_sub(count, std::memory_order_acq_rel) == count) {
            last_left.store(true, std::memory_order_release);  // the others were all done
        }
    }

    const size_t tasks;
    const TaskBody body;
    std::atomic<size_t> next{0};
    std::atomic<size_t> workers_left{0};
    std::atomic<bool> last_left{false};
    std::mutex mutex;
    std::condition_variable finished;
    std::exception_ptr error;  // guarded by mutex
};

class Worker {
public:
    /// Hands `job` to this (idle) thread.
    void post(Job* job) {
        std::lock_guard<std::mutex> lock(mutex_);
        mailbox_.store(job, std::memory_order_release);
        if (sleeping_) {
            wake_.notify_one();
        }
    }

    /// Takes `job` back if this thread has not picked it up yet (then it
    /// never will); false once it has.
    bool retract(Job* job) {
        Job* expected = job;
        return mailbox_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
    }

    /// The next job, or nullptr once stopped.
    Job* wait_for_job() {
        Job* job = nullptr;
        auto arrived = [&] {
            if (mailbox_.load(std::memory_order_acquire) != nullptr) {
                // null when the caller took it back in between
                job = mailbox_.exchange(nullptr, std::memory_order_acq_rel);
                if (job != nullptr) {
                    return true;
                }
            }
            return stopping_.load(std::memory_order_acquire);
        };
        if (spin_until(arrived, pool_thread_wait)) {
            return job;
        }
        std::unique_lock<std::mutex> lock(mutex_);
        sleeping_ = true;
        wake_.wait(lock, arrived);
        sleeping_ = false;
        return job;
    }

    void stop() {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_.store(true, std::memory_order_release);
        wake_.notify_one();
    }

    std::thread thread;

private:
    std::mutex mutex_;
    std::condition_variable wake_;
    bool sleeping_ = false;  // guarded by mutex_
    std::atomic<Job*> mailbox_{nullptr};
    std::atomic<bool> stopping_{false};
};

size_t run_serially(size_t tasks, TaskBody body) {
    const bool was_running = running_tasks;
    running_tasks = true;
    std::exception_ptr error;
    for (size_t task = 0; task < tasks; task++) {
        try {
            body(task);
        } catch (...) {
            if (!error) {
                error = std::current_exception();
            }
        }
    }
    running_tasks = was_running;
    if (error) {
        std::rethrow_exception(error);
    }
    return 1;
}

// The most threads doing mtsarray host work at once, callers included
// (set_concurrency_limit); 0 until the thread count is first decided.
std::atomic<size_t> concurrency_limit{0};

class Pool {
public:
    size_t run(size_t tasks, size_t threads, TaskBody body) {
        threads = std::min(threads, tasks);
        if (threads <= 1 || running_tasks || inside_openmp_parallel_region()) {
            return run_serially(tasks, body);
        }
        // before the thread count is first decided, the caller's figure
        size_t limit = concurrency_limit.load(std::memory_order_acquire);
        if (limit == 0) {
            limit = threads;
        }

        // the recruits, to take the job back from those that have not
        // started when the caller is done (reserved before anything else)
        std::vector<Worker*> recruits;
        try {
            recruits.reserve(std::min(threads, limit) - 1);
        } catch (...) {
            return run_serially(tasks, body);
        }

        Job job(tasks, body);
        {
            std::unique_lock<std::mutex> lock(mutex_);
            if (shut_down_) {
                lock.unlock();
                return run_serially(tasks, body);
            }
            busy_ += 1;  // this thread
            const size_t free_threads = limit > busy_ ? limit - busy_ : 0;
            const size_t wanted = std::min(recruits.capacity(), free_threads);
            while (idle_.size() < wanted && workers_.size() + 1 < limit && start_worker()) {
            }
            const size_t recruited = std::min(wanted, idle_.size());
            for (size_t i = 0; i < recruited; i++) {
                recruits.push_back(idle_.back());
                idle_.pop_back();
            }
            busy_ += recruited;
        }
        job.workers_left.store(recruits.size(), std::memory_order_relaxed);
        for (Worker* worker : recruits) {
            worker->post(&job);
        }

        running_tasks = true;
        job.run_available_tasks();
        running_tasks = false;

        // Every task is taken: a recruit that has not woken up yet (no free
        // core, a slow wake-up) has nothing left to do, and the caller does
        // not wait for it.
        // (The recruits taken back go first in `recruits`.)
        size_t retracted = 0;
        for (size_t i = 0; i < recruits.size(); i++) {
            if (recruits[i]->retract(&job)) {
                std::swap(recruits[i], recruits[retracted]);
                retracted++;
            }
        }
        const size_t participants = recruits.size() - retracted + 1;
        if (retracted != 0) {
            job.recruits_retracted(retracted);
        }
        if (participants > 1) {
            auto workers_done = [&] { return job.workers_left.load(std::memory_order_acquire) == 0; };
            if (!spin_until(workers_done, caller_wait)) {
                std::unique_lock<std::mutex> lock(job.mutex);
                job.finished.wait(lock, workers_done);
            }
            // the last recruit may still be waking this thread
            auto let_go = [&] { return job.last_left.load(std::memory_order_acquire); };
            while (!spin_until(let_go, caller_wait)) {
            }
        }
        size_t lowered_limit = 0;
        {
            // the recruits are idle again, all at once (one lock for the
            // call, rather than one for each recruit as it finishes), and
            // from here on they may be stopped
            std::lock_guard<std::mutex> lock(mutex_);
            for (Worker* worker : recruits) {
                idle_.push_back(worker);  // capacity reserved: no throw
            }
            busy_ -= recruits.size() + 1;
            // read under the lock: a count lowered after it finds these
            // threads idle, and stops them itself
            const size_t limit_now = concurrency_limit.load(std::memory_order_acquire);
            if (limit_now != 0 && workers_.size() + 1 > limit_now) {
                lowered_limit = limit_now;
            }
        }
        if (lowered_limit != 0) {
            // the count went down while this call held its recruits, which
            // set_thread_count could not stop then: they stop now
            shrink(lowered_limit - 1);
        }
        if (job.error) {
            std::rethrow_exception(job.error);
        }
        return participants;
    }

    size_t size() {
        std::lock_guard<std::mutex> lock(mutex_);
        return workers_.size();
    }

    void shrink(size_t count) {
        std::vector<std::unique_ptr<Worker>> retired;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            // idle threads: no caller holds them (a caller puts its recruits
            // back here only once it is done with them)
            for (size_t i = idle_.size(); i-- > 0 && workers_.size() > count;) {
                Worker* worker = idle_[i];
                idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
                auto found = std::find_if(workers_.begin(), workers_.end(),
                                          [worker](const std::unique_ptr<Worker>& w) { return w.get() == worker; });
                retired.push_back(std::move(*found));
                workers_.erase(found);
            }
        }
        for (auto& worker : retired) {
            worker->stop();
            worker->thread.join();
        }
    }

    void shut_down() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            shut_down_ = true;
        }
        // threads still helping a caller finish their tasks first
        while (size() != 0) {
            shrink(0);
            if (size() != 0) {
                std::this_thread::sleep_for(std::chrono::microseconds(100));
            }
        }
    }

private:
    // Starts one more pool thread, idle. Under mutex_. False when the
    // system refuses (the work then runs on fewer threads).
    bool start_worker() noexcept {
        try {
            workers_.reserve(workers_.size() + 1);
            idle_.reserve(workers_.size() + 1);
            auto worker = std::make_unique<Worker>();
            Worker* raw = worker.get();
#if MTSARRAY_HAS_PTHREAD
            // the new thread inherits this mask: every signal blocked
            sigset_t all;
            sigset_t previous;
            sigfillset(&all);
            pthread_sigmask(SIG_SETMASK, &all, &previous);
            try {
                raw->thread = std::thread([this, raw] { worker_loop(*raw); });
            } catch (...) {
                pthread_sigmask(SIG_SETMASK, &previous, nullptr);
                throw;
            }
            pthread_sigmask(SIG_SETMASK, &previous, nullptr);
#if defined(__linux__)
            pthread_setname_np(raw->thread.native_handle(), "mtsarray-pool");
#endif
#else
            raw->thread = std::thread([this, raw] { worker_loop(*raw); });
#endif
            workers_.push_back(std::move(worker));  // capacity reserved: no throw
            idle_.push_back(raw);
            return true;
        } catch (...) {
            return false;
        }
    }

    void worker_loop(Worker& worker) {
        running_tasks = true;
        while (Job* job = worker.wait_for_job()) {
            job->run_available_tasks();
            // the caller puts this thread back on the idle list
            job->recruit_done();
        }
    }

    std::mutex mutex_;  // guards everything below
    std::vector<std::unique_ptr<Worker>> workers_;
    std::vector<Worker*> idle_;
    // threads working on jobs now: the callers and the pool threads helping them
    size_t busy_ = 0;
    bool shut_down_ = false;
};

// The pool, once made (null before the first use).
std::atomic<Pool*> made_pool{nullptr};

// Never destroyed (work may run during static destruction); replaced in a
// forked child, where the parent's threads do not exist.
Pool*& pool_pointer() {
    static Pool* pointer = [] {
#if MTSARRAY_HAS_PTHREAD
        pthread_atfork(nullptr, nullptr, [] {
            pool_pointer() = new Pool();
            made_pool.store(pool_pointer());
        });
#endif
        auto* pool = new Pool();
        made_pool.store(pool);
        return pool;
    }();
    return pointer;
}

// Joins the pool threads when the library is unloaded or the program exits:
// no thread may run the library's code once it is gone. Work that comes
// later (another library's static destructor) runs on its calling thread.
struct ShutDownAtExit {
    ~ShutDownAtExit() {
        if (Pool* pool = made_pool.load()) {
            pool->shut_down();
        }
    }
} shut_down_at_exit;

}  // namespace

size_t run_tasks(size_t tasks, size_t threads, TaskBody body) {
    return pool_pointer()->run(tasks, threads, body);
}

void set_concurrency_limit(size_t count) noexcept {
    concurrency_limit.store(count, std::memory_order_release);
}

size_t pool_thread_count() noexcept {
    try {
        return pool_pointer()->size();
    } catch (...) {
        return 0;
    }
}

void shrink_pool(size_t count) noexcept {
    try {
        pool_pointer()->shrink(count);
    } catch (...) {
        // std::system_error from join: the threads stay, which is harmless
    }
}

bool inside_openmp_parallel_region() noexcept {
    return &omp_in_parallel != nullptr && omp_in_parallel() != 0;
}

}  // namespace mtsarray::detail::cpu
