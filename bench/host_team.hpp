#pragma once
// A team of host threads for the benchmark's own parallel work: the
// multi-threaded limits (memcpy / memset of the same bytes on as many
// threads as mtsarray uses) and the rows where several user threads call
// mtsarray at once. During a timed batch the team's threads wait for each
// round without sleeping (they yield the CPU, which costs nothing when it
// has no one else to run), so that the limit pays no wake-up: it is the
// hardware's figure, not another thread pool's. Between batches they sleep.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace bench {

class HostTeam {
public:
    /// `threads` threads in all, the calling thread included.
    explicit HostTeam(size_t threads);
    ~HostTeam();
    HostTeam(const HostTeam&) = delete;
    HostTeam& operator=(const HostTeam&) = delete;

    size_t size() const { return threads_.size() + 1; }

    /// Runs `rounds` rounds of work(index, size()) on every thread of the
    /// team (the caller is index 0), each round starting when all threads
    /// finished the previous one; `before` and `after` run on the caller
    /// around each round (allocations of a limit). Returns the seconds the
    /// rounds took, once every thread was awake.
    double run(size_t rounds, const std::function<void(size_t, size_t)>& work,
               const std::function<void()>& before = {}, const std::function<void()>& after = {});

private:
    void loop(size_t index);

    std::vector<std::thread> threads_;
    std::mutex mutex_;
    std::condition_variable wake_;
    uint64_t batch_ = 0;  // guarded by mutex_
    bool stop_ = false;   // guarded by mutex_
    const std::function<void(size_t, size_t)>* work_ = nullptr;
    size_t rounds_ = 0;
    std::atomic<size_t> awake_{0};
    std::atomic<uint64_t> round_{0};
    std::atomic<size_t> finished_{0};
};

}  // namespace bench
