// A training loop on the simulated runtime, as scripts/training_loop.py
// runs it with PyTorch on a real GPU, through the public C API:
//
//  - another library's caching allocator (PyTorch's, as the simulation
//    models it: tests/support/simulation/memory.cpp) holds most of a device
//    of finite size, and the arrays the step writes are its memory, wrapped;
//  - one step -- a copy_into from a host array, a move_data into the wrapped
//    memory, a move plan execute, then the framework's own kernel on the
//    result -- is captured in Global mode on a user stream after a few eager
//    steps there, and replayed 1000 times, the next batch written into the
//    same host array before each replay; every replay is checked against an
//    element-by-element reference, exactly;
//  - 4 data-loading threads come and go every 50 replays (the capture
//    included), each with its own work on its own stream (a user stream or
//    its per-thread default stream), checked; one hands its array to the
//    main thread, which destroys it once that thread has exited (a later
//    thread may have its id: tests/support/simulation/streams.cpp);
//  - afterwards, memory: what mtsarray freed beyond its release threshold
//    goes back at the next synchronisation, an allocation the other
//    library's cache leaves no room for fails with a clear out-of-memory
//    error and touches nothing, fits once that cache is given back, and
//    mtsarray_release_cached_memory gives the pool's cache back.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "mtsarray.h"
#include "support/backends.hpp"
#include "support/movements.hpp"
#include "support/simulated_device_test.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};
constexpr DLDevice cpu = {kDLCPU, 0};
constexpr size_t MiB = size_t(1) << 20;

constexpr uintptr_t rows = 512;           // samples of a batch
constexpr uintptr_t columns = 8;          // properties
constexpr uintptr_t gathered_rows = 640;  // samples of the array a batch is gathered into
constexpr int warm_up_steps = 3;
constexpr int replays = 1000;
constexpr int worker_count = 4;
constexpr int workers_every = 50;  // replays

constexpr size_t device_room = 96 * MiB;  // beside what the device held before the test
constexpr size_t foreign_hold = 64 * MiB;
constexpr uint64_t release_threshold = 4 * MiB;

/// The step's gather: every batch sample to a row of its own of the
/// gathered array, in a scattered order, ranges of 1 to 4 properties.
std::vector<mts_data_movement_t> batch_movements(std::mt19937_64& rng) {
    std::vector<uintptr_t> order(gathered_rows);
    std::iota(order.begin(), order.end(), uintptr_t(0));
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<mts_data_movement_t> movements(rows);
    for (uintptr_t sample = 0; sample < rows; sample++) {
        const uintptr_t start = rng() % 3;
        movements[sample] = {sample, order[sample], start, start + 1, 1 + rng() % (columns - 4)};
    }
    return movements;
}

/// The plan's movements: every gathered row, whole, to the mirrored row.
std::vector<mts_data_movement_t> mirrored_rows() {
    std::vector<mts_data_movement_t> movements(gathered_rows);
    for (uintptr_t sample = 0; sample < gathered_rows; sample++) {
        movements[sample] = {sample, gathered_rows - 1 - sample, 0, 0, columns};
    }
    return movements;
}

std::vector<double> random_batch(std::mt19937_64& rng) {
    std::normal_distribution<double> normal;
    std::vector<double> values(rows * columns);
    for (auto& value : values) {
        value = normal(rng);
    }
    return values;
}

/// The framework's own kernel on mtsarray's result (PyTorch's `output * 2 + 1`).
void scale_and_shift(const double* output, double* result, size_t count) {
    for (size_t i = 0; i < count; i++) {
        result[i] = output[i] * 2.0 + 1.0;
    }
}

/// How many elements differ (all of them when the sizes do).
size_t differing(const std::vector<double>& values, const std::vector<double>& expected) {
    if (values.size() != expected.size()) {
        return std::max(values.size(), expected.size());
    }
    size_t count = 0;
    for (size_t i = 0; i < values.size(); i++) {
        count += values[i] != expected[i] ? 1 : 0;
    }
    return count;
}

std::vector<double> values_of(const mtsarray::Array& array) { return from_bytes<double>(read_bytes(array)); }

/// What the device holds after each step, computed on the host, element
/// by element (support/movements.hpp), from the same zeros.
struct StepReference {
    std::vector<mts_data_movement_t> movements;
    std::vector<mts_data_movement_t> plan_movements;
    std::vector<double> gathered = std::vector<double>(gathered_rows * columns, 0.0);
    std::vector<double> output = std::vector<double>(gathered_rows * columns, 0.0);
    std::vector<double> result = std::vector<double>(gathered_rows * columns, 0.0);

    void step(const std::vector<double>& batch) {
        gathered = moved(gathered, batch, columns, columns, movements);
        output = moved(output, gathered, columns, columns, plan_movements);
        scale_and_shift(output.data(), result.data(), result.size());
    }
};

/// The data-loading threads of one round, and what they report.
struct DataLoaders {
    std::vector<std::thread> threads;
    std::mutex mutex;
    std::vector<std::string> errors;
    std::vector<mtsarray::Array> handed;  // by exited threads, destroyed by the main thread

    void report(const std::string& error) {
        std::lock_guard<std::mutex> lock(mutex);
        errors.push_back(error);
    }
    std::vector<std::string> reported() {
        std::lock_guard<std::mutex> lock(mutex);
        return errors;
    }
    /// Joins the round's threads, then destroys what they handed over.
    void finish_round() {
        for (auto& thread : threads) {
            thread.join();
        }
        threads.clear();
        std::lock_guard<std::mutex> lock(mutex);
        handed.clear();
    }
};

/// A data-loading thread: its batch copied to the device and gathered on
/// its own stream (a user stream, or stream 2: its per-thread default
/// stream), checked; thread 0 hands its batch to the main thread.
void load_data(int index, int at, int64_t user_stream, const std::vector<mts_data_movement_t>& movements,
               DataLoaders& loaders) {
    const std::string who = "thread " + std::to_string(index) + " at replay " + std::to_string(at);
    try {
        std::mt19937_64 rng(1000 * static_cast<uint64_t>(at) + static_cast<uint64_t>(index));
        auto values = random_batch(rng);
        const int64_t stream = index % 2 == 1 ? user_stream : 2;
        auto batch = mtsarray::Array::zeros(gpu0, float64(), {rows, columns});
        batch.set_stream(stream);
        batch.copy_from(mtsarray::Array::wrap(values.data(), cpu, float64(), {rows, columns}));
        auto gathered = mtsarray::Array::zeros(gpu0, float64(), {gathered_rows, columns});
        gathered.set_stream(stream);
        const mts_array_t& output = gathered.get();
        if (output.move_data(output.ptr, batch.get().ptr, movements.data(), movements.size()) != MTS_SUCCESS) {
            loaders.report(who + ": move_data failed: " + last_error());
            return;
        }
        const auto expected =
            moved(std::vector<double>(gathered_rows * columns, 0.0), values, columns, columns, movements);
        const size_t wrong = differing(values_of(gathered), expected);
        if (wrong != 0) {
            loaders.report(who + ": " + std::to_string(wrong) + " wrong values");
        }
        if (index == 0) {
            std::lock_guard<std::mutex> lock(loaders.mutex);
            loaders.handed.push_back(std::move(batch));
        }
    } catch (const std::exception& error) {
        loaders.report(who + ": " + error.what());
    }
}

struct PlanFree {
    void operator()(mtsarray_move_plan_t* plan) const {
        EXPECT_EQ(mtsarray_move_plan_free(plan), MTS_SUCCESS) << last_error();
    }
};

/// A synchronisation after the work (and frees) queued so far on the
/// device's default stream.
void synchronize_the_device() {
    auto array = mtsarray::Array::full<double>(gpu0, {4}, 1.0);
    ASSERT_EQ(mtsarray_synchronize(&array.get()), MTS_SUCCESS) << last_error();
}

/// Device 0 of `device_room` bytes beyond what it held, shared with another
/// library's caching allocator; a user stream to capture on, and one for
/// each data-loading thread that does not use its per-thread stream.
class TrainingLoopOnSimulatedStreams : public SimulatedDeviceTest {
protected:
    void SetUp() override {
        SimulatedDeviceTest::SetUp();
        if (HasFatalFailure()) {
            return;
        }
        ASSERT_EQ(mtsarray_release_cached_memory(gpu0), MTS_SUCCESS) << last_error();
        ASSERT_EQ(mtsarray_get_release_threshold(gpu0, &default_threshold_), MTS_SUCCESS) << last_error();
        previous_memory_ = sim::set_device_memory(0, sim::device_memory_used(0) + device_room);
        side_ = sim::create_stream(0);
        for (auto& stream : loader_streams_) {
            stream = sim::create_stream(0);
        }
    }
    void TearDown() override {
        loaders_.finish_round();  // after a failure too: their streams go below
        SimulatedDeviceTest::TearDown();
        if (previous_memory_ != 0) {
            EXPECT_EQ(mtsarray_set_release_threshold(gpu0, default_threshold_), MTS_SUCCESS) << last_error();
            EXPECT_EQ(mtsarray_release_cached_memory(gpu0), MTS_SUCCESS) << last_error();
            torch_.empty_cache();
            sim::set_device_memory(0, previous_memory_);
        }
        for (int64_t stream : loader_streams_) {
            if (stream != 0) {
                sim::destroy_stream(stream);
            }
        }
        if (side_ != 0) {
            sim::destroy_stream(side_);
        }
    }

    /// An array of the other library's memory (as a PyTorch tensor imported
    /// zero-copy), zeroed, working on the capture's stream; the memory goes
    /// back to that library with the array.
    mtsarray::Array foreign_zeros(const std::vector<uintptr_t>& shape) {
        struct Block {
            sim::ForeignCachingAllocator* owner;
            void* data;
        };
        void* data = torch_.allocate(product(shape) * sizeof(double));
        if (data == nullptr) {
            throw std::runtime_error("the foreign allocator has no room");
        }
        auto array = mtsarray::Array::wrap(
            data, gpu0, float64(), shape,
            [](void* context) {
                auto* block = static_cast<Block*>(context);
                block->owner->free(block->data);
                delete block;
            },
            new Block{&torch_, data});
        array.set_stream(side_);
        array.copy_from(mtsarray::Array::zeros(cpu, float64(), shape));
        return array;
    }

    void start_loaders(int at, const std::vector<mts_data_movement_t>& movements) {
        loaders_.finish_round();
        for (int index = 0; index < worker_count; index++) {
            loaders_.threads.emplace_back(load_data, index, at, loader_streams_[index], std::cref(movements),
                                          std::ref(loaders_));
        }
    }

    void replay_a_captured_step();
    void check_memory_afterwards();

    sim::ForeignCachingAllocator torch_{0};
    DataLoaders loaders_;
    uint64_t default_threshold_ = 0;
    size_t previous_memory_ = 0;
    int64_t side_ = 0;
    int64_t loader_streams_[worker_count] = {};
};

}  // namespace

TEST_F(TrainingLoopOnSimulatedStreams, ACapturedStepReplayedAThousandTimesBesideAForeignCache) {
    ASSERT_NO_FATAL_FAILURE(replay_a_captured_step());
    ASSERT_NO_FATAL_FAILURE(check_memory_afterwards());
}

void TrainingLoopOnSimulatedStreams::replay_a_captured_step() {
    void* held = torch_.allocate(foreign_hold);  // the other library holds most of the device
    ASSERT_NE(held, nullptr);
    std::mt19937_64 rng(40);
    StepReference reference{batch_movements(rng), mirrored_rows()};

    auto host_batch = mtsarray::Array::zeros(cpu, float64(), {rows, columns});
    auto device_batch = mtsarray::Array::zeros(gpu0, float64(), {rows, columns});
    device_batch.set_stream(side_);
    auto gathered = foreign_zeros({gathered_rows, columns});
    auto output = foreign_zeros({gathered_rows, columns});
    auto result = foreign_zeros({gathered_rows, columns});
    mtsarray_move_plan_t* raw_plan = nullptr;
    ASSERT_EQ(mtsarray_move_plan_create(&output.get(), &gathered.get(), reference.plan_movements.data(),
                                        reference.plan_movements.size(), &raw_plan),
              MTS_SUCCESS)
        << last_error();
    std::unique_ptr<mtsarray_move_plan_t, PlanFree> plan(raw_plan);

    const auto* output_data = static_cast<const double*>(output.data());
    auto* result_data = static_cast<double*>(result.data());
    const auto step = [&] {
        ASSERT_EQ(mtsarray_copy_into(&device_batch.get(), &host_batch.get()), MTS_SUCCESS) << last_error();
        const mts_array_t& into = gathered.get();
        ASSERT_EQ(into.move_data(into.ptr, device_batch.get().ptr, reference.movements.data(),
                                 reference.movements.size()),
                  MTS_SUCCESS)
            << last_error();
        ASSERT_EQ(mtsarray_move_plan_execute(plan.get(), &output.get(), &gathered.get()), MTS_SUCCESS)
            << last_error();
        sim::enqueue(side_, 0, [=] { scale_and_shift(output_data, result_data, gathered_rows * columns); });
    };
    const auto write_batch = [&](const std::vector<double>& batch) {
        // into the host array's memory, as a program writes a NumPy view of it
        std::memcpy(host_batch.data(), batch.data(), batch.size() * sizeof(double));
        reference.step(batch);
    };

    for (int warm = 0; warm < warm_up_steps; warm++) {
        write_batch(random_batch(rng));
        ASSERT_NO_FATAL_FAILURE(step());
        ASSERT_EQ(differing(values_of(result), reference.result), 0u) << "warm-up step " << warm;
    }

    start_loaders(0, reference.movements);  // they run during the capture too
    sim::begin_capture(side_, 0, sim::CaptureMode::global);
    step();
    sim::Graph graph;
    ASSERT_NO_THROW(graph = sim::end_capture(side_, 0)) << lines(sim::capture_invalidations());
    ASSERT_FALSE(HasFailure()) << "the step failed during the capture";
    EXPECT_EQ(graph.count(sim::NodeKind::host), 1u) << "the host node that reads the batch at each replay";

    for (int at = 0; at < replays; at++) {
        if (at % workers_every == workers_every / 2) {
            start_loaders(at, reference.movements);
        }
        write_batch(random_batch(rng));
        sim::launch(graph, side_, 0);
        ASSERT_EQ(differing(values_of(result), reference.result), 0u) << "replay " << at;
        const auto errors = loaders_.reported();
        ASSERT_TRUE(errors.empty()) << lines(errors);
    }
    loaders_.finish_round();
    EXPECT_TRUE(loaders_.reported().empty()) << lines(loaders_.reported());
    EXPECT_EQ(differing(values_of(gathered), reference.gathered), 0u);
    EXPECT_EQ(differing(values_of(output), reference.output), 0u);
    graph = sim::Graph();
    torch_.free(held);  // into the other library's cache, which keeps it
}

void TrainingLoopOnSimulatedStreams::check_memory_afterwards() {
    // what mtsarray frees beyond its release threshold goes back to the
    // device at the next synchronisation
    EXPECT_GT(default_threshold_, 0u);
    EXPECT_LE(default_threshold_, previous_memory_ / 16) << "the default release threshold is 1/16 of the device";
    ASSERT_EQ(mtsarray_set_release_threshold(gpu0, release_threshold), MTS_SUCCESS) << last_error();
    sim::drain();
    ASSERT_EQ(mtsarray_release_cached_memory(gpu0), MTS_SUCCESS) << last_error();
    size_t before = sim::device_memory_used(0);
    {
        auto array = mtsarray::Array::zeros(gpu0, float64(), {24 * MiB / sizeof(double)});
        array.synchronize();
    }
    sim::drain();
    EXPECT_GE(sim::device_memory_used(0), before + 24 * MiB) << "the pool keeps what was freed until then";
    ASSERT_NO_FATAL_FAILURE(synchronize_the_device());
    EXPECT_LE(sim::device_memory_used(0), before + release_threshold)
        << "the pool kept " << (sim::device_memory_used(0) - before) / MiB << " MiB after a synchronisation";

    // 48 MiB do not fit while the other library's cache holds its 64: a
    // clear error, and nothing changed
    // (an allocation that does not fit gives the pool's cache back first:
    // nothing cached then, so that nothing at all may change)
    ASSERT_GE(torch_.reserved(), foreign_hold);
    const auto witness_values = iota(64, 0.5);
    auto witness = array_from_bytes(gpu0, float64(), {64}, to_bytes(witness_values));
    sim::drain();
    ASSERT_EQ(mtsarray_release_cached_memory(gpu0), MTS_SUCCESS) << last_error();
    const size_t used = sim::device_memory_used(0);
    const size_t foreign = torch_.reserved();
    const uintptr_t large[] = {48 * MiB / sizeof(double)};
    mts_array_t untouched;
    std::memset(&untouched, 0x5A, sizeof(untouched));
    const mts_array_t sentinel = untouched;
    reset_last_error();
    EXPECT_NE(mtsarray_zeros(gpu0, float64(), large, 1, &untouched), MTS_SUCCESS);
    const std::string error = last_error();
    EXPECT_NE(error.find("out of memory"), std::string::npos) << error;
    EXPECT_NE(error.find(std::to_string(48 * MiB) + " bytes"), std::string::npos) << error;
    EXPECT_EQ(std::memcmp(&untouched, &sentinel, sizeof(untouched)), 0) << "the array was written";
    sim::drain();
    EXPECT_EQ(sim::device_memory_used(0), used);
    EXPECT_EQ(torch_.reserved(), foreign);
    EXPECT_EQ(values_of(witness), witness_values);

    // once the other library gives its cache back, they fit
    torch_.empty_cache();
    before = sim::device_memory_used(0);
    mts_array_t fits = {};
    ASSERT_EQ(mtsarray_zeros(gpu0, float64(), large, 1, &fits), MTS_SUCCESS) << last_error();
    {
        mtsarray::Array array(fits);
        const auto bytes = read_bytes(array);
        EXPECT_EQ(bytes.size(), 48 * MiB);
        EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](uint8_t byte) { return byte == 0; }));
    }

    // freed, it stays in the pool until a synchronisation;
    // mtsarray_release_cached_memory gives it back at once
    sim::drain();
    EXPECT_GE(sim::device_memory_used(0), before + 48 * MiB) << "the pool keeps what was freed until then";
    ASSERT_EQ(mtsarray_release_cached_memory(gpu0), MTS_SUCCESS) << last_error();
    EXPECT_LE(sim::device_memory_used(0), before);
}
