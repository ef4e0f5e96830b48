#pragma once
// SimulatedRuntime: runtime traits for GpuBackend (src/gpu/gpu_backend.hpp)
// beside CudaRuntime and HipRuntime, that simulate a CUDA runtime with up to four
// devices on the CPU. GpuBackend<SimulatedRuntime> is the very backend CUDA
// and HIP run, compiled by the host compiler: its kernels' per-thread bodies
// (MTSARRAY_HOST_DEVICE) run on the host for every thread of the grid
// (run_grid, see src/gpu/launch_config.hpp). Test-only; installed as the
// backend of kDLCUDA, kDLCUDAHost and kDLCUDAManaged when no real GPU is
// present (simulated_gpu_in_use()); the tests name its devices sim0, sim1, ...
//
// The simulation behaves like CUDA where mtsarray's correctness depends on
// it. Each rule is written beside the section of the CUDA (or ROCm)
// documentation it follows, in the file of its concern
// (tests/support/simulation/):
//   streams.cpp  streams, default streams, events, synchronisation and host
//                waits, stream ownership;
//   capture.cpp  graph capture, capture modes, what may be captured;
//   memory.cpp   allocations, freed memory, pools, copies;
//   faults.cpp   the error vocabulary, each thread's last error, the
//                runtime's teardown at exit;
//   devices.cpp  devices and contexts, kernel loading, and the installation
//                of the simulation as the CUDA backend of test programs;
//   peers.cpp    which devices reach each other, peer access, pool access,
//                peer copies over the link or through the host;
//   hazards.cpp  reads, writes and frees of one allocation from several
//                streams, checked against their order of issue.
// state.hpp holds the state they share.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <metatensor.h>

#include "base/backend.hpp"
#include "base/error.hpp"
#include "base/stream.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/runtime_error.hpp"

namespace mtsarray_test {
namespace sim {

struct StreamState;
struct EventState;
struct PoolState;

/// The simulated runtime's error codes, named after CUDA's.
enum class Status {
    success,
    memory_allocation,
    not_ready,
    invalid_value,
    invalid_device,
    invalid_resource_handle,
    capture_unsupported,
    capture_invalidated,
    capture_implicit,
    capture_isolation,
    captured_event,
    host_wait_timeout,
    runtime_unloading,
    illegal_address,
    mps_client_terminated,
    external_device,
    peer_access_already_enabled,
};

enum class CaptureMode { global, thread_local_mode, relaxed };

/// The most devices the simulation can have; how many it has is
/// device_count().
constexpr int max_devices = 4;

// ---- what tests drive ----------------------------------------------------------

/// Whether the simulation serves the CUDA device types in this process (no
/// real GPU, or MTSARRAY_TEST_GPU=simulated).
bool in_use();
/// The simulated devices: MTSARRAY_SIM_DEVICES (1 to 4), default 2.
int device_count();
/// The seed of this process's random delays.
uint64_t seed();

/// A new stream of `device`: its DLPack number (> 2). Non-blocking unless
/// `blocking` (then it synchronises with the legacy stream).
int64_t create_stream(int device, bool blocking = false);
/// Waits until the stream is idle, then retires it.
void destroy_stream(int64_t number);

/// Keeps a stream busy until open() (or destruction).
class Gate {
public:
    Gate() = default;
    Gate(Gate&&) = default;
    Gate& operator=(Gate&&) = default;
    ~Gate() { open(); }
    void open();
    bool is_open() const;

    struct State;

private:
    friend Gate hold(int64_t, int);
    std::shared_ptr<State> state_;
};
/// Queues a "slow kernel" on `stream` (a DLPack number of `device`; 1 and 2
/// are the legacy stream and the calling thread's per-thread stream).
Gate hold(int64_t stream, int device);
/// From now on (`fail`), a host wait of the calling thread that would wait
/// for a held stream -- a gate still closed among the work it waits for, on
/// its stream or on the streams that one waits for -- fails at once with a
/// violation (Status::host_wait_timeout), instead of after the time-out: a
/// test of "this call never waits for that stream" then depends on no
/// clock. Returns the previous setting.
bool fail_host_waits_on_held_streams(bool fail);
/// Queues `work` on a stream as a kernel of the test's own.
void enqueue(int64_t stream, int device, std::function<void()> work);
/// Queues a consumer's read of `bytes` bytes of device memory at `source`
/// into host memory: checked, like every queued copy, when it runs.
void enqueue_read(int64_t stream, int device, void* destination, const void* source, size_t bytes);

/// Runs `work` on a new thread whose std::thread::id is `id` (an exited
/// thread's: ids are reused, streams.cpp), trying up to 1000 threads;
/// returns whether one had that id (then `work` ran on it).
bool run_on_a_thread_with_id(std::thread::id id, const std::function<void()>& work);

/// Host waits made by the calling thread so far.
size_t host_waits();
/// Uses of freed memory, host waits that timed out, ..., in words.
std::vector<std::string> violations();
void clear_violations();
/// Why captures were invalidated, in words.
std::vector<std::string> capture_invalidations();
/// Waits until every stream is idle and mtsarray's deferred-work thread has
/// nothing it could run (the releases it was asked for ran, but those
/// waiting for a capture to end); not a host wait.
void drain();
/// Bytes of device memory allocated and not freed.
size_t allocated_bytes();
/// Page-locked allocations and frees so far.
size_t pinned_allocations();
size_t pinned_frees();

/// The size of `device`'s memory (80 GiB until set); returns the previous
/// one. Pools, cudaMalloc and foreign allocators share it (memory.cpp).
size_t set_device_memory(int device, size_t bytes);
/// Device memory of `device` held now: by pools (in use and cached), by
/// cudaMalloc and by foreign allocators.
size_t device_memory_used(int device);

/// Another library's caching allocator of one device, as PyTorch's is in a
/// training loop: it takes device memory from the device's size, keeps
/// what is freed to it for reuse, and gives its cache back only when an
/// allocation does not fit (then tries once more) or when asked
/// (empty_cache, PyTorch's torch.cuda.empty_cache). Thread-safe.
class ForeignCachingAllocator {
public:
    explicit ForeignCachingAllocator(int device);
    /// Gives everything back (what is still in use too).
    ~ForeignCachingAllocator();
    ForeignCachingAllocator(const ForeignCachingAllocator&) = delete;
    ForeignCachingAllocator& operator=(const ForeignCachingAllocator&) = delete;

    /// `bytes` of device memory, or nullptr when the device has no room
    /// even after the cache was given back.
    void* allocate(size_t bytes);
    /// Keeps the block of `data` for reuse.
    void free(void* data);
    /// Gives the cached blocks back to the device.
    void empty_cache();
    /// Device memory held: in use and cached.
    size_t reserved() const;
    int device() const { return device_; }

private:
    struct State;
    int device_;
    std::unique_ptr<State> state_;
};

/// Host -> device copies queued so far (cudaMemcpyAsync from host memory),
/// and device allocations made (stream-ordered or not), in the process.
size_t host_to_device_copies();
size_t device_allocations();

/// Which devices can reach each other's memory (peers.cpp): "all" (the
/// default, as on an NVLink node), "none", or pairs "0-1,2-3" (each pair
/// both ways), as MTSARRAY_SIM_PEERS says; set_peer_topology changes it
/// for the calls that follow (access granted so far stays) and returns
/// the previous one.
std::string set_peer_topology(const std::string& topology);
/// Peer copies so far by path: over the link (the stream's device had
/// access to the other side's memory) or staged through the host.
struct PeerCopies {
    size_t direct;
    size_t staged;
};
PeerCopies peer_copies();
/// Whether `pool`-less memory of `peer` is reachable from `device`
/// (cudaDeviceEnablePeerAccess made there), and whether mtsarray's pools
/// granted access: the devices that may touch memory of `device`'s pools.
bool peer_access_enabled(int device, int peer);
std::vector<int> pool_accessors(int device);
/// cudaDeviceEnablePeerAccess(peer) from `device`, as another library (the
/// owner of memory mtsarray wraps) would make it.
Status enable_peer_access(int device, int peer);

void begin_capture(int64_t stream, int device, CaptureMode mode = CaptureMode::global);

/// What a captured node does, for the tests that count them.
enum class NodeKind { kernel, copy, memset, free, host, other };
struct GraphNode {
    NodeKind kind;
    std::function<void()> work;  // empty for event nodes
};
struct RetainedObjects;
/// A captured graph: its nodes in order, and the user objects it retains
/// (cudaGraphRetainUserObject), released when the last copy of the graph
/// is destroyed -- after its launches have run, as CUDA does: launch()
/// keeps the graph's objects alive until its nodes are done.
struct Graph {
    std::vector<GraphNode> nodes;
    std::shared_ptr<RetainedObjects> retained;

    bool empty() const { return nodes.empty(); }
    size_t size() const { return nodes.size(); }
    size_t count(NodeKind kind) const {
        size_t n = 0;
        for (const auto& node : nodes) {
            n += node.kind == kind ? 1 : 0;
        }
        return n;
    }
};
/// Throws mtsarray::detail::Error when the capture was invalidated.
Graph end_capture(int64_t stream, int device);
void launch(const Graph& graph, int64_t stream, int device);
/// User objects retained by live graphs (and captures under way).
size_t retained_objects();

/// The calling thread's interaction mode with captures; returns the old one.
CaptureMode exchange_capture_mode(CaptureMode mode);

/// Devices that got a context since the last forget_contexts().
std::vector<int> contexts();
void forget_contexts();
/// The calling thread's current device.
int current_device();
void set_device(int device);

/// Forgets which kernels were loaded on every device (load_kernel), as in a
/// new process.
void forget_loaded_kernels();
/// Kernels launched before they were loaded on their device, so far.
size_t lazy_kernel_loads();
/// Unloads the runtime, as its exit handler does (every runtime call from
/// now on fails with cudaErrorCudartUnloading); reload_runtime() undoes it,
/// as in a new process (tests only).
void unload_runtime();
void reload_runtime();
/// Runtime calls refused since the process started because the runtime was
/// unloaded.
size_t calls_after_unload();

/// A sticky fault of `device` (an illegal address in some kernel, by
/// default; any other status stands for an error that is not a fault, which
/// every call meets all the same): from now on every runtime call there fails with it, the work
/// queued there is dropped, and host waits for it return it (faults.cpp).
/// clear_fault() forgets it, as a new process would (mtsarray's record of
/// it included).
void inject_fault(int device, Status status = Status::illegal_address);
void clear_fault();

/// Makes the calling thread's (calls + 1)-th runtime call from now fail
/// once with `status`, a failure that is not sticky (faults.cpp): a test
/// fails each step of an operation in turn. calls < 0 disarms.
void fail_call_after(int64_t calls, Status status = Status::invalid_value);
/// Whether the failure armed by fail_call_after has not happened yet.
bool call_failure_pending();

/// Whose error rules the simulation follows where CUDA and ROCm differ
/// (faults.cpp): MTSARRAY_SIM_FLAVOUR=hip, or set_flavour; returns the
/// previous one.
enum class Flavour { cuda, hip };
Flavour set_flavour(Flavour flavour);
Flavour flavour();
/// Sets how long a host wait meets a held stream before it fails with a
/// violation (MTSARRAY_SIM_HOST_WAIT_MS); returns the previous value.
std::chrono::milliseconds set_host_wait_timeout(std::chrono::milliseconds timeout);

namespace detail {
/// Queues a kernel of `blocks` blocks: `run_block(b)` runs block b, the
/// blocks in a random order drawn from the process's seed.
void enqueue_kernel(StreamState* stream, mtsarray::detail::gpu::KernelKey kernel, unsigned blocks,
                    std::vector<const void*> read, std::vector<const void*> written,
                    std::function<void(unsigned)> run_block);
}  // namespace detail

}  // namespace sim

/// The error vocabulary of src/gpu/runtime_error.hpp.
struct SimulatedErrors {
    using Status = sim::Status;
    static constexpr const char* display_name = "CUDA (simulated)";
    static constexpr Status success = Status::success;
    static constexpr Status out_of_memory = Status::memory_allocation;
    static const char* name(Status status) noexcept;
    static const char* description(Status status) noexcept;
    static Status last_error() noexcept;
    static bool is_silent(Status status) noexcept { return status == Status::runtime_unloading; }
    /// The process-fatal errors, as CUDA's (faults.cpp).
    static bool is_sticky(Status status) noexcept {
        return status == Status::illegal_address || status == Status::mps_client_terminated ||
               status == Status::external_device;
    }
};

/// The traits of src/gpu/gpu_backend.hpp (see there for what each does).
struct SimulatedRuntime {
    using StreamHandle = sim::StreamState*;
    using EventHandle = sim::EventState*;
    using PoolHandle = sim::PoolState*;
    using CaptureMode = sim::CaptureMode;

    static constexpr const char* name = "cuda";
    static constexpr const char* display_name = "simulated CUDA";
    static constexpr const char* graph_name = "CUDA graph";
    static constexpr DLDeviceType device_type = kDLCUDA;
    static constexpr DLDeviceType pinned_host_type = kDLCUDAHost;
    static constexpr bool has_managed_memory = true;
    static constexpr DLDeviceType managed_type = kDLCUDAManaged;
    static constexpr bool kernels_run_on_host = true;

    struct DeviceCount {
        int count;
        std::string failure;
    };
    static DeviceCount probe_devices() noexcept { return DeviceCount{sim::device_count(), ""}; }

    using Errors = SimulatedErrors;

    static int current_device();
    static void set_device(int device);
    static void restore_device(int device) noexcept;
    static bool device_active(int device) noexcept;
    static StreamHandle native_stream(const mtsarray::detail::Stream& stream);
    static int stream_device(StreamHandle stream);

    struct CaptureState {
        bool active;
        unsigned long long id;
    };
    static CaptureState capture_state(StreamHandle stream);
    static CaptureMode exchange_capture_mode(CaptureMode mode) noexcept;
    static constexpr CaptureMode relaxed_capture_mode = CaptureMode::relaxed;

    static bool can_access_peer(int device, int peer);
    static void enable_peer_access(int peer);
    static void grant_pool_access(PoolHandle pool, int device);

    static PoolHandle create_pool(int device);
    static void set_release_threshold(PoolHandle pool, uint64_t bytes);
    static void trim_pool(PoolHandle) noexcept;
    static size_t device_memory_bytes(int device);
    static void* allocate_from_pool(size_t bytes, PoolHandle pool, StreamHandle stream);
    static void free_async(void* data, StreamHandle stream) noexcept;
    static void* allocate_pinned(size_t bytes);
    static void free_pinned(void* data) noexcept;
    static void* allocate_managed(size_t bytes);
    static void free_managed(void* data) noexcept;
    static void* allocate_device(size_t bytes);
    static void free_device(void* data) noexcept;

    static constexpr bool has_user_objects = true;
    static void retain_with_graph(StreamHandle stream, void (*release)(void*), void* object);
    static void launch_host_function(StreamHandle stream, void (*function)(void*), void* data);

    static void copy_device_to_device_async(void* destination, const void* source, size_t bytes,
                                            StreamHandle stream);
    static void copy_host_to_device_async(void* destination, const void* source, size_t bytes,
                                          StreamHandle stream);
    static void copy_device_to_host_async(void* destination, const void* source, size_t bytes,
                                          StreamHandle stream);
    static void copy_peer_async(void* destination, int destination_device, const void* source,
                                int source_device, size_t bytes, StreamHandle stream);
    static void memset_async(void* data, unsigned char value, size_t bytes, StreamHandle stream);

    static EventHandle create_event();
    static void destroy_event(EventHandle event) noexcept;
    static void record_event(EventHandle event, StreamHandle stream);
    static bool event_done(EventHandle event);
    static void synchronize_event(EventHandle event);
    static void stream_wait_event(StreamHandle stream, EventHandle event);
    static void synchronize_stream(StreamHandle stream);
    static void synchronize_device();

    /// Queues `body(GridThread)` for every thread of `shape`, block by block
    /// in a random order, on `stream`; the memory it reads and writes is
    /// checked to be allocated, and ordered after the accesses issued
    /// before (hazards.cpp), when it runs.
    template <class Body>
    static void run_grid(StreamHandle stream, mtsarray::detail::gpu::KernelKey kernel,
                         const mtsarray::detail::gpu::GridShape& shape, Body body,
                         std::initializer_list<const void*> read, std::initializer_list<const void*> written) {
        sim::detail::enqueue_kernel(stream, kernel, shape.blocks, std::vector<const void*>(read),
                                    std::vector<const void*>(written),
                                    [shape, body](unsigned block) {
                                        for (unsigned y = 0; y < shape.block_y; y++) {
                                            for (unsigned x = 0; x < shape.block_x; x++) {
                                                body(mtsarray::detail::gpu::GridThread{block, x, y, shape});
                                            }
                                        }
                                    });
    }
    static void load_kernel(mtsarray::detail::gpu::KernelKey kernel);
    static StreamHandle create_stream();
};

/// The process's GpuBackend<SimulatedRuntime>.
const mtsarray::detail::Backend& simulated_backend();

/// Whether tests of this process run on the simulated devices; device names
/// in test names say "sim" then.
inline bool simulated_gpu_in_use() { return sim::in_use(); }

}  // namespace mtsarray_test
