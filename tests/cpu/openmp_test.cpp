// mtsarray inside an OpenMP program: a call from an active parallel region
// runs on its own thread only (the region's threads have the cores), one
// from outside uses the pool; the results are the same. Built only when
// CMake finds OpenMP for the C++ compiler.

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <omp.h>

#include "cpu/threads/thread_count.hpp"
#include "cpu/threads/thread_pool.hpp"

namespace cpu = mtsarray::detail::cpu;

namespace {

size_t run_some_tasks() {
    std::atomic<int> runs{0};
    // long enough for pool threads to wake up and take some
    auto body = [&](size_t) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        runs++;
    };
    const size_t participants = cpu::run_tasks(64, 4, cpu::TaskBody(body));
    EXPECT_EQ(runs.load(), 64);
    return participants;
}

}  // namespace

TEST(OpenMP, ParallelRegionsAreSeen) {
    EXPECT_FALSE(cpu::inside_openmp_parallel_region());
    std::vector<int> inside(4, 0);
#pragma omp parallel num_threads(4)
    { inside[static_cast<size_t>(omp_get_thread_num())] = cpu::inside_openmp_parallel_region() ? 1 : 0; }
    EXPECT_EQ(inside, std::vector<int>(4, 1));
    // a region of one thread is not active: the cores are free
    int single = -1;
#pragma omp parallel num_threads(1)
    { single = cpu::inside_openmp_parallel_region() ? 1 : 0; }
    EXPECT_EQ(single, 0);
}

TEST(OpenMP, CallsFromAParallelRegionStayOnTheirThread) {
    const size_t previous = cpu::thread_count();
    cpu::set_thread_count(4);
    EXPECT_GT(run_some_tasks(), 1u) << "outside a region the pool helps";
    std::vector<size_t> participants(4, 0);
#pragma omp parallel num_threads(4)
    { participants[static_cast<size_t>(omp_get_thread_num())] = run_some_tasks(); }
    EXPECT_EQ(participants, std::vector<size_t>(4, 1));
    cpu::set_thread_count(static_cast<int64_t>(previous));
}
