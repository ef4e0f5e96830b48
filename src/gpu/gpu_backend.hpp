#pragma once
// GpuBackend<Runtime>: the Backend of backend.hpp for a GPU runtime, written
// once for CUDA and HIP. Every runtime call goes through the `Runtime`
// traits (src/cuda/cuda_runtime.hpp, src/hip/hip_runtime.hpp, and the tests'
// simulated runtime, tests/support/simulated_runtime.hpp, which runs the
// kernels' per-thread bodies on the host); this file and the kernels it
// launches make none themselves.
//
// The traits a runtime provides (all static; "throws" means Error, or
// OutOfMemory for allocations, carrying the runtime's error name and string):
//
//   using StreamHandle = ...;                  // cudaStream_t / hipStream_t
//   using EventHandle = ...;                   // cudaEvent_t / hipEvent_t
//   using PoolHandle = ...;                    // cudaMemPool_t / hipMemPool_t
//   static constexpr const char* name;         // "cuda": Backend::name()
//   static constexpr const char* display_name; // "CUDA": used in messages
//   static constexpr const char* graph_name;   // "CUDA graph" / "HIP graph"
//   static constexpr DLDeviceType device_type;       // kDLCUDA / kDLROCM
//   static constexpr DLDeviceType pinned_host_type;  // kDLCUDAHost / kDLROCMHost
//   static constexpr bool has_managed_memory;        // kDLCUDAManaged exists
//   static constexpr DLDeviceType managed_type;      // read only if it does
//   static constexpr bool kernels_run_on_host;  // false: <<<>>> launches; true:
//                                               // run_grid (launch_config.hpp)
//
//   struct DeviceCount { int count; std::string failure; };
//   static DeviceCount probe_devices() noexcept;  // failure: why count is 0
//
//   using Errors = ...;  // error vocabulary, see runtime_error.hpp
//   static int current_device();               // DeviceGuard's three calls,
//   static void set_device(int);               // see device_guard.hpp
//   static void restore_device(int) noexcept;
//   static StreamHandle native_stream(const Stream&);  // throws for -1
//
//   struct CaptureState { bool active; unsigned long long id; };
//   static CaptureState capture_state(StreamHandle);  // throws
//   static StreamHandle create_stream();        // non-blocking, current device
//   static void load_kernel(KernelKey);         // see kernel_loading.hpp
//
//   static PoolHandle create_pool(int device);   // keeps freed memory (throws)
//   static void trim_pool(PoolHandle) noexcept;  // gives unused memory back
//   static void* allocate_from_pool(size_t bytes, PoolHandle, StreamHandle);  // throws
//   static void free_async(void*, StreamHandle) noexcept;     // reports
//   static void* allocate_pinned(size_t bytes);               // throws
//   static void free_pinned(void*) noexcept;
//   static void* allocate_managed(size_t bytes);              // throws
//   static void free_managed(void*) noexcept;
//
//   static void copy_device_to_device_async(void* dst, const void* src, size_t, StreamHandle);
//   static void copy_host_to_device_async(void* dst, const void* src, size_t, StreamHandle);
//   static void copy_device_to_host_async(void* dst, const void* src, size_t, StreamHandle);
//   static void copy_peer_async(void* dst, int dst_device, const void* src, int src_device,
//                               size_t, StreamHandle);
//   static void memset_async(void*, unsigned char value, size_t, StreamHandle);
//
//   static EventHandle create_event();                    // timing disabled
//   static void destroy_event(EventHandle) noexcept;
//   static void record_event(EventHandle, StreamHandle);
//   static bool event_done(EventHandle);                  // query, never blocks
//   static void synchronize_event(EventHandle);           // blocks (deferred work only)
//   static void stream_wait_event(StreamHandle, EventHandle);
//   static void synchronize_stream(StreamHandle);
//   static void synchronize_device();                     // the current device
//
//   using CaptureMode = ...;  // and exchange_capture_mode, relaxed_capture_mode:
//                             // see capture_mode.hpp
//
// Stream semantics: every operation runs on the stream it is given under a
// DeviceGuard for that stream's device (the legacy and per-thread default
// streams name a different stream on each device) and returns without
// waiting; only `synchronize` (and copies to pageable host memory, for a
// host consumer) wait, for their own stream. Work that has to wait for the device before
// running on the host (handing memory back to its owner, frees that
// synchronise) goes to the DeferredWork thread.
//
// Memory: device memory comes from a pool per device created by mtsarray
// (stream_ordered_memory.hpp); release_cached_memory trims it.
//
// The CUDA rules this backend follows, each modelled by the simulated
// runtime of the tests, each with its home: kernels are loaded when a device
// is set up (device_state.hpp, kernel_loading.hpp); potentially unsafe calls
// are made in the Relaxed capture mode (stream_ordered_memory.hpp, and the
// RelaxedCaptureMode scopes here); legacy-stream and capture rules in
// wait/synchronize below.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/backend.hpp"
#include "base/device.hpp"
#include "base/error.hpp"
#include "base/fault_injection.hpp"
#include "base/host_tasks.hpp"
#include "gpu/capture_mode.hpp"
#include "gpu/deferred_work.hpp"
#include "gpu/device_state.hpp"
#include "gpu/device_guard.hpp"
#include "gpu/event_pool.hpp"
#include "gpu/fill.hpp"
#include "gpu/move_data.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/move_table_parts.hpp"
#include "gpu/move_table_storage.hpp"
#include "gpu/pinned_staging_pool.hpp"
#include "gpu/runtime_error.hpp"
#include "gpu/stream_ordered_memory.hpp"
#include "gpu/strided_copy.hpp"
#include "gpu/vector_units.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class GpuBackend final : public Backend {
public:
    using StreamHandle = typename Runtime::StreamHandle;
    using Errors = typename Runtime::Errors;
    using DeviceState = gpu::DeviceState<Runtime>;

    /// copy_from_host calls up to this size are staged through page-locked
    /// memory; larger ones go through the device's upload stream
    /// (host_to_device.hpp), so that the pool never pins arbitrarily large
    /// amounts of host memory. Neither waits for the caller's stream.
    static constexpr size_t staged_copy_limit = PinnedStagingPool<Runtime>::retained_bytes_limit;

    /// `host_tasks`: the host threads that long move_data plans are built
    /// on (the library's thread pool; none: the calling thread alone).
    explicit GpuBackend(const HostTasks* host_tasks = nullptr) : host_tasks_(host_tasks) {}
    GpuBackend(const GpuBackend&) = delete;
    GpuBackend& operator=(const GpuBackend&) = delete;

    const char* name() const noexcept override { return Runtime::name; }

    void check_device(DLDevice device) const override {
        MTSARRAY_EXPECTS(serves(device.device_type),
                         std::string("the ") + Runtime::name + " backend does not manage " +
                             device_type_name(device.device_type) + " memory");
        const auto& devices = probe();
        MTSARRAY_EXPECTS(devices.count > 0, devices.failure);
        MTSARRAY_EXPECTS(device.device_id >= 0 && device.device_id < devices.count,
                         out_of_range(device.device_id, devices.count));
    }

    bool available() const noexcept override { return probe().count > 0; }

    // ---- memory -----------------------------------------------------------

    void* allocate(const Stream& stream, size_t bytes) const override {
        const DLDevice device = stream.device();
        check_device(device);
        fault_injection::check("allocate");
        if (bytes == 0 && device.device_type != Runtime::device_type) {
            return host_zero_size_allocation();
        }
        // page-locked and managed allocations synchronise the device (a host
        // wait, the price of such memory), and are potentially unsafe calls
        // that must not break another thread's capture
        if (device.device_type == Runtime::pinned_host_type) {
            RelaxedCaptureMode<Runtime> relaxed;
            return Runtime::allocate_pinned(bytes);
        }
        DeviceGuard<Runtime> guard(device.device_id);
        if (device.device_type == Runtime::device_type) {
            const StreamHandle handle = Runtime::native_stream(stream);
            StreamOrderedPool<Runtime>& memory = device_state(device.device_id).memory;
            return bytes == 0 ? memory.zero_size_allocation(handle) : memory.allocate(bytes, handle);
        }
        RelaxedCaptureMode<Runtime> relaxed;
        return Runtime::allocate_managed(bytes);
    }

    void deallocate(const Stream& stream, void* data, size_t /*bytes*/) const noexcept override {
        if (data == nullptr || data == host_zero_size_allocation()) {
            return;
        }
        const DLDevice device = stream.device();
        try {
            if (device.device_type == Runtime::device_type) {
                DeviceState& state = device_state(device.device_id);
                if (state.memory.is_zero_size_allocation(data)) {
                    return;
                }
                DeviceGuard<Runtime> guard(device.device_id);
                StreamOrderedPool<Runtime>::free(data, Runtime::native_stream(stream.usable_here()));
                return;
            }
            // Freeing page-locked or managed memory synchronises the device:
            // done on the deferred-work thread, never the caller's. (The CPU
            // computes on this memory; the host work is done by now.)
            const bool pinned = device.device_type == Runtime::pinned_host_type;
            const int device_id = device.device_id;
            deferred_.soon([data, pinned, device_id]() {
                DeviceGuard<Runtime> guard(device_id);
                if (pinned) {
                    Runtime::free_pinned(data);
                } else {
                    Runtime::free_managed(data);
                }
            });
        } catch (const std::exception& error) {
            // Nothing here may throw (no std::string): this is noexcept.
            std::fprintf(stderr, "mtsarray: %s deallocate on %s:%d leaked memory: %s\n", Runtime::name,
                         device_type_name(device.device_type), device.device_id, error.what());
        } catch (...) {
            std::fprintf(stderr, "mtsarray: %s deallocate leaked memory\n", Runtime::name);
        }
    }

    void release_cached_memory(DLDevice device) const override {
        if (device.device_type != Runtime::device_type) {
            return;  // page-locked and managed memory are not pooled
        }
        check_device(device);
        DeviceGuard<Runtime> guard(device.device_id);
        device_state(device.device_id).memory.trim();
    }

    // ---- work -------------------------------------------------------------

    void fill(const Stream& stream, void* data, size_t count, const void* value,
              size_t element_size) const override {
        const StreamHandle handle = device_stream(stream, "fill");
        fault_injection::check("fill");
        if (count == 0) {
            return;
        }
        DeviceGuard<Runtime> guard(stream.device().device_id);
        device_state(stream.device().device_id);  // its kernels are loaded
        const unsigned char* bytes = static_cast<const unsigned char*>(value);
        bool one_byte_pattern = true;
        for (size_t i = 1; i < element_size; i++) {
            one_byte_pattern = one_byte_pattern && bytes[i] == bytes[0];
        }
        // Zeros (the common case) and other one-byte patterns: the runtime's
        // memset is as fast as any kernel and needs none of ours.
        if (one_byte_pattern && element_size != 0) {
            Runtime::memset_async(data, bytes[0], count * element_size, handle);
            return;
        }
        launch_fill<Runtime>(handle, data, count, value, element_size);
        MTSARRAY_CHECK_LAUNCH(Errors, "fill");
    }

    void copy(const Stream& stream, void* destination, const void* source, size_t bytes) const override {
        const StreamHandle handle = device_stream(stream, "copy");
        fault_injection::check("copy");
        if (bytes == 0) {
            return;
        }
        DeviceGuard<Runtime> guard(stream.device().device_id);
        Runtime::copy_device_to_device_async(destination, source, bytes, handle);
    }

    void move_data(const Stream& stream, void* output, const void* input, const Stream& input_stream,
                   const MovePlan& plan) const override {
        const StreamHandle handle = device_stream(stream, "move_data");
        MTSARRAY_EXPECTS(plan.input_bytes() < max_move_array_bytes && plan.output_bytes() < max_move_array_bytes,
                         "move_data on the GPU supports arrays of less than 1 TiB");
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);
        const auto capture = Runtime::capture_state(handle);

        // Host work: check every movement and pack the table, in one pass,
        // into a buffer on the stack, growing into page-locked memory (or,
        // under capture, plain host memory) for large plans. Nothing is
        // queued before the last movement is checked.
        MoveTableStorage<Runtime> storage(device_state(device).staging, capture.active, plan.movements_count());
        MoveTableSummary summary;
        MoveLaunchClasses classes;
        plan_move_table(plan, storage, summary, classes, "move_data");
        fault_injection::check("move_data");
        wait(stream, input_stream);
        if (summary.entries == 0) {
            return;
        }

        const MoveDataArguments arguments =
            move_data_arguments(classes, input, output, plan.input_row_stride(), plan.output_row_stride());
        const bool narrow = narrow_offsets(summary.span);

        if (summary.entries <= inline_move_table_capacity) {
            launch_move_data<Runtime>(handle, arguments, storage.data(), summary.entries, classes.blocks, narrow);
            MTSARRAY_CHECK_LAUNCH(Errors, "move_data");
            return;
        }
        if (capture.active) {
            launch_captured(handle, device, storage.data(), summary, arguments, classes.blocks, narrow);
            return;
        }

        // Large table, already in page-locked memory: upload it on the stream
        // into stream-ordered device memory, launch, and free the table
        // behind the kernel. Nothing here waits for the device.
        const size_t table_bytes = summary.entries * sizeof(MoveTableEntry);
        DeviceState& state = device_state(device);
        void* table = state.memory.allocate(table_bytes, handle);
        StreamOrderedFree<Runtime> table_owner(table, handle);
        state.uploads.copy(handle, table, storage.data(), table_bytes, storage.page_locked());
        storage.release_after(handle);
        launch_move_data_with_device_table<Runtime>(handle, arguments, static_cast<const MoveTableEntry*>(table),
                                                    classes.blocks, narrow);
        MTSARRAY_CHECK_LAUNCH(Errors, "move_data");
    }

    std::unique_ptr<const BackendMovePlan> prepare_move_plan(const Stream& stream, const MovePlan& plan,
                                                             mts_data_movement_t* copy,
                                                             SampleReach& reach) const override {
        const StreamHandle handle = device_stream(stream, "move plan");
        MTSARRAY_EXPECTS(plan.input_bytes() < max_move_array_bytes && plan.output_bytes() < max_move_array_bytes,
                         "move_data on the GPU supports arrays of less than 1 TiB");
        check_not_capturing(stream, "making a move plan");
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);
        DeviceState& state = device_state(device);

        MoveTableStorage<Runtime> storage(state.staging, /*capturing=*/false, plan.movements_count());
        MoveTableSummary summary;
        MoveLaunchClasses classes;
        // the plan's copy of the movements, made as the table is built
        plan_move_table(plan, storage, summary, classes, "move plan", MovementCopy{copy, &reach});
        auto prepared = std::make_unique<PreparedMovePlan>(*this, device, summary.entries);
        prepared->classes = classes;
        prepared->narrow = narrow_offsets(summary.span);
        prepared->input_row_stride = plan.input_row_stride();
        prepared->output_row_stride = plan.output_row_stride();
        if (summary.entries != 0) {
            // stream-ordered memory of this stream, from the device's pool
            // (cudaMalloc would map fresh memory at every plan): every
            // stream that executes the plan waits for the `ready` event
            // recorded after the upload
            const size_t table_bytes = summary.entries * sizeof(MoveTableEntry);
            prepared->own_table(state.memory.allocate(table_bytes, handle), handle, state.library_stream.get());
            state.uploads.copy(handle, prepared->table, storage.data(), table_bytes, storage.page_locked());
            storage.release_after(handle);
            prepared->ready = std::make_unique<EventLease>(state.events.acquire());
            Runtime::record_event(prepared->ready->get(), handle);
        }
        return prepared;
    }

    bool execute_move_plan(const Stream& stream, void* output, const void* input, const Stream& input_stream,
                           const BackendMovePlan& prepared) const override {
        const auto* plan = dynamic_cast<const PreparedMovePlan*>(&prepared);
        MTSARRAY_EXPECTS(plan != nullptr && plan->backend == this,
                         std::string("move plan: the plan was not made by the ") + Runtime::name + " backend");
        const StreamHandle handle = device_stream(stream, "move plan");
        MTSARRAY_EXPECTS(stream.device().device_id == plan->device,
                         "move plan: the plan was made for device " + std::to_string(plan->device) + ", not " +
                             stream.describe());
        DeviceGuard<Runtime> guard(plan->device);
        const bool capturing = Runtime::capture_state(handle).active;
        if (capturing && plan->entries != 0 && !plan->capturable()) {
            return false;
        }
        wait(stream, input_stream);
        if (plan->entries == 0) {
            return true;
        }
        const MoveDataArguments arguments = move_data_arguments(plan->classes, input, output,
                                                                plan->input_row_stride, plan->output_row_stride);
        if (capturing) {
            capture_move_plan(handle, *plan, arguments);
            return true;
        }
        plan->wait_until_uploaded(handle);
        launch_move_data_with_device_table<Runtime>(handle, arguments, plan->table, plan->classes.blocks,
                                                    plan->narrow);
        MTSARRAY_CHECK_LAUNCH(Errors, "move plan");
        plan->record_use(stream, handle);
        return true;
    }

    void strided_copy(const Stream& stream, void* destination, const StridedView& source) const override {
        const StreamHandle handle = device_stream(stream, "strided_copy");
        fault_injection::check("strided_copy");
        const StridedCopyPlan plan = plan_strided_copy(source, destination);
        if (plan.kind == StridedCopyPlan::Kind::nothing) {
            return;
        }
        DeviceGuard<Runtime> guard(stream.device().device_id);
        device_state(stream.device().device_id);  // its kernels are loaded
        if (plan.kind == StridedCopyPlan::Kind::contiguous) {
            Runtime::copy_device_to_device_async(destination, source.data, plan.total_units * plan.unit_width,
                                                 handle);
            return;
        }
        launch_strided_copy<Runtime>(handle, plan, source.data, destination);
        MTSARRAY_CHECK_LAUNCH(Errors, "strided_copy");
    }

    void copy_to_host(const Stream& stream, void* host_destination, const void* source,
                      size_t bytes) const override {
        const StreamHandle handle = device_stream(stream, "copy_to_host");
        fault_injection::check("copy_to_host");
        if (bytes == 0) {
            return;
        }
        DeviceGuard<Runtime> guard(stream.device().device_id);
        Runtime::copy_device_to_host_async(host_destination, source, bytes, handle);
    }

    void copy_from_host(const Stream& stream, void* destination, const void* host_source,
                        size_t bytes) const override {
        const StreamHandle handle = device_stream(stream, "copy_from_host");
        fault_injection::check("copy_from_host");
        if (bytes == 0) {
            return;
        }
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);
        DeviceState& state = device_state(device);
        if (bytes <= staged_copy_limit) {
            // copied into page-locked memory at once: the copy needs the
            // caller's buffer no more (nor the runtime's staging)
            auto lease = state.staging.acquire(bytes);
            std::memcpy(lease.data(), host_source, bytes);
            state.uploads.copy(handle, destination, lease.data(), bytes, lease.page_locked());
            state.staging.release_after(std::move(lease), handle);
            return;
        }
        // larger than the staging pool holds: the runtime stages the
        // pageable source before the call returns, off the caller's stream
        state.uploads.copy(handle, destination, host_source, bytes, /*source_page_locked=*/false);
    }

    void copy_from_host_keeping(const Stream& stream, void* destination, const void* host_source, size_t bytes,
                                std::shared_ptr<const void> source_owner, bool source_page_locked) const override {
        if (!source_page_locked) {
            copy_from_host(stream, destination, host_source, bytes);  // the source is free on return
            return;
        }
        const StreamHandle handle = device_stream(stream, "copy_from_host");
        fault_injection::check("copy_from_host");
        if (bytes == 0) {
            return;
        }
        DeviceGuard<Runtime> guard(stream.device().device_id);
        // read straight from the page-locked source, which stays alive
        // until the copy ran: no staging, no wait
        Runtime::copy_host_to_device_async(destination, host_source, bytes, handle);
        release_after(stream, [owner = std::move(source_owner)]() mutable { owner.reset(); });
    }

    void copy_peer(const Stream& stream, void* destination, DLDevice destination_device, const void* source,
                   size_t bytes) const override {
        const StreamHandle handle = device_stream(stream, "copy_peer");
        fault_injection::check("copy_peer");
        MTSARRAY_EXPECTS(destination_device.device_type == Runtime::device_type,
                         std::string("copy_peer: the destination is ") +
                             device_type_name(destination_device.device_type) + " memory, not " +
                             device_type_name(Runtime::device_type));
        check_device(destination_device);
        if (bytes == 0) {
            return;
        }
        const int source_device = stream.device().device_id;
        DeviceGuard<Runtime> guard(source_device);
        if (destination_device.device_id == source_device) {
            Runtime::copy_device_to_device_async(destination, source, bytes, handle);
        } else {
            // Not a plain device-to-device copy: memory from stream-ordered
            // pools is only reachable from another device through the peer
            // copy, which also works without peer access enabled.
            Runtime::copy_peer_async(destination, destination_device.device_id, source, source_device, bytes,
                                     handle);
        }
    }

    // ---- ordering ---------------------------------------------------------

    void wait(const Stream& waiting, const Stream& producer) const override {
        if (waiting == producer || producer.is_none()) {
            return;  // same queue, or nothing was queued on a host stream
        }
        const StreamHandle producer_handle = device_stream(producer, "wait");
        if (waiting.is_none()) {
            // The host is the consumer: it can only wait by blocking.
            synchronize(producer);
            return;
        }
        const StreamHandle waiting_handle = device_stream(waiting, "wait");
        const int producer_device = producer.device().device_id;
        DeviceGuard<Runtime> producer_guard(producer_device);
        check_same_capture(waiting, waiting_handle, producer, producer_handle);
        // The event belongs to the producer's device; the waiting stream may
        // be on another device (a cross-device wait is legal).
        auto event = device_state(producer_device).events.acquire();
        Runtime::record_event(event.get(), producer_handle);
        DeviceGuard<Runtime> waiting_guard(waiting.device().device_id);
        Runtime::stream_wait_event(waiting_handle, event.get());
    }

    void synchronize(const Stream& stream) const override {
        const DLDevice device = stream.device();
        if (stream.is_none()) {
            // Host-accessible memory has no work stream. Managed memory may
            // still be written by kernels of other libraries on any stream
            // of its device; page-locked memory only by our own copies, which
            // their device-side stream has already been synchronised for.
            if (Runtime::has_managed_memory && device.device_type == Runtime::managed_type) {
                DeviceGuard<Runtime> guard(device.device_id);
                RelaxedCaptureMode<Runtime> relaxed;  // the host waits for work outside any capture
                Runtime::synchronize_device();
            }
            return;
        }
        const StreamHandle handle = device_stream(stream, "synchronize");
        DeviceGuard<Runtime> guard(device.device_id);
        MTSARRAY_EXPECTS(!Runtime::capture_state(handle).active,
                         "the host can not wait for " + stream.describe() + ": it is capturing a " +
                             Runtime::graph_name + " (the work it queues runs when the graph is launched)");
        RelaxedCaptureMode<Runtime> relaxed;  // a stream outside any capture: another thread's stays valid
        Runtime::synchronize_stream(handle);
    }

    std::shared_ptr<const StreamMarker> mark(const Stream& stream) const override {
        if (stream.is_none()) {
            return nullptr;
        }
        const StreamHandle handle = device_stream(stream, "mark");
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);
        if (Runtime::capture_state(handle).active) {
            return nullptr;
        }
        auto marker = std::make_shared<Marker>(device_state(device).events.acquire(), device);
        Runtime::record_event(marker->event.get(), handle);
        return marker;
    }

    void wait(const Stream& waiting, const StreamMarker& marker) const override {
        const auto* ours = dynamic_cast<const Marker*>(&marker);
        MTSARRAY_EXPECTS(ours != nullptr, std::string("wait: the marker was not made by the ") + Runtime::name +
                                              " backend");
        const StreamHandle handle = device_stream(waiting, "wait");
        DeviceGuard<Runtime> guard(waiting.device().device_id);
        MTSARRAY_EXPECTS(!Runtime::capture_state(handle).active,
                         waiting.describe() + " is capturing a " + Runtime::graph_name +
                             ": it can not wait for work queued outside the capture");
        Runtime::stream_wait_event(handle, ours->event.get());
    }

    void synchronize(const StreamMarker& marker) const override {
        const auto* ours = dynamic_cast<const Marker*>(&marker);
        MTSARRAY_EXPECTS(ours != nullptr, std::string("synchronize: the marker was not made by the ") +
                                              Runtime::name + " backend");
        DeviceGuard<Runtime> guard(ours->device);
        RelaxedCaptureMode<Runtime> relaxed;  // an event recorded outside any capture
        Runtime::synchronize_event(ours->event.get());
    }

    void release_after(const Stream& stream, std::function<void()>&& release) const override {
        const StreamHandle handle = device_stream(stream, "release_after");
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);
        if (defer_while_capturing(stream, release)) {
            return;
        }
        auto event = device_state(device).events.acquire();
        Runtime::record_event(event.get(), handle);
        bool done = false;
        {
            RelaxedCaptureMode<Runtime> relaxed;  // the event is outside any capture
            done = Runtime::event_done(event.get());
        }
        if (done) {
            auto now = std::move(release);
            now();
            return;
        }
        deferred_.after_event(device, std::move(event), std::move(release));
    }

    bool defer_while_capturing(const Stream& stream, std::function<void()>& work) const override {
        if (stream.is_none() || stream.device().device_type != Runtime::device_type) {
            return false;
        }
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);
        const StreamHandle handle = Runtime::native_stream(stream.usable_here());
        if (!capturing(handle)) {
            return false;
        }
        // The deferred thread can not name this thread's per-thread stream
        // (stream 2 is resolved per calling thread): it polls the legacy
        // stream, which reports a capture on any blocking stream of the
        // device, the per-thread ones included.
        const StreamHandle poll =
            stream.is_per_thread() ? Runtime::native_stream(Stream::default_for(stream.device())) : handle;
        deferred_.after_capture(
            [poll, device]() {
                DeviceGuard<Runtime> guard(device);
                return capturing(poll);
            },
            std::move(work));
        return true;
    }

    void check_not_capturing(const Stream& stream, const char* operation) const override {
        if (stream.is_none() || stream.device().device_type != Runtime::device_type) {
            return;
        }
        const StreamHandle handle = Runtime::native_stream(stream);
        DeviceGuard<Runtime> guard(stream.device().device_id);
        MTSARRAY_EXPECTS(!Runtime::capture_state(handle).active,
                         std::string(operation) + " can not be captured: " + stream.describe() +
                             " is capturing a " + Runtime::graph_name +
                             ", and the memory it allocates would outlive the call, which a replay of the graph "
                             "can not give back. Make arrays before capturing; move_data into existing arrays is "
                             "captured.");
    }

    /// Whether the deferred-work thread runs nothing and has nothing it
    /// could run now (DeferredWork::settled): with the device idle too,
    /// every release the program asked for has happened, but those waiting
    /// for a capture to end.
    bool deferred_work_settled() const { return deferred_.settled(); }

private:
    using EventLease = typename EventPool<Runtime>::Lease;

    /// A recorded event of one device (StreamMarker).
    struct Marker final : StreamMarker {
        Marker(EventLease&& lease, int device_id) : event(std::move(lease)), device(device_id) {}
        EventLease event;
        int device;
    };

    /// A prepared plan's table in stream-ordered device memory, shared by
    /// the plan and by the graphs that captured an execution of it: freed by
    /// the last of them to go, on the deferred-work thread (a graph's user
    /// object is released on a thread of the runtime, which must make no
    /// runtime call), once every use of it is done -- on the device's own
    /// stream, which no caller's stream orders.
    struct SharedDeviceTable {
        SharedDeviceTable(int device_id, void* memory, StreamHandle free_on) noexcept
            : device(device_id), data(memory), free_stream(free_on) {}
        SharedDeviceTable(const SharedDeviceTable&) = delete;
        SharedDeviceTable& operator=(const SharedDeviceTable&) = delete;
        ~SharedDeviceTable() {
            try {
                DeviceGuard<Runtime> guard(device);
                StreamOrderedPool<Runtime>::free(data, free_stream);
            } catch (...) {
                std::fprintf(stderr, "mtsarray: %s move plan leaked its table\n", Runtime::name);
            }
        }
        int device;
        void* data;
        StreamHandle free_stream;
    };
    /// One owner's reference to a SharedDeviceTable, dropped on the
    /// deferred-work thread.
    struct TableReference {
        DeferredWork<Runtime>* deferred;
        std::shared_ptr<SharedDeviceTable> table;

        /// Queues the drop of the reference (and so, for the last one, the
        /// free of the table). Makes no runtime call: it is the release of
        /// a graph's user object too.
        static void drop(void* object) {
            auto* reference = static_cast<TableReference*>(object);
            try {
                reference->deferred->soon([reference]() { delete reference; });
            } catch (...) {
                std::fprintf(stderr, "mtsarray: %s move plan leaked its table\n", Runtime::name);
            }
        }
    };

    /// A reusable plan's table in device memory (prepare_move_plan). Each
    /// execution outside a capture re-records the plan's event for its
    /// stream; the destructor gives up the plan's share of the table on the
    /// deferred-work thread once every such event has completed, i.e. after
    /// the last queued execution, without blocking the caller. A graph that
    /// captured an execution holds a share of its own (capture_move_plan).
    class PreparedMovePlan final : public BackendMovePlan {
    public:
        PreparedMovePlan(const GpuBackend& owner, int device_id, uint64_t entry_count)
            : backend(&owner), device(device_id), entries(entry_count) {}
        PreparedMovePlan(const PreparedMovePlan&) = delete;
        PreparedMovePlan& operator=(const PreparedMovePlan&) = delete;

        ~PreparedMovePlan() override {
            if (share_ == nullptr) {
                return;
            }
            std::vector<EventLease> pending;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                for (auto& use : uses_) {
                    pending.push_back(std::move(use.event));
                }
                uses_.clear();
            }
            if (ready != nullptr) {
                pending.push_back(std::move(*ready));
            }
            try {
                drop_after(backend->deferred_, device, share_, std::move(pending));
            } catch (...) {
                std::fprintf(stderr, "mtsarray: %s move plan leaked its table\n", Runtime::name);
            }
        }

        /// Takes ownership of the device memory of the table (allocated on
        /// `stream`), to be freed on `free_stream` after its last use.
        void own_table(void* data, StreamHandle stream, StreamHandle free_stream) {
            std::unique_ptr<SharedDeviceTable> owned;
            try {
                owned = std::make_unique<SharedDeviceTable>(device, data, free_stream);
            } catch (...) {
                StreamOrderedPool<Runtime>::free(data, stream);
                throw;
            }
            table = static_cast<MoveTableEntry*>(data);
            share_ = new TableReference{&backend->deferred_, std::shared_ptr<SharedDeviceTable>(std::move(owned))};
        }

        /// Whether the upload of the table is known to be done; queries
        /// the `ready` event, never waits for it.
        bool upload_done() const {
            if (uploaded_.load(std::memory_order_acquire)) {
                return true;
            }
            bool done = false;
            {
                RelaxedCaptureMode<Runtime> relaxed;  // the event is outside any capture
                done = Runtime::event_done(ready->get());
            }
            if (done) {
                uploaded_.store(true, std::memory_order_release);
            }
            return done;
        }

        /// Makes `stream` (not capturing) wait for the upload of the table,
        /// until it is known to be done.
        void wait_until_uploaded(StreamHandle stream) const {
            if (!upload_done()) {
                Runtime::stream_wait_event(stream, ready->get());
            }
        }

        /// Whether a capture may read the device table: once its upload is
        /// known done (a graph can not wait for an event recorded outside
        /// it), and where a graph can own a share of it (a user object).
        bool capturable() const {
            if constexpr (Runtime::has_user_objects) {
                return upload_done();
            } else {
                return false;
            }
        }

        /// A new share of the device table, for a graph to own.
        std::unique_ptr<TableReference> share() const {
            return std::make_unique<TableReference>(TableReference{share_->deferred, share_->table});
        }

        /// Records that work queued on `stream` reads the table.
        void record_use(const Stream& stream, StreamHandle handle) const {
            const std::thread::id thread =
                stream.is_per_thread() ? std::this_thread::get_id() : std::thread::id();
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto& use : uses_) {
                if (use.stream == handle && use.thread == thread) {
                    Runtime::record_event(use.event.get(), handle);
                    return;
                }
            }
            Use use{handle, thread, backend->device_state(device).events.acquire()};
            Runtime::record_event(use.event.get(), handle);
            uses_.push_back(std::move(use));
        }

        const GpuBackend* backend;
        int device;
        uint64_t entries;
        MoveTableEntry* table = nullptr;
        MoveLaunchClasses classes;
        bool narrow = false;
        uint64_t input_row_stride = 0;
        uint64_t output_row_stride = 0;
        std::unique_ptr<EventLease> ready;

    private:
        struct Use {
            StreamHandle stream;
            std::thread::id thread;  // per-thread default streams: one per thread
            EventLease event;
        };
        /// Drops the plan's share of the table once every event of
        /// `pending` has completed, one after the other on the
        /// deferred-work thread.
        static void drop_after(DeferredWork<Runtime>& deferred, int device, TableReference* share,
                               std::vector<EventLease>&& pending) {
            if (pending.empty()) {
                TableReference::drop(share);
                return;
            }
            EventLease last = std::move(pending.back());
            pending.pop_back();
            auto rest = std::make_shared<std::vector<EventLease>>(std::move(pending));
            DeferredWork<Runtime>* queue = &deferred;
            deferred.after_event(device, std::move(last), [queue, device, share, rest]() {
                drop_after(*queue, device, share, std::move(*rest));
            });
        }

        TableReference* share_ = nullptr;  // the plan's; a raw pointer, so that only the deferred thread drops it
        mutable std::mutex mutex_;
        mutable std::vector<Use> uses_;
        mutable std::atomic<bool> uploaded_{false};
    };

    /// An execution of a prepared plan captured in a graph, which must not
    /// wait on the host nor outlive what it reads: the graph reads the
    /// plan's device table, uploaded (plan.capturable()), and owns a share
    /// of it (a user object). A capture before the upload is known done, or
    /// where graphs can own nothing (HIP 5.2), runs the plan's movements
    /// through move_data instead, which gives the graph a table of its own.
    void capture_move_plan(StreamHandle handle, const PreparedMovePlan& plan, MoveDataArguments arguments) const {
        if constexpr (Runtime::has_user_objects) {
            Runtime::retain_with_graph(handle, &TableReference::drop, plan.share().release());
            launch_move_data_with_device_table<Runtime>(handle, arguments, plan.table, plan.classes.blocks,
                                                        plan.narrow);
            MTSARRAY_CHECK_LAUNCH(Errors, "move plan");
        } else {
            (void)handle;
            (void)plan;
            (void)arguments;
            throw Error("move plan: a graph can not own the plan's table on this runtime");  // capturable() is false
        }
    }

    /// The table of a move_data captured in a graph: device memory and the
    /// host copy a memcpy node of the graph uploads at every replay, owned
    /// by the graph (a user object) and freed after it.
    struct GraphOwnedTable {
        DeferredWork<Runtime>* deferred;
        int device;
        void* device_table = nullptr;
        std::unique_ptr<typename PinnedStagingPool<Runtime>::Lease> host;

        /// The user object's destructor: runs on a thread of the runtime,
        /// which must make no runtime call; the frees go to the
        /// deferred-work thread.
        static void release(void* object) {
            auto* table = static_cast<GraphOwnedTable*>(object);
            try {
                table->deferred->soon([table]() {
                    DeviceGuard<Runtime> guard(table->device);
                    if (table->device_table != nullptr) {
                        Runtime::free_device(table->device_table);
                    }
                    delete table;
                });
            } catch (...) {
                std::fprintf(stderr, "mtsarray: %s graph-owned move_data table leaked\n", Runtime::name);
            }
        }
    };

    /// A table too large for the kernel parameters under graph capture.
    /// With user objects and a free page-locked buffer: one memcpy node
    /// uploads the graph's own host copy into the graph's own device memory,
    /// then one kernel node moves, at every replay. Otherwise (HIP 5.2, or no
    /// page-locked buffer free: a graph node must never read pageable
    /// memory, and page-locking is not allowed in a capture): kernel nodes
    /// of inline_move_table_capacity entries each, whose parameters hold the
    /// table -- correct, but one node per slice.
    void launch_captured(StreamHandle handle, int device, MoveTableEntry* entries, const MoveTableSummary& summary,
                         MoveDataArguments arguments, unsigned blocks, bool narrow) const {
        if constexpr (Runtime::has_user_objects) {
            if (launch_with_graph_owned_table(handle, device, entries, summary, arguments, blocks, narrow)) {
                return;
            }
        } else {
            (void)device;
            (void)blocks;
        }
        launch_in_parameter_slices(handle, entries, summary, arguments, narrow);
    }

    /// The one-kernel-node capture of launch_captured; false (and nothing
    /// queued) when the staging pool has no page-locked buffer free now.
    bool launch_with_graph_owned_table(StreamHandle handle, int device, MoveTableEntry* entries,
                                       const MoveTableSummary& summary, MoveDataArguments arguments,
                                       unsigned blocks, bool narrow) const {
        const size_t table_bytes = summary.entries * sizeof(MoveTableEntry);
        auto host = std::make_unique<typename PinnedStagingPool<Runtime>::Lease>(
            device_state(device).staging.acquire(table_bytes));
        if (!host->page_locked()) {
            return false;  // the pool grows in the background for later captures
        }
        auto* owned = new GraphOwnedTable{&deferred_, device, nullptr, std::move(host)};
        try {
            owned->device_table = allocate_device_relaxed(table_bytes);
        } catch (...) {
            GraphOwnedTable::release(owned);
            throw;
        }
        std::memcpy(owned->host->data(), entries, table_bytes);
        Runtime::retain_with_graph(handle, &GraphOwnedTable::release, owned);
        Runtime::copy_host_to_device_async(owned->device_table, owned->host->data(), table_bytes, handle);
        launch_move_data_with_device_table<Runtime>(
            handle, arguments, static_cast<const MoveTableEntry*>(owned->device_table), blocks, narrow);
        MTSARRAY_CHECK_LAUNCH(Errors, "move_data");
        return true;
    }

    /// Kernel nodes whose parameters hold inline_move_table_capacity
    /// entries of the table each.
    void launch_in_parameter_slices(StreamHandle handle, MoveTableEntry* entries, const MoveTableSummary& summary,
                                    MoveDataArguments arguments, bool narrow) const {
        std::vector<MoveTableEntry>& scratch = move_table_scratch();
        for (uint64_t first = 0; first < summary.entries; first += inline_move_table_capacity) {
            const uint64_t count = std::min<uint64_t>(inline_move_table_capacity, summary.entries - first);
            MoveTableSummary slice;
            count_move_table_keys(entries + first, count, slice);
            const MoveLaunchClasses classes =
                classify_move_table(entries + first, slice, arguments.input_row_stride,
                                    arguments.output_row_stride, threads_per_block, max_blocks, scratch);
            MoveDataArguments part = move_data_arguments(classes, arguments.input, arguments.output,
                                                         arguments.input_row_stride, arguments.output_row_stride);
            launch_move_data<Runtime>(handle, part, entries + first, count, classes.blocks, narrow);
            MTSARRAY_CHECK_LAUNCH(Errors, "move_data");
        }
    }

    static bool serves(DLDeviceType type) noexcept {
        return type == Runtime::device_type || type == Runtime::pinned_host_type ||
               (Runtime::has_managed_memory && type == Runtime::managed_type);
    }

    /// Device memory outside any stream order (cudaMalloc), in the Relaxed
    /// capture mode: a potentially unsafe call, allowed in a capture (for
    /// memory a graph owns) and during another thread's.
    static void* allocate_device_relaxed(size_t bytes) {
        RelaxedCaptureMode<Runtime> relaxed;
        return Runtime::allocate_device(bytes);
    }

    /// The non-null address of zero-byte host-accessible allocations (the
    /// CPU never dereferences it); never freed.
    static void* host_zero_size_allocation() noexcept {
        static char placeholder;
        return &placeholder;
    }

    /// The native handle of a stream of this backend's device memory. Host
    /// accessible memory is computed on by the CPU backend, so reaching here
    /// with it is a dispatch bug, reported as such.
    static StreamHandle device_stream(const Stream& stream, const char* operation) {
        MTSARRAY_EXPECTS(stream.device().device_type == Runtime::device_type && !stream.is_none(),
                         std::string(operation) + ": the " + Runtime::name + " backend only computes on " +
                             device_type_name(Runtime::device_type) + " streams, got " + stream.describe());
        // the runtime resolves stream 2 to the calling thread's stream
        MTSARRAY_EXPECTS(stream.belongs_to_this_thread(),
                         std::string(operation) + ": " + stream.describe() +
                             " is the per-thread default stream of another thread, which this thread can not "
                             "queue work on; give arrays shared between threads a stream handle (> 2) or the "
                             "legacy default stream (1)");
        return Runtime::native_stream(stream);
    }

    /// Whether `stream` is capturing a graph; an error counts as capturing
    /// (the legacy stream reports one while a blocking stream of its device
    /// captures).
    static bool capturing(StreamHandle stream) {
        try {
            return Runtime::capture_state(stream).active;
        } catch (const Error&) {
            return true;
        }
    }

    /// Record/wait pairs are legal between streams outside any capture, or
    /// between streams of the same capture (its fork and join); any other
    /// pair would tie a graph to work outside it.
    static void check_same_capture(const Stream& waiting, StreamHandle waiting_handle, const Stream& producer,
                                   StreamHandle producer_handle) {
        const auto waiting_capture = Runtime::capture_state(waiting_handle);
        const auto producer_capture = Runtime::capture_state(producer_handle);
        if (!waiting_capture.active && !producer_capture.active) {
            return;
        }
        MTSARRAY_EXPECTS(waiting_capture.active && producer_capture.active &&
                             waiting_capture.id == producer_capture.id,
                         waiting.describe() + " can not wait for " + producer.describe() + ": " +
                             (waiting_capture.active ? waiting.describe() : producer.describe()) +
                             " is capturing a " + Runtime::graph_name +
                             " and the other stream is not part of that capture. Use the capturing stream for "
                             "both arrays, or fork the capture to the other stream first.");
    }

    /// "device id 3 out of range (2 CUDA devices)"
    static std::string out_of_range(int device, int count) {
        return "device id " + std::to_string(device) + " out of range (" + std::to_string(count) + " " +
               Runtime::display_name + (count == 1 ? " device)" : " devices)");
    }

    /// The device count, probed once (thread-safe); the per-device states
    /// are made at the same time, so that finding one takes no lock.
    const typename Runtime::DeviceCount& probe() const noexcept {
        std::call_once(probe_once_, [this]() {
            devices_ = Runtime::probe_devices();
            try {
                for (int device = 0; device < devices_.count; device++) {
                    states_.push_back(std::make_unique<DeviceState>(device, deferred_));
                }
            } catch (...) {
                states_.clear();
                devices_ = {0, std::string("out of host memory for the ") + Runtime::display_name + " backend"};
            }
        });
        return devices_;
    }

    /// Where plan_move_table also stores each movement it reads, and the
    /// samples they reach (a reusable plan's copy); none when `copy` is null.
    struct MovementCopy {
        mts_data_movement_t* copy = nullptr;
        SampleReach* reach = nullptr;
    };

    /// The host work of a move_data: checks every movement of `plan` and
    /// writes its table into `storage`, grouped by size class (when it
    /// mixes classes), with the blocks of each class. A long plan is built
    /// in parts on the host threads. Throws validate()'s error, naming the
    /// first bad movement, when one is out of range (`what`: the operation,
    /// for the message if validate() finds none). With `kept`, the plan's
    /// copy of the movements and the samples they reach are made in the
    /// same pass.
    void plan_move_table(const MovePlan& plan, MoveTableStorage<Runtime>& storage, MoveTableSummary& summary,
                         MoveLaunchClasses& classes, const char* what, MovementCopy kept = {}) const {
        const size_t threads = host_tasks_ != nullptr ? host_tasks_->threads() : 1;
        const size_t parts = move_table_part_count(plan.movements_count(), threads);
        bool valid = false;
        if (parts > 1) {
            valid = build_move_table_in_parts(plan, storage, summary, classes, threads_per_block, max_blocks,
                                              *host_tasks_, threads, parts, kept.copy, kept.reach);
        } else {
            valid = kept.copy != nullptr ? build_move_table_copying(plan, storage, summary, kept.copy, *kept.reach)
                                         : build_move_table(plan, storage, summary);
            if (valid) {
                classes = storage.classify(summary, threads_per_block, max_blocks);
            }
        }
        if (!valid) {
            plan.validate();  // throws the error naming the bad movement
            throw Error(std::string(what) + ": a movement is out of range");
        }
    }

    /// The state of `device`, set up on first use: every kernel of the
    /// library is loaded there then (kernel_loading.hpp), before any launch.
    DeviceState& device_state(int device) const {
        const auto& devices = probe();
        MTSARRAY_EXPECTS(device >= 0 && device < devices.count, out_of_range(device, devices.count));
        DeviceState& state = *states_[static_cast<size_t>(device)];
        state.set_up();
        return state;
    }

    mutable std::once_flag probe_once_;
    mutable typename Runtime::DeviceCount devices_{};
    mutable std::vector<std::unique_ptr<DeviceState>> states_;
    mutable DeferredWork<Runtime> deferred_;
    const HostTasks* const host_tasks_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
