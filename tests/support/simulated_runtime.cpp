// The simulated CUDA runtime (see simulated_runtime.hpp for the rules it
// follows) and its installation as the CUDA backend of test programs.

#include "support/simulated_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "core/backend_registry.hpp"
#include "cpu/threads/pool_host_tasks.hpp"
#include "gpu/gpu_backend.hpp"

namespace mtsarray_test {

using mtsarray::detail::Error;

namespace sim {

namespace {

constexpr unsigned char poison = 0xDD;
/// The largest pageable host -> device copy the runtime stages at once,
/// without waiting for its stream.
constexpr size_t pageable_staging_bytes = size_t(1) << 20;
constexpr size_t quarantine_limit = size_t(256) << 20;
constexpr size_t alignment = 256;

uint64_t environment_number(const char* name, uint64_t fallback) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        return fallback;
    }
    return std::strtoull(value, nullptr, 10);
}

std::atomic<size_t> live_user_objects{0};
std::atomic<size_t> uploads{0};
std::atomic<size_t> device_allocation_count{0};

enum class Kind { legacy, per_thread, user };

struct Item {
    std::function<void()> work;
    std::vector<std::pair<StreamState*, uint64_t>> waits;  // (stream, items it must have completed)
    NodeKind kind = NodeKind::other;
};

struct Capture;

}  // namespace

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
    Capture* capture = nullptr;
};

struct PoolState {
    explicit PoolState(int device_) : device(device_) {}
    const int device;
};

namespace {

struct Capture {
    unsigned long long id;
    CaptureMode mode;
    std::thread::id thread;
    StreamState* origin;
    std::vector<StreamState*> streams;
    std::vector<GraphNode> nodes;
    bool invalidated = false;
    std::shared_ptr<RetainedObjects> retained = std::make_shared<RetainedObjects>();
};

enum class MemoryKind { device, pinned, managed };

struct Allocation {
    size_t bytes;
    int device;
    MemoryKind kind;
};

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
    std::vector<Capture*> captures;
    unsigned long long next_capture = 1;
    uint64_t next_stream = 0;
    size_t pinned_allocations = 0;
    size_t pinned_frees = 0;
    std::set<const void*> loaded_kernels[max_devices];
    size_t lazy_kernel_loads = 0;

    const int devices;
    const uint64_t seed;
    const uint64_t max_delay_us;
    std::atomic<int64_t> host_wait_timeout_ms;
    std::atomic<bool> context[max_devices] = {};
    std::atomic<uint64_t> activity{0};
    std::atomic<bool> unloaded{false};  // the runtime's exit handler ran (unload_runtime)
    std::atomic<size_t> calls_after_unload{0};
    std::mt19937_64 block_order;  // the order kernels run their blocks in

    Simulator()
        : devices(static_cast<int>(std::clamp<uint64_t>(environment_number("MTSARRAY_SIM_DEVICES", max_devices), 1,
                                                          max_devices))),
          seed(environment_number("MTSARRAY_SIM_SEED", std::random_device{}())),
          max_delay_us(environment_number("MTSARRAY_SIM_MAX_DELAY_US", 100)),
          host_wait_timeout_ms(static_cast<int64_t>(environment_number("MTSARRAY_SIM_HOST_WAIT_MS", 5000))),
          block_order(seed ^ 0xB10C0DE5ULL) {
        for (int device = 0; device < devices; device++) {
            legacy[device] = make_stream(device, Kind::legacy, false);
        }
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

Simulator& simulator() {
    // never destroyed: stream workers may still run at exit
    static Simulator* const instance = [] {
        auto* made = new Simulator();
        // the runtime's own exit handler, registered when it is first used,
        // as the CUDA runtime's is: it runs after the exit handlers of the
        // code that used the runtime first (handlers run in reverse order)
        std::atexit(unload_runtime);
        return made;
    }();
    return *instance;
}

thread_local int current = 0;
thread_local StreamState* per_thread[max_devices] = {};
thread_local CaptureMode interaction_mode = CaptureMode::global;
thread_local size_t thread_host_waits = 0;
thread_local Status last = Status::success;

const char* const legacy_handle = reinterpret_cast<const char*>(uintptr_t(1));
const char* const per_thread_handle = reinterpret_cast<const char*>(uintptr_t(2));

[[noreturn]] void fail(Status status, const char* call) {
    mtsarray::detail::gpu::throw_error<SimulatedErrors>(status, call, "simulated_runtime.cpp", 0);
}

void check(Status status, const char* call) {
    if (status != Status::success) {
        fail(status, call);
    }
}

void report(Status status, const char* call) noexcept {
    mtsarray::detail::gpu::check_nothrow<SimulatedErrors>(status, call, "simulated_runtime.cpp", 0);
}

void refuse_after_unload(const char* call) {
    if (simulator().unloaded.load(std::memory_order_acquire)) {
        simulator().calls_after_unload.fetch_add(1);
        fail(Status::runtime_unloading, call);
    }
}

bool refused_after_unload(const char* call) noexcept {
    if (!simulator().unloaded.load(std::memory_order_acquire)) {
        return false;
    }
    simulator().calls_after_unload.fetch_add(1);
    report(Status::runtime_unloading, call);
    return true;
}

void touch_device(int device) {
    simulator().context[device].store(true);
}

// ---- streams ---------------------------------------------------------------------

void worker_loop(StreamState* stream) {
    const uint64_t max_delay = simulator().max_delay_us;
    std::unique_lock<std::mutex> lock(stream->mutex);
    while (true) {
        stream->changed.wait(lock, [&] { return stream->stopping || !stream->items.empty(); });
        if (stream->items.empty()) {
            return;
        }
        Item item = std::move(stream->items.front());
        stream->items.pop_front();
        const uint64_t draw = stream->random();
        lock.unlock();
        for (const auto& wait : item.waits) {
            std::unique_lock<std::mutex> other(wait.first->mutex);
            wait.first->changed.wait(other, [&] { return wait.first->completed >= wait.second; });
        }
        if (max_delay != 0 && (draw & 1) != 0) {
            std::this_thread::sleep_for(std::chrono::microseconds((draw >> 1) % (max_delay + 1)));
        }
        if (item.work) {
            item.work();
        }
        lock.lock();
        stream->completed++;
        stream->changed.notify_all();
    }
}

// with the simulator's mutex held
StreamState* resolve_locked(const void* handle) {
    Simulator& state = simulator();
    if (handle == nullptr || handle == legacy_handle) {
        touch_device(current);
        return state.legacy[current];
    }
    if (handle == per_thread_handle) {
        touch_device(current);
        if (per_thread[current] == nullptr) {
            per_thread[current] = state.make_stream(current, Kind::per_thread, true);
        }
        return per_thread[current];
    }
    auto* stream = static_cast<StreamState*>(const_cast<void*>(handle));
    if (state.streams.count(stream) == 0) {
        if (std::find(state.retired.begin(), state.retired.end(), stream) != state.retired.end()) {
            // On a GPU the handle is freed memory: the call may crash (as
            // a consumer's stream did under CuPy) or act on a stream made
            // since at the same address. A bug of the caller, made loud.
            const std::string what = "a runtime call named " + stream->describe() +
                                     ", which its owner had destroyed (a stream belongs to whoever made it)";
            state.violations.push_back(what);
            ADD_FAILURE() << "[simulated GPU] " << what;
        }
        return nullptr;
    }
    touch_device(stream->device);
    return stream;
}

bool blocking_stream_capturing(int device) {
    for (auto* stream : simulator().blocking[device]) {
        if (stream->capture != nullptr) {
            return true;
        }
    }
    return false;
}

void invalidate(Capture* capture, const std::string& why) {
    if (capture != nullptr && !capture->invalidated) {
        capture->invalidated = true;
        simulator().invalidations.push_back("capture " + std::to_string(capture->id) + ": " + why);
    }
}

// with the simulator's mutex held
Status push_locked(StreamState* stream, Item item) {
    Simulator& state = simulator();
    state.activity++;
    if (stream->capture != nullptr) {
        if (stream->capture->invalidated) {
            return Status::capture_invalidated;
        }
        stream->capture->nodes.push_back(GraphNode{item.kind, std::move(item.work)});
        return Status::success;
    }
    if (stream->kind == Kind::legacy) {
        for (auto* other : state.blocking[stream->device]) {
            if (other->capture != nullptr) {
                invalidate(other->capture, "work queued on the legacy stream while a blocking stream captures");
                return Status::capture_implicit;
            }
        }
        for (auto* other : state.blocking[stream->device]) {
            std::lock_guard<std::mutex> lock(other->mutex);
            if (other->pushed > 0) {
                item.waits.emplace_back(other, other->pushed);
            }
        }
    } else if (stream->blocking) {
        StreamState* legacy = state.legacy[stream->device];
        std::lock_guard<std::mutex> lock(legacy->mutex);
        if (legacy->pushed > 0) {
            item.waits.emplace_back(legacy, legacy->pushed);
        }
    }
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->pushed++;
    stream->items.push_back(std::move(item));
    if (!stream->worker.joinable()) {
        stream->worker = std::thread(worker_loop, stream);
    }
    stream->changed.notify_all();
    return Status::success;
}

NodeKind kind_of(const char* call) {
    const std::string name(call);
    if (name.rfind("cudaMemcpy", 0) == 0) {
        return NodeKind::copy;
    }
    if (name == "cudaMemsetAsync") {
        return NodeKind::memset;
    }
    if (name == "cudaFreeAsync") {
        return NodeKind::free;
    }
    return NodeKind::other;
}

// A copy between pageable host memory and the device goes through the
// driver's own staging when it is called; a graph node made of it would
// read the pageable memory again at every replay, long after the caller
// may have reused or freed it. Refused on a capturing stream, and the
// capture invalidated. With the simulator's mutex held.
Status pageable_copy_locked(StreamState* stream, const char* call) {
    if (stream->capture == nullptr) {
        return Status::success;
    }
    invalidate(stream->capture, std::string(call) + " with pageable host memory");
    return Status::capture_unsupported;
}

// `pageable_host`: the work copies between pageable host memory and the
// device (pageable_copy_locked).
Status push(const void* handle, std::function<void()> work, const char* call, bool current_device_only,
            bool pageable_host = false) {
    Simulator& state = simulator();
    std::lock_guard<std::mutex> lock(state.mutex);
    StreamState* stream = resolve_locked(handle);
    if (stream == nullptr) {
        return Status::invalid_resource_handle;
    }
    if (current_device_only && stream->device != current) {
        return Status::invalid_resource_handle;
    }
    if (pageable_host) {
        const Status status = pageable_copy_locked(stream, call);
        if (status != Status::success) {
            return status;
        }
    }
    return push_locked(stream, Item{std::move(work), {}, kind_of(call)});
}

// Whether the calling thread may make a potentially unsafe call now
// (Runtime API, cudaThreadExchangeStreamCaptureMode); invalidates the
// captures that forbid it. With the simulator's mutex held.
Status unsafe_call_locked(const char* call) {
    if (interaction_mode == CaptureMode::relaxed) {
        return Status::success;
    }
    const auto self = std::this_thread::get_id();
    Status status = Status::success;
    for (auto* capture : simulator().captures) {
        const bool own = capture->thread == self && capture->mode != CaptureMode::relaxed;
        const bool global = interaction_mode == CaptureMode::global && capture->thread != self &&
                            capture->mode == CaptureMode::global;
        if (own || global) {
            std::ostringstream why;
            why << call << " on " << (own ? "the capturing thread" : "another thread")
                << " in " << (interaction_mode == CaptureMode::global ? "Global" : "ThreadLocal") << " mode";
            invalidate(capture, why.str());
            status = Status::capture_unsupported;
        }
    }
    return status;
}


// Blocks the host until `stream` has completed `sequence` items: a host
// wait, counted, failing after the time-out with a violation.
Status host_wait(StreamState* stream, uint64_t sequence, const char* call) {
    Simulator& state = simulator();
    thread_host_waits++;
    state.activity++;
    std::unique_lock<std::mutex> lock(stream->mutex);
    const std::chrono::milliseconds timeout(state.host_wait_timeout_ms.load());
    if (!stream->changed.wait_for(lock, timeout, [&] { return stream->completed >= sequence; })) {
        lock.unlock();
        std::lock_guard<std::mutex> guard(state.mutex);
        state.violations.push_back(std::string(call) + " made the host wait for the held " + stream->describe() +
                                   " (timed out)");
        return Status::host_wait_timeout;
    }
    return Status::success;
}

// Every stream of `device`, with what each has queued now.
std::vector<std::pair<StreamState*, uint64_t>> snapshot_locked(int device) {
    std::vector<std::pair<StreamState*, uint64_t>> result;
    for (auto* stream : simulator().streams) {
        if (device < 0 || stream->device == device) {
            std::lock_guard<std::mutex> lock(stream->mutex);
            result.emplace_back(stream, stream->pushed);
        }
    }
    return result;
}

// Implicit device synchronisation of `call` (page-locked memory, frees).
Status synchronize_device_implicitly(const char* call) {
    std::vector<std::pair<StreamState*, uint64_t>> streams;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        const Status status = unsafe_call_locked(call);
        if (status != Status::success) {
            return status;
        }
        touch_device(current);
        streams = snapshot_locked(current);
    }
    for (const auto& stream : streams) {
        const Status status = host_wait(stream.first, stream.second, call);
        if (status != Status::success) {
            return status;
        }
    }
    return Status::success;
}

// ---- memory ------------------------------------------------------------------------

void* new_memory(size_t bytes) {
    void* data = ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t(alignment), std::nothrow);
    if (data != nullptr) {
        std::memset(data, poison, bytes == 0 ? 1 : bytes);
    }
    return data;
}

void* register_memory(size_t bytes, int device, MemoryKind kind) {
    void* data = new_memory(bytes);
    if (data == nullptr) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    simulator().live[reinterpret_cast<uintptr_t>(data)] = Allocation{bytes == 0 ? 1 : bytes, device, kind};
    return data;
}

// with the simulator's mutex held
void release_locked(void* data, const char* call) {
    Simulator& state = simulator();
    const auto address = reinterpret_cast<uintptr_t>(data);
    const auto found = state.live.find(address);
    if (found == state.live.end()) {
        state.violations.push_back(std::string(call) + " of memory that is not allocated");
        return;
    }
    std::memset(data, poison, found->second.bytes);
    state.quarantine.insert(*found);
    state.quarantine_order.push_back(address);
    state.quarantined_bytes += found->second.bytes;
    state.live.erase(found);
    while (state.quarantined_bytes > quarantine_limit && !state.quarantine_order.empty()) {
        const auto oldest = state.quarantine.find(state.quarantine_order.front());
        state.quarantine_order.pop_front();
        if (oldest != state.quarantine.end()) {
            state.quarantined_bytes -= oldest->second.bytes;
            ::operator delete(reinterpret_cast<void*>(oldest->first), std::align_val_t(alignment));
            state.quarantine.erase(oldest);
        }
    }
}

const std::pair<const uintptr_t, Allocation>* containing(const std::map<uintptr_t, Allocation>& allocations,
                                                          uintptr_t address) {
    auto found = allocations.upper_bound(address);
    if (found == allocations.begin()) {
        return nullptr;
    }
    --found;
    if (address < found->first + found->second.bytes) {
        return &*found;
    }
    return nullptr;
}

// Checks, when queued work runs, that [data, data + bytes) is allocated and,
// unless `any_device`, belongs to `device` (memory the simulator never
// allocated — pageable host memory — is not checked).
/// Whether `data` may be touched: false (and a violation) for freed memory.
bool check_memory(const void* data, size_t bytes, const char* what, int device, bool any_device = false) {
    if (data == nullptr) {
        return true;
    }
    Simulator& state = simulator();
    const auto address = reinterpret_cast<uintptr_t>(data);
    std::lock_guard<std::mutex> lock(state.mutex);
    if (const auto* allocation = containing(state.live, address)) {
        if (bytes != 0 && address + bytes > allocation->first + allocation->second.bytes) {
            state.violations.push_back(std::string(what) + " ran past the end of an allocation");
        }
        if (!any_device && allocation->second.kind == MemoryKind::device && allocation->second.device != device) {
            state.violations.push_back(std::string(what) + " on device " + std::to_string(device) +
                                       " touched memory of device " + std::to_string(allocation->second.device));
        }
        return true;
    }
    if (containing(state.quarantine, address) != nullptr) {
        state.violations.push_back(std::string(what) + " touched freed memory");
        return false;
    }
    return true;
}

bool is_page_locked(const void* data) {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    const auto* allocation = containing(simulator().live, reinterpret_cast<uintptr_t>(data));
    return allocation != nullptr && allocation->second.kind != MemoryKind::device;
}

StreamState* resolve_number(int64_t number, int device) {
    Simulator& state = simulator();
    std::lock_guard<std::mutex> lock(state.mutex);
    const int saved = current;
    current = device;
    StreamState* stream = resolve_locked(reinterpret_cast<const void*>(static_cast<intptr_t>(number)));
    current = saved;
    if (stream == nullptr || stream->device != device) {
        throw Error("stream number " + std::to_string(number) + " is not a stream of simulated device " +
                    std::to_string(device));
    }
    return stream;
}

}  // namespace

// ---- test controls -----------------------------------------------------------------

uint64_t seed() { return simulator().seed; }

int device_count() { return simulator().devices; }

int64_t create_stream(int device, bool blocking) {
    MTSARRAY_EXPECTS(device >= 0 && device < simulator().devices, "no simulated device " + std::to_string(device));
    std::lock_guard<std::mutex> lock(simulator().mutex);
    touch_device(device);
    auto* stream = simulator().make_stream(device, Kind::user, blocking);
    return static_cast<int64_t>(reinterpret_cast<intptr_t>(stream));
}

void destroy_stream(int64_t number) {
    auto* stream = reinterpret_cast<StreamState*>(static_cast<intptr_t>(number));
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        MTSARRAY_EXPECTS(simulator().streams.count(stream) == 1 && stream->kind == Kind::user,
                         "destroy_stream: not a user stream of the simulation");
        simulator().streams.erase(stream);
        auto& blocking = simulator().blocking[stream->device];
        blocking.erase(std::remove(blocking.begin(), blocking.end(), stream), blocking.end());
        stream->retired = true;
        simulator().retired.push_back(stream);
    }
    // events may still name it: the state stays, its worker goes
    {
        std::lock_guard<std::mutex> lock(stream->mutex);
        stream->stopping = true;
        stream->changed.notify_all();
    }
    if (stream->worker.joinable()) {
        stream->worker.join();
    }
}

struct Gate::State {
    std::mutex mutex;
    std::condition_variable opened;
    bool open = false;
};

void Gate::open() {
    if (state_ == nullptr) {
        return;
    }
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->open = true;
    state_->opened.notify_all();
}

bool Gate::is_open() const {
    if (state_ == nullptr) {
        return true;
    }
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->open;
}

Gate hold(int64_t stream, int device) {
    Gate gate;
    gate.state_ = std::make_shared<Gate::State>();
    auto state = gate.state_;
    enqueue(stream, device, [state] {
        std::unique_lock<std::mutex> lock(state->mutex);
        state->opened.wait(lock, [&] { return state->open; });
    });
    return gate;
}

void enqueue(int64_t stream, int device, std::function<void()> work) {
    StreamState* target = resolve_number(stream, device);
    std::lock_guard<std::mutex> lock(simulator().mutex);
    const Status status = push_locked(target, Item{std::move(work), {}});
    MTSARRAY_EXPECTS(status == Status::success,
                     std::string("enqueue on a simulated stream failed: ") + SimulatedErrors::name(status));
}

void enqueue_read(int64_t stream, int device, void* destination, const void* source, size_t bytes) {
    enqueue(stream, device, [=] {
        check_memory(source, bytes, "a consumer's read", device);
        std::memcpy(destination, source, bytes);
    });
}

size_t host_waits() { return thread_host_waits; }

std::vector<std::string> violations() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().violations;
}

void clear_violations() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    simulator().violations.clear();
}

std::vector<std::string> capture_invalidations() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().invalidations;
}

// Whether the deferred work of the process's GpuBackend<SimulatedRuntime>
// has settled (GpuBackend::deferred_work_settled).
bool deferred_work_settled() {
    const auto& backend =
        static_cast<const mtsarray::detail::gpu::GpuBackend<SimulatedRuntime>&>(simulated_backend());
    return backend.deferred_work_settled();
}

void drain() {
    Simulator& state = simulator();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (true) {
        const uint64_t before = state.activity.load();
        std::vector<std::pair<StreamState*, uint64_t>> streams;
        {
            std::lock_guard<std::mutex> lock(state.mutex);
            streams = snapshot_locked(-1);
        }
        for (const auto& stream : streams) {
            std::unique_lock<std::mutex> lock(stream.first->mutex);
            if (!stream.first->changed.wait_until(lock, deadline,
                                                  [&] { return stream.first->completed >= stream.second; })) {
                throw Error("simulated GPU: " + stream.first->describe() +
                            " is still busy after 30 s (a gate left closed?)");
            }
        }
        // mtsarray's deferred work runs on its own thread: done when it has
        // nothing left it could run (work waiting for a capture to end
        // stays) and nothing new reached the device meanwhile (what it ran
        // may have queued frees)
        if (deferred_work_settled() && state.activity.load() == before) {
            return;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            throw Error("simulated GPU: mtsarray's deferred work is still busy after 30 s");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

size_t allocated_bytes() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    size_t bytes = 0;
    for (const auto& allocation : simulator().live) {
        if (allocation.second.kind == MemoryKind::device) {
            bytes += allocation.second.bytes;
        }
    }
    return bytes;
}

size_t pinned_allocations() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().pinned_allocations;
}

size_t pinned_frees() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().pinned_frees;
}

void begin_capture(int64_t stream, int device, CaptureMode mode) {
    StreamState* target = resolve_number(stream, device);
    std::lock_guard<std::mutex> lock(simulator().mutex);
    MTSARRAY_EXPECTS(target->kind != Kind::legacy, "the legacy stream can not capture (cudaErrorStreamCaptureUnsupported)");
    MTSARRAY_EXPECTS(target->capture == nullptr, "the stream is already capturing");
    auto* capture = new Capture{simulator().next_capture++, mode, std::this_thread::get_id(), target, {target}, {}};
    target->capture = capture;
    simulator().captures.push_back(capture);
}

Graph end_capture(int64_t stream, int device) {
    StreamState* target = resolve_number(stream, device);
    std::unique_ptr<Capture> capture;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        MTSARRAY_EXPECTS(target->capture != nullptr && target->capture->origin == target,
                         "end_capture: the stream did not begin a capture");
        capture.reset(target->capture);
        for (auto* member : capture->streams) {
            member->capture = nullptr;
        }
        auto& captures = simulator().captures;
        captures.erase(std::remove(captures.begin(), captures.end(), capture.get()), captures.end());
    }
    if (capture->invalidated) {
        fail(Status::capture_invalidated, "cudaStreamEndCapture");
    }
    return Graph{std::move(capture->nodes), std::move(capture->retained)};
}

void launch(const Graph& graph, int64_t stream, int device) {
    for (const auto& node : graph.nodes) {
        if (node.work) {
            enqueue(stream, device, node.work);
        }
    }
    // the graph's user objects live until this launch has run
    enqueue(stream, device, [retained = graph.retained] {});
}

size_t retained_objects() { return live_user_objects.load(); }

size_t host_to_device_copies() { return uploads.load(); }
size_t device_allocations() { return device_allocation_count.load(); }

CaptureMode exchange_capture_mode(CaptureMode mode) {
    const CaptureMode previous = interaction_mode;
    interaction_mode = mode;
    return previous;
}

std::vector<int> contexts() {
    std::vector<int> result;
    for (int device = 0; device < simulator().devices; device++) {
        if (simulator().context[device].load()) {
            result.push_back(device);
        }
    }
    return result;
}

void forget_contexts() {
    for (auto& context : simulator().context) {
        context.store(false);
    }
}

int current_device() { return current; }

void set_device(int device) { SimulatedRuntime::set_device(device); }

// Kernel loading (CUDA C++ Programming Guide, "Lazy Loading", and its
// "Potential Hazards > Concurrent Execution"): since CUDA 12.2 a kernel is
// loaded on its first launch unless loaded before (cudaFuncGetAttributes
// loads it), and a load may wait for the whole device. Here every load is a
// host wait for every stream of the device, and a launch of a kernel that
// was not loaded on its device is also a violation: mtsarray loads all of
// its kernels when it sets a device up (src/gpu/kernel_loading.hpp), so one
// loaded by its launch is missing from the lists there.
namespace {

// Waits on the host for every stream of `device` (with the simulator's lock
// held on entry and on return).
void wait_for_device_locked(std::unique_lock<std::mutex>& lock, int device, const char* call) {
    auto streams = snapshot_locked(device);
    lock.unlock();
    for (const auto& stream : streams) {
        (void)host_wait(stream.first, stream.second, call);
    }
    lock.lock();
}

}  // namespace

void detail::enqueue_kernel(StreamState* stream, mtsarray::detail::gpu::KernelKey kernel, unsigned blocks,
                            std::vector<const void*> touched, std::function<void(unsigned)> run_block) {
    refuse_after_unload("cudaLaunchKernel");
    Simulator& state = simulator();
    std::unique_lock<std::mutex> lock(state.mutex);
    StreamState* target = resolve_locked(stream);
    if (target == nullptr || target->device != current) {
        last = Status::invalid_resource_handle;
        return;
    }
    const int device = target->device;
    if (state.loaded_kernels[device].count(kernel) == 0) {
        state.lazy_kernel_loads++;
        std::ostringstream why;
        why << "a kernel (key " << kernel << ") was launched on device " << device
            << " before it was loaded there: its lazy load waits on the host for the whole device";
        state.violations.push_back(why.str());
        wait_for_device_locked(lock, device, "a kernel's lazy load at its first launch");
        state.loaded_kernels[device].insert(kernel);
    }
    // thread blocks run in no particular order on a GPU (CUDA C++
    // Programming Guide, "Thread Hierarchy"): a random one here
    std::vector<unsigned> order(blocks);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), state.block_order);
    const Status status = push_locked(
        target, Item{[touched, order = std::move(order), run_block, device]() {
                         bool usable = true;
                         for (const void* data : touched) {
                             usable = check_memory(data, 0, "a kernel", device) && usable;
                         }
                         if (!usable) {
                             return;  // not on freed memory: its poison would send it anywhere
                         }
                         for (unsigned block : order) {
                             run_block(block);
                         }
                     },
                     {},
                     NodeKind::kernel});
    if (status != Status::success) {
        last = status;
    }
}

void forget_loaded_kernels() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    for (auto& loaded : simulator().loaded_kernels) {
        loaded.clear();
    }
}

size_t lazy_kernel_loads() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().lazy_kernel_loads;
}

void unload_runtime() {
    simulator().unloaded.store(true, std::memory_order_release);
}

void reload_runtime() {
    simulator().unloaded.store(false, std::memory_order_release);
}

size_t calls_after_unload() {
    return simulator().calls_after_unload.load();
}

std::chrono::milliseconds set_host_wait_timeout(std::chrono::milliseconds timeout) {
    return std::chrono::milliseconds(simulator().host_wait_timeout_ms.exchange(timeout.count()));
}

}  // namespace sim

// ---- errors ----------------------------------------------------------------------------

const char* SimulatedErrors::name(Status status) noexcept {
    switch (status) {
    case Status::success: return "cudaSuccess";
    case Status::memory_allocation: return "cudaErrorMemoryAllocation";
    case Status::not_ready: return "cudaErrorNotReady";
    case Status::invalid_value: return "cudaErrorInvalidValue";
    case Status::invalid_device: return "cudaErrorInvalidDevice";
    case Status::invalid_resource_handle: return "cudaErrorInvalidResourceHandle";
    case Status::capture_unsupported: return "cudaErrorStreamCaptureUnsupported";
    case Status::capture_invalidated: return "cudaErrorStreamCaptureInvalidated";
    case Status::capture_implicit: return "cudaErrorStreamCaptureImplicit";
    case Status::capture_isolation: return "cudaErrorStreamCaptureIsolation";
    case Status::host_wait_timeout: return "simulatedHostWaitTimeout";
    case Status::runtime_unloading: return "cudaErrorCudartUnloading";
    }
    return "unknown";
}

const char* SimulatedErrors::description(Status status) noexcept {
    switch (status) {
    case Status::success: return "no error";
    case Status::memory_allocation: return "out of memory";
    case Status::not_ready: return "device not ready";
    case Status::invalid_value: return "invalid argument";
    case Status::invalid_device: return "invalid device ordinal";
    case Status::invalid_resource_handle: return "invalid resource handle";
    case Status::capture_unsupported: return "operation not permitted when stream is capturing";
    case Status::capture_invalidated: return "operation failed due to a previous error during capture";
    case Status::capture_implicit:
        return "operation would make the legacy stream depend on a capturing blocking stream";
    case Status::capture_isolation: return "operation would have resulted in a merge of two independent captures";
    case Status::host_wait_timeout: return "the host waited for a stream held by the test (simulation)";
    case Status::runtime_unloading: return "driver shutting down";
    }
    return "unknown";
}

SimulatedErrors::Status SimulatedErrors::last_error() noexcept {
    const Status status = sim::last;
    sim::last = Status::success;
    return status;
}

// ---- the traits -------------------------------------------------------------------------

using sim::MemoryKind;
using sim::Status;
using sim::simulator;

int SimulatedRuntime::current_device() {
    sim::refuse_after_unload("cudaGetDevice");
    return sim::current;
}

void SimulatedRuntime::set_device(int device) {
    sim::refuse_after_unload("cudaSetDevice");
    if (device < 0 || device >= simulator().devices) {
        sim::fail(Status::invalid_device, "cudaSetDevice");
    }
    sim::current = device;
    sim::touch_device(device);  // cudaSetDevice initialises the device's context
}

void SimulatedRuntime::restore_device(int device) noexcept {
    if (sim::refused_after_unload("cudaSetDevice")) {
        return;
    }
    if (device < 0 || device >= simulator().devices) {
        sim::report(Status::invalid_device, "cudaSetDevice");
        return;
    }
    sim::current = device;
    sim::touch_device(device);
}

bool SimulatedRuntime::device_active(int device) noexcept {
    return device >= 0 && device < simulator().devices && simulator().context[device].load();
}

SimulatedRuntime::StreamHandle SimulatedRuntime::native_stream(const mtsarray::detail::Stream& stream) {
    namespace numbers = mtsarray::detail::stream_numbers;
    if (stream.number() == numbers::cuda_legacy) {
        return reinterpret_cast<StreamHandle>(const_cast<char*>(sim::legacy_handle));
    }
    if (stream.number() == numbers::cuda_per_thread) {
        return reinterpret_cast<StreamHandle>(const_cast<char*>(sim::per_thread_handle));
    }
    MTSARRAY_EXPECTS(stream.is_handle(),
                     "stream number " + std::to_string(stream.number()) + " does not name a CUDA stream");
    return static_cast<StreamHandle>(stream.handle());
}

SimulatedRuntime::CaptureState SimulatedRuntime::capture_state(StreamHandle handle) {
    sim::refuse_after_unload("cudaStreamGetCaptureInfo");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::StreamState* stream = sim::resolve_locked(handle);
    if (stream == nullptr) {
        sim::fail(Status::invalid_resource_handle, "cudaStreamGetCaptureInfo");
    }
    if (stream->kind == sim::Kind::legacy && sim::blocking_stream_capturing(stream->device)) {
        throw Error("the legacy default stream can not be used while another stream is capturing a CUDA graph "
                    "(cudaErrorStreamCaptureImplicit): give the arrays a non-blocking stream, or capture in "
                    "cudaStreamCaptureModeRelaxed");
    }
    if (stream->capture == nullptr) {
        return CaptureState{false, 0};
    }
    return CaptureState{true, stream->capture->id};
}

void SimulatedRuntime::load_kernel(mtsarray::detail::gpu::KernelKey kernel) {
    sim::refuse_after_unload("cudaFuncGetAttributes");
    std::unique_lock<std::mutex> lock(simulator().mutex);
    const int device = sim::current;
    sim::touch_device(device);
    if (simulator().loaded_kernels[device].count(kernel) != 0) {
        return;
    }
    sim::wait_for_device_locked(lock, device, "cudaFuncGetAttributes (loading a kernel)");
    simulator().loaded_kernels[device].insert(kernel);
}

SimulatedRuntime::StreamHandle SimulatedRuntime::create_stream() {
    sim::refuse_after_unload("cudaStreamCreate");
    return reinterpret_cast<StreamHandle>(static_cast<intptr_t>(sim::create_stream(sim::current, false)));
}

SimulatedRuntime::CaptureMode SimulatedRuntime::exchange_capture_mode(CaptureMode mode) noexcept {
    return sim::exchange_capture_mode(mode);
}

// Pool calls, and stream-ordered allocation and free on a stream that is
// not capturing, are potentially unsafe (cudaThreadExchangeStreamCapture-
// Mode): while another thread captures in Global mode they fail and
// invalidate that capture unless this thread is Relaxed. (On a capturing
// stream they would be captured as graph nodes instead; mtsarray makes none.)
SimulatedRuntime::PoolHandle SimulatedRuntime::create_pool(int device) {
    sim::refuse_after_unload("cudaMemPoolCreate");
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        sim::check(sim::unsafe_call_locked("cudaMemPoolCreate"), "cudaMemPoolCreate");
    }
    sim::touch_device(device);
    return new sim::PoolState(device);
}

void SimulatedRuntime::trim_pool(PoolHandle) noexcept {
    if (sim::refused_after_unload("cudaMemPoolTrimTo")) {
        return;
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::report(sim::unsafe_call_locked("cudaMemPoolTrimTo"), "cudaMemPoolTrimTo");
}

void* SimulatedRuntime::allocate_from_pool(size_t bytes, PoolHandle pool, StreamHandle handle) {
    sim::refuse_after_unload("cudaMallocFromPoolAsync");
    sim::device_allocation_count++;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        sim::StreamState* stream = sim::resolve_locked(handle);
        if (stream == nullptr || pool == nullptr || stream->device != pool->device) {
            sim::fail(Status::invalid_resource_handle, "cudaMallocFromPoolAsync");
        }
        if (stream->capture == nullptr) {
            sim::check(sim::unsafe_call_locked("cudaMallocFromPoolAsync"), "cudaMallocFromPoolAsync");
        }
    }
    void* data = sim::register_memory(bytes, pool->device, MemoryKind::device);
    if (data == nullptr) {
        mtsarray::detail::gpu::check_allocation<SimulatedErrors>(Status::memory_allocation, "cudaMallocFromPoolAsync",
                                                                 bytes, "simulated_runtime.cpp", 0);
    }
    return data;
}

void SimulatedRuntime::free_async(void* data, StreamHandle stream) noexcept {
    if (sim::refused_after_unload("cudaFreeAsync")) {
        return;
    }
    try {
        {
            std::lock_guard<std::mutex> lock(simulator().mutex);
            sim::StreamState* target = sim::resolve_locked(stream);
            if (target != nullptr && target->capture == nullptr) {
                const Status status = sim::unsafe_call_locked("cudaFreeAsync");
                if (status != Status::success) {
                    sim::report(status, "cudaFreeAsync");
                    return;  // refused: the memory stays allocated
                }
            }
        }
        const Status status = sim::push(
            stream,
            [data] {
                std::lock_guard<std::mutex> lock(simulator().mutex);
                sim::release_locked(data, "cudaFreeAsync");
            },
            "cudaFreeAsync", false);
        sim::report(status, "cudaFreeAsync");
    } catch (...) {
        sim::report(Status::memory_allocation, "cudaFreeAsync");
    }
}

void* SimulatedRuntime::allocate_pinned(size_t bytes) {
    sim::refuse_after_unload("cudaHostAlloc");
    sim::check(sim::synchronize_device_implicitly("cudaHostAlloc"), "cudaHostAlloc");
    void* data = sim::register_memory(bytes, sim::current, MemoryKind::pinned);
    if (data == nullptr) {
        mtsarray::detail::gpu::check_allocation<SimulatedErrors>(Status::memory_allocation, "cudaHostAlloc", bytes,
                                                                 "simulated_runtime.cpp", 0);
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    simulator().pinned_allocations++;
    return data;
}

void SimulatedRuntime::free_pinned(void* data) noexcept {
    if (sim::refused_after_unload("cudaFreeHost")) {
        return;
    }
    const Status status = sim::synchronize_device_implicitly("cudaFreeHost");
    if (status != Status::success) {
        sim::report(status, "cudaFreeHost");
        if (status == Status::capture_unsupported) {
            return;  // refused: the memory stays allocated
        }
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    simulator().pinned_frees++;
    sim::release_locked(data, "cudaFreeHost");
}

void* SimulatedRuntime::allocate_managed(size_t bytes) {
    sim::refuse_after_unload("cudaMallocManaged");
    sim::check(sim::synchronize_device_implicitly("cudaMallocManaged"), "cudaMallocManaged");
    void* data = sim::register_memory(bytes, sim::current, MemoryKind::managed);
    if (data == nullptr) {
        mtsarray::detail::gpu::check_allocation<SimulatedErrors>(Status::memory_allocation, "cudaMallocManaged",
                                                                 bytes, "simulated_runtime.cpp", 0);
    }
    return data;
}

void SimulatedRuntime::free_managed(void* data) noexcept {
    if (sim::refused_after_unload("cudaFree")) {
        return;
    }
    const Status status = sim::synchronize_device_implicitly("cudaFree");
    if (status != Status::success) {
        sim::report(status, "cudaFree");
        if (status == Status::capture_unsupported) {
            return;
        }
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::release_locked(data, "cudaFree");
}

void* SimulatedRuntime::allocate_device(size_t bytes) {
    sim::refuse_after_unload("cudaMalloc");
    // cudaMalloc: potentially unsafe during a capture (Relaxed mode allows
    // it); it does not wait for the device
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        sim::check(sim::unsafe_call_locked("cudaMalloc"), "cudaMalloc");
    }
    sim::device_allocation_count++;
    void* data = sim::register_memory(bytes, sim::current, MemoryKind::device);
    if (data == nullptr) {
        mtsarray::detail::gpu::check_allocation<SimulatedErrors>(Status::memory_allocation, "cudaMalloc", bytes,
                                                                 "simulated_runtime.cpp", 0);
    }
    return data;
}

void SimulatedRuntime::free_device(void* data) noexcept {
    if (sim::refused_after_unload("cudaFree")) {
        return;
    }
    // cudaFree waits for the device
    const Status status = sim::synchronize_device_implicitly("cudaFree");
    if (status != Status::success) {
        sim::report(status, "cudaFree");
        if (status == Status::capture_unsupported) {
            return;
        }
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::release_locked(data, "cudaFree");
}

void SimulatedRuntime::retain_with_graph(StreamHandle handle, void (*release)(void*), void* object) {
    sim::refuse_after_unload("cudaGraphRetainUserObject");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::StreamState* stream = sim::resolve_locked(handle);
    if (stream == nullptr || stream->capture == nullptr) {
        release(object);
        sim::fail(Status::invalid_value, "cudaGraphRetainUserObject");
    }
    stream->capture->retained->objects.emplace_back(release, object);
    sim::live_user_objects++;
}

void SimulatedRuntime::copy_device_to_device_async(void* destination, const void* source, size_t bytes,
                                                   StreamHandle stream) {
    sim::refuse_after_unload("cudaMemcpyAsync");
    const int device = sim::current;
    sim::check(sim::push(
                   stream,
                   [=] {
                       sim::check_memory(source, bytes, "cudaMemcpyAsync (source)", device);
                       sim::check_memory(destination, bytes, "cudaMemcpyAsync (destination)", device);
                       std::memcpy(destination, source, bytes);
                   },
                   "cudaMemcpyAsync", false),
               "cudaMemcpyAsync");
}

void SimulatedRuntime::copy_host_to_device_async(void* destination, const void* source, size_t bytes,
                                                 StreamHandle handle) {
    sim::refuse_after_unload("cudaMemcpyAsync");
    sim::uploads++;
    const int device = sim::current;
    if (sim::is_page_locked(source)) {
        // truly asynchronous: the source is read when the copy runs
        sim::check(sim::push(
                       handle,
                       [=] {
                           sim::check_memory(source, bytes, "cudaMemcpyAsync (page-locked source)", device, true);
                           sim::check_memory(destination, bytes, "cudaMemcpyAsync (destination)", device);
                           std::memcpy(destination, source, bytes);
                       },
                       "cudaMemcpyAsync", false),
                   "cudaMemcpyAsync");
        return;
    }
    // pageable: the runtime stages the bytes before returning (the caller
    // may reuse its buffer then); above its staging space it stages them
    // as the stream reaches the copy, so the host waits for the stream
    // (Runtime API "API synchronization behavior": such copies "might be
    // synchronous with respect to host"; on an H100 a 128 MiB copy waited
    // 1 s behind the stream's queued work, copies of a few hundred KiB did
    // not)
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(source),
                                                               static_cast<const unsigned char*>(source) + bytes);
    sim::StreamState* target = nullptr;
    uint64_t before = 0;  // the items queued before the copy
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        target = sim::resolve_locked(handle);
        if (target == nullptr) {
            sim::fail(Status::invalid_resource_handle, "cudaMemcpyAsync");
        }
        sim::check(sim::pageable_copy_locked(target, "cudaMemcpyAsync"), "cudaMemcpyAsync");
        {
            std::lock_guard<std::mutex> stream_lock(target->mutex);
            before = target->pushed;
        }
        sim::check(sim::push_locked(target, sim::Item{[=] {
                                                          sim::check_memory(destination, bytes,
                                                                            "cudaMemcpyAsync (destination)", device);
                                                          std::memcpy(destination, staged->data(), bytes);
                                                      },
                                                      {},
                                                      sim::NodeKind::copy}),
                   "cudaMemcpyAsync");
        if (bytes <= sim::pageable_staging_bytes || target->capture != nullptr) {
            return;
        }
        std::lock_guard<std::mutex> stream_lock(target->mutex);
        if (target->completed >= before) {
            return;  // the stream has reached the copy: nothing to wait for
        }
    }
    sim::check(sim::host_wait(target, before, "cudaMemcpyAsync from pageable memory above 1 MiB"),
               "cudaMemcpyAsync");
}

void SimulatedRuntime::copy_device_to_host_async(void* destination, const void* source, size_t bytes,
                                                 StreamHandle handle) {
    sim::refuse_after_unload("cudaMemcpyAsync");
    const int device = sim::current;
    const bool page_locked = sim::is_page_locked(destination);
    sim::StreamState* stream = nullptr;
    uint64_t sequence = 0;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        stream = sim::resolve_locked(handle);
        if (stream == nullptr) {
            sim::fail(Status::invalid_resource_handle, "cudaMemcpyAsync");
        }
        if (!page_locked) {
            sim::check(sim::pageable_copy_locked(stream, "cudaMemcpyAsync"), "cudaMemcpyAsync");
        }
        sim::check(sim::push_locked(stream, sim::Item{[=] {
                                                          sim::check_memory(source, bytes,
                                                                            "cudaMemcpyAsync (source)", device);
                                                          sim::check_memory(destination, bytes,
                                                                            "cudaMemcpyAsync (destination)",
                                                                            device, true);
                                                          std::memcpy(destination, source, bytes);
                                                      },
                                                      {}}),
                   "cudaMemcpyAsync");
        if (page_locked || stream->capture != nullptr) {
            return;
        }
        std::lock_guard<std::mutex> stream_lock(stream->mutex);
        sequence = stream->pushed;
    }
    // to pageable memory: returns once the copy is done
    sim::check(sim::host_wait(stream, sequence, "cudaMemcpyAsync to pageable memory"), "cudaMemcpyAsync");
}

void SimulatedRuntime::copy_peer_async(void* destination, int destination_device, const void* source,
                                       int source_device, size_t bytes, StreamHandle stream) {
    sim::refuse_after_unload("cudaMemcpyPeerAsync");
    sim::touch_device(destination_device);
    sim::check(sim::push(
                   stream,
                   [=] {
                       sim::check_memory(source, bytes, "cudaMemcpyPeerAsync (source)", source_device);
                       sim::check_memory(destination, bytes, "cudaMemcpyPeerAsync (destination)",
                                         destination_device);
                       std::memcpy(destination, source, bytes);
                   },
                   "cudaMemcpyPeerAsync", false),
               "cudaMemcpyPeerAsync");
}

void SimulatedRuntime::memset_async(void* data, unsigned char value, size_t bytes, StreamHandle stream) {
    sim::refuse_after_unload("cudaMemsetAsync");
    const int device = sim::current;
    sim::check(sim::push(
                   stream,
                   [=] {
                       sim::check_memory(data, bytes, "cudaMemsetAsync", device);
                       std::memset(data, value, bytes);
                   },
                   "cudaMemsetAsync", true),
               "cudaMemsetAsync");
}

SimulatedRuntime::EventHandle SimulatedRuntime::create_event() {
    sim::refuse_after_unload("cudaEventCreateWithFlags");
    sim::touch_device(sim::current);
    return new sim::EventState(sim::current);
}

void SimulatedRuntime::destroy_event(EventHandle event) noexcept {
    // refused once the runtime is unloaded, and deleted all the same: the
    // driver reclaims what the process held
    (void)sim::refused_after_unload("cudaEventDestroy");
    delete event;
}

void SimulatedRuntime::record_event(EventHandle event, StreamHandle handle) {
    sim::refuse_after_unload("cudaEventRecord");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::StreamState* stream = sim::resolve_locked(handle);
    if (stream == nullptr || event == nullptr || stream->device != event->device) {
        sim::fail(Status::invalid_resource_handle, "cudaEventRecord");
    }
    if (stream->capture != nullptr) {
        event->stream = stream;
        event->capture = stream->capture;
        event->sequence = 0;
        return;
    }
    // a marker item: on the legacy stream it also waits for the blocking streams
    sim::check(sim::push_locked(stream, sim::Item{nullptr, {}}), "cudaEventRecord");
    std::lock_guard<std::mutex> stream_lock(stream->mutex);
    event->stream = stream;
    event->capture = nullptr;
    event->sequence = stream->pushed;
}

bool SimulatedRuntime::event_done(EventHandle event) {
    sim::refuse_after_unload("cudaEventQuery");
    sim::StreamState* stream = nullptr;
    uint64_t sequence = 0;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        simulator().activity++;
        sim::check(sim::unsafe_call_locked("cudaEventQuery"), "cudaEventQuery");
        if (event->capture != nullptr) {
            sim::invalidate(event->capture, "cudaEventQuery of an event recorded in the capture");
            sim::fail(Status::capture_unsupported, "cudaEventQuery");
        }
        stream = event->stream;
        sequence = event->sequence;
    }
    if (stream == nullptr) {
        return true;
    }
    std::lock_guard<std::mutex> lock(stream->mutex);
    return stream->completed >= sequence;
}

void SimulatedRuntime::synchronize_event(EventHandle event) {
    sim::refuse_after_unload("cudaEventSynchronize");
    sim::StreamState* stream = nullptr;
    uint64_t sequence = 0;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        sim::check(sim::unsafe_call_locked("cudaEventSynchronize"), "cudaEventSynchronize");
        if (event->capture != nullptr) {
            sim::invalidate(event->capture, "cudaEventSynchronize of an event recorded in the capture");
            sim::fail(Status::capture_unsupported, "cudaEventSynchronize");
        }
        stream = event->stream;
        sequence = event->sequence;
    }
    if (stream != nullptr) {
        sim::check(sim::host_wait(stream, sequence, "cudaEventSynchronize"), "cudaEventSynchronize");
    } else {
        sim::thread_host_waits++;
    }
}

void SimulatedRuntime::stream_wait_event(StreamHandle handle, EventHandle event) {
    sim::refuse_after_unload("cudaStreamWaitEvent");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::StreamState* stream = sim::resolve_locked(handle);
    if (stream == nullptr || event == nullptr) {
        sim::fail(Status::invalid_resource_handle, "cudaStreamWaitEvent");
    }
    if (event->capture != nullptr) {
        if (stream->capture == event->capture) {
            return;  // the recorded graph is run in order anyway
        }
        if (stream->capture != nullptr) {
            sim::invalidate(stream->capture, "cudaStreamWaitEvent on an event of another capture");
            sim::fail(Status::capture_isolation, "cudaStreamWaitEvent");
        }
        // the waiting stream joins the capture (a fork)
        stream->capture = event->capture;
        event->capture->streams.push_back(stream);
        return;
    }
    if (stream->capture != nullptr) {
        sim::invalidate(stream->capture, "cudaStreamWaitEvent on an event recorded outside the capture");
        sim::fail(Status::capture_isolation, "cudaStreamWaitEvent");
    }
    if (event->stream == nullptr) {
        return;  // never recorded: nothing to wait for
    }
    sim::check(sim::push_locked(stream, sim::Item{nullptr, {{event->stream, event->sequence}}}),
               "cudaStreamWaitEvent");
}

void SimulatedRuntime::synchronize_stream(StreamHandle handle) {
    sim::refuse_after_unload("cudaStreamSynchronize");
    sim::StreamState* stream = nullptr;
    uint64_t sequence = 0;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        stream = sim::resolve_locked(handle);
        if (stream == nullptr) {
            sim::fail(Status::invalid_resource_handle, "cudaStreamSynchronize");
        }
        if (stream->capture != nullptr) {
            sim::invalidate(stream->capture, "cudaStreamSynchronize of the capturing stream");
            sim::fail(Status::capture_unsupported, "cudaStreamSynchronize");
        }
        sim::check(sim::unsafe_call_locked("cudaStreamSynchronize"), "cudaStreamSynchronize");
        if (stream->kind == sim::Kind::legacy) {
            sim::check(sim::push_locked(stream, sim::Item{nullptr, {}}), "cudaStreamSynchronize");
        }
        std::lock_guard<std::mutex> stream_lock(stream->mutex);
        sequence = stream->pushed;
    }
    sim::check(sim::host_wait(stream, sequence, "cudaStreamSynchronize"), "cudaStreamSynchronize");
}

void SimulatedRuntime::synchronize_device() {
    sim::refuse_after_unload("cudaDeviceSynchronize");
    std::vector<std::pair<sim::StreamState*, uint64_t>> streams;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        for (auto* capture : simulator().captures) {
            if (capture->origin->device == sim::current) {
                sim::invalidate(capture, "cudaDeviceSynchronize while a stream of the device captures");
                sim::fail(Status::capture_unsupported, "cudaDeviceSynchronize");
            }
        }
        sim::check(sim::unsafe_call_locked("cudaDeviceSynchronize"), "cudaDeviceSynchronize");
        sim::touch_device(sim::current);
        streams = sim::snapshot_locked(sim::current);
    }
    for (const auto& stream : streams) {
        sim::check(sim::host_wait(stream.first, stream.second, "cudaDeviceSynchronize"), "cudaDeviceSynchronize");
    }
}

// ---- installation -------------------------------------------------------------------------

const mtsarray::detail::Backend& simulated_backend() {
    static const mtsarray::detail::Backend* const backend =
        new mtsarray::detail::gpu::GpuBackend<SimulatedRuntime>(&mtsarray::detail::cpu::pool_host_tasks());
    return *backend;
}

namespace {

// MTSARRAY_TEST_GPU: "simulated" always uses the simulation, "real" never;
// by default it serves when no real GPU can be used.
bool install() {
    const char* choice = std::getenv("MTSARRAY_TEST_GPU");
    const std::string wanted = choice == nullptr ? "" : choice;
    if (wanted == "real") {
        return false;
    }
    if (wanted != "simulated" && mtsarray::detail::unavailable_reason(kDLCUDA).empty()) {
        return false;  // a real GPU: the tests run on it
    }
    mtsarray::detail::set_cuda_backend_for_testing(&simulated_backend());
    return true;
}

const bool installed = install();

class SeedPrinter : public ::testing::EmptyTestEventListener {
    void OnTestEnd(const ::testing::TestInfo& info) override {
        if (installed && info.result() != nullptr && info.result()->Failed()) {
            std::printf("[simulated GPU] seed %llu: MTSARRAY_SIM_SEED=%llu replays these delays\n",
                        static_cast<unsigned long long>(sim::seed()), static_cast<unsigned long long>(sim::seed()));
        }
    }
};

const bool seed_printer = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new SeedPrinter());
    return true;
}();

}  // namespace

bool sim::in_use() { return installed; }

}  // namespace mtsarray_test
