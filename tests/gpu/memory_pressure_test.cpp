// mtsarray's memory pool beside another library's caching allocator on one
// device (PyTorch's, in a training loop), on the simulated runtime (its
// rules: a device of finite size shared by pools, cudaMalloc and foreign
// allocators, pools that give memory back at synchronisations beyond their
// release threshold: tests/support/simulation/memory.cpp):
//
//  - an allocation that does not fit gives mtsarray's own cached memory
//    back and tries once more before failing;
//  - memory mtsarray freed goes back to the device at the next
//    synchronisation beyond the release threshold, which leaves the other
//    library room by default and can be set;
//  - mtsarray_release_cached_memory gives everything cached back at once.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/backend.hpp"
#include "base/stream.hpp"
#include "cpu/threads/pool_host_tasks.hpp"
#include "gpu/gpu_backend.hpp"
#include "mtsarray.h"
#include "support/backends.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;
using mtsarray::detail::Stream;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};
constexpr size_t MiB = size_t(1) << 20;

/// Device 0 of the simulation with `bytes` of memory, and nothing of
/// mtsarray's cached there, for the test's lifetime.
class SmallDevice : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
        sim::drain();
        ASSERT_EQ(mtsarray_release_cached_memory(gpu0), MTS_SUCCESS) << last_error();
        previous_ = sim::set_device_memory(0, sim::device_memory_used(0) + 64 * MiB);
    }
    void TearDown() override {
        sim::drain();
        EXPECT_EQ(mtsarray_release_cached_memory(gpu0), MTS_SUCCESS) << last_error();
        sim::set_device_memory(0, previous_);
    }

    size_t previous_ = 0;
};

/// A GPU backend of its own, as in a new process: its pool is made on the
/// 64 MiB device (its default release threshold follows the device's
/// size). Never destroyed, like the process's own (its threads may still
/// run at exit), and kept reachable from a static list that is never
/// destroyed either, so that LeakSanitizer does not take it for a leak.
const mtsarray::detail::Backend& new_backend() {
    static auto* kept = new std::vector<std::unique_ptr<const mtsarray::detail::Backend>>();
    kept->push_back(std::make_unique<mtsarray::detail::gpu::GpuBackend<SimulatedRuntime>>(
        &mtsarray::detail::cpu::pool_host_tasks()));
    return *kept->back();
}

/// A synchronisation of the device's legacy stream, after the work (and
/// frees) queued there so far: a fill, then the host waits for it.
void synchronize_the_device() {
    auto array = mtsarray::Array::full<double>(gpu0, {4}, 1.0);
    array.synchronize();
}

/// A float64 array of `bytes` on the simulated device 0.
mtsarray::Array device_array(size_t bytes) {
    return mtsarray::Array::zeros(gpu0, float64(), {bytes / sizeof(double)});
}

}  // namespace

// 64 MiB, of which the other library holds 8: mtsarray makes and drops a
// 40 MiB array (its pool keeps it), then asks for 48 MiB.
TEST_F(SmallDevice, AnAllocationThatDoesNotFitGivesTheCacheBackAndTriesAgain) {
    const auto& backend = new_backend();
    const Stream stream = Stream::parse(gpu0, 1);
    sim::ForeignCachingAllocator torch(0);
    void* held = torch.allocate(8 * MiB);
    ASSERT_NE(held, nullptr);
    void* first = backend.allocate(stream, 40 * MiB);
    backend.deallocate(stream, first, 40 * MiB);
    sim::drain();  // the free has run: the block is cached in the pool
    void* second = nullptr;
    try {
        second = backend.allocate(stream, 48 * MiB);
        const double value = 2.5;
        backend.fill(stream, second, 4, &value, sizeof(value));
        std::vector<double> read(4);
        backend.copy_to_host(stream, read.data(), second, sizeof(double) * 4);
        backend.synchronize(stream);
        EXPECT_EQ(read, std::vector<double>(4, 2.5));
    } catch (const std::exception& error) {
        ADD_FAILURE() << error.what();
    }
    backend.deallocate(stream, second, 48 * MiB);
    sim::drain();
    backend.release_cached_memory(gpu0);
    torch.free(held);
}

// The other library runs out of room while mtsarray's pool keeps what it
// freed: at the next synchronisation (any, anyone's), what the pool keeps
// beyond its release threshold goes back, and the other library's retry
// fits.
TEST_F(SmallDevice, FreedMemoryGoesBackAtTheNextSynchronisation) {
    const auto& backend = new_backend();
    EXPECT_EQ(backend.release_threshold(gpu0), SimulatedRuntime::device_memory_bytes(0) / 16)
        << "the default release threshold is 1/16 of the device";
    const Stream stream = Stream::parse(gpu0, 1);
    sim::ForeignCachingAllocator torch(0);
    void* array = backend.allocate(stream, 48 * MiB);
    backend.deallocate(stream, array, 48 * MiB);
    backend.synchronize(stream);  // a synchronisation after the free
    void* batch = torch.allocate(40 * MiB);
    EXPECT_NE(batch, nullptr) << "mtsarray's pool kept " << sim::device_memory_used(0) / MiB
                              << " MiB of the device's 64 after a synchronisation";
    if (batch != nullptr) {
        torch.free(batch);
    }
    torch.empty_cache();
    backend.release_cached_memory(gpu0);
}

// The release threshold is the program's to set: everything is kept with
// a large one, everything goes back at the next synchronisation with 0.
TEST_F(SmallDevice, TheReleaseThresholdIsSettable) {
    uint64_t default_threshold = 0;
    ASSERT_EQ(mtsarray_get_release_threshold(gpu0, &default_threshold), MTS_SUCCESS) << last_error();
    EXPECT_GT(default_threshold, 0u);
    const size_t before = sim::device_memory_used(0);
    ASSERT_EQ(mtsarray_set_release_threshold(gpu0, uint64_t(64) * MiB), MTS_SUCCESS) << last_error();
    {
        auto array = device_array(32 * MiB);
        array.synchronize();
    }
    synchronize_the_device();
    EXPECT_GE(sim::device_memory_used(0), before + 32 * MiB) << "the pool kept what it freed";
    ASSERT_EQ(mtsarray_set_release_threshold(gpu0, 0), MTS_SUCCESS) << last_error();
    synchronize_the_device();
    EXPECT_LT(sim::device_memory_used(0), before + 32 * MiB) << "the pool gave it back";
    uint64_t threshold = 1;
    ASSERT_EQ(mtsarray_get_release_threshold(gpu0, &threshold), MTS_SUCCESS) << last_error();
    EXPECT_EQ(threshold, 0u);
    EXPECT_EQ(mtsarray_set_release_threshold(DLDevice{kDLCUDA, 7}, 0), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("device id 7 out of range"), std::string::npos) << last_error();
    // back to the default for the other tests
    ASSERT_EQ(mtsarray_set_release_threshold(gpu0, default_threshold), MTS_SUCCESS) << last_error();
}

// mtsarray_release_cached_memory gives everything the pool keeps back at
// once, without waiting for a synchronisation.
TEST_F(SmallDevice, ReleasingTheCacheGivesEverythingBack) {
    const size_t before = sim::device_memory_used(0);
    { auto array = device_array(24 * MiB); }
    sim::drain();
    ASSERT_EQ(mtsarray_release_cached_memory(gpu0), MTS_SUCCESS) << last_error();
    EXPECT_LE(sim::device_memory_used(0), before);
}
