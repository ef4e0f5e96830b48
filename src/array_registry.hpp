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

#include <cstddef>

namespace mtsarray::detail {

class Array;

/// Gives `array` a slot and returns its handle (never NULL). Throws
/// OutOfMemory when the table is full (2^28 live arrays) or can not grow.
void* register_array(Array* array);

/// Ends the life of `handle`: returns the Array it named and frees the slot,
/// or returns nullptr if `handle` is not live (never registered, foreign,
/// or already unregistered). When several threads unregister one handle at
/// once, exactly one of them gets the Array.
Array* unregister_array(const void* handle) noexcept;

/// The live Array behind `handle`, or nullptr.
Array* find_array(const void* handle) noexcept;

/// Number of registered arrays (for the leak checks of the tests).
size_t live_array_count() noexcept;

}  // namespace mtsarray::detail
