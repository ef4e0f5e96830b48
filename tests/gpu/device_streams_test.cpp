// Streams on several devices, as the simulated CUDA runtime sees them
// (tests/support/simulated_runtime.hpp), on devices 0 and 1 of however many
// the simulation has:
//  - a stream belongs to one device: a stream of another device than the
//    array's is refused wherever one is given (set_stream, the consumer
//    stream of as_dlpack, tensormap_to), naming both devices, and nothing
//    changes;
//  - a call whose runtime steps fail one after the other never leaves a
//    queued read that the source's free could overtake;
//  - a copy between devices is queued on the destination's stream, after
//    the source's pending writes, and the source's stream never waits for
//    the destination's queue.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"
#include "support/movements.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};
constexpr DLDevice gpu1 = {kDLCUDA, 1};

std::string joined(const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& line : lines) {
        text += line + "\n";
    }
    return text;
}

std::vector<double> values_of(const mtsarray::Array& array) { return from_bytes<double>(read_bytes(array)); }

/// A block of 3 samples x 2 properties on the CPU, in a TensorMap of one key.
metatensor::TensorMap small_tensor() {
    const auto labels = [](const std::string& name, int32_t count) {
        std::vector<int32_t> values(static_cast<size_t>(count));
        std::iota(values.begin(), values.end(), 0);
        auto array = array_from_bytes(mtsarray::cpu(), int32(), {values.size(), 1}, to_bytes(values));
        return metatensor::Labels({name}, std::move(array).into_metatensor());
    };
    auto values = array_from_bytes(mtsarray::cpu(), float64(), {3, 2}, to_bytes(iota(6, 0.0)));
    auto block = mtsarray::make_block(std::move(values), labels("s", 3), {}, labels("p", 2));
    std::vector<metatensor::TensorBlock> blocks;
    blocks.push_back(std::move(block));
    return metatensor::TensorMap(labels("k", 1), std::move(blocks));
}

class DeviceStreams : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
        if (sim::device_count() < 2) {
            GTEST_SKIP() << "the simulation has one device (MTSARRAY_SIM_DEVICES=1): this needs two";
        }
        // the one zero-byte allocation of each device lives for the process
        for (int device = 0; device < 2; device++) {
            (void)mtsarray::Array::zeros(DLDevice{kDLCUDA, device}, float64(), {0});
        }
        sim::drain();
        sim::clear_violations();
        allocated_before_ = sim::allocated_bytes();
        stream0_ = sim::create_stream(0);
        other0_ = sim::create_stream(0);
        stream1_ = sim::create_stream(1);
    }

    void TearDown() override {
        if (stream0_ == 0) {
            return;  // skipped
        }
        sim::drain();
        EXPECT_TRUE(sim::violations().empty()) << joined(sim::violations());
        sim::clear_violations();
        EXPECT_EQ(sim::allocated_bytes(), allocated_before_) << "device memory leaked";
        for (int64_t stream : {stream0_, other0_, stream1_}) {
            sim::destroy_stream(stream);
        }
    }

    /// An array on `device` holding `values`, working on `stream`.
    static std::unique_ptr<mtsarray::Array> array_on(DLDevice device, const std::vector<double>& values,
                                                     int64_t stream) {
        auto array = std::make_unique<mtsarray::Array>(
            array_from_bytes(mtsarray::cpu(), float64(), {values.size()}, to_bytes(values)).copy(device));
        array->set_stream(stream);
        return array;
    }

    size_t allocated_before_ = 0;
    int64_t stream0_ = 0;  // streams of device 0
    int64_t other0_ = 0;
    int64_t stream1_ = 0;  // a stream of device 1
};

// ---- a stream belongs to one device -----------------------------------------------------

TEST_F(DeviceStreams, AStreamOfAnotherDeviceIsRefusedWhereverOneIsGiven) {
    auto array = array_on(gpu1, iota(4, 1.0), 1);
    const mts_array_t handle = array->get();
    const auto names_both_devices = [](const std::string& message) {
        return message.find("cuda:0") != std::string::npos && message.find("cuda:1") != std::string::npos;
    };

    // the work stream of an array on cuda:1 (torch.cuda.current_stream()
    // taken on the wrong device)
    reset_last_error();
    EXPECT_EQ(mtsarray_set_stream(&handle, stream0_), MTS_CALLBACK_ERROR)
        << "a stream of cuda:0 was accepted for an array on cuda:1";
    EXPECT_TRUE(names_both_devices(last_error())) << last_error();
    EXPECT_EQ(array->stream(), 1) << "the array's stream changed";

    // the consumer's stream of a zero-copy export, and of a copy to cuda:1
    DLManagedTensorVersioned* tensor = nullptr;
    reset_last_error();
    EXPECT_EQ(handle.as_dlpack(handle.ptr, &tensor, gpu1, &stream0_, dlpack_version()), MTS_CALLBACK_ERROR);
    EXPECT_TRUE(names_both_devices(last_error())) << last_error();
    EXPECT_EQ(tensor, nullptr);
    auto on_gpu0 = array_on(gpu0, iota(4, 1.0), stream0_);
    const mts_array_t handle0 = on_gpu0->get();
    reset_last_error();
    EXPECT_EQ(handle0.as_dlpack(handle0.ptr, &tensor, gpu1, &other0_, dlpack_version()), MTS_CALLBACK_ERROR);
    EXPECT_TRUE(names_both_devices(last_error())) << last_error();
    EXPECT_EQ(tensor, nullptr);

    // a TensorMap moved to cuda:1 on a stream of cuda:0
    auto cpu_tensor = small_tensor();
    mts_tensormap_t* moved = nullptr;
    reset_last_error();
    EXPECT_EQ(mtsarray_tensormap_to(cpu_tensor.as_mts_tensormap_t(), gpu1, stream0_, &moved), MTS_CALLBACK_ERROR);
    EXPECT_TRUE(names_both_devices(last_error())) << last_error();
    EXPECT_EQ(moved, nullptr);

    // what follows a refusal works, and reads no freed memory (TearDown)
    auto source = array_on(gpu0, iota(4, 10.0), stream0_);
    EXPECT_EQ(mtsarray_copy_into(&handle, &source->get()), MTS_SUCCESS) << last_error();
    source.reset();
    EXPECT_EQ(values_of(*array), iota(4, 10.0));

    // a stream of the array's own device is taken
    EXPECT_EQ(mtsarray_set_stream(&handle, stream1_), MTS_SUCCESS) << last_error();
    EXPECT_EQ(array->stream(), stream1_);
    moved = nullptr;
    ASSERT_EQ(mtsarray_tensormap_to(cpu_tensor.as_mts_tensormap_t(), gpu1, stream1_, &moved), MTS_SUCCESS)
        << last_error();
    mts_tensormap_free(moved);
    array.reset();
    on_gpu0.reset();
}

// ---- a failed step never leaves a read unrecorded ---------------------------------------

namespace {

struct Operation {
    const char* name;
    DLDevice destination_device;
    // runs the call, returns whether it succeeded; `destination` is the
    // array it writes (nullptr for a copy it makes), `result` what it made
    std::function<bool(mtsarray::Array* destination, const mtsarray::Array& source,
                       std::unique_ptr<mtsarray::Array>& result, DLManagedTensorVersioned*& tensor)>
        run;
};

}  // namespace

// Every runtime call of a copy fails in turn (sim::fail_call_after): the
// source is destroyed at once after the failed call, while the stream that
// reads it is held; when that stream runs, it must not read freed memory.
TEST_F(DeviceStreams, FailingAnyStepOfACopyLeavesNoReadOfFreedMemory) {
    const int64_t held_stream = stream1_;
    std::vector<Operation> operations = {
        {"copy_into on one device, another stream", gpu0,
         [](mtsarray::Array* destination, const mtsarray::Array& source, std::unique_ptr<mtsarray::Array>&,
            DLManagedTensorVersioned*&) {
             return mtsarray_copy_into(&destination->get(), &source.get()) == MTS_SUCCESS;
         }},
        {"copy_into from cuda:0 to cuda:1", gpu1,
         [](mtsarray::Array* destination, const mtsarray::Array& source, std::unique_ptr<mtsarray::Array>&,
            DLManagedTensorVersioned*&) {
             return mtsarray_copy_into(&destination->get(), &source.get()) == MTS_SUCCESS;
         }},
        {"as_dlpack from cuda:0 to a consumer stream of cuda:1", gpu1,
         [held_stream](mtsarray::Array*, const mtsarray::Array& source, std::unique_ptr<mtsarray::Array>&,
                       DLManagedTensorVersioned*& tensor) {
             const mts_array_t handle = source.get();
             return handle.as_dlpack(handle.ptr, &tensor, gpu1, &held_stream, dlpack_version()) == MTS_SUCCESS;
         }},
        {"tensormap_to-style copy from cuda:0 to cuda:1 (mts_array_t copy)", gpu1,
         [](mtsarray::Array*, const mtsarray::Array& source, std::unique_ptr<mtsarray::Array>& result,
            DLManagedTensorVersioned*&) {
             const mts_array_t handle = source.get();
             mts_array_t copied = {};
             if (handle.copy(handle.ptr, gpu1, &copied) != MTS_SUCCESS) {
                 return false;
             }
             result = std::make_unique<mtsarray::Array>(copied);
             return true;
         }},
    };
    for (const auto& operation : operations) {
        // the stream the copy is queued on: the destination's
        const int device = operation.destination_device.device_id;
        const int64_t reader = device == 0 ? other0_ : held_stream;
        size_t failures = 0;
        for (int64_t step = 0; step < 1000; step++) {
            auto source = array_on(gpu0, iota(4, 2.5), stream0_);
            std::unique_ptr<mtsarray::Array> destination;
            if (std::string(operation.name).find("copy_into") != std::string::npos) {
                destination = array_on(operation.destination_device, iota(4, 0.0), reader);
            }
            // a copy made by mts_array_t::copy works on cuda:1's default stream
            const bool copies = std::string(operation.name).find("mts_array_t copy") != std::string::npos;
            const int64_t held = copies ? 1 : reader;
            sim::drain();
            auto gate = sim::hold(held, device);
            // the gate opens a while after the call: a host wait for the held
            // stream (the last resort of a marker that could not be made)
            // returns then, and any misordered free has run by then
            std::thread opener([&gate] {
                std::this_thread::sleep_for(std::chrono::milliseconds(60));
                gate.open();
            });
            std::unique_ptr<mtsarray::Array> result;
            DLManagedTensorVersioned* tensor = nullptr;
            sim::fail_call_after(step);
            const bool succeeded = operation.run(destination.get(), *source, result, tensor);
            const bool reached = !sim::call_failure_pending();
            sim::fail_call_after(-1);
            const std::string error = succeeded ? "" : last_error();
            source.reset();  // freed on its own stream, which is not held
            opener.join();
            if (succeeded && destination != nullptr) {
                EXPECT_EQ(values_of(*destination), iota(4, 2.5)) << operation.name << ", step " << step;
            }
            if (tensor != nullptr) {
                tensor->deleter(tensor);
            }
            result.reset();
            destination.reset();
            sim::drain();
            EXPECT_TRUE(sim::violations().empty())
                << operation.name << ", runtime call " << step << " failing (" << error
                << "): " << joined(sim::violations());
            sim::clear_violations();
            if (!reached) {
                EXPECT_TRUE(succeeded) << operation.name << ": " << error;
                break;
            }
            failures += succeeded ? 0 : 1;
        }
        EXPECT_GT(failures, 0u) << operation.name << ": no failure reached the call";
    }
}

// ---- copies between devices ---------------------------------------------------------------

// The copy is queued on the destination's stream: holding cuda:1's stream,
// cuda:0's next work on its own stream runs (stage k of a pipeline goes on
// while stage k + 1 is busy), and the copy lands once cuda:1's stream runs.
TEST_F(DeviceStreams, ACopyToAnotherDeviceLeavesTheSourceStreamFree) {
    const int64_t consumer = stream1_;

    for (const std::string what : {"copy_into", "as_dlpack"}) {
        auto source = array_on(gpu0, iota(4, 3.0), stream0_);
        auto destination = array_on(gpu1, iota(4, 0.0), consumer);
        sim::drain();
        auto gate = sim::hold(consumer, 1);
        DLManagedTensorVersioned* tensor = nullptr;
        if (what == "copy_into") {
            ASSERT_EQ(mtsarray_copy_into(&destination->get(), &source->get()), MTS_SUCCESS) << last_error();
        } else {
            const mts_array_t handle = source->get();
            ASSERT_EQ(handle.as_dlpack(handle.ptr, &tensor, gpu1, &consumer, dlpack_version()), MTS_SUCCESS)
                << last_error();
        }
        // cuda:0's next work on the source's own stream
        std::atomic<bool> ran{false};
        sim::enqueue(stream0_, 0, [&ran] { ran.store(true); });
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (!ran.load() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        EXPECT_TRUE(ran.load()) << what << " from cuda:0 to cuda:1 made cuda:0's stream wait for cuda:1's held stream";
        gate.open();
        if (tensor != nullptr) {
            // a consumer's read on its stream, then the export goes
            std::vector<double> read(4, 0.0);
            sim::enqueue_read(consumer, 1, read.data(), tensor->dl_tensor.data, 4 * sizeof(double));
            sim::drain();
            EXPECT_EQ(read, iota(4, 3.0)) << what;
            tensor->deleter(tensor);
        } else {
            EXPECT_EQ(values_of(*destination), iota(4, 3.0)) << what;
        }
        source.reset();
        destination.reset();
        sim::drain();
    }
}

// The copy waits for the source's pending writes, on the device: written
// behind a held stream of cuda:0, the source reaches cuda:1 with the new
// values, and no call waited on the host.
TEST_F(DeviceStreams, ACopyToAnotherDeviceWaitsForTheSourcesPendingWrites) {
    auto source = array_on(gpu0, iota(4, 0.0), stream0_);
    auto destination = array_on(gpu1, iota(4, -1.0), stream1_);
    auto update = array_on(gpu0, iota(4, 7.0), stream0_);
    sim::drain();
    auto gate = sim::hold(stream0_, 0);
    const size_t waits = sim::host_waits();
    ASSERT_EQ(mtsarray_copy_into(&source->get(), &update->get()), MTS_SUCCESS) << last_error();
    ASSERT_EQ(mtsarray_copy_into(&destination->get(), &source->get()), MTS_SUCCESS) << last_error();
    EXPECT_EQ(sim::host_waits(), waits) << "a copy between devices waited on the host";
    source.reset();  // freed after the copy that reads it, on cuda:1's stream
    update.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.open();
    EXPECT_EQ(values_of(*destination), iota(4, 7.0));
    destination.reset();
}

}  // namespace
