#include "core/handle_registry.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <new>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define MTSARRAY_HAS_PTHREAD_ATFORK 1
#else
#define MTSARRAY_HAS_PTHREAD_ATFORK 0
#endif

#include "base/error.hpp"

namespace mtsarray::detail {

using namespace registry;

std::atomic<Chunk*> registry::chunks[chunk_count];

namespace {

// Freed slots wait until this many others are free before being reused, so
// that a generation wraps only after ~2^28 * 4096 unregistrations.
constexpr size_t reuse_delay = 4096;

// What registration and frees need; never destroyed: arrays may outlive
// static destruction (held by a TensorMap in a static of the user's program).
struct Table {
    std::atomic<size_t> live[handle_kind_count] = {};  // by HandleKind

    std::mutex mutex;  // guards what follows: slots moving to and from threads
    std::deque<uint32_t> free_slots;
    uint64_t fresh_slots = 0;  // slots ever handed out
};

// fork(): the table's lock is taken around it, so that the child gets the
// table in a consistent state and the lock free (another thread of the
// parent may have been inside it: the child would wait forever for a
// thread it does not have). The slots other threads of the parent held
// ready or freed are never reused in the child; its arrays work as usual.
Table& table() {
    static auto* instance = [] {
        auto* made = new Table();
#if MTSARRAY_HAS_PTHREAD_ATFORK
        pthread_atfork([] { table().mutex.lock(); }, [] { table().mutex.unlock(); },
                       [] { table().mutex.unlock(); });
#endif
        return made;
    }();
    return *instance;
}

// Slots move between the table and each thread in batches: a thread keeps a
// few free slots to hand out and collects the ones it frees, and takes the
// table's lock once per `batch_size` arrays made or destroyed, not twice per
// array (the lock and the queue were a fifth of the cost of a new scalar
// array, and every thread making arrays contended on the one lock). Slots
// reach the threads from the front of the table's queue only, so a freed
// slot is still reused after at least `reuse_delay` others.
constexpr uint32_t batch_size = 32;

// This thread's slots: plain data, zero before the thread runs and never
// destroyed, so that arrays destroyed while the thread exits (in the
// destructors of its other thread_local objects, or of the program's
// statics on the main thread) still find it usable.
struct ThreadSlots {
    uint32_t ready[batch_size];  // free slots to hand out, the next one last
    uint32_t ready_count;
    uint32_t freed[batch_size];  // slots freed here, not yet in the table
    uint32_t freed_count;
    // the thread is exiting and gave its slots back: one slot at a time
    bool exiting;
};
thread_local ThreadSlots thread_slots;

uint32_t batch_limit(const ThreadSlots& local) noexcept {
    return local.exiting ? 1 : batch_size;
}

// Called with the table's lock held.
void give_back_freed_locked(Table& bookkeeping, ThreadSlots& local) noexcept {
    try {
        bookkeeping.free_slots.insert(bookkeeping.free_slots.end(), local.freed, local.freed + local.freed_count);
    } catch (...) {
        // no memory for the queue: these slots are simply never reused
    }
    local.freed_count = 0;
}

void give_back_freed(Table& bookkeeping, ThreadSlots& local) noexcept {
    try {
        std::lock_guard<std::mutex> lock(bookkeeping.mutex);
        give_back_freed_locked(bookkeeping, local);
    } catch (...) {
        local.freed_count = 0;  // the lock failed: these slots are never reused
    }
}

// Gives the slots of a thread back to the table when the thread exits.
struct ThreadSlotsReturn {
    ThreadSlotsReturn() noexcept = default;
    ThreadSlotsReturn(const ThreadSlotsReturn&) = delete;
    ThreadSlotsReturn& operator=(const ThreadSlotsReturn&) = delete;
    ~ThreadSlotsReturn() {
        ThreadSlots& local = thread_slots;
        auto& bookkeeping = table();
        // the ready slots are free too (their generation already advanced)
        for (uint32_t i = local.ready_count; i-- > 0;) {
            local.freed[local.freed_count++] = local.ready[i];
            if (local.freed_count == batch_size) {
                give_back_freed(bookkeeping, local);
            }
        }
        local.ready_count = 0;
        give_back_freed(bookkeeping, local);
        local.exiting = true;
    }
};

// Makes sure this thread gives its slots back when it exits: called each
// time the thread starts holding slots.
void arrange_return_at_thread_exit() noexcept {
    thread_local ThreadSlotsReturn at_exit;
    (void)at_exit;
}

// Fills this thread's ready slots, from the front of the table's queue when
// more than `reuse_delay` are waiting there, else with never used slots.
void refill(ThreadSlots& local) {
    auto& bookkeeping = table();
    const uint32_t wanted = batch_limit(local);
    {
        std::lock_guard<std::mutex> lock(bookkeeping.mutex);
        while (local.ready_count < wanted && bookkeeping.free_slots.size() > reuse_delay) {
            // the slot freed first is handed out first
            local.ready[wanted - 1 - local.ready_count++] = bookkeeping.free_slots.front();
            bookkeeping.free_slots.pop_front();
        }
        while (local.ready_count < wanted) {
            if (bookkeeping.fresh_slots > slot_mask) {
                if (local.ready_count > 0) {
                    break;
                }
                throw OutOfMemory("mtsarray can not track more than 2^28 live arrays and plans");
            }
            const uint64_t index = bookkeeping.fresh_slots;
            auto& chunk = chunks[index >> chunk_bits];
            if (chunk.load(std::memory_order_relaxed) == nullptr) {
                auto* fresh = new (std::nothrow) Chunk();
                if (fresh == nullptr) {
                    if (local.ready_count > 0) {
                        break;
                    }
                    throw OutOfMemory("out of host memory for the table of live arrays and plans");
                }
                chunk.store(fresh, std::memory_order_release);
            }
            local.ready[wanted - 1 - local.ready_count++] = static_cast<uint32_t>(index);
            bookkeeping.fresh_slots++;
        }
    }
    if (local.ready_count < wanted) {
        // a short batch: the slots handed out next are at the end of `ready`
        for (uint32_t i = 0; i < local.ready_count; i++) {
            local.ready[i] = local.ready[wanted - local.ready_count + i];
        }
    }
    if (!local.exiting) {
        arrange_return_at_thread_exit();
    }
}

Slot* slot_of(uint64_t slot) noexcept {
    Chunk* chunk = chunks[slot >> chunk_bits].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : &chunk->slots[slot & (slots_per_chunk - 1)];
}

struct Decoded {
    Slot* slot;
    uint64_t expected_state;  // the state the slot has while this handle is live
};

// The slot of a well-formed handle and the state it must be in while it
// names a live object of `kind`, or {nullptr, 0} for anything else.
Decoded decode(const void* handle, HandleKind kind) noexcept {
    const auto bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
    if ((bits & tag_mask) != handle_tag) {
        return {nullptr, 0};
    }
    return {slot_of(bits & slot_mask), live_state(bits >> slot_bits, kind)};
}

bool matches(uint64_t state, uint64_t expected_state) noexcept {
    return (state & compared_state_bits) == expected_state;
}

}  // namespace

void* register_handle(void* object, HandleKind kind) {
    ThreadSlots& local = thread_slots;
    if (local.ready_count == 0) {
        refill(local);
    }
    const uint64_t index = local.ready[--local.ready_count];
    Slot& slot = *slot_of(index);
    const uint64_t generation = slot.state.load(std::memory_order_relaxed) >> state_generation_shift;
    slot.masked_object.store(reinterpret_cast<uintptr_t>(object) ^ pointer_mask, std::memory_order_relaxed);
    slot.state.store(live_state(generation, kind), std::memory_order_release);
    table().live[static_cast<size_t>(kind)].fetch_add(1, std::memory_order_relaxed);
    const uint64_t handle = handle_tag | ((generation & generation_mask) << slot_bits) | index;
    return reinterpret_cast<void*>(static_cast<uintptr_t>(handle));
}

void* unregister_handle(const void* handle, HandleKind kind) noexcept {
    const Decoded decoded = decode(handle, kind);
    if (decoded.slot == nullptr) {
        return nullptr;
    }
    Slot& slot = *decoded.slot;
    uint64_t state = slot.state.load(std::memory_order_acquire);
    // one CAS from "live in this generation, of this kind" to "free, next
    // generation": of several threads unregistering the same handle, one wins
    do {
        if (!matches(state, decoded.expected_state)) {
            return nullptr;
        }
    } while (!slot.state.compare_exchange_weak(state, ((state >> state_generation_shift) + 1) << state_generation_shift,
                                               std::memory_order_acq_rel, std::memory_order_acquire));
    void* object = reinterpret_cast<void*>(slot.masked_object.load(std::memory_order_relaxed) ^ pointer_mask);

    auto& bookkeeping = table();
    bookkeeping.live[static_cast<size_t>(kind)].fetch_sub(1, std::memory_order_relaxed);
    const auto bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
    ThreadSlots& local = thread_slots;
    if (local.freed_count == 0 && !local.exiting) {
        arrange_return_at_thread_exit();
    }
    local.freed[local.freed_count++] = static_cast<uint32_t>(bits & slot_mask);
    if (local.freed_count >= batch_limit(local)) {
        give_back_freed(bookkeeping, local);
    }
    return object;
}

size_t live_handle_count(HandleKind kind) noexcept {
    return table().live[static_cast<size_t>(kind)].load(std::memory_order_relaxed);
}

size_t used_slot_count() noexcept {
    auto& bookkeeping = table();
    std::lock_guard<std::mutex> lock(bookkeeping.mutex);
    return static_cast<size_t>(bookkeeping.fresh_slots);
}

}  // namespace mtsarray::detail
