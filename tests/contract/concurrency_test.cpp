// Concurrency: many threads calling every callback at once, on shared
// read-only arrays and on arrays of their own, and DLPack exports that
// outlive their arrays while other threads create and destroy; and large
// host work, split over the pool threads, from many threads at once. Every
// result is checked against a host reference. Host work may use 4 threads
// here (mtsarray_set_num_threads), so the pool runs under the sanitizers
// whatever the machine. The ThreadSanitizer build of scripts/sanitizers.sh
// runs these (ctest -R concurrency); they also run in every normal build.
// On the CPU the file takes a few seconds; on the simulated GPU about a
// minute on a 2-core machine (every call is handed to the simulation's
// stream threads, with random delays), each case well inside its limit.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#if defined(__linux__)
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "support/backends.hpp"

using namespace mtsarray_test;

namespace {

constexpr int thread_count = 8;
constexpr int iterations = 2000;

std::vector<double> iota(size_t count, double start) {
    std::vector<double> values(count);
    for (size_t i = 0; i < count; i++) {
        values[i] = start + static_cast<double>(i);
    }
    return values;
}

/// Runs `body(thread_index)` on `thread_count` threads released together,
/// and reports failures from every thread (gtest assertions are thread-safe
/// on POSIX; a fatal one only ends its own thread's body).
template <typename Body> void run_threads(Body body) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    threads.reserve(thread_count);
    for (int t = 0; t < thread_count; t++) {
        threads.emplace_back([&, t] {
            ready.fetch_add(1);
            while (!go.load()) {
                std::this_thread::yield();
            }
            body(t);
        });
    }
    while (ready.load() != thread_count) {
        std::this_thread::yield();
    }
    go.store(true);
    for (auto& thread : threads) {
        thread.join();
    }
}

mts_array_t scalar(double value, int* destroyed) {
    return ForeignArray::make(float64(), {}, to_bytes(std::vector<double>{value}), destroyed);
}

// output[s_out, c, p_out + x] = input[s_in, c, p_in + x], on host vectors
void reference_move(std::vector<double>& output, const std::vector<uintptr_t>& output_shape,
                    const std::vector<double>& input, const std::vector<uintptr_t>& input_shape,
                    const std::vector<mts_data_movement_t>& movements) {
    const size_t components = input_shape[1];
    for (const auto& m : movements) {
        for (size_t c = 0; c < components; c++) {
            for (size_t x = 0; x < m.properties_length; x++) {
                output[(m.sample_out * components + c) * output_shape[2] + m.properties_start_out + x] =
                    input[(m.sample_in * components + c) * input_shape[2] + m.properties_start_in + x];
            }
        }
    }
}

// `count` random movements, each into its own output sample: two movements
// of one call that write the same output element have no defined winner on a
// GPU (include/mtsarray.h), so the in-order reference would assert more than
// the contract promises.
std::vector<mts_data_movement_t> random_movements(std::mt19937_64& rng, const std::vector<uintptr_t>& output_shape,
                                                  const std::vector<uintptr_t>& input_shape, size_t count) {
    std::vector<uintptr_t> output_samples(output_shape[0]);
    std::iota(output_samples.begin(), output_samples.end(), uintptr_t(0));
    std::shuffle(output_samples.begin(), output_samples.end(), rng);
    EXPECT_LE(count, output_samples.size()) << "more movements than distinct output samples";
    count = std::min(count, output_samples.size());

    std::vector<mts_data_movement_t> movements;
    for (size_t i = 0; i < count; i++) {
        const uintptr_t length = std::uniform_int_distribution<uintptr_t>(0, std::min(input_shape[2], output_shape[2]))(rng);
        mts_data_movement_t m;
        m.sample_in = std::uniform_int_distribution<uintptr_t>(0, input_shape[0] - 1)(rng);
        m.sample_out = output_samples[i];
        m.properties_length = length;
        m.properties_start_in = std::uniform_int_distribution<uintptr_t>(0, input_shape[2] - length)(rng);
        m.properties_start_out = std::uniform_int_distribution<uintptr_t>(0, output_shape[2] - length)(rng);
        movements.push_back(m);
    }
    return movements;
}

class Concurrency : public ::testing::TestWithParam<DLDevice> {};

// Several pool threads for every test of this file, whatever the machine.
constexpr int32_t pool_threads = 4;
class PoolThreads : public ::testing::Environment {
    void SetUp() override { ASSERT_EQ(mtsarray_set_num_threads(pool_threads), MTS_SUCCESS) << last_error(); }
};
const auto* const pool_threads_environment = ::testing::AddGlobalTestEnvironment(new PoolThreads());

}  // namespace

// Every read-only callback (and the read side of copy, create and move_data)
// on arrays that all threads share.
TEST_P(Concurrency, SharedReadOnlyArrays) {
    const DLDevice device = GetParam();
    MTSARRAY_SKIP_UNLESS_AVAILABLE(device);
    const std::vector<uintptr_t> shape = {16, 3, 8};
    const auto values = iota(product(shape), 0.25);
    const auto expected_bytes = to_bytes(values);
    auto shared = array_from_bytes(device, float64(), shape, expected_bytes);
    const mts_array_t& input = shared.get();
    mts_data_origin_t expected_origin = 0;
    ASSERT_EQ(input.origin(input.ptr, &expected_origin), MTS_SUCCESS) << last_error();

    std::atomic<int> checks{0};
    run_threads([&](int t) {
        std::mt19937_64 rng(1000 + t);
        const std::vector<uintptr_t> output_shape = {6, 3, 5};
        auto output = array_from_bytes(device, float64(), output_shape,
                                       to_bytes(std::vector<double>(product(output_shape), -1.0)));
        auto reference = std::vector<double>(product(output_shape), -1.0);
        const mts_array_t& out = output.get();
        for (int i = 0; i < iterations; i++) {
            mts_data_origin_t origin = 0;
            ASSERT_EQ(input.origin(input.ptr, &origin), MTS_SUCCESS) << last_error();
            ASSERT_EQ(origin, expected_origin);
            DLDevice actual_device = {};
            ASSERT_EQ(input.device(input.ptr, &actual_device), MTS_SUCCESS) << last_error();
            ASSERT_EQ(actual_device.device_type, device.device_type);
            ASSERT_TRUE(same_dtype(dtype_of(input), float64()));
            ASSERT_EQ(shape_of(input), shape);

            // as_dlpack(cpu): the values, then the export released
            ASSERT_EQ(read_bytes(input), expected_bytes);

            // copy on the same device
            mts_array_t copy = {};
            ASSERT_EQ(input.copy(input.ptr, device, &copy), MTS_SUCCESS) << last_error();
            ASSERT_EQ(read_bytes(copy), expected_bytes);
            copy.destroy(copy.ptr);

            // create: a new array filled with a per-thread value
            int destroyed = 0;
            const double fill = 10.0 * t + i;
            const std::vector<uintptr_t> created_shape = {2, static_cast<uintptr_t>(t + 1)};
            mts_array_t created = {};
            ASSERT_EQ(input.create(input.ptr, created_shape.data(), 2, scalar(fill, &destroyed), &created),
                      MTS_SUCCESS)
                << last_error();
            ASSERT_EQ(destroyed, 1);
            ASSERT_EQ(from_bytes<double>(read_bytes(created)), std::vector<double>(2 * (t + 1), fill));
            created.destroy(created.ptr);

            // move_data from the shared input into this thread's output
            const auto movements = random_movements(rng, output_shape, shape, 1 + i % 5);
            ASSERT_EQ(out.move_data(out.ptr, input.ptr, movements.data(), movements.size()), MTS_SUCCESS)
                << last_error();
            reference_move(reference, output_shape, values, shape, movements);

            // an error on this thread: its own message, nothing written
            mts_data_movement_t bad = {static_cast<uintptr_t>(100 + t), 0, 0, 0, 1};
            ASSERT_EQ(out.move_data(out.ptr, input.ptr, &bad, 1), MTS_CALLBACK_ERROR);
            const auto message = last_error();
            ASSERT_NE(message.find("sample_in = " + std::to_string(100 + t)), std::string::npos) << message;
            checks.fetch_add(1);
        }
        ASSERT_EQ(from_bytes<double>(read_bytes(output)), reference);
    });
    EXPECT_EQ(checks.load(), thread_count * iterations);
    EXPECT_EQ(read_bytes(shared), expected_bytes) << "the shared input changed";
}

// Every callback, including the mutating ones, on arrays each thread owns.
TEST_P(Concurrency, OwnArraysEveryCallback) {
    const DLDevice device = GetParam();
    MTSARRAY_SKIP_UNLESS_AVAILABLE(device);
    std::atomic<int> checks{0};
    run_threads([&](int t) {
        for (int i = 0; i < iterations; i++) {
            const double start = 1000.0 * t + i;
            const std::vector<uintptr_t> shape = {4, 2, 3};
            const auto values = iota(24, start);
            auto owned = array_from_bytes(device, float64(), shape, to_bytes(values));
            const mts_array_t& array = owned.get();
            mts_data_origin_t origin = 0;
            ASSERT_EQ(array.origin(array.ptr, &origin), MTS_SUCCESS) << last_error();
            ASSERT_TRUE(same_dtype(dtype_of(array), float64()));
            ASSERT_EQ(device_of(array).device_type, device.device_type);

            // reshape there and back
            const std::vector<uintptr_t> flat = {8, 3};
            ASSERT_EQ(array.reshape(array.ptr, flat.data(), flat.size()), MTS_SUCCESS) << last_error();
            ASSERT_EQ(shape_of(array), flat);
            ASSERT_EQ(array.reshape(array.ptr, shape.data(), shape.size()), MTS_SUCCESS) << last_error();

            // swap_axes: [4, 2, 3] -> [3, 2, 4]
            ASSERT_EQ(array.swap_axes(array.ptr, 0, 2), MTS_SUCCESS) << last_error();
            ASSERT_EQ(shape_of(array), (std::vector<uintptr_t>{3, 2, 4}));
            const auto swapped = from_bytes<double>(read_bytes(array));
            for (size_t a = 0; a < 4; a++) {
                for (size_t b = 0; b < 2; b++) {
                    for (size_t c = 0; c < 3; c++) {
                        ASSERT_EQ(swapped[(c * 2 + b) * 4 + a], values[(a * 2 + b) * 3 + c]);
                    }
                }
            }

            // move_data within the array (the snapshot path): reverse samples
            std::vector<mts_data_movement_t> reverse;
            for (uintptr_t s = 0; s < 3; s++) {
                reverse.push_back({s, 2 - s, 0, 0, 4});
            }
            ASSERT_EQ(array.move_data(array.ptr, array.ptr, reverse.data(), reverse.size()), MTS_SUCCESS)
                << last_error();
            const auto reversed = from_bytes<double>(read_bytes(array));
            for (size_t s = 0; s < 3; s++) {
                for (size_t x = 0; x < 8; x++) {
                    ASSERT_EQ(reversed[(2 - s) * 8 + x], swapped[s * 8 + x]);
                }
            }

            // copy, create, from_dlpack of our own export
            mts_array_t copy = {};
            ASSERT_EQ(array.copy(array.ptr, device, &copy), MTS_SUCCESS) << last_error();
            int destroyed = 0;
            mts_array_t created = {};
            const uintptr_t created_shape[] = {3};
            ASSERT_EQ(array.create(array.ptr, created_shape, 1, scalar(start, &destroyed), &created), MTS_SUCCESS)
                << last_error();
            ASSERT_EQ(from_bytes<double>(read_bytes(created)), std::vector<double>(3, start));
            DLManagedTensorVersioned* tensor = nullptr;
            ASSERT_EQ(copy.as_dlpack(copy.ptr, &tensor, device, nullptr, dlpack_version()), MTS_SUCCESS)
                << last_error();
            copy.destroy(copy.ptr);  // the export keeps the data alive
            mts_array_t imported = {};
            ASSERT_EQ(array.from_dlpack(array.ptr, tensor, &imported), MTS_SUCCESS) << last_error();
            ASSERT_EQ(from_bytes<double>(read_bytes(imported)), reversed);
            imported.destroy(imported.ptr);
            created.destroy(created.ptr);
            checks.fetch_add(1);
            // `owned` is destroyed here
        }
    });
    EXPECT_EQ(checks.load(), thread_count * iterations);
}

// Half the threads export arrays and destroy them at once, handing the
// exports to the other half, which check the values and release them, while
// every thread also creates and destroys unrelated arrays (the registry of
// live arrays changes under everyone's feet).
TEST_P(Concurrency, ExportsOutliveTheirArrays) {
    const DLDevice device = GetParam();
    MTSARRAY_SKIP_UNLESS_AVAILABLE(device);
    struct Item {
        DLManagedTensorVersioned* tensor;
        double first;
    };
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Item> queue;
    int producers_left = thread_count / 2;
    std::atomic<int> consumed{0};

    run_threads([&](int t) {
        const bool producer = t % 2 == 0;
        if (producer) {
            // the count goes down even when an assertion ends the loop early,
            // so that the consumers never wait forever
            struct Done {
                std::mutex& mutex;
                std::condition_variable& ready;
                int& producers_left;
                ~Done() {
                    std::lock_guard<std::mutex> lock(mutex);
                    producers_left -= 1;
                    ready.notify_all();
                }
            } done{mutex, ready, producers_left};
            for (int i = 0; i < 2 * iterations; i++) {
                const double first = 1e6 * t + i;
                Item item{nullptr, first};
                {
                    auto array = array_from_bytes(device, float64(), {5, 2}, to_bytes(iota(10, first)));
                    const mts_array_t& handle = array.get();
                    ASSERT_EQ(handle.as_dlpack(handle.ptr, &item.tensor, DLDevice{kDLCPU, 0}, nullptr,
                                               dlpack_version()),
                              MTS_SUCCESS)
                        << last_error();
                    bool is_ours = false;
                    ASSERT_EQ(mtsarray_is_mtsarray(&handle, &is_ours), MTS_SUCCESS);
                    ASSERT_TRUE(is_ours);
                }  // the array is gone, the export stays
                {
                    std::lock_guard<std::mutex> lock(mutex);
                    queue.push_back(item);
                }
                ready.notify_one();
            }
            return;
        }
        while (true) {
            // churn: unrelated arrays made and destroyed
            auto churn = mtsarray::Array::zeros(device, float32(), {static_cast<uintptr_t>(t + 1), 7});
            Item item{nullptr, 0};
            {
                std::unique_lock<std::mutex> lock(mutex);
                ready.wait(lock, [&] { return !queue.empty() || producers_left == 0; });
                if (queue.empty()) {
                    return;
                }
                item = queue.front();
                queue.pop_front();
            }
            const DLTensor& dl = item.tensor->dl_tensor;
            EXPECT_EQ(dl.ndim, 2);
            EXPECT_EQ(dl.device.device_type, kDLCPU);
            std::vector<double> seen(10);
            std::memcpy(seen.data(), static_cast<const char*>(dl.data) + dl.byte_offset, 10 * sizeof(double));
            EXPECT_EQ(seen, iota(10, item.first));
            item.tensor->deleter(item.tensor);
            consumed.fetch_add(1);
        }
    });
    EXPECT_EQ(consumed.load(), (thread_count / 2) * 2 * iterations);
    EXPECT_TRUE(queue.empty());
}

// Large move_data, copy, create and swap_axes from every thread at once:
// each call splits its work over the pool threads left free by the others
// (host memory), and gives the reference bytes.
TEST_P(Concurrency, LargeWorkSharesThePool) {
    const DLDevice device = GetParam();
    MTSARRAY_SKIP_UNLESS_AVAILABLE(device);
    // 2 MiB inputs: above the 1 MiB from which host work is split
    const std::vector<uintptr_t> shape = {2048, 128};
    const auto values = iota(product(shape), 0.5);
    auto shared = array_from_bytes(device, float64(), shape, to_bytes(values));
    const mts_array_t& input = shared.get();
    std::atomic<int> checks{0};
    run_threads([&](int t) {
        for (int i = 0; i < 3; i++) {
            // move_data: a permutation of the samples, into a wider output
            const std::vector<uintptr_t> output_shape = {2048, 160};
            auto output = mtsarray::Array::zeros(device, float64(), output_shape);
            std::vector<mts_data_movement_t> movements(2048);
            for (uintptr_t s = 0; s < 2048; s++) {
                movements[s] = {(s * 37 + static_cast<uintptr_t>(t)) % 2048, s, 0, 32, 128};
            }
            const mts_array_t& out = output.get();
            ASSERT_EQ(out.move_data(out.ptr, input.ptr, movements.data(), movements.size()), MTS_SUCCESS)
                << last_error();
            std::vector<double> expected(product(output_shape), 0.0);
            for (const auto& m : movements) {
                for (size_t x = 0; x < 128; x++) {
                    expected[m.sample_out * 160 + 32 + x] = values[m.sample_in * 128 + x];
                }
            }
            ASSERT_EQ(from_bytes<double>(read_bytes(output)), expected);

            // copy, then swap_axes of the copy
            mts_array_t copy = {};
            ASSERT_EQ(input.copy(input.ptr, device, &copy), MTS_SUCCESS) << last_error();
            ASSERT_EQ(copy.swap_axes(copy.ptr, 0, 1), MTS_SUCCESS) << last_error();
            const auto swapped = from_bytes<double>(read_bytes(copy));
            copy.destroy(copy.ptr);
            for (size_t a = 0; a < 2048; a += 97) {
                for (size_t b = 0; b < 128; b++) {
                    ASSERT_EQ(swapped[b * 2048 + a], values[a * 128 + b]);
                }
            }

            // create: filled with this thread's value
            int destroyed = 0;
            const double fill = 100.0 * t + i + 0.25;
            mts_array_t created = {};
            ASSERT_EQ(input.create(input.ptr, shape.data(), shape.size(), scalar(fill, &destroyed), &created),
                      MTS_SUCCESS)
                << last_error();
            ASSERT_EQ(from_bytes<double>(read_bytes(created)), std::vector<double>(product(shape), fill));
            created.destroy(created.ptr);
            checks.fetch_add(1);
        }
    });
    EXPECT_EQ(checks.load(), thread_count * 3);
    EXPECT_EQ(from_bytes<double>(read_bytes(shared)), values) << "the shared input changed";
}

// Every way host work is split, from one caller (so that the pool's threads
// do take part), checked against a reference: move_data by movement blocks,
// by byte pieces and as one run; copy; fill; swap_axes through the blocked
// and the generic transposes. Under ThreadSanitizer this is what proves the
// split kernels race-free.
TEST_P(Concurrency, EverySplitOnThePool) {
    const DLDevice device = GetParam();
    MTSARRAY_SKIP_UNLESS_AVAILABLE(device);
    const std::vector<uintptr_t> shape = {4096, 96};  // 3 MiB of float64
    const auto values = iota(product(shape), 0.75);
    auto input = array_from_bytes(device, float64(), shape, to_bytes(values));
    const mts_array_t& in = input.get();

    auto check_move = [&](const std::vector<mts_data_movement_t>& movements, const char* what) {
        auto output = mtsarray::Array::zeros(device, float64(), shape);
        const mts_array_t& out = output.get();
        ASSERT_EQ(out.move_data(out.ptr, in.ptr, movements.data(), movements.size()), MTS_SUCCESS) << last_error();
        std::vector<double> expected(product(shape), 0.0);
        for (const auto& m : movements) {
            for (size_t x = 0; x < m.properties_length; x++) {
                expected[m.sample_out * 96 + m.properties_start_out + x] = values[m.sample_in * 96 + m.properties_start_in + x];
            }
        }
        ASSERT_EQ(from_bytes<double>(read_bytes(output)), expected) << what;
    };
    std::vector<mts_data_movement_t> scattered;  // many movements: blocks
    for (uintptr_t s = 0; s < 4096; s++) {
        scattered.push_back({(s * 97) % 4096, (s * 89) % 4096, 8, 0, 88});
    }
    check_move(scattered, "movement blocks");
    std::vector<mts_data_movement_t> long_list;  // from 4096 movements: checked in parts on the pool
    for (uintptr_t k = 0; k < 3 * 4096; k++) {
        const uintptr_t third = k / 4096;  // each output sample three times, a third of its row each time
        long_list.push_back({(k * 97) % 4096, (k * 89) % 4096, 32 * (2 - third), 32 * third, 32});
    }
    check_move(long_list, "a long list");
    {
        // few movements of 512 rows each (2.3 MiB in all): byte pieces
        const std::vector<uintptr_t> blocks = {8, 512, 96};
        const auto block_values = iota(product(blocks), -3.0);
        auto source = array_from_bytes(device, float64(), blocks, to_bytes(block_values));
        auto output = mtsarray::Array::zeros(device, float64(), blocks);
        const std::vector<mts_data_movement_t> few = {{7, 0, 0, 0, 96}, {2, 5, 0, 0, 96}, {4, 1, 16, 32, 64},
                                                      {0, 7, 0, 0, 96}, {5, 2, 0, 0, 96}, {1, 6, 90, 0, 6}};
        const mts_array_t& out = output.get();
        ASSERT_EQ(out.move_data(out.ptr, source.get().ptr, few.data(), few.size()), MTS_SUCCESS) << last_error();
        std::vector<double> expected(product(blocks), 0.0);
        for (const auto& m : few) {
            for (size_t row = 0; row < 512; row++) {
                for (size_t x = 0; x < m.properties_length; x++) {
                    expected[(m.sample_out * 512 + row) * 96 + m.properties_start_out + x] =
                        block_values[(m.sample_in * 512 + row) * 96 + m.properties_start_in + x];
                }
            }
        }
        ASSERT_EQ(from_bytes<double>(read_bytes(output)), expected) << "few movements";
    }
    std::vector<mts_data_movement_t> in_order;  // one run
    for (uintptr_t s = 0; s < 4000; s++) {
        in_order.push_back({s + 50, s + 10, 4, 2, 90});
    }
    check_move(in_order, "one run");

    mts_array_t copy = {};
    ASSERT_EQ(in.copy(in.ptr, device, &copy), MTS_SUCCESS) << last_error();
    ASSERT_EQ(from_bytes<double>(read_bytes(copy)), values);
    ASSERT_EQ(copy.swap_axes(copy.ptr, 0, 1), MTS_SUCCESS) << last_error();  // blocked 8-byte transpose
    const auto swapped = from_bytes<double>(read_bytes(copy));
    copy.destroy(copy.ptr);
    for (size_t a = 0; a < 4096; a += 31) {
        for (size_t b = 0; b < 96; b++) {
            ASSERT_EQ(swapped[b * 4096 + a], values[a * 96 + b]);
        }
    }
    auto complex = array_from_bytes(device, make_dtype(kDLComplex, 128), {1024, 2, 96}, to_bytes(iota(2 * 1024 * 2 * 96, 1.0)));
    const mts_array_t& c = complex.get();
    ASSERT_EQ(c.swap_axes(c.ptr, 0, 2), MTS_SUCCESS) << last_error();  // generic transpose, 16-byte elements
    const auto complex_values = from_bytes<double>(read_bytes(complex));
    for (size_t i = 0; i < 1024; i += 17) {
        for (size_t k = 0; k < 96; k += 5) {
            // element (k, 1, i) after the swap is (i, 1, k) before; 2 doubles each
            ASSERT_EQ(complex_values[((k * 2 + 1) * 1024 + i) * 2], 1.0 + static_cast<double>(((i * 2 + 1) * 96 + k) * 2));
        }
    }

    int destroyed = 0;
    mts_array_t created = {};
    ASSERT_EQ(in.create(in.ptr, shape.data(), shape.size(), scalar(-2.5, &destroyed), &created), MTS_SUCCESS)
        << last_error();
    ASSERT_EQ(from_bytes<double>(read_bytes(created)), std::vector<double>(product(shape), -2.5));
    created.destroy(created.ptr);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, Concurrency, ::testing::ValuesIn(test_devices()),
                         [](const ::testing::TestParamInfo<DLDevice>& info) { return device_name(info.param); });

// ---- fork(), the thread count and the pool, all at once -------------------------

#if defined(__linux__)

namespace {

// A sanitizer's own allocator may be locked by another thread at a fork,
// and then hangs the child's first allocation inside the sanitizer runtime,
// before any mtsarray code. AddressSanitizer does; so does ThreadSanitizer
// before LLVM 19 (the child spins in __tsan::DenseSlabAlloc::Refill on a
// lock a parent thread held: the runtime locks its allocator around fork
// only since llvm/llvm-project#96600), and its runtime stops checking a
// multi-threaded parent's child anyway. The forks are left out of both
// builds; the plain build runs them.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool forks_usable = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool forks_usable = false;
#else
constexpr bool forks_usable = true;
#endif
#else
constexpr bool forks_usable = true;
#endif

/// What a forked child does (and must be able to do whatever the parent's
/// other threads were doing at the fork): set the thread count, make arrays,
/// move data between them, read them back, destroy them, ask why a backend
/// is unavailable, take the data pointer of an array a thread of the parent
/// was handing out (`shared`, when not null). One thread in the
/// child: a ThreadSanitizer child may not start threads. Exit status 0 when
/// every value is right; a child stuck on a lock is killed by its alarm.
[[noreturn]] void child_uses_the_library(const mts_array_t* shared) {
    alarm(5);
    int status = mtsarray_set_num_threads(1) == MTS_SUCCESS ? 0 : 1;
    try {
        const DLDevice cpu = {kDLCPU, 0};
        for (int round = 0; round < 4 && status == 0; round++) {
            auto input = array_from_bytes(cpu, float64(), {40, 3}, to_bytes(iota(120, 1.0)));
            auto output = mtsarray::Array::zeros(cpu, float64(), {40, 3});
            std::vector<mts_data_movement_t> movements;
            for (uintptr_t i = 0; i < 40; i++) {
                movements.push_back({i, 39 - i, 0, 0, 3});
            }
            const mts_array_t& raw = output.get();
            if (raw.move_data(raw.ptr, input.get().ptr, movements.data(), movements.size()) != MTS_SUCCESS) {
                status = 2;
                break;
            }
            const auto values = from_bytes<double>(read_bytes(output));
            if (values[0] != 1.0 + 39 * 3 || values[39 * 3 + 2] != 3.0) {
                status = 3;
            }
        }
        int32_t count = 0;
        if (status == 0 && (mtsarray_get_num_threads(&count) != MTS_SUCCESS || count != 1)) {
            status = 4;
        }
        if (status == 0 && std::string(mtsarray_backend_unavailable_reason(kDLCPU)) != "") {
            status = 6;
        }
        void* data = nullptr;
        if (status == 0 && shared != nullptr && (mtsarray_data(shared, &data) != MTS_SUCCESS || data == nullptr)) {
            status = 7;
        }
    } catch (...) {
        status = 5;
    }
    _exit(status);
}

/// Forks, runs child_uses_the_library(shared) in the child, and returns
/// what became of it: "" when it exited with 0.
std::string fork_and_use_the_library(const mts_array_t* shared) {
    const pid_t child = fork();
    if (child == -1) {
        return "fork failed";
    }
    if (child == 0) {
        child_uses_the_library(shared);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) {
        return "waitpid failed";
    }
    if (WIFSIGNALED(status)) {
        return "the child was killed by signal " + std::to_string(WTERMSIG(status)) +
               (WTERMSIG(status) == SIGALRM ? " (stuck: a lock held by a thread of the parent)" : "");
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return "the child exited with status " + std::to_string(WEXITSTATUS(status));
    }
    return "";
}

/// Threads of the parent making and destroying arrays, setting the thread
/// count, asking why backends are unavailable and handing out the data
/// pointer of an array the child also uses (shared()), until `stop`.
class BusyParent {
public:
    BusyParent() {
        for (int t = 0; t < 3; t++) {
            threads_.emplace_back([this] {
                while (!stop_.load(std::memory_order_relaxed)) {
                    std::vector<mtsarray::Array> arrays;
                    for (int i = 0; i < 70; i++) {
                        arrays.push_back(mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {2, 2}));
                    }
                }
            });
        }
        threads_.emplace_back([this] {
            for (int32_t round = 0; !stop_.load(std::memory_order_relaxed); round++) {
                EXPECT_EQ(mtsarray_set_num_threads(1 + round % 4), MTS_SUCCESS) << last_error();
            }
        });
        threads_.emplace_back([this] {
            void* data = nullptr;
            while (!stop_.load(std::memory_order_relaxed)) {
                EXPECT_EQ(mtsarray_data(&shared_.get(), &data), MTS_SUCCESS) << last_error();
            }
        });
        threads_.emplace_back([this] {
            const DLDeviceType types[] = {kDLCPU, kDLCUDA, kDLROCM, kDLVulkan, kDLMetal};
            for (size_t round = 0; !stop_.load(std::memory_order_relaxed); round++) {
                EXPECT_NE(mtsarray_backend_unavailable_reason(types[round % 5]), nullptr);
            }
        });
    }
    ~BusyParent() {
        stop_.store(true);
        for (auto& thread : threads_) {
            thread.join();
        }
        EXPECT_EQ(mtsarray_set_num_threads(4), MTS_SUCCESS);
    }
    BusyParent(const BusyParent&) = delete;
    BusyParent& operator=(const BusyParent&) = delete;

    const mts_array_t* shared() const { return &shared_.get(); }

private:
    mtsarray::Array shared_ = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {8, 8});
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
};

// A fork while other threads make and destroy arrays and set the thread
// count: the child gets every lock of the library free.
TEST(Fork, TheChildMakesUsesAndDestroysArrays) {
    if (!forks_usable) {
        GTEST_SKIP() << "the sanitizer's allocator can hang a forked child of a multi-threaded parent";
    }
    BusyParent parent;
    for (int fork_number = 0; fork_number < 40; fork_number++) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        const std::string failure = fork_and_use_the_library(parent.shared());
        ASSERT_EQ(failure, "") << "fork " << fork_number;
    }
}

// Everything at once for a bounded time (about a second): callers whose
// move_data work runs on the pool, a thread changing the thread count,
// threads making and destroying arrays and exports, and forks whose
// children use the library. The sanitizer builds run it without the forks
// (ctest -R concurrency: ThreadSanitizer; every test: AddressSanitizer).
TEST(Stress, ThreadCountPoolWorkForksAndArraysAtOnce) {
    const DLDevice cpu = {kDLCPU, 0};
    constexpr uintptr_t samples = 8192;
    constexpr uintptr_t properties = 16;
    const auto values = iota(samples * properties, 0.0);
    auto input = array_from_bytes(cpu, float64(), {samples, properties}, to_bytes(values));
    std::vector<mts_data_movement_t> movements(samples);
    for (uintptr_t i = 0; i < samples; i++) {
        movements[i] = {(i * 17) % samples, i, 0, 0, properties};  // one write per output sample: split
    }
    std::atomic<bool> stop{false};
    std::vector<std::thread> callers;
    for (int t = 0; t < 2; t++) {
        callers.emplace_back([&] {
            auto output = mtsarray::Array::zeros(cpu, float64(), {samples, properties});
            const mts_array_t& raw = output.get();
            while (!stop.load(std::memory_order_relaxed)) {
                ASSERT_EQ(raw.move_data(raw.ptr, input.get().ptr, movements.data(), movements.size()), MTS_SUCCESS)
                    << last_error();
            }
            const auto moved = from_bytes<double>(read_bytes(output));
            for (uintptr_t i = 0; i < samples; i += 97) {
                ASSERT_EQ(moved[i * properties + 3], values[((i * 17) % samples) * properties + 3]);
            }
        });
    }
    {
        BusyParent parent;
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
        for (int fork_number = 0; std::chrono::steady_clock::now() < end; fork_number++) {
            if (forks_usable && fork_number % 8 == 0) {
                const std::string failure = fork_and_use_the_library(parent.shared());
                EXPECT_EQ(failure, "") << "fork " << fork_number;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        stop.store(true);
    }
    for (auto& caller : callers) {
        caller.join();
    }
}

}  // namespace

#endif
