#pragma once
// HipRuntime: the runtime traits GpuBackend (src/gpu/gpu_backend.hpp) is
// instantiated with for ROCm. Every HIP runtime call of mtsarray lives here,
// checked with hip_error.hpp; it provides the names of
// src/cuda/cuda_runtime.hpp, and differs where ROCm does: its DLPack stream
// numbers, no managed-memory device type in DLPack, and how a missing
// driver shows.
//
// ROCm 5.2 (Debian 12) is the oldest runtime this is built with: it has the
// stream-ordered allocator (hipMallocAsync/hipFreeAsync, marked beta there)
// and every other call used here.

#include <cstddef>
#include <cstdint>
#include <string>

#include <hip/hip_runtime_api.h>
#include <metatensor.h>
#include <unistd.h>

#include "base/error.hpp"
#include "base/stream.hpp"
#include "hip/hip_error.hpp"

namespace mtsarray::detail {
namespace hip {

struct HipRuntime {
    using StreamHandle = hipStream_t;
    using EventHandle = hipEvent_t;
    using PoolHandle = hipMemPool_t;

    static constexpr const char* name = "hip";
    static constexpr const char* display_name = "ROCm";
    static constexpr const char* graph_name = "HIP graph";
    static constexpr DLDeviceType device_type = kDLROCM;
    static constexpr DLDeviceType pinned_host_type = kDLROCMHost;
    // DLPack names no ROCm managed-memory device type; a type this backend
    // never serves keeps `managed_type` from matching anything.
    static constexpr bool has_managed_memory = false;
    static constexpr DLDeviceType managed_type = kDLExtDev;
    // kernels are launched with <<<>>> (src/gpu/launch_config.hpp)
    static constexpr bool kernels_run_on_host = false;

    // ---- devices ----------------------------------------------------------

    struct DeviceCount {
        int count;
        std::string failure;  // why count is 0
    };

    /// Counts the devices without throwing. Without a GPU, or without the
    /// amdgpu kernel driver, hipGetDeviceCount returns hipErrorNoDevice
    /// either way: /dev/kfd tells the two apart.
    static DeviceCount probe_devices() noexcept {
        try {
            int count = 0;
            const hipError_t status = hipGetDeviceCount(&count);
            if (status == hipSuccess && count > 0) {
                return DeviceCount{count, ""};
            }
            (void)hipGetLastError();
            const std::string cause = status == hipSuccess ? "" : " (" + error_text(status) + ")";
            if (::access("/dev/kfd", F_OK) != 0) {
                return DeviceCount{0, "no ROCm driver found: /dev/kfd does not exist" + cause};
            }
            if (::access("/dev/kfd", R_OK | W_OK) != 0) {
                return DeviceCount{0, "no ROCm device usable: /dev/kfd is not readable and "
                                      "writable by this user (the render group usually is)" +
                                          cause};
            }
            if (status == hipSuccess || status == hipErrorNoDevice) {
                return DeviceCount{0, "no ROCm device" + cause};
            }
            return DeviceCount{0, "ROCm can not be initialised" + cause};
        } catch (...) {
            return DeviceCount{0, "ROCm can not be initialised (out of memory)"};
        }
    }

    using Errors = HipErrors;

    static int current_device() {
        int device = 0;
        MTSARRAY_HIP_CHECK(hipGetDevice(&device));
        return device;
    }
    static void set_device(int device) { MTSARRAY_HIP_CHECK(hipSetDevice(device)); }
    static void restore_device(int device) noexcept {
        MTSARRAY_HIP_CHECK_NOTHROW(hipSetDevice(device));
    }
    /// Whether the primary context of `device` is active; true when that
    /// can not be asked.
    static bool device_active(int device) noexcept {
        hipDevice_t handle = 0;
        unsigned int flags = 0;
        int active = 1;
        if (hipDeviceGet(&handle, device) != hipSuccess ||
            hipDevicePrimaryCtxGetState(handle, &flags, &active) != hipSuccess) {
            (void)hipGetLastError();
            return true;
        }
        return active != 0;
    }

    /// DLPack stream numbers for ROCm: 0 is the default (null) stream,
    /// anything above 2 a hipStream_t. Stream::parse has rejected 1 and 2.
    static StreamHandle native_stream(const Stream& stream) {
        if (stream.number() == stream_numbers::rocm_default) {
            return nullptr;
        }
        MTSARRAY_EXPECTS(stream.is_handle(), "stream number " + std::to_string(stream.number()) +
                                                 " does not name a ROCm stream");
        return static_cast<hipStream_t>(stream.handle());
    }

    /// The device a stream handle (a hipStream_t, never the default
    /// stream) belongs to, or -1 where the runtime can not say. HIP Runtime
    /// API hipStreamGetDevice (ROCm 6; absent from ROCm 5.2): "Gets the
    /// device associated with the stream". Older runtimes leave the check
    /// to the first call that fails on the stream.
    static int stream_device(StreamHandle stream) {
#if HIP_VERSION >= 60000000
        hipDevice_t device = -1;
        MTSARRAY_HIP_CHECK(hipStreamGetDevice(stream, &device));
        return static_cast<int>(device);
#else
        (void)stream;
        return -1;
#endif
    }

    /// A non-blocking stream of the current device, for mtsarray's own
    /// work (never destroyed: it serves the device for the process).
    static StreamHandle create_stream() {
        StreamHandle stream = nullptr;
        MTSARRAY_HIP_CHECK(hipStreamCreateWithFlags(&stream, hipStreamNonBlocking));
        return stream;
    }

    /// Loads `kernel` on the current device (kernel_loading.hpp).
    static void load_kernel(const void* kernel) {
        hipFuncAttributes attributes;
        MTSARRAY_HIP_CHECK(hipFuncGetAttributes(&attributes, kernel));
    }

    using CaptureMode = hipStreamCaptureMode;
    static constexpr CaptureMode relaxed_capture_mode = hipStreamCaptureModeRelaxed;
    /// Sets the calling thread's interaction mode with graph captures,
    /// returns the previous one.
    static CaptureMode exchange_capture_mode(CaptureMode mode) noexcept {
        MTSARRAY_HIP_CHECK_NOTHROW(hipThreadExchangeStreamCaptureMode(&mode));
        return mode;
    }

    struct CaptureState {
        bool active;
        unsigned long long id;
    };

    /// Whether `stream` is capturing a graph (an invalidated capture counts:
    /// any work queued there fails anyway).
    static CaptureState capture_state(StreamHandle stream) {
        hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
        unsigned long long id = 0;
        MTSARRAY_HIP_CHECK(hipStreamGetCaptureInfo(stream, &status, &id));
        return CaptureState{status != hipStreamCaptureStatusNone, id};
    }

    // ---- memory -----------------------------------------------------------

    /// A stream-ordered pool of `device` (its release threshold is set by
    /// set_release_threshold). (ROCm 5.2 marks these calls beta.)
    // ---- peer access (src/gpu/peer_access.hpp) ----------------------------
    /// Whether `device` can reach memory of `peer` directly.
    static bool can_access_peer(int device, int peer) {
        int can = 0;
        MTSARRAY_HIP_CHECK(hipDeviceCanAccessPeer(&can, device, peer));
        return can != 0;
    }
    /// Lets the current device reach `peer`'s allocations that are not from
    /// a pool; already enabled is not an error.
    static void enable_peer_access(int peer) {
        const hipError_t status = hipDeviceEnablePeerAccess(peer, 0);
        if (status == hipErrorPeerAccessAlreadyEnabled) {
            (void)hipGetLastError();  // not sticky: forget it
            return;
        }
        MTSARRAY_HIP_CHECK(status);
    }
    /// Lets work on `device` read and write the memory of `pool`.
    static void grant_pool_access(PoolHandle pool, int device) {
        hipMemAccessDesc access = {};
        access.location.type = hipMemLocationTypeDevice;
        access.location.id = device;
        access.flags = hipMemAccessFlagsProtReadWrite;
        MTSARRAY_HIP_CHECK(hipMemPoolSetAccess(pool, &access, 1));
    }

    static PoolHandle create_pool(int device) {
        hipMemPoolProps properties = {};
        properties.allocType = hipMemAllocationTypePinned;
        properties.handleTypes = hipMemHandleTypeNone;
        properties.location.type = hipMemLocationTypeDevice;
        properties.location.id = device;
        PoolHandle pool = nullptr;
        MTSARRAY_HIP_CHECK(hipMemPoolCreate(&pool, &properties));
        // no dependency the program did not ask for (see cuda_runtime.hpp)
        int no = 0;
        MTSARRAY_HIP_CHECK(hipMemPoolSetAttribute(pool, hipMemPoolReuseAllowInternalDependencies, &no));
        return pool;
    }
    /// See cuda_runtime.hpp (hipMemPoolAttrReleaseThreshold).
    static void set_release_threshold(PoolHandle pool, uint64_t bytes) {
        MTSARRAY_HIP_CHECK(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &bytes));
    }
    static void trim_pool(PoolHandle pool) noexcept { MTSARRAY_HIP_CHECK_NOTHROW(hipMemPoolTrimTo(pool, 0)); }
    /// The size of the current device's memory.
    static size_t device_memory_bytes(int /*device: current*/) {
        size_t free = 0;
        size_t total = 0;
        MTSARRAY_HIP_CHECK(hipMemGetInfo(&free, &total));
        return total;
    }
    static void* allocate_from_pool(size_t bytes, PoolHandle pool, StreamHandle stream) {
        void* data = nullptr;
        gpu::check_allocation<HipErrors>(hipMallocFromPoolAsync(&data, bytes, pool, stream),
                                         "hipMallocFromPoolAsync", bytes, __FILE__, __LINE__);
        return data;
    }
    static void free_async(void* data, StreamHandle stream) noexcept {
        MTSARRAY_HIP_CHECK_NOTHROW(hipFreeAsync(data, stream));
    }

    /// Page-locked host memory, usable with every device.
    static void* allocate_pinned(size_t bytes) {
        void* data = nullptr;
        gpu::check_allocation<HipErrors>(hipHostMalloc(&data, bytes, hipHostMallocPortable),
                                         "hipHostMalloc", bytes, __FILE__, __LINE__);
        return data;
    }
    static void free_pinned(void* data) noexcept { MTSARRAY_HIP_CHECK_NOTHROW(hipHostFree(data)); }

    // GpuBackend never reaches these: no device type selects managed memory.
    static void* allocate_managed(size_t /*bytes*/) {
        throw Error("DLPack has no ROCm managed-memory device type");
    }
    static void free_managed(void* /*data*/) noexcept {}

    /// Device memory outside any stream order (hipMalloc / hipFree).
    static void* allocate_device(size_t bytes) {
        void* data = nullptr;
        gpu::check_allocation<HipErrors>(hipMalloc(&data, bytes), "hipMalloc", bytes, __FILE__, __LINE__);
        return data;
    }
    static void free_device(void* data) noexcept { MTSARRAY_HIP_CHECK_NOTHROW(hipFree(data)); }

    /// HIP 5.2 has no user objects (hipUserObjectCreate): a graph can not
    /// own the table of a large captured move_data, which is then captured
    /// as several kernel nodes whose parameters hold the table
    /// (gpu_backend.hpp), correct but slower to replay.
    static constexpr bool has_user_objects = false;
    static void retain_with_graph(StreamHandle, void (*)(void*), void*) {
        throw Error("HIP graphs can not own memory in this version (no hipUserObjectCreate)");
    }

    /// Queues `function(data)` on `stream` (hipLaunchHostFunc); see
    /// cuda_runtime.hpp. The function must make no HIP call.
    static void launch_host_function(StreamHandle stream, void (*function)(void*), void* data) {
        MTSARRAY_HIP_CHECK(hipLaunchHostFunc(stream, function, data));
    }

    // ---- copies -----------------------------------------------------------

    static void copy_device_to_device_async(void* destination, const void* source, size_t bytes,
                                            StreamHandle stream) {
        MTSARRAY_HIP_CHECK(
            hipMemcpyAsync(destination, source, bytes, hipMemcpyDeviceToDevice, stream));
    }
    static void copy_host_to_device_async(void* destination, const void* source, size_t bytes,
                                          StreamHandle stream) {
        MTSARRAY_HIP_CHECK(
            hipMemcpyAsync(destination, source, bytes, hipMemcpyHostToDevice, stream));
    }
    static void copy_device_to_host_async(void* destination, const void* source, size_t bytes,
                                          StreamHandle stream) {
        MTSARRAY_HIP_CHECK(
            hipMemcpyAsync(destination, source, bytes, hipMemcpyDeviceToHost, stream));
    }
    static void copy_peer_async(void* destination, int destination_device, const void* source,
                                int source_device, size_t bytes, StreamHandle stream) {
        MTSARRAY_HIP_CHECK(hipMemcpyPeerAsync(destination, destination_device, source,
                                              source_device, bytes, stream));
    }
    static void memset_async(void* data, unsigned char value, size_t bytes, StreamHandle stream) {
        MTSARRAY_HIP_CHECK(hipMemsetAsync(data, value, bytes, stream));
    }

    // ---- events and synchronisation ---------------------------------------

    static EventHandle create_event() {
        EventHandle event = nullptr;
        MTSARRAY_HIP_CHECK(hipEventCreateWithFlags(&event, hipEventDisableTiming));
        return event;
    }
    static void destroy_event(EventHandle event) noexcept {
        MTSARRAY_HIP_CHECK_NOTHROW(hipEventDestroy(event));
    }
    static void record_event(EventHandle event, StreamHandle stream) {
        MTSARRAY_HIP_CHECK(hipEventRecord(event, stream));
    }
    /// Whether the work before the event's last record is done (true for an
    /// event never recorded); never blocks.
    /// A not-ready answer is not left as the thread's last error (ROCm may
    /// keep it there until read; see runtime_error.hpp, forget_last_error).
    static bool event_done(EventHandle event) {
        const hipError_t status = hipEventQuery(event);
        if (status == hipErrorNotReady) {
            if (hipPeekAtLastError() == hipErrorNotReady) {
                (void)hipGetLastError();
            }
            return false;
        }
        MTSARRAY_HIP_CHECK(status);
        return true;
    }
    static void synchronize_event(EventHandle event) { MTSARRAY_HIP_CHECK(hipEventSynchronize(event)); }
    static void stream_wait_event(StreamHandle stream, EventHandle event) {
        MTSARRAY_HIP_CHECK(hipStreamWaitEvent(stream, event, 0));
    }
    static void synchronize_stream(StreamHandle stream) {
        MTSARRAY_HIP_CHECK(hipStreamSynchronize(stream));
    }
    static void synchronize_device() { MTSARRAY_HIP_CHECK(hipDeviceSynchronize()); }
};

}  // namespace hip
}  // namespace mtsarray::detail
