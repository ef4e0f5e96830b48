// What only the simulated CUDA runtime (tests/support/simulated_runtime.hpp)
// can see of GpuBackend's stream contract, on every machine, GPU or not:
//
//  - no host wait at all (counted) while importing, moving a TensorMap, or
//    copying more than the staging pool holds;
//  - memory read on another stream (a copied export, a wrapped buffer, an
//    imported tensor, a buffer used before a capture) is freed or handed
//    back only after that read: a use of freed memory is reported;
//  - the host copy of label arrays is never trusted once a writable pointer
//    to their buffer has left mtsarray;
//  - graph capture: move_data needs its input in the same capture, frees
//    wait for the capture to end, deferred releases and the per-thread
//    stream of another thread leave captures valid; prepared plans replay
//    with no host work;
//  - a user allocator serves and frees its own memory; contexts are made
//    only on the devices used.
// The checks that also hold on a real GPU (ordering, no host block,
// lifetimes, capture in its three modes) run on both, through the stream
// driver, in tests/gpu/streams_test.cpp and tests/gpu/no_host_block_test.cpp.

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"
#include "support/movements.hpp"
#include "core/backend_registry.hpp"
#include "core/buffer.hpp"
#include "base/move_plan.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;
using mtsarray::detail::Stream;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};
constexpr DLDevice gpu1 = {kDLCUDA, 1};

enum class StreamKind { legacy, per_thread, user };

std::string kind_name(StreamKind kind) {
    return kind == StreamKind::legacy ? "legacy" : kind == StreamKind::per_thread ? "per_thread" : "user";
}

/// The simulated devices as the tests drive them: the simulation's controls,
/// and the backend's own calls for memory the tests make themselves.
struct SimulatedDevices {
    int64_t create_stream(int device) { return sim::create_stream(device); }
    sim::Gate hold(int64_t stream, int device) { return sim::hold(stream, device); }
    size_t host_waits() const { return sim::host_waits(); }
    std::vector<std::string> violations() const { return sim::violations(); }
    void clear_violations() { sim::clear_violations(); }
    void drain() { sim::drain(); }
    size_t allocated_bytes() const { return sim::allocated_bytes(); }
    void begin_capture(int64_t stream, int device) { sim::begin_capture(stream, device); }
    sim::Graph end_capture(int64_t stream, int device) { return sim::end_capture(stream, device); }
    void launch(const sim::Graph& graph, int64_t stream, int device) { sim::launch(graph, stream, device); }

    const mtsarray::detail::Backend& backend() const { return mtsarray::detail::memory_backend(kDLCUDA); }
    void* allocate(const Stream& stream, size_t bytes) { return backend().allocate(stream, bytes); }
    void deallocate(const Stream& stream, void* data, size_t bytes) { backend().deallocate(stream, data, bytes); }
    void synchronize(const Stream& stream) { backend().synchronize(stream); }
    /// A consumer reading device memory on its stream (into host memory).
    void copy_to_host(const Stream& stream, void* destination, const void* source, size_t bytes) {
        sim::enqueue_read(stream.number(), stream.device().device_id, destination, source, bytes);
    }
};

class SimulatedStreams : public ::testing::TestWithParam<StreamKind> {
protected:
    void SetUp() override {
        ASSERT_TRUE(sim::in_use()) << "run with MTSARRAY_TEST_GPU=simulated";
        // the one zero-byte allocation of each device lives for the process
        for (int device = 0; device < sim::device_count(); device++) {
            (void)mtsarray::Array::zeros(DLDevice{kDLCUDA, device}, float64(), {0});
        }
        gpu_.drain();
        allocated_before_ = gpu_.allocated_bytes();
        switch (GetParam()) {
        case StreamKind::legacy: stream_ = 1; break;
        case StreamKind::per_thread: stream_ = 2; break;
        case StreamKind::user: stream_ = gpu_.create_stream(0); break;
        }
        other_ = gpu_.create_stream(0);
        consumer_ = gpu_.create_stream(0);
        if (sim::device_count() > 1) {
            device1_ = gpu_.create_stream(1);
        }
    }

    /// Why a test that needs a second device can not run, or nothing.
    static std::string without_a_second_device() {
        return sim::device_count() > 1 ? ""
                                       : "the simulation has one device (MTSARRAY_SIM_DEVICES=1): this needs two";
    }

    void TearDown() override {
        // every array of the test is gone: everything was freed, in order
        gpu_.drain();
        EXPECT_TRUE(gpu_.violations().empty()) << gpu_.violations().front();
        gpu_.clear_violations();
        EXPECT_EQ(gpu_.allocated_bytes(), allocated_before_) << "device memory leaked";
        for (int64_t stream : {stream_, other_, consumer_, device1_}) {
            if (stream > 2) {
                sim::destroy_stream(stream);
            }
        }
    }

    /// An array on the simulated device 0 holding `values`, working on
    /// `stream` (its contents arrive through a host -> device copy).
    mtsarray::Array device_array(const std::vector<double>& values, std::vector<uintptr_t> shape, int64_t stream) {
        auto array = array_from_bytes(gpu0, float64(), shape, to_bytes(values));
        array.set_stream(stream);
        return array;
    }

    std::vector<double> values_of(const mtsarray::Array& array) { return from_bytes<double>(read_bytes(array)); }

    /// Runs `operation` while `held` streams are busy: it must return
    /// without a host wait and leave the slow kernels running.
    void expect_no_host_wait(const std::vector<std::pair<int64_t, int>>& held,
                             const std::function<void()>& operation, const std::string& what) {
        gpu_.drain();
        std::vector<sim::Gate> gates;
        for (const auto& stream : held) {
            gates.push_back(gpu_.hold(stream.first, stream.second));
        }
        const size_t waits = gpu_.host_waits();
        operation();
        EXPECT_EQ(gpu_.host_waits(), waits) << what << " waited on the host";
        for (const auto& gate : gates) {
            EXPECT_FALSE(gate.is_open()) << what;
        }
        for (auto& gate : gates) {
            gate.open();
        }
    }

    /// Device memory of the test's own, wrapped in an array that works on
    /// `stream` and whose deleter frees the memory there and counts.
    struct WrappedMemory {
        SimulatedDevices* gpu = nullptr;
        Stream stream = Stream::default_for(gpu0);
        void* memory = nullptr;
        std::atomic<int> released{0};
        mts_array_t array = {};
        std::unique_ptr<mtsarray::Array> input;
    };

    /// Wraps four float64 of device memory allocated on `stream`, then
    /// holds the stream (`gate`) and queues behind it a move_data into them.
    void write_wrapped_memory_behind_a_hold(int64_t stream, WrappedMemory& wrapped, sim::Gate& gate) {
        wrapped.gpu = &gpu_;
        wrapped.stream = Stream::parse(gpu0, stream);
        wrapped.memory = gpu_.allocate(wrapped.stream, 4 * sizeof(double));
        const uintptr_t shape[] = {4, 1};
        ASSERT_EQ(mtsarray_wrap(wrapped.memory, gpu0, float64(), shape, 2,
                                [](void* context) {
                                    auto* self = static_cast<WrappedMemory*>(context);
                                    self->gpu->deallocate(self->stream, self->memory, 4 * sizeof(double));
                                    self->released.fetch_add(1);
                                },
                                &wrapped, &wrapped.array),
                  MTS_SUCCESS)
            << last_error();
        ASSERT_EQ(mtsarray_set_stream(&wrapped.array, stream), MTS_SUCCESS);
        wrapped.input = std::make_unique<mtsarray::Array>(device_array(iota(4, 1.0), {4, 1}, stream));
        gpu_.drain();
        gate = gpu_.hold(stream, 0);
        const std::vector<mts_data_movement_t> movements = {{0, 3, 0, 0, 1}, {3, 0, 0, 0, 1}};
        const auto& input = wrapped.input->get();
        ASSERT_EQ(wrapped.array.move_data(wrapped.array.ptr, input.ptr, movements.data(), 2), MTS_SUCCESS)
            << last_error();
    }

    SimulatedDevices gpu_;
    size_t allocated_before_ = 0;
    int64_t stream_ = 0;
    int64_t other_ = 0;
    int64_t consumer_ = 0;
    int64_t device1_ = 0;
};

INSTANTIATE_TEST_SUITE_P(AllStreams, SimulatedStreams,
                         ::testing::Values(StreamKind::legacy, StreamKind::per_thread, StreamKind::user),
                         [](const ::testing::TestParamInfo<StreamKind>& info) { return kind_name(info.param); });

/// The legacy stream can not capture (cudaErrorStreamCaptureUnsupported).
#define SKIP_UNLESS_CAPTURABLE()                                                      \
    do {                                                                              \
        if (GetParam() == StreamKind::legacy) {                                       \
            GTEST_SKIP() << "the legacy stream can not capture a graph";              \
        }                                                                             \
    } while (false)

mts_array_t raw(const mtsarray::Array& array) {
    return array.get();
}

/// While a gate holds a stream, work that is wrongly not ordered behind it
/// (a free, a release) would run now: give it time to, so that the checks
/// after the gate opens catch it deterministically enough.
void let_misordered_work_run() {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

}  // namespace

// ---- 1. nothing blocks the host ------------------------------------------------------

TEST_P(SimulatedStreams, ImportingAStridedDeviceTensorReturnsAtOnce) {
    // a producer's strided tensor in simulated device memory
    auto producer = device_array(iota(6, 0.0), {2, 3}, 1);
    gpu_.drain();
    std::atomic<int> deleted{0};
    struct Producer {
        DLManagedTensorVersioned managed;
        int64_t shape[2] = {3, 2};
        int64_t strides[2] = {1, 3};
        std::atomic<int>* deleted;
    };
    auto* tensor = new Producer{};
    tensor->deleted = &deleted;
    tensor->managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    tensor->managed.manager_ctx = tensor;
    tensor->managed.deleter = [](DLManagedTensorVersioned* self) {
        auto* owner = static_cast<Producer*>(self->manager_ctx);
        owner->deleted->fetch_add(1);
        delete owner;
    };
    tensor->managed.dl_tensor.data = producer.data();
    tensor->managed.dl_tensor.device = gpu0;
    tensor->managed.dl_tensor.ndim = 2;
    tensor->managed.dl_tensor.dtype = float64();
    tensor->managed.dl_tensor.shape = tensor->shape;
    tensor->managed.dl_tensor.strides = tensor->strides;

    std::unique_ptr<mtsarray::Array> imported;
    auto gate = gpu_.hold(1, 0);  // the import copies on the device's default stream
    const size_t waits = gpu_.host_waits();
    imported = std::make_unique<mtsarray::Array>(mtsarray::Array::from_dlpack(&tensor->managed));
    EXPECT_EQ(gpu_.host_waits(), waits);
    let_misordered_work_run();
    // the producer's memory is still being read: not handed back yet
    EXPECT_EQ(deleted.load(), 0);
    gate.open();
    gpu_.drain();
    EXPECT_EQ(deleted.load(), 1);
    EXPECT_EQ(values_of(*imported), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST_P(SimulatedStreams, MovingATensorMapToTheDeviceReturnsAtOnce) {
    // a block of 3 samples x 2 properties, built on the CPU with labels
    const auto labels = [](const std::string& name, int32_t count) {
        std::vector<int32_t> values(static_cast<size_t>(count));
        std::iota(values.begin(), values.end(), 0);
        auto array = array_from_bytes(mtsarray::cpu(), int32(), {values.size(), 1}, to_bytes(values));
        return metatensor::Labels({name}, std::move(array).into_metatensor());
    };
    auto cpu_values = array_from_bytes(mtsarray::cpu(), float64(), {3, 2}, to_bytes(iota(6, 0.0)));
    auto block = mtsarray::make_block(std::move(cpu_values), labels("s", 3), {}, labels("p", 2));
    auto keys = labels("k", 1);
    std::vector<metatensor::TensorBlock> blocks;
    blocks.push_back(std::move(block));
    auto tensor = metatensor::TensorMap(keys, std::move(blocks));

    std::unique_ptr<metatensor::TensorMap> moved;
    expect_no_host_wait({{stream_, 0}},
                        [&] {
                            moved = std::make_unique<metatensor::TensorMap>(
                                mtsarray::tensormap_to(tensor, gpu0, stream_));
                        },
                        "tensormap_to");
    auto moved_values = moved->block_by_id(0).mts_array();
    EXPECT_EQ(moved_values.device().device_type, kDLCUDA);
    EXPECT_EQ(from_bytes<double>(read_bytes(moved_values.as_mts_array_t())), iota(6, 0.0));
}

TEST_P(SimulatedStreams, HostConsumersWaitOnlyForTheStreamTheyRead) {
    auto array = device_array(iota(3, 1.0), {3}, stream_);
    gpu_.drain();
    auto unrelated = gpu_.hold(other_, 0);
    // reading `array` on the host waits for its stream, not for `other_`
    EXPECT_EQ(values_of(array), iota(3, 1.0));
    EXPECT_FALSE(unrelated.is_open());
}

// ---- 2. lifetimes across streams ----------------------------------------------------------

TEST_P(SimulatedStreams, TheSimulatorSeesAFreeOrderedBeforeARead) {
    // the checker itself: a read held on one stream, the memory freed on
    // another right away, must be reported (the real tests rely on it)
    const Stream reader = Stream::parse(gpu0, other_);
    const Stream freer = Stream::parse(gpu0, stream_);
    void* memory = gpu_.allocate(freer, 64);
    gpu_.drain();
    auto gate = gpu_.hold(other_, 0);
    std::vector<char> host(64);
    gpu_.copy_to_host(reader, host.data(), memory, 64);
    gpu_.deallocate(freer, memory, 64);
    gpu_.synchronize(freer);  // the free ran first
    gate.open();
    gpu_.drain();
    EXPECT_EQ(gpu_.violations().size(), 1u);
    gpu_.clear_violations();  // provoked on purpose
}

TEST_P(SimulatedStreams, ACopiedExportLivesOnTheConsumerStream) {
    if (!without_a_second_device().empty()) {
        GTEST_SKIP() << without_a_second_device();
    }
    // the per-thread default stream of device 1: a stream the consumer
    // made may be gone when it releases the export, a default one never
    const int64_t per_thread = 2;
    auto array = device_array(iota(4, 3.0), {4}, stream_);
    DLManagedTensorVersioned* tensor = nullptr;
    ASSERT_EQ(raw(array).as_dlpack(raw(array).ptr, &tensor, gpu1, &per_thread, dlpack_version()), MTS_SUCCESS);
    auto gate = gpu_.hold(per_thread, 1);
    std::vector<double> read(4, 0.0);
    gpu_.copy_to_host(Stream::parse(gpu1, per_thread), read.data(), tensor->dl_tensor.data, 32);
    tensor->deleter(tensor);  // freed after the read queued there
    gate.open();
    gpu_.drain();
    EXPECT_TRUE(gpu_.violations().empty());
    EXPECT_EQ(read, iota(4, 3.0));
}

TEST_P(SimulatedStreams, WrappedMemoryGoesBackOnlyAfterTheDeviceIsDone) {
    WrappedMemory wrapped;
    sim::Gate gate;
    ASSERT_NO_FATAL_FAILURE(write_wrapped_memory_behind_a_hold(stream_, wrapped, gate));
    wrapped.array.destroy(wrapped.array.ptr);
    let_misordered_work_run();
    EXPECT_EQ(wrapped.released.load(), 0) << "the deleter ran while a write into the memory was queued";
    gate.open();
    gpu_.drain();
    EXPECT_EQ(wrapped.released.load(), 1);
}

// ---- 3. the host copy of labels ---------------------------------------------------------

namespace {

mtsarray::Array labels_on_device(const std::vector<int32_t>& values, uintptr_t rows) {
    // copied from the CPU: the device array keeps a host mirror of them
    return array_from_bytes(gpu0, int32(), {rows, values.size() / rows}, to_bytes(values));
}

}  // namespace

TEST_P(SimulatedStreams, AWritablePointerEndsTrustInTheHostCopy) {
    auto labels = labels_on_device({1, 2, 3, 4}, 2);
    labels.set_stream(stream_);
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(labels)), (std::vector<int32_t>{1, 2, 3, 4}));
    // a writable pointer escapes, the host reads again (a mirror could be
    // rebuilt here), then the caller writes through its old pointer
    void* pointer = labels.data();
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(labels)), (std::vector<int32_t>{1, 2, 3, 4}));
    const std::vector<int32_t> written = {9, 8, 7, 6};
    gpu_.drain();
    std::memcpy(pointer, written.data(), 16);  // "a kernel of the caller's"
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(labels)), written);
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(labels.copy(mtsarray::cpu()))), written);
}

TEST_P(SimulatedStreams, AZeroCopyReimportWritingTheBufferIsSeen) {
    auto labels = labels_on_device({1, 2, 3, 4, 5, 6}, 3);
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(labels)), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
    DLManagedTensorVersioned* tensor = nullptr;
    const int64_t legacy = 1;
    ASSERT_EQ(raw(labels).as_dlpack(raw(labels).ptr, &tensor, gpu0, &legacy, dlpack_version()), MTS_SUCCESS);
    auto shared = mtsarray::Array::from_dlpack(tensor);  // zero-copy: same buffer
    EXPECT_EQ(shared.data(), labels.data());
    auto source = array_from_bytes(gpu0, int32(), {3, 2}, to_bytes(std::vector<int32_t>{-1, -2, -3, -4, -5, -6}));
    const std::vector<mts_data_movement_t> movements = {{0, 2, 0, 0, 2}};
    ASSERT_EQ(raw(shared).move_data(raw(shared).ptr, raw(source).ptr, movements.data(), 1), MTS_SUCCESS);
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(labels)), (std::vector<int32_t>{1, 2, 3, 4, -1, -2}));
}

TEST_P(SimulatedStreams, TheHostCopyServesReadsWhileNoPointerEscaped) {
    auto labels = labels_on_device({4, 5, 6, 7}, 2);
    labels.set_stream(stream_);
    gpu_.drain();
    // a mirror is at hand: a host read needs no transfer and no wait, even
    // with the stream busy
    auto gate = gpu_.hold(stream_, 0);
    const size_t waits = gpu_.host_waits();
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(labels)), (std::vector<int32_t>{4, 5, 6, 7}));
    EXPECT_EQ(gpu_.host_waits(), waits);
}

// ---- 4. graph capture ---------------------------------------------------------------------

TEST_P(SimulatedStreams, CapturedMoveDataNeedsTheInputInTheSameCapture) {
    SKIP_UNLESS_CAPTURABLE();
    auto input = device_array(iota(2, 1.0), {2, 1}, other_);
    auto output = device_array(std::vector<double>(2, 0.0), {2, 1}, stream_);
    gpu_.drain();
    gpu_.begin_capture(stream_, 0);
    const mts_data_movement_t movement = {0, 1, 0, 0, 1};
    reset_last_error();
    EXPECT_EQ(raw(output).move_data(raw(output).ptr, raw(input).ptr, &movement, 1), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("capturing a CUDA graph"), std::string::npos) << last_error();
    EXPECT_TRUE(gpu_.end_capture(stream_, 0).empty());
    EXPECT_EQ(values_of(output), std::vector<double>(2, 0.0));
}

TEST_P(SimulatedStreams, ArraysDestroyedDuringACaptureAreFreedAfterIt) {
    SKIP_UNLESS_CAPTURABLE();
    auto keep = device_array(iota(2, 0.0), {2}, stream_);
    auto gone = std::make_unique<mtsarray::Array>(device_array(iota(4, 0.0), {4}, stream_));
    gpu_.drain();
    const size_t before = gpu_.allocated_bytes();
    gpu_.begin_capture(stream_, 0);
    gone.reset();  // destroyed while its stream captures: a free now would be a graph node
    // returns once the deferred-work thread has polled the capture itself
    // (DeferredWork::settled): on that thread, stream 2 names its own
    // per-thread stream, which never captures
    gpu_.drain();
    EXPECT_EQ(gpu_.allocated_bytes(), before) << "freed inside the capture";
    auto graph = gpu_.end_capture(stream_, 0);
    EXPECT_TRUE(graph.empty()) << "the free became part of the graph";
    gpu_.drain();
    EXPECT_EQ(gpu_.allocated_bytes(), before - 4 * sizeof(double));
}

// ---- 5. the user's allocator ------------------------------------------------------------

TEST_P(SimulatedStreams, AUserAllocatorServesAndFreesItsOwnMemory) {
    struct Counts {
        SimulatedDevices* gpu;
        int allocated = 0;
        int freed = 0;
        std::vector<int64_t> streams;
    } counts{&gpu_, 0, 0, {}};
    mtsarray_allocator_t allocator = {};
    allocator.context = &counts;
    allocator.allocate = [](void* context, DLDevice device, int64_t stream, size_t bytes) -> void* {
        auto* self = static_cast<Counts*>(context);
        self->allocated++;
        self->streams.push_back(stream);
        return self->gpu->allocate(Stream::parse(device, stream), bytes);
    };
    allocator.deallocate = [](void* context, DLDevice device, int64_t stream, void* data, size_t bytes) {
        auto* self = static_cast<Counts*>(context);
        self->freed++;
        self->gpu->deallocate(Stream::parse(device, stream), data, bytes);
    };
    ASSERT_EQ(mtsarray_set_allocator(kDLCUDA, &allocator), MTS_SUCCESS) << last_error();
    {
        auto mine = mtsarray::Array::full<double>(gpu0, {3}, 1.5);
        auto empty = mtsarray::Array::zeros(gpu0, float64(), {0, 3});  // zero bytes: never asked
        ASSERT_EQ(mtsarray_set_allocator(kDLCUDA, nullptr), MTS_SUCCESS);
        auto theirs = mtsarray::Array::full<double>(gpu0, {3}, 2.5);
        EXPECT_EQ(counts.allocated, 1);
        EXPECT_EQ(counts.streams, std::vector<int64_t>{1});
        EXPECT_EQ(values_of(mine), std::vector<double>(3, 1.5));
        EXPECT_EQ(values_of(theirs), std::vector<double>(3, 2.5));
    }
    gpu_.drain();
    EXPECT_EQ(counts.freed, 1) << "memory must go back to the allocator that made it";

    reset_last_error();
    EXPECT_EQ(mtsarray_set_allocator(kDLCPU, &allocator), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("only CUDA and ROCm device memory"), std::string::npos) << last_error();
    allocator.deallocate = nullptr;
    EXPECT_EQ(mtsarray_set_allocator(kDLCUDA, &allocator), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("must not be NULL"), std::string::npos) << last_error();
}

// ---- 6. what the simulated runtime's rules catch in GpuBackend -----------------------------

namespace {

template <class Predicate> bool eventually(Predicate predicate) {
    for (int i = 0; i < 500 && !predicate(); i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return predicate();
}

std::string joined(const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& line : lines) {
        text += line + "\n";
    }
    return text;
}

}  // namespace

// A graph captured in Global mode (torch.cuda.graph's default) on one thread
// while another thread hands wrapped memory back: the release's event query
// and the deferred thread's wait must leave the capture valid, and the
// memory goes back only once the device is done with it.
TEST_P(SimulatedStreams, AGlobalCaptureOnAnotherThreadSurvivesDeferredReleases) {
    if (GetParam() != StreamKind::user) {
        GTEST_SKIP() << "the captured stream is a user stream of its own: tested once";
    }
    const int64_t captured = sim::create_stream(0);
    WrappedMemory wrapped;
    sim::Gate gate;
    ASSERT_NO_FATAL_FAILURE(write_wrapped_memory_behind_a_hold(other_, wrapped, gate));

    sim::begin_capture(captured, 0, sim::CaptureMode::global);
    std::thread([&] { wrapped.array.destroy(wrapped.array.ptr); }).join();
    let_misordered_work_run();
    EXPECT_EQ(wrapped.released.load(), 0) << "the memory went back while a write into it was queued";
    gate.open();
    EXPECT_TRUE(eventually([&] { return wrapped.released.load() == 1; }));
    EXPECT_NO_THROW(sim::end_capture(captured, 0)) << joined(sim::capture_invalidations());
    gpu_.drain();
    sim::destroy_stream(captured);
}

// Stream 2 is the per-thread default stream of the thread that names it: an
// array working there and destroyed by another thread (a garbage collector,
// a DLPack deleter) is freed after the work queued on its owner's stream.
TEST_P(SimulatedStreams, AnArrayOnThePerThreadStreamFreedByAnotherThreadWaitsForItsWork) {
    if (GetParam() != StreamKind::per_thread) {
        GTEST_SKIP() << "about stream 2";
    }
    auto array = std::make_unique<mtsarray::Array>(device_array(iota(4, 1.0), {4}, 2));
    gpu_.drain();
    auto gate = gpu_.hold(2, 0);  // this thread's per-thread stream
    std::vector<double> read(4, 0.0);
    gpu_.copy_to_host(Stream::parse(gpu0, 2), read.data(), array->data(), 4 * sizeof(double));
    std::thread([&] { array.reset(); }).join();
    let_misordered_work_run();
    gate.open();
    gpu_.drain();
    EXPECT_TRUE(gpu_.violations().empty()) << joined(gpu_.violations());
    gpu_.clear_violations();
    EXPECT_EQ(read, iota(4, 1.0));
}

TEST_P(SimulatedStreams, AnotherThreadCanNotQueueWorkOnThePerThreadStreamOfAnArray) {
    if (GetParam() != StreamKind::per_thread) {
        GTEST_SKIP() << "about stream 2";
    }
    auto output = device_array(std::vector<double>(2, 0.0), {2, 1}, 2);
    auto input = device_array(iota(2, 1.0), {2, 1}, 2);
    const mts_data_movement_t movement = {0, 1, 0, 0, 1};
    mts_status_t status = MTS_SUCCESS;
    std::string error;
    std::thread([&] {
        status = raw(output).move_data(raw(output).ptr, raw(input).ptr, &movement, 1);
        error = last_error();
    }).join();
    EXPECT_EQ(status, MTS_CALLBACK_ERROR);
    EXPECT_NE(error.find("per-thread default stream of another thread"), std::string::npos) << error;
    EXPECT_EQ(values_of(output), std::vector<double>(2, 0.0));
}

// The input on this thread's per-thread stream with a write still queued
// there (held), read by another thread into an array on that thread's own
// per-thread stream: two different streams, although both are "stream 2".
// Reading it unordered would take the values from before the write; the
// read is refused (ordering it needs an event recorded on a stream only its
// owner can name), and nothing is written.
TEST_P(SimulatedStreams, AnInputOnThePerThreadStreamOfAnotherThreadIsNotReadUnordered) {
    if (GetParam() != StreamKind::per_thread) {
        GTEST_SKIP() << "about stream 2";
    }
    auto input = device_array(iota(2, 1.0), {2, 1}, 2);
    auto written = device_array({7.0, 8.0}, {2, 1}, 2);
    gpu_.drain();
    auto gate = gpu_.hold(2, 0);  // this thread's per-thread stream
    const mts_data_movement_t rows[2] = {{0, 0, 0, 0, 1}, {1, 1, 0, 0, 1}};
    ASSERT_EQ(raw(input).move_data(raw(input).ptr, raw(written).ptr, rows, 2), MTS_SUCCESS) << last_error();
    mts_status_t status = MTS_SUCCESS;
    std::string error;
    std::vector<double> read;
    std::thread([&] {
        auto output = device_array(std::vector<double>(2, 0.0), {2, 1}, 2);  // this thread's stream 2
        status = raw(output).move_data(raw(output).ptr, raw(input).ptr, rows, 2);
        error = last_error();
        if (status == MTS_SUCCESS) {
            // ordered, the read waits for the held write: nothing to read yet
            read = values_of(output);
        }
    }).join();
    gate.open();
    gpu_.drain();
    EXPECT_EQ(status, MTS_CALLBACK_ERROR) << "another thread's per-thread stream was taken for its own";
    EXPECT_NE(error.find("per-thread default stream of another thread"), std::string::npos) << error;
    EXPECT_TRUE(read.empty()) << "read " << read[0] << ", " << read[1] << " of an input whose write to 7, 8 was "
                              << "still queued on another thread's stream";
    EXPECT_EQ(values_of(input), (std::vector<double>{7.0, 8.0}));
}

// A use recorded on a stream before it captures is still waited for by the
// free after the capture (a capture makes no marker, and must not erase the
// one before).
TEST_P(SimulatedStreams, AUseBeforeACaptureIsWaitedForByTheFree) {
    if (GetParam() != StreamKind::user) {
        GTEST_SKIP() << "the captured stream is `other_`: tested once";
    }
    auto buffer = mtsarray::detail::Buffer::allocate(Stream::parse(gpu0, stream_), 4 * sizeof(double));
    const std::vector<double> values = iota(4, 5.0);
    gpu_.backend().copy_from_host(Stream::parse(gpu0, stream_), buffer->data(), values.data(), 32);
    gpu_.drain();
    const Stream reader = Stream::parse(gpu0, other_);
    auto gate = gpu_.hold(other_, 0);
    std::vector<double> read(4, 0.0);
    gpu_.copy_to_host(reader, read.data(), buffer->data(), 32);
    buffer->record_use(reader);
    gpu_.begin_capture(other_, 0);
    buffer->record_use(reader);  // a use inside the capture
    (void)gpu_.end_capture(other_, 0);
    buffer.reset();  // freed on `stream_`, after the read on `other_`
    let_misordered_work_run();
    gate.open();
    gpu_.drain();
    EXPECT_TRUE(gpu_.violations().empty()) << joined(gpu_.violations());
    gpu_.clear_violations();
    EXPECT_EQ(read, values);
}

// A program that only uses device 1 never makes a context on device 0
// (eight MPI ranks on eight GPUs must not all land on GPU 0).
TEST_P(SimulatedStreams, OnlyTheDevicesUsedGetAContext) {
    if (GetParam() != StreamKind::legacy) {
        GTEST_SKIP() << "arrays on their default stream: tested once";
    }
    if (!without_a_second_device().empty()) {
        GTEST_SKIP() << without_a_second_device();
    }
    std::vector<int> contexts;
    std::thread([&] {
        // a thread that never chose a device (its current device is 0)
        sim::forget_contexts();
        {
            auto array = mtsarray::Array::full<double>(gpu1, {4}, 1.5);
            auto copy = array.copy(gpu1);
            EXPECT_EQ(values_of(copy), std::vector<double>(4, 1.5));
        }
        sim::drain();
        contexts = sim::contexts();
    }).join();
    EXPECT_EQ(contexts, std::vector<int>{1});
}

// Page-locked and managed memory are allocated and freed (the free on the
// deferred-work thread) in the context of a device the program uses: a
// thread that uses only device 1 -- whether it chose it with
// cudaSetDevice(1) or never chose a device -- leaves no context on device 0
// (the staged MPI path makes page-locked arrays on every rank).
TEST_P(SimulatedStreams, HostMemoryOfTheGpuMakesNoContextOnAnUnusedDevice) {
    if (GetParam() != StreamKind::legacy) {
        GTEST_SKIP() << "arrays on their default stream: tested once";
    }
    if (!without_a_second_device().empty()) {
        GTEST_SKIP() << without_a_second_device();
    }
    for (const bool chose_device_1 : {true, false}) {
        for (const DLDeviceType type : {kDLCUDAHost, kDLCUDAManaged}) {
            std::vector<int> contexts;
            std::thread([&] {
                sim::forget_contexts();
                if (chose_device_1) {
                    sim::set_device(1);
                }
                {
                    auto array = mtsarray::Array::full<double>(gpu1, {4}, 1.5);
                    auto host = array.copy(DLDevice{type, 0});
                    auto back = host.copy(gpu1);
                    auto made_there = mtsarray::Array::full<double>(DLDevice{type, 0}, {4}, 2.5);
                    EXPECT_EQ(values_of(back), std::vector<double>(4, 1.5));
                    EXPECT_EQ(values_of(made_there), std::vector<double>(4, 2.5));
                }
                sim::drain();  // the frees ran, on the deferred-work thread
                contexts = sim::contexts();
            }).join();
            EXPECT_EQ(contexts, std::vector<int>{1})
                << (type == kDLCUDAHost ? "page-locked" : "managed") << " memory, from a thread that "
                << (chose_device_1 ? "called cudaSetDevice(1)" : "never chose a device");
        }
    }
}

// Managed memory takes CUDA stream numbers, with the CUDA rules.
TEST_P(SimulatedStreams, ManagedMemoryExportsToCudaStreams) {
    const DLDevice managed = {kDLCUDAManaged, 0};
    auto array = mtsarray::Array::full<double>(managed, {3}, 2.0);
    for (int64_t number : {int64_t(1), int64_t(2), stream_, int64_t(-1)}) {
        DLManagedTensorVersioned* tensor = nullptr;
        ASSERT_EQ(raw(array).as_dlpack(raw(array).ptr, &tensor, managed, &number, dlpack_version()), MTS_SUCCESS)
            << number << ": " << last_error();
        EXPECT_EQ(tensor->dl_tensor.device.device_type, kDLCUDAManaged);
        EXPECT_EQ(static_cast<const double*>(tensor->dl_tensor.data)[2], 2.0);
        tensor->deleter(tensor);
    }
    DLManagedTensorVersioned* tensor = nullptr;
    const int64_t zero = 0;
    reset_last_error();
    EXPECT_EQ(raw(array).as_dlpack(raw(array).ptr, &tensor, managed, &zero, dlpack_version()), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("0 is ambiguous for CUDA"), std::string::npos) << last_error();
}

// A copy from the host larger than the staging pool goes through the
// device's upload stream: it does not wait for the held destination stream
// (a pageable copy of more than 1 MiB on it would), and the source may go at
// once.
TEST_P(SimulatedStreams, ALargeCopyFromTheHostReturnsAtOnce) {
    if (GetParam() != StreamKind::legacy) {
        GTEST_SKIP() << "copies go to the device's default stream: tested once";
    }
    const size_t count = (size_t(72) << 20) / sizeof(double);  // above the 64 MiB staging limit
    std::vector<double> values(count);
    for (size_t i = 0; i < count; i += 4096) {
        values[i] = static_cast<double>(i);
    }
    auto host = std::make_unique<mtsarray::Array>(
        array_from_bytes(mtsarray::cpu(), float64(), {count}, to_bytes(values)));
    std::unique_ptr<mtsarray::Array> device;
    expect_no_host_wait({{1, 0}}, [&] { device = std::make_unique<mtsarray::Array>(host->copy(gpu0)); },
                        "a copy of 72 MiB to the device");
    host.reset();  // consumed by the call
    const auto copied = values_of(*device);
    EXPECT_TRUE(copied == values);
}

// ---- 7. prepared move plans -------------------------------------------------------------

namespace {

/// A prepared plan of the GPU backend for [samples, properties] float64
/// arrays, made on `stream`.
std::unique_ptr<const mtsarray::detail::BackendMovePlan> prepare(const mtsarray::detail::Backend& backend,
                                                                  const Stream& stream, uintptr_t output_samples,
                                                                  uintptr_t input_samples, uintptr_t properties,
                                                                  const std::vector<mts_data_movement_t>& movements) {
    const mtsarray::detail::Shape output_shape = {output_samples, properties};
    const mtsarray::detail::Shape input_shape = {input_samples, properties};
    const mtsarray::detail::MovePlan plan(output_shape, input_shape, sizeof(double), movements.data(),
                                          movements.size());
    // the copy the backend keeps for the plan, made as it reads the list
    std::vector<mts_data_movement_t> copy(movements.size());
    mtsarray::detail::SampleReach reach;
    auto prepared = backend.prepare_move_plan(stream, plan, copy.data(), reach);
    mtsarray::detail::SampleReach expected;
    for (size_t i = 0; i < movements.size(); i++) {
        EXPECT_EQ(std::memcmp(&copy[i], &movements[i], sizeof(mts_data_movement_t)), 0) << "movement " << i;
        expected.input_samples = std::max(expected.input_samples, movements[i].sample_in + 1);
        expected.output_samples = std::max(expected.output_samples, movements[i].sample_out + 1);
    }
    EXPECT_EQ(reach.input_samples, expected.input_samples);
    EXPECT_EQ(reach.output_samples, expected.output_samples);
    return prepared;
}

/// The device pointer of an array (its first element).
void* data_of(mtsarray::Array& array) { return array.data(); }

}  // namespace

TEST_P(SimulatedStreams, APreparedPlanMovesLikeMoveDataWithNoUploadNorAllocation) {
    const auto& backend = gpu_.backend();
    const Stream stream = Stream::parse(gpu0, stream_);
    for (size_t count : {size_t(0), size_t(1), size_t(150), size_t(3000)}) {
        const auto movements = mixed_movements(count, count + 1);
        const uintptr_t samples = std::max<size_t>(count, 1);
        auto input = device_array(iota(samples * 64, 1.0), {samples, 64}, stream_);
        auto expected = device_array(std::vector<double>(2 * samples * 64, -1.0), {2 * samples, 64}, stream_);
        auto output = device_array(std::vector<double>(2 * samples * 64, -1.0), {2 * samples, 64}, stream_);
        ASSERT_EQ(raw(expected).move_data(raw(expected).ptr, raw(input).ptr, movements.data(), movements.size()),
                  MTS_SUCCESS)
            << last_error();
        auto prepared = prepare(backend, stream, 2 * samples, samples, 64, movements);
        ASSERT_NE(prepared, nullptr);
        void* output_data = data_of(output);
        const void* input_data = data_of(input);
        const size_t uploads = sim::host_to_device_copies();
        const size_t allocations = sim::device_allocations();
        for (int repeat = 0; repeat < 3; repeat++) {
            backend.execute_move_plan(stream, output_data, input_data, stream, *prepared);
        }
        EXPECT_EQ(sim::host_to_device_copies(), uploads) << "an execute uploads nothing";
        EXPECT_EQ(sim::device_allocations(), allocations) << "an execute allocates nothing";
        EXPECT_EQ(values_of(output), values_of(expected)) << count << " movements";
        EXPECT_EQ(values_of(output), moved(std::vector<double>(2 * samples * 64, -1.0), iota(samples * 64, 1.0), 64,
                                           64, movements));
    }
}

TEST_P(SimulatedStreams, ACaptureOfAHundredPlanExecutesReplaysWithNoHostWork) {
    SKIP_UNLESS_CAPTURABLE();
    const auto& backend = gpu_.backend();
    const Stream stream = Stream::parse(gpu0, stream_);
    constexpr size_t count = 1000;
    const auto forward = scattered_movements(count, 8, 5);
    // back: output samples 2 * order[i] -> input sample i again
    std::vector<mts_data_movement_t> back(count);
    for (size_t i = 0; i < count; i++) {
        back[i] = {forward[i].sample_out, forward[i].sample_in, 0, 0, 8};
    }
    auto a = device_array(iota(count * 8, 1.0), {count, 8}, stream_);
    auto b = device_array(std::vector<double>(2 * count * 8, 0.0), {2 * count, 8}, stream_);
    auto to_b = prepare(backend, stream, 2 * count, count, 8, forward);
    auto to_a = prepare(backend, stream, count, 2 * count, 8, back);
    void* a_data = data_of(a);
    void* b_data = data_of(b);
    gpu_.drain();

    gpu_.begin_capture(stream_, 0);
    for (int i = 0; i < 50; i++) {
        backend.execute_move_plan(stream, b_data, a_data, stream, *to_b);
        backend.execute_move_plan(stream, a_data, b_data, stream, *to_a);
    }
    auto graph = gpu_.end_capture(stream_, 0);
    EXPECT_EQ(graph.count(sim::NodeKind::kernel), 100u);
    EXPECT_EQ(graph.size(), 100u) << "nothing but the kernels: no upload, no allocation, no free";

    const size_t waits = gpu_.host_waits();
    const size_t uploads = sim::host_to_device_copies();
    const size_t allocations = sim::device_allocations();
    gpu_.launch(graph, stream_, 0);
    gpu_.launch(graph, stream_, 0);
    EXPECT_EQ(gpu_.host_waits(), waits);
    EXPECT_EQ(sim::host_to_device_copies(), uploads);
    EXPECT_EQ(sim::device_allocations(), allocations);
    EXPECT_EQ(values_of(a), iota(count * 8, 1.0)) << "there and back 100 times";
    EXPECT_EQ(values_of(b), moved(std::vector<double>(2 * count * 8, 0.0), iota(count * 8, 1.0), 8, 8, forward));
}

TEST_P(SimulatedStreams, APlanFreedWhileItsExecutionsAreQueuedFreesItsTableAfterThem) {
    const auto& backend = gpu_.backend();
    const Stream stream = Stream::parse(gpu0, stream_);
    const Stream other = Stream::parse(gpu0, other_);
    constexpr size_t count = 500;
    const auto movements = mixed_movements(count, 9);
    auto input = device_array(iota(count * 64, 1.0), {count, 64}, stream_);
    auto output = device_array(std::vector<double>(2 * count * 64, -1.0), {2 * count, 64}, stream_);
    auto second = device_array(std::vector<double>(2 * count * 64, -1.0), {2 * count, 64}, other_);
    void* output_data = data_of(output);
    void* second_data = data_of(second);
    const void* input_data = data_of(input);
    auto prepared = prepare(backend, stream, 2 * count, count, 64, movements);
    gpu_.drain();

    expect_no_host_wait(
        {{stream_, 0}, {other_, 0}},
        [&] {
            backend.execute_move_plan(stream, output_data, input_data, stream, *prepared);
            backend.execute_move_plan(other, second_data, input_data, stream, *prepared);
            prepared.reset();  // both executions still queued behind the held streams
        },
        "executing a plan on two streams and freeing it");
    gpu_.drain();
    const auto expected = moved(std::vector<double>(2 * count * 64, -1.0), iota(count * 64, 1.0), 64, 64, movements);
    EXPECT_EQ(values_of(output), expected);
    EXPECT_EQ(values_of(second), expected);
    // TearDown: no use of freed memory, and the table was freed
}
