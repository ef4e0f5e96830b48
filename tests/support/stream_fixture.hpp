#pragma once
// The fixture of the GPU stream suites (tests/gpu/streams_test.cpp,
// tests/gpu/no_host_block_test.cpp): every test runs on the legacy default
// stream (DLPack number 1), the per-thread default stream (2) and a user
// stream, as RMM runs its tests, with non-blocking streams at hand for
// other arrays and consumers, through the process's StreamDriver
// (support/stream_driver.hpp): a real GPU when there is one, else the
// simulated runtime. What only the simulation can see (uses of freed
// memory, leaks, host waits) is checked where it runs.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"
#include "support/movements.hpp"
#include "support/simulated_runtime.hpp"
#include "support/stream_driver.hpp"

namespace mtsarray_test {

enum class StreamKind { legacy, per_thread, user };

inline void PrintTo(StreamKind kind, std::ostream* stream) {
    *stream << (kind == StreamKind::legacy ? "legacy" : kind == StreamKind::per_thread ? "per_thread" : "user");
}

/// Test names: ".../legacy", ".../per_thread", ".../user".
inline std::string stream_kind_name(const ::testing::TestParamInfo<StreamKind>& info) {
    std::stringstream name;
    PrintTo(info.param, &name);
    return name.str();
}

/// The values of a float64 array, read on the host (waits for its stream).
inline std::vector<double> values_of(const mtsarray::Array& array) { return from_bytes<double>(read_bytes(array)); }

/// move_data of `movements` from `input` into `output`, through the vtable.
inline mts_status_t move_data(const mtsarray::Array& output, const mtsarray::Array& input,
                              const std::vector<mts_data_movement_t>& movements) {
    const auto& raw = output.get();
    return raw.move_data(raw.ptr, input.get().ptr, movements.data(), movements.size());
}

/// A 0-d float64 CPU array, the fill value `create` takes.
inline mts_array_t scalar(double value) { return mtsarray::Array::full<double>({kDLCPU, 0}, {}, value).release(); }

/// While a hold keeps a stream busy, work that is wrongly not ordered behind
/// it would run now: give it the time to, so that the checks made before
/// the release catch it (the simulation delays every item at random).
inline void let_misordered_work_run() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

constexpr DLDevice gpu0 = {kDLCUDA, 0};
constexpr DLDevice gpu1 = {kDLCUDA, 1};

class GpuStreamTest : public ::testing::TestWithParam<StreamKind> {
protected:
    void SetUp() override {
        MTSARRAY_SKIP_UNLESS_AVAILABLE(gpu0);
        driver_ = stream_driver();
        ASSERT_NE(driver_, nullptr) << "kDLCUDA is available but no stream driver serves it";
        if (driver_->simulated()) {
            // the one zero-byte allocation of each device lives for the process
            for (int device = 0; device < driver_->device_count(); device++) {
                (void)mtsarray::Array::zeros(DLDevice{kDLCUDA, device}, float64(), {0});
            }
            sim::drain();
            allocated_before_ = sim::allocated_bytes();
        }
        switch (GetParam()) {
        case StreamKind::legacy: stream_ = 1; break;
        case StreamKind::per_thread: stream_ = 2; break;
        case StreamKind::user: stream_ = driver_->create_stream(0); break;
        }
        other_ = driver_->create_stream(0);
        consumer_ = driver_->create_stream(0);
    }

    void TearDown() override {
        if (driver_ == nullptr) {
            return;
        }
        // the arrays of a test are gone by now; their frees are queued on
        // these streams and complete before the streams are released
        driver_->synchronize_all();
        if (driver_->simulated()) {
            EXPECT_TRUE(sim::violations().empty()) << sim::violations().front();
            sim::clear_violations();
            EXPECT_EQ(sim::allocated_bytes(), allocated_before_) << "device memory leaked";
        }
        for (int64_t stream : {stream_, other_, consumer_}) {
            if (stream > 2) {
                driver_->destroy_stream(stream, 0);
            }
        }
    }

    StreamDriver& driver() { return *driver_; }

    /// An array on `device` holding `values`, working on `stream`, ready.
    mtsarray::Array device_array(const std::vector<double>& values, const std::vector<uintptr_t>& shape,
                                 int64_t stream, DLDevice device = gpu0) {
        auto array = array_from_bytes(device, float64(), shape, to_bytes(values));
        array.set_stream(stream);
        array.synchronize();
        return array;
    }

    /// The float64 values in the memory of `array` at this moment, whatever
    /// is still queued on its stream (driver().peek).
    std::vector<double> peek_values(mtsarray::Array& array) {
        std::vector<double> values(product(array.shape()));
        driver_->peek(array.device().device_id, values.data(), array.data(), values.size() * sizeof(double));
        return values;
    }

    /// Holds every stream of `held` ({number, device}), runs `operation`,
    /// and checks that it returned with every hold still running and,
    /// where the driver counts them, without a host wait; then releases.
    void expect_returns_while_held(const std::vector<std::pair<int64_t, int>>& held,
                                   const std::function<void()>& operation, const std::string& what) {
        std::vector<std::unique_ptr<StreamHold>> holds;
        for (const auto& stream : held) {
            holds.push_back(driver_->hold(stream.first, stream.second));
        }
        const size_t waits = driver_->host_waits();
        operation();
        if (driver_->host_waits_unseen().empty()) {
            EXPECT_EQ(driver_->host_waits(), waits) << what << " waited on the host";
        }
        for (size_t i = 0; i < holds.size(); i++) {
            EXPECT_TRUE(holds[i]->running()) << what << " waited on the host for stream " << held[i].first;
        }
        for (auto& hold : holds) {
            hold->release();
        }
    }

    bool capturable() const { return GetParam() != StreamKind::legacy; }

    StreamDriver* driver_ = nullptr;
    size_t allocated_before_ = 0;
    int64_t stream_ = 0;    // the stream under test
    int64_t other_ = 0;     // non-blocking, for other arrays
    int64_t consumer_ = 0;  // non-blocking, for consumers of exports
};

/// The legacy stream can not capture (cudaErrorStreamCaptureUnsupported).
#define MTSARRAY_SKIP_UNLESS_CAPTURABLE()                                  \
    do {                                                                   \
        if (!capturable()) {                                               \
            GTEST_SKIP() << "the legacy stream can not capture a graph";   \
        }                                                                  \
    } while (false)

}  // namespace mtsarray_test
