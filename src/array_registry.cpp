#include "array_registry.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <new>

#include "error.hpp"

namespace mtsarray::detail {

using namespace registry;

std::atomic<Chunk*> registry::chunks[chunk_count];

namespace {

// Freed slots wait until this many others are free before being reused, so
// that a generation wraps only after ~2^28 * 4096 destroys.
constexpr size_t reuse_delay = 4096;

// What registration and frees need; never destroyed: arrays may outlive
// static destruction (held by a TensorMap in a static of the user's program).
struct Table {
    std::atomic<size_t> live{0};

    std::mutex mutex;  // guards what follows: registration and frees only
    std::deque<uint32_t> free_slots;
    uint64_t fresh_slots = 0;  // slots ever handed out
};

Table& table() {
    static auto* instance = new Table();
    return *instance;
}

Slot* slot_of(uint64_t slot) noexcept {
    Chunk* chunk = chunks[slot >> chunk_bits].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : &chunk->slots[slot & (slots_per_chunk - 1)];
}

struct Decoded {
    Slot* slot;
    uint64_t live_state;  // the state the slot has while this handle is live
};

// The slot of a well-formed handle and the state it must be in, or
// {nullptr, 0} for anything else.
Decoded decode(const void* handle) noexcept {
    const auto bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
    if ((bits & tag_mask) != handle_tag) {
        return {nullptr, 0};
    }
    const uint64_t generation = (bits >> slot_bits) & generation_mask;
    return {slot_of(bits & slot_mask), (generation << 1) | 1};
}

bool matches(uint64_t state, uint64_t live_state) noexcept {
    return (state & compared_state_bits) == live_state;
}

}  // namespace

void* register_array(Array* array) {
    auto& bookkeeping = table();
    uint64_t index = 0;
    {
        std::lock_guard<std::mutex> lock(bookkeeping.mutex);
        if (bookkeeping.free_slots.size() > reuse_delay) {
            index = bookkeeping.free_slots.front();
            bookkeeping.free_slots.pop_front();
        } else {
            if (bookkeeping.fresh_slots > slot_mask) {
                throw OutOfMemory("mtsarray can not track more than 2^28 live arrays");
            }
            index = bookkeeping.fresh_slots;
            auto& chunk = chunks[index >> chunk_bits];
            if (chunk.load(std::memory_order_relaxed) == nullptr) {
                auto* fresh = new (std::nothrow) Chunk();
                if (fresh == nullptr) {
                    throw OutOfMemory("out of host memory for the table of live arrays");
                }
                chunk.store(fresh, std::memory_order_release);
            }
            bookkeeping.fresh_slots++;
        }
    }
    Slot& slot = *slot_of(index);
    const uint64_t generation = slot.state.load(std::memory_order_relaxed) >> 1;
    slot.masked_array.store(reinterpret_cast<uintptr_t>(array) ^ pointer_mask, std::memory_order_relaxed);
    slot.state.store((generation << 1) | 1, std::memory_order_release);
    bookkeeping.live.fetch_add(1, std::memory_order_relaxed);
    const uint64_t handle = handle_tag | ((generation & generation_mask) << slot_bits) | index;
    return reinterpret_cast<void*>(static_cast<uintptr_t>(handle));
}

Array* unregister_array(const void* handle) noexcept {
    const Decoded decoded = decode(handle);
    if (decoded.slot == nullptr) {
        return nullptr;
    }
    Slot& slot = *decoded.slot;
    uint64_t state = slot.state.load(std::memory_order_acquire);
    // one CAS from "live in this generation" to "free, next generation":
    // of several threads unregistering the same handle, one wins
    do {
        if (!matches(state, decoded.live_state)) {
            return nullptr;
        }
    } while (!slot.state.compare_exchange_weak(state, ((state >> 1) + 1) << 1, std::memory_order_acq_rel,
                                               std::memory_order_acquire));
    auto* array = reinterpret_cast<Array*>(slot.masked_array.load(std::memory_order_relaxed) ^ pointer_mask);

    auto& bookkeeping = table();
    bookkeeping.live.fetch_sub(1, std::memory_order_relaxed);
    const auto bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
    try {
        std::lock_guard<std::mutex> lock(bookkeeping.mutex);
        bookkeeping.free_slots.push_back(static_cast<uint32_t>(bits & slot_mask));
    } catch (...) {
        // no memory for the free list: the slot is simply never reused
    }
    return array;
}

size_t live_array_count() noexcept {
    return table().live.load(std::memory_order_relaxed);
}

}  // namespace mtsarray::detail
