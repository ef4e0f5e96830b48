#pragma once
// CudaRuntime: the runtime traits GpuBackend (src/gpu/gpu_backend.hpp) is
// instantiated with. Every CUDA runtime call of mtsarray lives here, checked
// with cuda_error.hpp; src/hip/hip_runtime.hpp provides the same names for
// ROCm.

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>
#include <metatensor.h>

#include "base/error.hpp"
#include "base/stream.hpp"
#include "cuda/cuda_error.hpp"

namespace mtsarray::detail {
namespace cuda {

struct CudaRuntime {
    using StreamHandle = cudaStream_t;
    using EventHandle = cudaEvent_t;
    using PoolHandle = cudaMemPool_t;

    static constexpr const char* name = "cuda";
    static constexpr const char* display_name = "CUDA";
    static constexpr const char* graph_name = "CUDA graph";
    static constexpr DLDeviceType device_type = kDLCUDA;
    static constexpr DLDeviceType pinned_host_type = kDLCUDAHost;
    static constexpr bool has_managed_memory = true;
    static constexpr DLDeviceType managed_type = kDLCUDAManaged;
    // kernels are launched with <<<>>> (src/gpu/launch_config.hpp)
    static constexpr bool kernels_run_on_host = false;

    // ---- devices ----------------------------------------------------------

    struct DeviceCount {
        int count;
        std::string failure;  // why count is 0
    };

    /// Counts the devices without throwing. With the static runtime and no
    /// driver, cudaGetDeviceCount fails and leaves its output alone, hence
    /// the explicit zero.
    static DeviceCount probe_devices() noexcept {
        try {
            int count = 0;
            const cudaError_t status = cudaGetDeviceCount(&count);
            if (status == cudaSuccess) {
                return count > 0 ? DeviceCount{count, ""} : DeviceCount{0, "no CUDA device"};
            }
            (void)cudaGetLastError();
            if (status == cudaErrorInsufficientDriver) {
                return DeviceCount{0, insufficient_driver(status)};
            }
            if (status == cudaErrorNoDevice) {
                return DeviceCount{0, "no CUDA device (" + error_text(status) + ")"};
            }
            return DeviceCount{0, "CUDA can not be initialised (" + error_text(status) + ")"};
        } catch (...) {
            return DeviceCount{0, "CUDA can not be initialised (out of memory)"};
        }
    }

    using Errors = CudaErrors;

    static int current_device() {
        int device = 0;
        MTSARRAY_CUDA_CHECK(cudaGetDevice(&device));
        return device;
    }
    static void set_device(int device) { MTSARRAY_CUDA_CHECK(cudaSetDevice(device)); }
    static void restore_device(int device) noexcept {
        MTSARRAY_CUDA_CHECK_NOTHROW(cudaSetDevice(device));
    }
    /// Whether the primary context of `device` is active (the driver's
    /// cuDevicePrimaryCtxGetState, reached through the runtime); true when
    /// that can not be asked.
    static bool device_active(int device) noexcept {
        using GetState = int (*)(int, unsigned int*, int*);
        static const GetState get_state = []() -> GetState {
            void* function = nullptr;
            cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
            const cudaError_t status = cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &function,
                                                                        12000, cudaEnableDefault, &found);
#else
            const cudaError_t status =
                cudaGetDriverEntryPoint("cuDevicePrimaryCtxGetState", &function, cudaEnableDefault, &found);
#endif
            if (status != cudaSuccess || found != cudaDriverEntryPointSuccess) {
                (void)cudaGetLastError();
                return nullptr;
            }
            return reinterpret_cast<GetState>(function);
        }();
        if (get_state == nullptr) {
            return true;
        }
        unsigned int flags = 0;
        int active = 1;
        if (get_state(device, &flags, &active) != 0) {
            return true;
        }
        return active != 0;
    }

    /// DLPack stream numbers for CUDA: 1 is the legacy default stream, 2 the
    /// per-thread default stream, anything above a cudaStream_t.
    static StreamHandle native_stream(const Stream& stream) {
        if (stream.number() == stream_numbers::cuda_legacy) {
            return cudaStreamLegacy;
        }
        if (stream.number() == stream_numbers::cuda_per_thread) {
            return cudaStreamPerThread;
        }
        MTSARRAY_EXPECTS(stream.is_handle(), "stream number " + std::to_string(stream.number()) +
                                                 " does not name a CUDA stream");
        return static_cast<cudaStream_t>(stream.handle());
    }

    /// The device a stream handle (a cudaStream_t, never the legacy or
    /// per-thread handles) belongs to, or -1 where the runtime can not say.
    /// Runtime API cudaStreamGetDevice (CUDA 12.8): "Returns in *device the
    /// device of the stream". Older runtimes have only the driver's
    /// cuStreamGetCtx; there mtsarray leaves the check to the first call
    /// that fails on the stream (an event record does).
    static int stream_device(StreamHandle stream) {
#if CUDART_VERSION >= 12080
        int device = -1;
        MTSARRAY_CUDA_CHECK(cudaStreamGetDevice(stream, &device));
        return device;
#else
        (void)stream;
        return -1;
#endif
    }

    /// A non-blocking stream of the current device, for mtsarray's own
    /// work (never destroyed: it serves the device for the process).
    static StreamHandle create_stream() {
        StreamHandle stream = nullptr;
        MTSARRAY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        return stream;
    }

    /// Loads `kernel` on the current device (kernel_loading.hpp): asking
    /// for its attributes loads it under lazy loading.
    static void load_kernel(const void* kernel) {
        cudaFuncAttributes attributes;
        MTSARRAY_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
    }

    using CaptureMode = cudaStreamCaptureMode;
    static constexpr CaptureMode relaxed_capture_mode = cudaStreamCaptureModeRelaxed;
    /// Sets the calling thread's interaction mode with graph captures,
    /// returns the previous one.
    static CaptureMode exchange_capture_mode(CaptureMode mode) noexcept {
        MTSARRAY_CUDA_CHECK_NOTHROW(cudaThreadExchangeStreamCaptureMode(&mode));
        return mode;
    }

    struct CaptureState {
        bool active;
        unsigned long long id;
    };

    /// Whether `stream` is capturing a graph (an invalidated capture counts:
    /// any work queued there fails anyway).
    static CaptureState capture_state(StreamHandle stream) {
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        unsigned long long id = 0;
        const cudaError_t error = cudaStreamGetCaptureInfo(stream, &status, &id);
        if (error == cudaErrorStreamCaptureImplicit) {
            (void)cudaGetLastError();
            throw Error("the legacy default stream can not be used while another stream is capturing a CUDA "
                        "graph (cudaErrorStreamCaptureImplicit): give the arrays a non-blocking stream, or "
                        "capture in cudaStreamCaptureModeRelaxed");
        }
        MTSARRAY_CUDA_CHECK(error);
        return CaptureState{status != cudaStreamCaptureStatusNone, id};
    }

    // ---- memory -----------------------------------------------------------

    /// A stream-ordered pool of `device` (its release threshold is set by
    /// set_release_threshold).
    // ---- peer access (src/gpu/peer_access.hpp) ----------------------------
    /// Whether `device` can reach memory of `peer` directly.
    static bool can_access_peer(int device, int peer) {
        int can = 0;
        MTSARRAY_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
        return can != 0;
    }
    /// Lets the current device reach `peer`'s allocations that are not from
    /// a pool; already enabled is not an error.
    static void enable_peer_access(int peer) {
        const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
        if (status == cudaErrorPeerAccessAlreadyEnabled) {
            (void)cudaGetLastError();  // not sticky: forget it
            return;
        }
        MTSARRAY_CUDA_CHECK(status);
    }
    /// Lets work on `device` read and write the memory of `pool`.
    static void grant_pool_access(PoolHandle pool, int device) {
        cudaMemAccessDesc access = {};
        access.location.type = cudaMemLocationTypeDevice;
        access.location.id = device;
        access.flags = cudaMemAccessFlagsProtReadWrite;
        MTSARRAY_CUDA_CHECK(cudaMemPoolSetAccess(pool, &access, 1));
    }

    static PoolHandle create_pool(int device) {
        cudaMemPoolProps properties = {};
        properties.allocType = cudaMemAllocationTypePinned;
        properties.handleTypes = cudaMemHandleTypeNone;
        properties.location.type = cudaMemLocationTypeDevice;
        properties.location.id = device;
        PoolHandle pool = nullptr;
        MTSARRAY_CUDA_CHECK(cudaMemPoolCreate(&pool, &properties));
        // No dependency the program did not ask for: memory freed on one
        // stream is reused by another only once the free has completed, or
        // where an event orders them, never by making the allocating stream
        // wait for the freeing one (which could tie mtsarray's upload stream
        // to a user's stream that the host then waits for).
        int no = 0;
        MTSARRAY_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no));
        return pool;
    }
    /// The memory the pool keeps cached across synchronisations: beyond it,
    /// cached memory goes back at the next stream, event or device
    /// synchronisation (cudaMemPoolAttrReleaseThreshold).
    static void set_release_threshold(PoolHandle pool, uint64_t bytes) {
        MTSARRAY_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &bytes));
    }
    static void trim_pool(PoolHandle pool) noexcept { MTSARRAY_CUDA_CHECK_NOTHROW(cudaMemPoolTrimTo(pool, 0)); }
    /// The size of the current device's memory.
    static size_t device_memory_bytes(int /*device: current*/) {
        size_t free = 0;
        size_t total = 0;
        MTSARRAY_CUDA_CHECK(cudaMemGetInfo(&free, &total));
        return total;
    }
    static void* allocate_from_pool(size_t bytes, PoolHandle pool, StreamHandle stream) {
        void* data = nullptr;
        gpu::check_allocation<CudaErrors>(cudaMallocFromPoolAsync(&data, bytes, pool, stream),
                                          "cudaMallocFromPoolAsync", bytes, __FILE__, __LINE__);
        return data;
    }
    static void free_async(void* data, StreamHandle stream) noexcept {
        MTSARRAY_CUDA_CHECK_NOTHROW(cudaFreeAsync(data, stream));
    }

    /// Page-locked host memory, usable with every device.
    static void* allocate_pinned(size_t bytes) {
        void* data = nullptr;
        gpu::check_allocation<CudaErrors>(cudaHostAlloc(&data, bytes, cudaHostAllocPortable),
                                          "cudaHostAlloc", bytes, __FILE__, __LINE__);
        return data;
    }
    static void free_pinned(void* data) noexcept { MTSARRAY_CUDA_CHECK_NOTHROW(cudaFreeHost(data)); }

    static void* allocate_managed(size_t bytes) {
        void* data = nullptr;
        gpu::check_allocation<CudaErrors>(cudaMallocManaged(&data, bytes, cudaMemAttachGlobal),
                                          "cudaMallocManaged", bytes, __FILE__, __LINE__);
        return data;
    }
    static void free_managed(void* data) noexcept { MTSARRAY_CUDA_CHECK_NOTHROW(cudaFree(data)); }

    /// Device memory outside any stream order (usable by every stream at
    /// once): for memory a captured graph owns. Potentially unsafe during a
    /// capture: call it in the Relaxed capture mode. The free waits for the
    /// device (deferred-work thread only).
    static void* allocate_device(size_t bytes) {
        void* data = nullptr;
        gpu::check_allocation<CudaErrors>(cudaMalloc(&data, bytes), "cudaMalloc", bytes, __FILE__, __LINE__);
        return data;
    }
    static void free_device(void* data) noexcept { MTSARRAY_CUDA_CHECK_NOTHROW(cudaFree(data)); }

    /// Graphs can own host objects (cudaUserObjectCreate, CUDA 11.3).
    static constexpr bool has_user_objects = true;
    /// Makes the graph `stream` is capturing own `object`: `release(object)`
    /// runs once the graph and all its launches are gone, from a thread of
    /// the driver's (it must make no CUDA call). When this throws,
    /// `release(object)` has run.
    static void retain_with_graph(StreamHandle stream, void (*release)(void*), void* object) {
        cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
        cudaGraph_t graph = nullptr;
        cudaUserObject_t user_object = nullptr;
        cudaError_t error = cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph);
        if (error == cudaSuccess && status == cudaStreamCaptureStatusInvalidated) {
            error = cudaErrorStreamCaptureInvalidated;  // an earlier call broke the capture
        } else if (error == cudaSuccess && (status != cudaStreamCaptureStatusActive || graph == nullptr)) {
            error = cudaErrorIllegalState;  // the capture ended meanwhile
        }
        if (error == cudaSuccess) {
            error = cudaUserObjectCreate(&user_object, object, release, 1, cudaUserObjectNoDestructorSync);
        }
        if (error != cudaSuccess) {
            release(object);  // never owned by a graph
            MTSARRAY_CUDA_CHECK(error);
        }
        // the graph takes over the one reference
        const cudaError_t retained = cudaGraphRetainUserObject(graph, user_object, 1, cudaGraphUserObjectMove);
        if (retained != cudaSuccess) {
            (void)cudaGetLastError();
            // dropping the last reference runs `release`: the object is
            // freed, and the error reported
            (void)cudaUserObjectRelease(user_object, 1);
            MTSARRAY_CUDA_CHECK(retained);
        }
    }

    /// Queues `function(data)` on `stream`, run on a thread of the driver
    /// once the work before it is done (cudaLaunchHostFunc); on a capturing
    /// stream, a host node of the graph, run at every replay. The function
    /// must make no CUDA call.
    static void launch_host_function(StreamHandle stream, void (*function)(void*), void* data) {
        MTSARRAY_CUDA_CHECK(cudaLaunchHostFunc(stream, function, data));
    }

    // ---- copies -----------------------------------------------------------

    static void copy_device_to_device_async(void* destination, const void* source, size_t bytes,
                                            StreamHandle stream) {
        MTSARRAY_CUDA_CHECK(
            cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToDevice, stream));
    }
    static void copy_host_to_device_async(void* destination, const void* source, size_t bytes,
                                          StreamHandle stream) {
        MTSARRAY_CUDA_CHECK(
            cudaMemcpyAsync(destination, source, bytes, cudaMemcpyHostToDevice, stream));
    }
    static void copy_device_to_host_async(void* destination, const void* source, size_t bytes,
                                          StreamHandle stream) {
        MTSARRAY_CUDA_CHECK(
            cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToHost, stream));
    }
    static void copy_peer_async(void* destination, int destination_device, const void* source,
                                int source_device, size_t bytes, StreamHandle stream) {
        MTSARRAY_CUDA_CHECK(cudaMemcpyPeerAsync(destination, destination_device, source,
                                                source_device, bytes, stream));
    }
    static void memset_async(void* data, unsigned char value, size_t bytes, StreamHandle stream) {
        MTSARRAY_CUDA_CHECK(cudaMemsetAsync(data, value, bytes, stream));
    }

    // ---- events and synchronisation ---------------------------------------

    static EventHandle create_event() {
        EventHandle event = nullptr;
        MTSARRAY_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
        return event;
    }
    static void destroy_event(EventHandle event) noexcept {
        MTSARRAY_CUDA_CHECK_NOTHROW(cudaEventDestroy(event));
    }
    static void record_event(EventHandle event, StreamHandle stream) {
        MTSARRAY_CUDA_CHECK(cudaEventRecord(event, stream));
    }
    /// Whether the work before the event's last record is done (true for an
    /// event never recorded); never blocks.
    static bool event_done(EventHandle event) {
        const cudaError_t status = cudaEventQuery(event);
        if (status == cudaErrorNotReady) {
            return false;
        }
        MTSARRAY_CUDA_CHECK(status);
        return true;
    }
    static void synchronize_event(EventHandle event) { MTSARRAY_CUDA_CHECK(cudaEventSynchronize(event)); }
    static void stream_wait_event(StreamHandle stream, EventHandle event) {
        MTSARRAY_CUDA_CHECK(cudaStreamWaitEvent(stream, event, 0));
    }
    static void synchronize_stream(StreamHandle stream) {
        MTSARRAY_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    static void synchronize_device() { MTSARRAY_CUDA_CHECK(cudaDeviceSynchronize()); }

private:
    /// cudaErrorInsufficientDriver means either no driver at all or one
    /// older than this runtime: say which.
    static std::string insufficient_driver(cudaError_t status) {
        int driver = 0;
        (void)cudaDriverGetVersion(&driver);
        if (driver == 0) {
            return "no CUDA driver found (" + error_text(status) + ")";
        }
        return "the CUDA driver supports CUDA " + version(driver) + " but mtsarray was built with " +
               "CUDA " + version(CUDART_VERSION) + " (" + error_text(status) + ")";
    }
    static std::string version(int number) {
        return std::to_string(number / 1000) + "." + std::to_string(number % 1000 / 10);
    }
};

}  // namespace cuda
}  // namespace mtsarray::detail
