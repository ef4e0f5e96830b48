// Peer access between simulated devices (tests/support/simulation/peers.cpp):
//
//  - the simulation's rules: which pairs can reach each other, peer access
//    enabled once ("already enabled" after), pool access granted only where
//    reachable, another device's memory touched without access reported, a
//    peer copy without access staged;
//  - mtsarray opens its pools of two devices to each other the first time
//    a copy goes between them, where they can reach each other: the copy
//    goes over the link; where they can not, it is staged, and still right;
//  - memory mtsarray does not own keeps its owner's settings;
//  - MTSARRAY_PEER_ACCESS=0 keeps every copy staged (its own process).

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/backend.hpp"
#include "base/error.hpp"
#include "base/stream.hpp"
#include "core/backend_registry.hpp"
#include "cpu/threads/pool_host_tasks.hpp"
#include "gpu/gpu_backend.hpp"
#include "support/backends.hpp"
#include "support/movements.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;
using mtsarray::detail::Stream;

namespace {

std::string joined(const std::vector<std::string>& texts) {
    std::string result;
    for (const auto& text : texts) {
        result += "\n  " + text;
    }
    return result.empty() ? " (none)" : result;
}

/// A backend of its own, as in a new process: no pair of devices opened
/// yet. Never destroyed, like the process's own (its deferred-work thread
/// lives as long as the program), and kept reachable from a static list
/// that is never destroyed either, so that LeakSanitizer does not take it
/// for a leak.
const mtsarray::detail::Backend& new_backend() {
    static auto* kept = new std::vector<std::unique_ptr<const mtsarray::detail::Backend>>();
    kept->push_back(std::make_unique<mtsarray::detail::gpu::GpuBackend<SimulatedRuntime>>(
        &mtsarray::detail::cpu::pool_host_tasks()));
    return *kept->back();
}

/// Sets the simulation's topology for one test.
class Topology {
public:
    explicit Topology(const std::string& topology) : previous_(sim::set_peer_topology(topology)) {}
    ~Topology() { sim::set_peer_topology(previous_); }

private:
    std::string previous_;
};

class PeerAccess : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
        if (sim::device_count() < 2) {
            GTEST_SKIP() << "the simulation has one device (MTSARRAY_SIM_DEVICES=1): this needs two";
        }
        sim::drain();
        sim::clear_violations();
    }
    void TearDown() override {
        sim::drain();
        EXPECT_TRUE(sim::violations().empty()) << joined(sim::violations());
        sim::clear_violations();
    }

    static Stream legacy(int device) { return Stream::parse(DLDevice{kDLCUDA, device}, 1); }

    /// Copies 64 bytes from device `from` to device `to` through `backend`'s
    /// copy_peer, on the destination's legacy stream after the source's;
    /// returns the bytes arrived.
    static std::vector<uint8_t> copy_between(const mtsarray::detail::Backend& backend, int from, int to) {
        const Stream source_stream = legacy(from);
        const Stream destination_stream = legacy(to);
        void* source = backend.allocate(source_stream, 64);
        void* destination = backend.allocate(destination_stream, 64);
        std::vector<uint8_t> bytes(64);
        for (size_t i = 0; i < bytes.size(); i++) {
            bytes[i] = static_cast<uint8_t>(i * 3 + static_cast<size_t>(from));
        }
        backend.copy_from_host(source_stream, source, bytes.data(), bytes.size());
        backend.wait(destination_stream, source_stream);
        backend.copy_peer(destination_stream, destination, source, DLDevice{kDLCUDA, from}, 64);
        backend.wait(source_stream, destination_stream);  // the source is freed after the copy read it
        std::vector<uint8_t> arrived(64);
        backend.copy_to_host(destination_stream, arrived.data(), destination, arrived.size());
        backend.synchronize(destination_stream);
        backend.deallocate(destination_stream, destination, 64);
        backend.deallocate(source_stream, source, 64);
        EXPECT_EQ(arrived, bytes) << "copy " << from << " -> " << to;
        return arrived;
    }
};

bool contains(const std::vector<int>& values, int value) {
    for (int v : values) {
        if (v == value) {
            return true;
        }
    }
    return false;
}

}  // namespace

// ---- the simulation's rules -----------------------------------------------------------

TEST_F(PeerAccess, TheSimulationModelsTopologyAccessAndStagedCopies) {
    {
        Topology topology("none");
        EXPECT_FALSE(SimulatedRuntime::can_access_peer(0, 1));
        EXPECT_EQ(sim::enable_peer_access(0, 1), sim::Status::invalid_device);
    }
    {
        Topology topology("0-1");
        EXPECT_TRUE(SimulatedRuntime::can_access_peer(0, 1));
        EXPECT_TRUE(SimulatedRuntime::can_access_peer(1, 0));
        EXPECT_FALSE(SimulatedRuntime::can_access_peer(0, 0)) << "a device is not a peer of itself";
        if (sim::device_count() > 2) {
            EXPECT_FALSE(SimulatedRuntime::can_access_peer(0, 2));
        }
    }
    EXPECT_THROW(SimulatedRuntime::can_access_peer(0, sim::device_count()), mtsarray::detail::Error);

    // cudaDeviceEnablePeerAccess: once, then "already enabled"
    if (!sim::peer_access_enabled(1, 0)) {
        EXPECT_EQ(sim::enable_peer_access(1, 0), sim::Status::success);
    }
    EXPECT_EQ(sim::enable_peer_access(1, 0), sim::Status::peer_access_already_enabled);
    EXPECT_STREQ(SimulatedErrors::name(sim::Status::peer_access_already_enabled),
                 "cudaErrorPeerAccessAlreadyEnabled");

    // pool memory: reachable from another device only once its pool grants it
    const auto& backend = new_backend();
    void* on_device1 = backend.allocate(legacy(1), 64);
    void* on_device0 = backend.allocate(legacy(0), 64);
    sim::drain();
    SimulatedRuntime::set_device(0);
    SimulatedRuntime::copy_device_to_device_async(on_device0, on_device1, 64,
                                                  SimulatedRuntime::native_stream(legacy(0)));
    sim::drain();
    const auto without = sim::violations();
    sim::clear_violations();
    ASSERT_EQ(without.size(), 1u) << joined(without);
    EXPECT_NE(without[0].find("touched memory of device 1 without peer access"), std::string::npos) << without[0];

    // a peer copy without access: legal, staged
    const auto before = sim::peer_copies();
    SimulatedRuntime::copy_peer_async(on_device0, 0, on_device1, 1, 64, SimulatedRuntime::native_stream(legacy(0)));
    sim::drain();
    EXPECT_EQ(sim::peer_copies().staged, before.staged + 1);
    EXPECT_EQ(sim::peer_copies().direct, before.direct);
    EXPECT_TRUE(sim::violations().empty()) << joined(sim::violations());
    backend.deallocate(legacy(1), on_device1, 64);
    backend.deallocate(legacy(0), on_device0, 64);
}

TEST_F(PeerAccess, APoolGrantsAccessOnlyToADeviceThatCanReachIt) {
    Topology topology("none");
    auto* pool = SimulatedRuntime::create_pool(1);
    EXPECT_THROW(SimulatedRuntime::grant_pool_access(pool, 0), mtsarray::detail::Error);
    Topology reachable("0-1");
    EXPECT_NO_THROW(SimulatedRuntime::grant_pool_access(pool, 0));
    EXPECT_NO_THROW(SimulatedRuntime::grant_pool_access(pool, 0)) << "granting again changes nothing";
    EXPECT_NO_THROW(SimulatedRuntime::grant_pool_access(pool, 1)) << "the pool's own device";
}

// ---- mtsarray opens its pools to peers ---------------------------------------------

TEST_F(PeerAccess, ACopyBetweenDevicesThatReachEachOtherGoesOverTheLink) {
    Topology topology("all");
    const auto& backend = new_backend();
    const auto before = sim::peer_copies();
    copy_between(backend, 0, 1);
    const auto after = sim::peer_copies();
    EXPECT_EQ(after.direct, before.direct + 1) << "the copy was staged through the host";
    EXPECT_EQ(after.staged, before.staged);
    // later copies, either way, find the pools open
    copy_between(backend, 1, 0);
    EXPECT_EQ(sim::peer_copies().direct, before.direct + 2);
    EXPECT_EQ(sim::peer_copies().staged, before.staged);
}

TEST_F(PeerAccess, EveryPairOfDevicesIsOpenedOnItsFirstCopy) {
    Topology topology("all");
    const auto& backend = new_backend();
    const int devices = sim::device_count();
    for (int from = 0; from < devices; from++) {
        for (int to = 0; to < devices; to++) {
            if (from == to) {
                continue;
            }
            const auto before = sim::peer_copies();
            copy_between(backend, from, to);
            EXPECT_EQ(sim::peer_copies().direct, before.direct + 1) << from << " -> " << to << " was staged";
        }
    }
    for (int device = 0; device < devices; device++) {
        for (int peer = 0; peer < devices; peer++) {
            if (peer != device) {
                EXPECT_TRUE(contains(sim::pool_accessors(device), peer)) << "pool of " << device << ", peer " << peer;
            }
        }
    }
}

TEST_F(PeerAccess, ACopyBetweenDevicesThatCanNotReachEachOtherIsStagedAndRight) {
    if (sim::device_count() < 3) {
        // two devices that can not reach each other
        Topology topology("none");
        const auto& backend = new_backend();
        const auto before = sim::peer_copies();
        copy_between(backend, 0, 1);
        copy_between(backend, 1, 0);
        EXPECT_EQ(sim::peer_copies().staged, before.staged + 2);
        EXPECT_EQ(sim::peer_copies().direct, before.direct);
        return;
    }
    // pairs 0-1 and 2-3 (two NVLink islands): across them, staged
    Topology topology(sim::device_count() > 3 ? "0-1,2-3" : "0-1");
    const auto& backend = new_backend();
    auto before = sim::peer_copies();
    copy_between(backend, 0, 2);
    EXPECT_EQ(sim::peer_copies().staged, before.staged + 1);
    EXPECT_EQ(sim::peer_copies().direct, before.direct);
    before = sim::peer_copies();
    copy_between(backend, 0, 1);
    EXPECT_EQ(sim::peer_copies().direct, before.direct + 1);
    EXPECT_EQ(sim::peer_copies().staged, before.staged);
}

TEST_F(PeerAccess, ArraysCopiedBetweenDevicesArriveWhole) {
    // through the public API, on the process's backend
    const auto values = iota(1000, 0.5);
    for (int from = 0; from < sim::device_count(); from++) {
        auto source = array_from_bytes(DLDevice{kDLCUDA, from}, float64(), {1000}, to_bytes(values));
        for (int to = 0; to < sim::device_count(); to++) {
            auto copy = source.copy(DLDevice{kDLCUDA, to});
            EXPECT_EQ(from_bytes<double>(read_bytes(copy)), values) << from << " -> " << to;
        }
    }
}

TEST_F(PeerAccess, MemoryMtsarrayDoesNotOwnKeepsItsOwnersSettings) {
    // memory of another library's allocator, wrapped, copied to another
    // device and back: mtsarray enables no peer access for it
    const bool enabled_before = sim::peer_access_enabled(0, 1);
    sim::ForeignCachingAllocator allocator(1);
    void* foreign = allocator.allocate(8 * sizeof(double));
    ASSERT_NE(foreign, nullptr);
    const uintptr_t shape[] = {8};
    mts_array_t wrapped = {};
    ASSERT_EQ(mtsarray_wrap(foreign, DLDevice{kDLCUDA, 1}, float64(), shape, 1, nullptr, nullptr, &wrapped),
              MTS_SUCCESS)
        << last_error();
    auto values = array_from_bytes(DLDevice{kDLCUDA, 0}, float64(), {8}, to_bytes(iota(8, 3.0)));
    ASSERT_EQ(mtsarray_copy_into(&wrapped, &values.get()), MTS_SUCCESS) << last_error();
    mts_array_t back = {};
    ASSERT_EQ(wrapped.copy(wrapped.ptr, DLDevice{kDLCUDA, 0}, &back), MTS_SUCCESS) << last_error();
    EXPECT_EQ(from_bytes<double>(read_bytes(back)), iota(8, 3.0));
    back.destroy(back.ptr);
    wrapped.destroy(wrapped.ptr);
    sim::drain();
    allocator.free(foreign);
    EXPECT_EQ(sim::peer_access_enabled(0, 1), enabled_before) << "mtsarray changed the owner's peer access";
}

// ---- MTSARRAY_PEER_ACCESS -------------------------------------------------------------

TEST(PeerAccessEnvironment, ZeroKeepsEveryCopyStaged) {
    const char* setting = std::getenv("MTSARRAY_PEER_ACCESS");
    if (setting == nullptr || std::string(setting) != "0") {
        GTEST_SKIP() << "run with MTSARRAY_PEER_ACCESS=0 (tests/CMakeLists.txt does, in a process of its own)";
    }
    if (sim::device_count() < 2) {
        GTEST_SKIP() << "the simulation has one device (MTSARRAY_SIM_DEVICES=1): this needs two";
    }
    Topology topology("all");
    const auto& backend = new_backend();
    const auto before = sim::peer_copies();
    const Stream source_stream = Stream::parse(DLDevice{kDLCUDA, 0}, 1);
    const Stream destination_stream = Stream::parse(DLDevice{kDLCUDA, 1}, 1);
    void* source = backend.allocate(source_stream, 64);
    void* destination = backend.allocate(destination_stream, 64);
    backend.wait(destination_stream, source_stream);
    backend.copy_peer(destination_stream, destination, source, DLDevice{kDLCUDA, 0}, 64);
    backend.wait(source_stream, destination_stream);  // the source is freed after the copy read it
    backend.deallocate(destination_stream, destination, 64);
    backend.deallocate(source_stream, source, 64);
    sim::drain();
    EXPECT_EQ(sim::peer_copies().staged, before.staged + 1);
    EXPECT_EQ(sim::peer_copies().direct, before.direct);
    EXPECT_FALSE(contains(sim::pool_accessors(0), 1)) << "a pool was opened with MTSARRAY_PEER_ACCESS=0";
}
