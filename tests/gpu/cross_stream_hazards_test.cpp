// Hazards across streams and devices, on the simulated runtime
// (tests/support/simulation/hazards.cpp): reads, writes and frees of one
// allocation from several streams are checked against their order of
// issue, and every hazard that mtsarray itself creates is ordered:
//
//  - the checker itself sees a read after write, a write after read, a
//    write after write and a free after read across streams, on one device
//    and across two, and none where an event orders them;
//  - a write into an array (an upload, a move_data, a copy, a plan) waits
//    for the reads that mtsarray queued on other streams, as the free does.

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/backend.hpp"
#include "base/stream.hpp"
#include "core/backend_registry.hpp"
#include "support/backends.hpp"
#include "support/movements.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;
using mtsarray::detail::Stream;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};

/// Gives work that is wrongly not ordered behind a held stream the time to
/// run, so that the checks after the gate opens see it.
void let_misordered_work_run() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

bool contains(const std::vector<std::string>& texts, const std::string& part) {
    for (const auto& text : texts) {
        if (text.find(part) != std::string::npos) {
            return true;
        }
    }
    return false;
}

std::string joined(const std::vector<std::string>& texts) {
    std::string result;
    for (const auto& text : texts) {
        result += "\n  " + text;
    }
    return result.empty() ? " (none)" : result;
}

class CrossStreamHazards : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
        sim::drain();
        sim::clear_violations();
        held_ = sim::create_stream(0);
        writer_ = sim::create_stream(0);
    }
    void TearDown() override {
        sim::drain();
        EXPECT_TRUE(sim::violations().empty()) << joined(sim::violations());
        sim::clear_violations();
        for (int64_t stream : {held_, writer_, device1_}) {
            if (stream > 2) {
                sim::destroy_stream(stream);
            }
        }
    }

    const mtsarray::detail::Backend& backend() const { return mtsarray::detail::memory_backend(kDLCUDA); }
    Stream stream(int64_t number, int device = 0) const { return Stream::parse(DLDevice{kDLCUDA, device}, number); }

    /// The violations of the work queued so far (cleared: provoked on purpose).
    std::vector<std::string> provoked() {
        sim::drain();
        auto seen = sim::violations();
        sim::clear_violations();
        return seen;
    }

    int64_t held_ = 0;
    int64_t writer_ = 0;
    int64_t device1_ = 0;
};

}  // namespace

// ---- the checker ----------------------------------------------------------------------

TEST_F(CrossStreamHazards, TheSimulationSeesEachHazardBetweenTwoStreams) {
    const Stream held = stream(held_);
    const Stream writer = stream(writer_);
    void* a = backend().allocate(held, 64);
    void* b = backend().allocate(held, 64);
    const double value = 1.0;
    sim::drain();

    struct Case {
        const char* hazard;
        std::function<void()> earlier;  // on the held stream
        std::function<void()> later;    // on the other stream, issued after
    };
    const std::vector<Case> cases = {
        {"write after read", [&] { backend().copy(held, b, a, 64); },
         [&] { backend().fill(writer, a, 8, &value, sizeof(double)); }},
        {"read after write", [&] { backend().fill(held, a, 8, &value, sizeof(double)); },
         [&] { backend().copy(writer, b, a, 64); }},
        {"write after write", [&] { backend().fill(held, a, 8, &value, sizeof(double)); },
         [&] { backend().fill(writer, a, 8, &value, sizeof(double)); }},
    };
    for (const auto& hazard : cases) {
        {
            auto gate = sim::hold(held_, 0);
            hazard.earlier();
            hazard.later();
            backend().synchronize(writer);  // the later work ran first
        }
        const auto seen = provoked();
        EXPECT_TRUE(contains(seen, hazard.hazard)) << hazard.hazard << ":" << joined(seen);
        // ordered with an event: nothing to report
        {
            auto gate = sim::hold(held_, 0);
            hazard.earlier();
            backend().wait(writer, held);
            hazard.later();
            let_misordered_work_run();
        }
        const auto ordered = provoked();
        EXPECT_TRUE(ordered.empty()) << hazard.hazard << " ordered by an event:" << joined(ordered);
    }
    // two reads are no hazard
    {
        void* c = backend().allocate(writer, 64);
        auto gate = sim::hold(held_, 0);
        backend().copy(held, b, a, 64);
        backend().copy(writer, c, a, 64);
        backend().synchronize(writer);
        gate.open();
        const auto reads = provoked();
        EXPECT_TRUE(reads.empty()) << joined(reads);
        backend().deallocate(writer, c, 64);
    }
    // a free issued after a read on another stream, run first
    {
        auto gate = sim::hold(held_, 0);
        backend().copy(held, b, a, 64);
        backend().deallocate(writer, a, 64);
        backend().synchronize(writer);
    }
    const auto freed = provoked();
    EXPECT_TRUE(contains(freed, "free after read")) << joined(freed);
    backend().deallocate(held, b, 64);
}

TEST_F(CrossStreamHazards, TheSimulationSeesAHazardBetweenTwoDevices) {
    if (sim::device_count() < 2) {
        GTEST_SKIP() << "the simulation has one device (MTSARRAY_SIM_DEVICES=1): this needs two";
    }
    device1_ = sim::create_stream(1);
    const Stream reader = stream(device1_, 1);
    const Stream writer = stream(writer_);
    void* a = backend().allocate(writer, 64);
    void* b = backend().allocate(reader, 64);
    const double value = 2.0;
    sim::drain();
    {
        // device 1 reads device 0's memory (a peer copy), then device 0
        // writes it on its own stream: nothing orders the two
        auto gate = sim::hold(device1_, 1);
        SimulatedRuntime::copy_peer_async(b, 1, a, 0, 64, SimulatedRuntime::native_stream(reader));
        backend().fill(writer, a, 8, &value, sizeof(double));
        backend().synchronize(writer);
    }
    const auto seen = provoked();
    EXPECT_TRUE(contains(seen, "write after read")) << joined(seen);
    EXPECT_TRUE(contains(seen, "of device 1")) << joined(seen);
    backend().deallocate(writer, a, 64);
    backend().deallocate(reader, b, 64);
}

// ---- mtsarray orders the hazards it creates ------------------------------------------

TEST_F(CrossStreamHazards, AnUploadIntoAnArrayWaitsForItsReadOnAnotherStream) {
    // move_data reads `source` on the output's stream (held); an upload into
    // `source` on its own stream must not overwrite it before that read
    auto source = array_from_bytes(gpu0, float64(), {4, 1}, to_bytes(iota(4, 1.0)));
    source.set_stream(writer_);
    auto output = array_from_bytes(gpu0, float64(), {4, 1}, to_bytes(std::vector<double>(4, 0.0)));
    output.set_stream(held_);
    std::vector<double> new_values = iota(4, 100.0);
    auto host = mtsarray::Array::wrap(new_values.data(), DLDevice{kDLCPU, 0}, float64(), {4, 1});
    sim::drain();
    {
        auto gate = sim::hold(held_, 0);
        const std::vector<mts_data_movement_t> movements = {{0, 0, 0, 0, 1}, {1, 1, 0, 0, 1}, {2, 2, 0, 0, 1},
                                                            {3, 3, 0, 0, 1}};
        const auto& in = source.get();
        auto out = output.get();
        ASSERT_EQ(out.move_data(out.ptr, in.ptr, movements.data(), movements.size()), MTS_SUCCESS) << last_error();
        source.copy_from(host.get());  // the upload, on the source's stream
        let_misordered_work_run();
    }
    sim::drain();
    const auto seen = sim::violations();
    EXPECT_TRUE(seen.empty()) << joined(seen);
    EXPECT_EQ(from_bytes<double>(read_bytes(output)), iota(4, 1.0)) << "the upload overwrote the input before the read";
    EXPECT_EQ(from_bytes<double>(read_bytes(source)), iota(4, 100.0));
}

TEST_F(CrossStreamHazards, EveryWriteIntoAnArrayWaitsForItsReadsOnOtherStreams) {
    // the input of a move_data on the held stream is then written by a
    // move_data, a copy_into between device arrays and a plan, each on its
    // own stream
    const std::vector<mts_data_movement_t> movements = {{0, 0, 0, 0, 1}, {1, 1, 0, 0, 1}};
    for (const char* write : {"move_data", "copy_into", "move plan"}) {
        auto target = array_from_bytes(gpu0, float64(), {2, 1}, to_bytes(iota(2, 1.0)));
        target.set_stream(writer_);
        auto reader = array_from_bytes(gpu0, float64(), {2, 1}, to_bytes(std::vector<double>(2, 0.0)));
        reader.set_stream(held_);
        auto fresh = array_from_bytes(gpu0, float64(), {2, 1}, to_bytes(iota(2, 50.0)));
        fresh.set_stream(writer_);
        mtsarray_move_plan_t* plan = nullptr;
        if (std::string(write) == "move plan") {
            ASSERT_EQ(mtsarray_move_plan_create(&target.get(), &fresh.get(), movements.data(), movements.size(), &plan),
                      MTS_SUCCESS)
                << last_error();
        }
        sim::drain();
        {
            auto gate = sim::hold(held_, 0);
            const auto& in = target.get();
            auto out = reader.get();
            ASSERT_EQ(out.move_data(out.ptr, in.ptr, movements.data(), movements.size()), MTS_SUCCESS)
                << last_error();
            auto written = target.get();
            if (std::string(write) == "move_data") {
                ASSERT_EQ(written.move_data(written.ptr, fresh.get().ptr, movements.data(), movements.size()),
                          MTS_SUCCESS)
                    << last_error();
            } else if (std::string(write) == "copy_into") {
                target.copy_from(fresh.get());
            } else {
                ASSERT_EQ(mtsarray_move_plan_execute(plan, &written, &fresh.get()), MTS_SUCCESS) << last_error();
            }
            let_misordered_work_run();
        }
        sim::drain();
        const auto seen = sim::violations();
        EXPECT_TRUE(seen.empty()) << write << ":" << joined(seen);
        sim::clear_violations();
        EXPECT_EQ(from_bytes<double>(read_bytes(reader)), iota(2, 1.0)) << write << " overwrote the input first";
        EXPECT_EQ(from_bytes<double>(read_bytes(target)), iota(2, 50.0)) << write;
        if (plan != nullptr) {
            mtsarray_move_plan_free(plan);
        }
    }
}
