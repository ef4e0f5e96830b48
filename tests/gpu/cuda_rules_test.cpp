// The CUDA rules a real GPU enforces and the GPU backend must follow, each
// checked on the simulated runtime (tests/support/simulated_runtime.hpp,
// where each rule is written next to the CUDA documentation it follows):
//
//  - kernels are loaded lazily and a load may wait for the whole device:
//    the backend loads all of its kernels when it sets a device up;
//  - while another thread captures a graph in Global mode, potentially
//    unsafe calls (stream-ordered allocation and free, pool calls,
//    synchronisation) fail and invalidate that capture: the backend makes
//    them in the Relaxed mode;
//  - a copy from pageable host memory may wait on the host for its stream:
//    no host-to-device copy of the backend waits for the caller's stream;
//  - a stream belongs to whoever made it: nothing of the backend touches a
//    consumer's stream after the export returns;
//  - at exit the runtime shuts down before the threads that outlive the
//    program's exit handlers: the deferred-work thread drops what it still
//    holds, quietly.
//
// Each test here fails with the backend that broke the rule (the CHANGELOG
// quotes those failures) and holds with the one that follows it.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/backend.hpp"
#include "base/move_plan.hpp"
#include "base/stream.hpp"
#include "cpu/threads/pool_host_tasks.hpp"
#include "gpu/gpu_backend.hpp"
#include "support/backends.hpp"
#include "support/simulated_runtime.hpp"

using namespace mtsarray_test;
using mtsarray::detail::Stream;

namespace {

constexpr DLDevice gpu0 = {kDLCUDA, 0};

/// Shortens the host waits that meet a held stream, so that a test whose
/// backend breaks a rule fails in a fraction of a second per wait.
class ShortHostWaits {
public:
    ShortHostWaits() : previous_(sim::set_host_wait_timeout(std::chrono::milliseconds(200))) {}
    ~ShortHostWaits() { sim::set_host_wait_timeout(previous_); }

private:
    std::chrono::milliseconds previous_;
};

/// Sets the time-out of the host waits that meet a held stream for the
/// scope.
class HostWaitTimeout {
public:
    explicit HostWaitTimeout(std::chrono::milliseconds timeout) : previous_(sim::set_host_wait_timeout(timeout)) {}
    ~HostWaitTimeout() { sim::set_host_wait_timeout(previous_); }

private:
    std::chrono::milliseconds previous_;
};

/// A backend of its own, as in a new process: no device set up, no staging
/// buffer yet. Never destroyed, like the process's own (its deferred-work
/// thread lives as long as the program).
const mtsarray::detail::Backend& new_backend() {
    return *new mtsarray::detail::gpu::GpuBackend<SimulatedRuntime>(&mtsarray::detail::cpu::pool_host_tasks());
}

/// Waits until the deferred-work thread of `backend` (one of new_backend's)
/// has nothing left to do: the page-locked buffers it adds to the staging
/// pool in the background are there, and will not wait for a stream the
/// test holds next.
void settle(const mtsarray::detail::Backend& backend) {
    const auto& gpu = static_cast<const mtsarray::detail::gpu::GpuBackend<SimulatedRuntime>&>(backend);
    for (int i = 0; i < 5000 && !gpu.deferred_work_settled(); i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

/// What the simulation saw go wrong, for the test's message.
std::string violations_text() {
    std::string text;
    for (const auto& violation : sim::violations()) {
        text += "\n  " + violation;
    }
    return text;
}

}  // namespace

// ---- kernel loading ---------------------------------------------------------------------

// A device set up anew (the simulation forgets the kernels it loaded, and a
// new backend sets the device up as in a new process), then a stream held
// by a long kernel of the user's: the first launch of each kernel must not
// wait for it. Every kernel that can be launched with arrays of test size is
// launched: fill, move_data with its table in the parameters and in device
// memory, the tiled transpose of every unit width, the general strided copy
// of every unit width, with 12 and with 66 axes.
TEST(KernelLoading, TheFirstLaunchOfEachKernelWaitsForNothing) {
    if (!sim::in_use()) {
        GTEST_SKIP() << "the simulated runtime does not serve kDLCUDA in this process";
    }
    ShortHostWaits short_waits;
    sim::forget_loaded_kernels();
    const auto* backend = &new_backend();
    const int64_t number = sim::create_stream(0);
    const Stream stream = Stream::parse(gpu0, number);

    constexpr size_t rows = 3000;
    constexpr size_t properties = 8;
    constexpr size_t bytes = rows * properties * sizeof(double);
    void* input = backend->allocate(stream, bytes);  // sets device 0 up
    void* output = backend->allocate(stream, bytes);
    backend->synchronize(stream);

    // 13 axes of 2 whose strides do not merge (each is not twice the next):
    // a general copy of more axes than the unrolled kernels take
    const mtsarray::detail::Shape many_axes(std::vector<uintptr_t>(13, 2));
    std::vector<int64_t> scattered_strides(13);
    for (size_t axis = 0; axis < 13; axis++) {
        scattered_strides[axis] = (int64_t(1) << (13 - axis)) - 1;
    }

    sim::clear_violations();
    const size_t waits = sim::host_waits();
    const size_t lazy_loads = sim::lazy_kernel_loads();
    auto hold = sim::hold(number, 0);

    const double value = 2.5;
    backend->fill(stream, output, rows * properties, &value, sizeof(value));
    std::vector<mts_data_movement_t> movements;
    for (size_t i = 0; i < 8; i++) {
        movements.push_back({i, rows - 1 - i, 0, 1, 3});
    }
    const mtsarray::detail::Shape shape = {rows, properties};
    backend->move_data(stream, output, input, stream,
                       mtsarray::detail::MovePlan(shape, shape, sizeof(double), movements.data(), movements.size()));
    for (size_t i = 0; i < rows; i++) {  // thousands: the table goes to device memory
        movements.push_back({(i * 7) % rows, i, i % 3, i % 2, 2 + i % 4});
    }
    backend->move_data(stream, output, input, stream,
                       mtsarray::detail::MovePlan(shape, shape, sizeof(double), movements.data(), movements.size()));
    for (size_t width : {1, 2, 4, 8, 16}) {
        // a transpose of 64 x 32 units of `width` bytes
        backend->strided_copy(stream, output, {input, {64, 32}, {1, 64}, width});
        // every other unit of a row: a general copy
        backend->strided_copy(stream, output, {input, {2, 64}, {256, 2}, width});
        backend->strided_copy(stream, output, {input, many_axes, scattered_strides, 1});
    }

    EXPECT_FALSE(hold.is_open());
    EXPECT_EQ(sim::lazy_kernel_loads(), lazy_loads) << "kernels loaded by their first launch:" << violations_text();
    EXPECT_EQ(sim::host_waits(), waits) << "a first launch waited on the host for the held stream";
    EXPECT_TRUE(sim::violations().empty()) << violations_text();
    hold.open();
    backend->synchronize(stream);
    backend->deallocate(stream, input, bytes);
    backend->deallocate(stream, output, bytes);
    sim::drain();
    sim::destroy_stream(number);
}

// ---- copies from pageable host memory ------------------------------------------------------

// Host -> device copies from pageable memory while the destination's stream
// is held: above the staging pool (72 MiB), through a cold staging pool (8
// MiB, whose buffer is then plain host memory), and a move_data table of
// 10^5 entries through the cold pool. None may wait for the held stream;
// the source may be reused as soon as the call returns; everything arrives
// once the stream is released.
//
// No clock decides it: a host wait of this thread that meets the held
// stream fails at once (sim::fail_host_waits_on_held_streams), however
// long the copies take on a busy machine; the waits that are allowed (for
// mtsarray's own upload stream; the staging pool's background page-locking,
// which waits for every stream of the device) have all the time they need.
TEST(PageableCopies, NoHostToDeviceCopyWaitsForTheDestinationStream) {
    if (!sim::in_use()) {
        GTEST_SKIP() << "the simulated runtime does not serve kDLCUDA in this process";
    }
    HostWaitTimeout no_time_out(std::chrono::minutes(10));
    const auto& backend = new_backend();
    const int64_t number = sim::create_stream(0);
    const Stream stream = Stream::parse(gpu0, number);

    const size_t large = size_t(72) << 20;
    const size_t medium = size_t(8) << 20;
    std::vector<unsigned char> large_source(large), medium_source(medium);
    for (size_t i = 0; i < large; i++) {
        large_source[i] = static_cast<unsigned char>(i * 7 + i / 4096);
    }
    for (size_t i = 0; i < medium; i++) {
        medium_source[i] = static_cast<unsigned char>(i * 13 + 1);
    }
    const auto large_expected = large_source;
    const auto medium_expected = medium_source;
    void* large_destination = backend.allocate(stream, large);
    void* medium_destination = backend.allocate(stream, medium);

    constexpr size_t rows = 100000;
    const size_t table_array_bytes = rows * 2 * sizeof(double);
    std::vector<double> input_values(rows * 2);
    std::iota(input_values.begin(), input_values.end(), 0.5);
    void* input = backend.allocate(stream, table_array_bytes);
    void* output = backend.allocate(stream, table_array_bytes);
    backend.copy_from_host(stream, input, input_values.data(), table_array_bytes);
    backend.fill(stream, output, rows * 2, &input_values[0], sizeof(double));  // 0.5 everywhere
    std::vector<mts_data_movement_t> movements(rows);
    for (size_t i = 0; i < rows; i++) {
        movements[i] = {(i * 7919) % rows, i, i % 2, 1 - i % 2, 1};
    }
    backend.synchronize(stream);
    settle(backend);  // the pool's background growth is done before the hold

    sim::clear_violations();
    auto hold = sim::hold(number, 0);
    const bool previous_rule = sim::fail_host_waits_on_held_streams(true);
    const mtsarray::detail::Shape shape = {rows, 2};
    try {
        backend.copy_from_host(stream, large_destination, large_source.data(), large);
        std::fill(large_source.begin(), large_source.end(), 0xEE);  // the caller's to reuse
        backend.copy_from_host(stream, medium_destination, medium_source.data(), medium);
        std::fill(medium_source.begin(), medium_source.end(), 0xEE);
        backend.move_data(stream, output, input, stream,
                          mtsarray::detail::MovePlan(shape, shape, sizeof(double), movements.data(), movements.size()));
    } catch (const std::exception& error) {
        ADD_FAILURE() << error.what();
    }
    sim::fail_host_waits_on_held_streams(previous_rule);
    EXPECT_FALSE(hold.is_open());
    EXPECT_TRUE(sim::violations().empty()) << "a host -> device copy waited for the held stream:"
                                           << violations_text();
    hold.open();

    std::vector<unsigned char> large_read(large), medium_read(medium);
    std::vector<double> output_read(rows * 2);
    backend.copy_to_host(stream, large_read.data(), large_destination, large);
    backend.copy_to_host(stream, medium_read.data(), medium_destination, medium);
    backend.copy_to_host(stream, output_read.data(), output, table_array_bytes);
    backend.synchronize(stream);
    EXPECT_TRUE(large_read == large_expected) << "the 72 MiB copy";
    EXPECT_TRUE(medium_read == medium_expected) << "the 8 MiB copy";
    std::vector<double> expected(rows * 2, 0.5);
    for (const auto& movement : movements) {
        expected[movement.sample_out * 2 + movement.properties_start_out] =
            input_values[movement.sample_in * 2 + movement.properties_start_in];
    }
    EXPECT_EQ(output_read, expected);
    for (void* data : {large_destination, medium_destination, input, output}) {
        backend.deallocate(stream, data, 0);
    }
    sim::drain();
    EXPECT_TRUE(sim::violations().empty()) << violations_text();
    sim::destroy_stream(number);
}

// Small copies from pageable memory while the staging pool has no buffer
// free (cold: a backend of its own) and the destination's stream is held:
// 12 copies of 200 KiB, more than the driver's staging space (1 MiB in the
// simulation), where a copy that does not fit waits on the host for the
// oldest pending ones -- which must not be behind the held stream. The
// sources are reused at once; everything arrives once the stream runs.
TEST(PageableCopies, SmallCopiesThroughAColdPoolNeverWaitForTheDestinationStream) {
    if (!sim::in_use()) {
        GTEST_SKIP() << "the simulated runtime does not serve kDLCUDA in this process";
    }
    // long enough for the pool's background page-locking to wait for the
    // held stream without a violation; a copy waiting for it would time out
    const auto previous = sim::set_host_wait_timeout(std::chrono::milliseconds(1000));
    const auto& backend = new_backend();
    const int64_t number = sim::create_stream(0);
    const Stream stream = Stream::parse(gpu0, number);
    constexpr size_t copies = 12;
    constexpr size_t bytes = size_t(200) << 10;
    std::vector<void*> destinations;
    for (size_t i = 0; i < copies; i++) {
        destinations.push_back(backend.allocate(stream, bytes));
    }
    backend.synchronize(stream);

    sim::clear_violations();
    auto hold = sim::hold(number, 0);
    std::vector<unsigned char> source(bytes);
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < copies; i++) {
        std::fill(source.begin(), source.end(), static_cast<unsigned char>(i + 1));  // reused at once
        backend.copy_from_host(stream, destinations[i], source.data(), bytes);
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_FALSE(hold.is_open());
    hold.open();
    EXPECT_LT(elapsed, std::chrono::milliseconds(500)) << "the copies waited for the held stream";
    for (size_t i = 0; i < copies; i++) {
        std::vector<unsigned char> read(bytes);
        backend.copy_to_host(stream, read.data(), destinations[i], bytes);
        backend.synchronize(stream);
        EXPECT_EQ(read, std::vector<unsigned char>(bytes, static_cast<unsigned char>(i + 1))) << "copy " << i;
        backend.deallocate(stream, destinations[i], bytes);
    }
    sim::drain();
    EXPECT_TRUE(sim::violations().empty()) << "a host -> device copy waited for the held stream:" << violations_text();
    sim::clear_violations();
    sim::set_host_wait_timeout(previous);
    sim::destroy_stream(number);
}

// ---- the consumer's stream -----------------------------------------------------------------

namespace {

/// An export of `array` to `device` for a consumer reading on `stream`.
DLManagedTensorVersioned* export_to(const mtsarray::Array& array, DLDevice device, int64_t stream) {
    DLManagedTensorVersioned* tensor = nullptr;
    const auto& raw = array.get();
    EXPECT_EQ(raw.as_dlpack(raw.ptr, &tensor, device, &stream, dlpack_version()), MTS_SUCCESS) << last_error();
    return tensor;
}

class ConsumerStreams : public ::testing::Test {
protected:
    void SetUp() override {
        if (!sim::in_use()) {
            GTEST_SKIP() << "the simulated runtime does not serve kDLCUDA in this process";
        }
        sim::drain();
        sim::clear_violations();
    }
    void TearDown() override {
        if (!sim::in_use()) {
            return;
        }
        sim::drain();
        EXPECT_TRUE(sim::violations().empty()) << violations_text();
        sim::clear_violations();
    }
};

}  // namespace

// The consumer reads the export on its stream, destroys that stream (as
// CuPy does when its Stream object goes), then releases the export: the
// release must not name the stream again. Once with the array still alive,
// once with the export as the memory's last holder.
TEST_F(ConsumerStreams, ReleasingAnExportNeverNamesTheConsumerStream) {
    for (bool array_outlives_export : {true, false}) {
        SCOPED_TRACE(array_outlives_export ? "the array outlives the export" : "the export is the last holder");
        const int64_t own = sim::create_stream(0);
        const int64_t consumer = sim::create_stream(0);
        auto array = std::make_unique<mtsarray::Array>(
            array_from_bytes(gpu0, float64(), {64}, to_bytes(std::vector<double>(64, 4.5))));
        array->set_stream(own);
        DLManagedTensorVersioned* tensor = export_to(*array, gpu0, consumer);
        ASSERT_NE(tensor, nullptr);
        std::vector<double> read(64);
        sim::enqueue_read(consumer, 0, read.data(), tensor->dl_tensor.data, 64 * sizeof(double));
        sim::destroy_stream(consumer);  // waits for the read, then the stream is gone
        EXPECT_EQ(read, std::vector<double>(64, 4.5));
        if (!array_outlives_export) {
            array.reset();
        }
        tensor->deleter(tensor);
        array.reset();
        sim::drain();
        sim::destroy_stream(own);
    }
}

// An export to another device is a copy queued on the consumer's stream
// there: once the consumer has destroyed that stream, releasing the copy
// must not name it (nor free on it).
TEST_F(ConsumerStreams, ReleasingACopiedExportNeverNamesTheConsumerStream) {
    if (sim::device_count() < 2) {
        GTEST_SKIP() << "the simulation has one device (MTSARRAY_SIM_DEVICES=1): a copy to another needs two";
    }
    const DLDevice gpu1 = {kDLCUDA, 1};
    const int64_t consumer = sim::create_stream(1);
    auto array = array_from_bytes(gpu0, float64(), {64}, to_bytes(std::vector<double>(64, -2.0)));
    DLManagedTensorVersioned* tensor = export_to(array, gpu1, consumer);
    ASSERT_NE(tensor, nullptr);
    EXPECT_NE(tensor->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
    std::vector<double> read(64);
    sim::enqueue_read(consumer, 1, read.data(), tensor->dl_tensor.data, 64 * sizeof(double));
    sim::destroy_stream(consumer);
    EXPECT_EQ(read, std::vector<double>(64, -2.0)) << "the consumer's stream read the copy after it was made";
    tensor->deleter(tensor);
}

// ---- process teardown -------------------------------------------------------------------

// The process exits while mtsarray's deferred-work thread still has work
// queued: the runtime's exit handler has run by then (it was registered
// first, so it runs after the program's), and every call the thread makes
// fails with cudaErrorCudartUnloading. What the thread still holds is
// dropped without a word: the driver reclaims the memory with the process.
// (An H100 printed "deferred work failed: ... cudaGetDevice(&device) failed
// with cudaErrorCudartUnloading" at the exit of the stream tests.)
TEST(ProcessTeardown, WorkLeftToTheDeferredThreadIsDroppedQuietly) {
    if (!sim::in_use()) {
        GTEST_SKIP() << "the simulated runtime does not serve kDLCUDA in this process";
    }
    const ShortHostWaits short_waits;
    sim::drain();
    sim::clear_violations();
    const size_t refused_before = sim::calls_after_unload();

    // device 0 set up (its kernels loaded), and page-locked memory (its
    // allocation synchronises the device): both before the stream below is
    // held
    const uintptr_t shape[1] = {512};
    mts_array_t array;
    ASSERT_EQ(mtsarray_zeros(gpu0, float64(), shape, 1, &array), MTS_SUCCESS) << last_error();
    array.destroy(array.ptr);
    const DLDevice pinned = {kDLCUDAHost, 0};
    ASSERT_EQ(mtsarray_zeros(pinned, float64(), shape, 1, &array), MTS_SUCCESS) << last_error();
    void* data = nullptr;
    ASSERT_EQ(mtsarray_data(&array, &data), MTS_SUCCESS) << last_error();
    const size_t frees_before = sim::pinned_frees();
    sim::drain();

    // the thread waits for a stream held by a long kernel of the user's...
    const int64_t own = sim::create_stream(0);
    auto gate = sim::hold(own, 0);
    std::atomic<bool> released{false};
    simulated_backend().release_after(Stream::parse(gpu0, own), [&released] { released = true; });
    // ...and has the page-locked memory to free after that (a free that
    // synchronises the device is always left to it)
    array.destroy(array.ptr);

    sim::unload_runtime();
    testing::internal::CaptureStderr();
    gate.open();
    sim::drain();
    const std::string printed = testing::internal::GetCapturedStderr();
    const size_t refused = sim::calls_after_unload() - refused_before;
    const size_t frees = sim::pinned_frees() - frees_before;
    sim::reload_runtime();

    EXPECT_EQ(printed, "") << "mtsarray reported the runtime's shut-down";
    EXPECT_GT(refused, 0u) << "the deferred work made no runtime call after the unload: the test tested nothing";
    EXPECT_EQ(frees, 0u) << "the page-locked free ran after the runtime was unloaded";
    if (frees == 0) {
        SimulatedRuntime::free_pinned(data);  // the memory the dropped work kept
    }
    sim::destroy_stream(own);
    sim::drain();
    EXPECT_TRUE(sim::violations().empty()) << violations_text();
    sim::clear_violations();
}
