#pragma once
// Handles: the value mtsarray puts in `mts_array_t::ptr`.
//
// A handle is not the address of the Array: it names a slot of a table plus
// the generation of that slot, so that
//  - a destroyed array's handle is recognised as such even when a new array
//    lives at the same address or in the same slot (every destroy advances
//    the slot's generation, and freed slots are reused oldest first);
//  - a foreign pointer (another library's array) is rejected without being
//    read: handles carry a tag in their top byte, which no user-space
//    address has on x86-64, AArch64 or POWER;
//  - finding the Array behind a handle takes a few loads and no lock, from
//    any number of threads.
//
// Guarantee: a handle is valid from `register_array` until `unregister_array`
// on it, and is reported as "not an array" afterwards until its slot has been
// reused 2^28 times (at least 2^28 destroys of other arrays later).
//
// The table stores the Array pointers XOR-masked: it is not a root for
// LeakSanitizer, so an Array that nobody destroys is reported as a leak.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mtsarray::detail {

class Array;

/// The handle layout and the table, for the inline find_array below (every
/// callback starts there); only array_registry.cpp writes them.
namespace registry {

static_assert(sizeof(void*) == 8, "mtsarray handles need 64-bit pointers");

// handle = tag (8 bits) | generation (28 bits) | slot (28 bits)
constexpr unsigned slot_bits = 28;
constexpr unsigned generation_bits = 28;
constexpr uint64_t slot_mask = (uint64_t(1) << slot_bits) - 1;
constexpr uint64_t generation_mask = (uint64_t(1) << generation_bits) - 1;
// No user-space address has a non-zero top byte (47- to 57-bit address
// spaces), so a real pointer can never carry this tag.
constexpr uint64_t handle_tag = uint64_t(0xA7) << 56;
constexpr uint64_t tag_mask = uint64_t(0xFF) << 56;
// The live bit and the generation of a slot's state, as handles carry them.
constexpr uint64_t compared_state_bits = (generation_mask << 1) | 1;

// Keeps the table from being a root for LeakSanitizer's pointer scan.
constexpr uintptr_t pointer_mask = uintptr_t(0x5A17C3E95A17C3E9);

constexpr unsigned chunk_bits = 14;
constexpr size_t slots_per_chunk = size_t(1) << chunk_bits;
constexpr size_t chunk_count = size_t(1) << (slot_bits - chunk_bits);

struct Slot {
    // generation << 1 | live
    std::atomic<uint64_t> state{0};
    std::atomic<uintptr_t> masked_array{0};
};

struct Chunk {
    Slot slots[slots_per_chunk];
};

// A plain global array (zero before any code runs, never destroyed), so
// that a lookup pays no guard of a function-local static.
extern std::atomic<Chunk*> chunks[chunk_count];

}  // namespace registry

/// Gives `array` a slot and returns its handle (never NULL). Throws
/// OutOfMemory when the table is full (2^28 live arrays) or can not grow.
void* register_array(Array* array);

/// Ends the life of `handle`: returns the Array it named and frees the slot,
/// or returns nullptr if `handle` is not live (never registered, foreign,
/// or already unregistered). When several threads unregister one handle at
/// once, exactly one of them gets the Array.
Array* unregister_array(const void* handle) noexcept;

/// The live Array behind `handle`, or nullptr: a few loads, no lock.
inline Array* find_array(const void* handle) noexcept {
    using namespace registry;
    const auto bits = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
    if ((bits & tag_mask) != handle_tag) {
        return nullptr;
    }
    const uint64_t index = bits & slot_mask;
    Chunk* chunk = chunks[index >> chunk_bits].load(std::memory_order_acquire);
    if (chunk == nullptr) {
        return nullptr;
    }
    const Slot& slot = chunk->slots[index & (slots_per_chunk - 1)];
    const uint64_t live_state = (((bits >> slot_bits) & generation_mask) << 1) | 1;
    if ((slot.state.load(std::memory_order_acquire) & compared_state_bits) != live_state) {
        return nullptr;
    }
    const uintptr_t masked = slot.masked_array.load(std::memory_order_acquire);
    // checked again: the slot may have been freed and reused in between
    if ((slot.state.load(std::memory_order_acquire) & compared_state_bits) != live_state) {
        return nullptr;
    }
    return reinterpret_cast<Array*>(masked ^ pointer_mask);
}

/// Number of registered arrays (for the leak checks of the tests).
size_t live_array_count() noexcept;

/// Number of slots ever taken from the table, live, free or waiting in a
/// thread's batch (for the tests: exiting threads give theirs back).
size_t used_slot_count() noexcept;

}  // namespace mtsarray::detail
