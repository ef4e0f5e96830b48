// The simulated runtime's memory: allocations, pools and copies, each rule
// with the section of the CUDA documentation it follows.
//
// Memory (Runtime API "Memory Management"; Programming Guide "Stream Ordered
//   Memory Allocator").
//   Device, page-locked and managed allocations are host memory that the CPU
//   backend never hands out, 256-byte aligned and filled with 0xDD. Freed
//   memory is poisoned and kept in quarantine (up to 256 MiB), never reused:
//   every queued copy, memset and kernel checks, when it runs, that the
//   memory it touches is still allocated and belongs to the stream's device
//   or is reachable from it (peers.cpp; peer copies excepted); a use of freed memory is a violation
//   (violations()), and a kernel that would touch freed memory does not
//   run (on a GPU it reads garbage or faults; on the host, the poisoned
//   values would send it anywhere and crash the test). free_async is stream ordered: the memory is freed when
//   the free's turn comes on its stream. Copies from page-locked memory read
//   it when they run; from pageable memory, the bytes are taken at the call,
//   and a copy of more than 1 MiB from pageable memory returns only once
//   its stream has reached it and it is done: a host wait for the stream.
//   A copy to pageable host memory returns only when it is done (Runtime API
//   "API synchronization behavior"): a host wait.
// The driver's staging space is finite (Runtime API "API synchronization
//   behavior": "If pageable memory must first be staged to pinned memory,
//   the driver may synchronize with the stream and stage the copy into
//   pinned memory"; "For transfers between device memory and pageable host
//   memory, the function might be synchronous with respect to host").
//   The pageable host -> device copies of up to 1 MiB share 1 MiB of it:
//   each holds its bytes there until it has run, on whatever stream; a copy
//   that does not fit waits on the host for the oldest pending ones to run
//   until it does -- behind whatever their streams run first.
// Device memory is finite (Runtime API cudaMemGetInfo; Programming Guide
//   "Stream Ordered Memory Allocator > Physical Page Caching Behavior": "By
//   default, the allocator tries to minimize the physical memory owned by a
//   pool. To reduce the OS calls to allocate and free physical memory,
//   applications must configure a memory footprint for each pool. [...] the
//   release threshold attribute"; Runtime API cudaMemPoolSetAttribute,
//   cudaMemPoolAttrReleaseThreshold: "Amount of reserved memory in bytes to
//   hold onto before trying to release memory back to the OS. When more
//   than the release threshold bytes of memory are held by the memory pool,
//   the allocator will try to release memory back to the OS on the next
//   call to stream, event or context synchronize. (default 0)";
//   cudaMemPoolTrimTo: it releases memory until the pool holds fewer than
//   the bytes asked, "or there is no more memory that the allocator can
//   safely release").
//   Each device has a size (set_device_memory, 80 GiB by default), which
//   pools, cudaMalloc and foreign allocators (ForeignCachingAllocator, the
//   place of PyTorch's caching allocator) share: an allocation beyond it
//   fails with cudaErrorMemoryAllocation. A pool holds what it allocated
//   until it gives it back: a block freed into it (when the free's turn
//   comes on its stream) stays cached for the pool's later allocations (one
//   takes what it needs of a cached block, the rest stays cached), and goes
//   back to the device when the pool is trimmed,
//   or -- beyond the pool's release threshold -- at the next stream, event
//   or device synchronisation. A pool allocation that does not fit fails
//   even when the pool has cached blocks (which may be too small or
//   fragmented: the driver does not trim for the caller). A foreign
//   allocator keeps its freed blocks, and empties its cache only when an
//   allocation of its own does not fit (then tries once more) or when asked.

#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "support/simulation/state.hpp"

namespace mtsarray_test {

using mtsarray::detail::Error;

namespace sim {

namespace {

/// The largest pageable host -> device copy the runtime stages at once,
/// without waiting for its stream.
constexpr size_t pageable_staging_bytes = size_t(1) << 20;

void* new_memory(size_t bytes) {
    void* data = ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t(alignment), std::nothrow);
    if (data != nullptr) {
        std::memset(data, poison, bytes == 0 ? 1 : bytes);
    }
    return data;
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

/// Frees the staging space of the pageable copies that have run. With the
/// simulator's mutex held.
void forget_staged_copies_run_locked() {
    auto& copies = simulator().staged_copies;
    for (auto copy = copies.begin(); copy != copies.end();) {
        bool done = false;
        {
            std::lock_guard<std::mutex> stream_lock(copy->stream->mutex);
            done = copy->stream->completed >= copy->sequence;
        }
        if (done) {
            simulator().staged_bytes -= copy->bytes;
            copy = copies.erase(copy);
        } else {
            ++copy;
        }
    }
}

}  // namespace

Status wait_for_staging_space(const void* handle, size_t bytes) {
    while (true) {
        Simulator::StagedCopy oldest{};
        {
            std::lock_guard<std::mutex> lock(simulator().mutex);
            StreamState* target = resolve_locked(handle);
            if (target == nullptr || target->capture != nullptr) {
                return Status::success;  // refused by the copy itself
            }
            forget_staged_copies_run_locked();
            if (simulator().staged_bytes + bytes <= pageable_staging_bytes) {
                return Status::success;
            }
            oldest = simulator().staged_copies.front();
        }
        const Status status =
            host_wait(oldest.stream, oldest.sequence, "cudaMemcpyAsync from pageable memory (the staging space full)");
        if (status != Status::success) {
            return status;
        }
    }
}

void* register_memory(size_t bytes, int device, MemoryKind kind, PoolState* pool, size_t block, bool foreign) {
    void* data = new_memory(bytes);
    if (data == nullptr) {
        return nullptr;
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    simulator().live[reinterpret_cast<uintptr_t>(data)] =
        Allocation{bytes == 0 ? 1 : bytes, device, kind, pool, block, foreign};
    return data;
}

bool take_device_memory_locked(int device, size_t bytes) {
    Simulator& state = simulator();
    if (bytes > state.device_memory[device] || state.device_used[device] > state.device_memory[device] - bytes) {
        return false;
    }
    state.device_used[device] += bytes;
    return true;
}

// Gives cached blocks of `pool` back to its device, largest first, until it
// holds at most `keep` bytes.
void trim_locked(PoolState* pool, size_t keep) {
    while (pool->reserved > keep && !pool->cached.empty()) {
        const auto largest = std::prev(pool->cached.end());
        pool->reserved -= *largest;
        simulator().device_used[pool->device] -= *largest;
        pool->cached.erase(largest);
    }
}

void release_above_thresholds_locked() {
    for (auto* pool : simulator().pools) {
        trim_locked(pool, pool->release_threshold);
    }
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
    const Allocation& allocation = found->second;
    if (allocation.kind == MemoryKind::device && !allocation.foreign) {
        if (allocation.pool != nullptr) {
            allocation.pool->cached.insert(allocation.block);  // kept by the pool
        } else {
            state.device_used[allocation.device] -= allocation.bytes;  // cudaFree
        }
    }
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

// Checks, when queued work runs, that [data, data + bytes) is allocated and,
// unless `any_device`, belongs to `device` (memory the simulator never
// allocated — pageable host memory — is not checked).
/// Whether `data` may be touched: false (and a violation) for freed memory.
bool check_memory(const void* data, size_t bytes, const char* what, int device, bool any_device) {
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
        if (!any_device && !peer_reachable_locked(allocation->second, device)) {
            // peers.cpp: another device's memory, reachable only once access was granted
            state.violations.push_back(std::string(what) + " on device " + std::to_string(device) +
                                       " touched memory of device " + std::to_string(allocation->second.device) +
                                       " without peer access");
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

// ---- test controls -----------------------------------------------------------------

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

size_t set_device_memory(int device, size_t bytes) {
    MTSARRAY_EXPECTS(device >= 0 && device < simulator().devices, "no simulated device " + std::to_string(device));
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return std::exchange(simulator().device_memory[device], bytes);
}

size_t device_memory_used(int device) {
    MTSARRAY_EXPECTS(device >= 0 && device < simulator().devices, "no simulated device " + std::to_string(device));
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().device_used[device];
}

struct ForeignCachingAllocator::State {
    std::mutex mutex;
    std::map<void*, size_t> in_use;
    std::multimap<size_t, void*> cached;
    size_t reserved = 0;
};

ForeignCachingAllocator::ForeignCachingAllocator(int device) : device_(device), state_(std::make_unique<State>()) {
    MTSARRAY_EXPECTS(device >= 0 && device < simulator().devices, "no simulated device " + std::to_string(device));
}

ForeignCachingAllocator::~ForeignCachingAllocator() {
    empty_cache();
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::lock_guard<std::mutex> simulator_lock(simulator().mutex);
    for (const auto& block : state_->in_use) {
        release_locked(block.first, "a foreign allocator's free");
        simulator().device_used[device_] -= block.second;
    }
}

void* ForeignCachingAllocator::allocate(size_t bytes) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const auto cached = state_->cached.lower_bound(bytes);
    if (cached != state_->cached.end()) {
        void* data = cached->second;
        state_->in_use[data] = cached->first;
        state_->cached.erase(cached);
        return data;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        bool taken = false;
        {
            std::lock_guard<std::mutex> simulator_lock(simulator().mutex);
            taken = take_device_memory_locked(device_, bytes);
            if (!taken && attempt == 0) {
                // out of memory: its whole cache back to the device, once
                for (const auto& block : state_->cached) {
                    release_locked(block.second, "a foreign allocator's free");
                    simulator().device_used[device_] -= block.first;
                    state_->reserved -= block.first;
                }
                state_->cached.clear();
            }
        }
        if (taken) {
            void* data = register_memory(bytes, device_, MemoryKind::device, nullptr, 0, /*foreign=*/true);
            if (data == nullptr) {
                std::lock_guard<std::mutex> simulator_lock(simulator().mutex);
                simulator().device_used[device_] -= bytes;
                return nullptr;
            }
            state_->in_use[data] = bytes;
            state_->reserved += bytes;
            return data;
        }
    }
    return nullptr;
}

void ForeignCachingAllocator::free(void* data) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const auto found = state_->in_use.find(data);
    MTSARRAY_EXPECTS(found != state_->in_use.end(), "ForeignCachingAllocator::free of memory it did not give");
    state_->cached.emplace(found->second, data);
    state_->in_use.erase(found);
}

void ForeignCachingAllocator::empty_cache() {
    std::lock_guard<std::mutex> lock(state_->mutex);
    std::lock_guard<std::mutex> simulator_lock(simulator().mutex);
    for (const auto& block : state_->cached) {
        release_locked(block.second, "a foreign allocator's free");
        simulator().device_used[device_] -= block.first;
        state_->reserved -= block.first;
    }
    state_->cached.clear();
}

size_t ForeignCachingAllocator::reserved() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->reserved;
}

size_t host_to_device_copies() { return uploads.load(); }
size_t device_allocations() { return device_allocation_count.load(); }

}  // namespace sim

// ---- the traits -----------------------------------------------------------------------

using sim::MemoryKind;
using sim::Status;
using sim::simulator;

// Pool calls, and stream-ordered allocation and free on a stream that is
// not capturing, are potentially unsafe (cudaThreadExchangeStreamCapture-
// Mode): while another thread captures in Global mode they fail and
// invalidate that capture unless this thread is Relaxed. (On a capturing
// stream they would be captured as graph nodes instead; mtsarray makes none.)
SimulatedRuntime::PoolHandle SimulatedRuntime::create_pool(int device) {
    sim::refuse_unusable_runtime("cudaMemPoolCreate");
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        sim::check(sim::unsafe_call_locked("cudaMemPoolCreate"), "cudaMemPoolCreate");
    }
    sim::touch_device(device);
    auto* pool = new sim::PoolState(device);
    std::lock_guard<std::mutex> lock(simulator().mutex);
    simulator().pools.push_back(pool);
    return pool;
}

void SimulatedRuntime::set_release_threshold(PoolHandle pool, uint64_t bytes) {
    sim::refuse_unusable_runtime("cudaMemPoolSetAttribute");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::check(sim::unsafe_call_locked("cudaMemPoolSetAttribute"), "cudaMemPoolSetAttribute");
    pool->release_threshold = bytes;
}

void SimulatedRuntime::trim_pool(PoolHandle pool) noexcept {
    if (sim::refused_unusable_runtime("cudaMemPoolTrimTo")) {
        return;
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    const Status status = sim::unsafe_call_locked("cudaMemPoolTrimTo");
    sim::report(status, "cudaMemPoolTrimTo");
    if (status == Status::success) {
        sim::trim_locked(pool, 0);
    }
}

size_t SimulatedRuntime::device_memory_bytes(int device) {
    sim::refuse_unusable_runtime("cudaMemGetInfo");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().device_memory[device];
}

void* SimulatedRuntime::allocate_from_pool(size_t bytes, PoolHandle pool, StreamHandle handle) {
    sim::refuse_unusable_runtime("cudaMallocFromPoolAsync");
    sim::device_allocation_count++;
    size_t block = 0;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        sim::StreamState* stream = sim::resolve_locked(handle);
        if (stream == nullptr || pool == nullptr || stream->device != pool->device) {
            sim::fail(Status::invalid_resource_handle, "cudaMallocFromPoolAsync");
        }
        if (stream->capture == nullptr) {
            sim::check(sim::unsafe_call_locked("cudaMallocFromPoolAsync"), "cudaMallocFromPoolAsync");
        }
        const size_t needed = bytes == 0 ? 1 : bytes;
        const auto cached = pool->cached.lower_bound(needed);
        if (cached != pool->cached.end()) {
            // a freed block of the pool, reused: the allocation takes what
            // it needs, the rest stays cached
            const size_t rest = *cached - needed;
            pool->cached.erase(cached);
            if (rest != 0) {
                pool->cached.insert(rest);
            }
            block = needed;
        } else if (sim::take_device_memory_locked(pool->device, needed)) {
            block = needed;
            pool->reserved += needed;
        } else {
            mtsarray::detail::gpu::check_allocation<SimulatedErrors>(
                Status::memory_allocation, "cudaMallocFromPoolAsync", bytes, "simulated_runtime", 0);
        }
    }
    void* data = sim::register_memory(bytes, pool->device, MemoryKind::device, pool, block);
    if (data == nullptr) {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        pool->cached.insert(block);
        mtsarray::detail::gpu::check_allocation<SimulatedErrors>(Status::memory_allocation, "cudaMallocFromPoolAsync",
                                                                 bytes, "simulated_runtime", 0);
    }
    return data;
}

void SimulatedRuntime::free_async(void* data, StreamHandle stream) noexcept {
    if (sim::refused_unusable_runtime("cudaFreeAsync")) {
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
            "cudaFreeAsync", false, false, {{data, sim::AccessKind::free, "cudaFreeAsync"}});
        sim::report(status, "cudaFreeAsync");
    } catch (...) {
        sim::report(Status::memory_allocation, "cudaFreeAsync");
    }
}

void* SimulatedRuntime::allocate_pinned(size_t bytes) {
    sim::refuse_unusable_runtime("cudaHostAlloc");
    sim::check(sim::synchronize_device_implicitly("cudaHostAlloc"), "cudaHostAlloc");
    void* data = sim::register_memory(bytes, sim::current, MemoryKind::pinned);
    if (data == nullptr) {
        mtsarray::detail::gpu::check_allocation<SimulatedErrors>(Status::memory_allocation, "cudaHostAlloc", bytes,
                                                                 "simulated_runtime", 0);
    }
    std::lock_guard<std::mutex> lock(simulator().mutex);
    simulator().pinned_allocations++;
    return data;
}

void SimulatedRuntime::free_pinned(void* data) noexcept {
    if (sim::refused_unusable_runtime("cudaFreeHost")) {
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
    sim::refuse_unusable_runtime("cudaMallocManaged");
    sim::check(sim::synchronize_device_implicitly("cudaMallocManaged"), "cudaMallocManaged");
    void* data = sim::register_memory(bytes, sim::current, MemoryKind::managed);
    if (data == nullptr) {
        mtsarray::detail::gpu::check_allocation<SimulatedErrors>(Status::memory_allocation, "cudaMallocManaged",
                                                                 bytes, "simulated_runtime", 0);
    }
    return data;
}

void SimulatedRuntime::free_managed(void* data) noexcept {
    free_device(data);  // cudaFree, as for device memory: it waits for the device
}

void* SimulatedRuntime::allocate_device(size_t bytes) {
    sim::refuse_unusable_runtime("cudaMalloc");
    // cudaMalloc: potentially unsafe during a capture (Relaxed mode allows
    // it); it does not wait for the device
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        sim::check(sim::unsafe_call_locked("cudaMalloc"), "cudaMalloc");
    }
    sim::device_allocation_count++;
    const int device = sim::current;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        if (!sim::take_device_memory_locked(device, bytes == 0 ? 1 : bytes)) {
            mtsarray::detail::gpu::check_allocation<SimulatedErrors>(Status::memory_allocation, "cudaMalloc", bytes,
                                                                     "simulated_runtime", 0);
        }
    }
    void* data = sim::register_memory(bytes, device, MemoryKind::device);
    if (data == nullptr) {
        {
            std::lock_guard<std::mutex> lock(simulator().mutex);
            simulator().device_used[device] -= bytes == 0 ? 1 : bytes;
        }
        mtsarray::detail::gpu::check_allocation<SimulatedErrors>(Status::memory_allocation, "cudaMalloc", bytes,
                                                                 "simulated_runtime", 0);
    }
    return data;
}

void SimulatedRuntime::free_device(void* data) noexcept {
    if (sim::refused_unusable_runtime("cudaFree")) {
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

void SimulatedRuntime::copy_device_to_device_async(void* destination, const void* source, size_t bytes,
                                                   StreamHandle stream) {
    sim::refuse_unusable_runtime("cudaMemcpyAsync");
    const int device = sim::current;
    sim::check(sim::push(
                   stream,
                   [=] {
                       sim::check_memory(source, bytes, "cudaMemcpyAsync (source)", device);
                       sim::check_memory(destination, bytes, "cudaMemcpyAsync (destination)", device);
                       std::memcpy(destination, source, bytes);
                   },
                   "cudaMemcpyAsync", false, false,
                   {{source, sim::AccessKind::read, "cudaMemcpyAsync (source)"},
                    {destination, sim::AccessKind::write, "cudaMemcpyAsync (destination)"}}),
               "cudaMemcpyAsync");
}

void SimulatedRuntime::copy_host_to_device_async(void* destination, const void* source, size_t bytes,
                                                 StreamHandle handle) {
    sim::refuse_unusable_runtime("cudaMemcpyAsync");
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
                       "cudaMemcpyAsync", false, false,
                       {{source, sim::AccessKind::read, "cudaMemcpyAsync (page-locked source)"},
                        {destination, sim::AccessKind::write, "cudaMemcpyAsync (destination)"}}),
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
    if (bytes <= sim::pageable_staging_bytes) {
        sim::check(sim::wait_for_staging_space(handle, bytes), "cudaMemcpyAsync");
    }
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
                                                      sim::NodeKind::copy,
                                                      {{destination, sim::AccessKind::write,
                                                        "cudaMemcpyAsync (destination)"}}}),
                   "cudaMemcpyAsync");
        if (target->capture != nullptr) {
            return;
        }
        if (bytes <= sim::pageable_staging_bytes) {
            // its bytes hold staging space until the copy has run
            std::lock_guard<std::mutex> stream_lock(target->mutex);
            simulator().staged_copies.push_back({target, target->pushed, bytes});
            simulator().staged_bytes += bytes;
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
    sim::refuse_unusable_runtime("cudaMemcpyAsync");
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
                                                      {},
                                                      sim::NodeKind::copy,
                                                      {{source, sim::AccessKind::read, "cudaMemcpyAsync (source)"},
                                                       {destination, sim::AccessKind::write,
                                                        "cudaMemcpyAsync (destination)"}}}),
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
    sim::refuse_unusable_runtime("cudaMemcpyPeerAsync");
    sim::touch_device(destination_device);
    {
        // over the link or through the host (peers.cpp): the path is the
        // runtime's to choose, both are legal
        std::lock_guard<std::mutex> lock(simulator().mutex);
        const sim::StreamState* target = sim::resolve_locked(stream);
        if (target != nullptr && target->capture == nullptr) {
            if (sim::direct_peer_copy_locked(destination, source, target->device)) {
                simulator().direct_peer_copies++;
            } else {
                simulator().staged_peer_copies++;
            }
        }
    }
    sim::check(sim::push(
                   stream,
                   [=] {
                       sim::check_memory(source, bytes, "cudaMemcpyPeerAsync (source)", source_device);
                       sim::check_memory(destination, bytes, "cudaMemcpyPeerAsync (destination)",
                                         destination_device);
                       std::memcpy(destination, source, bytes);
                   },
                   "cudaMemcpyPeerAsync", false, false,
                   {{source, sim::AccessKind::read, "cudaMemcpyPeerAsync (source)"},
                    {destination, sim::AccessKind::write, "cudaMemcpyPeerAsync (destination)"}}),
               "cudaMemcpyPeerAsync");
}

void SimulatedRuntime::memset_async(void* data, unsigned char value, size_t bytes, StreamHandle stream) {
    sim::refuse_unusable_runtime("cudaMemsetAsync");
    const int device = sim::current;
    sim::check(sim::push(
                   stream,
                   [=] {
                       sim::check_memory(data, bytes, "cudaMemsetAsync", device);
                       std::memset(data, value, bytes);
                   },
                   "cudaMemsetAsync", true, false, {{data, sim::AccessKind::write, "cudaMemsetAsync"}}),
               "cudaMemsetAsync");
}

}  // namespace mtsarray_test
