#pragma once
// GpuBackend<Runtime>: the Backend of backend.hpp for a GPU runtime, written
// once for CUDA and HIP. Every runtime call goes through the `Runtime`
// traits (src/cuda/cuda_runtime.hpp, src/hip/hip_runtime.hpp); this file and
// the kernels it launches make none themselves.
//
// The traits a runtime provides (all static; "throws" means Error, or
// OutOfMemory for allocations, carrying the runtime's error name and string):
//
//   using StreamHandle = ...;                  // cudaStream_t / hipStream_t
//   using EventHandle = ...;                   // cudaEvent_t / hipEvent_t
//   static constexpr const char* name;         // "cuda": Backend::name()
//   static constexpr const char* display_name; // "CUDA": used in messages
//   static constexpr DLDeviceType device_type;       // kDLCUDA / kDLROCM
//   static constexpr DLDeviceType pinned_host_type;  // kDLCUDAHost / kDLROCMHost
//   static constexpr bool has_managed_memory;        // kDLCUDAManaged exists
//   static constexpr DLDeviceType managed_type;      // read only if it does
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
//   static void* allocate_async(size_t bytes, StreamHandle);  // throws
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
//   static void stream_wait_event(StreamHandle, EventHandle);
//   static void synchronize_stream(StreamHandle);
//   static void synchronize_device();                     // the current device
//
// Stream semantics: every operation runs on the stream it is given under a
// DeviceGuard for that stream's device (the legacy and per-thread default
// streams name a different stream on each device) and returns without
// waiting, except copy_from_host above `staged_copy_limit` (see there) and
// `synchronize`.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../backend.hpp"
#include "../device.hpp"
#include "../error.hpp"
#include "../fault_injection.hpp"
#include "device_guard.hpp"
#include "event_pool.hpp"
#include "fill_kernels.hpp"
#include "move_data_kernels.hpp"
#include "pinned_staging_pool.hpp"
#include "runtime_error.hpp"
#include "strided_copy_kernels.hpp"
#include "vector_units.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class GpuBackend final : public Backend {
public:
    using StreamHandle = typename Runtime::StreamHandle;

    /// copy_from_host calls up to this size are staged through page-locked
    /// memory and return at once; larger ones wait for the copy, so that the
    /// caller may reuse its buffer on return without the pool pinning
    /// arbitrarily large amounts of host memory. (For pageable sources the
    /// runtimes block on such copies anyway.)
    static constexpr size_t staged_copy_limit = size_t(4) << 20;

    GpuBackend() = default;
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

    void* allocate(const Stream& stream, size_t bytes) const override {
        const DLDevice device = stream.device();
        check_device(device);
        fault_injection::check("allocate");
        if (bytes == 0) {
            return zero_size_allocation();
        }
        if (device.device_type == Runtime::pinned_host_type) {
            return Runtime::allocate_pinned(bytes);
        }
        DeviceGuard<Runtime> guard(device.device_id);
        if (device.device_type == Runtime::device_type) {
            return Runtime::allocate_async(bytes, Runtime::native_stream(stream));
        }
        return Runtime::allocate_managed(bytes);
    }

    void deallocate(const Stream& stream, void* data, size_t /*bytes*/) const noexcept override {
        if (data == nullptr || data == zero_size_allocation()) {
            return;
        }
        const DLDevice device = stream.device();
        try {
            if (device.device_type == Runtime::pinned_host_type) {
                Runtime::free_pinned(data);
                return;
            }
            DeviceGuard<Runtime> guard(device.device_id);
            if (device.device_type == Runtime::device_type) {
                Runtime::free_async(data, Runtime::native_stream(stream));
            } else {
                Runtime::free_managed(data);
            }
        } catch (const std::exception& error) {
            // Nothing here may throw (no std::string): this is noexcept.
            std::fprintf(stderr, "mtsarray: %s deallocate on %s:%d leaked memory: %s\n",
                         Runtime::name, device_type_name(device.device_type), device.device_id,
                         error.what());
        } catch (...) {
            std::fprintf(stderr, "mtsarray: %s deallocate leaked memory\n", Runtime::name);
        }
    }

    void fill(const Stream& stream, void* data, size_t count, const void* value,
              size_t element_size) const override {
        const StreamHandle handle = device_stream(stream, "fill");
        fault_injection::check("fill");
        if (count == 0) {
            return;
        }
        DeviceGuard<Runtime> guard(stream.device().device_id);
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
        launch_fill(handle, data, count, value, element_size);
        check_launch<typename Runtime::Errors>("fill");
    }

    void copy(const Stream& stream, void* destination, const void* source,
              size_t bytes) const override {
        const StreamHandle handle = device_stream(stream, "copy");
        fault_injection::check("copy");
        if (bytes == 0) {
            return;
        }
        DeviceGuard<Runtime> guard(stream.device().device_id);
        Runtime::copy_device_to_device_async(destination, source, bytes, handle);
    }

    void move_data(const Stream& stream, void* output, const void* input,
                   const MovePlan& plan) const override {
        const StreamHandle handle = device_stream(stream, "move_data");
        fault_injection::check("move_data");
        const size_t run_count = move_table_size(plan);
        if (run_count == 0) {
            return;
        }
        MTSARRAY_EXPECTS(run_count <= UINT32_MAX,
                         "move_data: " + std::to_string(run_count) + " runs are too many");
        const int device = stream.device().device_id;
        DeviceGuard<Runtime> guard(device);

        size_t width = plan.alignment();
        width = std::min(width, alignment_of(output));
        width = std::min(width, alignment_of(input));

        MoveDataArguments arguments;
        arguments.input = static_cast<const unsigned char*>(input);
        arguments.output = static_cast<unsigned char*>(output);
        arguments.input_row_stride = plan.input_row_stride();
        arguments.output_row_stride = plan.output_row_stride();
        arguments.total_units = 0;
        arguments.run_count = static_cast<uint32_t>(run_count);

        if (run_count <= inline_move_table_capacity) {
            MoveTableEntry entries[inline_move_table_capacity];
            arguments.total_units = write_move_table(plan, width, entries);
            launch_move_data(handle, arguments, entries, width);
            check_launch<typename Runtime::Errors>("move_data");
            return;
        }

        // Large table: write it straight into page-locked memory, upload it
        // on the stream into a stream-ordered allocation, launch, and free the
        // table behind the kernel. Nothing here waits for the device.
        const size_t table_bytes = run_count * sizeof(MoveTableEntry);
        PinnedStagingPool<Runtime>& staging = device_state(device).staging;
        auto lease = staging.acquire(table_bytes);
        arguments.total_units =
            write_move_table(plan, width, static_cast<MoveTableEntry*>(lease.data()));

        void* table = Runtime::allocate_async(table_bytes, handle);
        StreamOrderedFree table_owner(table, handle);
        Runtime::copy_host_to_device_async(table, lease.data(), table_bytes, handle);
        staging.release_after(std::move(lease), handle);
        launch_move_data_with_device_table(handle, arguments,
                                           static_cast<const MoveTableEntry*>(table), width);
        check_launch<typename Runtime::Errors>("move_data");
    }

    void strided_copy(const Stream& stream, void* destination,
                      const StridedView& source) const override {
        const StreamHandle handle = device_stream(stream, "strided_copy");
        fault_injection::check("strided_copy");
        const StridedCopyPlan plan = plan_strided_copy(source, destination);
        if (plan.kind == StridedCopyPlan::Kind::nothing) {
            return;
        }
        DeviceGuard<Runtime> guard(stream.device().device_id);
        if (plan.kind == StridedCopyPlan::Kind::contiguous) {
            Runtime::copy_device_to_device_async(destination, source.data,
                                                 plan.total_units * plan.unit_width, handle);
            return;
        }
        launch_strided_copy(handle, plan, source.data, destination);
        check_launch<typename Runtime::Errors>("strided_copy");
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
        if (bytes <= staged_copy_limit) {
            PinnedStagingPool<Runtime>& staging = device_state(device).staging;
            auto lease = staging.acquire(bytes);
            std::memcpy(lease.data(), host_source, bytes);
            Runtime::copy_host_to_device_async(destination, lease.data(), bytes, handle);
            staging.release_after(std::move(lease), handle);
            return;
        }
        Runtime::copy_host_to_device_async(destination, host_source, bytes, handle);
        Runtime::synchronize_stream(handle);
    }

    void copy_peer(const Stream& stream, void* destination, DLDevice destination_device,
                   const void* source, size_t bytes) const override {
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
            Runtime::copy_peer_async(destination, destination_device.device_id, source,
                                     source_device, bytes, handle);
        }
    }

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
        // The event belongs to the producer's device; the waiting stream may
        // be on another device (a cross-device wait is legal).
        const int producer_device = producer.device().device_id;
        EventPool<Runtime>& events = device_state(producer_device).events;
        DeviceGuard<Runtime> producer_guard(producer_device);
        auto event = events.acquire();
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
                Runtime::synchronize_device();
            }
            return;
        }
        const StreamHandle handle = device_stream(stream, "synchronize");
        DeviceGuard<Runtime> guard(device.device_id);
        Runtime::synchronize_stream(handle);
    }

private:
    /// State shared by all threads working on one device.
    struct DeviceState {
        PinnedStagingPool<Runtime> staging;
        EventPool<Runtime> events;
    };

    /// Frees a stream-ordered allocation on scope exit, after whatever was
    /// queued on the stream before (including on the error path).
    class StreamOrderedFree {
    public:
        StreamOrderedFree(void* data, StreamHandle stream) : data_(data), stream_(stream) {}
        StreamOrderedFree(const StreamOrderedFree&) = delete;
        StreamOrderedFree& operator=(const StreamOrderedFree&) = delete;
        ~StreamOrderedFree() { Runtime::free_async(data_, stream_); }

    private:
        void* data_;
        StreamHandle stream_;
    };

    static bool serves(DLDeviceType type) noexcept {
        return type == Runtime::device_type || type == Runtime::pinned_host_type ||
               (Runtime::has_managed_memory && type == Runtime::managed_type);
    }

    /// The non-null address every zero-byte allocation gets; never freed.
    static void* zero_size_allocation() noexcept {
        static char placeholder;
        return &placeholder;
    }

    /// The native handle of a stream of this backend's device memory. Host
    /// accessible memory is computed on by the CPU backend, so reaching here
    /// with it is a dispatch bug, reported as such.
    static StreamHandle device_stream(const Stream& stream, const char* operation) {
        MTSARRAY_EXPECTS(stream.device().device_type == Runtime::device_type && !stream.is_none(),
                         std::string(operation) + ": the " + Runtime::name +
                             " backend only computes on " +
                             device_type_name(Runtime::device_type) + " streams, got " +
                             stream.describe());
        return Runtime::native_stream(stream);
    }

    /// "device id 3 out of range (2 CUDA devices)"
    static std::string out_of_range(int device, int count) {
        return "device id " + std::to_string(device) + " out of range (" + std::to_string(count) +
               " " + Runtime::display_name + (count == 1 ? " device)" : " devices)");
    }

    /// The device count, probed once (thread-safe).
    const typename Runtime::DeviceCount& probe() const noexcept {
        std::call_once(probe_once_, [this]() { devices_ = Runtime::probe_devices(); });
        return devices_;
    }

    DeviceState& device_state(int device) const {
        const auto& devices = probe();
        MTSARRAY_EXPECTS(device >= 0 && device < devices.count, out_of_range(device, devices.count));
        std::lock_guard<std::mutex> lock(states_mutex_);
        if (states_.empty()) {
            states_.resize(static_cast<size_t>(devices.count));
        }
        auto& state = states_[static_cast<size_t>(device)];
        if (!state) {
            state = std::make_unique<DeviceState>();
        }
        return *state;
    }

    mutable std::once_flag probe_once_;
    mutable typename Runtime::DeviceCount devices_{};
    mutable std::mutex states_mutex_;
    mutable std::vector<std::unique_ptr<DeviceState>> states_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
