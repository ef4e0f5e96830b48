#pragma once
// Handles: the values mtsarray hands out for its objects -- arrays (the
// `ptr` of an mts_array_t) and movement plans (an mtsarray_move_plan_t*).
//
// A handle is not the address of the object: it names a slot of a table
// plus the generation of that slot and the kind of object in it, so that
//  - a destroyed object's handle is recognised as such even when a new
//    object lives at the same address or in the same slot (every
//    unregistration advances the slot's generation, and freed slots are
//    reused oldest first): a second destroy, or a use after it, finds
//    nothing instead of freed memory;
//  - a handle of one kind is never taken for another (a plan passed where
//    an array goes, or the other way round);
//  - a foreign pointer (another library's array, any address) is rejected
//    without being read: handles carry a tag in their top byte, which no
//    user-space address has on x86-64, AArch64 or POWER;
//  - finding the object behind a handle takes a few loads and no lock, from
//    any number of threads.
//
// Guarantee: a handle is valid from `register_handle` until
// `unregister_handle` on it, and is reported as "not an object of its kind"
// afterwards until its slot has been reused 2^28 times (at least 2^28
// unregistrations of other objects later).
//
// The table stores the object pointers XOR-masked: it is not a root for
// LeakSanitizer, so an object that nobody destroys is reported as a leak.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace mtsarray::detail {

class Array;

/// What a handle names. Kept in the slot's state: a handle finds its object
/// only through a look-up for its own kind.
enum class HandleKind : uint64_t { array = 0, move_plan = 1 };
constexpr size_t handle_kind_count = 2;

/// The handle layout and the table, for the inline find_handle below (every
/// callback starts there); only handle_registry.cpp writes them.
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

// A slot's state: generation << 2 | kind << 1 | live.
constexpr unsigned state_generation_shift = 2;
constexpr uint64_t live_bit = 1;
// The generation (as handles carry it), the kind and the live bit.
constexpr uint64_t compared_state_bits = (generation_mask << state_generation_shift) | 3;

/// The state of a slot holding a live object of `kind` in `generation`.
constexpr uint64_t live_state(uint64_t generation, HandleKind kind) noexcept {
    return ((generation & generation_mask) << state_generation_shift) | (static_cast<uint64_t>(kind) << 1) |
           live_bit;
}

// Keeps the table from being a root for LeakSanitizer's pointer scan.
constexpr uintptr_t pointer_mask = uintptr_t(0x5A17C3E95A17C3E9);

constexpr unsigned chunk_bits = 14;
constexpr size_t slots_per_chunk = size_t(1) << chunk_bits;
constexpr size_t chunk_count = size_t(1) << (slot_bits - chunk_bits);

struct Slot {
    std::atomic<uint64_t> state{0};
    std::atomic<uintptr_t> masked_object{0};
};

struct Chunk {
    Slot slots[slots_per_chunk];
};

// A plain global array (zero before any code runs, never destroyed), so
// that a lookup pays no guard of a function-local static.
extern std::atomic<Chunk*> chunks[chunk_count];

}  // namespace registry

/// Gives `object` a slot and returns its handle (never NULL). Throws
/// OutOfMemory when the table is full (2^28 live objects) or can not grow.
void* register_handle(void* object, HandleKind kind);

/// Ends the life of `handle`: returns the object of `kind` it named and
/// frees the slot, or returns nullptr if `handle` is not a live handle of
/// that kind (never registered, foreign, of another kind, or already
/// unregistered). When several threads unregister one handle at once,
/// exactly one of them gets the object.
void* unregister_handle(const void* handle, HandleKind kind) noexcept;

/// The live object of `kind` behind `handle`, or nullptr: a few loads, no
/// lock.
inline void* find_handle(const void* handle, HandleKind kind) noexcept {
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
    const uint64_t expected = live_state(bits >> slot_bits, kind);
    if ((slot.state.load(std::memory_order_acquire) & compared_state_bits) != expected) {
        return nullptr;
    }
    const uintptr_t masked = slot.masked_object.load(std::memory_order_acquire);
    // checked again: the slot may have been freed and reused in between
    if ((slot.state.load(std::memory_order_acquire) & compared_state_bits) != expected) {
        return nullptr;
    }
    return reinterpret_cast<void*>(masked ^ pointer_mask);
}

/// Number of registered objects of `kind` (for the leak checks of the tests).
size_t live_handle_count(HandleKind kind) noexcept;

/// Number of slots ever taken from the table, live, free or waiting in a
/// thread's batch (for the tests: exiting threads give theirs back).
size_t used_slot_count() noexcept;

// ---- arrays -------------------------------------------------------------------

inline void* register_array(Array* array) {
    return register_handle(array, HandleKind::array);
}

inline Array* unregister_array(const void* handle) noexcept {
    return static_cast<Array*>(unregister_handle(handle, HandleKind::array));
}

/// The live Array behind `handle` (an mts_array_t's ptr), or nullptr.
inline Array* find_array(const void* handle) noexcept {
    return static_cast<Array*>(find_handle(handle, HandleKind::array));
}

inline size_t live_array_count() noexcept {
    return live_handle_count(HandleKind::array);
}

}  // namespace mtsarray::detail
