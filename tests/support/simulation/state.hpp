#pragma once
// The simulated runtime's own state, shared by the files that implement its
// rules (tests/support/simulation/*.cpp): streams and their queues, events,
// captures, allocations, pools, and the process-wide simulator. Internal to
// the simulation; tests use simulated_runtime.hpp.

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/simulated_runtime.hpp"

namespace mtsarray_test {
namespace sim {

constexpr unsigned char poison = 0xDD;
constexpr size_t quarantine_limit = size_t(256) << 20;
constexpr size_t alignment = 256;
/// The simulated devices unless MTSARRAY_SIM_DEVICES says otherwise.
constexpr int default_devices = 2;

uint64_t environment_number(const char* name, uint64_t fallback);

extern std::atomic<size_t> live_user_objects;
extern std::atomic<size_t> uploads;
extern std::atomic<size_t> device_allocation_count;

enum class Kind { legacy, per_thread, user };

/// One access of queued work to simulated memory, checked against the
/// accesses issued before it (hazards.cpp).
enum class AccessKind { read, write, free };
struct Access {
    const void* data;
    AccessKind kind;
    const char* what;
    uint64_t issue = 0;  // its place in the order of issue (0: not tracked)
};

struct Item {
    std::function<void()> work;
    std::vector<std::pair<StreamState*, uint64_t>> waits;  // (stream, items it must have completed)
    NodeKind kind = NodeKind::other;
    std::vector<Access> accesses = {};  // what `work` reads, writes or frees (hazards.cpp)
};

struct Capture;

/// The user objects of one graph: released (their callbacks run, from the
/// thread that drops the last reference, as CUDA runs them from a thread
/// of its own) with the graph.
struct RetainedObjects {
    std::mutex mutex;
    std::vector<std::pair<void (*)(void*), void*>> objects;
    ~RetainedObjects() {
        for (const auto& object : objects) {
            object.first(object.second);
            live_user_objects--;
        }
    }
};

struct StreamState {
    StreamState(int device_, Kind kind_, bool blocking_, uint64_t seed)
        : device(device_), kind(kind_), blocking(blocking_), random(seed) {}

    const int device;
    const Kind kind;
    const bool blocking;

    std::mutex mutex;  // guards what follows
    std::condition_variable changed;
    std::deque<Item> items;
    // the gates (hold) queued here: (their item's place, whether still closed)
    std::vector<std::pair<uint64_t, std::function<bool()>>> gates;
    uint64_t pushed = 0;
    uint64_t completed = 0;
    bool stopping = false;
    std::mt19937_64 random;
    std::thread worker;

    // guarded by the simulator's mutex
    Capture* capture = nullptr;
    bool retired = false;

    std::string describe() const {
        std::ostringstream text;
        text << (kind == Kind::legacy ? "legacy stream" : kind == Kind::per_thread ? "per-thread stream" : "stream")
             << " " << static_cast<const void*>(this) << " of device " << device;
        return text.str();
    }
};

struct EventState {
    explicit EventState(int device_) : device(device_) {}
    const int device;
    // guarded by the simulator's mutex
    StreamState* stream = nullptr;
    uint64_t sequence = 0;
    // the capture the event was last recorded in (it outlives the capture:
    // the event can not be queried until it is recorded again outside)
    std::shared_ptr<Capture> capture;
};

struct PoolState {
    explicit PoolState(int device_) : device(device_) {}
    const int device;
    // guarded by the simulator's mutex
    size_t reserved = 0;            // device memory the pool holds: in use and cached
    std::multiset<size_t> cached;   // the blocks freed into it, kept for reuse
    uint64_t release_threshold = 0;  // cudaMemPoolAttrReleaseThreshold (CUDA's default)
    std::set<int> accessors;  // other devices granted access by cudaMemPoolSetAccess (peers.cpp)
};

struct Capture {
    unsigned long long id;
    CaptureMode mode;
    std::thread::id thread;
    StreamState* origin;
    std::vector<StreamState*> streams;
    std::vector<GraphNode> nodes;
    bool invalidated = false;
    bool ended = false;  // end_capture ran; events recorded in it still name it
    std::shared_ptr<RetainedObjects> retained = std::make_shared<RetainedObjects>();
};

enum class MemoryKind { device, pinned, managed };

struct Allocation {
    size_t bytes;
    int device;
    MemoryKind kind;
    // device memory: the pool it came from (null for cudaMalloc and foreign
    // allocators) and the block of the pool it holds
    PoolState* pool = nullptr;
    size_t block = 0;
    // device memory a foreign allocator holds: counted there, not here
    bool foreign = false;
};

struct Simulator;
/// Sets the simulator's peer topology from MTSARRAY_SIM_PEERS (peers.cpp).
void read_peer_topology(Simulator& state);

struct Simulator {
    std::mutex mutex;  // guards everything below and the fields of streams and events it names
    StreamState* legacy[max_devices] = {};
    std::vector<StreamState*> blocking[max_devices];
    std::set<StreamState*> streams;
    std::vector<StreamState*> retired;  // destroyed streams, which events may still name
    std::map<uintptr_t, Allocation> live;
    std::map<uintptr_t, Allocation> quarantine;
    std::deque<uintptr_t> quarantine_order;
    size_t quarantined_bytes = 0;
    std::vector<std::string> violations;
    std::vector<std::string> invalidations;
    std::vector<std::shared_ptr<Capture>> captures;  // the captures under way
    unsigned long long next_capture = 1;
    uint64_t next_stream = 0;
    std::vector<PoolState*> pools;
    struct StagedCopy {
        StreamState* stream;
        uint64_t sequence;  // done when the stream has completed this many items
        size_t bytes;
    };
    std::deque<StagedCopy> staged_copies;  // pageable copies holding the driver's staging space
    size_t staged_bytes = 0;
    size_t device_memory[max_devices] = {};  // the size of each device
    size_t device_used[max_devices] = {};    // held by pools, cudaMalloc and foreign allocators
    size_t pinned_allocations = 0;
    size_t pinned_frees = 0;
    std::set<const void*> loaded_kernels[max_devices];
    size_t lazy_kernel_loads = 0;
    // peer access (peers.cpp): which device can reach which
    // (cudaDeviceCanAccessPeer), which device enabled access to which
    // (cudaDeviceEnablePeerAccess), and the peer copies by path
    bool peer_capable[max_devices][max_devices] = {};
    bool peer_enabled[max_devices][max_devices] = {};
    size_t direct_peer_copies = 0;
    size_t staged_peer_copies = 0;
    // hazards (hazards.cpp): accesses issued and not yet done, per allocation
    uint64_t next_issue = 1;
    std::map<uintptr_t, std::vector<std::pair<Access, StreamState*>>> pending_accesses;

    const int devices;
    const uint64_t seed;
    const uint64_t max_delay_us;
    std::atomic<int64_t> host_wait_timeout_ms;
    std::atomic<bool> context[max_devices] = {};
    std::atomic<uint64_t> activity{0};
    std::atomic<bool> unloaded{false};  // the runtime's exit handler ran (unload_runtime)
    std::atomic<size_t> calls_after_unload{0};
    std::atomic<int> fault[max_devices] = {};  // a sticky fault's Status, 0 for none (faults.cpp)
    std::mt19937_64 block_order;  // the order kernels run their blocks in

    Simulator()
        : devices(static_cast<int>(std::clamp<uint64_t>(environment_number("MTSARRAY_SIM_DEVICES", default_devices), 1,
                                                          max_devices))),
          seed(environment_number("MTSARRAY_SIM_SEED", std::random_device{}())),
          max_delay_us(environment_number("MTSARRAY_SIM_MAX_DELAY_US", 100)),
          host_wait_timeout_ms(static_cast<int64_t>(environment_number("MTSARRAY_SIM_HOST_WAIT_MS", 5000))),
          block_order(seed ^ 0xB10C0DE5ULL) {
        for (int device = 0; device < devices; device++) {
            legacy[device] = make_stream(device, Kind::legacy, false);
            device_memory[device] = size_t(80) << 30;  // an H100's, until a test sets another
        }
        read_peer_topology(*this);
    }

    // with mutex held (or during construction)
    StreamState* make_stream(int device, Kind kind, bool is_blocking) {
        auto* stream = new StreamState(device, kind, is_blocking, seed * 0x9E3779B97F4A7C15ULL + next_stream++);
        streams.insert(stream);
        if (is_blocking) {
            blocking[device].push_back(stream);
        }
        return stream;
    }
};

Simulator& simulator();

extern thread_local int current;
extern thread_local StreamState* per_thread[max_devices];
extern thread_local CaptureMode interaction_mode;
extern thread_local size_t thread_host_waits;
extern thread_local bool held_waits_fail_at_once;
extern thread_local Status last;

extern const char* const legacy_handle;
extern const char* const per_thread_handle;

// ---- errors and teardown (faults.cpp) ----
[[noreturn]] void fail(Status status, const char* call);
void check(Status status, const char* call);
void report(Status status, const char* call) noexcept;
/// Fails `call` once the runtime is unloaded, or with the sticky fault of
/// the current device.
void refuse_unusable_runtime(const char* call);
bool refused_unusable_runtime(const char* call) noexcept;
/// The sticky fault of `device`, or success.
Status fault_of(int device);
/// An event query answered not-ready: the HIP flavour keeps it as the
/// thread's last error.
void leave_not_ready();

// ---- streams and events (streams.cpp) ----
void touch_device(int device);
void worker_loop(StreamState* stream);
StreamState* resolve_locked(const void* handle);
Status push_locked(StreamState* stream, Item item);
NodeKind kind_of(const char* call);
/// `accesses`: the memory `work` reads, writes or frees (hazards.cpp).
Status push(const void* handle, std::function<void()> work, const char* call, bool current_device_only,
            bool pageable_host = false, std::vector<Access> accesses = {});
Status host_wait(StreamState* stream, uint64_t sequence, const char* call);
std::vector<std::pair<StreamState*, uint64_t>> snapshot_locked(int device);
Status synchronize_device_implicitly(const char* call);
StreamState* resolve_number(int64_t number, int device);
void wait_for_device_locked(std::unique_lock<std::mutex>& lock, int device, const char* call);
bool deferred_work_settled();

// ---- capture (capture.cpp) ----
bool blocking_stream_capturing(int device);
void invalidate(Capture* capture, const std::string& why);
std::shared_ptr<Capture> capture_of(const StreamState* stream);
Status captured_event_locked(EventState* event, const char* call);
Status pageable_copy_locked(StreamState* stream, const char* call);
Status unsafe_call_locked(const char* call);

// ---- memory (memory.cpp) ----
void* register_memory(size_t bytes, int device, MemoryKind kind, PoolState* pool = nullptr, size_t block = 0,
                      bool foreign = false);
/// Takes `bytes` of `device`'s memory: false when it does not have them.
bool take_device_memory_locked(int device, size_t bytes);
/// Gives the cached blocks of the pools above their release threshold
/// back to their device: at every stream, event or device synchronisation.
void release_above_thresholds_locked();
void trim_locked(PoolState* pool, size_t keep);
void release_locked(void* data, const char* call);
bool check_memory(const void* data, size_t bytes, const char* what, int device, bool any_device = false);
bool is_page_locked(const void* data);
/// Waits on the host until `bytes` of pageable data fit in the driver's
/// staging space, beside the copies to `handle`'s device pending.
Status wait_for_staging_space(const void* handle, size_t bytes);

// ---- peer access (peers.cpp) ----
/// Whether work on `device` may touch device memory `allocation` of
/// another device: its pool granted `device` access, or (memory not from a
/// pool) `device` enabled peer access to the allocation's device.
bool peer_reachable_locked(const Allocation& allocation, int device);
/// Whether a peer copy on a stream of `stream_device` between `destination`
/// and `source` goes over the link (true) or through the host (false).
bool direct_peer_copy_locked(const void* destination, const void* source, int stream_device);

// ---- hazards (hazards.cpp) ----
/// Numbers the accesses of an item being queued (not captured) and records
/// them as pending. With the simulator's mutex held.
void issue_accesses_locked(Item& item, StreamState* stream);
/// When the item's work starts: a violation for each access issued before
/// one of its own, to the same allocation, from another stream, not done
/// yet, where one of the two writes or frees.
void begin_accesses(const std::vector<Access>& accesses, StreamState* stream);
/// When the item's work is done (or dropped).
void end_accesses(const std::vector<Access>& accesses);

}  // namespace sim
}  // namespace mtsarray_test
