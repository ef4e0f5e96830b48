#pragma once
// GpuBackend<Runtime>: the Backend of backend.hpp for a GPU runtime, written
// once for CUDA and HIP. Every runtime call goes through the `Runtime`
// traits (src/cuda/cuda_runtime.hpp, src/hip/hip_runtime.hpp, and the tests'
// simulated runtime, tests/support/simulated_runtime.hpp, which runs the
// kernels' per-thread bodies on the host); this file and the kernels it
// launches make none themselves.
//
// The traits a runtime provides are listed in runtime_traits.md.
//
// Stream semantics: every operation runs on the stream it is given under a
// DeviceGuard for that stream's device (the legacy and per-thread default
// streams name a different stream on each device) and returns without
// waiting; only `synchronize` (and copies to pageable host memory, for a
// host consumer) wait, for their own stream. Work that has to wait for the
// device before running on the host (handing memory back to its owner,
// frees that synchronise) goes to the DeferredWork thread.
//
// This file is the backend's table of contents; the work is done in:
//   gpu_devices.hpp           the devices, probed once, and the checks every
//                             call makes first (a device fault fails fast)
//   device_state.hpp          what is kept per device, and its set-up
//                             (kernel_loading.hpp: every kernel loaded first)
//   stream_ordering.hpp       waits between streams and for the host,
//                             markers, releases, the capture rules they meet
//   stream_ordered_memory.hpp device memory: mtsarray's pool per device
//   peer_access.hpp           pools of two devices opened to each other
//   runtime_calls.hpp         the calls that need the Relaxed capture mode
//   pinned_staging_pool.hpp   page-locked buffers for host -> device uploads
//   host_to_device.hpp        host -> device copies that never wait for the
//                             caller's stream
//   captured_host_copy.hpp    a copy from host memory captured in a graph
//   fill.hpp, strided_copy.hpp, move_data.hpp   the kernels and launchers
//   move_table_planning.hpp   the host work of a move_data: its table
//                             (move_table_storage, _parts, move_data_table)
//   prepared_move_plan.hpp    reusable plans, their table on the device
//   captured_move_data.hpp    move_data and plans captured in a graph
//   deferred_work.hpp         host work that waits for the device, off the
//                             caller's thread
// Each CUDA rule followed there is modelled by the simulated runtime of the
// tests (tests/support/simulation/), beside the documentation it follows.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/backend.hpp"
#include "base/device.hpp"
#include "base/error.hpp"
#include "base/fault_injection.hpp"
#include "base/host_tasks.hpp"
#include "gpu/capture_mode.hpp"
#include "gpu/captured_host_copy.hpp"
#include "gpu/captured_move_data.hpp"
#include "gpu/deferred_work.hpp"
#include "gpu/device_state.hpp"
#include "gpu/gpu_devices.hpp"
#include "gpu/device_guard.hpp"
#include "gpu/event_pool.hpp"
#include "gpu/fill.hpp"
#include "gpu/move_data.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/move_table_planning.hpp"
#include "gpu/move_table_storage.hpp"
#include "gpu/peer_access.hpp"
#include "gpu/pinned_staging_pool.hpp"
#include "gpu/prepared_move_plan.hpp"
#include "gpu/runtime_calls.hpp"
#include "gpu/runtime_error.hpp"
#include "gpu/stream_ordered_memory.hpp"
#include "gpu/stream_ordering.hpp"
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

    void check_device(DLDevice device) const override { devices_.check_device(device); }
    bool available() const noexcept override { return devices_.available(); }
    int device_count() const noexcept override { return devices_.count(); }

    /// A stream belongs to one device (cudaStreamGetDevice,
    /// hipStreamGetDevice: the rule is modelled in the tests' simulation,
    /// tests/support/simulation/streams.cpp): a handle of another device
    /// than the array's would queue the array's work on that device, where
    /// its kernels and events fail half-way through a call. The default
    /// streams are resolved on the array's own device and need no check;
    /// nor does a stream capturing a graph, whose device query some drivers
    /// refuse (invalidating the capture): its first event record fails.
    void check_stream(const Stream& stream) const override {
        if (stream.device().device_type != Runtime::device_type || !stream.is_handle()) {
            return;
        }
        check_device(stream.device());
        const StreamHandle handle = Runtime::native_stream(stream);
        if (Runtime::capture_state(handle).active) {
            return;
        }
        const int owner = Runtime::stream_device(handle);
        if (owner < 0 || owner == stream.device().device_id) {
            return;
        }
        DLDevice owner_device = stream.device();
        owner_device.device_id = owner;
        throw Error("stream " + std::to_string(stream.number()) + " is a stream of " + describe(owner_device) +
                    ", not of " + describe(stream.device()) +
                    ": a stream belongs to the device it was created on; use a stream of " +
                    describe(stream.device()) + " (for PyTorch, torch.cuda.current_stream(device))");
    }

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
        // (in the context of a device the program uses: host_memory_device)
        if (device.device_type == Runtime::pinned_host_type) {
            DeviceGuard<Runtime> guard(devices_.host_memory_device(Runtime::current_device()));
            RelaxedCaptureMode<Runtime> relaxed;
            return Runtime::allocate_pinned(bytes);
        }
        if (device.device_type == Runtime::device_type) {
            DeviceGuard<Runtime> guard(device.device_id);
            const StreamHandle handle = Runtime::native_stream(stream);
            StreamOrderedPool<Runtime>& memory = device_state(device.device_id).memory;
            return bytes == 0 ? memory.zero_size_allocation(handle) : memory.allocate(bytes, handle);
        }
        DeviceGuard<Runtime> guard(devices_.host_memory_device(device.device_id));
        RelaxedCaptureMode<Runtime> relaxed;
        return Runtime::allocate_managed(bytes);
    }

    void deallocate(const Stream& stream, void* data, size_t /*bytes*/) const noexcept override {
        if (data == nullptr || data == host_zero_size_allocation() || DeviceFaults<Errors>::met()) {
            return;  // (after a device fault nothing can be freed: reported once, runtime_error.hpp)
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
            // computes on this memory; the host work is done by now.) In the
            // context of a device the program uses, never one woken for it.
            const bool pinned = device.device_type == Runtime::pinned_host_type;
            const int device_id = device.device_id;
            const GpuDevices<Runtime>* devices = &devices_;
            deferred_.soon([data, pinned, device_id, devices]() {
                DeviceGuard<Runtime> guard(
                    devices->host_memory_device(pinned ? Runtime::current_device() : device_id));
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

    uint64_t release_threshold(DLDevice device) const override {
        if (device.device_type != Runtime::device_type) {
            return 0;
        }
        check_device(device);
        DeviceGuard<Runtime> guard(device.device_id);
        return device_state(device.device_id).memory.release_threshold();
    }

    void set_release_threshold(DLDevice device, uint64_t bytes) const override {
        if (device.device_type != Runtime::device_type) {
            return;
        }
        check_device(device);
        DeviceGuard<Runtime> guard(device.device_id);
        device_state(device.device_id).memory.set_release_threshold(bytes);
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
        MTSARRAY_CHECKED_LAUNCH(Errors, "fill", launch_fill<Runtime>(handle, data, count, value, element_size));
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
        plan_move_table(plan, storage, summary, classes, "move_data", host_tasks_);
        fault_injection::check("move_data");
        wait(stream, input_stream);
        if (summary.entries == 0) {
            return;
        }

        const MoveDataArguments arguments =
            move_data_arguments(classes, input, output, plan.input_row_stride(), plan.output_row_stride());
        const bool narrow = narrow_offsets(summary.span);

        if (summary.entries <= inline_move_table_capacity) {
            MTSARRAY_CHECKED_LAUNCH(Errors, "move_data",
                                    launch_move_data<Runtime>(handle, arguments, storage.data(), summary.entries,
                                                              classes.blocks, narrow));
            return;
        }
        if (capture.active) {
            CapturedMoveData<Runtime>::launch_captured(handle, device_state(device).staging, deferred_, device, storage.data(),
                                                       summary, arguments, classes.blocks, narrow);
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
        MTSARRAY_CHECKED_LAUNCH(Errors, "move_data",
                                launch_move_data_with_device_table<Runtime>(
                                    handle, arguments, static_cast<const MoveTableEntry*>(table), classes.blocks, narrow));
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
        plan_move_table(plan, storage, summary, classes, "move plan", host_tasks_, MovementCopy{copy, &reach});
        auto prepared = std::make_unique<PreparedMovePlan<Runtime>>(*this, deferred_, state.events, device, summary.entries);
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
        const auto* plan = dynamic_cast<const PreparedMovePlan<Runtime>*>(&prepared);
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
            CapturedMoveData<Runtime>::capture_move_plan(handle, *plan, arguments);
            return true;
        }
        plan->wait_until_uploaded(handle);
        MTSARRAY_CHECKED_LAUNCH(Errors, "move plan",
                                launch_move_data_with_device_table<Runtime>(handle, arguments, plan->table,
                                                                            plan->classes.blocks, plan->narrow));
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
        MTSARRAY_CHECKED_LAUNCH(Errors, "strided_copy", launch_strided_copy<Runtime>(handle, plan, source.data, destination));
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
        MTSARRAY_EXPECTS(!capturing<Runtime>(handle), CapturedHostCopy<Runtime>::refusal("a copy from host memory"));
        if (bytes <= staged_copy_limit) {
            // copied into page-locked memory at once: the copy needs the
            // caller's buffer no more (nor the runtime's staging)
            if (auto lease = state.staging.try_acquire(bytes)) {
                std::memcpy(lease->data(), host_source, bytes);
                state.uploads.copy(handle, destination, lease->data(), bytes, /*source_page_locked=*/true);
                state.staging.release_after(std::move(*lease), handle);
                return;
            }
        }
        // larger than the staging pool holds, or no buffer free: the
        // runtime stages the pageable source before the call returns, off
        // the caller's stream (host_to_device.hpp)
        state.uploads.copy(handle, destination, host_source, bytes, /*source_page_locked=*/false);
    }

    void copy_from_host_keeping(const Stream& stream, void* destination, const void* host_source, size_t bytes,
                                std::shared_ptr<const void> source_owner, bool source_page_locked) const override {
        const StreamHandle handle = device_stream(stream, "copy_from_host");
        if (bytes != 0) {
            const int device = stream.device().device_id;
            DeviceGuard<Runtime> guard(device);
            if (capturing<Runtime>(handle)) {
                // the graph reads the source at every replay, and keeps it
                fault_injection::check("copy_from_host");
                CapturedHostCopy<Runtime>::capture(handle, device_state(device).staging, deferred_, destination,
                                                   host_source, bytes, std::move(source_owner), source_page_locked);
                return;
            }
        }
        if (!source_page_locked) {
            copy_from_host(stream, destination, host_source, bytes);  // the source is free on return
            return;
        }
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

    void copy_peer(const Stream& stream, void* destination, const void* source, DLDevice source_device,
                   size_t bytes) const override {
        const StreamHandle handle = device_stream(stream, "copy_peer");
        fault_injection::check("copy_peer");
        MTSARRAY_EXPECTS(source_device.device_type == Runtime::device_type,
                         std::string("copy_peer: the source is ") + device_type_name(source_device.device_type) +
                             " memory, not " + device_type_name(Runtime::device_type));
        check_device(source_device);
        if (bytes == 0) {
            return;
        }
        // queued on the destination's stream, under its device: the source
        // device's own queue never waits for the destination's
        const int destination_device = stream.device().device_id;
        DeviceGuard<Runtime> guard(destination_device);
        if (source_device.device_id == destination_device) {
            Runtime::copy_device_to_device_async(destination, source, bytes, handle);
        } else {
            // Not a plain device-to-device copy: memory from stream-ordered
            // pools is only reachable from another device through the peer
            // copy, which also works without peer access (staged through
            // the host); where the devices reach each other, their pools
            // are opened to each other first, once (peer_access.hpp).
            open_peer_access(source_device.device_id, destination_device);
            Runtime::copy_peer_async(destination, destination_device, source, source_device.device_id, bytes,
                                     handle);
        }
    }

    // ---- ordering (stream_ordering.hpp) ------------------------------------

    void wait(const Stream& waiting, const Stream& producer) const override { ordering_.wait(waiting, producer); }
    void synchronize(const Stream& stream) const override { ordering_.synchronize(stream); }
    std::shared_ptr<const StreamMarker> mark(const Stream& stream) const override { return ordering_.mark(stream); }
    void wait(const Stream& waiting, const StreamMarker& marker) const override { ordering_.wait(waiting, marker); }
    void synchronize(const StreamMarker& marker) const override { ordering_.synchronize(marker); }
    void release_after(const Stream& stream, std::function<void()>&& release) const override {
        ordering_.release_after(stream, std::move(release));
    }
    bool defer_while_capturing(const Stream& stream, std::function<void()>& work) const override {
        return ordering_.defer_while_capturing(stream, work);
    }
    void check_not_capturing(const Stream& stream, const char* operation) const override {
        ordering_.check_not_capturing(stream, operation);
    }

    /// Whether the deferred-work thread runs nothing and has nothing it
    /// could run now (DeferredWork::settled): with the device idle too,
    /// every release the program asked for has happened, but those waiting
    /// for a capture to end.
    bool deferred_work_settled() const { return deferred_.settled(); }

private:
    using EventLease = typename EventPool<Runtime>::Lease;

    /// Opens the pools of devices `a` and `b` to each other where they can
    /// reach each other, the first time a copy goes between them.
    void open_peer_access(int a, int b) const {
        peers_.open(a, b, [this](int device) -> StreamOrderedPool<Runtime>& { return device_state(device).memory; });
    }

    /// The state of `device` (gpu_devices.hpp).
    DeviceState& device_state(int device) const { return devices_.device_state(device); }
    static StreamHandle device_stream(const Stream& stream, const char* operation) {
        return GpuDevices<Runtime>::device_stream(stream, operation);
    }

    /// The non-null address of zero-byte host-accessible allocations (the
    /// CPU never dereferences it); never freed.
    static void* host_zero_size_allocation() noexcept {
        static char placeholder;
        return &placeholder;
    }

    const GpuDevices<Runtime> devices_;
    const StreamOrdering<Runtime> ordering_{devices_};
    DeferredWork<Runtime>& deferred_{devices_.deferred()};
    const HostTasks* const host_tasks_;
    mutable PeerAccess<Runtime> peers_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
