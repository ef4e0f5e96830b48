// mtsarray-pool-vs-openmp: the measurements behind the choice of a
// persistent pool of our own (src/cpu/thread_pool) over the OpenMP runtime
// for host threads. First the pool alone:
//   0. fork and join: one task of 5 us per thread on 2, 4, 8, ... threads,
//      called back to back (the threads still spinning) and after an idle
//      gap (asleep): the call's time and when the last recruited thread
//      started its task (its wake-up).
// Then the same work, a memcpy cut in one piece per thread, is
// run on mtsarray's pool and in an OpenMP parallel region with as many
// threads (mtsarray_get_num_threads), next to one thread:
//   1. one caller, sizes from 64 KiB to 24 MiB: the cost of waking and
//      joining threads, and the scaling;
//   2. 8 user threads calling at once: throughput, and how many threads the
//      process then has (oversubscription);
//   3. calls from inside an OpenMP parallel region;
//   4. the CPU time an idle process burns in the 100 ms after a burst of
//      calls (threads spinning for more work).
// Times are medians of interleaved rounds. Usage: mtsarray-pool-vs-openmp

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cpu/threads/thread_count.hpp"
#include "cpu/threads/thread_pool.hpp"

namespace cpu = mtsarray::detail::cpu;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

size_t process_threads() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("Threads:", 0) == 0) {
            return std::stoul(line.substr(8));
        }
    }
    return 0;
}

double cpu_seconds() {
    rusage usage = {};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

struct Buffers {
    explicit Buffers(size_t bytes) : source(bytes, 1), destination(bytes, 0) {}
    std::vector<char> source;
    std::vector<char> destination;
};

void copy_piece(Buffers& b, size_t piece, size_t pieces) {
    const size_t bytes = b.source.size();
    const size_t begin = bytes * piece / pieces;
    const size_t end = bytes * (piece + 1) / pieces;
    std::memcpy(b.destination.data() + begin, b.source.data() + begin, end - begin);
}

void serial_copy(Buffers& b) {
    copy_piece(b, 0, 1);
}

void pool_copy(Buffers& b, size_t threads) {
    auto task = [&](size_t piece) { copy_piece(b, piece, threads); };
    cpu::run_tasks(threads, threads, cpu::TaskBody(task));
}

void openmp_copy(Buffers& b, size_t threads) {
    const auto count = static_cast<int>(threads);
#pragma omp parallel for schedule(static) num_threads(count)
    for (int piece = 0; piece < count; piece++) {
        copy_piece(b, static_cast<size_t>(piece), threads);
    }
}

/// Median seconds per call of each operation, interleaved rounds of
/// batches lasting about 5 ms.
std::vector<double> measure(const std::vector<std::function<void()>>& operations, int rounds = 15) {
    std::vector<size_t> batch(operations.size(), 1);
    for (size_t i = 0; i < operations.size(); i++) {
        operations[i]();
        const auto start = Clock::now();
        operations[i]();
        batch[i] = std::max<size_t>(1, static_cast<size_t>(0.005 / std::max(seconds_since(start), 1e-9)));
    }
    std::vector<std::vector<double>> samples(operations.size());
    for (int round = 0; round < rounds; round++) {
        for (size_t i = 0; i < operations.size(); i++) {
            const auto start = Clock::now();
            for (size_t k = 0; k < batch[i]; k++) {
                operations[i]();
            }
            samples[i].push_back(seconds_since(start) / static_cast<double>(batch[i]));
        }
    }
    std::vector<double> medians;
    for (auto& s : samples) {
        std::sort(s.begin(), s.end());
        medians.push_back(s[s.size() / 2]);
    }
    return medians;
}

std::string format_time(double seconds) {
    char text[32];
    if (seconds < 1e-3) {
        std::snprintf(text, sizeof(text), "%.1f us", seconds * 1e6);
    } else {
        std::snprintf(text, sizeof(text), "%.2f ms", seconds * 1e3);
    }
    return text;
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

void fork_join_rows(size_t most_threads) {
    std::printf("\n0. fork and join: one 5 us task per thread, median of 200 calls: the call / the last task's start\n");
    std::printf("%8s %24s %24s %24s\n", "threads", "back to back", "after 100 us idle", "after 2 ms idle");
    for (size_t threads = 2; threads <= most_threads; threads *= 2) {
        std::printf("%8zu", threads);
        for (int gap : {0, 100, 2000}) {
            std::vector<double> calls;
            std::vector<double> last_starts;
            std::vector<double> starts(threads);
            for (int call = 0; call < 200; call++) {
                std::this_thread::sleep_for(std::chrono::microseconds(gap));
                const auto start = Clock::now();
                auto task = [&](size_t index) {
                    starts[index] = seconds_since(start);
                    const auto until = Clock::now() + std::chrono::microseconds(5);
                    while (Clock::now() < until) {
                    }
                };
                cpu::run_tasks(threads, threads, cpu::TaskBody(task));
                calls.push_back(seconds_since(start));
                last_starts.push_back(*std::max_element(starts.begin(), starts.end()));
            }
            std::printf(" %11s / %10s", format_time(median(calls)).c_str(), format_time(median(last_starts)).c_str());
        }
        std::printf("\n");
    }
}

}  // namespace

int main() {
    const size_t threads = cpu::thread_count();
    std::printf("mtsarray-pool-vs-openmp: %zu threads (mtsarray_get_num_threads), OpenMP %d, %u CPUs\n", threads,
                _OPENMP, std::thread::hardware_concurrency());
    std::printf("work: memcpy cut in %zu equal pieces, one per thread\n", threads);

    fork_join_rows(threads);

    // The pool is measured before the process ever enters an OpenMP region:
    // OpenMP's threads keep spinning after a region (part 4), and would take
    // the cores from the pool's threads in the rounds that follow.
    std::printf("\n1. one caller: time per call (speedup over one thread measured alongside)\n");
    std::printf("%10s %12s %20s %12s %20s\n", "bytes", "1 thread", "mtsarray pool", "1 thread", "OpenMP");
    const std::vector<size_t> sizes = {64, 256, 1024, 4096, 24576};
    std::vector<std::vector<double>> pool_times;
    for (size_t kib : sizes) {
        Buffers b(kib << 10);
        pool_times.push_back(measure({[&] { serial_copy(b); }, [&] { pool_copy(b, threads); }}));
    }
    for (size_t i = 0; i < sizes.size(); i++) {
        Buffers b(sizes[i] << 10);
        const auto t = measure({[&] { serial_copy(b); }, [&] { openmp_copy(b, threads); }});
        const auto& p = pool_times[i];
        std::printf("%7zu KiB %12s %12s (%4.2fx) %12s %12s (%4.2fx)\n", sizes[i], format_time(p[0]).c_str(),
                    format_time(p[1]).c_str(), p[0] / p[1], format_time(t[0]).c_str(), format_time(t[1]).c_str(),
                    t[0] / t[1]);
    }

    std::printf("\n2. 8 user threads, each copying its own 4 MiB in a loop for 0.5 s\n");
    std::printf("%-14s %16s %22s\n", "", "copies / second", "threads in process");
    for (int variant = 0; variant < 3; variant++) {
        const char* name = variant == 0 ? "1 thread each" : variant == 1 ? "mtsarray pool" : "OpenMP";
        std::atomic<bool> stop{false};
        std::atomic<size_t> copies{0};
        std::atomic<size_t> most_threads{0};
        std::vector<std::thread> users;
        for (int u = 0; u < 8; u++) {
            users.emplace_back([&, variant] {
                Buffers b(size_t(4) << 20);
                while (!stop.load()) {
                    if (variant == 0) {
                        serial_copy(b);
                    } else if (variant == 1) {
                        pool_copy(b, threads);
                    } else {
                        openmp_copy(b, threads);
                    }
                    copies++;
                }
            });
        }
        const auto start = Clock::now();
        while (seconds_since(start) < 0.5) {
            most_threads = std::max(most_threads.load(), process_threads());
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        stop = true;
        for (auto& user : users) {
            user.join();
        }
        std::printf("%-14s %16.0f %22zu\n", name, static_cast<double>(copies.load()) / seconds_since(start),
                    most_threads.load());
    }

    std::printf("\n3. called from inside an OpenMP parallel region of %zu threads (4 MiB each)\n", threads);
    {
        std::vector<Buffers> buffers;
        for (size_t i = 0; i < threads; i++) {
            buffers.emplace_back(size_t(4) << 20);
        }
        size_t pool_participants = 0;
        const auto count = static_cast<int>(threads);
        const auto t = measure({
            [&] {
#pragma omp parallel num_threads(count)
                serial_copy(buffers[static_cast<size_t>(omp_get_thread_num())]);
            },
            [&] {
#pragma omp parallel num_threads(count)
                {
                    auto& b = buffers[static_cast<size_t>(omp_get_thread_num())];
                    auto task = [&](size_t piece) { copy_piece(b, piece, threads); };
                    const size_t used = cpu::run_tasks(threads, threads, cpu::TaskBody(task));
#pragma omp critical
                    pool_participants = std::max(pool_participants, used);
                }
            },
            [&] {
#pragma omp parallel num_threads(count)
                openmp_copy(buffers[static_cast<size_t>(omp_get_thread_num())], threads);
            },
        });
        std::printf("region, 1 thread each: %s | mtsarray pool: %s (threads per call: %zu) | nested OpenMP: %s "
                    "(max active levels %d)\n",
                    format_time(t[0]).c_str(), format_time(t[1]).c_str(), pool_participants,
                    format_time(t[2]).c_str(), omp_get_max_active_levels());
    }

    std::printf("\n4. CPU time burnt in the 100 ms after a burst of 1 MiB copies (process idle)\n");
    for (int variant = 1; variant < 3; variant++) {
        Buffers b(size_t(1) << 20);
        for (int i = 0; i < 2000; i++) {
            if (variant == 1) {
                pool_copy(b, threads);
            } else {
                openmp_copy(b, threads);
            }
        }
        const double before = cpu_seconds();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::printf("%-14s %.1f ms of CPU\n", variant == 1 ? "mtsarray pool" : "OpenMP", (cpu_seconds() - before) * 1e3);
    }
    return 0;
}
