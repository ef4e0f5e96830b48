#include "host_team.hpp"

#include <chrono>

namespace bench {

HostTeam::HostTeam(size_t threads) {
    for (size_t index = 1; index < threads; index++) {
        threads_.emplace_back([this, index] { loop(index); });
    }
}

HostTeam::~HostTeam() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& thread : threads_) {
        thread.join();
    }
}

double HostTeam::run(size_t rounds, const std::function<void(size_t, size_t)>& work,
                     const std::function<void()>& before, const std::function<void()>& after) {
    const size_t workers = threads_.size();
    awake_.store(0);
    finished_.store(0);
    round_.store(0);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        work_ = &work;
        rounds_ = rounds;
        batch_++;
    }
    wake_.notify_all();
    while (awake_.load() != workers) {
        std::this_thread::yield();
    }
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t round = 1; round <= rounds; round++) {
        if (before) {
            before();
        }
        round_.store(round, std::memory_order_release);
        work(0, workers + 1);
        // every worker counts once per round
        while (finished_.load(std::memory_order_acquire) != round * workers) {
            std::this_thread::yield();
        }
        if (after) {
            after();
        }
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void HostTeam::loop(size_t index) {
    uint64_t seen = 0;
    while (true) {
        const std::function<void(size_t, size_t)>* work = nullptr;
        size_t rounds = 0;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || batch_ != seen; });
            if (stop_) {
                return;
            }
            seen = batch_;
            work = work_;
            rounds = rounds_;
        }
        awake_.fetch_add(1);
        for (uint64_t round = 1; round <= rounds; round++) {
            while (round_.load(std::memory_order_acquire) < round) {
                std::this_thread::yield();
            }
            (*work)(index, threads_.size() + 1);
            finished_.fetch_add(1, std::memory_order_acq_rel);
        }
    }
}

}  // namespace bench
