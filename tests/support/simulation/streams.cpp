// The simulated runtime's streams, events and synchronisation: each rule
// with the section of the CUDA documentation it follows (Programming Guide =
// CUDA C++ Programming Guide; Runtime API = CUDA Runtime API reference).
//
// Streams (Programming Guide, "Asynchronous Concurrent Execution > Streams").
//   Every stream is a queue run in order by its own worker thread; the calls
//   that queue work return at once. Before each item the worker sleeps a
//   random time drawn from a generator seeded by the process's seed
//   (MTSARRAY_SIM_SEED, printed when a test fails), so that two streams that
//   are not ordered by an event run in varying orders and a missing wait
//   gives wrong values, not luck.
// Default streams (Runtime API, "Stream synchronization behavior").
//   Stream handle 1 (cudaStreamLegacy, DLPack 1) is the legacy default stream
//   of the current device: an item queued there waits for all work queued
//   before it on every blocking stream of the device, and an item queued on
//   a blocking stream waits for all work queued before it on the legacy
//   stream. Streams from create_stream(device, /*blocking=*/false) are
//   non-blocking (cudaStreamNonBlocking) and take no part in this.
//   Handle 2 (cudaStreamPerThread, DLPack 2) is resolved at every call to the
//   calling thread's per-thread default stream of the current device: two
//   threads naming 2 get two different streams. Per-thread streams are
//   blocking streams ("Per-thread default stream").
// Threads and their ids (pthread_self(3): "A thread ID may be reused after
//   a terminated thread has been joined, or a detached thread has
//   terminated"; glibc reuses them at once, with the exited thread's stack).
//   A per-thread stream belongs to its thread, not to the thread's id: the
//   work an exited thread queued there still runs, in order, and the
//   legacy stream still orders after it; a later thread, whose id may well
//   be the exited one's, gets a stream of its own.
//   run_on_a_thread_with_id() makes such a thread for a test.
// Events (Programming Guide "Events"; Runtime API "Event Management",
//   cudaStreamWaitEvent in "Stream Management").
//   record captures the work queued on the stream so far; query never
//   blocks (an event never recorded is complete); synchronize blocks the
//   host; a stream wait makes later work of the waiting stream wait for the
//   recorded work, across devices too. An event is recorded on a stream of
//   its own device (cudaErrorInvalidResourceHandle otherwise).
// The device of a stream (Runtime API cudaStreamGetDevice, CUDA 12.8:
//   "Returns in *device the device of the stream"; HIP Runtime API
//   hipStreamGetDevice: "Gets the device associated with the stream").
//   A stream belongs to the device that was current when it was made, for
//   its whole life; stream_device() says which, for any thread, whatever
//   device is current. The legacy and per-thread handles name a stream of
//   the current device; a destroyed stream is a violation, as below. A
//   kernel, a memset or an event record on a stream of another device than
//   the current one fails with cudaErrorInvalidResourceHandle (devices.cpp,
//   and record_event below).
// Stream ownership (Runtime API cudaStreamDestroy).
//   A stream destroyed by its owner (destroy_stream) may not be named
//   again: any call on it is a violation, and fails the running test.
// Implicit synchronisation (Programming Guide "Implicit Synchronization";
//   Runtime API "API synchronization behavior").
//   Page-locked and managed allocation and free, and the non-async free,
//   wait for every stream of the current device. These, and
//   stream/event/device synchronisation, are host waits: counted
//   (host_waits(), per calling thread), and one that meets a held stream
//   fails after a time-out (MTSARRAY_SIM_HOST_WAIT_MS, default 5000) with a
//   violation instead of hanging the test.

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "support/simulation/state.hpp"

namespace mtsarray_test {

using mtsarray::detail::Error;

namespace sim {

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
thread_local bool held_waits_fail_at_once = false;
thread_local Status last = Status::success;

const char* const legacy_handle = reinterpret_cast<const char*>(uintptr_t(1));
const char* const per_thread_handle = reinterpret_cast<const char*>(uintptr_t(2));

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
        if (item.work && fault_of(stream->device) == Status::success) {
            begin_accesses(item.accesses, stream);  // hazards.cpp
            item.work();  // (after a sticky fault the device runs nothing: faults.cpp)
        }
        end_accesses(item.accesses);
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
    issue_accesses_locked(item, stream);  // hazards.cpp
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
    if (name == "cudaLaunchHostFunc") {
        return NodeKind::host;
    }
    return NodeKind::other;
}

// `pageable_host`: the work copies between pageable host memory and the
// device (pageable_copy_locked).
Status push(const void* handle, std::function<void()> work, const char* call, bool current_device_only,
            bool pageable_host, std::vector<Access> accesses) {
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
    return push_locked(stream, Item{std::move(work), {}, kind_of(call), std::move(accesses)});
}

namespace {

// Whether the first `sequence` items of `stream` wait for a gate that is
// closed now: one of theirs, or one of the streams they wait for (`depth`
// streams deep). Takes the streams' locks one at a time.
bool waits_for_a_closed_gate(StreamState* stream, uint64_t sequence, int depth) {
    std::vector<std::pair<StreamState*, uint64_t>> dependencies;
    {
        std::lock_guard<std::mutex> lock(stream->mutex);
        for (const auto& gate : stream->gates) {
            if (gate.first > stream->completed && gate.first <= sequence && gate.second()) {
                return true;
            }
        }
        // the items not taken by the worker yet: the last one is `pushed`
        const uint64_t first = stream->pushed - stream->items.size() + 1;
        for (size_t i = 0; i < stream->items.size() && first + i <= sequence; i++) {
            dependencies.insert(dependencies.end(), stream->items[i].waits.begin(), stream->items[i].waits.end());
        }
    }
    if (depth > 0) {
        for (const auto& dependency : dependencies) {
            if (waits_for_a_closed_gate(dependency.first, dependency.second, depth - 1)) {
                return true;
            }
        }
    }
    return false;
}

}  // namespace

// Blocks the host until `stream` has completed `sequence` items: a host
// wait, counted, failing after the time-out with a violation -- or at once,
// for a thread that asked (fail_host_waits_on_held_streams), when it waits
// for a held stream.
Status host_wait(StreamState* stream, uint64_t sequence, const char* call) {
    Simulator& state = simulator();
    thread_host_waits++;
    state.activity++;
    if (held_waits_fail_at_once && waits_for_a_closed_gate(stream, sequence, 4)) {
        std::lock_guard<std::mutex> guard(state.mutex);
        state.violations.push_back(std::string(call) + " made the host wait for the held " + stream->describe() +
                                   " (refused at once: this thread must never wait for a held stream)");
        return Status::host_wait_timeout;
    }
    std::unique_lock<std::mutex> lock(stream->mutex);
    const std::chrono::milliseconds timeout(state.host_wait_timeout_ms.load());
    const auto done_or_faulted = [&] {
        return stream->completed >= sequence || fault_of(stream->device) != Status::success;
    };
    if (!stream->changed.wait_for(lock, timeout, done_or_faulted)) {
        lock.unlock();
        std::lock_guard<std::mutex> guard(state.mutex);
        state.violations.push_back(std::string(call) + " made the host wait for the held " + stream->describe() +
                                   " (timed out)");
        return Status::host_wait_timeout;
    }
    return fault_of(stream->device);  // success, or the sticky fault that ended the wait
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

// ---- test controls -----------------------------------------------------------------

bool run_on_a_thread_with_id(std::thread::id id, const std::function<void()>& work) {
    for (int attempt = 0; attempt < 1000; attempt++) {
        bool reused = false;
        std::thread([&] {
            reused = std::this_thread::get_id() == id;
            if (reused) {
                work();
            }
        }).join();
        if (reused) {
            return true;
        }
    }
    return false;
}

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
    StreamState* target = resolve_number(stream, device);
    std::lock_guard<std::mutex> simulator_lock(simulator().mutex);  // every push is made under it
    const Status status = push_locked(target, Item{[state] {
                                          std::unique_lock<std::mutex> lock(state->mutex);
                                          state->opened.wait(lock, [&] { return state->open; });
                                      },
                                                   {}});
    MTSARRAY_EXPECTS(status == Status::success,
                     std::string("hold on a simulated stream failed: ") + SimulatedErrors::name(status));
    if (target->capture != nullptr) {
        return gate;  // a node of the graph under capture: held where it is launched
    }
    // where the gate is, for the host waits that meet it
    std::lock_guard<std::mutex> lock(target->mutex);
    auto& gates = target->gates;
    gates.erase(std::remove_if(gates.begin(), gates.end(),
                               [&](const auto& entry) { return entry.first <= target->completed; }),
                gates.end());
    gates.emplace_back(target->pushed, [state] {
        std::lock_guard<std::mutex> gate_lock(state->mutex);
        return !state->open;
    });
    return gate;
}

bool fail_host_waits_on_held_streams(bool fail) {
    const bool previous = held_waits_fail_at_once;
    held_waits_fail_at_once = fail;
    return previous;
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

std::chrono::milliseconds set_host_wait_timeout(std::chrono::milliseconds timeout) {
    return std::chrono::milliseconds(simulator().host_wait_timeout_ms.exchange(timeout.count()));
}

}  // namespace sim

// ---- the traits -----------------------------------------------------------------------

using sim::Status;
using sim::simulator;

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

int SimulatedRuntime::stream_device(StreamHandle handle) {
    sim::refuse_unusable_runtime("cudaStreamGetDevice");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    const sim::StreamState* stream = sim::resolve_locked(handle);
    if (stream == nullptr) {
        sim::fail(Status::invalid_resource_handle, "cudaStreamGetDevice");
    }
    return stream->device;
}

SimulatedRuntime::StreamHandle SimulatedRuntime::create_stream() {
    sim::refuse_unusable_runtime("cudaStreamCreate");
    return reinterpret_cast<StreamHandle>(static_cast<intptr_t>(sim::create_stream(sim::current, false)));
}

// cudaLaunchHostFunc (Runtime API, "Stream Management"): the function runs
// once the work queued before it is done and blocks the work queued after
// it; on a capturing stream it is a host node, run at every replay. Here it
// runs on the stream's worker, in its turn.
void SimulatedRuntime::launch_host_function(StreamHandle stream, void (*function)(void*), void* data) {
    sim::refuse_unusable_runtime("cudaLaunchHostFunc");
    sim::check(sim::push(
                   stream, [function, data] { function(data); }, "cudaLaunchHostFunc", false),
               "cudaLaunchHostFunc");
}

SimulatedRuntime::EventHandle SimulatedRuntime::create_event() {
    sim::refuse_unusable_runtime("cudaEventCreateWithFlags");
    sim::touch_device(sim::current);
    return new sim::EventState(sim::current);
}

void SimulatedRuntime::destroy_event(EventHandle event) noexcept {
    // refused once the runtime is unloaded, and deleted all the same: the
    // driver reclaims what the process held
    (void)sim::refused_unusable_runtime("cudaEventDestroy");
    delete event;
}

void SimulatedRuntime::record_event(EventHandle event, StreamHandle handle) {
    sim::refuse_unusable_runtime("cudaEventRecord");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::StreamState* stream = sim::resolve_locked(handle);
    if (stream == nullptr || event == nullptr || stream->device != event->device) {
        sim::fail(Status::invalid_resource_handle, "cudaEventRecord");
    }
    if (stream->capture != nullptr) {
        event->stream = stream;
        event->capture = sim::capture_of(stream);
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
    sim::refuse_unusable_runtime("cudaEventQuery");
    sim::StreamState* stream = nullptr;
    uint64_t sequence = 0;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        simulator().activity++;
        sim::check(sim::unsafe_call_locked("cudaEventQuery"), "cudaEventQuery");
        sim::check(sim::captured_event_locked(event, "cudaEventQuery"), "cudaEventQuery");
        stream = event->stream;
        sequence = event->sequence;
    }
    if (stream == nullptr) {
        return true;
    }
    bool done = false;
    {
        std::lock_guard<std::mutex> lock(stream->mutex);
        done = stream->completed >= sequence;
    }
    if (!done) {
        sim::leave_not_ready();  // faults.cpp: the HIP flavour's last error
    }
    return done;
}

void SimulatedRuntime::synchronize_event(EventHandle event) {
    sim::refuse_unusable_runtime("cudaEventSynchronize");
    sim::StreamState* stream = nullptr;
    uint64_t sequence = 0;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        sim::check(sim::unsafe_call_locked("cudaEventSynchronize"), "cudaEventSynchronize");
        sim::check(sim::captured_event_locked(event, "cudaEventSynchronize"), "cudaEventSynchronize");
        stream = event->stream;
        sequence = event->sequence;
    }
    if (stream != nullptr) {
        sim::check(sim::host_wait(stream, sequence, "cudaEventSynchronize"), "cudaEventSynchronize");
    } else {
        sim::thread_host_waits++;
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::release_above_thresholds_locked();
}

void SimulatedRuntime::stream_wait_event(StreamHandle handle, EventHandle event) {
    sim::refuse_unusable_runtime("cudaStreamWaitEvent");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::StreamState* stream = sim::resolve_locked(handle);
    if (stream == nullptr || event == nullptr) {
        sim::fail(Status::invalid_resource_handle, "cudaStreamWaitEvent");
    }
    if (event->capture != nullptr && event->capture->ended) {
        sim::fail(Status::captured_event, "cudaStreamWaitEvent");
    }
    if (event->capture != nullptr) {
        if (stream->capture == event->capture.get()) {
            return;  // the recorded graph is run in order anyway
        }
        if (stream->capture != nullptr) {
            sim::invalidate(stream->capture, "cudaStreamWaitEvent on an event of another capture");
            sim::fail(Status::capture_isolation, "cudaStreamWaitEvent");
        }
        // the waiting stream joins the capture (a fork)
        stream->capture = event->capture.get();
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
    sim::refuse_unusable_runtime("cudaStreamSynchronize");
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
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::release_above_thresholds_locked();  // memory.cpp: pools give memory back at synchronisations
}

void SimulatedRuntime::synchronize_device() {
    sim::refuse_unusable_runtime("cudaDeviceSynchronize");
    std::vector<std::pair<sim::StreamState*, uint64_t>> streams;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        for (auto& capture : simulator().captures) {
            if (capture->origin->device == sim::current) {
                sim::invalidate(capture.get(), "cudaDeviceSynchronize while a stream of the device captures");
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
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::release_above_thresholds_locked();
}

}  // namespace mtsarray_test
